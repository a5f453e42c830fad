//! A watch's cache: the store (kube's reflector store, or a [`Bounded`] one), plus the host's
//! own writes the watch has not delivered yet, so that a reconcile reads what the previous one
//! wrote (JOSDK's temporary resource cache).
//!
//! An entry leaves the overlay as soon as the watch delivers the write or anything newer, or the
//! object's deletion, judged on every event of the watch ([`Cache::observe`]) and again on every
//! read; a re-list drops every entry recorded before it began, since the list shows those writes
//! or something newer. So the overlay never outlives the watch's view of a write: an object the
//! host created, that the watch delivered and that someone else then deleted, is seen as gone.
//!
//! A whole cache's store shows an update the host wrote in place of the version it replaced, so
//! that the overlay and the store share one copy of the object until the watch delivers it,
//! instead of holding the old version and the new one (during a burst, the watch runs behind the
//! host's status writes by hundreds of objects). The overlay's entry stays until the watch
//! delivers the write: a version older than the write that the watch delivers meanwhile
//! replaces it in the store, and the overlay still shows the write over it.

use std::collections::HashMap;
use std::sync::{Arc, Mutex};

use kube::ResourceExt;
use kube::runtime::watcher::Event;

use super::Whole;
use super::bounded::{Bounded, Tag};
use crate::object::{ObjectKey, version_at_least};
use crate::wire::Object;

/// One of the host's writes: the object after it (`None`: deleted), the version it replaced, and
/// the list it was recorded during.
struct Recent {
    replaced: Option<String>,
    object: Option<Arc<Object>>,
    uid: Option<String>,
    list: u64,
}

impl Recent {
    /// Whether `seen`, a version of the object the watch delivered, is this write or newer.
    fn superseded_by(&self, seen: &Tag) -> bool {
        if let (Some(mine), Some(theirs)) = (&self.uid, &seen.uid)
            && mine != theirs
        {
            return true; // another incarnation of the name
        }
        let seen = &seen.version;
        let ordered = match (seen, &self.object, &self.replaced) {
            // Our write, or a later version.
            (Some(seen), Some(written), _) => written.resource_version().and_then(|w| version_at_least(seen, &w)),
            // Our deletion: a later version than the one deleted (say, finalizers still hold it).
            (Some(seen), None, Some(replaced)) => {
                version_at_least(seen, replaced).map(|later| later && seen != replaced)
            }
            _ => None,
        };
        // Unordered versions: anything but the version the write replaced.
        ordered.unwrap_or(*seen != self.replaced)
    }
}

/// The host's writes not delivered yet, by key, and the number of lists the watch began.
#[derive(Default)]
struct Overlay {
    recent: HashMap<ObjectKey, Recent>,
    lists: u64,
}

/// Where a watch keeps its objects.
#[derive(Clone)]
enum Backing {
    /// All of them.
    Full(Arc<Whole>),
    /// The warm ones; the others are fetched again on a read.
    Bounded(Arc<Bounded>),
}

/// A watch's store with the host's recent writes laid over it. Cheap to clone.
#[derive(Clone)]
pub struct Cache {
    backing: Backing,
    overlay: Arc<Mutex<Overlay>>,
    /// What the host's writes are cut to, as the watch's objects are.
    shape: super::Shape,
}

impl Cache {
    /// A cache over the `store` of objects cut to `shape`, with no writes of its own yet.
    pub fn new(store: Arc<Whole>, shape: super::Shape) -> Self {
        Self { backing: Backing::Full(store), overlay: Arc::default(), shape }
    }

    /// A cache over a bounded store of objects cut to `shape`.
    pub fn bounded(store: Arc<Bounded>, shape: super::Shape) -> Self {
        Self { backing: Backing::Bounded(store), overlay: Arc::default(), shape }
    }

    /// The bounded store, if this cache is bounded.
    pub fn bounds(&self) -> Option<&Arc<Bounded>> {
        match &self.backing {
            Backing::Full(_) => None,
            Backing::Bounded(store) => Some(store),
        }
    }

    /// The tag of `key` in the store, if it shows the object.
    fn tag(&self, key: &ObjectKey) -> Option<Tag> {
        match &self.backing {
            Backing::Full(store) => store.get(key).map(|o| Tag::of(&o)),
            Backing::Bounded(store) => store.tag(key),
        }
    }

