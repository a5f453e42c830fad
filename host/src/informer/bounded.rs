//! Bounded caches (JOSDK's bounded item stores): a watch that keeps every object's key and
//! version but the objects themselves only while they are warm, in a [`Pool`] of moka caches
//! with a byte budget. A cold object is evicted (least recently used first, or after an idle
//! time) and fetched from the API server again when a reconcile or a plugin reads it.
//!
//! A pool is the host's (`--cache-budget-mib`, shared by the plugins without a budget of their
//! own) or a plugin's (`cache.budgetMib`). A plugin's pool inside a host budget keeps the
//! objects in the host's cache and tracks its own share in a second moka cache of weights only:
//! whichever budget is exceeded evicts, from both.
//!
//! Reads never go back in time: a refetched object enters the pool only when it is the version
//! the watch shows or newer (the host's one rule for ordering versions,
//! [`version_at_least`]), and a list serves cold objects from the watch's recent LIST
//! ([`Snapshots`]) only when that LIST has their current version, else fetches them alone.

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};

use kube::Client;
use kube::ResourceExt;
use kube::api::{ApiResource, ListParams};
use kube::runtime::watcher::Event;
use wasmop_core::table::KeyMap;

use super::pool::Pool;
use super::remote::Remote;
use super::shape::Shape;
use super::snapshots::Snapshots;
use crate::object::{ObjectKey, version_at_least};
use crate::wire::Object;

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
    pub fn of(object: &Object) -> Self {
        Self { version: object.resource_version(), uid: object.uid() }
    }
}

/// Whether `object` is the version `tag` shows or a later one; `None` when the versions do not
/// order (not numbers), unless they are equal.
fn not_older(object: &Object, tag: &Tag) -> Option<bool> {
    let (Some(mine), Some(shown)) = (object.resource_version(), &tag.version) else { return None };
    version_at_least(&mine, shown).or((mine == *shown).then_some(true))
}

/// Reads of one object a refetch makes at most while the watch keeps delivering newer versions
/// that the pool evicts before the read returns.
const FETCHES: usize = 3;

/// Every object's tag, and the list in progress.
#[derive(Default)]
struct Index {
    tags: KeyMap<ObjectKey, Tag>,
    /// The tags of a list in progress; they replace `tags` when it ends.
    listing: Option<KeyMap<ObjectKey, Tag>>,
}

impl Index {
    /// The latest tag of `key` the watch delivered, a list in progress included.
    fn latest(&self, key: &ObjectKey) -> Option<&Tag> {
        self.listing.as_ref().and_then(|l| l.get(key)).or_else(|| self.tags.get(key))
    }
}

/// Numbers watches apart within a pool.
static WATCHES: AtomicU64 = AtomicU64::new(0);

/// A bounded watch's store: every key with its tag, the warm objects in the pool, and the API
/// to fetch the cold ones from.
pub struct Bounded {
    id: u64,
    /// Held while the pool takes an object, so that the pool never holds a version older than
    /// the tag.
    index: Mutex<Index>,
    pool: Pool,
    remote: Remote,
    snapshots: Snapshots,
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
    /// An empty store of the objects of `resource` in `namespace` (`None`: all) that `list`
    /// selects, cut to `shape`, holding warm ones in `pool`.
    pub fn new(
        pool: Pool,
        client: Client,
        resource: ApiResource,
        namespace: Option<String>,
        list: ListParams,
        shape: Shape,
    ) -> Self {
        let id = WATCHES.fetch_add(1, Ordering::Relaxed);
        let remote = Remote::new(client, resource, namespace, list, shape, pool.metrics.lists.clone());
        Self { id, index: Mutex::default(), pool, remote, snapshots: Snapshots::default() }
    }

