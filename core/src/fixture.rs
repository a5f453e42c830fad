//! Fixtures: a primary, the objects and external records around it, what must hold once the host
//! is done, and changes made afterwards. The conformance suite's scenarios
//! (`tests/conformance/scenarios/*.yaml`) are fixtures, run against the SDK's FakeHost, the real
//! host and API server, and `wasmop test`; so is any file a plugin's author writes for `wasmop
//! test`, which may leave `expect` out to see what the host would write.
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
//! The primary's kind is the plugin's. `$NS` and `$OTHER` stand for the fixture's namespace and a
//! second one (the loaders replace them). Expected values match when they are contained in the
//! actual ones (objects by their fields, recursively; lists and scalars whole), except strings
//! starting with `~`, which match any string containing the rest.
//!
//! Once the expectations hold, a fixture may make `changes`, one after the other: each a merge
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
//!
//! [`run`] runs a fixture through the in-memory loop ([`crate::settle`]).

use serde::Deserialize;
use serde_json::{Value, json};

use crate::external::ExternalObject;
use crate::kind::KindRef;
use crate::settle::{Guest, Pass, Settle, World};

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
#[serde(deny_unknown_fields)]
pub struct Scenario {
    /// The file's name, without `.yaml`.
    #[serde(skip)]
    pub name: String,
    /// What the scenario shows.
    #[serde(default)]
    pub description: String,
    /// The primary: `metadata.name` and `spec`.
    pub primary: Value,
    /// The primary's status before the host runs.
    #[serde(default)]
    pub status: Option<Value>,
    /// Objects that exist before the host runs.
    #[serde(default)]
    pub objects: Vec<Object>,
    /// Objects of the external system before the host runs, by key: each an object of the
    /// plugin's one external dependent (a `dependent` field names it when there are several),
    /// with the ID `existing-<key>`. [`run`] plays the external system itself; against the API
    /// server, the conform plugin's system is `wasmop_tests::records`.
    #[serde(default)]
    pub external: serde_json::Map<String, Value>,
    /// What must hold afterwards; absent in a fixture that only shows what the host would do.
    #[serde(default)]
    pub expect: Option<Expect>,
    /// Changes made once it holds, in order.
    #[serde(default)]
    pub changes: Vec<Step>,
}

