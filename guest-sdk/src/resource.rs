//! [`Resource`]: the usual primary of a plugin, a custom resource with a typed spec.

use k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;
use serde::{Deserialize, Serialize};

/// A Kubernetes object with metadata, a typed `spec` and an optional typed `status`: declare
/// only the spec's fields and use `Resource<MySpec>` as [`Reconciler::Primary`](crate::Reconciler::Primary).
/// A missing or mistyped spec field makes the reconcile fail as invalid, naming its path.
///
/// ```
/// use serde::Deserialize;
/// use wasmop_guest::Resource;
/// use wasmop_guest::serde_json::{from_value, json};
///
/// #[derive(Deserialize)]
/// struct Spec {
///     name: String,
/// }
///
/// let greeting: Resource<Spec> = from_value(json!({
///     "metadata": { "name": "hi", "generation": 2 },
///     "spec": { "name": "Ada" },
/// })).unwrap();
/// assert_eq!((greeting.spec.name.as_str(), greeting.metadata.generation), ("Ada", Some(2)));
/// assert!(greeting.status.is_none());
/// ```
#[derive(Clone, Debug, Default, PartialEq, Deserialize, Serialize)]
#[serde(crate = "serde")]
pub struct Resource<Spec, Status = serde_json::Value> {
    /// The object's metadata.
    #[serde(default)]
    pub metadata: ObjectMeta,
    /// The desired state.
    pub spec: Spec,
    /// The observed state, if any.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub status: Option<Status>,
}