    /// The tag of `key` in the store, and whether what it shows is `recent`'s object itself, laid
    /// into it in place of the version the write replaced ([`Whole::replace_older`]).
    fn shown(&self, key: &ObjectKey, recent: Option<&Recent>) -> (Option<Tag>, bool) {
        match &self.backing {
            Backing::Full(store) => {
                let stored = store.get(key);
                let laid = match (&stored, recent.and_then(|r| r.object.as_ref())) {
                    (Some(stored), Some(written)) => Arc::ptr_eq(stored, written),
                    _ => false,
                };
                (stored.map(|o| Tag::of(&o)), laid)
            }
            Backing::Bounded(store) => (store.tag(key), false),
        }
    }

    /// Whether the store has not yet seen the write `recent`, given its tag there.
    fn pending(recent: &Recent, stored: Option<&Tag>) -> bool {
        match stored {
            Some(stored) => !recent.superseded_by(stored),
            // Absent: a write not delivered yet (a delivered one that was deleted since left on
            // the Delete event), or the host's deletion, delivered.
            None => recent.object.is_some(),
        }
    }

    fn overlay(&self) -> std::sync::MutexGuard<'_, Overlay> {
        self.overlay.lock().expect("never poisoned")
    }

    /// Settles the overlay with an event the watch delivered (after the store applied it).
    pub fn observe<K: std::borrow::Borrow<Object>>(&self, event: &Event<K>) {
        let mut overlay = self.overlay();
        match event {
            Event::Apply(seen) | Event::InitApply(seen) => {
                let seen: &Object = seen.borrow();
                let Some(key) = crate::object::key_of(seen) else { return };
                if overlay.recent.get(&key).is_some_and(|r| r.superseded_by(&Tag::of(seen))) {
                    overlay.recent.remove(&key);
                }
            }
            Event::Delete(gone) => {
                let gone: &Object = gone.borrow();
                let Some(key) = crate::object::key_of(gone) else { return };
                // A deletion of an older incarnation leaves a write of a newer one alone.
                let older = |r: &Recent| r.object.is_some() && r.uid.is_some() && r.uid != gone.uid();
                if overlay.recent.get(&key).is_some_and(|r| !older(r)) {
                    overlay.recent.remove(&key);
                }
            }
            Event::Init => overlay.lists += 1,
            Event::InitDone => {
                let list = overlay.lists;
                overlay.recent.retain(|_, r| r.list >= list);
            }
        }
    }

    /// The host's pending write of `key`, if the store has not caught up with it: `Some(None)`
    /// for a pending deletion.
    fn pending_write(&self, key: &ObjectKey) -> Option<Option<Arc<Object>>> {
        let mut overlay = self.overlay();
        let (tag, laid) = self.shown(key, overlay.recent.get(key));
        match overlay.recent.get(key) {
            Some(entry) if laid || Self::pending(entry, tag.as_ref()) => Some(entry.object.clone()),
            Some(_) => {
                overlay.recent.remove(key);
                None
            }
            None => None,
        }
    }

    /// The object `key`, as the host last wrote it or as the watch delivered it, whichever is
    /// newer. A bounded cache answers from its warm objects only: use [`Cache::fetch`] to get
    /// evicted ones too.
    pub fn get(&self, key: &ObjectKey) -> Option<Arc<Object>> {
        if let Some(written) = self.pending_write(key) {
            return written;
        }
        match &self.backing {
            Backing::Full(store) => store.get(key),
            Backing::Bounded(store) => store.warm(key).flatten(),
        }
    }

    /// The UID of the object `key` as the watch shows it (a bounded cache knows it of evicted
    /// objects too).
    pub fn uid(&self, key: &ObjectKey) -> Option<String> {
        match &self.backing {
            Backing::Full(store) => store.get(key).and_then(|o| o.metadata.uid.clone()),
            Backing::Bounded(store) => store.uid(key),
        }
    }

    /// The object `key` as [`Cache::get`] sees it, fetched from the API server if a bounded
    /// cache evicted it.
    pub async fn fetch(&self, key: &ObjectKey) -> Result<Option<Arc<Object>>, kube::Error> {
        if let Some(written) = self.pending_write(key) {
            return Ok(written);
        }
        match &self.backing {
            Backing::Full(store) => Ok(store.get(key)),
            Backing::Bounded(store) => store.get(key).await,
        }
    }

    /// How many objects the store shows.
    pub fn count(&self) -> usize {
        match &self.backing {
            Backing::Full(store) => store.count(),
            Backing::Bounded(store) => store.count(),
        }
    }

    /// Every key the store shows.
    pub fn keys(&self) -> Vec<ObjectKey> {
        match &self.backing {
            Backing::Full(store) => store.keys(),
            Backing::Bounded(store) => store.keys(),
        }
    }

    /// Every object the store shows, without the host's pending writes; a bounded cache with
    /// evicted objects lists them from the API server ([`Bounded::state`]).
    pub async fn stored(&self) -> Result<Vec<Arc<Object>>, kube::Error> {
        self.stored_in(None).await
    }

    /// [`Cache::stored`] of the objects in `namespace` (`None`: all).
    async fn stored_in(&self, namespace: Option<&str>) -> Result<Vec<Arc<Object>>, kube::Error> {
        match &self.backing {
            Backing::Full(store) => {
                let mut objects = store.state();
                objects.retain(|o| namespace.is_none_or(|ns| o.metadata.namespace.as_deref() == Some(ns)));
                Ok(objects)
            }
            Backing::Bounded(store) => store.state_in(namespace).await,
        }
    }

    /// Every object, with the host's pending writes applied.
    pub async fn state(&self) -> Result<Vec<Arc<Object>>, kube::Error> {
        Ok(self.with_writes(self.stored().await?))
    }

    /// Every object in `namespace` (`None`: all), with the host's pending writes applied (of any
    /// namespace: filter the result).
    pub async fn state_in(&self, namespace: Option<&str>) -> Result<Vec<Arc<Object>>, kube::Error> {
        Ok(self.with_writes(self.stored_in(namespace).await?))
    }

    /// `objects`, the store's, with the host's pending writes applied.
    fn with_writes(&self, mut objects: Vec<Arc<Object>>) -> Vec<Arc<Object>> {
        let mut overlay = self.overlay();
        if overlay.recent.is_empty() {
            return objects;
        }
        let mut stored: HashMap<ObjectKey, usize> = HashMap::new();
        for (i, o) in objects.iter().enumerate() {
            if let Some(key) = crate::object::key_of(o) {
                stored.insert(key, i);
            }
        }
        overlay.recent.retain(|key, entry| {
            let stored = stored.get(key).map(|&i| &objects[i]);
            let laid = matches!((stored, &entry.object), (Some(s), Some(w)) if Arc::ptr_eq(s, w));
            laid || Self::pending(entry, stored.map(|o| Tag::of(o)).as_ref())
        });
        let mut removed = Vec::new();
        for (key, entry) in overlay.recent.iter() {
            match (stored.get(key), &entry.object) {
                (Some(&i), Some(object)) => objects[i] = object.clone(),
                (Some(&i), None) => removed.push(i),
                (None, Some(object)) => objects.push(object.clone()),
                (None, None) => {}
            }
        }
        removed.sort_unstable_by(|a, b| b.cmp(a));
        for i in removed {
            objects.swap_remove(i);
        }
        objects
    }

    /// How many of the host's writes the watch has not delivered yet.
    pub fn pending_writes(&self) -> usize {
        self.overlay().recent.len()
    }

    /// Records `recent`, stamped with the list the watch is in.
    fn record(&self, key: ObjectKey, mut recent: Recent) {
        let mut overlay = self.overlay();
        recent.list = overlay.lists;
        overlay.recent.insert(key, recent);
    }

    /// Records the host's write of `object` (cut as the watch cuts its objects), which replaced
    /// version `replaced` (`None`: it created the object); returns the object as recorded, the
    /// one the next read sees.
    pub fn wrote(&self, mut object: Object, replaced: Option<String>) -> Arc<Object> {
        self.shape.fit(&mut object);
        let object = Arc::new(object);
        if let Some(key) = crate::object::key_of(&object) {
            let recent = Recent { replaced, object: Some(object.clone()), uid: object.uid(), list: 0 };
            if let Backing::Full(store) = &self.backing {
                store.replace_older(&key, &object, |stored| Self::pending(&recent, Some(&Tag::of(stored))));
            }
            self.record(key, recent);
        }
        object
    }

    /// Records that the host deleted `key`, which was at version `replaced`.
    pub fn deleted(&self, key: ObjectKey, replaced: Option<String>) {
        let uid = self.tag(&key).and_then(|t| t.uid);
        self.record(key, Recent { replaced, object: None, uid, list: 0 });
    }
}

