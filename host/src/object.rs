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

/// Whether resourceVersion `seen` is `than` or later. Kubernetes calls resourceVersions opaque,
/// but the API server's are etcd revisions, and JOSDK orders them the same way: `None` when
/// either is not a number, and the caller falls back to equality.
pub fn version_at_least(seen: &str, than: &str) -> Option<bool> {
    Some(seen.parse::<u64>().ok()? >= than.parse::<u64>().ok()?)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn versions_order_as_numbers_or_not_at_all() {
        assert_eq!(version_at_least("10", "9"), Some(true), "numerically, not as text");
        assert_eq!(version_at_least("9", "9"), Some(true));
        assert_eq!(version_at_least("8", "9"), Some(false));
        assert_eq!(version_at_least("x", "9"), None);
    }
}
