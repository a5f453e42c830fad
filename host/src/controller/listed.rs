//! In what order a (re-)list's primaries are reconciled. Every listed primary is reconciled once,
//! as in JOSDK and controller-runtime; those the list shows with work waiting go first, as live
//! changes do, and the rest, which look settled, at background priority. A host that restarts
//! with 10,000 settled objects and one changed while it was down reconciles the changed one
//! first instead of behind thousands that need nothing.
//!
//! What tells work waiting from settled is what the host itself leaves on a primary it
//! reconciled, where that record is reliable:
//! - the plugin's finalizer, added by the first run: a primary without it was never reconciled;
//! - `status.observedGeneration`, which the host writes after every successful run of a plugin
//!   that keeps conditions or returns a status: a primary whose generation moved past it has a
//!   change waiting.
//!
//! A plugin that keeps no conditions and returns no status (or leaves `observedGeneration` out of
//! it) has its primaries' statuses without an `observedGeneration`, settled or not: taking its
//! absence for work waiting put every listed primary first, and live changes queued behind them
//! all. So a primary without one is judged by the rest of the list: when another listed primary
//! records an observed generation, this plugin's runs record them and this one was never brought
//! to a generation, so it goes first; when none does, the plugin records none, the absence says
//! nothing, and the primary counts as settled unless its finalizer or deletion says otherwise.
//! A new primary of a plugin that records neither a finalizer nor an observed generation then
//! waits behind the list, like every other: nothing reliable marks it. The host's own
//! managedFields entries do not help: its status and metadata writes are merge patches (operation
//! `Update`), whose entries the caches drop (they keep wasmop's server-side apply entries only),
//! and a plugin that writes no status leaves no write at all.

use wasmop_core::table::KeySet;

use crate::informer::Listing;
use crate::object::ObjectKey;
use crate::scheduler::Priority;
use crate::wire::Object;

/// The primary watch's list in progress: what it shows, to find objects deleted while the watch
/// was down, and the primaries it changed, enqueued once the store shows them, in the order
/// [`Triage`] gives.
#[derive(Debug, Default)]
pub(super) struct List {
    listing: Listing,
    triage: Triage,
}

impl List {
    /// A (re-)list starts: see [`Listing::restart`]; the triage starts over.
    pub(super) fn restart(&mut self) {
        self.listing.restart();
        self.triage = Triage::default();
    }

    /// The list shows `key`.
    pub(super) fn shows(&mut self, key: &ObjectKey) {
        self.listing.listed(key.clone());
    }

    /// Notes a listed primary for the order of the runs: see [`Triage::listed`].
    pub(super) fn triage(&mut self, key: &ObjectKey, object: &Object, finalizer: Option<&str>, reconcile: bool) {
        self.triage.listed(key, object, finalizer, reconcile);
    }

    /// Reconciles `key` once the list ends.
    pub(super) fn defer(&mut self, key: ObjectKey) {
        self.listing.defer([key]);
    }

    /// Ends the list: the keys it showed, and the primaries to reconcile with their priorities.
    /// A primary deferred before its list started over and not listed again is gone.
    pub(super) fn end(&mut self) -> (KeySet<ObjectKey>, Vec<(ObjectKey, Priority)>) {
        let (listed, changed) = std::mem::take(&mut self.listing).end();
        let triage = std::mem::take(&mut self.triage);
        let runs = changed
            .into_iter()
            .filter(|key| listed.contains(key))
            .map(|key| {
                let priority = triage.priority(&key);
                (key, priority)
            })
            .collect();
        (listed, runs)
    }
}

/// What the list in progress shows, for the order of its primaries.
#[derive(Debug, Default)]
struct Triage {
    /// Primaries with work waiting by the host's own records.
    waiting: KeySet<ObjectKey>,
    /// Primaries whose status records no observed generation, to judge once the list is known.
    unrecorded: KeySet<ObjectKey>,
    /// Some listed primary's status records an observed generation.
    records_generations: bool,
}

/// One listed primary, as its own records show it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Looks {
    /// Work is waiting: it is being deleted, lacks the plugin's finalizer or has a generation
    /// its status has not observed.
    Waiting,
    /// Its status observed its generation, or its kind has none.
    Settled,
    /// Its status records no observed generation.
    Unrecorded,
}

impl Triage {
    /// Notes a listed primary: every one is evidence of whether the plugin records observed
    /// generations; `reconcile` (with the plugin's `finalizer`) when it will be reconciled.
    fn listed(&mut self, key: &ObjectKey, object: &Object, finalizer: Option<&str>, reconcile: bool) {
        self.records_generations |= observed_generation(object).is_some();
        if reconcile {
            match looks(object, finalizer) {
                Looks::Waiting => self.waiting.insert(key.clone()),
                Looks::Unrecorded => self.unrecorded.insert(key.clone()),
                Looks::Settled => false,
            };
        }
    }

    /// The priority of a listed primary once the list has ended: [`Priority::Live`] when it has
    /// work waiting, [`Priority::Background`] when it looks settled (see the module docs).
    fn priority(&self, key: &ObjectKey) -> Priority {
        let unrecorded_waits = self.records_generations && self.unrecorded.contains(key);
        if self.waiting.contains(key) || unrecorded_waits { Priority::Live } else { Priority::Background }
    }
}

