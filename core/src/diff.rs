//! What changed between two versions of an object (kopf's `diff`): a list of added, changed and
//! removed fields, each with its path and its old and new value, and whether a field changed
//! (kopf's `on.field`).
//!
//! Objects are compared key by key, recursively; any other value (a list, a string, a number)
//! is compared whole, so a changed list is one change at the list's path. A field that is absent
//! and a field that is `null` are the same, as in a merge patch.

use serde::Serialize;
use serde_json::Value;

/// What happened to a field.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize)]
#[serde(rename_all = "lowercase")]
pub enum Op {
    /// It was absent and is present.
    Add,
    /// It was present and is present with another value.
    Change,
    /// It was present and is absent.
    Remove,
}

/// One field that differs between two versions.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct Change {
    /// What happened to it.
    pub op: Op,
    /// The keys from the compared value down to the field; empty for the value itself.
    pub path: Vec<String>,
    /// Its old value; `None` for [`Op::Add`].
    pub old: Option<Value>,
    /// Its new value; `None` for [`Op::Remove`].
    pub new: Option<Value>,
}

impl Change {
    /// The path as dots between the keys (`spec.replicas`).
    pub fn dotted(&self) -> String {
        self.path.join(".")
    }
}

/// The fields that differ between `old` and `new`, in key order, depth first.
pub fn diff(old: &Value, new: &Value) -> Vec<Change> {
    let mut changes = Vec::new();
    walk(&mut Vec::new(), present(old), present(new), &mut changes);
    changes
}

/// Whether the value at `path` (dots between keys, `spec.replicas`; empty: the whole value)
/// differs between `old` and `new`.
pub fn changed(old: &Value, new: &Value, path: &str) -> bool {
    at(old, path) != at(new, path)
}

/// The value at `path` in `value`, `None` when absent or `null`.
fn at<'a>(value: &'a Value, path: &str) -> Option<&'a Value> {
    path.split('.').filter(|k| !k.is_empty()).try_fold(value, |v, key| v.get(key)).and_then(present)
}

/// `value`, unless it is `null`: absent and `null` are the same.
fn present(value: &Value) -> Option<&Value> {
    (!value.is_null()).then_some(value)
}

fn walk(path: &mut Vec<String>, old: Option<&Value>, new: Option<&Value>, changes: &mut Vec<Change>) {
    let change = |op, old: Option<&Value>, new: Option<&Value>| Change {
        op,
        path: path.clone(),
        old: old.cloned(),
        new: new.cloned(),
    };
    match (old, new) {
        (None, None) => {}
        (Some(Value::Object(old)), Some(Value::Object(new))) => {
            let mut keys: Vec<&String> = old.keys().chain(new.keys().filter(|k| !old.contains_key(*k))).collect();
            keys.sort();
            for key in keys {
                path.push(key.clone());
                walk(path, old.get(key).and_then(present), new.get(key).and_then(present), changes);
                path.pop();
            }
        }
        (None, Some(new)) => changes.push(change(Op::Add, None, Some(new))),
        (Some(old), None) => changes.push(change(Op::Remove, Some(old), None)),
        (Some(old), Some(new)) if old != new => changes.push(change(Op::Change, Some(old), Some(new))),
        (Some(_), Some(_)) => {}
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::vectors;
    use serde_json::json;

    #[test]
    fn agrees_with_the_shared_vectors() {
        for case in vectors::load("diff.json")["cases"].as_array().expect("cases") {
            let (old, new) = (&case["old"], &case["new"]);
            let found: Vec<Value> =
                diff(old, new).into_iter().map(|c| json!([c.op, c.dotted(), c.old, c.new])).collect();
            assert_eq!(Value::Array(found), case["diff"], "{old} -> {new}");
            for (path, expected) in case["changed"].as_object().expect("changed") {
                assert_eq!(Value::Bool(changed(old, new, path)), *expected, "{path}: {old} -> {new}");
            }
        }
    }

    fn ops(old: Value, new: Value) -> Vec<(Op, String, Option<Value>, Option<Value>)> {
        diff(&old, &new).into_iter().map(|c| (c.op, c.dotted(), c.old, c.new)).collect()
    }

    #[test]
    fn fields_are_added_changed_and_removed_depth_first_in_key_order() {
        let old = json!({ "replicas": 1, "image": "a", "env": { "A": "1", "B": "2" } });
        let new = json!({ "replicas": 2, "env": { "A": "1", "C": "3" }, "paused": true });
        assert_eq!(
            ops(old, new),
            vec![
                (Op::Remove, "env.B".into(), Some(json!("2")), None),
                (Op::Add, "env.C".into(), None, Some(json!("3"))),
                (Op::Remove, "image".into(), Some(json!("a")), None),
                (Op::Add, "paused".into(), None, Some(json!(true))),
                (Op::Change, "replicas".into(), Some(json!(1)), Some(json!(2))),
            ]
        );
    }

    #[test]
    fn lists_and_scalars_change_whole_and_null_is_absent() {
        assert_eq!(
            ops(json!({ "ports": [80, 443] }), json!({ "ports": [80] })),
            vec![(Op::Change, "ports".into(), Some(json!([80, 443])), Some(json!([80])))]
        );
        assert_eq!(ops(json!({ "a": null }), json!({})), vec![]);
        assert_eq!(
            ops(json!({ "a": { "b": 1 } }), json!({ "a": 5 })),
            vec![(Op::Change, "a".into(), Some(json!({ "b": 1 })), Some(json!(5)))]
        );
        assert_eq!(ops(Value::Null, json!({ "a": 1 })), vec![(Op::Add, String::new(), None, Some(json!({ "a": 1 })))]);
        assert!(diff(&json!({ "x": [1] }), &json!({ "x": [1] })).is_empty());
    }

    #[test]
    fn changed_looks_at_one_path() {
        let (old, new) =
            (json!({ "spec": { "a": 1, "b": { "c": 2 } } }), json!({ "spec": { "a": 1, "b": { "c": 3 } } }));
        assert!(changed(&old, &new, "spec.b.c"));
        assert!(changed(&old, &new, "spec.b"));
        assert!(changed(&old, &new, "spec"));
        assert!(!changed(&old, &new, "spec.a"));
        assert!(!changed(&old, &new, "spec.missing"));
        assert!(changed(&json!({}), &json!({ "spec": { "x": 1 } }), "spec.x"));
    }
}
