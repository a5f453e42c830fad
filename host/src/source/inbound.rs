//! The inbound event source (JOSDK's SimpleInboundEventSource and CachingInboundEventSource,
//! controller-runtime's `source.Channel`): what the host's events endpoint (`crate::inbound`)
//! hands a running plugin. The plugin's `map-inbound` names the primaries a payload concerns; the
//! [`Inlet`] keeps the payload for each of them when the plugin caches inbound events
//! ([`Payloads`]) and enqueues them in the controller's scheduler.
//!
//! One inlet per controller: the host creates it with the controller, the controller attaches
//! its scheduler once it has one and detaches it when it stops, so a request finds either a
//! plugin that reconciles what it maps, or none.

use std::sync::{Arc, RwLock};

use moka::policy::EvictionPolicy;

use wasmop_core::shard::ShardKey;

use super::Sink;
use crate::mapping::PrimaryKind;
use crate::object::ObjectKey;
use crate::runtime::CacheReader;
use crate::runtime::bindings::wasmop::plugin::types::{ObjectRef, PluginConfig};
use crate::scheduler::Priority;

/// How many bytes of payloads one plugin keeps at most, in all: beyond it, the payloads of the
/// primaries least recently given one are dropped first.
pub const PAYLOADS_BUDGET: u64 = 32 * 1024 * 1024;

/// The last inbound payload per primary of one plugin, bounded by bytes
/// ([`PAYLOADS_BUDGET`]); a primary's payload goes when the primary is deleted, and all of them
/// when the plugin stops.
pub struct Payloads {
    kept: moka::sync::Cache<ObjectKey, Arc<str>>,
}

impl Payloads {
    /// Keeps at most `budget` bytes of payloads (a payload counts once per primary it is kept for).
    pub fn new(budget: u64) -> Self {
        let kept = moka::sync::Cache::builder()
            .max_capacity(budget)
            .weigher(|key: &ObjectKey, payload: &Arc<str>| {
                let bytes = payload.len() + key.name.len() + key.namespace.as_ref().map_or(0, String::len);
                u32::try_from(bytes).unwrap_or(u32::MAX)
            })
            .eviction_policy(EvictionPolicy::lru())
            .build();
        Self { kept }
    }

    /// Keeps `payload` as the last one of `key`, replacing the one before.
    pub fn keep(&self, key: ObjectKey, payload: Arc<str>) {
        self.kept.insert(key, payload);
    }

    /// The last payload kept for `key`.
    pub fn get(&self, key: &ObjectKey) -> Option<Arc<str>> {
        self.kept.get(key)
    }

    /// Drops the payload of `key` (the primary is gone).
    pub fn forget(&self, key: &ObjectKey) {
        self.kept.invalidate(key);
    }
}

impl std::fmt::Debug for Payloads {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Payloads").field("primaries", &self.kept.entry_count()).finish()
    }
}

/// A running controller's side of the inlet.
struct Attached {
    /// The scheduler; weak, so that the inlet never keeps a stopped controller's scheduler alive.
    sink: Arc<dyn Sink>,
    /// What `map-inbound` may read: the plugin's caches.
    reader: Arc<dyn CacheReader>,
    primary: PrimaryKind,
}

struct Shared {
    attached: RwLock<Option<Attached>>,
    payloads: Option<Arc<Payloads>>,
    /// Where a sharded plugin's primaries are owned; `None` for a plugin run whole.
    placement: RwLock<Option<Placement>>,
}

/// Where a sharded plugin's primaries live: the hash of each one's shard key, computed as its
/// controller's admission does (its namespace's, or its UID's), and whether this replica owns
/// it now.
#[derive(Clone)]
pub struct Placement {
    /// The plugin's shard key.
    pub key: ShardKey,
    /// The replica's shards.
    pub shards: crate::shards::Shards,
    /// The membership's fence: closed, this replica owns nothing.
    pub fence: crate::fence::Fence,
    /// The primaries this replica's watch shows (its own).
    pub primaries: crate::informer::Cache,
    /// Reads the metadata of a primary the watch does not show (another replica's), for its UID.
    pub client: kube::Client,
    /// The primary's resource.
    pub resource: kube::api::ApiResource,
}

impl std::fmt::Debug for Placement {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Placement").field("key", &self.key).finish_non_exhaustive()
    }
}

