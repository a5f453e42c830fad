//! A resource type and an object's identity.

use serde::{Deserialize, Serialize};
use serde_json::Value;

/// A Kubernetes resource type, as a plugin declares it.
#[derive(Debug, Clone, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct KindRef {
    /// API group; empty for the core group.
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub group: String,
    /// API version within the group, e.g. `v1`.
    pub version: String,
    /// Kind, e.g. `WebPage`.
    pub kind: String,
    /// Plural resource name; derived from the kind when absent.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub plural: Option<String>,
    /// Whether objects of this kind live in a namespace.
    pub namespaced: bool,
}

impl KindRef {
    /// `apiVersion` of the kind's objects: `group/version`, or `version` for the core group.
    pub fn api_version(&self) -> String {
        if self.group.is_empty() { self.version.clone() } else { format!("{}/{}", self.group, self.version) }
    }

    /// Whether `other` names the same group, version and kind (plural and scope aside).
    pub fn same_type(&self, other: &KindRef) -> bool {
        self.group == other.group && self.version == other.version && self.kind == other.kind
    }
}

impl std::fmt::Display for KindRef {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{}/{}", self.api_version(), self.kind)
    }
}

/// Namespace and name of an object; the scheduler key of a primary.
#[derive(Debug, Clone, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct ObjectKey {
    /// The namespace; `None` for cluster-scoped objects.
    pub namespace: Option<String>,
    /// The name.
    pub name: String,
}

impl ObjectKey {
    /// The key of an object given as JSON; `None` when it has no `metadata.name`.
    pub fn of_json(object: &Value) -> Option<Self> {
        let metadata = &object["metadata"];
        Some(Self {
            namespace: metadata["namespace"].as_str().filter(|ns| !ns.is_empty()).map(str::to_owned),
            name: metadata["name"].as_str()?.to_owned(),
        })
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

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    #[test]
    fn api_version_and_key() {
        let kind = KindRef {
            group: "apps".into(),
            version: "v1".into(),
            kind: "Deployment".into(),
            plural: None,
            namespaced: true,
        };
        assert_eq!(kind.to_string(), "apps/v1/Deployment");
        let key = ObjectKey::of_json(&json!({ "metadata": { "name": "a", "namespace": "ns" } })).unwrap();
        assert_eq!(key.to_string(), "ns/a");
        assert_eq!(ObjectKey::of_json(&json!({ "metadata": {} })), None);
    }
}