#[cfg(test)]
mod tests {
    use kube::api::{ApiResource, GroupVersionKind};
    use kube::runtime::watcher::Event;

    use super::*;

    fn object(name: &str, version: &str, data: &str) -> Object {
        let resource = ApiResource::from_gvk(&GroupVersionKind::gvk("", "v1", "ConfigMap"));
        let mut o = Object::new(name, &resource).within("ns").data(serde_json::json!({ "data": { "v": data } }));
        o.metadata.resource_version = Some(version.into());
        o
    }

    fn key(name: &str) -> ObjectKey {
        ObjectKey { namespace: Some("ns".into()), name: name.into() }
    }

    fn data(o: &Object) -> String {
        o.data.pointer("/data/v").and_then(|v| v.as_str().map(String::from)).unwrap()
    }

    fn cache() -> (Arc<Whole>, Cache) {
        let store = Arc::new(Whole::default());
        let cache = Cache::new(store.clone(), crate::informer::Shape::default());
        (store, cache)
    }

    #[tokio::test]
    async fn a_write_is_visible_until_the_watch_delivers_it_or_something_newer() {
        let (writer, cache) = cache();
        apply(&writer, Event::Apply(object("a", "1", "old")));
        cache.wrote(object("a", "2", "mine"), Some("1".into()));
        assert_eq!(data(&cache.get(&key("a")).unwrap()), "mine");
        assert_eq!(data(&cache.state().await.unwrap()[0]), "mine");
        apply(&writer, Event::Apply(object("a", "3", "someone else's")));
        assert_eq!(data(&cache.get(&key("a")).unwrap()), "someone else's");
        assert_eq!(data(&cache.state().await.unwrap()[0]), "someone else's");
    }

