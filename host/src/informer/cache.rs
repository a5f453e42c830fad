//! A watch's cache: the reflector store, plus the host's own writes the watch has not delivered
//! yet, so that a reconcile reads what the previous one wrote (JOSDK's temporary resource
//! cache). An entry is dropped as soon as the store moves past the version it replaced.

use std::collections::HashMap;
use std::sync::{Arc, Mutex};

use kube::ResourceExt;
use kube::api::{ApiResource, DynamicObject};
use kube::runtime::reflector::{ObjectRef, Store};

use crate::object::ObjectKey;

/// One of the host's writes: the object after it (`None`: deleted) and the version it replaced.
struct Recent {
    replaced: Option<String>,
    object: Option<Arc<DynamicObject>>,
}

/// A watch's store with the host's recent writes laid over it. Cheap to clone.
#[derive(Clone)]
pub struct Cache {
    store: Store<DynamicObject>,
    resource: ApiResource,
    recent: Arc<Mutex<HashMap<ObjectKey, Recent>>>,
}

impl Cache {
    /// A cache over the `store` of objects of `resource`, with no writes of its own yet.
    pub fn new(store: Store<DynamicObject>, resource: ApiResource) -> Self {
        Self { store, resource, recent: Arc::default() }
    }

    fn stored(&self, key: &ObjectKey) -> Option<Arc<DynamicObject>> {
        let mut reference = ObjectRef::<DynamicObject>::new_with(&key.name, self.resource.clone());
        if let Some(ns) = &key.namespace {
            reference = reference.within(ns);
        }
        self.store.get(&reference)
    }

    /// Whether the store has not yet seen the write `recent` made over `stored`.
    fn pending(recent: &Recent, stored: Option<&Arc<DynamicObject>>) -> bool {
        stored.and_then(|o| o.resource_version()) == recent.replaced
    }

    /// The object `key`, as the host last wrote it or as the watch delivered it, whichever is
    /// newer.
    pub fn get(&self, key: &ObjectKey) -> Option<Arc<DynamicObject>> {
        let stored = self.stored(key);
        let mut recent = self.recent.lock().expect("never poisoned");
        match recent.get(key) {
            Some(entry) if Self::pending(entry, stored.as_ref()) => entry.object.clone(),
            Some(_) => {
                recent.remove(key);
                stored
            }
            None => stored,
        }
    }

    /// Every object, with the host's pending writes applied.
    pub fn state(&self) -> Vec<Arc<DynamicObject>> {
        let mut objects = self.store.state();
        let mut recent = self.recent.lock().expect("never poisoned");
        if recent.is_empty() {
            return objects;
        }
        let mut stored: HashMap<ObjectKey, usize> = HashMap::new();
        for (i, o) in objects.iter().enumerate() {
            if let Some(key) = ObjectKey::of(o) {
                stored.insert(key, i);
            }
        }
        recent.retain(|key, entry| Self::pending(entry, stored.get(key).map(|&i| &objects[i])));
        let mut removed = Vec::new();
        for (key, entry) in recent.iter() {
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

    /// Records the host's write of `object`, which replaced version `replaced` (`None`: it
    /// created the object).
    pub fn wrote(&self, object: DynamicObject, replaced: Option<String>) {
        if let Some(key) = ObjectKey::of(&object) {
            let entry = Recent { replaced, object: Some(Arc::new(object)) };
            self.recent.lock().expect("never poisoned").insert(key, entry);
        }
    }

    /// Records that the host deleted `key`, which was at version `replaced`.
    pub fn deleted(&self, key: ObjectKey, replaced: Option<String>) {
        self.recent.lock().expect("never poisoned").insert(key, Recent { replaced, object: None });
    }
}

#[cfg(test)]
mod tests {
    use kube::api::GroupVersionKind;
    use kube::runtime::reflector::store::Writer;
    use kube::runtime::watcher::Event;

    use super::*;

    fn object(name: &str, version: &str, data: &str) -> DynamicObject {
        let resource = ApiResource::from_gvk(&GroupVersionKind::gvk("", "v1", "ConfigMap"));
        let mut o = DynamicObject::new(name, &resource).within("ns").data(serde_json::json!({ "data": { "v": data } }));
        o.metadata.resource_version = Some(version.into());
        o
    }

    fn key(name: &str) -> ObjectKey {
        ObjectKey { namespace: Some("ns".into()), name: name.into() }
    }

    fn data(o: &DynamicObject) -> &str {
        o.data["data"]["v"].as_str().unwrap()
    }

    fn cache() -> (Writer<DynamicObject>, Cache) {
        let resource = ApiResource::from_gvk(&GroupVersionKind::gvk("", "v1", "ConfigMap"));
        let writer = Writer::new(resource.clone());
        let cache = Cache::new(writer.as_reader(), resource);
        (writer, cache)
    }

    #[test]
    fn a_write_is_visible_until_the_watch_delivers_it_or_something_newer() {
        let (mut writer, cache) = cache();
        writer.apply_watcher_event(&Event::Apply(object("a", "1", "old")));
        cache.wrote(object("a", "2", "mine"), Some("1".into()));
        assert_eq!(data(&cache.get(&key("a")).unwrap()), "mine");
        assert_eq!(data(&cache.state()[0]), "mine");
        writer.apply_watcher_event(&Event::Apply(object("a", "3", "someone else's")));
        assert_eq!(data(&cache.get(&key("a")).unwrap()), "someone else's");
        assert_eq!(data(&cache.state()[0]), "someone else's");
    }

    #[test]
    fn created_and_deleted_objects_show_at_once() {
        let (mut writer, cache) = cache();
        writer.apply_watcher_event(&Event::Apply(object("gone", "1", "x")));
        cache.wrote(object("new", "5", "created"), None);
        cache.deleted(key("gone"), Some("1".into()));
        assert!(cache.get(&key("gone")).is_none());
        let names: Vec<String> = cache.state().iter().map(|o| o.name_any()).collect();
        assert_eq!(names, ["new"]);
        writer.apply_watcher_event(&Event::Apply(object("new", "5", "created")));
        writer.apply_watcher_event(&Event::Delete(object("gone", "1", "x")));
        assert_eq!(cache.state().len(), 1);
        assert!(cache.recent.lock().unwrap().is_empty(), "delivered writes are forgotten");
    }
}
