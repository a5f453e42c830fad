//! Which watch events reconcile a primary, by the host's rules ([`crate::filter`]): the
//! plugin's filters and predicates, its `filter` export answering plugin terms, asked only when
//! the host would ask it (the same short circuit), with the objects as the host's caches hold
//! them.

use serde_json::{Value, json};

use super::{Guest, Mapper, Settle, View, WatchSpec, World};
use crate::dependent::PrimaryRef;
use crate::filter::{Change, ChangeFilter, Version};
use crate::kind::{KindRef, ObjectKey};
use crate::mapping::PrimaryKind;
use crate::predicate::EventKind;

/// `object` with `resourceVersion` set to `version` when it has none.
fn versioned(mut object: Value, version: &str) -> Value {
    if object["metadata"]["resourceVersion"].is_null() && object["metadata"].is_object() {
        object["metadata"]["resourceVersion"] = json!(version);
    }
    object
}

impl<G: Guest + ?Sized> Settle<'_, G> {
    /// Whether the host reconciles the primary when its watch delivers `new`, the version after
    /// `old` (`None`: first seen, a create): the plugin's filters, generation awareness and
    /// predicate, plugin terms calling the guest's `filter` with the objects cut to the
    /// primary's projection, `old` only for an update. A missing `resourceVersion` is filled in
    /// (`old` at 1, `new` at 2). A version that does not match the label selector never reaches
    /// the host. An error when `new` has no `metadata.name`.
    pub fn reconciles_on(&self, new: Value, old: Option<Value>) -> Result<bool, String> {
        let kind = &self.spec.primary;
        let new = versioned(new, "2");
        let old = old.map(|old| versioned(old, "1"));
        if !self.caches.holds_primary(&new) {
            return Ok(false);
        }
        let key = ObjectKey::of_json(&new).ok_or("the primary needs metadata.name")?;
        let mut filter = ChangeFilter::with_predicate(self.spec.filters.clone(), self.spec.predicate.clone());
        if let Some(old) = &old {
            filter.observe(&key, Version::of_json(old));
        }
        let Some(change) = filter.observe(&key, Version::of_json(&new)) else { return Ok(false) };
        let shape = |object: &Value| self.caches.shaped(kind, object);
        Ok(self.decide(&filter, change, &shape(&new), old.as_ref().map(shape).as_ref()))
    }

    /// Whether a change of an object of `kind` reconciles `primary`: `new` after `old` (`old`
    /// `None`: created; `new` `None`: deleted, `old` its last version). As the host's watches
    /// do: a watch of `kind` selects the object (its label selector), its mapper relates the new
    /// or the old version to `primary`, and its predicate holds, plugin terms calling the
    /// guest's `filter` with the objects cut to the watch's projection. `map-secondary` and
    /// `secondaries-of` read `world`. An error when neither version is given or has a name.
    pub fn reconciles_on_watched(
        &self,
        world: &World,
        primary: &Value,
        kind: &KindRef,
        new: Option<Value>,
        old: Option<Value>,
    ) -> Result<bool, String> {
        let key = ObjectKey::of_json(primary).ok_or("the primary needs metadata.name")?;
        let reference = PrimaryRef {
            kind: self.spec.primary.clone(),
            uid: primary["metadata"]["uid"].as_str().unwrap_or_default().to_owned(),
            key,
        };
        let primary_json = self.caches.shaped(&self.spec.primary, primary).to_string();
        let new = new.map(|new| versioned(new, "2"));
        let old = old.map(|old| versioned(old, "1"));
        let object_key = new
            .as_ref()
            .or(old.as_ref())
            .and_then(ObjectKey::of_json)
            .ok_or_else(|| format!("the changed {kind} needs metadata.name"))?;
        let whole = self.whole(world);
        Ok(self.spec.watches.iter().filter(|watch| watch.kind.same_type(kind)).any(|watch| {
            let maps = |object: &Value| self.maps(watch, &whole, &reference, &primary_json, kind, object);
            if !(new.as_ref().is_some_and(maps) || old.as_ref().is_some_and(maps)) {
                return false;
            }
            let mut filter = ChangeFilter::watch(watch.predicate.clone());
            let shape = |object: &Value| self.caches.shaped(kind, object);
            match (&new, &old) {
                // A deletion: the plugin sees the last version.
                (None, Some(old)) => self.decide(&filter, Change::of(EventKind::Delete), &shape(old), None),
                (None, None) => false,
                (Some(new), old) => {
                    if let Some(old) = old {
                        filter.observe(&object_key, Version::of_json(old));
                    }
                    let Some(change) = filter.observe(&object_key, Version::of_json(new)) else { return false };
                    self.decide(&filter, change, &shape(new), old.as_ref().map(shape).as_ref())
                }
            }
        }))
    }

    /// Decides `change` of `object` (after `old`) with `filter`, the guest's `filter` answering
    /// plugin terms with `old` for an update only, as the host does.
    fn decide(&self, filter: &ChangeFilter, change: Change, object: &Value, old: Option<&Value>) -> bool {
        let event = change.event;
        let old = old.filter(|_| event == EventKind::Update);
        filter.decide_now(change, &mut |name| self.guest.filter(name, event, object, old))
    }

    /// Whether `watch` selects `object` of `kind` and relates it to the primary by its mapper:
    /// owner references to the primary's UID, the primary-name annotations, the plugin's
    /// `map-secondary` or its `secondaries-of` (which read `whole`).
    pub(super) fn maps(
        &self,
        watch: &WatchSpec,
        whole: &View,
        primary: &PrimaryRef,
        primary_json: &str,
        kind: &KindRef,
        object: &Value,
    ) -> bool {
        let primary_kind = PrimaryKind::from(&primary.kind);
        let points_here = |target: &crate::mapping::Target| {
            target.key == primary.key && target.uid.as_deref().is_none_or(|uid| uid == primary.uid)
        };
        if !watch.kind.same_type(kind) {
            return false;
        }
        let selected = watch
            .label_selector
            .as_deref()
            .is_none_or(|s| s.parse::<crate::selector::LabelSelector>().is_ok_and(|s| s.matches_object(object)));
        if !selected {
            return false;
        }
        match watch.mapper {
            Mapper::Owners(owners) => primary_kind.owners_of_json(object, owners).iter().any(points_here),
            Mapper::Annotations => primary_kind.annotated_json(object).is_some_and(|t| points_here(&t)),
            Mapper::Plugin => {
                let namespace = object["metadata"]["namespace"].as_str();
                let refs = self.guest.map_secondary(whole, &object.to_string()).unwrap_or_default();
                primary_kind.named(namespace, refs).iter().any(points_here)
            }
            Mapper::PrimaryReferences => {
                let key = ObjectKey::of_json(object);
                let refs = self.guest.secondaries_of(whole, primary_json).unwrap_or_default();
                refs.iter().any(|(k, namespace, name)| {
                    k.same_type(kind)
                        && key.as_ref().is_some_and(|key| key.name == *name && key.namespace == *namespace)
                })
            }
        }
    }
}
