//! The status a reconcile writes: the plugin's fields merged into `.status`,
//! `observedGeneration`, and the conditions the host keeps for the plugin (kstatus conventions:
//! `Ready`, `Reconciling`, `Degraded`). A status that already holds it all is not written.
//!
//! Conditions the host keeps, when the plugin lets it ([`Report`]):
//!
//! | after | `Ready` | `Reconciling` | `Degraded` |
//! |---|---|---|---|
//! | success, ready (or no readiness given) | True | False | False |
//! | success, not ready | False (`NotReady`, the plugin's message) | True | False |
//! | failure, a retry follows | False (the reason) | True | True (the error) |
//! | failure, no retry | False (the reason) | False | True (the error) |
//!
//! The top-level `observedGeneration` moves on success only (a failure has not brought the
//! object to its generation). Every condition carries `observedGeneration`; `lastTransitionTime` changes only when its
//! status does. Conditions of other types (other controllers') are kept as they are, even ones
//! that do not parse as `metav1.Condition`.

use serde_json::{Map, Value, json};

/// What a reconcile came to, for the host's conditions.
#[derive(Debug, Clone, PartialEq)]
pub enum Report<'a> {
    /// The reconcile succeeded; the plugin said whether the primary is ready, or nothing.
    Success {
        /// `Some((ready, message))` when the plugin stated readiness.
        readiness: Option<(bool, &'a str)>,
    },
    /// The reconcile failed.
    Failure {
        /// A short CamelCase reason, e.g. `ReconcileFailed`.
        reason: &'a str,
        /// The error.
        message: &'a str,
        /// Whether a retry follows.
        retrying: bool,
    },
}

/// The condition types the host keeps.
pub const HOST_CONDITIONS: [&str; 3] = ["Ready", "Reconciling", "Degraded"];

/// The host-kept condition types ([`HOST_CONDITIONS`]) among the conditions of the plugin's
/// `status`: the host replaces them with its own when it keeps the conditions.
pub fn host_kept_in(status: &Value) -> Vec<&'static str> {
    let Some(conditions) = status.get("conditions").and_then(Value::as_array) else { return Vec::new() };
    HOST_CONDITIONS.into_iter().filter(|type_| conditions.iter().any(|c| c["type"] == *type_)).collect()
}

/// The status merge patch for a reconcile of a primary with `current` status and `generation`:
/// the plugin's `status` (a JSON object) with `observedGeneration` set to `generation` unless the
/// plugin set it, and the host's conditions for `report` when given. `Ok(None)` when the status
/// already holds it all; an error when `status` is not a JSON object.
pub fn patch(
    current: Option<&Value>,
    status: Option<Value>,
    generation: Option<i64>,
    report: Option<&Report<'_>>,
    now: &str,
) -> Result<Option<Value>, String> {
    let mut fields = match status {
        None => Map::new(),
        Some(Value::Object(fields)) => fields,
        Some(other) => return Err(format!("the status must be a JSON object, got {}", type_name(&other))),
    };
    // A failed reconcile has not brought the object to its generation: its conditions say which
    // generation failed, the top-level `observedGeneration` stays where the last success left it.
    let failed = matches!(report, Some(Report::Failure { .. }));
    if let Some(generation) = generation
        && !failed
        && (!fields.is_empty() || report.is_some())
    {
        fields.entry("observedGeneration").or_insert(json!(generation));
    }
    if let Some(report) = report {
        // The plugin's own conditions, if it wrote any, else the current ones; then the host's.
        let mut conditions: Vec<Value> = match fields.get("conditions").or_else(|| current.map(|c| &c["conditions"])) {
            Some(Value::Array(conditions)) => conditions.clone(),
            _ => Vec::new(),
        };
        for (type_, status, reason, message) in host_conditions(report) {
            set(&mut conditions, type_, status, reason, message, generation, now);
        }
        fields.insert("conditions".into(), Value::Array(conditions));
    }
    if fields.is_empty() {
        return Ok(None);
    }
    let status = Value::Object(fields);
    // Moved into the patch: `json!` would serialize the status into a copy of itself.
    Ok(changes(current.unwrap_or(&Value::Null), &status)
        .then(|| Value::Object(Map::from_iter([("status".into(), status)]))))
}

