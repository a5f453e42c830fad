//! Identity of a primary object inside one plugin.

use kube::api::DynamicObject;

/// Namespace and name of an object; the scheduler key of a primary.
#[derive(Debug, Clone, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct ObjectKey {
    /// The namespace; `None` for cluster-scoped objects.
    pub namespace: Option<String>,
    /// The name.
    pub name: String,
}

impl ObjectKey {
    /// The key of `object`; `None` when it has no name.
    pub fn of(object: &DynamicObject) -> Option<Self> {
        Some(Self { namespace: object.metadata.namespace.clone(), name: object.metadata.name.clone()? })
    }
}

impl std::fmt::Display for ObjectKey {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match &self.namespace {
            Some(ns) => write!(f, "{ns}/{}", self.name),
            None => f.write_str(&self.name),
        }
    }
}
