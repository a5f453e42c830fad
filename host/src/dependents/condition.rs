//! Declarative workflow conditions, evaluated by the host on objects as JSON (JOSDK's
//! ready post-conditions and reconcile pre-conditions). Pure.

use serde_json::Value;

use crate::runtime::bindings::wasmop::plugin::types::Condition;

/// The value at a dot-separated `path` (`spec.replicas`, `status.conditions[0].type`), if any.
pub fn lookup<'a>(object: &'a Value, path: &str) -> Option<&'a Value> {
    let mut current = object;
    for segment in path.split('.').filter(|s| !s.is_empty()) {
        let (field, indexes) = match segment.find('[') {
            Some(at) => (&segment[..at], &segment[at..]),
            None => (segment, ""),
        };
        if !field.is_empty() {
            current = current.get(field)?;
        }
        for index in indexes.split('[').filter(|s| !s.is_empty()) {
            let index: usize = index.strip_suffix(']')?.parse().ok()?;
            current = current.get(index)?;
        }
    }
    Some(current)
}

/// JSON equality with numbers compared by value (`1` equals `1.0`).
fn same(a: &Value, b: &Value) -> bool {
    match (a, b) {
        (Value::Number(x), Value::Number(y)) => x.as_f64() == y.as_f64(),
        _ => a == b,
    }
}

/// Whether a declarative `condition` holds on `object`; `None` for plugin conditions, which
/// only the plugin can evaluate. An expected value that is not valid JSON never holds.
pub fn holds(condition: &Condition, object: &Value) -> Option<bool> {
    Some(match condition {
        Condition::FieldEquals(field) => match serde_json::from_str::<Value>(&field.value) {
            Ok(expected) => same(lookup(object, &field.path).unwrap_or(&Value::Null), &expected),
            Err(_) => false,
        },
        Condition::FieldsEqual(pair) => match (lookup(object, &pair.left), lookup(object, &pair.right)) {
            (Some(left), Some(right)) => !left.is_null() && same(left, right),
            _ => false,
        },
        Condition::ConditionTrue(type_) => object["status"]["conditions"]
            .as_array()
            .into_iter()
            .flatten()
            .any(|c| c["type"] == type_.as_str() && c["status"] == "True"),
        Condition::Plugin(_) => return None,
    })
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;
    use crate::runtime::bindings::wasmop::plugin::types::{FieldPair, FieldValue};

    fn equals(path: &str, value: &str) -> Condition {
        Condition::FieldEquals(FieldValue { path: path.into(), value: value.into() })
    }

    #[test]
    fn paths_reach_fields_and_list_items() {
        let o = json!({ "spec": { "ports": [{ "port": 80 }, { "port": 443 }] } });
        assert_eq!(lookup(&o, "spec.ports[1].port"), Some(&json!(443)));
        assert_eq!(lookup(&o, "spec.ports[2].port"), None);
        assert_eq!(lookup(&o, "spec.missing"), None);
    }

    #[test]
    fn field_equals_treats_a_missing_field_as_null() {
        let o = json!({ "spec": { "exposed": true, "replicas": 2 } });
        assert_eq!(holds(&equals("spec.exposed", "true"), &o), Some(true));
        assert_eq!(holds(&equals("spec.replicas", "2.0"), &o), Some(true));
        assert_eq!(holds(&equals("spec.other", "true"), &o), Some(false));
        assert_eq!(holds(&equals("spec.other", "null"), &o), Some(true));
        assert_eq!(holds(&equals("spec.exposed", "not json"), &o), Some(false));
    }

    #[test]
    fn fields_equal_needs_both_present() {
        let pair =
            Condition::FieldsEqual(FieldPair { left: "status.readyReplicas".into(), right: "spec.replicas".into() });
        assert_eq!(holds(&pair, &json!({ "spec": { "replicas": 1 } })), Some(false));
        assert_eq!(holds(&pair, &json!({ "spec": { "replicas": 1 }, "status": { "readyReplicas": 1 } })), Some(true));
    }

    #[test]
    fn condition_true_reads_status_conditions() {
        let o = json!({ "status": { "conditions": [{ "type": "Available", "status": "True" }] } });
        assert_eq!(holds(&Condition::ConditionTrue("Available".into()), &o), Some(true));
        assert_eq!(holds(&Condition::ConditionTrue("Progressing".into()), &o), Some(false));
        assert_eq!(holds(&Condition::Plugin("mine".into()), &o), None);
    }
}
