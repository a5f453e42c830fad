//! [`Object`]: an API object as the host keeps it, its metadata decoded and the rest of it
//! (`spec`, `status`, a ConfigMap's `data`, ...) kept as compact JSON text, field by field.
//!
//! kube's `DynamicObject` decodes the rest into a `serde_json::Value` tree: a map is a B-tree
//! node of 11 slots (about 640 bytes) however few entries it holds, and every string its own
//! allocation, so a Greeting's small status takes about 3 KB of tree. The host hardly reads
//! those fields itself: it hands whole objects to plugins as JSON text, and reads a primary's
//! `status` when it writes one. So it keeps each top-level field as the text it arrived as
//! (checked to be JSON, and compact as the API server writes it: about its own size in memory)
//! and decodes one only when it reads it.

use std::borrow::Cow;
use std::fmt;

use kube::Resource;
use kube::api::{ApiResource, DynamicObject, TypeMeta};
use kube::core::ObjectMeta;
use serde::de::{Deserializer, MapAccess, Visitor};
use serde::ser::{SerializeMap, Serializer};
use serde_json::Value;
use serde_json::value::RawValue;

use super::meta;

/// An API object: its type, its metadata and its other fields as JSON text ([`Data`]).
/// Serializes as the object it is; decodes in one pass, its metadata
/// [`trim`](crate::trim::trim)med.
#[derive(Debug, Clone, PartialEq, Default)]
pub struct Object {
    /// `apiVersion` and `kind`, when both are given.
    pub types: Option<TypeMeta>,
    /// The metadata.
    pub metadata: ObjectMeta,
    /// Every other top-level field.
    pub data: Data,
}

/// An object's top-level fields besides `apiVersion`, `kind` and `metadata`, each kept as the
/// JSON text of its value: as decoded, or compact when made from a value.
#[derive(Debug, Clone, Default)]
pub struct Data(Box<[(Box<str>, Box<RawValue>)]>);

impl Object {
    /// An object of `resource` named `name`, without data, as `DynamicObject::new`.
    pub fn new(name: &str, resource: &ApiResource) -> Self {
        Self {
            types: Some(TypeMeta { api_version: resource.api_version.clone(), kind: resource.kind.clone() }),
            metadata: ObjectMeta { name: Some(name.to_string()), ..ObjectMeta::default() },
            data: Data::default(),
        }
    }

    /// The object in namespace `namespace`.
    #[must_use]
    pub fn within(mut self, namespace: &str) -> Self {
        self.metadata.namespace = Some(namespace.to_string());
        self
    }

    /// The object with `data` as its other fields: the entries of a JSON object (anything else
    /// is no field).
    #[must_use]
    pub fn data(mut self, data: Value) -> Self {
        self.data = Data::from(data);
        self
    }

    /// The object as kube's `DynamicObject`, its fields decoded.
    pub fn to_dynamic(&self) -> DynamicObject {
        DynamicObject { types: self.types.clone(), metadata: self.metadata.clone(), data: self.data.to_value() }
    }
}

impl From<DynamicObject> for Object {
    fn from(object: DynamicObject) -> Self {
        Self { types: object.types, metadata: object.metadata, data: Data::from(object.data) }
    }
}

impl Data {
    /// The text of field `key`.
    pub fn get(&self, key: &str) -> Option<&RawValue> {
        self.0.iter().find(|(k, _)| &**k == key).map(|(_, v)| &**v)
    }

    /// Field `key`, decoded.
    pub fn value(&self, key: &str) -> Option<Value> {
        self.get(key).map(decoded)
    }

    /// The value at JSON pointer `pointer` (`/status/observedGeneration`), decoding only the
    /// top-level field it starts in.
    pub fn pointer(&self, pointer: &str) -> Option<Value> {
        let rest = pointer.strip_prefix('/')?;
        let (key, within) = rest.split_once('/').map_or((rest, ""), |(key, within)| (key, within));
        let key = key.replace("~1", "/").replace("~0", "~");
        let field = self.value(&key)?;
        if within.is_empty() { Some(field) } else { field.pointer(&format!("/{within}")).cloned() }
    }

    /// Every field, decoded, as a JSON object.
    pub fn to_value(&self) -> Value {
        Value::Object(self.0.iter().map(|(k, v)| (k.to_string(), decoded(v))).collect())
    }

