//! A watch's events as they are decoded: each object decoded in one pass ([`Wire`]) and cut to
//! the watch's [`Shape`] before anything keeps it; a failed watch retried within a second.

use std::time::Duration;

use futures::stream::BoxStream;
use futures::{StreamExt, TryStreamExt};
use kube::api::{Api, ApiResource, PartialObjectMeta, TypeMeta};
use kube::runtime::{WatchStreamExt, watcher};

use super::shape::Shape;
use crate::wire::{Object, Wire};

/// A watch's events, objects decoded and cut to its [`Shape`].
pub(super) type Decoded = BoxStream<'static, Result<watcher::Event<Wire>, watcher::Error>>;

/// `event` with its object turned by `into`.
pub(super) fn map_event<A, B>(event: watcher::Event<A>, into: impl Fn(A) -> B) -> watcher::Event<B> {
    match event {
        watcher::Event::Apply(o) => watcher::Event::Apply(into(o)),
        watcher::Event::Delete(o) => watcher::Event::Delete(into(o)),
        watcher::Event::Init => watcher::Event::Init,
        watcher::Event::InitApply(o) => watcher::Event::InitApply(into(o)),
        watcher::Event::InitDone => watcher::Event::InitDone,
    }
}

/// The events of an unsharded watch of `resource` with `api` and `config`, cut to `shape`: from
/// the metadata-only watch when the shape keeps nothing else. Objects are decoded in one pass
/// ([`Wire`]).
pub(super) fn events(resource: &ApiResource, api: Api<Wire>, config: watcher::Config, shape: &Shape) -> Decoded {
    let fit = shape.clone();
    if shape.metadata_only() {
        // The same scope, asking for metadata only.
        let client = api.clone().into_client();
        let api: Api<PartialObjectMeta<Object>> = match api.namespace() {
            Some(ns) => Api::namespaced_with(client, ns, resource),
            None => Api::all_with(client, resource),
        };
        let types = TypeMeta { api_version: resource.api_version.clone(), kind: resource.kind.clone() };
        let into_object = move |meta: PartialObjectMeta<Object>| {
            Wire::from(Object { types: Some(types.clone()), metadata: meta.metadata, data: Default::default() })
        };
        let stream = watcher(api, config).backoff(watch_backoff()).map_ok(move |e| map_event(e, &into_object));
        return stream.modify(move |o| fit.fit(o.object_mut())).boxed();
    }
    watcher(api, config).backoff(watch_backoff()).modify(move |o| fit.fit(o.object_mut())).boxed()
}

/// How a failed watch is retried: after 100 ms, doubling up to 1 s, each plus a random 0-100%,
/// without limit, and from 100 ms again after any successful event. kube's default (client-go's
/// reflector) grows to 30 s, so a watch could stay down that long after its API server returned.
pub fn watch_backoff() -> watcher::ExponentialBackoff {
    backon::ExponentialBuilder::default()
        .with_min_delay(Duration::from_millis(100))
        .with_max_delay(Duration::from_secs(1))
        .with_factor(2.0)
        .with_jitter()
        .without_max_times()
        .into()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_failing_watch_is_retried_within_two_seconds_and_starts_over_after_a_success() {
        use kube::runtime::utils::Backoff as _;
        let mut backoff = watch_backoff();
        let delays: Vec<Duration> = (0..20).map(|_| backoff.next().expect("never gives up")).collect();
        assert!(delays.iter().all(|d| *d <= Duration::from_secs(2)), "{delays:?}");
        backoff.reset();
        assert!(backoff.next().expect("never gives up") <= Duration::from_millis(200));
    }
}