/// How `object` looks by its own records, with the plugin's `finalizer`.
fn looks(object: &Object, finalizer: Option<&str>) -> Looks {
    let meta = &object.metadata;
    let deleting = meta.deletion_timestamp.is_some();
    let unmarked = finalizer.is_some_and(|f| !meta.finalizers.iter().flatten().any(|g| g == f));
    if deleting || unmarked {
        return Looks::Waiting;
    }
    match (meta.generation, observed_generation(object)) {
        (None, _) => Looks::Settled,
        (Some(_), None) => Looks::Unrecorded,
        (Some(generation), Some(observed)) if observed == generation => Looks::Settled,
        (Some(_), Some(_)) => Looks::Waiting,
    }
}

/// The generation `object`'s status says it observed.
fn observed_generation(object: &Object) -> Option<i64> {
    object.data.pointer("/status/observedGeneration").as_ref().and_then(serde_json::Value::as_i64)
}

#[cfg(test)]
mod tests {
    use kube::api::{ApiResource, GroupVersionKind};
    use serde_json::json;

    use super::*;

    fn object(generation: Option<i64>, status: serde_json::Value, finalizers: &[&str]) -> Object {
        let resource = ApiResource::from_gvk(&GroupVersionKind::gvk("g", "v1", "K"));
        let mut o = Object::new("a", &resource).within("ns").data(json!({ "spec": {}, "status": status }));
        o.metadata.generation = generation;
        o.metadata.finalizers = Some(finalizers.iter().map(|f| f.to_string()).collect());
        o
    }

    fn deleting(mut o: Object) -> Object {
        o.metadata.deletion_timestamp = Some(k8s_openapi::apimachinery::pkg::apis::meta::v1::Time(
            "2026-11-25T09:00:00Z".parse().expect("a timestamp"),
        ));
        o
    }

    fn key(name: &str) -> ObjectKey {
        ObjectKey { namespace: Some("ns".into()), name: name.into() }
    }

    /// The priorities of a list of named primaries, all reconciled, with `finalizer`.
    fn triage(list: &[(&str, Object)], finalizer: Option<&str>) -> Vec<(String, Priority)> {
        let mut triage = Triage::default();
        for (name, o) in list {
            triage.listed(&key(name), o, finalizer, true);
        }
        list.iter().map(|(name, _)| (name.to_string(), triage.priority(&key(name)))).collect()
    }

    fn live(names: &[&str], list: &[(String, Priority)]) -> bool {
        list.iter().all(|(name, p)| (*p == Priority::Live) == names.contains(&name.as_str()))
    }

    #[test]
    fn a_primary_whose_status_observed_its_generation_is_settled() {
        let settled = object(Some(3), json!({ "observedGeneration": 3 }), &["f"]);
        assert_eq!(triage(&[("a", settled.clone())], Some("f")), [("a".into(), Priority::Background)]);
        assert_eq!(triage(&[("a", settled)], None), [("a".into(), Priority::Background)]);
        // Kinds without generations have nothing to observe.
        assert_eq!(triage(&[("a", object(None, json!({}), &[]))], None), [("a".into(), Priority::Background)]);
    }

    #[test]
    fn a_changed_unmarked_or_deleting_primary_goes_first() {
        let list = [
            ("changed", object(Some(4), json!({ "observedGeneration": 3 }), &["f"])),
            ("unmarked", object(Some(3), json!({ "observedGeneration": 3 }), &[])),
            ("deleting", deleting(object(Some(3), json!({ "observedGeneration": 3 }), &["f"]))),
            ("settled", object(Some(3), json!({ "observedGeneration": 3 }), &["f"])),
        ];
        let priorities = triage(&list, Some("f"));
        assert!(live(&["changed", "unmarked", "deleting"], &priorities), "{priorities:?}");
    }

    #[test]
    fn a_plugin_that_records_no_generation_leaves_its_settled_primaries_in_the_background() {
        // Conditions off, no status: no primary's status has an observedGeneration.
        let list = [
            ("settled", object(Some(5), json!(null), &["f"])),
            ("status", object(Some(2), json!({ "phase": "Up" }), &["f"])),
            ("new", object(Some(1), json!(null), &[])),
            ("deleting", deleting(object(Some(2), json!(null), &["f"]))),
        ];
        let priorities = triage(&list, Some("f"));
        assert!(live(&["new", "deleting"], &priorities), "{priorities:?}");
        // Without a finalizer, nothing tells a new primary from a settled one.
        let priorities = triage(&list[..3], None);
        assert!(live(&[], &priorities), "{priorities:?}");
    }

    #[test]
    fn a_primary_never_brought_to_a_generation_goes_first_when_the_plugin_records_them() {
        for finalizer in [Some("f"), None] {
            // The new primary is listed before the evidence and after it.
            let list = [
                ("new", object(Some(1), json!(null), &["f"])),
                ("settled", object(Some(3), json!({ "observedGeneration": 3 }), &["f"])),
                ("failing", object(Some(2), json!({ "conditions": [] }), &["f"])),
            ];
            let priorities = triage(&list, finalizer);
            assert!(live(&["new", "failing"], &priorities), "{finalizer:?}: {priorities:?}");
        }
    }

    #[test]
    fn a_primary_left_out_of_the_reconcile_still_counts_as_evidence() {
        let mut triage = Triage::default();
        triage.listed(&key("new"), &object(Some(1), json!(null), &[]), None, true);
        triage.listed(&key("unchanged"), &object(Some(3), json!({ "observedGeneration": 3 }), &[]), None, false);
        assert_eq!(triage.priority(&key("new")), Priority::Live);
        assert_eq!(triage.priority(&key("unchanged")), Priority::Background);
    }
}