    /// Keeps only the fields `keep` accepts.
    pub fn retain(&mut self, mut keep: impl FnMut(&str) -> bool) {
        if self.0.iter().all(|(k, _)| keep(k)) {
            return;
        }
        let fields = std::mem::take(&mut self.0).into_vec();
        self.0 = fields.into_iter().filter(|(k, _)| keep(k)).collect();
    }

    /// Keeps only the parts of the fields `paths` name, as [`wasmop_core::projection::project`]
    /// does: a field a path names whole is kept as it is, one only parts of which are named is
    /// decoded, cut and kept again as text.
    pub fn project<P: AsRef<str>>(&mut self, paths: &[P]) {
        fn top(path: &str) -> Option<&str> {
            path.split('.').find(|k| !k.is_empty())
        }
        let whole = |key: &str| paths.iter().any(|p| !p.as_ref().contains('.') && top(p.as_ref()) == Some(key));
        // Mostly every field a watch keeps is named whole (`spec`, `status`): nothing to cut.
        if self.0.iter().all(|(key, _)| whole(key)) {
            return;
        }
        let fields = std::mem::take(&mut self.0).into_vec();
        self.0 = fields
            .into_iter()
            .filter_map(|(key, value)| {
                if whole(&key) {
                    return Some((key, value));
                }
                let named: Vec<&str> =
                    paths.iter().map(AsRef::as_ref).filter(|p| p.contains('.') && top(p) == Some(&*key)).collect();
                if named.is_empty() {
                    return None;
                }
                let mut object = Value::Object([(key.to_string(), decoded(&value))].into_iter().collect());
                wasmop_core::projection::project(&mut object, &named);
                let cut = object.as_object_mut()?.remove(&*key)?;
                Some((key, text(&cut)))
            })
            .collect();
    }

    /// The bytes the fields' names and texts take.
    pub fn text_bytes(&self) -> usize {
        self.0.iter().map(|(k, v)| k.len() + v.get().len()).sum()
    }

    /// The field names and their texts.
    pub fn iter(&self) -> impl Iterator<Item = (&str, &RawValue)> {
        self.0.iter().map(|(k, v)| (&**k, &**v))
    }

    /// Whether there is no field.
    pub fn is_empty(&self) -> bool {
        self.0.is_empty()
    }
}

/// The JSON text `raw`, decoded; it was checked to be JSON as it was kept.
fn decoded(raw: &RawValue) -> Value {
    serde_json::from_str(raw.get()).expect("kept JSON text decodes")
}

/// The compact JSON text of `value`.
fn text(value: &Value) -> Box<RawValue> {
    serde_json::value::to_raw_value(value).expect("a JSON value serializes")
}

impl From<Value> for Data {
    fn from(value: Value) -> Self {
        match value {
            Value::Object(map) => map.into_iter().collect(),
            _ => Self::default(),
        }
    }
}

impl FromIterator<(String, Value)> for Data {
    fn from_iter<I: IntoIterator<Item = (String, Value)>>(fields: I) -> Self {
        Self(fields.into_iter().map(|(k, v)| (k.into_boxed_str(), text(&v))).collect())
    }
}

/// Equal when they hold the same fields with the same values, whatever their order or spacing.
impl PartialEq for Data {
    fn eq(&self, other: &Self) -> bool {
        self.0.len() == other.0.len()
            && self.0.iter().all(|(k, v)| other.get(k).is_some_and(|o| o.get() == v.get() || decoded(o) == decoded(v)))
    }
}

impl serde::Serialize for Data {
    fn serialize<S: Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        let mut map = serializer.serialize_map(Some(self.0.len()))?;
        for (k, v) in self.iter() {
            map.serialize_entry(k, v)?;
        }
        map.end()
    }
}

impl serde::Serialize for Object {
    fn serialize<S: Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        Without(self, None).serialize(serializer)
    }
}

impl Object {
    /// The object without its top-level field `field`, to serialize (no copy is made).
    pub fn without<'a>(&'a self, field: &'a str) -> impl serde::Serialize + 'a {
        Without(self, Some(field))
    }
}

/// An object serialized without one of its top-level fields, if one is named.
struct Without<'a>(&'a Object, Option<&'a str>);

