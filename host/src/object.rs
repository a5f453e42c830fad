//! Identity of a primary object inside one plugin.

pub use wasmop_core::ObjectKey;

use crate::wire::Object;

/// The key of `object`; `None` when it has no name.
pub fn key_of(object: &Object) -> Option<ObjectKey> {
    Some(ObjectKey { namespace: object.metadata.namespace.clone(), name: object.metadata.name.clone()? })
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
