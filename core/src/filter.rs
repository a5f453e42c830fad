//! Which watch events lead to a reconcile: JOSDK's generation-aware event filtering and
//! controller-runtime's predicates.

use std::collections::{BTreeMap, HashMap};
use std::hash::{DefaultHasher, Hash, Hasher};

use serde::{Deserialize, Serialize};
use serde_json::Value;

use crate::kind::ObjectKey;

/// Which changes of a primary lead to a reconcile.
#[derive(Debug, Clone, PartialEq, Eq, Deserialize, Serialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct Filters {
    /// Skip updates that keep `metadata.generation` (JOSDK `generationAwareEventProcessing`,
    /// controller-runtime `GenerationChangedPredicate`). Kinds without a generation are
    /// reconciled on every new resourceVersion.
    pub generation_aware: bool,
    /// Reconcile objects when first seen: created, or listed at start (predicate `Create`).
    pub on_create: bool,
    /// Reconcile updates that pass generation filtering (predicate `Update`).
    pub on_update: bool,
    /// Reconcile when an object is marked for deletion (predicate `Delete`).
    pub on_delete: bool,
    /// Also reconcile on annotation changes (`AnnotationChangedPredicate`).
    pub on_annotation_change: bool,
    /// Also reconcile on label changes (`LabelChangedPredicate`).
    pub on_label_change: bool,
}

impl Default for Filters {
    /// Generation aware; creates, updates and deletion marking reconcile; metadata changes do not.
    fn default() -> Self {
        Self {
            generation_aware: true,
            on_create: true,
            on_update: true,
            on_delete: true,
            on_annotation_change: false,
            on_label_change: false,
        }
    }
}

/// What the filter looks at in a version of an object: its metadata, as the driver read it.
#[derive(Debug, Clone, PartialEq, Default)]
pub struct Version {
    /// `metadata.uid`.
    pub uid: Option<String>,
    /// `metadata.generation`.
    pub generation: Option<i64>,
    /// `metadata.resourceVersion`.
    pub resource_version: Option<String>,
    /// Whether `metadata.deletionTimestamp` is set.
    pub deleting: bool,
    /// `metadata.finalizers`.
    pub finalizers: Option<Vec<String>>,
    /// `metadata.annotations`.
    pub annotations: Option<BTreeMap<String, String>>,
    /// `metadata.labels`.
    pub labels: Option<BTreeMap<String, String>>,
}

impl Version {
    /// The version of an object given as JSON.
    pub fn of_json(object: &Value) -> Self {
        let metadata = &object["metadata"];
        let text = |field: &str| metadata[field].as_str().map(str::to_owned);
        fn field<T: serde::de::DeserializeOwned>(value: &Value) -> Option<T> {
            serde_json::from_value(value.clone()).ok()
        }
        Self {
            uid: text("uid"),
            generation: metadata["generation"].as_i64(),
            resource_version: text("resourceVersion"),
            deleting: !metadata["deletionTimestamp"].is_null(),
            finalizers: field(&metadata["finalizers"]),
            annotations: field(&metadata["annotations"]),
            labels: field(&metadata["labels"]),
        }
    }
}

/// Decides whether a new version of an object is worth a reconcile.
///
/// The first version of an object is a create, and so is a version with another UID than the
/// one seen before under its name: an object deleted and created again while the watch was down
/// starts at generation 1 again, which generation filtering alone would drop (kube-rs keys its
/// predicates by UID for the same reason). A later version is a delete when it newly
/// carries a deletion timestamp, else an update; with generation awareness an update counts only
/// when the generation or the finalizers changed, so status-only and metadata-only updates
/// (including the host's own status patches) are dropped. Annotation and label changes count
/// when their filters are on.
#[derive(Debug, Default)]
pub struct ChangeFilter {
    filters: Filters,
    seen: HashMap<ObjectKey, Seen>,
}

