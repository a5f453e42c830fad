//! Declarative workflow conditions, evaluated on objects as JSON (JOSDK's ready
//! post-conditions and reconcile pre-conditions).

use serde_json::Value;

/// A condition on an object (a dependent's `ready_when`, `reconcile_when`): JOSDK's ready
/// post-conditions and reconcile pre-conditions. The host evaluates the declarative ones; a
/// plugin condition is answered by the plugin's `check` export.
///
/// ```
/// use wasmop_core::check::Check;
///
/// let available = Check::condition_true("Available");
/// let scaled = Check::fields_equal("status.readyReplicas", "spec.replicas");
/// let exposed = Check::field_equals("spec.exposed", true);
/// let mine = Check::plugin("has-endpoints");
/// assert_eq!(exposed, Check::FieldEquals { path: "spec.exposed".into(), value: "true".into() });
/// ```
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Check {
    /// The value at `path` equals `value` (JSON text); a missing path equals `null`.
    FieldEquals {
        /// Dot-separated path, e.g. `spec.exposed`; `[n]` indexes lists.
        path: String,
        /// The expected value as JSON text.
        value: String,
    },
    /// The values at both paths are equal (and present).
    FieldsEqual {
        /// Dot-separated path.
        left: String,
        /// Dot-separated path.
        right: String,
    },
    /// `status.conditions` has an entry of this type with status `"True"`.
    ConditionTrue(String),
    /// The plugin's `check` export decides; the string names the condition for it.
    Plugin(String),
}

impl Check {
    /// The value at `path` equals `value`.
    pub fn field_equals(path: impl Into<String>, value: impl serde::Serialize) -> Self {
        let value = serde_json::to_string(&value).unwrap_or_else(|_| "null".into());
        Self::FieldEquals { path: path.into(), value }
    }

    /// The values at `left` and `right` are equal and present.
    pub fn fields_equal(left: impl Into<String>, right: impl Into<String>) -> Self {
        Self::FieldsEqual { left: left.into(), right: right.into() }
    }

    /// The object's status condition `type_` is `"True"`.
    pub fn condition_true(type_: impl Into<String>) -> Self {
        Self::ConditionTrue(type_.into())
    }

    /// The plugin's own `check` export decides, called with `name`.
    pub fn plugin(name: impl Into<String>) -> Self {
        Self::Plugin(name.into())
    }
}

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
pub fn holds(condition: &Check, object: &Value) -> Option<bool> {
    Some(match condition {
        Check::FieldEquals { path, value } => match serde_json::from_str::<Value>(value) {
            Ok(expected) => same(lookup(object, path).unwrap_or(&Value::Null), &expected),
            Err(_) => false,
        },
        Check::FieldsEqual { left, right } => match (lookup(object, left), lookup(object, right)) {
            (Some(left), Some(right)) => !left.is_null() && same(left, right),
            _ => false,
        },
        Check::ConditionTrue(type_) => object["status"]["conditions"]
            .as_array()
            .into_iter()
            .flatten()
            .any(|c| c["type"] == type_.as_str() && c["status"] == "True"),
        Check::Plugin(_) => return None,
    })
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;
    fn equals(path: &str, value: &str) -> Check {
        Check::FieldEquals { path: path.into(), value: value.into() }
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
        let pair = Check::FieldsEqual { left: "status.readyReplicas".into(), right: "spec.replicas".into() };
        assert_eq!(holds(&pair, &json!({ "spec": { "replicas": 1 } })), Some(false));
        assert_eq!(holds(&pair, &json!({ "spec": { "replicas": 1 }, "status": { "readyReplicas": 1 } })), Some(true));
    }

    #[test]
    fn condition_true_reads_status_conditions() {
        let o = json!({ "status": { "conditions": [{ "type": "Available", "status": "True" }] } });
        assert_eq!(holds(&Check::ConditionTrue("Available".into()), &o), Some(true));
        assert_eq!(holds(&Check::ConditionTrue("Progressing".into()), &o), Some(false));
        assert_eq!(holds(&Check::Plugin("mine".into()), &o), None);
    }
}
