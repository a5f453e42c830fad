//! Which watch events lead to a reconcile: JOSDK's generation-aware event filtering and
//! controller-runtime's predicates.

use std::collections::{BTreeMap, HashMap};

use k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;
use serde::Deserialize;

use crate::object::ObjectKey;
use crate::runtime::bindings::wasmop::plugin::types::PluginConfig;

/// Which changes of a primary lead to a reconcile.
#[derive(Debug, Clone, PartialEq, Eq, Deserialize)]
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

impl Filters {
    /// The filters a plugin's `describe()` asks for.
    pub fn from_config(config: &PluginConfig) -> Self {
        let f = &config.filters;
        Self {
            generation_aware: config.generation_aware,
            on_create: f.on_create,
            on_update: f.on_update,
            on_delete: f.on_delete,
            on_annotation_change: f.on_annotation_change,
            on_label_change: f.on_label_change,
        }
    }
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

/// What the filter remembers of the last seen version of an object.
#[derive(Debug, Clone, PartialEq)]
struct Seen {
    uid: Option<String>,
    generation: Option<i64>,
    resource_version: Option<String>,
    deleting: bool,
    finalizers: Option<Vec<String>>,
    annotations: Option<BTreeMap<String, String>>,
    labels: Option<BTreeMap<String, String>>,
}

impl Seen {
    fn of(meta: &ObjectMeta) -> Self {
        Self {
            uid: meta.uid.clone(),
            generation: meta.generation,
            resource_version: meta.resource_version.clone(),
            deleting: meta.deletion_timestamp.is_some(),
            finalizers: meta.finalizers.clone(),
            annotations: meta.annotations.clone(),
            labels: meta.labels.clone(),
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

impl ChangeFilter {
    /// A filter applying `filters`.
    pub fn new(filters: Filters) -> Self {
        Self { filters, seen: HashMap::new() }
    }

    /// Records `meta` as the latest version of `key` and says whether to reconcile it.
    pub fn admit(&mut self, key: &ObjectKey, meta: &ObjectMeta) -> bool {
        let now = Seen::of(meta);
        let f = &self.filters;
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

    fn meta(generation: Option<i64>, rv: &str) -> ObjectMeta {
        ObjectMeta { generation, resource_version: Some(rv.into()), ..ObjectMeta::default() }
    }

    #[test]
    fn the_first_version_is_always_admitted() {
        assert!(ChangeFilter::new(Filters::default()).admit(&key(), &meta(Some(1), "1")));
    }

    #[test]
    fn a_status_only_update_is_dropped_when_generation_aware() {
        let mut f = ChangeFilter::new(Filters::default());
        f.admit(&key(), &meta(Some(1), "1"));
        assert!(!f.admit(&key(), &meta(Some(1), "2")));
        assert!(f.admit(&key(), &meta(Some(2), "3")));
    }

    #[test]
    fn deletion_and_finalizer_changes_are_admitted_without_a_new_generation() {
        let mut f = ChangeFilter::new(Filters::default());
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
        let mut f = ChangeFilter::new(Filters { generation_aware: false, ..Filters::default() });
        f.admit(&key(), &meta(Some(1), "1"));
        assert!(f.admit(&key(), &meta(Some(1), "2")));
        assert!(!f.admit(&key(), &meta(Some(1), "2")));
    }

    #[test]
    fn kinds_without_a_generation_are_admitted_on_new_resource_versions() {
        let mut f = ChangeFilter::new(Filters::default());
        f.admit(&key(), &meta(None, "1"));
        assert!(f.admit(&key(), &meta(None, "2")));
    }

    #[test]
    fn a_forgotten_object_is_admitted_again() {
        let mut f = ChangeFilter::new(Filters::default());
        f.admit(&key(), &meta(Some(1), "1"));
        f.forget(&key());
        assert!(f.admit(&key(), &meta(Some(1), "1")));
    }

    #[test]
    fn annotation_and_label_changes_reconcile_only_when_their_filters_are_on() {
        let annotated = |rv: &str, value: &str| ObjectMeta {
            annotations: Some([("a".to_string(), value.to_string())].into()),
            labels: Some([("l".to_string(), value.to_string())].into()),
            ..meta(Some(1), rv)
        };
        let mut off = ChangeFilter::new(Filters::default());
        off.admit(&key(), &annotated("1", "x"));
        assert!(!off.admit(&key(), &annotated("2", "y")));
        let mut on = ChangeFilter::new(Filters { on_annotation_change: true, ..Filters::default() });
        on.admit(&key(), &annotated("1", "x"));
        assert!(on.admit(&key(), &annotated("2", "y")));
        let mut labels = ChangeFilter::new(Filters { on_label_change: true, ..Filters::default() });
        labels.admit(&key(), &annotated("1", "x"));
        assert!(labels.admit(&key(), &annotated("2", "y")));
    }

    #[test]
    fn a_relist_forgets_objects_deleted_while_the_watch_was_down() {
        let mut f = ChangeFilter::new(Filters::default());
        let other = ObjectKey { namespace: Some("ns".into()), name: "b".into() };
        f.admit(&key(), &meta(Some(1), "1"));
        f.admit(&other, &meta(Some(1), "1"));
        let gone = f.retain_listed(&[key()].into_iter().collect());
        assert_eq!(gone, vec![other.clone()]);
        assert!(f.admit(&other, &meta(Some(1), "1")), "seen again as new");
        assert!(!f.admit(&key(), &meta(Some(1), "1")), "still known");
    }

    #[test]
    fn create_update_and_delete_filters_are_independent() {
        let only_delete = Filters { on_create: false, on_update: false, ..Filters::default() };
        let mut f = ChangeFilter::new(only_delete);
        assert!(!f.admit(&key(), &meta(Some(1), "1")));
        assert!(!f.admit(&key(), &meta(Some(2), "2")));
        let mut deleting = meta(Some(2), "3");
        deleting.deletion_timestamp = Some(k8s_openapi::apimachinery::pkg::apis::meta::v1::Time(Default::default()));
        assert!(f.admit(&key(), &deleting));
    }

    #[test]
    fn an_object_deleted_and_created_again_unseen_is_a_create() {
        let mut f = ChangeFilter::new(Filters::default());
        let incarnation = |uid: &str, rv: &str| ObjectMeta { uid: Some(uid.into()), ..meta(Some(1), rv) };
        assert!(f.admit(&key(), &incarnation("first", "1")));
        assert!(!f.admit(&key(), &incarnation("first", "2")), "a status update");
        assert!(f.admit(&key(), &incarnation("second", "7")), "same name and generation, another object");
    }
}
