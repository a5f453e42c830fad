//! Bounded caches (JOSDK's bounded item stores): a watch that keeps every object's key and
//! version but the objects themselves only while they are warm, in a [`Pool`] of moka caches
//! with a byte budget. A cold object is evicted (least recently used first, or after an idle
//! time) and fetched from the API server again when a reconcile or a plugin reads it.
//!
//! A pool is the host's (`--cache-budget-mib`, shared by the plugins without a budget of their
//! own) or a plugin's (`cache.budgetMib`). A plugin's pool inside a host budget keeps the
//! objects in the host's cache and tracks its own share in a second moka cache of weights only:
//! whichever budget is exceeded evicts, from both.

use std::collections::HashMap;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use kube::Client;
use kube::ResourceExt;
use kube::api::{Api, ApiResource, DynamicObject, ListParams};
use kube::runtime::watcher::Event;
use moka::notification::RemovalCause;
use moka::policy::EvictionPolicy;
use prometheus_client::metrics::counter::Counter;
use prometheus_client::metrics::gauge::Gauge;

use super::weight::weight;
use crate::object::ObjectKey;
use crate::wire::Wire;

/// An object in a pool: the watch it belongs to and its key.
type Slot = (u64, ObjectKey);

/// A pool's share of the metrics.
#[derive(Clone, Default)]
pub struct PoolMetrics {
    /// Estimated bytes of the objects held.
    pub bytes: Gauge,
    /// Objects held.
    pub objects: Gauge,
    /// Objects evicted for the budget or the idle time.
    pub evictions: Counter,
    /// Reads that went to the API server because the object was evicted.
    pub refetches: Counter,
}

/// A byte budget and the objects it holds.
#[derive(Clone)]
pub struct Pool {
    name: String,
    objects: moka::sync::Cache<Slot, Arc<DynamicObject>>,
    /// A plugin's share inside the host's pool: weights only, evicting from `objects`.
    share: Option<moka::sync::Cache<Slot, u32>>,
    budget: u64,
    metrics: PoolMetrics,
}

/// What a pool is given.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Budget {
    /// Bytes, by [`weight`].
    pub bytes: u64,
    /// Evict objects not read for this long, whatever the budget.
    pub idle: Option<Duration>,
}

impl Pool {
    /// A pool named `name` (the metrics' `pool` label) of `budget`.
    pub fn new(name: &str, budget: Budget, metrics: PoolMetrics) -> Self {
        let evictions = metrics.evictions.clone();
        let mut builder = moka::sync::Cache::builder()
            .max_capacity(budget.bytes)
            .weigher(|_: &Slot, object: &Arc<DynamicObject>| weight(object))
            .eviction_policy(EvictionPolicy::lru())
            .eviction_listener(move |_, _, cause| {
                if matches!(cause, RemovalCause::Size | RemovalCause::Expired) {
                    evictions.inc();
                }
            });
        if let Some(idle) = budget.idle {
            builder = builder.time_to_idle(idle);
        }
        Self { name: name.into(), objects: builder.build(), share: None, budget: budget.bytes, metrics }
    }

    /// A plugin's share of `bytes` inside this (the host's) pool: objects stay in this pool's
    /// cache, and exceeding either budget evicts.
    pub fn share(&self, name: &str, bytes: u64, metrics: PoolMetrics) -> Self {
        let objects = self.objects.clone();
        let evictions = metrics.evictions.clone();
        let share = moka::sync::Cache::builder()
            .max_capacity(bytes)
            .weigher(|_: &Slot, weight: &u32| *weight)
            .eviction_policy(EvictionPolicy::lru())
            .eviction_listener(move |slot: Arc<Slot>, _, cause| {
                if matches!(cause, RemovalCause::Size) {
                    evictions.inc();
                    objects.invalidate(&*slot);
                }
            })
            .build();
        Self { name: name.into(), objects: self.objects.clone(), share: Some(share), budget: bytes, metrics }
    }

    /// The pool's name.
    pub fn name(&self) -> &str {
        &self.name
    }

    /// Its budget in bytes.
    pub fn budget(&self) -> u64 {
        self.budget
    }

