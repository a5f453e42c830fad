//! What a cached object costs: an estimate of its heap bytes, the unit of the bounded caches'
//! budgets. It walks the object once (no serialization): every string's bytes plus a fixed
//! overhead per string, map (its B-tree nodes) and list item (the fields besides the metadata
//! are kept as JSON text: their text and a fixed overhead per field), calibrated against the heap the bench
//! counts per cached object (`make bench`, part `cache`).

use serde_json::Value;

use crate::wire::Object;

/// Heap bytes of one allocated string, beyond its text: the allocation's header and rounding.
const STRING: usize = 16;
/// Bytes of a B-tree node of a map beyond its key and value slots (11 of each).
const NODE: usize = 16;
/// Entries per B-tree node, on average (up to 11; one node however few).
const PER_NODE: usize = 8;
/// Bytes of a `serde_json::Value` map's key and value slot.
const VALUE_SLOT: usize = 56;
/// Bytes of a string-to-string map's key and value slot (labels, annotations).
const STRING_SLOT: usize = 48;
/// Heap bytes of one list item.
const ITEM: usize = 32;
/// Bytes of one of the object's other fields beyond its name and text: their two allocations
/// and its slot.
const FIELD: usize = 2 * STRING + 32;
/// The object itself: its `Arc`, type and metadata structs.
const OBJECT: usize = 800;

/// Estimated heap bytes of `object`, at least 1 and saturating at `u32::MAX`.
pub fn weight(object: &Object) -> u32 {
    let meta = &object.metadata;
    let strings = [&meta.name, &meta.namespace, &meta.uid, &meta.resource_version, &meta.generate_name];
    let mut bytes = OBJECT + strings.iter().filter_map(|s| s.as_ref()).map(|s| s.len() + STRING).sum::<usize>();
    for map in [&meta.labels, &meta.annotations].into_iter().flatten() {
        bytes += nodes(map.len(), STRING_SLOT) + map.iter().map(|(k, v)| k.len() + v.len() + 2 * STRING).sum::<usize>();
    }
    for owner in meta.owner_references.iter().flatten() {
        bytes += owner.api_version.len() + owner.kind.len() + owner.name.len() + owner.uid.len() + 4 * STRING + ITEM;
    }
    for finalizer in meta.finalizers.iter().flatten() {
        bytes += finalizer.len() + STRING + ITEM;
    }
    for fields in meta.managed_fields.iter().flatten() {
        bytes += fields.fields_v1.as_ref().map_or(0, |f| value(&f.0)) + 4 * STRING + ITEM;
    }
    bytes += object.data.text_bytes() + object.data.iter().count() * FIELD;
    u32::try_from(bytes.max(1)).unwrap_or(u32::MAX)
}

fn value(v: &Value) -> usize {
    match v {
        Value::Null | Value::Bool(_) | Value::Number(_) => 0,
        Value::String(s) => s.len() + STRING,
        Value::Array(items) => items.iter().map(|i| value(i) + ITEM).sum(),
        Value::Object(map) => {
            nodes(map.len(), VALUE_SLOT) + map.iter().map(|(k, v)| k.len() + STRING + value(v)).sum::<usize>()
        }
    }
}

/// The B-tree nodes of a map of `entries`, each with 11 slots of `slot` bytes.
fn nodes(entries: usize, slot: usize) -> usize {
    entries.div_ceil(PER_NODE) * (11 * slot + NODE)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn config_map(data: &str) -> Object {
        serde_json::from_value(serde_json::json!({
            "apiVersion": "v1", "kind": "ConfigMap",
            "metadata": { "name": "a", "namespace": "ns", "labels": { "app": "web" } },
            "data": { "index.html": data },
        }))
        .unwrap()
    }

    #[test]
    fn grows_with_the_object_s_text() {
        let small = weight(&config_map("x"));
        let large = weight(&config_map(&"x".repeat(1_000)));
        assert_eq!(large - small, 999);
        assert!(small > OBJECT as u32);
    }
}
