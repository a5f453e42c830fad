//! The store the loop runs on, what the cluster (and the external system) holds, and the
//! writes a pass makes, as the host would make them.

use serde::Serialize;
use serde_json::Value;

use crate::dependent::Phase;
use crate::external::ExternalObject;
use crate::kind::{KindRef, ObjectKey};

/// The store the loop runs on: what the cluster (and the external system) holds.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct World {
    /// Every stored object, by kind: the primary, what the writes left, what was given.
    pub objects: Vec<(KindRef, Value)>,
    /// Objects given as secondaries of the primary, whatever the watches' mappers say.
    pub secondaries: Vec<(KindRef, Value)>,
    /// Dependents' states given for calls outside the loop (the loop gives its own).
    pub dependents: Vec<DependentState>,
    /// The fake external system: the primary's external objects.
    pub external: Vec<ExternalObject>,
    /// The last inbound payload mapped to the primary.
    pub inbound: Option<Value>,
    /// The store's last resourceVersion.
    pub revision: u64,
}

impl World {
    /// Puts `object` of `kind` in place of the one of the same kind, namespace and name, or
    /// adds it.
    pub fn replace(objects: &mut Vec<(KindRef, Value)>, kind: &KindRef, object: Value) {
        let meta = |o: &Value, field: &str| o["metadata"][field].as_str().map(str::to_owned);
        let at = |(k, o): &(KindRef, Value)| {
            k.same_type(kind)
                && meta(o, "namespace") == meta(&object, "namespace")
                && meta(o, "name") == meta(&object, "name")
        };
        match objects.iter_mut().find(|entry| at(entry)) {
            Some(slot) => *slot = (kind.clone(), object),
            None => objects.push((kind.clone(), object)),
        }
    }

    /// The stored object of `kind` at `key`.
    pub fn stored(&self, kind: &KindRef, key: &ObjectKey) -> Option<&Value> {
        self.objects
            .iter()
            .find(|(k, object)| k.same_type(kind) && ObjectKey::of_json(object).as_ref() == Some(key))
            .map(|(_, object)| object)
    }

    /// The stored objects of `kind`, sorted by namespace and name.
    pub fn objects_of(&self, kind: &KindRef) -> Vec<&Value> {
        let mut objects: Vec<&Value> =
            self.objects.iter().filter(|(k, _)| k.same_type(kind)).map(|(_, object)| object).collect();
        objects.sort_by_key(|o| ObjectKey::of_json(o));
        objects
    }
}

/// A dependent's state, given to `reconcile`.
#[derive(Debug, Clone, PartialEq)]
pub struct DependentState {
    /// The dependent's name.
    pub name: String,
    /// Where it stands.
    pub phase: Phase,
    /// Its objects as the store holds them now (for an external dependent: as the external
    /// system does).
    pub objects: Vec<Value>,
}

/// One write of a pass, as the host would make it.
#[derive(Debug, Clone, PartialEq, Serialize)]
#[serde(rename_all = "camelCase")]
pub enum Write {
    /// A dependent's object (or a tracking record) applied: the object as stored afterwards.
    Apply {
        /// The kind, `group/version/Kind`.
        kind: String,
        /// The object.
        object: Value,
    },
    /// A dependent's object deleted.
    Delete {
        /// The kind, `group/version/Kind`.
        kind: String,
        /// Its namespace.
        #[serde(skip_serializing_if = "Option::is_none")]
        namespace: Option<String>,
        /// Its name.
        name: String,
    },
    /// An external object applied to the external system.
    ApplyExternal {
        /// The external dependent.
        dependent: String,
        /// The object's key.
        key: String,
        /// The object.
        object: Value,
    },
    /// An external object deleted from the external system.
    DeleteExternal {
        /// The external dependent.
        dependent: String,
        /// The object's key.
        key: String,
    },
    /// The primary's labels and annotations patched (`null` removes one).
    Metadata {
        /// The merge patch of `metadata`.
        patch: Value,
    },
    /// The primary's status patched.
    Status {
        /// The merge patch of `.status`.
        patch: Value,
    },
}