    fn get(&self, slot: &Slot) -> Option<Arc<DynamicObject>> {
        let object = self.objects.get(slot);
        match (&self.share, &object) {
            (Some(share), Some(_)) => drop(share.get(slot)),
            // Evicted by the host's budget: the share forgets it too.
            (Some(share), None) => share.invalidate(slot),
            (None, _) => {}
        }
        object
    }

    /// Holds `object`, evicting what the budgets no longer hold before it returns, so the
    /// budget is exceeded by at most the object being inserted, and only during the call.
    fn insert(&self, slot: Slot, object: Arc<DynamicObject>) {
        let weight = weight(&object);
        self.objects.insert(slot.clone(), object);
        if let Some(share) = &self.share {
            share.insert(slot, weight);
        }
        self.settle();
    }

    /// Carries out the evictions and removals moka defers, and publishes what the pool holds.
    fn settle(&self) {
        if let Some(share) = &self.share {
            share.run_pending_tasks();
        }
        self.objects.run_pending_tasks();
        self.publish();
    }

    fn remove(&self, slot: &Slot) {
        self.objects.invalidate(slot);
        if let Some(share) = &self.share {
            share.invalidate(slot);
        }
    }

    /// Bytes the pool holds now, by its own account.
    pub fn bytes(&self) -> u64 {
        match &self.share {
            Some(share) => share.weighted_size(),
            None => self.objects.weighted_size(),
        }
    }

    fn publish(&self) {
        let (bytes, objects) = match &self.share {
            Some(share) => (share.weighted_size(), share.entry_count()),
            None => (self.objects.weighted_size(), self.objects.entry_count()),
        };
        self.metrics.bytes.set(i64::try_from(bytes).unwrap_or(i64::MAX));
        self.metrics.objects.set(i64::try_from(objects).unwrap_or(i64::MAX));
    }
}

/// What the index knows of an object without holding it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Tag {
    /// Its resource version.
    pub version: Option<String>,
    /// Its UID.
    pub uid: Option<String>,
}

impl Tag {
    /// The tag of `object`.
    pub fn of(object: &DynamicObject) -> Self {
        Self { version: object.resource_version(), uid: object.uid() }
    }
}

/// Every object's tag, and the list in progress.
#[derive(Default)]
struct Index {
    tags: HashMap<ObjectKey, Tag>,
    /// The tags of a list in progress; they replace `tags` when it ends.
    listing: Option<HashMap<ObjectKey, Tag>>,
}

/// Numbers watches apart within a pool.
static WATCHES: AtomicU64 = AtomicU64::new(0);

/// A bounded watch's store: every key with its tag, the warm objects in the pool, and the API
/// to fetch the cold ones from.
pub struct Bounded {
    id: u64,
    index: Mutex<Index>,
    pool: Pool,
    client: Client,
    resource: ApiResource,
    /// The watch's own scope, to list from.
    api: Api<Wire>,
    list: ListParams,
    /// What a fetched object is cut to, as the watch's are.
    shape: super::Shape,
}

impl Drop for Bounded {
    fn drop(&mut self) {
        let index = self.index.get_mut().expect("never poisoned");
        for key in index.tags.keys() {
            self.pool.remove(&(self.id, key.clone()));
        }
        self.pool.settle();
    }
}

impl Bounded {
    /// An empty store of the objects of `resource` that `api` lists with `list`, holding warm
    /// ones in `pool`.
    pub fn new(
        pool: Pool,
        client: Client,
        resource: ApiResource,
        api: Api<Wire>,
        list: ListParams,
        shape: super::Shape,
    ) -> Self {
        let id = WATCHES.fetch_add(1, Ordering::Relaxed);
        Self { id, index: Mutex::default(), pool, client, resource, api, list, shape }
    }

