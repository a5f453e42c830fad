//! Sharded watches: a watch that holds only the objects this replica owns (the ranges its
//! shard membership gives it, `crate::shards`).
//!
//! - Its lists and watches carry the replica's `shardSelector` when the API server honours it
//!   (KEP-5866, feature gate `ShardedListAndWatch`): checked from the list response's
//!   `shardInfo` before each watch starts, never assumed. Otherwise every object comes and the
//!   watch drops the ones it does not own as they are decoded, before they enter a cache.
//! - Either way the owned ranges are checked again as objects are decoded, so the cache holds
//!   only owned objects whatever the API server did.
//! - When the owned ranges change the watch starts over with the new selector: its list
//!   replaces the cache's content (objects lost leave it, objects gained enter it).
//! - The bytes of its responses and the objects it decoded (kept or dropped) are counted.

use std::sync::Arc;
use std::task::{Context, Poll};

use futures::future::BoxFuture;
use futures::{StreamExt, TryStreamExt};
use http::{Request, Response};
use kube::Client;
use kube::api::{Api, ApiResource, ListParams};
use kube::client::Body;
use kube::runtime::watcher;
use wasmop_core::shard::{Ranges, ShardKey};

use super::decoded::{self, Decoded};
use super::shape::{Shape, ShardCounters, ShardedWatch};
use super::tally::{Tallied, Tally};
use crate::wire::Wire;

/// The hash of `object`'s shard key, as the API server computes it; `None` for an object
/// without a UID. A cluster-scoped object's namespace is the empty string, as for the API
/// server.
pub fn hash_of(key: ShardKey, object: &crate::wire::Object) -> Option<u64> {
    match key {
        ShardKey::Uid => object.metadata.uid.as_deref().map(wasmop_core::shard::hash),
        ShardKey::Namespace => Some(wasmop_core::shard::hash(object.metadata.namespace.as_deref().unwrap_or(""))),
    }
}

/// The events of a sharded watch: [`decoded::events`] of the owned objects, started over with
/// every change of the owned ranges.
pub(super) fn events(resource: &ApiResource, api: Api<Wire>, config: watcher::Config, shape: &Shape) -> Decoded {
    let sharded = shape.shard.clone().expect("a sharded watch has its shards");
    let owned = sharded.owned.clone();
    // What opening a watch takes, held once for the stream's life, not cloned per event.
    let opener = Arc::new((resource.clone(), api, config, Shape { shard: None, ..shape.clone() }, sharded));
    let state = (opener, None::<(Ranges, Decoded)>, owned);
    futures::stream::unfold(state, |(opener, mut current, mut share)| async move {
        // The ranges are read (and copied) only when they changed, not for every event.
        let mut check = current.is_none() || share.has_changed().unwrap_or(false);
        loop {
            if std::mem::take(&mut check) {
                let owned = share.borrow_and_update().clone();
                if current.as_ref().is_none_or(|(ranges, _)| *ranges != owned) {
                    let (resource, api, config, unsharded, sharded) = &*opener;
                    let events = open(resource, api, config, unsharded, sharded, &owned).await;
                    current = Some((owned, events));
                }
            }
            let (_, events) = current.as_mut().expect("opened above");
            tokio::select! {
                biased;
                changed = share.changed() => match changed {
                    Ok(()) => check = true,
                    Err(_) => return None,
                },
                event = events.next() => return event.map(|event| (event, (opener, current, share))),
            }
        }
    })
    .boxed()
}

