//! API objects as they come off the wire: [`Wire`] decodes an [`Object`] in one pass and
//! shares it.
//!
//! kube's `DynamicObject` derives its decoding with two `#[serde(flatten)]` fields (the type
//! and the rest of the object). serde decodes such a struct by first buffering the whole object
//! in an intermediate tree and then decoding each field again from it: every watch event, GET,
//! LIST item and write response would be built twice. [`Object`] reads the fields in place
//! instead (`types` only when both `apiVersion` and `kind` are given, as the derived decoding
//! does) and keeps every field besides the type and metadata as compact JSON text ([`Data`]).
//! The host asks the API server through `Api<Wire>` wherever it decodes whole objects.
//!
//! The metadata is decoded already [`trim`](crate::trim::trim)med ([`meta`]): the managed
//! fields and the annotation the caches drop are skipped over, not built and freed.
//!
//! A `Wire` holds its object behind an `Arc`, so cloning one is a reference count: kube's
//! reflector store, which clones every object it is given, keeps the very object the watch
//! decoded and hands on to the subscribers, instead of a deep copy of it.

use std::borrow::Cow;
use std::ops::Deref;
use std::sync::Arc;

use kube::Resource;
use kube::api::ApiResource;
use kube::core::ObjectMeta;
use serde::de::Deserializer;

mod meta;
mod object;
mod reads;

pub use object::{Data, Object};
pub use reads::PrimaryReads;

/// An [`Object`] decoded in one pass and trimmed, shared; see the module's documentation.
#[derive(Debug, Clone, PartialEq)]
pub struct Wire(Arc<Object>);

impl Wire {
    /// The object, to change: copied only if it is shared already.
    pub fn object_mut(&mut self) -> &mut Object {
        Arc::make_mut(&mut self.0)
    }

    /// The object, shared.
    pub fn shared(&self) -> Arc<Object> {
        self.0.clone()
    }

    /// The object itself, copied only if it is shared.
    pub fn into_inner(self) -> Object {
        Arc::unwrap_or_clone(self.0)
    }
}

impl From<Object> for Wire {
    fn from(object: Object) -> Self {
        Self(Arc::new(object))
    }
}

impl Deref for Wire {
    type Target = Object;

    fn deref(&self) -> &Object {
        &self.0
    }
}

impl<'de> serde::Deserialize<'de> for Wire {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        Object::deserialize(deserializer).map(Wire::from)
    }
}

impl Resource for Wire {
    type DynamicType = ApiResource;
    type Scope = <Object as Resource>::Scope;