    fn index(&self) -> std::sync::MutexGuard<'_, Index> {
        self.index.lock().expect("never poisoned")
    }

    /// Applies a watch event: changed objects are warm; a list's end drops what it did not
    /// show. Until then, reads see the index as it was before the list (as kube's store does).
    pub fn apply(&self, event: &Event<Arc<Object>>) {
        match event {
            Event::Apply(object) => {
                let Some(key) = crate::object::key_of(object) else { return };
                let mut index = self.index();
                index.tags.insert(key.clone(), Tag::of(object));
                self.pool.insert((self.id, key), object.clone());
            }
            Event::Delete(object) => {
                let Some(key) = crate::object::key_of(object) else { return };
                self.index().tags.swap_remove(&key);
                self.pool.remove(&(self.id, key));
                self.pool.settle();
            }
            Event::Init => self.index().listing = Some(KeyMap::new()),
            Event::InitApply(object) => {
                let Some(key) = crate::object::key_of(object) else { return };
                let mut index = self.index();
                index.listing.get_or_insert_default().insert(key.clone(), Tag::of(object));
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

    /// How many objects the watch shows, warm or evicted.
    pub fn count(&self) -> usize {
        self.index().tags.len()
    }

    /// The UID of the object `key` as the watch shows it, warm or evicted.
    pub fn uid(&self, key: &ObjectKey) -> Option<String> {
        self.index().tags.get(key).and_then(|tag| tag.uid.clone())
    }

    /// The object `key` if it is warm; `Some(None)` if the watch does not show it; `None` if
    /// it must be fetched.
    pub fn warm(&self, key: &ObjectKey) -> Option<Option<Arc<Object>>> {
        if !self.index().tags.contains_key(key) {
            return Some(None);
        }
        self.pool.get(&(self.id, key.clone())).map(Some)
    }

    /// The object `key`: from the pool, or fetched from the API server (and warm again) when
    /// it was evicted; `None` when the watch does not show it or it is gone. A fetch that the
    /// watch overtook (it applied a newer version while the GET was under way) returns the
    /// watch's version instead, and does not enter the pool.
    pub async fn get(&self, key: &ObjectKey) -> Result<Option<Arc<Object>>, kube::Error> {
        let mut fetched = None;
        for _ in 0..FETCHES {
            let before = {
                let index = self.index();
                let Some(tag) = index.tags.get(key).cloned() else { return Ok(None) };
                if let Some(warm) = self.pool.get(&(self.id, key.clone())) {
                    return Ok(Some(warm));
                }
                tag
            };
            self.pool.metrics.refetches.inc();
            let Some(object) = self.remote.get(key).await? else { return Ok(None) };
            let index = self.index();
            // Deleted while the GET was under way.
            let Some(now) = index.latest(key) else { return Ok(None) };
            if not_older(&object, now).unwrap_or(*now == before) {
                self.pool.insert((self.id, key.clone()), object.clone());
                return Ok(Some(object));
            }
            if let Some(newer) = self.pool.get(&(self.id, key.clone())) {
                return Ok(Some(newer));
            }
            fetched = Some(object);
        }
        // Overtaken every time, and evicted every time since: the latest read.
        Ok(fetched)
    }

    /// Every object the watch shows: the warm ones from the pool, the cold ones from the
    /// watch's recent LIST (one LIST, paginated, shared by the readers of a moment; not kept)
    /// or, when they changed since it, one GET each.
    pub async fn state(&self) -> Result<Vec<Arc<Object>>, kube::Error> {
        self.state_in(None).await
    }

    /// [`Bounded::state`] of the objects in `namespace` (`None`: all); the LIST is narrowed to
    /// it.
    pub async fn state_in(&self, namespace: Option<&str>) -> Result<Vec<Arc<Object>>, kube::Error> {
        let (mut objects, mut cold) = (Vec::new(), Vec::new());
        {
            let index = self.index();
            let scoped =
                index.tags.iter().filter(|(k, _)| namespace.is_none_or(|ns| k.namespace.as_deref() == Some(ns)));
            for (key, tag) in scoped {
                match self.pool.get(&(self.id, key.clone())) {
                    Some(warm) => objects.push(warm),
                    None => cold.push((key.clone(), tag.clone())),
                }
            }
        }
        if cold.is_empty() {
            return Ok(objects);
        }
        let listed = self.snapshots.get_or_list(namespace, || self.remote.list(namespace)).await?;
        for (key, tag) in cold {
            match listed.get(&key) {
                Some(object) if not_older(object, &tag).unwrap_or(false) => objects.push(object.clone()),
                _ => objects.extend(self.get(&key).await?),
            }
        }
        Ok(objects)
    }

    /// The pool the warm objects are in.
    pub fn pool(&self) -> &Pool {
        &self.pool
    }
}

#[cfg(test)]
mod tests {
    use kube::api::GroupVersionKind;

    use super::super::api_double;
    use super::*;
    use crate::informer::pool::{Budget, PoolMetrics};
    use crate::informer::weight::weight;

    fn object(name: &str, version: &str, bytes: usize) -> Arc<Object> {
        let resource = ApiResource::from_gvk(&GroupVersionKind::gvk("", "v1", "ConfigMap"));
        let mut o =
            Object::new(name, &resource).within("ns").data(serde_json::json!({ "data": { "v": "x".repeat(bytes) } }));
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
        store_of(pool, client, config_maps(), crate::informer::Shape::default())
    }

    fn config_maps() -> ApiResource {
        ApiResource::from_gvk(&GroupVersionKind::gvk("", "v1", "ConfigMap"))
    }

    /// A store of all namespaces' `resource` reading from `client`.
    fn store_of(pool: Pool, client: Client, resource: ApiResource, shape: crate::informer::Shape) -> Bounded {
        Bounded::new(pool, client, resource, None, ListParams::default(), shape)
    }

    fn version(object: &Object) -> String {
        object.resource_version().unwrap_or_default()
    }

    fn json(object: &Object) -> serde_json::Value {
        serde_json::to_value(object).unwrap()
    }

    #[tokio::test]
    async fn a_refetch_answered_after_the_watch_applied_a_newer_version_does_not_replace_it() {
        let (client, mut requests) = api_double::start().await;
        let one = u64::from(weight(&object("a", "1", 1_000)));
        let store = store_of(pool(one), client, config_maps(), crate::informer::Shape::default());
        store.apply(&Event::Apply(object("a", "1", 1_000)));
        store.apply(&Event::Apply(object("b", "1", 1_000)));
        assert_eq!(store.warm(&key("a")), None, "a is evicted");
        // The GET of `a` is under way when the watch delivers version 2; then the GET answers
        // with version 1, read before the change.
        let watch = async {
            let get = requests.recv().await.unwrap();
            assert!(get.target().ends_with("/configmaps/a"), "{}", get.head);
            store.apply(&Event::Apply(object("a", "2", 1_000)));
            get.answer(&json(&object("a", "1", 1_000)));
        };
        let a = key("a");
        let (fetched, ()) = tokio::join!(store.get(&a), watch);
        let fetched = fetched.unwrap().unwrap();
        assert_eq!(version(&fetched), "2", "the read returns the newer version the watch applied");
        let warm = store.warm(&key("a")).flatten().expect("a is warm");
        assert_eq!(version(&warm), "2", "the cache keeps the newer version");
    }

    fn secret(name: &str, version: &str) -> serde_json::Value {
        serde_json::json!({
            "apiVersion": "v1", "kind": "Secret",
            "metadata": { "name": name, "namespace": "ns", "resourceVersion": version, "uid": format!("uid-{name}") },
            "data": { "password": "c2VjcmV0" },
        })
    }

    /// What the API server answers a request for `secret`: its metadata alone when asked for it.
    fn secret_as_asked(request: &api_double::Request, secret: serde_json::Value) -> serde_json::Value {
        if request.metadata_only() {
            serde_json::json!({
                "apiVersion": "meta.k8s.io/v1", "kind": "PartialObjectMetadata", "metadata": secret["metadata"],
            })
        } else {
            secret
        }
    }

    #[tokio::test]
    async fn a_metadata_only_watch_refetches_metadata_only() {
        let (client, mut requests) = api_double::start().await;
        let secrets = ApiResource::from_gvk(&GroupVersionKind::gvk("", "v1", "Secret"));
        let metadata_only = crate::informer::Shape { projection: Some(Arc::from([])), ..Default::default() };
        let store = store_of(pool(1), client, secrets, metadata_only);
        let mut cached: Object = serde_json::from_value(secret("a", "1")).unwrap();
        cached.data = Default::default();
        store.apply(&Event::Apply(Arc::new(cached)));
        assert_eq!(store.warm(&key("a")), None, "nothing fits");
        let server = async {
            let get = requests.recv().await.unwrap();
            let asked = get.metadata_only();
            let head = get.head.clone();
            let body = secret_as_asked(&get, secret("a", "1"));
            get.answer(&body);
            (asked, head)
        };
        let a = key("a");
        let (fetched, (asked, head)) = tokio::join!(store.get(&a), server);
        assert!(asked, "the GET asks for metadata only:\n{head}");
        assert!(fetched.unwrap().unwrap().data.get("data").is_none());
        let server = async {
            let list = requests.recv().await.unwrap();
            let asked = list.metadata_only();
            let head = list.head.clone();
            let item = secret_as_asked(&list, secret("a", "1"));
            let kind = if asked { "PartialObjectMetadataList" } else { "SecretList" };
            let api_version = if asked { "meta.k8s.io/v1" } else { "v1" };
            list.answer(&serde_json::json!({
                "apiVersion": api_version, "kind": kind, "metadata": { "resourceVersion": "1" }, "items": [item],
            }));
            (asked, head)
        };
        let (listed, (asked, head)) = tokio::join!(store.state(), server);
        assert!(asked, "the LIST asks for metadata only:\n{head}");
        assert!(listed.unwrap()[0].data.get("data").is_none());
    }

    /// What [`serve_config_maps`] was asked: LIST requests, those without a `limit`, and the
    /// limits of the others in order.
    #[derive(Default)]
    struct Served {
        lists: AtomicU64,
        unlimited: AtomicU64,
        limits: Mutex<Vec<usize>>,
    }

    /// Serves the API of the ConfigMaps `objects` (by name) until the test ends: GETs, and LISTs
    /// by pages of the `limit` asked, but at most `most` objects a page, when a `limit` asks
    /// for pages.
    fn serve_config_maps(
        mut requests: tokio::sync::mpsc::UnboundedReceiver<api_double::Request>,
        objects: Arc<Mutex<std::collections::BTreeMap<String, Arc<Object>>>>,
        most: usize,
    ) -> Arc<Served> {
        let served = Arc::new(Served::default());
        let counts = served.clone();
        tokio::spawn(async move {
            while let Some(request) = requests.recv().await {
                let objects = objects.lock().unwrap().clone();
                if !request.is_list("configmaps") {
                    let name = request.target().rsplit('/').next().unwrap_or_default().to_string();
                    request.answer(&json(&objects[&name]));
                    continue;
                }
                served.lists.fetch_add(1, Ordering::SeqCst);
                let limit: Option<usize> = request.query("limit").map(|l| l.parse().unwrap());
                match limit {
                    Some(limit) => served.limits.lock().unwrap().push(limit),
                    None => _ = served.unlimited.fetch_add(1, Ordering::SeqCst),
                }
                // As the API server pages: only when asked to.
                let size = limit.map_or(objects.len(), |limit| limit.min(most));
                let from: usize = request.query("continue").map_or(0, |c| c.parse().unwrap());
                let page: Vec<_> = objects.values().skip(from).take(size).map(|o| json(o)).collect();
                let next = if from + size < objects.len() { (from + size).to_string() } else { String::new() };
                request.answer(&serde_json::json!({
                    "apiVersion": "v1", "kind": "ConfigMapList",
                    "metadata": { "resourceVersion": "9", "continue": next }, "items": page,
                }));
            }
        });
        counts
    }

    fn names(objects: &[Arc<Object>]) -> Vec<String> {
        let mut names: Vec<String> = objects.iter().map(|o| format!("{}@{}", o.name_any(), version(o))).collect();
        names.sort();
        names
    }

    #[tokio::test]
    async fn lists_of_evicted_objects_are_paginated_and_shared_by_the_readers_of_a_moment() {
        let (client, requests) = api_double::start().await;
        let objects: std::collections::BTreeMap<_, _> =
            ["a", "b", "c"].iter().map(|n| (n.to_string(), object(n, "1", 100))).collect();
        let objects = Arc::new(Mutex::new(objects));
        let served = serve_config_maps(requests, objects.clone(), 2);
        let store = store_of(pool(1), client, config_maps(), crate::informer::Shape::default());
        for o in objects.lock().unwrap().values() {
            store.apply(&Event::Apply(o.clone()));
        }
        // Five reconciles list the kind, three at once and two after them.
        let (x, y, z) = tokio::join!(store.state(), store.state(), store.state());
        let (v, w) = (store.state().await.unwrap(), store.state().await.unwrap());
        for listed in [x.unwrap(), y.unwrap(), z.unwrap(), v, w] {
            assert_eq!(names(&listed), ["a@1", "b@1", "c@1"]);
        }
        assert_eq!(
            (served.lists.load(Ordering::SeqCst), served.unlimited.load(Ordering::SeqCst)),
            (2, 0),
            "(LIST requests, unpaginated ones) for five lists of 3 objects, 2 a page"
        );
        assert_eq!(store.pool().metrics.lists.get(), 2, "wasmop_cache_lists_total counts the pages");
        // A change the watch delivers after the LIST is read from the pool or fetched alone.
        objects.lock().unwrap().insert("b".into(), object("b", "2", 100));
        store.apply(&Event::Apply(object("b", "2", 100)));
        assert_eq!(names(&store.state().await.unwrap()), ["a@1", "b@2", "c@1"]);
        assert_eq!(served.lists.load(Ordering::SeqCst), 2, "no LIST for one changed object");
    }

    #[tokio::test]
    async fn lists_of_evicted_small_objects_ask_for_larger_pages_after_the_first() {
        let (client, requests) = api_double::start().await;
        // 3,000 objects of about 150 bytes: kube's pages of 500 would take six requests.
        let objects: std::collections::BTreeMap<_, _> =
            (0..3_000).map(|i| format!("m{i:04}")).map(|n| (n.clone(), object(&n, "1", 10))).collect();
        let objects = Arc::new(Mutex::new(objects));
        let served = serve_config_maps(requests, objects.clone(), usize::MAX);
        let store = store_of(pool(1), client, config_maps(), crate::informer::Shape::default());
        for o in objects.lock().unwrap().values() {
            store.apply(&Event::Apply(o.clone()));
        }
        assert_eq!(store.state().await.unwrap().len(), 3_000, "every object listed");
        let limits = served.limits.lock().unwrap().clone();
        // The first page of 500, the next four times as large (far under a MiB), then the rest
        // in one page of what a MiB holds.
        assert_eq!(limits.len(), 3, "the limits of the list's pages: {limits:?}");
        assert_eq!(limits[..2], [500, 2_000], "the limits of the list's pages: {limits:?}");
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