impl serde::Serialize for Without<'_> {
    fn serialize<S: Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        let Self(object, skipped) = *self;
        let fields = || object.data.iter().filter(|(k, _)| Some(*k) != skipped);
        // Counted only when a field is skipped: every primary sent to a plugin is serialized.
        let data = if skipped.is_some() { fields().count() } else { object.data.0.len() };
        let types = usize::from(object.types.is_some()) * 2;
        let mut map = serializer.serialize_map(Some(types + 1 + data))?;
        if let Some(types) = &object.types {
            map.serialize_entry("apiVersion", &types.api_version)?;
            map.serialize_entry("kind", &types.kind)?;
        }
        map.serialize_entry("metadata", &object.metadata)?;
        for (k, v) in fields() {
            map.serialize_entry(k, v)?;
        }
        map.end()
    }
}

impl<'de> serde::Deserialize<'de> for Object {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        deserializer.deserialize_map(ObjectVisitor)
    }
}

struct ObjectVisitor;

impl<'de> Visitor<'de> for ObjectVisitor {
    type Value = Object;

    fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("a Kubernetes object")
    }

    fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<Object, A::Error> {
        let (mut api_version, mut kind, mut metadata) = (None, None, None);
        let mut data = Vec::new();
        while let Some(key) = map.next_key::<Cow<'de, str>>()? {
            match &*key {
                "apiVersion" => api_version = Some(map.next_value::<String>()?),
                "kind" => kind = Some(map.next_value::<String>()?),
                "metadata" => metadata = Some(map.next_value::<meta::TrimmedMeta>()?.0),
                _ => {
                    let value = map.next_value::<Box<RawValue>>()?;
                    // A repeated key: the last one holds, as in a decoded map.
                    data.retain(|(k, _): &(Box<str>, _)| **k != *key);
                    data.push((key.into_owned().into_boxed_str(), value));
                }
            }
        }
        let types = match (api_version, kind) {
            (Some(api_version), Some(kind)) => Some(TypeMeta { api_version, kind }),
            _ => None,
        };
        // As derived: absent metadata is empty.
        let metadata = metadata.unwrap_or_default();
        Ok(Object { types, metadata, data: Data(data.into_boxed_slice()) })
    }
}

impl Resource for Object {
    type DynamicType = ApiResource;
    type Scope = <DynamicObject as Resource>::Scope;

