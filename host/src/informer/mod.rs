//! Informers: `kube` watchers over dynamic objects feeding reflector stores, shared between
//! controllers through the [`Registry`], and the guest's view of those caches.

use std::time::Duration;

use std::sync::Arc;

use futures::stream::BoxStream;
use futures::{Stream, StreamExt, TryStreamExt};
use kube::Client;
use kube::api::{Api, ApiResource, GroupVersionKind, PartialObjectMeta, TypeMeta};
use kube::runtime::{WatchStreamExt, watcher};

use crate::runtime::bindings::wasmop::plugin::types::KindRef;
use crate::wire::{Object, Wire};

#[cfg(test)]
pub(crate) mod api_double;
mod bounded;
mod cache;
mod clusters;
mod deadlines;
mod listing;
mod paging;
mod pools;
mod registry;
mod remote;
mod sharded;
mod snapshots;
mod tally;
mod view;
mod weight;
mod whole;

pub use crate::trim::{LAST_APPLIED, trim};
pub use bounded::{Bounded, Budget, Pool, PoolMetrics, Tag};
pub use cache::Cache;
pub use clusters::{ClusterError, ClusterSpec, Clusters, ImpersonationError, UnknownCluster};
pub use listing::Listing;
pub(crate) use paging::paged;
pub use pools::{PoolMetricsOf, Pools};
pub use registry::{Registry, SharedEvent, Subscription, WatchKey};
pub use sharded::{ShardCounters, ShardedWatch, hash_of};
pub use view::{CachedKind, PrimaryView, WatchedCache};
pub use weight::weight;
pub use whole::Whole;

/// Errors of setting up a watch.
#[derive(Debug, thiserror::Error)]
pub enum InformerError {
    /// The API server does not serve the kind (for example, its CRD is not installed).
    #[error("the API server does not serve {group}/{version} {kind}: {source}")]
    DiscoveryFailed {
        /// API group.
        group: String,
        /// API version.
        version: String,
        /// Kind.
        kind: String,
        /// The discovery error.
        #[source]
        source: kube::Error,
    },
}

impl InformerError {
    /// Whether the API server could not be asked (not an answer that it does not serve the kind).
    pub fn unreachable(&self) -> bool {
        match self {
            InformerError::DiscoveryFailed { source, .. } => crate::reachability::unreachable(source),
        }
    }
}

/// Resolves a kind to an [`ApiResource`] by discovery (one request for its group version), so a
/// kind the API server does not serve is found before anything watches it, plural or not. A
/// plural the plugin gave that the API server does not use is replaced by the served one, with a
/// warning.
pub async fn resolve(client: &Client, kind: &KindRef) -> Result<ApiResource, InformerError> {
    let gvk = GroupVersionKind::gvk(&kind.group, &kind.version, &kind.kind);
    let (resource, _) =
        kube::discovery::pinned_kind(client, &gvk).await.map_err(|source| InformerError::DiscoveryFailed {
            group: kind.group.clone(),
            version: kind.version.clone(),
            kind: kind.kind.clone(),
            source,
        })?;
    if let Some(plural) = kind.plural.as_ref().filter(|p| **p != resource.plural) {
        tracing::warn!(
            kind = kind.kind,
            declared = plural,
            served = resource.plural,
            "the declared plural is not the one the API server serves; using the served one"
        );
    }
    Ok(resource)
}

/// Why `kind` is not served, in words, naming the served kind closest to it (found by
/// discovering every kind the cluster serves).
pub async fn not_served(client: &Client, kind: &KindRef) -> String {
    use wasmop_core::served;
    let group_version =
        if kind.group.is_empty() { kind.version.clone() } else { format!("{}/{}", kind.group, kind.version) };
    let served = match kube::discovery::Discovery::new(client.clone()).run_aggregated().await {
        Ok(discovery) => discovery
            .groups()
            .flat_map(|group| group.versions().flat_map(|v| group.versioned_resources(v)).collect::<Vec<_>>())
            .map(|(resource, _)| served::Served { group_version: resource.api_version, kind: resource.kind })
            .collect(),
        Err(err) => {
            tracing::warn!(%err, "cannot discover the served kinds to suggest one");
            Vec::new()
        }
    };
    let closest = served::closest(&kind.kind, &group_version, &served);
    served::not_served(&kind.kind, &group_version, closest)
}

/// Server-side selectors of a watch.
#[derive(Debug, Clone, Copy, Default)]
pub struct Selectors<'a> {
    /// Label selector, Kubernetes syntax.
    pub labels: Option<&'a str>,
    /// Field selector, Kubernetes syntax.
    pub fields: Option<&'a str>,
}

