//! Which watch events lead to a reconcile: JOSDK's generation-aware event filtering and
//! controller-runtime's predicates.

use std::collections::BTreeMap;
use std::hash::{DefaultHasher, Hash, Hasher};

use serde::{Deserialize, Serialize};
use serde_json::Value;

use crate::kind::ObjectKey;
use crate::predicate::{Changes, EventKind, Predicate, Term};
use crate::table::{KeyMap, KeySet};

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
/// carries a deletion timestamp, else an update; the version seen last, seen again (a re-list),
/// is no change at all.
///
/// Without a predicate: with generation awareness an update counts only when the generation or
/// the finalizers changed, so status-only and metadata-only updates (including the host's own
/// status patches) are dropped. Annotation and label changes count when their filters are on.
///
/// With a predicate ([`ChangeFilter::with_predicate`]), the predicate replaces that update
/// filtering (generation awareness, annotation and label changes): a create passes when
/// `on_create` is on and the predicate holds, an update when `on_update` is on and it holds, a
/// delete when `on_delete` is on and it holds. Its plugin terms are answered by the driver (the
/// host's call of the plugin's `filter`, the FakeHost's of `Reconciler::filter`), and a failed
/// answer admits the change: a needless reconcile is harmless, a lost one is not.
#[derive(Debug, Default)]
pub struct ChangeFilter {
    filters: Filters,
    predicate: Option<Predicate>,
    seen: KeyMap<ObjectKey, Seen>,
}

/// What a new version of an object is, as [`ChangeFilter::observe`] found it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Change {
    /// Create, update or delete.
    pub event: EventKind,
    /// What changed, for an update.
    pub changes: Changes,
    /// Whether the resourceVersion changed (an update without generation awareness).
    pub new_version: bool,
}

impl Change {
    /// A change of kind `event` that is not an update (every built-in term holds).
    pub fn of(event: EventKind) -> Self {
        Self { event, changes: Changes::default(), new_version: true }
    }
}

/// How [`ChangeFilter::decide`] decided.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Verdict<E> {
    /// Reconcile.
    Admit,
    /// Do not.
    Drop,
    /// A plugin term could not be answered: the change is admitted.
    Failed(E),
}

impl<E> Verdict<E> {
    /// Whether the change reconciles.
    pub fn admits(&self) -> bool {
        !matches!(self, Verdict::Drop)
    }
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
    /// What the filter keeps of `version`, with its annotations and labels when `keeps` says.
    fn of(version: &Version, keeps: Keeps) -> Self {
        Self {
            uid: fingerprint(&version.uid),
            generation: version.generation,
            resource_version: fingerprint(&version.resource_version),
            deleting: version.deleting,
            finalizers: fingerprint(&version.finalizers),
            annotations: keeps.annotations.then(|| fingerprint(&version.annotations)),
            labels: keeps.labels.then(|| fingerprint(&version.labels)),
        }
    }
}

/// Which maps of each version the filter compares.
#[derive(Debug, Clone, Copy)]
struct Keeps {
    annotations: bool,
    labels: bool,
}

impl ChangeFilter {
    /// A filter applying `filters`.
    pub fn new(filters: Filters) -> Self {
        Self::with_predicate(filters, None)
    }

    /// A filter applying `filters` and `predicate`, which replaces the update filtering.
    pub fn with_predicate(filters: Filters, predicate: Option<Predicate>) -> Self {
        Self { filters, predicate, seen: KeyMap::new() }
    }

    /// The filter of a watch: every change passes, unless `predicate` says otherwise.
    pub fn watch(predicate: Option<Predicate>) -> Self {
        let everything = Filters {
            generation_aware: false,
            on_create: true,
            on_update: true,
            on_delete: true,
            on_annotation_change: false,
            on_label_change: false,
        };
        Self::with_predicate(everything, predicate)
    }

    /// The predicate, if any.
    pub fn predicate(&self) -> Option<&Predicate> {
        self.predicate.as_ref()
    }

    /// Whether deciding may ask the plugin: its driver then keeps what the plugin is given.
    pub fn asks_plugin(&self) -> bool {
        self.predicate.as_ref().is_some_and(Predicate::asks_plugin)
    }

    fn keeps(&self) -> Keeps {
        let uses = |term| self.predicate.as_ref().is_some_and(|p| p.uses(&term));
        Keeps {
            annotations: self.filters.on_annotation_change || uses(Term::AnnotationsChanged),
            labels: self.filters.on_label_change || uses(Term::LabelsChanged),
        }
    }

