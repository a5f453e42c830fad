//! An object's metadata decoded already [`trim`](crate::trim::trim)med: the managedFields
//! entries and the annotation the host would drop right after decoding are skipped over in the
//! text instead of being built (a whole field set, a whole copy of the object) and then freed.

use std::borrow::Cow;
use std::collections::BTreeMap;
use std::fmt;

use k8s_openapi::apimachinery::pkg::apis::meta::v1::ManagedFieldsEntry;
use kube::core::ObjectMeta;
use serde::Deserialize;
use serde::de::{Deserializer, IgnoredAny, MapAccess, SeqAccess, Visitor};

use crate::trim::{LAST_APPLIED, keeps_entry, keeps_manager, keeps_operation};

/// `ObjectMeta` as k8s-openapi decodes it, then trimmed.
pub(super) struct TrimmedMeta(pub ObjectMeta);

impl<'de> Deserialize<'de> for TrimmedMeta {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        deserializer.deserialize_map(MetaVisitor)
    }
}

struct MetaVisitor;

impl<'de> Visitor<'de> for MetaVisitor {
    type Value = TrimmedMeta;

    fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("an object's metadata")
    }

    fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<TrimmedMeta, A::Error> {
        let mut meta = ObjectMeta::default();
        while let Some(key) = map.next_key::<Cow<'de, str>>()? {
            match &*key {
                "annotations" => meta.annotations = map.next_value::<Annotations>()?.0,
                "creationTimestamp" => meta.creation_timestamp = map.next_value()?,
                "deletionGracePeriodSeconds" => meta.deletion_grace_period_seconds = map.next_value()?,
                "deletionTimestamp" => meta.deletion_timestamp = map.next_value()?,
                "finalizers" => meta.finalizers = map.next_value()?,
                "generateName" => meta.generate_name = map.next_value()?,
                "generation" => meta.generation = map.next_value()?,
                "labels" => meta.labels = map.next_value()?,
                "managedFields" => meta.managed_fields = map.next_value::<ManagedFields>()?.0,
                "name" => meta.name = map.next_value()?,
                "namespace" => meta.namespace = map.next_value()?,
                "ownerReferences" => meta.owner_references = map.next_value()?,
                "resourceVersion" => meta.resource_version = map.next_value()?,
                "selfLink" => meta.self_link = map.next_value()?,
                "uid" => meta.uid = map.next_value()?,
                _ => {
                    map.next_value::<IgnoredAny>()?;
                }
            }
        }
        Ok(TrimmedMeta(meta))
    }
}

/// The annotations but kubectl's last-applied copy; none left is no field.
struct Annotations(Option<BTreeMap<String, String>>);

impl<'de> Deserialize<'de> for Annotations {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        deserializer.deserialize_option(AnnotationsVisitor)
    }
}

struct AnnotationsVisitor;

impl<'de> Visitor<'de> for AnnotationsVisitor {
    type Value = Annotations;

    fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("annotations")
    }

    fn visit_none<E>(self) -> Result<Annotations, E> {
        Ok(Annotations(None))
    }

    fn visit_unit<E>(self) -> Result<Annotations, E> {
        Ok(Annotations(None))
    }

    fn visit_some<D: Deserializer<'de>>(self, deserializer: D) -> Result<Annotations, D::Error> {
        deserializer.deserialize_map(self)
    }

    fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<Annotations, A::Error> {
        let mut annotations = BTreeMap::new();
        while let Some(key) = map.next_key::<String>()? {
            if key == LAST_APPLIED {
                map.next_value::<IgnoredAny>()?;
            } else {
                annotations.insert(key, map.next_value()?);
            }
        }
        Ok(Annotations((!annotations.is_empty()).then_some(annotations)))
    }
}

/// The managedFields entries [`keeps_entry`] keeps; none left is no field.
struct ManagedFields(Option<Vec<ManagedFieldsEntry>>);

impl<'de> Deserialize<'de> for ManagedFields {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        deserializer.deserialize_option(ManagedFieldsVisitor)
    }
}

struct ManagedFieldsVisitor;

impl<'de> Visitor<'de> for ManagedFieldsVisitor {
    type Value = ManagedFields;

    fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("managed fields")
    }

    fn visit_none<E>(self) -> Result<ManagedFields, E> {
        Ok(ManagedFields(None))
    }

    fn visit_unit<E>(self) -> Result<ManagedFields, E> {
        Ok(ManagedFields(None))
    }

    fn visit_some<D: Deserializer<'de>>(self, deserializer: D) -> Result<ManagedFields, D::Error> {
        deserializer.deserialize_seq(self)
    }

    fn visit_seq<A: SeqAccess<'de>>(self, mut seq: A) -> Result<ManagedFields, A::Error> {
        let mut kept = Vec::new();
        while let Some(Entry(entry)) = seq.next_element()? {
            kept.extend(entry);
        }
        Ok(ManagedFields((!kept.is_empty()).then_some(kept)))
    }
}

/// One managedFields entry, `None` when it is dropped. Once its manager or operation shows that
/// it goes, the rest of it (its field set above all) is skipped.
struct Entry(Option<ManagedFieldsEntry>);

impl<'de> Deserialize<'de> for Entry {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        deserializer.deserialize_map(EntryVisitor)
    }
}

struct EntryVisitor;

impl<'de> Visitor<'de> for EntryVisitor {
    type Value = Entry;

    fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("a managed fields entry")
    }

    fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<Entry, A::Error> {
        let mut entry = ManagedFieldsEntry::default();
        let mut dropped = false;
        while let Some(key) = map.next_key::<Cow<'de, str>>()? {
            if dropped {
                map.next_value::<IgnoredAny>()?;
                continue;
            }
            match &*key {
                "apiVersion" => entry.api_version = map.next_value()?,
                "fieldsType" => entry.fields_type = map.next_value()?,
                "fieldsV1" => entry.fields_v1 = map.next_value()?,
                "manager" => entry.manager = map.next_value()?,
                "operation" => entry.operation = map.next_value()?,
                "subresource" => entry.subresource = map.next_value()?,
                "time" => entry.time = map.next_value()?,
                _ => {
                    map.next_value::<IgnoredAny>()?;
                }
            }
            // A manager or an operation that is not kept drops the entry, whatever else it holds.
            dropped = entry.manager.as_deref().is_some_and(|m| !keeps_manager(m))
                || entry.operation.as_deref().is_some_and(|op| !keeps_operation(op));
        }
        let kept = !dropped && keeps_entry(entry.manager.as_deref(), entry.operation.as_deref());
        Ok(Entry(kept.then_some(entry)))
    }
}
