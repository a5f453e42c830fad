//! A whole cache's store: every object of a watch, by its key.
//!
//! It replaces kube's reflector store, which keys each object by an `ObjectRef`: a copy of the
//! kind's `ApiResource` (five strings), the name, the namespace, the resource version and the
//! UID, about 400 bytes an object with their allocations, and wraps the object in an `Arc` of
//! its own. Here the key is the object's [`ObjectKey`] and the value the very `Arc` the watch
//! decoded and hands on to the subscribers. Events apply as kube's reflector applies them: a
//! re-list is gathered aside and replaces the objects whole when it is complete, so a read during
//! it sees the objects as they were. Unlike kube's, a re-list keeps the stored copy of each object
//! it finds unchanged (same UID and resource version) and lets its own copy go: a re-list after a
//! watch error, or after a sharded replica's ranges shrank, holds its objects once, not twice.

use std::sync::{Arc, Mutex, RwLock};

use kube::runtime::watcher::Event;
use wasmop_core::table::KeyMap;

use crate::object::ObjectKey;
use crate::wire::Object;

type Objects = KeyMap<ObjectKey, Arc<Object>>;

/// Every object of a watch; cheap to share behind an `Arc`.
#[derive(Default)]
pub struct Whole {
    objects: RwLock<Objects>,
    /// The re-list in progress, until its end replaces `objects`.
    listing: Mutex<Option<Objects>>,
}

impl Whole {
    /// Applies an event of the watch.
    pub fn apply(&self, event: &Event<Arc<Object>>) {
        match event {
            Event::Apply(object) => {
                if let Some(key) = crate::object::key_of(object) {
                    self.objects().insert(key, object.clone());
                }
            }
            Event::Delete(object) => {
                if let Some(key) = crate::object::key_of(object) {
                    self.objects().swap_remove(&key);
                }
            }
            Event::Init => *self.listing() = Some(Objects::new()),
            Event::InitApply(object) => {
                if let Some(key) = crate::object::key_of(object) {
                    let objects = self.objects.read().expect("never poisoned");
                    let stored = objects.get(&key).filter(|stored| unchanged(stored, object)).cloned();
                    drop(objects);
                    let kept = stored.unwrap_or_else(|| object.clone());
                    self.listing().get_or_insert_default().insert(key, kept);
                }
            }
            Event::InitDone => {
                let listed = self.listing().take().unwrap_or_default();
                // The objects replaced are freed after the lock is let go.
                drop(std::mem::replace(&mut *self.objects(), listed));
            }
        }
    }

    /// Shows the host's write `object` in place of the version of `key` the store holds, if it
    /// holds one and `older` says it is older than the write: the cache's overlay and the store
    /// then share one copy until the watch delivers the write.
    pub fn replace_older(&self, key: &ObjectKey, object: &Arc<Object>, older: impl FnOnce(&Object) -> bool) {
        let mut objects = self.objects();
        if let Some(stored) = objects.get_mut(key)
            && older(stored)
        {
            // The version replaced is freed after the lock is let go.
            drop(std::mem::replace(stored, object.clone()));
        }
    }

    /// The object `key`. As kube's store, a namespaced key finds a cluster-scoped object of
    /// that name too.
    pub fn get(&self, key: &ObjectKey) -> Option<Arc<Object>> {
        let objects = self.objects.read().expect("never poisoned");
        if let Some(object) = objects.get(key) {
            return Some(object.clone());
        }
        key.namespace.as_ref()?;
        objects.get(&ObjectKey { namespace: None, name: key.name.clone() }).cloned()
    }

    /// How many objects it holds.
    pub fn count(&self) -> usize {
        self.objects.read().expect("never poisoned").len()
    }

    /// Every object.
    pub fn state(&self) -> Vec<Arc<Object>> {
        self.objects.read().expect("never poisoned").values().cloned().collect()
    }

    /// Every key.
    pub fn keys(&self) -> Vec<ObjectKey> {
        self.objects.read().expect("never poisoned").keys().cloned().collect()
    }

    fn objects(&self) -> std::sync::RwLockWriteGuard<'_, Objects> {
        self.objects.write().expect("never poisoned")
    }

    fn listing(&self) -> std::sync::MutexGuard<'_, Option<Objects>> {
        self.listing.lock().expect("never poisoned")
    }
}