/// `(type, status, reason, message)` of the host's conditions after `report`.
fn host_conditions<'a>(report: &'a Report<'a>) -> [(&'static str, bool, &'a str, &'a str); 3] {
    match *report {
        Report::Success { readiness: None | Some((true, _)) } => {
            let message = match report {
                Report::Success { readiness: Some((_, message)) } => message,
                _ => "",
            };
            [("Ready", true, "Ready", message), ("Reconciling", false, "Ready", ""), ("Degraded", false, "Ready", "")]
        }
        Report::Success { readiness: Some((false, message)) } => [
            ("Ready", false, "NotReady", message),
            ("Reconciling", true, "NotReady", message),
            ("Degraded", false, "NotReady", ""),
        ],
        Report::Failure { reason, message, retrying } => [
            ("Ready", false, reason, message),
            ("Reconciling", retrying, reason, message),
            ("Degraded", true, reason, message),
        ],
    }
}

/// Sets the condition `type_` in `conditions` (as JSON), keeping its `lastTransitionTime`
/// unless its status changes and any fields other writers added. Returns whether it changed.
pub fn set(
    conditions: &mut Vec<Value>,
    type_: &str,
    status: bool,
    reason: &str,
    message: &str,
    generation: Option<i64>,
    now: &str,
) -> bool {
    let status = if status { "True" } else { "False" };
    let index = match conditions.iter().position(|c| c["type"] == type_) {
        Some(index) => index,
        None => {
            conditions.push(json!({ "type": type_ }));
            conditions.len() - 1
        }
    };
    let condition = &mut conditions[index];
    let before = condition.clone();
    if condition["status"] != status || condition["lastTransitionTime"].as_str().is_none_or(str::is_empty) {
        condition["lastTransitionTime"] = json!(now);
    }
    condition["status"] = json!(status);
    // metav1.Condition requires a reason matching its CamelCase pattern and a message.
    condition["reason"] = json!(if reason.is_empty() { "Unknown" } else { reason });
    condition["message"] = json!(message);
    match generation {
        Some(generation) => condition["observedGeneration"] = json!(generation),
        None => {
            if let Some(fields) = condition.as_object_mut() {
                fields.remove("observedGeneration");
            }
        }
    }
    *condition != before
}

/// RFC 7386 JSON merge patch of `patch` onto `target`.
pub fn merge(target: &mut Value, patch: &Value) {
    let Value::Object(patch) = patch else {
        *target = patch.clone();
        return;
    };
    if !target.is_object() {
        *target = json!({});
    }
    let target = target.as_object_mut().expect("made an object above");
    for (key, value) in patch {
        if value.is_null() {
            target.remove(key);
        } else {
            merge(target.entry(key.clone()).or_insert(Value::Null), value);
        }
    }
}

/// Whether [`merge`] of `patch` would change `target`, found without copying either.
pub fn changes(target: &Value, patch: &Value) -> bool {
    let Value::Object(patch) = patch else { return target != patch };
    // Merging an object into anything else makes it an object.
    let Value::Object(target) = target else { return true };
    patch.iter().any(|(key, value)| match (target.get(key), value) {
        (None, Value::Null) => false,
        (Some(_), Value::Null) | (None, _) => true,
        (Some(current), value) => changes(current, value),
    })
}