    /// Records `now` as the latest version of `key`; returns the change it is, `None` for the
    /// version seen last.
    pub fn observe(&mut self, key: &ObjectKey, now: Version) -> Option<Change> {
        let same_version = now.resource_version.is_some();
        let now = Seen::of(&now, self.keeps());
        let change = match self.seen.get(key) {
            None => Some(Change::of(EventKind::Create)),
            Some(before) if before.uid != now.uid => Some(Change::of(EventKind::Create)),
            Some(before) if same_version && before.resource_version == now.resource_version => None,
            Some(before) if now.deleting && !before.deleting => Some(Change::of(EventKind::Delete)),
            Some(before) => {
                let new_version = before.resource_version != now.resource_version;
                let generation = if now.generation.is_some() {
                    before.generation != now.generation || before.finalizers != now.finalizers
                } else {
                    new_version
                };
                let changes = Changes {
                    generation,
                    labels: before.labels != now.labels,
                    annotations: before.annotations != now.annotations,
                };
                Some(Change { event: EventKind::Update, changes, new_version })
            }
        };
        self.seen.insert(key.clone(), now);
        change
    }

    /// Whether `change` reconciles, before any predicate: the create, update and delete
    /// filters, and without a predicate the update filtering too.
    fn gate(&self, change: &Change) -> bool {
        let f = &self.filters;
        match change.event {
            EventKind::Create => f.on_create,
            EventKind::Delete => f.on_delete,
            EventKind::Generic => true,
            EventKind::Update if self.predicate.is_some() => f.on_update,
            EventKind::Update => {
                let updated = if f.generation_aware { change.changes.generation } else { change.new_version };
                (updated && f.on_update)
                    || (f.on_annotation_change && change.changes.annotations)
                    || (f.on_label_change && change.changes.labels)
            }
        }
    }