    fn kind(resource: &ApiResource) -> Cow<'_, str> {
        DynamicObject::kind(resource)
    }

    fn group(resource: &ApiResource) -> Cow<'_, str> {
        DynamicObject::group(resource)
    }

    fn version(resource: &ApiResource) -> Cow<'_, str> {
        DynamicObject::version(resource)
    }

    fn api_version(resource: &ApiResource) -> Cow<'_, str> {
        DynamicObject::api_version(resource)
    }

    fn plural(resource: &ApiResource) -> Cow<'_, str> {
        DynamicObject::plural(resource)
    }

    fn meta(&self) -> &ObjectMeta {
        &self.metadata
    }

    fn meta_mut(&mut self) -> &mut ObjectMeta {
        &mut self.metadata
    }
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    fn decoded(text: &str) -> Object {
        serde_json::from_str(text).expect("decodes")
    }

    #[test]
    fn the_other_fields_are_kept_as_their_text_and_serialize_as_they_came() {
        let object =
            decoded(r#"{"apiVersion":"v1","kind":"ConfigMap","metadata":{"name":"a"},"data":{"k":"v","n":1.50}}"#);
        assert_eq!(object.data.get("data").map(RawValue::get), Some(r#"{"k":"v","n":1.50}"#));
        assert_eq!(
            serde_json::to_string(&object).unwrap(),
            r#"{"apiVersion":"v1","kind":"ConfigMap","metadata":{"name":"a"},"data":{"k":"v","n":1.50}}"#
        );
        assert_eq!(serde_json::to_value(&object).unwrap()["data"], json!({ "k": "v", "n": 1.5 }));
    }

    #[test]
    fn a_field_is_read_decoded_and_a_pointer_decodes_only_its_field() {
        let object = decoded(r#"{"metadata":{},"spec":{"a/b":[1]},"status":{"observedGeneration":3}}"#);
        assert_eq!(object.data.value("spec"), Some(json!({ "a/b": [1] })));
        assert_eq!(object.data.pointer("/status/observedGeneration"), Some(json!(3)));
        assert_eq!(object.data.pointer("/spec/a~1b/0"), Some(json!(1)));
        assert_eq!(object.data.pointer("/status"), Some(json!({ "observedGeneration": 3 })));
        assert_eq!(object.data.pointer("/nothing/x"), None);
        assert_eq!(object.data.pointer("status"), None);
        assert_eq!(object.data.to_value(), json!({ "spec": { "a/b": [1] }, "status": { "observedGeneration": 3 } }));
    }

    #[test]
    fn decoding_from_a_value_and_from_a_dynamic_object_agree_with_decoding_text() {
        let value = json!({ "apiVersion": "v1", "kind": "Secret", "metadata": { "name": "s", "namespace": "ns" },
                            "data": { "k": "dg==" }, "type": "Opaque" });
        let text = decoded(&value.to_string());
        assert_eq!(serde_json::from_value::<Object>(value.clone()).unwrap(), text);
        let dynamic: DynamicObject = serde_json::from_value(value).unwrap();
        assert_eq!(Object::from(dynamic.clone()), text);
        assert_eq!(text.to_dynamic(), dynamic);
    }

    #[test]
    fn equal_means_the_same_fields_and_values_whatever_the_order() {
        let a = decoded(r#"{"metadata":{},"spec":{"x":1,"y":2},"status":{}}"#);
        assert_eq!(a, decoded(r#"{"metadata":{},"status":{},"spec":{"y":2,"x":1}}"#));
        assert_ne!(a, decoded(r#"{"metadata":{},"spec":{"x":1,"y":3},"status":{}}"#));
        assert_ne!(a, decoded(r#"{"metadata":{},"spec":{"x":1,"y":2}}"#));
    }

    #[test]
    fn a_repeated_field_keeps_its_last_value_and_bad_json_is_an_error() {
        assert_eq!(decoded(r#"{"spec":1,"spec":2}"#).data.value("spec"), Some(json!(2)));
        assert!(serde_json::from_str::<Object>(r#"{"spec":[1,}"#).is_err());
    }

    #[test]
    fn retain_keeps_the_accepted_fields() {
        let mut object = Object::new("a", &ApiResource::erase::<k8s_openapi::api::core::v1::ConfigMap>(&()))
            .data(json!({ "spec": 1, "status": 2, "other": 3 }));
        object.data.retain(|k| k != "other");
        assert_eq!(object.data.to_value(), json!({ "spec": 1, "status": 2 }));
        assert!(!object.data.is_empty());
        object.data.retain(|_| false);
        assert!(object.data.is_empty());
    }

    #[test]
    fn a_projection_keeps_named_fields_whole_and_cuts_the_others_as_the_core_does() {
        let value = json!({ "spec": { "a": 1, "b": { "c": 2, "d": 3 } }, "status": { "x": 1 }, "data": "k" });
        for paths in
            [&["spec"][..], &["spec.b.c", "status"], &["spec.b", "spec.a"], &["spec.a", "spec"], &[], &["nothing.x"]]
        {
            let mut data = Data::from(value.clone());
            data.project(paths);
            let mut expected = value.clone();
            wasmop_core::projection::project(&mut expected, paths);
            assert_eq!(data.to_value(), expected, "{paths:?}");
        }
        assert_eq!(Data::from(json!({ "ab": [1], "c": "d" })).text_bytes(), "ab[1]c\"d\"".len());
    }

    #[test]
    fn a_watch_event_and_a_list_decode_their_objects() {
        let event: kube::core::WatchEvent<Object> =
            serde_json::from_str(r#"{"type":"ADDED","object":{"metadata":{"name":"a"},"spec":{"x":1}}}"#).unwrap();
        let kube::core::WatchEvent::Added(object) = event else { panic!("an added object") };
        assert_eq!(object.data.value("spec"), Some(json!({ "x": 1 })));
        let list: kube::core::ObjectList<Object> = serde_json::from_slice(
            br#"{"metadata":{"resourceVersion":"1"},"items":[{"metadata":{"name":"a"},"spec":2}]}"#,
        )
        .unwrap();
        assert_eq!(list.items[0].data.value("spec"), Some(json!(2)));
    }
}