    fn index(&self) -> std::sync::MutexGuard<'_, Index> {
        self.index.lock().expect("never poisoned")
    }

    /// Applies a watch event: changed objects are warm; a list's end drops what it did not
    /// show. Until then, reads see the index as it was before the list (as kube's store does).
    pub fn apply(&self, event: &Event<Arc<DynamicObject>>) {
        match event {
            Event::Apply(object) => {
                let Some(key) = crate::object::key_of(object) else { return };
                self.index().tags.insert(key.clone(), Tag::of(object));
                self.pool.insert((self.id, key), object.clone());
            }
            Event::Delete(object) => {
                let Some(key) = crate::object::key_of(object) else { return };
                self.index().tags.remove(&key);
                self.pool.remove(&(self.id, key));
                self.pool.settle();
            }
            Event::Init => self.index().listing = Some(HashMap::new()),
            Event::InitApply(object) => {
                let Some(key) = crate::object::key_of(object) else { return };
                self.index().listing.get_or_insert_default().insert(key.clone(), Tag::of(object));
                self.pool.insert((self.id, key), object.clone());
            }
            Event::InitDone => {
                let mut index = self.index();
                let listed = index.listing.take().unwrap_or_default();
                let gone: Vec<ObjectKey> = index.tags.keys().filter(|k| !listed.contains_key(*k)).cloned().collect();
                index.tags = listed;
                drop(index);
                for key in gone {
                    self.pool.remove(&(self.id, key));
                }
                self.pool.settle();
            }
        }
    }

    /// The tag of `key`, if the watch shows it.
    pub fn tag(&self, key: &ObjectKey) -> Option<Tag> {
        self.index().tags.get(key).cloned()
    }

    /// Every key the watch shows.
    pub fn keys(&self) -> Vec<ObjectKey> {
        self.index().tags.keys().cloned().collect()
    }

    /// The object `key` if it is warm; `Some(None)` if the watch does not show it; `None` if
    /// it must be fetched.
    pub fn warm(&self, key: &ObjectKey) -> Option<Option<Arc<DynamicObject>>> {
        if !self.index().tags.contains_key(key) {
            return Some(None);
        }
        self.pool.get(&(self.id, key.clone())).map(Some)
    }

    /// The object `key`: from the pool, or fetched from the API server (and warm again) when
    /// it was evicted; `None` when the watch does not show it or it is gone.
    pub async fn get(&self, key: &ObjectKey) -> Result<Option<Arc<DynamicObject>>, kube::Error> {
        if let Some(found) = self.warm(key) {
            return Ok(found);
        }
        self.pool.metrics.refetches.inc();
        let api: Api<Wire> = match &key.namespace {
            Some(ns) => Api::namespaced_with(self.client.clone(), ns, &self.resource),
            None => Api::all_with(self.client.clone(), &self.resource),
        };
        let Some(mut object) = api.get_opt(&key.name).await? else { return Ok(None) };
        self.shape.fit(object.object_mut());
        let object = object.shared();
        if self.index().tags.contains_key(key) {
            self.pool.insert((self.id, key.clone()), object.clone());
        }
        Ok(Some(object))
    }

    /// Every object the watch shows: the warm ones from the pool; when any is cold, one list
    /// from the API server instead (not kept: a list would flush the pool).
    pub async fn state(&self) -> Result<Vec<Arc<DynamicObject>>, kube::Error> {
        let keys = self.keys();
        let warm: Vec<_> = keys.iter().map_while(|k| self.pool.get(&(self.id, k.clone()))).collect();
        if warm.len() == keys.len() {
            return Ok(warm);
        }
        self.pool.metrics.refetches.inc();
        let list = self.api.list(&self.list).await?;
        Ok(list
            .items
            .into_iter()
            .map(|mut o| {
                self.shape.fit(o.object_mut());
                o.shared()
            })
            .collect())
    }

    /// The pool the warm objects are in.
    pub fn pool(&self) -> &Pool {
        &self.pool
    }
}

#[cfg(test)]
mod tests {
    use kube::api::GroupVersionKind;

    use super::*;

    fn object(name: &str, version: &str, bytes: usize) -> Arc<DynamicObject> {
        let resource = ApiResource::from_gvk(&GroupVersionKind::gvk("", "v1", "ConfigMap"));
        let mut o = DynamicObject::new(name, &resource)
            .within("ns")
            .data(serde_json::json!({ "data": { "v": "x".repeat(bytes) } }));
        o.metadata.resource_version = Some(version.into());
        o.metadata.uid = Some(format!("uid-{name}"));
        Arc::new(o)
    }