    /// Decides `change`; `plugin(name)` answers the predicate's plugin terms, asked only when
    /// the filters pass the change and the answer can still change the result.
    pub async fn decide<'p, E, F, Fut>(&'p self, change: Change, plugin: F) -> Verdict<E>
    where
        F: FnMut(&'p str) -> Fut,
        Fut: Future<Output = Result<bool, E>>,
    {
        if !self.gate(&change) {
            return Verdict::Drop;
        }
        let Some(predicate) = &self.predicate else { return Verdict::Admit };
        match predicate.holds_async(change.event, change.changes, plugin).await {
            Ok(true) => Verdict::Admit,
            Ok(false) => Verdict::Drop,
            Err(error) => Verdict::Failed(error),
        }
    }

    /// [`ChangeFilter::decide`] with a plugin that answers at once.
    pub fn decide_now(&self, change: Change, plugin: &mut dyn FnMut(&str) -> bool) -> bool {
        if !self.gate(&change) {
            return false;
        }
        self.predicate.as_ref().is_none_or(|p| p.holds(change.event, change.changes, plugin))
    }

    /// Records `now` as the latest version of `key` and says whether to reconcile it; plugin
    /// terms of the predicate, if any, are answered by `plugin`.
    pub fn admit_with(&mut self, key: &ObjectKey, now: Version, plugin: &mut dyn FnMut(&str) -> bool) -> bool {
        self.observe(key, now).is_some_and(|change| self.decide_now(change, plugin))
    }

    /// [`ChangeFilter::admit_with`] for a filter whose predicate asks no plugin.
    pub fn admit(&mut self, key: &ObjectKey, now: Version) -> bool {
        debug_assert!(!self.asks_plugin(), "admit_with answers the plugin terms");
        self.admit_with(key, now, &mut |_| true)
    }

    /// Forgets a deleted object.
    pub fn forget(&mut self, key: &ObjectKey) {
        self.seen.swap_remove(key);
    }

    /// After a re-list, forgets every object the list did not contain (deleted while the watch
    /// was down) and returns their keys.
    pub fn retain_listed(&mut self, listed: &KeySet<ObjectKey>) -> Vec<ObjectKey> {
        let gone: Vec<ObjectKey> = self.seen.keys().filter(|k| !listed.contains(*k)).cloned().collect();
        for key in &gone {
            self.seen.swap_remove(key);
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

    fn labelled(rv: &str, generation: i64, labels: &[(&str, &str)]) -> Version {
        let labels = labels.iter().map(|(k, v)| (k.to_string(), v.to_string())).collect();
        Version { uid: Some("u".into()), labels: Some(labels), ..meta(Some(generation), rv) }
    }

    /// generation-changed or (labels-changed and plugin("not-tier")).
    fn not_tier() -> Predicate {
        Predicate::new(vec![
            Term::GenerationChanged,
            Term::LabelsChanged,
            Term::Plugin("not-tier".into()),
            Term::And,
            Term::Or,
        ])
        .unwrap()
    }

    #[test]
    fn a_predicate_replaces_the_update_filtering_and_asks_the_plugin_only_when_it_matters() {
        let mut f = ChangeFilter::with_predicate(Filters::default(), Some(not_tier()));
        assert!(f.asks_plugin());
        let mut asked = 0;
        // The plugin rejects every change it is asked about.
        let mut no = |_: &str| {
            asked += 1;
            false
        };
        assert!(f.admit_with(&key(), labelled("1", 1, &[("tier", "a")]), &mut no), "a create");
        assert!(!f.admit_with(&key(), labelled("2", 1, &[("tier", "b")]), &mut no), "the plugin says no");
        assert!(!f.admit_with(&key(), labelled("3", 1, &[("tier", "b")]), &mut no), "a status update");
        assert!(f.admit_with(&key(), labelled("4", 2, &[("tier", "b")]), &mut no), "a new generation");
        assert_eq!(asked, 1, "only the label change asked the plugin");
        let mut yes = |name: &str| name == "not-tier";
        assert!(f.admit_with(&key(), labelled("5", 2, &[("tier", "b"), ("team", "x")]), &mut yes));
        assert!(!f.admit_with(&key(), labelled("5", 2, &[("tier", "b"), ("team", "x")]), &mut yes), "seen");
    }

    #[test]
    fn with_a_predicate_the_create_update_and_delete_filters_still_apply() {
        let holds = Predicate::new(vec![Term::Plugin("always".into())]).unwrap();
        let filters = Filters { on_create: false, on_update: true, on_delete: false, ..Filters::default() };
        let mut f = ChangeFilter::with_predicate(filters, Some(holds));
        let mut plugin = |_: &str| true;
        assert!(!f.admit_with(&key(), meta(Some(1), "1"), &mut plugin), "no creates");
        assert!(f.admit_with(&key(), meta(Some(1), "2"), &mut plugin), "a status update, by the predicate");
        let deleting = Version { deleting: true, ..meta(Some(1), "3") };
        assert!(!f.admit_with(&key(), deleting, &mut plugin), "no deletes");
        let mut no_updates = ChangeFilter::with_predicate(
            Filters { on_update: false, ..Filters::default() },
            Some(Predicate::new(vec![Term::GenerationChanged]).unwrap()),
        );
        assert!(no_updates.admit(&key(), meta(Some(1), "1")));
        assert!(!no_updates.admit(&key(), meta(Some(2), "2")), "no updates, whatever the predicate");
    }

    #[test]
    fn an_annotation_predicate_sees_annotation_changes_without_the_annotation_filter() {
        let annotations = Predicate::new(vec![Term::AnnotationsChanged]).unwrap();
        let mut f = ChangeFilter::with_predicate(Filters::default(), Some(annotations));
        let annotated = |rv: &str, value: &str| Version {
            annotations: Some([("a".to_string(), value.to_string())].into()),
            ..meta(Some(1), rv)
        };
        assert!(f.admit(&key(), annotated("1", "x")));
        assert!(f.admit(&key(), annotated("2", "y")));
        assert!(!f.admit(&key(), annotated("3", "y")), "a status update");
        let spec = Version { generation: Some(2), ..annotated("4", "y") };
        assert!(!f.admit(&key(), spec), "a new generation: not the predicate's concern");
    }

    #[test]
    fn a_watch_passes_every_change_unless_its_predicate_rejects_it() {
        let mut all = ChangeFilter::watch(None);
        assert!(all.admit(&key(), meta(None, "1")));
        assert!(all.admit(&key(), meta(None, "2")));
        assert!(!all.admit(&key(), meta(None, "2")), "the same version again");
        let data = Predicate::new(vec![Term::Plugin("data".into())]).unwrap();
        let mut some = ChangeFilter::watch(Some(data));
        let mut asked = Vec::new();
        let mut plugin = |name: &str| {
            asked.push(name.to_owned());
            false
        };
        assert!(!some.admit_with(&key(), meta(None, "1"), &mut plugin));
        assert_eq!(asked, ["data"], "a plugin term is asked for creates too");
    }

    #[test]
    fn a_plugin_that_cannot_answer_admits_the_change() {
        let f = ChangeFilter::with_predicate(Filters::default(), Some(not_tier()));
        let change = Change {
            event: EventKind::Update,
            changes: Changes { labels: true, ..Changes::default() },
            new_version: true,
        };
        let decided = f.decide(change, |_| std::future::ready(Err::<bool, _>("trapped")));
        let mut decided = std::pin::pin!(decided);
        let poll = decided.as_mut().poll(&mut std::task::Context::from_waker(std::task::Waker::noop()));
        let std::task::Poll::Ready(verdict) = poll else { panic!("ready at once") };
        assert_eq!(verdict, Verdict::Failed("trapped"));
        assert!(verdict.admits());
        assert!(!Verdict::<()>::Drop.admits());
    }
}