/// What the filter keeps of the latest version of an object: what it compares, each field it
/// only compares for equality reduced to a 64-bit fingerprint, and labels and annotations only
/// while their filters are on. Copies of every primary's metadata grew with the objects (about
/// 1.3 KB each with two labels and an annotation, most of it the two maps).
#[derive(Debug)]
struct Seen {
    uid: u64,
    generation: Option<i64>,
    resource_version: u64,
    deleting: bool,
    finalizers: u64,
    annotations: Option<u64>,
    labels: Option<u64>,
}

/// A fingerprint of `value`, to compare for equality.
fn fingerprint(value: &impl Hash) -> u64 {
    let mut hasher = DefaultHasher::new();
    value.hash(&mut hasher);
    hasher.finish()
}

impl Seen {
    /// What the filter keeps of `version` under `filters`.
    fn of(version: &Version, filters: &Filters) -> Self {
        Self {
            uid: fingerprint(&version.uid),
            generation: version.generation,
            resource_version: fingerprint(&version.resource_version),
            deleting: version.deleting,
            finalizers: fingerprint(&version.finalizers),
            annotations: filters.on_annotation_change.then(|| fingerprint(&version.annotations)),
            labels: filters.on_label_change.then(|| fingerprint(&version.labels)),
        }
    }
}

impl ChangeFilter {
    /// A filter applying `filters`.
    pub fn new(filters: Filters) -> Self {
        Self { filters, seen: HashMap::new() }
    }

    /// Records `now` as the latest version of `key` and says whether to reconcile it.
    pub fn admit(&mut self, key: &ObjectKey, now: Version) -> bool {
        let f = &self.filters;
        let now = Seen::of(&now, f);
        let admit = match self.seen.get(key) {
            None => f.on_create,
            Some(before) if before.uid != now.uid => f.on_create,
            Some(before) if now.deleting && !before.deleting => f.on_delete,
            Some(before) => {
                let updated = if f.generation_aware && now.generation.is_some() {
                    before.generation != now.generation || before.finalizers != now.finalizers
                } else {
                    before.resource_version != now.resource_version
                };
                (updated && f.on_update)
                    || (f.on_annotation_change && before.annotations != now.annotations)
                    || (f.on_label_change && before.labels != now.labels)
            }
        };
        self.seen.insert(key.clone(), now);
        admit
    }

    /// Forgets a deleted object.
    pub fn forget(&mut self, key: &ObjectKey) {
        self.seen.remove(key);
    }