impl Placement {
    /// The hash of `key`'s shard key as this replica's watch shows the primary: `None` for a
    /// primary it does not show (by UID).
    pub fn cached(&self, key: &ObjectKey) -> Option<u64> {
        match self.key {
            ShardKey::Namespace => Some(wasmop_core::shard::hash(key.namespace.as_deref().unwrap_or(""))),
            ShardKey::Uid => self.primaries.uid(key).as_deref().map(wasmop_core::shard::hash),
        }
    }

    /// The hash of `key`'s shard key, its UID read from the API server when this replica's
    /// watch does not show it; `None` when the primary does not exist.
    pub async fn hash(&self, key: &ObjectKey) -> Result<Option<u64>, kube::Error> {
        if let Some(hash) = self.cached(key) {
            return Ok(Some(hash));
        }
        let api: kube::Api<kube::api::DynamicObject> = match &key.namespace {
            Some(ns) => kube::Api::namespaced_with(self.client.clone(), ns, &self.resource),
            None => kube::Api::all_with(self.client.clone(), &self.resource),
        };
        let meta = api.get_metadata_opt(&key.name).await?;
        Ok(meta.and_then(|m| m.metadata.uid).as_deref().map(wasmop_core::shard::hash))
    }

    /// Whether this replica owns `key` now: a live member whose share holds the primary.
    pub fn owns(&self, key: &ObjectKey) -> bool {
        self.fence.gate().is_none_or(|gate| gate.is_open())
            && self.cached(key).is_some_and(|hash| self.shards.verdict(hash) != crate::shards::Verdict::NotOurs)
    }
}

/// Where the events endpoint hands one plugin's inbound events; cheap to clone.
#[derive(Clone)]
pub struct Inlet(Arc<Shared>);

impl std::fmt::Debug for Inlet {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let attached = self.0.attached.read().expect("never poisoned").is_some();
        f.debug_struct("Inlet").field("attached", &attached).field("payloads", &self.0.payloads).finish()
    }
}

/// Why an inlet cannot take an event now.
#[derive(Debug, Clone, Copy, PartialEq, Eq, thiserror::Error)]
#[error("the plugin's controller is not running (starting, waiting for its kinds, or stopped)")]
pub struct NotRunning;

/// What [`Inlet::deliver`] did.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Delivered {
    /// The primaries enqueued, each once.
    pub enqueued: Vec<ObjectKey>,
    /// The names of namespaced primaries the plugin gave without a namespace: skipped.
    pub skipped: Vec<String>,
}

impl Inlet {
    /// The inlet of a controller of a plugin configured with `config`: it keeps payloads when
    /// the plugin asks for inbound caching.
    pub fn new(config: &PluginConfig) -> Self {
        let caching = config.inbound.as_ref().is_some_and(|inbound| inbound.caching);
        Self::with(caching)
    }

    fn with(caching: bool) -> Self {
        let payloads = caching.then(|| Arc::new(Payloads::new(PAYLOADS_BUDGET)));
        Self(Arc::new(Shared { attached: RwLock::new(None), payloads, placement: RwLock::new(None) }))
    }

    /// Says where the sharded plugin's primaries are owned (with its controller's attach).
    pub fn place(&self, placement: Placement) {
        *self.0.placement.write().expect("never poisoned") = Some(placement);
    }

    /// Where the plugin's primaries are owned: `None` for a plugin run whole (by the leader).
    pub fn placement(&self) -> Option<Placement> {
        self.0.placement.read().expect("never poisoned").clone()
    }

    /// Connects the controller: events go to `sink` (weak: see [`crate::scheduler::WeakHandle`]),
    /// and `map-inbound` reads `reader`.
    pub fn attach(&self, sink: Arc<dyn Sink>, reader: Arc<dyn CacheReader>, primary: PrimaryKind) {
        *self.0.attached.write().expect("never poisoned") = Some(Attached { sink, reader, primary });
    }

    /// Disconnects the controller (it stops): later events are refused.
    pub fn detach(&self) {
        *self.0.attached.write().expect("never poisoned") = None;
        *self.0.placement.write().expect("never poisoned") = None;
    }