/// The API and watcher configuration of a watch of `resource` in `namespace` with `selectors`;
/// its lists' pages sized by their bytes ([`paging`]).
fn scope(
    client: Client,
    resource: &ApiResource,
    namespace: Option<&str>,
    selectors: Selectors<'_>,
) -> (Api<Wire>, watcher::Config) {
    let client = paging::paged(client);
    let api: Api<Wire> = match namespace {
        Some(ns) => Api::namespaced_with(client, ns, resource),
        None => Api::all_with(client, resource),
    };
    let mut config = watcher::Config::default();
    if let Some(labels) = selectors.labels {
        config = config.labels(labels);
    }
    if let Some(fields) = selectors.fields {
        config = config.fields(fields);
    }
    (api, config)
}

/// How a watch keeps its objects: whole or projected (always [`trim`]med), and all of them or
/// only the warm ones, in a bounded cache's pool.
#[derive(Clone, Default)]
pub struct Shape {
    /// The paths kept besides the metadata (see [`wasmop_core::projection`]); `None` keeps
    /// whole objects, an empty list the metadata alone.
    pub projection: Option<Arc<[String]>>,
    /// The pool of a bounded cache; `None` keeps every object.
    pub pool: Option<Pool>,
    /// Only the objects this replica owns; `None` keeps all.
    pub shard: Option<ShardedWatch>,
}

impl Shape {
    /// Cuts `object` to this shape, as it enters the cache.
    pub fn fit(&self, object: &mut Object) {
        trim(object);
        if let Some(paths) = &self.projection {
            object.data.project(paths);
        }
    }

    /// Whether the API server's metadata-only watch serves it.
    fn metadata_only(&self) -> bool {
        self.projection.as_deref().is_some_and(<[String]>::is_empty)
    }
}

/// A watch's events, objects decoded and cut to its [`Shape`].
type Decoded = BoxStream<'static, Result<watcher::Event<Wire>, watcher::Error>>;

/// A watch's events, their objects shared by its store and subscribers.
pub type SharedEvents = BoxStream<'static, Result<SharedEvent, watcher::Error>>;

/// `event` with its object turned by `into`.
fn map_event<A, B>(event: watcher::Event<A>, into: impl Fn(A) -> B) -> watcher::Event<B> {
    match event {
        watcher::Event::Apply(o) => watcher::Event::Apply(into(o)),
        watcher::Event::Delete(o) => watcher::Event::Delete(into(o)),
        watcher::Event::Init => watcher::Event::Init,
        watcher::Event::InitApply(o) => watcher::Event::InitApply(into(o)),
        watcher::Event::InitDone => watcher::Event::InitDone,
    }
}

/// The events of a watch of `resource` with `api` and `config`, cut to `shape`: from the
/// metadata-only watch when the shape keeps nothing else. Objects are decoded in one pass
/// ([`Wire`]).
fn events(resource: &ApiResource, api: Api<Wire>, config: watcher::Config, shape: &Shape) -> Decoded {
    if shape.shard.is_some() {
        return sharded::events(resource, api, config, shape);
    }
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

/// `events` with their objects shared.
fn shared(events: impl Stream<Item = Result<watcher::Event<Wire>, watcher::Error>> + Send + 'static) -> SharedEvents {
    events.map_ok(|e| map_event(e, |o| o.shared())).boxed()
}

/// A watch of one kind, optionally in one namespace and filtered by selectors, whose objects are
/// cut to `shape` before they enter the store ([`Whole`], every object), as the stream yields
/// them. The store and the events share each object.
pub fn watch(
    client: Client,
    resource: &ApiResource,
    namespace: Option<&str>,
    selectors: Selectors<'_>,
    shape: &Shape,
) -> (Arc<Whole>, SharedEvents) {
    let (api, config) = scope(client, resource, namespace, selectors);
    let store = Arc::new(Whole::default());
    let applied = store.clone();
    let stream = shared(events(resource, api, config, shape)).inspect_ok(move |event| applied.apply(event)).boxed();
    (store, stream)
}

/// [`watch`], bounded: the returned store is empty and must be given every event of the
/// stream ([`Bounded::apply`]); it keeps warm objects in `pool`.
pub fn watch_bounded(
    client: Client,
    resource: &ApiResource,
    namespace: Option<&str>,
    selectors: Selectors<'_>,
    shape: &Shape,
    pool: &Pool,
) -> (Bounded, SharedEvents) {
    let (api, config) = scope(client.clone(), resource, namespace, selectors);
    let list = kube::api::ListParams {
        label_selector: config.label_selector.clone(),
        field_selector: config.field_selector.clone(),
        ..Default::default()
    };
    let namespace = namespace.map(String::from);
    let store = Bounded::new(pool.clone(), client, resource.clone(), namespace, list, shape.clone());
    (store, shared(events(resource, api, config, shape)))
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