/// The watch of the objects in `owned`: with the API server's selector when it honours it,
/// always filtered here too.
async fn open(
    resource: &ApiResource,
    api: &Api<Wire>,
    config: &watcher::Config,
    shape: &Shape,
    sharded: &ShardedWatch,
    owned: &Ranges,
) -> Decoded {
    let kind = resource.kind.clone();
    let Some(selector) = owned.selector(sharded.key) else {
        // Nothing owned: an empty list, and nothing after it until the ranges change.
        let empty = futures::stream::iter([Ok(watcher::Event::Init), Ok(watcher::Event::InitDone)]);
        return empty.chain(futures::stream::pending()).boxed();
    };
    let client = api.clone().into_client();
    let counting = |selector: Option<String>| {
        let service = SelectorService {
            client: client.clone(),
            selector: selector.map(Into::into),
            counters: sharded.counters.clone(),
            kind: kind.clone().into(),
        };
        Client::new(service, client.default_namespace().to_string())
    };
    let selecting = counting(Some(selector));
    let scoped = |client: Client| -> Api<Wire> {
        match api.namespace() {
            Some(ns) => Api::namespaced_with(client, ns, resource),
            None => Api::all_with(client, resource),
        }
    };
    let probe = ListParams {
        label_selector: config.label_selector.clone(),
        field_selector: config.field_selector.clone(),
        ..ListParams::default()
    }
    .limit(1);
    let honoured = sharded.server_side
        // A full list, not a metadata-only one: v1.36 leaves `shardInfo` out of those.
        && match scoped(selecting.clone()).list(&probe).await {
            Ok(list) => list.metadata.shard_info.is_some(),
            Err(err) => {
                tracing::warn!(kind, %err, "cannot ask whether the API server shards lists; filtering here");
                false
            }
        };
    if sharded.server_side && !honoured {
        tracing::info!(
            kind,
            "the API server does not shard lists (feature gate ShardedListAndWatch off?): filtering here"
        );
    }
    sharded.counters.server_side(&kind, honoured);
    let api = if honoured { scoped(selecting) } else { scoped(counting(None)) };
    let (key, owned, counters) = (sharded.key, owned.clone(), sharded.counters.clone());
    let keep = move |object: &Wire| {
        let kept = hash_of(key, object).is_some_and(|hash| owned.contains(hash));
        counters.decoded(&kind, kept);
        kept
    };
    decoded::events(resource, api, config.clone(), shape)
        .try_filter(move |event| {
            let kept = match event {
                watcher::Event::Apply(o) | watcher::Event::InitApply(o) | watcher::Event::Delete(o) => keep(o),
                watcher::Event::Init | watcher::Event::InitDone => true,
            };
            std::future::ready(kept)
        })
        .boxed()
}

/// The API server's client, adding a `shardSelector` to every request (if any) and counting the
/// bytes of the answers.
#[derive(Clone)]
struct SelectorService {
    client: Client,
    selector: Option<Arc<str>>,
    counters: Arc<dyn ShardCounters>,
    kind: Arc<str>,
}

impl tower::Service<Request<Body>> for SelectorService {
    type Response = Response<Tallied<Counted>>;
    type Error = kube::Error;
    type Future = BoxFuture<'static, Result<Self::Response, Self::Error>>;

    fn poll_ready(&mut self, _: &mut Context<'_>) -> Poll<Result<(), Self::Error>> {
        Poll::Ready(Ok(()))
    }

    fn call(&mut self, mut request: Request<Body>) -> Self::Future {
        if let Some(selector) = &self.selector {
            let uri = request.uri().to_string();
            let separator = if uri.contains('?') { '&' } else { '?' };
            match format!("{uri}{separator}shardSelector={}", form_urlencoded(selector)).parse() {
                Ok(uri) => *request.uri_mut() = uri,
                Err(err) => tracing::error!(%err, "cannot add the shard selector to a request"),
            }
        }
        let (client, counters, kind) = (self.client.clone(), self.counters.clone(), self.kind.clone());
        Box::pin(async move {
            let response = client.send(request).await?;
            Ok(response.map(|body| Tallied::new(body, Counted { counters, kind })))
        })
    }
}

/// `value` encoded for a query string.
fn form_urlencoded(value: &str) -> String {
    let mut encoded = String::with_capacity(value.len() * 3 / 2);
    for byte in value.bytes() {
        match byte {
            b'A'..=b'Z' | b'a'..=b'z' | b'0'..=b'9' | b'-' | b'_' | b'.' | b'~' => encoded.push(char::from(byte)),
            _ => encoded.push_str(&format!("%{byte:02X}")),
        }
    }
    encoded
}

/// What a sharded watch's response tells its counters: its bytes, as they arrive.
struct Counted {
    counters: Arc<dyn ShardCounters>,
    kind: Arc<str>,
}

impl Tally for Counted {
    fn data(&mut self, bytes: u64) {
        self.counters.bytes(&self.kind, bytes);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn selectors_are_encoded_for_the_query() {
        assert_eq!(
            form_urlencoded("shardRange(object.metadata.uid, '0x0', '0x8') || x"),
            "shardRange%28object.metadata.uid%2C%20%270x0%27%2C%20%270x8%27%29%20%7C%7C%20x"
        );
    }
}
