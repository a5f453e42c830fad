//! External dependents and polled state (JOSDK's external dependent resources, polling event
//! sources and external state tracking): when fetched state changed, when an external object
//! needs an apply, and what the tracking record holds.
//!
//! The tracking record is a ConfigMap (or Secret) named [`record_name`], owned by the primary,
//! with one data key per external dependent holding a JSON object from each object's key to the
//! ID the external system gave it: `{"www": "rec-17", "mail": "rec-18"}`. A restarted host reads
//! it back, hands the IDs to `fetch`, and so finds its objects again instead of creating them
//! twice.

use std::collections::BTreeMap;

use serde_json::Value;

/// An object outside the cluster, as fetched or desired.
#[derive(Debug, Clone, PartialEq)]
pub struct ExternalObject {
    /// The external dependent (or, for state only observed, any name).
    pub dependent: String,
    /// Its key among the dependent's objects of one primary.
    pub key: String,
    /// The ID the external system gave it.
    pub id: Option<String>,
    /// The object.
    pub object: Value,
}

/// Whether `actual` already holds `desired`: every field of `desired` is present in `actual` with
/// the same value (objects compared field by field, recursively; lists and scalars as a whole).
/// Fields only `actual` has (set by the external system: IDs, timestamps) do not count.
pub fn matches(desired: &Value, actual: &Value) -> bool {
    match (desired, actual) {
        (Value::Object(want), Value::Object(have)) => {
            want.iter().all(|(field, value)| have.get(field).is_some_and(|v| matches(value, v)))
        }
        (want, have) => want == have,
    }
}

/// Whether a new fetch of one primary's state differs from the one kept: another set of
/// objects, or an object with another ID or content. Order does not count.
pub fn changed(before: Option<&[ExternalObject]>, now: &[ExternalObject]) -> bool {
    let Some(before) = before else { return true };
    if before.len() != now.len() {
        return true;
    }
    let index = |objects: &[ExternalObject]| -> BTreeMap<(String, String), usize> {
        objects.iter().enumerate().map(|(i, o)| ((o.dependent.clone(), o.key.clone()), i)).collect()
    };
    let (old, new) = (index(before), index(now));
    old.len() != new.len()
        || old
            .iter()
            .any(|(k, &i)| new.get(k).is_none_or(|&j| before[i].id != now[j].id || before[i].object != now[j].object))
}

/// The name of a primary's tracking record for `plugin`: `<primary>-<plugin>-ext`, cut to the
/// 253 characters an object name may have.
pub fn record_name(primary: &str, plugin: &str) -> String {
    let mut name = format!("{primary}-{plugin}-ext");
    name.truncate(253);
    name
}

/// The IDs a primary's tracking record holds: `(dependent, key) -> id`.
pub type Ids = BTreeMap<(String, String), String>;

/// Reads the IDs out of a tracking record's data (a ConfigMap's `data`, a Secret's decoded
/// `data`); entries that are not what [`encode`] writes are skipped.
pub fn decode(data: &BTreeMap<String, String>) -> Ids {
    let mut ids = Ids::new();
    for (dependent, text) in data {
        let Ok(Value::Object(keys)) = serde_json::from_str::<Value>(text) else { continue };
        for (key, id) in keys {
            if let Value::String(id) = id {
                ids.insert((dependent.clone(), key), id);
            }
        }
    }
    ids
}

/// The data of a tracking record holding `ids`: one key per dependent.
pub fn encode(ids: &Ids) -> BTreeMap<String, String> {
    let mut per_dependent: BTreeMap<&str, serde_json::Map<String, Value>> = BTreeMap::new();
    for ((dependent, key), id) in ids {
        per_dependent.entry(dependent).or_default().insert(key.clone(), Value::String(id.clone()));
    }
    per_dependent.into_iter().map(|(d, keys)| (d.to_owned(), Value::Object(keys).to_string())).collect()
}

/// The IDs to keep after a reconcile: those tracked before, updated with the IDs the applies
/// and fetches returned for `dependents`' objects, without the objects deleted.
pub fn track<'a>(
    before: &Ids,
    seen: impl IntoIterator<Item = &'a ExternalObject>,
    deleted: impl IntoIterator<Item = (&'a str, &'a str)>,
) -> Ids {
    let mut ids = before.clone();
    for object in seen {
        if let Some(id) = &object.id {
            ids.insert((object.dependent.clone(), object.key.clone()), id.clone());
        }
    }
    for (dependent, key) in deleted {
        ids.remove(&(dependent.to_owned(), key.to_owned()));
    }
    ids
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    fn object(dependent: &str, key: &str, id: Option<&str>, object: Value) -> ExternalObject {
        ExternalObject { dependent: dependent.into(), key: key.into(), id: id.map(Into::into), object }
    }

    #[test]
    fn desired_fields_must_match_and_extra_actual_fields_do_not_count() {
        let desired = json!({ "type": "A", "value": "10.0.0.1", "ttl": 60 });
        assert!(matches(&desired, &json!({ "type": "A", "value": "10.0.0.1", "ttl": 60, "id": "r1" })));
        assert!(!matches(&desired, &json!({ "type": "A", "value": "10.0.0.2", "ttl": 60 })));
        assert!(!matches(&desired, &json!({ "type": "A", "value": "10.0.0.1" })));
        assert!(!matches(&json!({ "tags": ["a"] }), &json!({ "tags": ["a", "b"] })));
    }

    #[test]
    fn a_fetch_changed_when_objects_ids_or_contents_differ_in_any_order() {
        let a = object("record", "www", Some("1"), json!({ "value": "x" }));
        let b = object("record", "mail", Some("2"), json!({ "value": "y" }));
        assert!(changed(None, &[]));
        assert!(!changed(Some(&[a.clone(), b.clone()]), &[b.clone(), a.clone()]));
        assert!(changed(Some(std::slice::from_ref(&a)), &[a.clone(), b.clone()]));
        let moved = object("record", "www", Some("1"), json!({ "value": "z" }));
        assert!(changed(Some(&[a.clone(), b.clone()]), &[moved, b.clone()]));
        let renumbered = object("record", "www", Some("9"), json!({ "value": "x" }));
        assert!(changed(Some(&[a]), &[renumbered]));
    }

    #[test]
    fn tracking_records_round_trip_and_follow_applies_and_deletes() {
        let mut ids = Ids::new();
        ids.insert(("record".into(), "www".into()), "r1".into());
        let data = encode(&ids);
        assert_eq!(data["record"], r#"{"www":"r1"}"#);
        assert_eq!(decode(&data), ids);
        let applied = [object("record", "mail", Some("r2"), json!({}))];
        let after = track(&ids, &applied, [("record", "www")]);
        assert_eq!(after.into_iter().collect::<Vec<_>>(), [(("record".into(), "mail".into()), "r2".into())]);
        let mut junk = BTreeMap::new();
        junk.insert("other".to_owned(), "not json".to_owned());
        assert!(decode(&junk).is_empty());
        assert_eq!(record_name("web", "dns"), "web-dns-ext");
    }
}