    /// After a re-list, forgets every object the list did not contain (deleted while the watch
    /// was down) and returns their keys.
    pub fn retain_listed(&mut self, listed: &std::collections::HashSet<ObjectKey>) -> Vec<ObjectKey> {
        let gone: Vec<ObjectKey> = self.seen.keys().filter(|k| !listed.contains(*k)).cloned().collect();
        for key in &gone {
            self.seen.remove(key);
        }
        gone
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn key() -> ObjectKey {
        ObjectKey { namespace: Some("ns".into()), name: "a".into() }
    }

    fn meta(generation: Option<i64>, rv: &str) -> Version {
        Version { generation, resource_version: Some(rv.into()), ..Version::default() }
    }

    #[test]
    fn the_first_version_is_always_admitted() {
        assert!(ChangeFilter::new(Filters::default()).admit(&key(), meta(Some(1), "1")));
    }

    #[test]
    fn a_status_only_update_is_dropped_when_generation_aware() {
        let mut f = ChangeFilter::new(Filters::default());
        f.admit(&key(), meta(Some(1), "1"));
        assert!(!f.admit(&key(), meta(Some(1), "2")));
        assert!(f.admit(&key(), meta(Some(2), "3")));
    }

    #[test]
    fn deletion_and_finalizer_changes_are_admitted_without_a_new_generation() {
        let mut f = ChangeFilter::new(Filters::default());
        f.admit(&key(), meta(Some(1), "1"));
        let mut with_finalizer = meta(Some(1), "2");
        with_finalizer.finalizers = Some(vec!["x".into()]);
        assert!(f.admit(&key(), with_finalizer.clone()));
        let mut deleting = with_finalizer.clone();
        deleting.resource_version = Some("3".into());
        deleting.deleting = true;
        assert!(f.admit(&key(), deleting.clone()));
    }

    #[test]
    fn without_generation_awareness_every_new_resource_version_is_admitted() {
        let mut f = ChangeFilter::new(Filters { generation_aware: false, ..Filters::default() });
        f.admit(&key(), meta(Some(1), "1"));
        assert!(f.admit(&key(), meta(Some(1), "2")));
        assert!(!f.admit(&key(), meta(Some(1), "2")));
    }

    #[test]
    fn kinds_without_a_generation_are_admitted_on_new_resource_versions() {
        let mut f = ChangeFilter::new(Filters::default());
        f.admit(&key(), meta(None, "1"));
        assert!(f.admit(&key(), meta(None, "2")));
    }

    #[test]
    fn a_forgotten_object_is_admitted_again() {
        let mut f = ChangeFilter::new(Filters::default());
        f.admit(&key(), meta(Some(1), "1"));
        f.forget(&key());
        assert!(f.admit(&key(), meta(Some(1), "1")));
    }

    #[test]
    fn annotation_and_label_changes_reconcile_only_when_their_filters_are_on() {
        let annotated = |rv: &str, value: &str| Version {
            annotations: Some([("a".to_string(), value.to_string())].into()),
            labels: Some([("l".to_string(), value.to_string())].into()),
            ..meta(Some(1), rv)
        };
        let mut off = ChangeFilter::new(Filters::default());
        off.admit(&key(), annotated("1", "x"));
        assert!(!off.admit(&key(), annotated("2", "y")));
        let mut on = ChangeFilter::new(Filters { on_annotation_change: true, ..Filters::default() });
        on.admit(&key(), annotated("1", "x"));
        assert!(on.admit(&key(), annotated("2", "y")));
        let mut labels = ChangeFilter::new(Filters { on_label_change: true, ..Filters::default() });
        labels.admit(&key(), annotated("1", "x"));
        assert!(labels.admit(&key(), annotated("2", "y")));
    }

    #[test]
    fn a_relist_forgets_objects_deleted_while_the_watch_was_down() {
        let mut f = ChangeFilter::new(Filters::default());
        let other = ObjectKey { namespace: Some("ns".into()), name: "b".into() };
        f.admit(&key(), meta(Some(1), "1"));
        f.admit(&other, meta(Some(1), "1"));
        let gone = f.retain_listed(&[key()].into_iter().collect());
        assert_eq!(gone, vec![other.clone()]);
        assert!(f.admit(&other, meta(Some(1), "1")), "seen again as new");
        assert!(!f.admit(&key(), meta(Some(1), "1")), "still known");
    }

    #[test]
    fn create_update_and_delete_filters_are_independent() {
        let only_delete = Filters { on_create: false, on_update: false, ..Filters::default() };
        let mut f = ChangeFilter::new(only_delete);
        assert!(!f.admit(&key(), meta(Some(1), "1")));
        assert!(!f.admit(&key(), meta(Some(2), "2")));
        let mut deleting = meta(Some(2), "3");
        deleting.deleting = true;
        assert!(f.admit(&key(), deleting.clone()));
    }

    #[test]
    fn an_object_deleted_and_created_again_unseen_is_a_create() {
        let mut f = ChangeFilter::new(Filters::default());
        let incarnation = |uid: &str, rv: &str| Version { uid: Some(uid.into()), ..meta(Some(1), rv) };
        assert!(f.admit(&key(), incarnation("first", "1")));
        assert!(!f.admit(&key(), incarnation("first", "2")), "a status update");
        assert!(f.admit(&key(), incarnation("second", "7")), "same name and generation, another object");
    }
}