    fn key(name: &str) -> ObjectKey {
        ObjectKey { namespace: Some("ns".into()), name: name.into() }
    }

    fn pool(bytes: u64) -> Pool {
        Pool::new("test", Budget { bytes, idle: None }, PoolMetrics::default())
    }

    #[test]
    fn a_pool_never_holds_more_than_its_budget_once_an_insert_returns() {
        let budget = 20_000;
        let pool = pool(budget);
        let one = u64::from(weight(&object("o-0", "1", 1_000)));
        for i in 0..200 {
            pool.insert((0, key(&format!("o-{i}"))), object(&format!("o-{i}"), "1", 1_000));
            assert!(pool.bytes() <= budget, "{} bytes held after insert {i}", pool.bytes());
        }
        assert!(pool.bytes() + one > budget, "the pool is used up to its budget: {}", pool.bytes());
        assert_eq!(
            pool.metrics.evictions.get(),
            pool.metrics.objects.get().try_into().map_or(0, |held: u64| 200 - held)
        );
    }

    #[test]
    fn the_least_recently_read_object_is_evicted_first() {
        let one = u64::from(weight(&object("a", "1", 1_000)));
        let pool = pool(3 * one);
        for name in ["a", "b", "c"] {
            pool.insert((0, key(name)), object(name, "1", 1_000));
        }
        assert!(pool.get(&(0, key("a"))).is_some());
        pool.insert((0, key("d")), object("d", "1", 1_000));
        let held: Vec<bool> = ["a", "b", "c", "d"].iter().map(|n| pool.get(&(0, key(n))).is_some()).collect();
        assert_eq!(held, [true, false, true, true]);
    }

    #[test]
    fn a_plugin_s_share_evicts_from_the_host_pool_within_its_own_budget() {
        let one = u64::from(weight(&object("a", "1", 1_000)));
        let host = pool(100 * one);
        let plugin = host.share("plugin", 2 * one, PoolMetrics::default());
        for name in ["a", "b", "c"] {
            plugin.insert((1, key(name)), object(name, "1", 1_000));
        }
        assert!(plugin.bytes() <= 2 * one);
        assert!(plugin.get(&(1, key("a"))).is_none(), "the share's coldest left the host's pool too");
        host.objects.run_pending_tasks();
        assert_eq!(host.objects.entry_count(), 2);
        // Objects of others in the host's pool do not count against the plugin.
        host.insert((2, key("other")), object("other", "1", 1_000));
        assert!(plugin.get(&(1, key("b"))).is_some() && plugin.get(&(1, key("c"))).is_some());
    }

    fn store(pool: Pool) -> Bounded {
        let config = kube::Config::new("http://127.0.0.1:9".parse().unwrap());
        let client = Client::try_from(config).unwrap();
        let resource = ApiResource::from_gvk(&GroupVersionKind::gvk("", "v1", "ConfigMap"));
        let api = Api::all_with(client.clone(), &resource);
        Bounded::new(pool, client, resource, api, ListParams::default(), crate::informer::Shape::default())
    }

    #[tokio::test]
    async fn the_index_keeps_every_key_and_a_list_s_end_drops_what_it_did_not_show() {
        let one = u64::from(weight(&object("a", "1", 1_000)));
        let store = store(pool(one));
        store.apply(&Event::Apply(object("a", "1", 1_000)));
        store.apply(&Event::Apply(object("b", "2", 1_000)));
        assert_eq!(store.warm(&key("a")), None, "evicted: must be fetched");
        assert!(store.warm(&key("b")).is_some_and(|o| o.is_some()));
        assert_eq!(store.warm(&key("z")), Some(None), "unknown: no fetch");
        assert_eq!(store.tag(&key("a")).and_then(|t| t.version), Some("1".into()));
        store.apply(&Event::Init);
        store.apply(&Event::InitApply(object("b", "3", 1_000)));
        assert_eq!(store.keys().len(), 2, "the old index stays until the list ends");
        store.apply(&Event::InitDone);
        assert_eq!(store.keys(), [key("b")]);
        store.apply(&Event::Delete(object("b", "3", 1_000)));
        assert!(store.keys().is_empty());
        assert_eq!(store.pool().bytes(), 0);
    }
}
