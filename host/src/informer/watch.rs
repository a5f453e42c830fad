//! A watch of one kind: in a namespace or all, filtered by selectors, its objects cut to a
//! [`Shape`] and kept in a store, whole ([`Whole`]) or bounded ([`Bounded`]).

use std::sync::Arc;

use futures::stream::BoxStream;
use futures::{Stream, StreamExt, TryStreamExt};
use kube::Client;
use kube::api::{Api, ApiResource};
use kube::runtime::watcher;

use super::bounded::Bounded;
use super::decoded::{self, Decoded, map_event};
use super::paging;
use super::pool::Pool;
use super::shape::Shape;
use super::sharded;
use super::whole::Whole;
use crate::wire::{Object, Wire};

/// Watch events fanned out to subscribers; objects are shared, never copied per subscriber.
pub type SharedEvent = watcher::Event<Arc<Object>>;

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

/// A watch's events, their objects shared by its store and subscribers.
pub type SharedEvents = BoxStream<'static, Result<SharedEvent, watcher::Error>>;

/// The events of a watch of `resource` with `api` and `config`, cut to `shape`: a sharded
/// watch's when the shape has shards ([`sharded::events`]).
fn events(resource: &ApiResource, api: Api<Wire>, config: watcher::Config, shape: &Shape) -> Decoded {
    if shape.shard.is_some() {
        return sharded::events(resource, api, config, shape);
    }
    decoded::events(resource, api, config, shape)
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