    #[tokio::test]
    async fn created_and_deleted_objects_show_at_once() {
        let (writer, cache) = cache();
        apply(&writer, Event::Apply(object("gone", "1", "x")));
        cache.wrote(object("new", "5", "created"), None);
        cache.deleted(key("gone"), Some("1".into()));
        assert!(cache.get(&key("gone")).is_none());
        let names: Vec<String> = cache.state().await.unwrap().iter().map(|o| o.name_any()).collect();
        assert_eq!(names, ["new"]);
        apply(&writer, Event::Apply(object("new", "5", "created")));
        apply(&writer, Event::Delete(object("gone", "1", "x")));
        assert_eq!(cache.state().await.unwrap().len(), 1);
        assert_eq!(cache.pending_writes(), 0, "delivered writes are forgotten");
    }

    /// Applies `event` to the store alone.
    fn apply(store: &Whole, event: Event<Object>) {
        store.apply(&crate::informer::decoded::map_event(event, Arc::new));
    }

    /// Applies `event` to the store, then to the overlay, in the watch task's order.
    fn deliver(writer: &Whole, cache: &Cache, event: Event<Object>) {
        apply(writer, event.clone());
        cache.observe(&event);
    }

    fn with_uid(mut o: Object, uid: &str) -> Object {
        o.metadata.uid = Some(uid.into());
        o
    }

    #[test]
    fn a_delivered_create_leaves_the_overlay_so_a_later_deletion_shows() {
        let (writer, cache) = cache();
        cache.wrote(with_uid(object("new", "5", "created"), "u1"), None);
        deliver(&writer, &cache, Event::Apply(with_uid(object("new", "5", "created"), "u1")));
        assert_eq!(cache.pending_writes(), 0, "delivered, with no read in between");
        deliver(&writer, &cache, Event::Delete(with_uid(object("new", "5", "created"), "u1")));
        assert!(cache.get(&key("new")).is_none(), "someone else deleted it");
    }