/// Where the external system's objects (`actual`, record name to record) fail the scenario's
/// expectation: another set of keys, or a record not containing the expected fields.
pub fn check_external(scenario: &Scenario, actual: &serde_json::Map<String, Value>) -> Vec<String> {
    let Some(expected) = scenario.expect.as_ref().and_then(|e| e.external.as_ref()) else { return Vec::new() };
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
    let Some(expect) = &scenario.expect else { return failures };
    let status = &primary["status"];
    if let Some(expected) = &expect.status
        && let Some(m) = mismatch(expected, status)
    {
        failures.push(format!("status{m}"));
    }
    for (type_, expected) in &expect.conditions {
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
    for object in &expect.objects {
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
    for object in &expect.absent {
        let (ns, name) = locate(object);
        if find(&object.kind, Some(&ns), &name).is_some() {
            failures.push(format!("{} {ns}/{name} exists", object.kind.kind));
        }
    }
    if let (Some(expected), Some(actual)) = (expect.requeue_ms, requeue_ms)
        && actual != Some(expected)
    {
        failures.push(format!("requeue: expected {expected} ms, got {actual:?}"));
    }
    failures
}

impl KindSpec {
    /// The kind in the rules' terms (namespaced).
    pub fn to_core(&self) -> KindRef {
        KindRef {
            group: self.group.clone(),
            version: self.version.clone(),
            kind: self.kind.clone(),
            plural: Some(self.plural.clone()),
            namespaced: true,
        }
    }
}

/// One reconcile loop of a fixture's run: the first, or the one after a change that reconciles.
#[derive(Debug)]
pub struct Stage {
    /// What led to it: `initial`, or the change's description.
    pub title: String,
    /// Its passes.
    pub passes: Vec<Pass>,
}

/// What running a fixture came to.
#[derive(Debug)]
pub struct Outcome {
    /// The reconcile loops, in order.
    pub stages: Vec<Stage>,
    /// The primary as it ended.
    pub primary: Value,
    /// Every object of the store as it ended (the primary's too), by kind.
    pub objects: Vec<(KindRef, Value)>,
    /// The external system's objects as it ended.
    pub external: Vec<ExternalObject>,
    /// The failed expectations (always empty without `expect` and changes).
    pub failures: Vec<String>,
}

/// The external records of a fixture (record name to fields) as the external system's objects:
/// each of the plugin's one external dependent (or the dependent its `dependent` field names),
/// with the ID `existing-<name>`.
fn external(scenario: &Scenario, dependents: &[String]) -> Result<Vec<ExternalObject>, String> {
    scenario
        .external
        .iter()
        .map(|(key, record)| {
            let mut object = record.clone();
            let named = object.as_object_mut().and_then(|o| o.remove("dependent"));
            let dependent = match (named.as_ref().and_then(Value::as_str), dependents) {
                (Some(name), _) => name.to_owned(),
                (None, [only]) => only.clone(),
                (None, _) => {
                    return Err(format!(
                        "external record {key}: name its `dependent` (the plugin declares {dependents:?})"
                    ));
                }
            };
            Ok(ExternalObject { dependent, key: key.clone(), id: Some(format!("existing-{key}")), object })
        })
        .collect()
}

/// Runs `scenario` in `namespace` through `settle`: puts its objects and external records in a
/// fresh store, its primary (of the plugin's kind, generation 1, with its prior status), settles
/// it, checks the expectations, then makes each change and checks whether it reconciles (and
/// settles again when it does). An error when the fixture cannot be run (a primary without a
/// name, a loop that never settles, a change of an object that does not exist).
pub fn run<G: Guest + ?Sized>(settle: &Settle<'_, G>, scenario: &Scenario, namespace: &str) -> Result<Outcome, String> {
    let spec = settle.spec();
    let mut world = World::default();
    for object in &scenario.objects {
        let mut stored = object.object.clone();
        if stored["metadata"]["namespace"].is_null() {
            stored["metadata"]["namespace"] = json!(namespace);
        }
        World::replace(&mut world.objects, &object.kind.to_core(), stored);
    }
    let dependents: Vec<String> = spec.external.iter().map(|(d, _)| d.name.clone()).collect();
    world.external = external(scenario, &dependents)?;
    let mut primary = scenario.primary.clone();
    primary["apiVersion"] = json!(spec.primary.api_version());
    primary["kind"] = json!(spec.primary.kind);
    if spec.primary.namespaced && primary["metadata"]["namespace"].is_null() {
        primary["metadata"]["namespace"] = json!(namespace);
    }
    if primary["metadata"]["generation"].is_null() {
        primary["metadata"]["generation"] = json!(1);
    }
    if let Some(status) = &scenario.status {
        primary["status"] = status.clone();
    }
    let mut stages = Vec::new();
    let settled = |world: &mut World, primary: Value, title: &str, stages: &mut Vec<Stage>| -> Result<Value, String> {
        let key = crate::kind::ObjectKey::of_json(&primary).ok_or("the primary needs metadata.name")?;
        let passes = settle.settle(world, primary)?.map_err(|unsettled| {
            let last = unsettled.0.last().map(|p| format!("{:?}", p.result)).unwrap_or_default();
            format!(
                "{title}: still changing after {} passes; a reconcile of its own result must change nothing \
                 (last pass: {last})",
                unsettled.0.len()
            )
        })?;
        stages.push(Stage { title: title.to_owned(), passes });
        Ok(world.stored(&spec.primary, &key).cloned().unwrap_or(Value::Null))
    };
    let mut primary = settled(&mut world, primary, "initial", &mut stages)?;
    let last = stages.last().and_then(|s| s.passes.last()).map(|p| &p.result);
    let requeue = match last {
        Some(Ok(outcome)) => Some(outcome.reschedule_after_ms),
        _ => None,
    };
    let find = |kind: &KindSpec, ns: Option<&str>, name: &str| -> Option<Value> {
        let at = |o: &&Value| o["metadata"]["name"].as_str() == Some(name) && o["metadata"]["namespace"].as_str() == ns;
        world.objects_of(&kind.to_core()).into_iter().find(at).cloned()
    };
    let mut failures = check(scenario, &primary, find, namespace, requeue);
    let records = world.external.iter().map(|o| (o.key.clone(), o.object.clone())).collect();
    failures.extend(check_external(scenario, &records));
    let mut revision = 100;
    for (i, step) in scenario.changes.iter().enumerate() {
        revision += 1;
        let reconciles = change(settle, &mut world, &mut primary, step, revision, namespace)?;
        if reconciles != step.reconciles {
            failures.push(format!("change {i} ({}): reconciles {reconciles}", step.description));
        }
        if reconciles {
            primary = settled(&mut world, primary, &step.description, &mut stages)?;
        }
    }
    Ok(Outcome { stages, primary, objects: world.objects, external: world.external, failures })
}

/// Makes the change `step` (of the primary, or of one of its objects) as the API server would:
/// a new resourceVersion, and a new generation when the spec changes; returns whether it
/// reconciles the primary.
fn change<G: Guest + ?Sized>(
    settle: &Settle<'_, G>,
    world: &mut World,
    primary: &mut Value,
    step: &Step,
    revision: u64,
    namespace: &str,
) -> Result<bool, String> {
    let bump = |object: &mut Value| object["metadata"]["resourceVersion"] = json!(revision.to_string());
    let spec_of = crate::settle::spec_of;
    if let Some(patch) = &step.primary {
        let old = primary.clone();
        crate::status::merge(primary, patch);
        bump(primary);
        if spec_of(&old) != spec_of(primary) {
            let generation = old["metadata"]["generation"].as_i64().unwrap_or(1);
            primary["metadata"]["generation"] = json!(generation + 1);
        }
        return settle.reconciles_on(primary.clone(), Some(old));
    }
    let object =
        step.object.as_ref().ok_or_else(|| format!("change {:?}: neither primary nor object", step.description))?;
    let kind = object.kind.to_core();
    let name = object.object["metadata"]["name"].as_str().unwrap_or_default();
    let ns = object.object["metadata"]["namespace"].as_str().unwrap_or(namespace);
    let old = world
        .objects_of(&kind)
        .into_iter()
        .find(|o| o["metadata"]["name"] == name && o["metadata"]["namespace"] == ns)
        .cloned()
        .ok_or_else(|| format!("change {:?}: no {} {ns}/{name} to change", step.description, object.kind.kind))?;
    let mut new = old.clone();
    crate::status::merge(&mut new, &object.object);
    bump(&mut new);
    let reconciles = settle.reconciles_on_watched(world, primary, &kind, Some(new.clone()), Some(old))?;
    World::replace(&mut world.objects, &kind, new);
    Ok(reconciles)
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

    /// Copies `spec.data` into a ConfigMap dependent and reports its keys; its predicate asks the
    /// plugin, which passes label changes only when the label `pass` is `yes`.
    struct Copy;

    fn copy_spec() -> crate::settle::PluginSpec {
        use crate::dependent::{DependentSpec, Ownership};
        use crate::predicate::{Predicate, Term};
        let kind = |group: &str, kind: &str| KindRef {
            group: group.into(),
            version: "v1".into(),
            kind: kind.into(),
            plural: None,
            namespaced: true,
        };
        crate::settle::PluginSpec {
            name: "copy".into(),
            primary: kind("example.com", "Copy"),
            label_selector: None,
            projection: None,
            filters: crate::filter::Filters::default(),
            predicate: Some(
                Predicate::new(vec![
                    Term::GenerationChanged,
                    Term::LabelsChanged,
                    Term::Plugin("pass".into()),
                    Term::And,
                    Term::Or,
                ])
                .unwrap(),
            ),
            watches: Vec::new(),
            dependents: vec![DependentSpec {
                name: "copy".into(),
                kind: kind("", "ConfigMap"),
                read_only: false,
                depends_on: Vec::new(),
                ready_when: None,
                reconcile_when: None,
                declared_ownership: Ownership::OwnerReference,
                ready_when_empty: false,
                namespace: None,
                adopt: false,
                external: None,
            }],
            external: Vec::new(),
            conditions: true,
        }
    }

    impl Guest for Copy {
        fn desired(
            &self,
            _: &crate::settle::View,
            primary: &str,
        ) -> Result<Vec<crate::dependent::Desired>, crate::settle::Failure> {
            let primary: Value = serde_json::from_str(primary).unwrap();
            let object = json!({ "apiVersion": "v1", "kind": "ConfigMap", "metadata": { "name": "copy" }, "data": primary["spec"]["data"] });
            Ok(vec![crate::dependent::Desired { dependent: "copy".into(), object, keep: false, key: None }])
        }

        fn reconcile(
            &self,
            view: &crate::settle::View,
            _: &str,
        ) -> Result<crate::settle::Outcome, crate::settle::Failure> {
            let keys = view.dependents[0].objects[0]["data"].as_object().map_or(0, |d| d.len());
            Ok(crate::settle::Outcome {
                readiness: Some((true, format!("{keys} keys"))),
                status: Some(json!({ "keys": keys })),
                ..Default::default()
            })
        }

        fn error_status(&self, _: &crate::settle::View, _: &str, _: &crate::settle::Failure) -> Option<Value> {
            None
        }

        fn check(&self, _: &crate::settle::View, _: &str, _: &str, _: Option<&str>) -> bool {
            true
        }

        fn map_secondary(&self, _: &crate::settle::View, _: &str) -> Result<Vec<(Option<String>, String)>, String> {
            Ok(Vec::new())
        }

        fn secondaries_of(
            &self,
            _: &crate::settle::View,
            _: &str,
        ) -> Result<Vec<(KindRef, Option<String>, String)>, String> {
            Ok(Vec::new())
        }

        fn filter(&self, _: &str, _: crate::predicate::EventKind, object: &Value, _: Option<&Value>) -> bool {
            object["metadata"]["labels"]["pass"] == "yes"
        }
    }

    fn fixture(yaml: serde_json::Value) -> Scenario {
        serde_json::from_value(yaml).unwrap()
    }

    #[test]
    fn a_fixture_settles_writes_once_and_decides_its_changes_by_the_predicate() {
        let settle = Settle::new(copy_spec(), &Copy).unwrap();
        let scenario = fixture(json!({
            "primary": { "metadata": { "name": "c" }, "spec": { "data": { "a": "1" } } },
            "expect": {
                "status": { "keys": 1, "observedGeneration": 1 },
                "conditions": { "Ready": { "status": "True", "message": "1 keys" } },
                "objects": [{ "kind": { "version": "v1", "kind": "ConfigMap", "plural": "configmaps" },
                              "object": { "metadata": { "name": "copy", "labels": { "wasmop.dev/managed-by": "copy" } },
                                          "data": { "a": "1" } } }],
            },
            "changes": [
                { "description": "a label the plugin rejects", "primary": { "metadata": { "labels": { "pass": "no" } } }, "reconciles": false },
                { "description": "a label the plugin passes", "primary": { "metadata": { "labels": { "pass": "yes" } } }, "reconciles": true },
                { "description": "new data", "primary": { "spec": { "data": { "b": "2" } } }, "reconciles": true },
            ],
        }));
        let outcome = run(&settle, &scenario, "ns").unwrap();
        assert_eq!(outcome.failures, Vec::<String>::new());
        let titles: Vec<&str> = outcome.stages.iter().map(|s| s.title.as_str()).collect();
        assert_eq!(titles, ["initial", "a label the plugin passes", "new data"]);
        let initial = &outcome.stages[0].passes;
        assert_eq!(initial.len(), 2, "the second pass changes nothing");
        assert!(matches!(&initial[0].writes[0], crate::settle::Write::Apply { kind, .. } if kind == "v1/ConfigMap"));
        assert!(matches!(&initial[0].writes[1], crate::settle::Write::Status { patch } if patch["keys"] == 1));
        assert!(initial[1].writes.is_empty());
        assert_eq!(outcome.primary["status"]["keys"], 2);
        assert_eq!(outcome.primary["metadata"]["generation"], 2);
    }

    #[test]
    fn unmet_expectations_and_wrong_change_decisions_are_failures() {
        let settle = Settle::new(copy_spec(), &Copy).unwrap();
        let scenario = fixture(json!({
            "primary": { "metadata": { "name": "c" }, "spec": { "data": {} } },
            "expect": { "status": { "keys": 3 }, "absent": [{ "kind": { "version": "v1", "kind": "ConfigMap", "plural": "configmaps" }, "object": { "metadata": { "name": "copy" } } }] },
            "changes": [{ "description": "status only", "primary": { "status": { "x": 1 } }, "reconciles": true }],
        }));
        let outcome = run(&settle, &scenario, "ns").unwrap();
        assert_eq!(
            outcome.failures,
            ["status.keys: expected 3, got 0", "ConfigMap ns/copy exists", "change 0 (status only): reconciles false"]
        );
        let without = fixture(json!({ "primary": { "metadata": { "name": "c" }, "spec": { "data": {} } } }));
        assert!(run(&settle, &without, "ns").unwrap().failures.is_empty(), "no expectations, no failures");
    }
}