    /// What `map-inbound` reads; [`NotRunning`] before the controller attached or after it
    /// detached.
    pub fn reader(&self) -> Result<Arc<dyn CacheReader>, NotRunning> {
        let attached = self.0.attached.read().expect("never poisoned");
        attached.as_ref().map(|a| a.reader.clone()).ok_or(NotRunning)
    }

    /// The payloads kept for `reconcile`, when the plugin caches inbound events.
    pub fn payloads(&self) -> Option<Arc<Payloads>> {
        self.0.payloads.clone()
    }

    /// Drops what the inlet keeps for the primary `key` (it was deleted).
    pub fn forget(&self, key: &ObjectKey) {
        if let Some(payloads) = &self.0.payloads {
            payloads.forget(key);
        }
    }

    /// Enqueues the primaries `map-inbound` named for `payload`, each once, at live priority,
    /// after keeping the payload for each when the plugin caches inbound events. A namespaced
    /// primary named without a namespace is skipped; a cluster-scoped primary's namespace is
    /// ignored.
    pub fn deliver(&self, primaries: Vec<ObjectRef>, payload: &Arc<str>) -> Result<Delivered, NotRunning> {
        let Delivered { enqueued, skipped } = self.keys(primaries)?;
        let enqueued = self.deliver_keys(enqueued, payload)?;
        Ok(Delivered { enqueued, skipped })
    }

    /// The keys of the primaries `map-inbound` named, each once (in [`Delivered::enqueued`], none
    /// enqueued yet): a namespaced primary named without a namespace is skipped, a
    /// cluster-scoped primary's namespace ignored.
    pub fn keys(&self, primaries: Vec<ObjectRef>) -> Result<Delivered, NotRunning> {
        let attached = self.0.attached.read().expect("never poisoned");
        let attached = attached.as_ref().ok_or(NotRunning)?;
        let mut keys = Delivered::default();
        for primary in primaries {
            if attached.primary.namespaced && primary.namespace.is_none() {
                keys.skipped.push(primary.name);
                continue;
            }
            let key = attached.primary.key(primary.namespace.as_deref(), &primary.name);
            if !keys.enqueued.contains(&key) {
                keys.enqueued.push(key);
            }
        }
        Ok(keys)
    }