    fn kind(resource: &ApiResource) -> Cow<'_, str> {
        Object::kind(resource)
    }

    fn group(resource: &ApiResource) -> Cow<'_, str> {
        Object::group(resource)
    }

    fn version(resource: &ApiResource) -> Cow<'_, str> {
        Object::version(resource)
    }

    fn api_version(resource: &ApiResource) -> Cow<'_, str> {
        Object::api_version(resource)
    }

    fn plural(resource: &ApiResource) -> Cow<'_, str> {
        Object::plural(resource)
    }

    fn meta(&self) -> &ObjectMeta {
        &self.0.metadata
    }

    fn meta_mut(&mut self) -> &mut ObjectMeta {
        &mut self.object_mut().metadata
    }
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use kube::api::DynamicObject;

    use super::*;
    use crate::trim::LAST_APPLIED;

    /// The derived decoding, trimmed, and `Wire`'s.
    fn both(value: serde_json::Value) -> (Object, Result<Wire, serde_json::Error>) {
        let text = value.to_string();
        let mut derived: DynamicObject = serde_json::from_str(&text).expect("derived decoding");
        crate::trim::trim(&mut derived);
        (derived.into(), serde_json::from_str(&text))
    }

    #[test]
    fn decodes_what_the_derived_decoding_does() {
        let (derived, wire) = both(json!({
            "apiVersion": "example.wasmop.dev/v1", "kind": "Greeting",
            "metadata": {
                "name": "a", "namespace": "ns", "resourceVersion": "7", "generation": 2,
                "finalizers": ["wasmop.dev/greeting"],
                "managedFields": [{ "manager": "m", "operation": "Apply", "fieldsV1": { "f:spec": {} } }],
            },
            "spec": { "name": "world", "list": [1, 2.5, null, true] },
            "status": { "message": "Hello, world!" },
        }));
        assert_eq!(*wire.expect("decodes"), derived);
    }

    #[test]
    fn metadata_is_decoded_as_k8s_openapi_does_and_trimmed() {
        let entry = |manager: &str, operation: &str| {
            json!({ "manager": manager, "operation": operation, "apiVersion": "v1", "time": "2026-11-25T08:00:00Z",
                    "fieldsType": "FieldsV1", "fieldsV1": { "f:status": { "f:message": {} } }, "subresource": "status" })
        };
        let (derived, wire) = both(json!({
            "apiVersion": "v1", "kind": "ConfigMap",
            "metadata": {
                "name": "a", "generateName": "a-", "namespace": "ns", "selfLink": "/x", "uid": "u",
                "resourceVersion": "7", "generation": 2, "creationTimestamp": "2026-11-25T08:00:00Z",
                "deletionTimestamp": "2026-11-25T09:00:00Z", "deletionGracePeriodSeconds": 30,
                "labels": { "app": "web" }, "finalizers": ["f"], "unknown": { "a": [1] },
                "annotations": { LAST_APPLIED: "{\"kind\":\"ConfigMap\"}", "team": "web" },
                "ownerReferences": [{ "apiVersion": "v1", "kind": "Secret", "name": "s", "uid": "o", "controller": true }],
                "managedFields": [
                    entry("kubectl", "Update"),
                    entry("wasmop-webpage", "Apply"),
                    entry("wasmop-webpage", "Update"),
                    entry("helm", "Apply"),
                    // The field set before the manager: decided at the end.
                    { "fieldsV1": { "f:spec": {} }, "operation": "Apply", "manager": "wasmop-greeting" },
                    { "fieldsV1": { "f:spec": {} }, "manager": "wasmop-greeting" },
                ],
            },
        }));
        let wire = wire.expect("decodes");
        assert_eq!(*wire, derived);
        let managers: Vec<_> = wire.metadata.managed_fields.iter().flatten().map(|f| f.manager.as_deref()).collect();
        assert_eq!(managers, [Some("wasmop-webpage"), Some("wasmop-greeting")]);
        assert_eq!(wire.metadata.annotations, Some([("team".to_string(), "web".to_string())].into()));
    }

    #[test]
    fn nothing_left_of_annotations_or_managed_fields_is_no_field() {
        for (annotations, managed) in [
            (json!(null), json!(null)),
            (json!({}), json!([])),
            (json!({ LAST_APPLIED: "{}" }), json!([{ "manager": "kubectl", "operation": "Update" }])),
        ] {
            let (derived, wire) =
                both(json!({ "metadata": { "name": "a", "annotations": annotations, "managedFields": managed } }));
            let wire = wire.expect("decodes");
            assert_eq!(*wire, derived);
            assert_eq!((&wire.metadata.annotations, &wire.metadata.managed_fields), (&None, &None));
        }
        assert!(serde_json::from_str::<Wire>(r#"{"metadata": {"managedFields": [1]}}"#).is_err());
        assert!(serde_json::from_str::<Wire>(r#"{"metadata": {"annotations": {"a": 1}}}"#).is_err());
    }

    #[test]
    fn the_type_is_kept_only_when_both_halves_are_given() {
        let (derived, wire) = both(json!({ "kind": "Greeting", "metadata": { "name": "a" }, "spec": {} }));
        let wire = wire.expect("decodes").into_inner();
        assert_eq!(wire, derived);
        assert_eq!(wire.types, None);
        assert_eq!(wire.data.to_value(), json!({ "spec": {} }));
    }

    #[test]
    fn absent_metadata_is_empty_and_anything_but_an_object_is_an_error() {
        let (derived, wire) = both(json!({ "apiVersion": "v1", "kind": "ConfigMap", "data": { "a": "b" } }));
        assert_eq!(*wire.expect("decodes"), derived);
        assert!(serde_json::from_str::<Wire>("[1]").is_err());
        assert!(serde_json::from_str::<Wire>(r#"{"metadata": []}"#).is_err());
    }

    #[test]
    fn escaped_keys_are_decoded() {
        let wire: Wire = serde_json::from_str(r#"{"metadata": {}, "sp\u0065c": {"a\"b": 1}}"#).expect("decodes");
        assert_eq!(wire.data.to_value(), json!({ "spec": { "a\"b": 1 } }));
    }

    #[test]
    fn clones_share_the_object_and_a_change_copies_it_only_when_shared() {
        let mut wire: Wire = serde_json::from_str(r#"{"metadata": {"name": "a"}}"#).expect("decodes");
        let copy = wire.clone();
        assert!(Arc::ptr_eq(&wire.0, &copy.0));
        wire.object_mut().metadata.name = Some("b".into());
        assert_eq!(copy.metadata.name.as_deref(), Some("a"));
        let alone = Arc::as_ptr(&wire.0);
        wire.object_mut().metadata.name = Some("c".into());
        assert_eq!(Arc::as_ptr(&wire.0), alone, "changed in place when not shared");
    }
}
