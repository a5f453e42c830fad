//! The conformance suite's scenarios (`scenarios/*.yaml`): the same files run against the SDK's
//! `FakeHost` (the `fixture-conform` plugin's tests) and against the real host and API server
//! (`tests/tests/conformance.rs`), and both must meet the same expectations.
//!
//! A scenario names a primary (a `Scenario` of the `fixture-conform` plugin), optionally the
//! status it already has (say, another controller's condition), the objects that exist before
//! the host starts, and what must hold once the host is done:
//!
//! ```yaml
//! description: selectors with in and notin
//! primary: { metadata: { name: s }, spec: { list: "tier in (a, b), tier notin (c)" } }
//! objects:
//!   - kind: { version: v1, kind: ConfigMap, plural: configmaps }
//!     object: { metadata: { name: one, labels: { conform-list: "x", tier: a } } }
//! expect:
//!   status: { listed: [one] }
//!   conditions: { Ready: { status: "True" } }
//!   objects: []
//!   absent: []
//! ```
//!
//! `$NS` and `$OTHER` stand for the scenario's namespace and a second one. Expected values match
//! when they are contained in the actual ones (objects by their fields, recursively; lists and
//! scalars whole), except strings starting with `~`, which match any string containing the rest.
//!
//! Once the expectations hold, a scenario may make `changes`, one after the other: each a merge
//! patch of the primary or of one of its objects (which the plugin's watch maps to the primary),
//! and whether it reconciles the primary (the plugin's filters and predicates decide):
//!
//! ```yaml
//! changes:
//!   - description: only the ignored label
//!     primary: { metadata: { labels: { conform-ignored: b } } }
//!     reconciles: false
//!   - description: new data
//!     object:
//!       kind: { version: v1, kind: ConfigMap, plural: configmaps }
//!       object: { metadata: { name: watched }, data: { v: "2" } }
//!     reconciles: true
//! ```

use std::path::{Path, PathBuf};

use serde::Deserialize;
use serde_json::Value;

/// A resource type, as a scenario names it.
#[derive(Debug, Clone, Deserialize)]
pub struct KindSpec {
    /// API group; empty for the core group.
    #[serde(default)]
    pub group: String,
    /// API version.
    pub version: String,
    /// Kind.
    pub kind: String,
    /// Plural resource name.
    pub plural: String,
}

/// An object of a kind.
#[derive(Debug, Clone, Deserialize)]
pub struct Object {
    /// Its kind.
    pub kind: KindSpec,
    /// The object (`metadata.namespace` defaults to the scenario's namespace).
    pub object: Value,
}

/// What must hold once the host is done.
#[derive(Debug, Clone, Default, Deserialize)]
#[serde(default, rename_all = "camelCase")]
pub struct Expect {
    /// Contained in the primary's `.status`.
    pub status: Option<Value>,
    /// Per condition type, contained in the primary's condition of that type.
    pub conditions: serde_json::Map<String, Value>,
    /// Objects that must exist, each containing these fields.
    pub objects: Vec<Object>,
    /// Objects that must not exist (kind, name and namespace only).
    pub absent: Vec<Object>,
    /// The reschedule the last reconcile asked for (checked where it can be seen: the FakeHost).
    pub requeue_ms: Option<u64>,
    /// The external system's objects afterwards: exactly these keys, each containing its fields.
    pub external: Option<serde_json::Map<String, Value>>,
}

/// A change made once the expectations hold.
#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Step {
    /// What it shows.
    pub description: String,
    /// A merge patch of the primary.
    #[serde(default)]
    pub primary: Option<Value>,
    /// A merge patch of an object, found by its kind and `metadata.name`.
    #[serde(default)]
    pub object: Option<Object>,
    /// Whether it reconciles the primary.
    pub reconciles: bool,
}