    #[test]
    fn an_older_event_keeps_the_write_and_a_newer_one_replaces_it() {
        let (writer, cache) = cache();
        deliver(&writer, &cache, Event::Apply(object("a", "10", "old")));
        cache.wrote(object("a", "12", "mine"), Some("10".into()));
        deliver(&writer, &cache, Event::Apply(object("a", "11", "someone's, before mine")));
        assert_eq!(data(&cache.get(&key("a")).unwrap()), "mine", "version 11 is older than the write");
        deliver(&writer, &cache, Event::Apply(object("a", "13", "after mine")));
        assert_eq!(cache.pending_writes(), 0);
        assert_eq!(data(&cache.get(&key("a")).unwrap()), "after mine");
    }

    #[tokio::test]
    async fn an_update_is_one_copy_shared_with_the_store_until_the_watch_delivers_it() {
        let (writer, cache) = cache();
        deliver(&writer, &cache, Event::Apply(object("a", "10", "old")));
        let written = cache.wrote(object("a", "12", "mine"), Some("10".into()));
        let stored = writer.get(&key("a")).unwrap();
        assert!(Arc::ptr_eq(&stored, &written), "the store shows the write, not a second copy");
        assert_eq!(cache.pending_writes(), 1);
        // Reads do not mistake the write the store shows for the watch's delivery of it.
        assert!(Arc::ptr_eq(&cache.get(&key("a")).unwrap(), &written));
        assert!(Arc::ptr_eq(&cache.state().await.unwrap()[0], &written));
        assert_eq!(cache.pending_writes(), 1);
        deliver(&writer, &cache, Event::Apply(object("a", "11", "someone's, before mine")));
        assert_eq!(data(&cache.get(&key("a")).unwrap()), "mine", "the overlay still shows it over an older version");
        assert_eq!(data(&cache.state().await.unwrap()[0]), "mine");
        deliver(&writer, &cache, Event::Apply(object("a", "12", "mine")));
        assert_eq!(cache.pending_writes(), 0);
    }

    #[test]
    fn a_write_answered_after_a_newer_delivery_does_not_replace_it_in_the_store() {
        let (writer, cache) = cache();
        deliver(&writer, &cache, Event::Apply(object("a", "13", "someone's, after mine")));
        cache.wrote(object("a", "12", "mine"), Some("10".into()));
        assert_eq!(data(&writer.get(&key("a")).unwrap()), "someone's, after mine");
        assert_eq!(data(&cache.get(&key("a")).unwrap()), "someone's, after mine");
    }

    #[test]
    fn deleting_an_older_incarnation_keeps_the_write_of_the_new_one() {
        let (writer, cache) = cache();
        deliver(&writer, &cache, Event::Apply(with_uid(object("a", "3", "old"), "old")));
        cache.wrote(with_uid(object("a", "9", "re-created"), "new"), None);
        deliver(&writer, &cache, Event::Delete(with_uid(object("a", "3", "old"), "old")));
        assert_eq!(data(&cache.get(&key("a")).unwrap()), "re-created");
        deliver(&writer, &cache, Event::Apply(with_uid(object("a", "4", "someone's"), "other")));
        assert_eq!(data(&cache.get(&key("a")).unwrap()), "someone's", "another incarnation supersedes it");
    }

    #[tokio::test]
    async fn a_relist_drops_the_writes_recorded_before_it_began() {
        let (writer, cache) = cache();
        cache.wrote(object("gone", "5", "created, then deleted while the watch was down"), None);
        deliver(&writer, &cache, Event::Init);
        cache.wrote(object("during", "7", "written during the list"), None);
        deliver(&writer, &cache, Event::InitDone);
        let names: Vec<String> = cache.state().await.unwrap().iter().map(|o| o.name_any()).collect();
        assert_eq!(names, ["during"], "the list is the truth for earlier writes only");
    }

    #[test]
    fn opaque_versions_fall_back_to_any_other_version() {
        let (writer, cache) = cache();
        deliver(&writer, &cache, Event::Apply(object("a", "x", "old")));
        cache.wrote(object("a", "y", "mine"), Some("x".into()));
        deliver(&writer, &cache, Event::Apply(object("a", "x", "old")));
        assert_eq!(data(&cache.get(&key("a")).unwrap()), "mine");
        deliver(&writer, &cache, Event::Apply(object("a", "z", "newer")));
        assert_eq!(data(&cache.get(&key("a")).unwrap()), "newer");
    }
}
