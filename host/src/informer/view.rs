//! The guest's view of the host caches: the primary's cache and one cache per declared watch,
//! with each watch's links to primaries. Reads are served from memory; only a bounded cache's
//! evicted object is fetched from the API server, and the call awaits it.

use std::collections::HashSet;
use std::sync::{Arc, Mutex, RwLock};
use std::time::Duration;

use futures::future::{BoxFuture, FutureExt};
use kube::ResourceExt;

use super::Cache;
use crate::mapping::Links;
use crate::object::ObjectKey;
use crate::runtime::bindings::wasmop::plugin::types::KindRef;
use crate::runtime::{CacheReader, GetResult, ListResult};
use crate::wire::{Object, PrimaryReads};
use wasmop_core::selector::LabelSelector;

/// One cached kind: the primary or a watched secondary.
pub struct CachedKind {
    /// The kind as the plugin names it.
    pub kind: KindRef,
    /// The shared cache of the watch.
    pub cache: Cache,
    /// How the watch relates its objects to primaries; `None` for the primary itself.
    pub links: Option<Arc<RwLock<Links>>>,
    /// What the plugin reads of its objects: the primary's cache keeps more than the plugin's
    /// projection; a watch's cache keeps exactly it (the default: all the cache holds).
    pub reads: PrimaryReads,
}

/// Everything one plugin may read.
pub struct WatchedCache {
    kinds: Vec<CachedKind>,
}

/// The cache as seen from the reconcile of one primary, which also knows its secondaries and
/// keeps the delay the reconcile's calls asked for their retry.
pub struct PrimaryView {
    cache: Arc<WatchedCache>,
    key: ObjectKey,
    uid: Option<String>,
    retry_after: Mutex<Option<Duration>>,
}

impl WatchedCache {
    /// A cache over the given kinds; reads look through them in order.
    pub fn new(kinds: Vec<CachedKind>) -> Arc<Self> {
        Arc::new(Self { kinds })
    }

    /// What the plugin reads of its primaries (the first kind's objects).
    pub fn primary_reads(&self) -> PrimaryReads {
        self.kinds.first().map(|primary| primary.reads.clone()).unwrap_or_default()
    }

    /// The view of the reconcile of the primary `key` with `uid`.
    pub fn for_primary(self: &Arc<Self>, key: ObjectKey, uid: Option<String>) -> PrimaryView {
        PrimaryView { cache: self.clone(), key, uid, retry_after: Mutex::new(None) }
    }

    /// The cached kinds matching `kind`; an error naming it when none does.
    fn matching<'a>(&'a self, kind: &KindRef) -> Result<Vec<&'a CachedKind>, String> {
        let found: Vec<_> = self
            .kinds
            .iter()
            .filter(|c| c.kind.group == kind.group && c.kind.version == kind.version && c.kind.kind == kind.kind)
            .collect();
        if found.is_empty() {
            let group = if kind.group.is_empty() { "core" } else { &kind.group };
            return Err(format!(
                "{group}/{} {} is not watched by this plugin; only the primary and watched kinds can be read",
                kind.version, kind.kind
            ));
        }
        Ok(found)
    }
}

fn unreadable(err: kube::Error) -> String {
    format!("cannot fetch an evicted object from the API server: {}", crate::api_error::describe(&err))
}

fn to_json(object: &Object, reads: &PrimaryReads) -> Result<String, String> {
    reads.json(object).map_err(|e| format!("cannot serialize cached object: {e}"))
}

/// Serializes objects sorted by namespace and name, each once (watches of one kind may overlap),
/// as the plugin reads those of the cache each came from.
fn sorted_json(mut objects: Vec<(Arc<Object>, &PrimaryReads)>) -> Result<Vec<String>, String> {
    let mut seen = HashSet::new();
    objects.retain(|(o, _)| seen.insert(o.uid().unwrap_or_default()));
    objects.sort_by(|(a, _), (b, _)| {
        (&a.metadata.namespace, &a.metadata.name).cmp(&(&b.metadata.namespace, &b.metadata.name))
    });
    objects.iter().map(|(o, reads)| to_json(o, reads)).collect()
}