/// One scenario.
#[derive(Debug, Clone, Deserialize)]
pub struct Scenario {
    /// The file's name, without `.yaml`.
    #[serde(skip)]
    pub name: String,
    /// What the scenario shows.
    pub description: String,
    /// The primary: `metadata.name` and `spec`.
    pub primary: Value,
    /// The primary's status before the host runs.
    #[serde(default)]
    pub status: Option<Value>,
    /// Objects that exist before the host runs.
    #[serde(default)]
    pub objects: Vec<Object>,
    /// Objects of the external system before the host runs: the plugin's record name to the
    /// record (`value`); the host's external system is `wasmop_tests::records`, the FakeHost's
    /// its own.
    #[serde(default)]
    pub external: serde_json::Map<String, Value>,
    /// What must hold afterwards.
    pub expect: Expect,
    /// Changes made once it holds, in order.
    #[serde(default)]
    pub changes: Vec<Step>,
}

/// Applies the JSON merge patch `patch` (RFC 7386) to `target`, as the API server does.
pub fn merge(target: &mut Value, patch: &Value) {
    let Value::Object(patch) = patch else {
        *target = patch.clone();
        return;
    };
    if !target.is_object() {
        *target = Value::Object(serde_json::Map::new());
    }
    let target = target.as_object_mut().expect("made an object");
    for (key, value) in patch {
        if value.is_null() {
            target.remove(key);
        } else {
            merge(target.entry(key.clone()).or_insert(Value::Null), value);
        }
    }
}

/// The directory of the scenario files.
pub fn dir() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("scenarios")
}

/// Every scenario, by file name, with `$NS` and `$OTHER` replaced by `namespace` and `other`.
pub fn load(namespace: &str, other: &str) -> Vec<Scenario> {
    let mut paths: Vec<PathBuf> = std::fs::read_dir(dir())
        .expect("the scenarios directory")
        .map(|entry| entry.expect("a directory entry").path())
        .filter(|path| path.extension().is_some_and(|e| e == "yaml"))
        .collect();
    paths.sort();
    paths.iter().map(|path| load_one(path, namespace, other)).collect()
}

/// The scenario in `path`, with `$NS` and `$OTHER` replaced.
pub fn load_one(path: &Path, namespace: &str, other: &str) -> Scenario {
    let text = std::fs::read_to_string(path).unwrap_or_else(|e| panic!("{}: {e}", path.display()));
    let text = text.replace("$NS", namespace).replace("$OTHER", other);
    let mut scenario: Scenario =
        serde_saphyr::from_str(&text).unwrap_or_else(|e| panic!("{}: not a scenario: {e}", path.display()));
    scenario.name = path.file_stem().expect("a file name").to_string_lossy().into_owned();
    scenario
}

/// Where the external system's objects (`actual`, record name to record) fail the scenario's
/// expectation: another set of keys, or a record not containing the expected fields.
pub fn check_external(scenario: &Scenario, actual: &serde_json::Map<String, Value>) -> Vec<String> {
    let Some(expected) = &scenario.expect.external else { return Vec::new() };
    let mut failures = Vec::new();
    let (want, have): (Vec<&String>, Vec<&String>) = (expected.keys().collect(), actual.keys().collect());
    if want != have {
        failures.push(format!("external objects: expected {want:?}, got {have:?}"));
    }
    for (key, fields) in expected {
        if let Some(object) = actual.get(key) {
            failures.extend(mismatch(fields, object).map(|m| format!("external {key}{m}")));
        }
    }
    failures
}

/// Where `actual` fails to contain `expected`, as a path and both values; `None` when it does.
pub fn mismatch(expected: &Value, actual: &Value) -> Option<String> {
    mismatch_at("", expected, actual)
}

fn mismatch_at(path: &str, expected: &Value, actual: &Value) -> Option<String> {
    match (expected, actual) {
        (Value::Object(want), Value::Object(have)) => want.iter().find_map(|(key, value)| {
            mismatch_at(&format!("{path}.{key}"), value, have.get(key).unwrap_or(&Value::Null))
        }),
        (Value::String(want), Value::String(have)) if want.starts_with('~') => {
            (!have.contains(&want[1..])).then(|| format!("{path}: {have:?} does not contain {:?}", &want[1..]))
        }
        _ if expected == actual => None,
        _ => Some(format!("{path}: expected {expected}, got {actual}")),
    }
}

