//! Which watch events lead to a reconcile (JOSDK generation-aware event filtering).

use std::collections::HashMap;

use k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;

use crate::object::ObjectKey;

/// What the filter remembers of the last admitted version of an object.
#[derive(Debug, Clone, PartialEq)]
struct Seen {
    generation: Option<i64>,
    resource_version: Option<String>,
    deleting: bool,
    finalizers: Option<Vec<String>>,
}

impl Seen {
    fn of(meta: &ObjectMeta) -> Self {
        Self {
            generation: meta.generation,
            resource_version: meta.resource_version.clone(),
            deleting: meta.deletion_timestamp.is_some(),
            finalizers: meta.finalizers.clone(),
        }
    }
}

/// Decides whether a new version of an object is worth a reconcile.
///
/// The first version of every object is admitted (so every object is reconciled once at start).
/// With generation awareness, later versions are admitted only when `metadata.generation`
/// changed, or deletion was requested, or the finalizers changed: status-only and metadata-only
/// updates (including the host's own status patches) are dropped. Kinds without a generation,
/// and plugins that turn generation awareness off, are admitted on every new resourceVersion.
#[derive(Debug, Default)]
pub struct ChangeFilter {
    generation_aware: bool,
    seen: HashMap<ObjectKey, Seen>,
}

impl ChangeFilter {
    /// A filter; `generation_aware` as the plugin's configuration says.
    pub fn new(generation_aware: bool) -> Self {
        Self { generation_aware, seen: HashMap::new() }
    }

    /// Records `meta` as the latest version of `key` and says whether to reconcile it.
    pub fn admit(&mut self, key: &ObjectKey, meta: &ObjectMeta) -> bool {
        let now = Seen::of(meta);
        let admit = match self.seen.get(key) {
            None => true,
            Some(before) if self.generation_aware && now.generation.is_some() => {
                before.generation != now.generation
                    || before.deleting != now.deleting
                    || before.finalizers != now.finalizers
            }
            Some(before) => before.resource_version != now.resource_version,
        };
        self.seen.insert(key.clone(), now);
        admit
    }

    /// Forgets a deleted object.
    pub fn forget(&mut self, key: &ObjectKey) {
        self.seen.remove(key);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn key() -> ObjectKey {
        ObjectKey { namespace: Some("ns".into()), name: "a".into() }
    }

    fn meta(generation: Option<i64>, rv: &str) -> ObjectMeta {
        ObjectMeta { generation, resource_version: Some(rv.into()), ..ObjectMeta::default() }
    }

    #[test]
    fn the_first_version_is_always_admitted() {
        assert!(ChangeFilter::new(true).admit(&key(), &meta(Some(1), "1")));
    }

    #[test]
    fn a_status_only_update_is_dropped_when_generation_aware() {
        let mut f = ChangeFilter::new(true);
        f.admit(&key(), &meta(Some(1), "1"));
        assert!(!f.admit(&key(), &meta(Some(1), "2")));
        assert!(f.admit(&key(), &meta(Some(2), "3")));
    }

    #[test]
    fn deletion_and_finalizer_changes_are_admitted_without_a_new_generation() {
        let mut f = ChangeFilter::new(true);
        f.admit(&key(), &meta(Some(1), "1"));
        let mut with_finalizer = meta(Some(1), "2");
        with_finalizer.finalizers = Some(vec!["x".into()]);
        assert!(f.admit(&key(), &with_finalizer));
        let mut deleting = with_finalizer.clone();
        deleting.resource_version = Some("3".into());
        deleting.deletion_timestamp = Some(k8s_openapi::apimachinery::pkg::apis::meta::v1::Time(Default::default()));
        assert!(f.admit(&key(), &deleting));
    }

    #[test]
    fn without_generation_awareness_every_new_resource_version_is_admitted() {
        let mut f = ChangeFilter::new(false);
        f.admit(&key(), &meta(Some(1), "1"));
        assert!(f.admit(&key(), &meta(Some(1), "2")));
        assert!(!f.admit(&key(), &meta(Some(1), "2")));
    }

    #[test]
    fn kinds_without_a_generation_are_admitted_on_new_resource_versions() {
        let mut f = ChangeFilter::new(true);
        f.admit(&key(), &meta(None, "1"));
        assert!(f.admit(&key(), &meta(None, "2")));
    }

    #[test]
    fn a_forgotten_object_is_admitted_again() {
        let mut f = ChangeFilter::new(true);
        f.admit(&key(), &meta(Some(1), "1"));
        f.forget(&key());
        assert!(f.admit(&key(), &meta(Some(1), "1")));
    }
}
