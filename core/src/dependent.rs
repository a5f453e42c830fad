//! A declared dependent (JOSDK's managed dependent resource) and how the plugin's desired
//! objects become the objects the driver applies: type, namespace, management labels and the
//! tie to the primary.

use serde_json::{Value, json};

use crate::check::Check;
use crate::kind::{KindRef, ObjectKey};

/// The label naming the plugin that manages an object.
pub const MANAGED_BY_LABEL: &str = "wasmop.dev/managed-by";
/// The label naming the dependent an object belongs to.
pub const DEPENDENT_LABEL: &str = "wasmop.dev/dependent";
/// The annotation naming an object's primary (with [`PRIMARY_NAMESPACE_ANNOTATION`]), for
/// objects owner references cannot reach.
pub const PRIMARY_NAME_ANNOTATION: &str = "wasmop.dev/primary-name";
/// The annotation naming the namespace of an object's primary.
pub const PRIMARY_NAMESPACE_ANNOTATION: &str = "wasmop.dev/primary-namespace";

/// How a dependent is tied to its primary.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Ownership {
    /// A controller owner reference: the garbage collector deletes the dependent with its primary.
    OwnerReference,
    /// The primary-name/namespace annotations, where owner references cannot reach.
    Annotations,
}

/// A kind of object the plugin's reconciles want to exist.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct DependentSpec {
    /// Unique within the plugin.
    pub name: String,
    /// The kind of the objects.
    pub kind: KindRef,
    /// Observed, never written.
    pub read_only: bool,
    /// Dependents that must be ready before this one is reconciled.
    pub depends_on: Vec<String>,
    /// When the objects count as ready; `None`: as soon as they exist.
    pub ready_when: Option<Check>,
    /// Evaluated on the primary: when false, the objects are deleted.
    pub reconcile_when: Option<Check>,
    /// Whether the dependent is ready when the plugin desires zero objects of it.
    pub ready_when_empty: bool,
    /// The one namespace its objects live in, when declared: the default namespace of its
    /// desired objects, and the only one they may name.
    pub namespace: Option<String>,
    /// As declared; see [`DependentSpec::ownership`] for the one in effect.
    pub declared_ownership: Ownership,
    /// Take over an existing object someone else manages (a forced apply); without it such an
    /// object is reported as a conflict and left alone.
    pub adopt: bool,
    /// Set for an external dependent (objects outside the cluster, kept by the plugin's
    /// `apply-external` and `delete-external`): where their IDs are tracked. Its `kind` is
    /// [`DependentSpec::external`]'s placeholder and means nothing.
    pub external: Option<crate::external::Tracking>,
}

impl DependentSpec {
    /// An external dependent `name`: no Kubernetes kind, never owned or adopted.
    pub fn external(
        name: String,
        depends_on: Vec<String>,
        ready_when: Option<Check>,
        reconcile_when: Option<Check>,
        ready_when_empty: bool,
        tracking: crate::external::Tracking,
    ) -> Self {
        Self {
            name,
            kind: KindRef {
                group: "external.wasmop.dev".into(),
                version: "v1".into(),
                kind: "External".into(),
                plural: None,
                namespaced: false,
            },
            read_only: false,
            depends_on,
            ready_when,
            reconcile_when,
            ready_when_empty,
            namespace: None,
            declared_ownership: Ownership::OwnerReference,
            adopt: false,
            external: Some(tracking),
        }
    }

    /// The ownership in effect for a primary of kind `primary`: a cluster-scoped dependent of a
    /// namespaced primary cannot carry an owner reference to it, so it uses annotations.
    pub fn ownership(&self, primary: &KindRef) -> Ownership {
        if primary.namespaced && !self.kind.namespaced { Ownership::Annotations } else { self.declared_ownership }
    }
}

/// Where a dependent stands after the workflow ran.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Phase {
    /// Applied (or observed) and its ready condition holds.
    Ready,
    /// Applied (or observed), but its ready condition does not hold yet.
    NotReady,
    /// Not reconciled: a dependency is not ready, or its reconcile condition is false (read-only).
    Skipped,
    /// Its reconcile condition is false: its objects were deleted.
    Deleted,
}

/// One object the plugin wants for a dependent.
#[derive(Debug, Clone, PartialEq)]
pub struct Desired {
    /// The dependent's name.
    pub dependent: String,
    /// The object: `metadata.name` (and `namespace`) and the fields the plugin manages.
    pub object: Value,
    /// Leave the object as the cluster holds it: neither applied nor pruned.
    pub keep: bool,
    /// For an external dependent: the object's key among the primary's objects of it.
    pub key: Option<String>,
}

/// The primary whose dependents are reconciled.
#[derive(Debug, Clone)]
pub struct PrimaryRef {
    /// The primary's kind.
    pub kind: KindRef,
    /// Its key.
    pub key: ObjectKey,
    /// Its UID, for owner references.
    pub uid: String,
}

/// The key of a desired object of `spec`: its name, in its namespace, else the primary's.
pub fn key_of(spec: &DependentSpec, primary: &PrimaryRef, desired: &Value) -> Result<ObjectKey, String> {
    let name = desired["metadata"]["name"].as_str().filter(|n| !n.is_empty()).ok_or("metadata.name is missing")?;
    let namespace = if spec.kind.namespaced {
        let given = desired["metadata"]["namespace"].as_str().filter(|ns| !ns.is_empty());
        let ns = given.map(String::from).or_else(|| spec.namespace.clone()).or_else(|| primary.key.namespace.clone());
        Some(ns.ok_or("a namespaced dependent of a cluster-scoped primary needs a namespace")?)
    } else {
        None
    };
    Ok(ObjectKey { namespace, name: name.to_string() })
}