impl WatchedCache {
    async fn get(&self, kind: &KindRef, namespace: Option<&str>, name: &str) -> GetResult {
        let key = ObjectKey { namespace: namespace.map(String::from), name: name.to_string() };
        for cached in self.matching(kind)? {
            if let Some(found) = cached.cache.fetch(&key).await.map_err(unreadable)? {
                return to_json(&found, &cached.reads).map(Some);
            }
        }
        Ok(None)
    }

    async fn list(&self, kind: &KindRef, namespace: Option<&str>, selector: Option<&str>) -> ListResult {
        let selector: LabelSelector = selector.unwrap_or("").parse().map_err(|e| format!("{e}"))?;
        let mut objects = Vec::new();
        for cached in self.matching(kind)? {
            let state = cached.cache.state_in(namespace).await.map_err(unreadable)?;
            objects.extend(
                state
                    .into_iter()
                    .filter(|o| {
                        namespace.is_none_or(|ns| o.metadata.namespace.as_deref() == Some(ns))
                            && selector.matches(o.labels())
                    })
                    .map(|o| (o, &cached.reads)),
            );
        }
        sorted_json(objects)
    }
}

impl CacheReader for WatchedCache {
    fn get<'a>(&'a self, kind: &'a KindRef, namespace: Option<&'a str>, name: &'a str) -> BoxFuture<'a, GetResult> {
        WatchedCache::get(self, kind, namespace, name).boxed()
    }

    fn list<'a>(
        &'a self,
        kind: &'a KindRef,
        namespace: Option<&'a str>,
        selector: Option<&'a str>,
    ) -> BoxFuture<'a, ListResult> {
        WatchedCache::list(self, kind, namespace, selector).boxed()
    }

    fn secondaries<'a>(&'a self, kind: &'a KindRef) -> BoxFuture<'a, ListResult> {
        let refused = format!("secondaries({}) can only be called during reconcile", kind.kind);
        futures::future::ready(Err(refused)).boxed()
    }
}

impl PrimaryView {
    async fn secondaries(&self, kind: &KindRef) -> ListResult {
        let mut objects = Vec::new();
        let mut watched = false;
        for cached in self.cache.matching(kind)? {
            let Some(links) = &cached.links else { continue };
            watched = true;
            let keys = links.read().expect("links are never poisoned").secondaries_of(&self.key, self.uid.as_deref());
            for key in &keys {
                objects.extend(cached.cache.fetch(key).await.map_err(unreadable)?.map(|o| (o, &cached.reads)));
            }
        }
        if !watched {
            return Err(format!("{} is the primary kind, not a watched secondary", kind.kind));
        }
        sorted_json(objects)
    }
}

impl CacheReader for PrimaryView {
    fn get<'a>(&'a self, kind: &'a KindRef, namespace: Option<&'a str>, name: &'a str) -> BoxFuture<'a, GetResult> {
        self.cache.get(kind, namespace, name).boxed()
    }

    fn list<'a>(
        &'a self,
        kind: &'a KindRef,
        namespace: Option<&'a str>,
        selector: Option<&'a str>,
    ) -> BoxFuture<'a, ListResult> {
        self.cache.list(kind, namespace, selector).boxed()
    }

    fn secondaries<'a>(&'a self, kind: &'a KindRef) -> BoxFuture<'a, ListResult> {
        PrimaryView::secondaries(self, kind).boxed()
    }

    fn ask_retry_after(&self, delay: Duration) {
        *self.retry_after.lock().expect("never poisoned") = Some(delay);
    }

    fn asked_retry_after(&self) -> Option<Duration> {
        *self.retry_after.lock().expect("never poisoned")
    }
}