/// Whether `listed` is the version of the object `stored` is: same UID, same resource version.
fn unchanged(stored: &Object, listed: &Object) -> bool {
    let (a, b) = (&stored.metadata, &listed.metadata);
    a.resource_version.is_some() && a.resource_version == b.resource_version && a.uid == b.uid
}

#[cfg(test)]
mod tests {
    use kube::api::{ApiResource, GroupVersionKind};

    use super::*;

    fn object(name: &str, namespace: Option<&str>, version: &str) -> Arc<Object> {
        let resource = ApiResource::from_gvk(&GroupVersionKind::gvk("", "v1", "ConfigMap"));
        let mut o = Object::new(name, &resource);
        o.metadata.namespace = namespace.map(String::from);
        o.metadata.resource_version = Some(version.into());
        Arc::new(o)
    }

    fn key(name: &str, namespace: Option<&str>) -> ObjectKey {
        ObjectKey { namespace: namespace.map(String::from), name: name.into() }
    }

    fn version(store: &Whole, name: &str) -> Option<String> {
        store.get(&key(name, Some("ns"))).and_then(|o| o.metadata.resource_version.clone())
    }

    #[test]
    fn applies_and_deletes_and_shares_the_watch_s_object() {
        let store = Whole::default();
        let a = object("a", Some("ns"), "1");
        store.apply(&Event::Apply(a.clone()));
        assert!(Arc::ptr_eq(&store.get(&key("a", Some("ns"))).unwrap(), &a));
        store.apply(&Event::Apply(object("a", Some("ns"), "2")));
        assert_eq!(version(&store, "a").as_deref(), Some("2"));
        assert_eq!(store.get(&key("a", Some("other"))), None);
        store.apply(&Event::Delete(object("a", Some("ns"), "2")));
        assert_eq!(store.get(&key("a", Some("ns"))), None);
        assert!(store.state().is_empty() && store.keys().is_empty());
    }

    #[test]
    fn a_relist_replaces_the_objects_when_it_is_complete() {
        let store = Whole::default();
        store.apply(&Event::Apply(object("gone", Some("ns"), "1")));
        store.apply(&Event::Apply(object("kept", Some("ns"), "1")));
        store.apply(&Event::Init);
        store.apply(&Event::InitApply(object("kept", Some("ns"), "3")));
        assert_eq!(version(&store, "gone").as_deref(), Some("1"), "still shown during the list");
        assert_eq!(version(&store, "kept").as_deref(), Some("1"));
        store.apply(&Event::InitDone);
        assert_eq!(version(&store, "gone"), None);
        assert_eq!(version(&store, "kept").as_deref(), Some("3"));
        assert_eq!(store.keys(), [key("kept", Some("ns"))]);
    }

    #[test]
    fn a_relist_keeps_the_stored_copy_of_an_unchanged_object_and_takes_a_changed_one() {
        let store = Whole::default();
        let (same, old) = (object("same", Some("ns"), "1"), object("changed", Some("ns"), "1"));
        store.apply(&Event::Apply(same.clone()));
        store.apply(&Event::Apply(old.clone()));
        store.apply(&Event::Init);
        let (listed_same, listed_changed) = (object("same", Some("ns"), "1"), object("changed", Some("ns"), "2"));
        store.apply(&Event::InitApply(listed_same.clone()));
        store.apply(&Event::InitApply(listed_changed.clone()));
        store.apply(&Event::InitDone);
        let kept = store.get(&key("same", Some("ns"))).unwrap();
        assert!(Arc::ptr_eq(&kept, &same), "the stored copy stays");
        assert_eq!(Arc::strong_count(&listed_same), 1, "the list's copy is not held");
        assert!(Arc::ptr_eq(&store.get(&key("changed", Some("ns"))).unwrap(), &listed_changed));
        assert_eq!(Arc::strong_count(&old), 1, "the older version is let go");
    }

    #[test]
    fn a_namespaced_key_finds_a_cluster_scoped_object() {
        let store = Whole::default();
        store.apply(&Event::Apply(object("node", None, "1")));
        assert!(store.get(&key("node", Some("ns"))).is_some());
        assert!(store.get(&key("node", None)).is_some());
    }
}