    /// Enqueues the primaries `keys` (from [`Inlet::keys`]) at live priority, after keeping the
    /// payload for each when the plugin caches inbound events; the keys enqueued.
    pub fn deliver_keys(&self, keys: Vec<ObjectKey>, payload: &Arc<str>) -> Result<Vec<ObjectKey>, NotRunning> {
        let attached = self.0.attached.read().expect("never poisoned");
        let attached = attached.as_ref().ok_or(NotRunning)?;
        if let Some(payloads) = &self.0.payloads {
            for key in &keys {
                payloads.keep(key.clone(), payload.clone());
            }
        }
        for key in &keys {
            attached.sink.enqueue(key.clone(), Priority::Live);
        }
        Ok(keys)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::source::testing::Recorder;

    fn key(namespace: Option<&str>, name: &str) -> ObjectKey {
        ObjectKey { namespace: namespace.map(String::from), name: name.into() }
    }

    fn primary(namespace: Option<&str>, name: &str) -> ObjectRef {
        ObjectRef { namespace: namespace.map(String::from), name: name.into() }
    }

    fn config_maps() -> PrimaryKind {
        PrimaryKind { group: String::new(), kind: "ConfigMap".into(), namespaced: true }
    }

    fn inlet(caching: bool) -> Inlet {
        Inlet::with(caching)
    }

    struct NoReader;

    impl CacheReader for NoReader {
        fn get<'a>(
            &'a self,
            _: &'a crate::runtime::bindings::wasmop::plugin::types::KindRef,
            _: Option<&'a str>,
            _: &'a str,
        ) -> futures::future::BoxFuture<'a, crate::runtime::GetResult> {
            Box::pin(async { Ok(None) })
        }
        fn list<'a>(
            &'a self,
            _: &'a crate::runtime::bindings::wasmop::plugin::types::KindRef,
            _: Option<&'a str>,
            _: Option<&'a str>,
        ) -> futures::future::BoxFuture<'a, crate::runtime::ListResult> {
            Box::pin(async { Ok(Vec::new()) })
        }
        fn secondaries<'a>(
            &'a self,
            _: &'a crate::runtime::bindings::wasmop::plugin::types::KindRef,
        ) -> futures::future::BoxFuture<'a, crate::runtime::ListResult> {
            Box::pin(async { Ok(Vec::new()) })
        }
    }

    #[test]
    fn an_inlet_takes_events_only_while_its_controller_is_attached() {
        let inlet = inlet(false);
        let payload: Arc<str> = Arc::from("{}");
        assert_eq!(inlet.deliver(vec![primary(Some("ns"), "a")], &payload), Err(NotRunning));
        assert!(inlet.reader().is_err());
        let sink = Arc::new(Recorder::default());
        inlet.attach(sink.clone(), Arc::new(NoReader), config_maps());
        assert!(inlet.reader().is_ok());
        let delivered = inlet.deliver(vec![primary(Some("ns"), "a")], &payload).unwrap();
        assert_eq!(delivered.enqueued, [key(Some("ns"), "a")]);
        assert_eq!(sink.take(), [(key(Some("ns"), "a"), Priority::Live)]);
        inlet.detach();
        assert_eq!(inlet.deliver(vec![primary(Some("ns"), "a")], &payload), Err(NotRunning));
        assert!(sink.take().is_empty(), "nothing reaches a detached controller");
    }

    #[test]
    fn primaries_are_enqueued_once_and_namespaced_ones_need_a_namespace() {
        let inlet = inlet(false);
        let sink = Arc::new(Recorder::default());
        inlet.attach(sink.clone(), Arc::new(NoReader), config_maps());
        let named =
            vec![primary(Some("ns"), "a"), primary(None, "b"), primary(Some("ns"), "a"), primary(Some("x"), "a")];
        let delivered = inlet.deliver(named, &Arc::from("{}")).unwrap();
        assert_eq!(delivered.enqueued, [key(Some("ns"), "a"), key(Some("x"), "a")]);
        assert_eq!(delivered.skipped, ["b"]);
        assert_eq!(sink.take().len(), 2);
        assert!(inlet.payloads().is_none(), "no payloads without caching");
    }

    #[test]
    fn a_cluster_scoped_primary_drops_the_namespace_it_was_given() {
        let inlet = inlet(false);
        let sink = Arc::new(Recorder::default());
        let nodes = PrimaryKind { group: String::new(), kind: "Node".into(), namespaced: false };
        inlet.attach(sink.clone(), Arc::new(NoReader), nodes);
        let delivered = inlet.deliver(vec![primary(Some("ns"), "n1"), primary(None, "n1")], &Arc::from("{}")).unwrap();
        assert_eq!(delivered.enqueued, [key(None, "n1")]);
    }

    #[test]
    fn caching_keeps_the_last_payload_per_primary_until_it_is_forgotten() {
        let inlet = inlet(true);
        let sink = Arc::new(Recorder::default());
        inlet.attach(sink.clone(), Arc::new(NoReader), config_maps());
        let payloads = inlet.payloads().expect("caching");
        inlet.deliver(vec![primary(Some("ns"), "a"), primary(Some("ns"), "b")], &Arc::from("1")).unwrap();
        inlet.deliver(vec![primary(Some("ns"), "a")], &Arc::from("2")).unwrap();
        assert_eq!(payloads.get(&key(Some("ns"), "a")).as_deref(), Some("2"), "the last one");
        assert_eq!(payloads.get(&key(Some("ns"), "b")).as_deref(), Some("1"));
        inlet.forget(&key(Some("ns"), "a"));
        assert_eq!(payloads.get(&key(Some("ns"), "a")), None);
        assert_eq!(payloads.get(&key(Some("ns"), "b")).as_deref(), Some("1"));
    }

    #[test]
    fn payloads_are_bounded_by_bytes_least_recently_kept_first() {
        let payloads = Payloads::new(3_000);
        let kilobyte: Arc<str> = Arc::from("x".repeat(1_000));
        for name in ["a", "b", "c", "d"] {
            payloads.keep(key(None, name), kilobyte.clone());
            payloads.kept.run_pending_tasks();
        }
        assert_eq!(payloads.get(&key(None, "a")), None, "the oldest goes past the budget");
        assert!(payloads.get(&key(None, "d")).is_some());
        assert!(payloads.kept.weighted_size() <= 3_000);
    }
}