/// Completes a desired object of `spec` for `plugin`: type, namespace, the management labels
/// and the tie to the primary. The type and namespace were checked before (`capability`).
pub fn prepare(spec: &DependentSpec, plugin: &str, primary: &PrimaryRef, key: &ObjectKey, mut desired: Value) -> Value {
    desired["apiVersion"] = json!(spec.kind.api_version());
    desired["kind"] = json!(spec.kind.kind);
    let metadata = &mut desired["metadata"];
    if let Some(ns) = &key.namespace {
        metadata["namespace"] = json!(ns);
    }
    metadata["labels"][MANAGED_BY_LABEL] = json!(plugin);
    metadata["labels"][DEPENDENT_LABEL] = json!(spec.name);
    match spec.ownership(&primary.kind) {
        Ownership::OwnerReference => {
            metadata["ownerReferences"] = json!([{
                "apiVersion": primary.kind.api_version(),
                "kind": primary.kind.kind,
                "name": primary.key.name,
                "uid": primary.uid,
                "controller": true,
                "blockOwnerDeletion": true,
            }]);
        }
        Ownership::Annotations => {
            metadata["annotations"][PRIMARY_NAME_ANNOTATION] = json!(primary.key.name);
            if let Some(ns) = &primary.key.namespace {
                metadata["annotations"][PRIMARY_NAMESPACE_ANNOTATION] = json!(ns);
            }
        }
    }
    desired
}

/// Whether `object` belongs to the dependent `spec` of `primary`: it carries the dependent's
/// label (read-only dependents' objects carry none) and points at the primary by the
/// dependent's ownership.
pub fn belongs(spec: &DependentSpec, primary: &PrimaryRef, object: &Value) -> bool {
    if spec.read_only {
        return true;
    }
    let metadata = &object["metadata"];
    if metadata["labels"][DEPENDENT_LABEL].as_str() != Some(spec.name.as_str()) {
        return false;
    }
    match spec.ownership(&primary.kind) {
        Ownership::OwnerReference => metadata["ownerReferences"]
            .as_array()
            .into_iter()
            .flatten()
            .any(|r| r["uid"].as_str() == Some(primary.uid.as_str()) && r["controller"] == true),
        Ownership::Annotations => {
            let annotations = &metadata["annotations"];
            annotations[PRIMARY_NAME_ANNOTATION].as_str() == Some(primary.key.name.as_str())
                && annotations[PRIMARY_NAMESPACE_ANNOTATION].as_str() == primary.key.namespace.as_deref()
        }
    }
}

#[cfg(test)]
pub(crate) mod tests {
    use super::*;

    /// A ConfigMap dependent named `name` depending on `depends_on`.
    pub(crate) fn config_maps(name: &str, depends_on: &[&str]) -> DependentSpec {
        DependentSpec {
            name: name.into(),
            kind: KindRef {
                group: String::new(),
                version: "v1".into(),
                kind: "ConfigMap".into(),
                plural: None,
                namespaced: true,
            },
            read_only: false,
            depends_on: depends_on.iter().map(|s| s.to_string()).collect(),
            ready_when: None,
            reconcile_when: None,
            ready_when_empty: true,
            namespace: None,
            declared_ownership: Ownership::OwnerReference,
            adopt: false,
            external: None,
        }
    }

    pub(crate) fn primary() -> PrimaryRef {
        PrimaryRef {
            kind: KindRef {
                group: "example.com".into(),
                version: "v1".into(),
                kind: "Mirror".into(),
                plural: None,
                namespaced: true,
            },
            key: ObjectKey { namespace: Some("ns".into()), name: "m".into() },
            uid: "u1".into(),
        }
    }

    #[test]
    fn a_prepared_object_belongs_to_its_primary() {
        let spec = config_maps("copies", &[]);
        let key = key_of(&spec, &primary(), &json!({ "metadata": { "name": "a" } })).unwrap();
        assert_eq!(key.to_string(), "ns/a");
        let object = prepare(&spec, "mirror", &primary(), &key, json!({ "metadata": { "name": "a" } }));
        assert_eq!(object["apiVersion"], "v1");
        assert_eq!(object["metadata"]["labels"][MANAGED_BY_LABEL], "mirror");
        assert!(belongs(&spec, &primary(), &object));
        let other = PrimaryRef { uid: "u2".into(), ..primary() };
        assert!(!belongs(&spec, &other, &object));
    }

    #[test]
    fn annotations_tie_objects_in_other_namespaces() {
        let spec = DependentSpec { declared_ownership: Ownership::Annotations, ..config_maps("copies", &[]) };
        let desired = json!({ "metadata": { "name": "a", "namespace": "elsewhere" } });
        let key = key_of(&spec, &primary(), &desired).unwrap();
        assert_eq!(key.to_string(), "elsewhere/a");
        let object = prepare(&spec, "mirror", &primary(), &key, desired);
        assert_eq!(object["metadata"]["annotations"][PRIMARY_NAME_ANNOTATION], "m");
        assert!(belongs(&spec, &primary(), &object));
        assert_eq!(key_of(&spec, &primary(), &json!({ "metadata": {} })), Err("metadata.name is missing".into()));
    }
}