fn type_name(value: &Value) -> &'static str {
    match value {
        Value::Null => "null",
        Value::Bool(_) => "a boolean",
        Value::Number(_) => "a number",
        Value::String(_) => "a string",
        Value::Array(_) => "an array",
        Value::Object(_) => "an object",
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const T1: &str = "2026-11-23T10:00:00Z";
    const T2: &str = "2026-11-23T11:00:00Z";

    fn condition<'a>(status: &'a Value, type_: &str) -> &'a Value {
        status["conditions"].as_array().unwrap().iter().find(|c| c["type"] == type_).unwrap()
    }

    #[test]
    fn a_status_already_held_is_not_written_again() {
        let current = json!({ "title": "a", "observedGeneration": 2 });
        assert_eq!(patch(Some(&current), Some(json!({ "title": "a" })), Some(2), None, T1), Ok(None));
        let changed = patch(Some(&current), Some(json!({ "title": "b" })), Some(2), None, T1).unwrap().unwrap();
        assert_eq!(changed, json!({ "status": { "title": "b", "observedGeneration": 2 } }));
        assert_eq!(patch(None, None, Some(2), None, T1), Ok(None), "no status, no report: nothing to write");
        assert!(patch(None, Some(json!([1])), None, None, T1).unwrap_err().contains("an array"));
    }

    #[test]
    fn host_conditions_follow_the_report_and_keep_transition_times() {
        let ready = Report::Success { readiness: Some((true, "serving")) };
        let first = patch(None, Some(json!({ "url": "x" })), Some(1), Some(&ready), T1).unwrap().unwrap();
        let status = &first["status"];
        assert_eq!(condition(status, "Ready")["status"], "True");
        assert_eq!(condition(status, "Ready")["message"], "serving");
        assert_eq!(condition(status, "Ready")["observedGeneration"], 1);
        assert_eq!(condition(status, "Reconciling")["status"], "False");
        assert_eq!(patch(Some(status), Some(json!({ "url": "x" })), Some(1), Some(&ready), T2), Ok(None));

        let failed = Report::Failure { reason: "ReconcileFailed", message: "boom", retrying: true };
        let second = patch(Some(status), None, Some(2), Some(&failed), T2).unwrap().unwrap();
        let status2 = &second["status"];
        assert_eq!(status2["observedGeneration"], Value::Null, "a failure does not observe generation 2");
        assert_eq!(condition(status2, "Degraded")["observedGeneration"], 2);
        assert_eq!(condition(status2, "Ready")["lastTransitionTime"], T2);
        assert_eq!(condition(status2, "Degraded")["message"], "boom");
        assert_eq!(condition(status2, "Reconciling")["status"], "True");
        assert_eq!(status2["url"], Value::Null, "a merge patch leaves the plugin's fields alone");
    }

    #[test]
    fn foreign_conditions_are_kept() {
        let foreign = json!({ "type": "Synced", "status": "True", "reason": "Other" });
        let current = json!({ "conditions": [foreign.clone()] });
        let report = Report::Success { readiness: Some((false, "waiting")) };
        let written = patch(Some(&current), None, Some(3), Some(&report), T1).unwrap().unwrap();
        let conditions = written["status"]["conditions"].as_array().unwrap();
        assert_eq!(conditions[0], foreign);
        assert_eq!(conditions.len(), 4);
        assert_eq!(condition(&written["status"], "Reconciling")["message"], "waiting");
    }

    #[test]
    fn the_plugins_own_host_kept_conditions_are_found() {
        let status = json!({ "conditions": [
            { "type": "Degraded", "status": "False" }, { "type": "Synced" }, { "type": "Ready", "status": "True" }
        ] });
        assert_eq!(host_kept_in(&status), ["Ready", "Degraded"]);
        assert!(host_kept_in(&json!({ "conditions": [{ "type": "Synced" }] })).is_empty());
        assert!(host_kept_in(&json!({ "conditions": "Ready" })).is_empty());
        assert!(host_kept_in(&json!({ "url": "x" })).is_empty());
    }

    #[test]
    fn merge_patch_follows_rfc_7386() {
        let mut target = json!({ "a": { "b": 1, "c": 2 }, "d": [1] });
        merge(&mut target, &json!({ "a": { "b": null, "e": 3 }, "d": [2] }));
        assert_eq!(target, json!({ "a": { "c": 2, "e": 3 }, "d": [2] }));
    }

    #[test]
    fn changes_tells_whether_a_merge_would_change_the_target() {
        let targets =
            [json!(null), json!({}), json!("text"), json!({ "a": { "b": 1, "c": [1, 2] }, "d": "x", "e": null })];
        let patches = [
            json!({}),
            json!(null),
            json!("text"),
            json!({ "a": { "b": 1 } }),
            json!({ "a": { "b": 2 } }),
            json!({ "a": { "c": [1, 2] }, "d": "x" }),
            json!({ "a": { "c": [2, 1] } }),
            json!({ "a": { "z": null } }),
            json!({ "a": { "b": null } }),
            json!({ "z": null }),
            json!({ "z": {} }),
            json!({ "d": { "y": null } }),
            json!({ "e": null }),
            json!({ "a": {} }),
        ];
        for target in &targets {
            for patch in &patches {
                let mut merged = target.clone();
                merge(&mut merged, patch);
                assert_eq!(changes(target, patch), merged != *target, "{target} merged with {patch}");
            }
        }
    }

    #[test]
    fn set_keeps_the_transition_time_while_the_status_holds() {
        let mut conditions = Vec::new();
        assert!(set(&mut conditions, "Ready", true, "Ready", "", Some(1), T1));
        assert!(!set(&mut conditions, "Ready", true, "Ready", "", Some(1), T2));
        assert!(set(&mut conditions, "Ready", true, "Ready", "", Some(2), T2));
        assert_eq!(conditions[0]["lastTransitionTime"], T1);
        assert!(set(&mut conditions, "Ready", false, "", "down", Some(2), T2));
        assert_eq!((&conditions[0]["lastTransitionTime"], &conditions[0]["reason"]), (&json!(T2), &json!("Unknown")));
    }
}