/// Checks a finished scenario against what a driver observed: the primary as it ended, a
/// lookup of objects, and the reschedule the last reconcile asked for (when the driver can
/// see it). Returns every failed expectation.
pub fn check(
    scenario: &Scenario,
    primary: &Value,
    find: impl Fn(&KindSpec, Option<&str>, &str) -> Option<Value>,
    namespace: &str,
    requeue_ms: Option<Option<u64>>,
) -> Vec<String> {
    let mut failures = Vec::new();
    let status = &primary["status"];
    if let Some(expected) = &scenario.expect.status
        && let Some(m) = mismatch(expected, status)
    {
        failures.push(format!("status{m}"));
    }
    for (type_, expected) in &scenario.expect.conditions {
        let condition = status["conditions"].as_array().into_iter().flatten().find(|c| c["type"] == type_.as_str());
        match condition {
            None => failures.push(format!("no {type_} condition in {status}")),
            Some(actual) => failures.extend(mismatch(expected, actual).map(|m| format!("condition {type_}{m}"))),
        }
    }
    let locate = |object: &Object| {
        let metadata = &object.object["metadata"];
        let ns = metadata["namespace"].as_str().unwrap_or(namespace).to_owned();
        (ns, metadata["name"].as_str().unwrap_or_default().to_owned())
    };
    for object in &scenario.expect.objects {
        let (ns, name) = locate(object);
        match find(&object.kind, Some(&ns), &name) {
            None => failures.push(format!("{} {ns}/{name} does not exist", object.kind.kind)),
            Some(actual) => {
                let mut expected = object.object.clone();
                expected["metadata"].as_object_mut().map(|m| m.remove("namespace"));
                failures.extend(mismatch(&expected, &actual).map(|m| format!("{} {ns}/{name}{m}", object.kind.kind)));
            }
        }
    }
    for object in &scenario.expect.absent {
        let (ns, name) = locate(object);
        if find(&object.kind, Some(&ns), &name).is_some() {
            failures.push(format!("{} {ns}/{name} exists", object.kind.kind));
        }
    }
    if let (Some(expected), Some(actual)) = (scenario.expect.requeue_ms, requeue_ms)
        && actual != Some(expected)
    {
        failures.push(format!("requeue: expected {expected} ms, got {actual:?}"));
    }
    failures
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    #[test]
    fn containment_and_substrings() {
        let actual = json!({ "a": { "b": [1, 2], "c": "the whole message" }, "d": 1 });
        assert_eq!(mismatch(&json!({ "a": { "c": "~whole" } }), &actual), None);
        assert_eq!(mismatch(&json!({ "a": { "b": [1, 2] } }), &actual), None);
        assert!(mismatch(&json!({ "a": { "b": [1] } }), &actual).unwrap().starts_with(".a.b"));
        assert!(mismatch(&json!({ "e": 1 }), &actual).is_some());
        assert!(mismatch(&json!({ "a": { "c": "~part" } }), &actual).is_some());
    }

    #[test]
    fn a_merge_patch_merges_objects_replaces_the_rest_and_removes_nulls() {
        let mut target = json!({ "metadata": { "labels": { "a": "1", "b": "2" } }, "list": [1, 2], "gone": 1 });
        merge(&mut target, &json!({ "metadata": { "labels": { "a": "3", "b": null } }, "list": [3], "gone": null }));
        assert_eq!(target, json!({ "metadata": { "labels": { "a": "3" } }, "list": [3] }));
    }

    #[test]
    fn every_scenario_file_loads() {
        let scenarios = load("ns", "other");
        assert!(scenarios.len() >= 7, "{} scenarios", scenarios.len());
        assert!(scenarios.iter().all(|s| !s.description.is_empty()));
    }
}
