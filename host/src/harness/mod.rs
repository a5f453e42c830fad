//! `wasmop test`: runs a compiled plugin through the host's rules without a cluster.
//!
//! The loop is `wasmop_core::settle`'s, the one the SDK's `FakeHost` runs a Rust reconciler in;
//! here its plugin side ([`Guest`]) is the component, called through [`Module`] as the host
//! calls it, its `get`, `list` and `secondaries` imports answered from the fixture's objects by
//! the host's rules ([`View`]: only declared kinds, label selectors, projections). Fixtures are
//! `wasmop_core::fixture`'s: the conformance scenarios are fixtures as they stand.
//!
//! A fixture may also be a record `wasmop run --record` wrote ([`records`]): it holds when the
//! plugin ends as the recorded reconcile did.
//!
//! For each fixture, [`render`] shows the writes the host would make (applies of dependents'
//! objects, deletes, external objects, the primary's metadata and status patches), the events
//! and the requeue of every pass, then `ok` or `FAILED` with the unmet expectations when the
//! fixture has any.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::sync::Arc;

use futures::future::{BoxFuture, FutureExt};
use serde::Serialize;
use serde_json::Value;
use wasmop_core::KindRef;
use wasmop_core::dependent::Desired;
use wasmop_core::external::Tracking;
use wasmop_core::fixture::{self, Scenario};
use wasmop_core::mapping::Owners;
use wasmop_core::predicate::EventKind;
use wasmop_core::settle::{Event, Failure, Guest, Mapper, Outcome, Pass, PluginSpec, Settle, View, WatchSpec, Write};

pub mod records;

use crate::runtime::bindings::{self, wasmop::plugin::types};
use crate::runtime::{CacheReader, CallError, GetResult, ListResult, Module};

/// The plugin's `describe()` in the loop's terms; an error when a predicate is malformed (as
/// the host refuses to load it).
pub fn spec(config: &types::PluginConfig) -> Result<PluginSpec, String> {
    let watches = config.watches.iter().map(|watch| {
        Ok(WatchSpec {
            kind: (&watch.kind).into(),
            namespace: watch.namespace.clone(),
            label_selector: watch.label_selector.clone(),
            projection: watch.projection.clone(),
            mapper: match watch.mapper {
                types::Mapper::OwnerReferences(types::Owners::Controller) => Mapper::Owners(Owners::Controller),
                types::Mapper::OwnerReferences(types::Owners::Any) => Mapper::Owners(Owners::Any),
                types::Mapper::Annotations => Mapper::Annotations,
                types::Mapper::Plugin => Mapper::Plugin,
                types::Mapper::PrimaryReferences => Mapper::PrimaryReferences,
            },
            predicate: bindings::predicate(watch.predicate.as_deref())
                .map_err(|e| format!("the predicate of the watch of {}: {e}", watch.kind.kind))?,
        })
    });
    let external = config.external_dependents.iter().map(|d| {
        let tracking = match d.tracking {
            types::Tracking::ConfigMap => Tracking::ConfigMap,
            types::Tracking::Secret => Tracking::Secret,
        };
        (d.into(), tracking)
    });
    Ok(PluginSpec {
        name: config.name.clone(),
        primary: (&config.primary).into(),
        label_selector: config.label_selector.clone(),
        projection: config.projection.clone(),
        filters: bindings::settings(config).filters.unwrap_or_default(),
        predicate: bindings::predicate(config.predicate.as_deref())
            .map_err(|e| format!("the primary's predicate: {e}"))?,
        watches: watches.collect::<Result<_, String>>()?,
        dependents: config.dependents.iter().map(Into::into).collect(),
        external: external.collect(),
        conditions: config.conditions,
    })
}

/// The fixture's objects as the component's host imports read them.
struct Reads(View);

impl CacheReader for Reads {
    fn get<'a>(
        &'a self,
        kind: &'a types::KindRef,
        namespace: Option<&'a str>,
        name: &'a str,
    ) -> BoxFuture<'a, GetResult> {
        futures::future::ready(self.0.get(&kind.into(), namespace, name)).boxed()
    }

    fn list<'a>(
        &'a self,
        kind: &'a types::KindRef,
        namespace: Option<&'a str>,
        selector: Option<&'a str>,
    ) -> BoxFuture<'a, ListResult> {
        futures::future::ready(self.0.list(&kind.into(), namespace, selector)).boxed()
    }

    fn secondaries<'a>(&'a self, kind: &'a types::KindRef) -> BoxFuture<'a, ListResult> {
        futures::future::ready(self.0.secondaries(&kind.into())).boxed()
    }
}

/// A compiled plugin as the loop's plugin side: each export called as the host calls it (on an
/// instance kept from an earlier call, or a fresh one), on a runtime of its own.
pub struct Component<'m> {
    module: &'m Module,
    runtime: tokio::runtime::Runtime,
}

impl<'m> Component<'m> {
    /// Calls `module`'s exports; blocks the thread for each call (do not call it from a tokio
    /// runtime's thread).
    pub fn new(module: &'m Module) -> std::io::Result<Self> {
        Ok(Self { module, runtime: tokio::runtime::Builder::new_current_thread().enable_all().build()? })
    }

    fn reads(view: &View) -> Arc<dyn CacheReader> {
        Arc::new(Reads(view.clone()))
    }
}

/// A call that trapped or ran out of its limits, as the host counts it: a failure it retries.
fn trapped(export: &str, error: CallError) -> Failure {
    Failure::Transient(format!("the plugin's {export} failed: {error}"))
}

fn failure(error: types::ReconcileError) -> Failure {
    match error {
        types::ReconcileError::Transient(m) => Failure::Transient(m),
        types::ReconcileError::Permanent(m) => Failure::Permanent(m),
        types::ReconcileError::Invalid(m) => Failure::Invalid(m),
    }
}

fn reconcile_error(failure: &Failure) -> types::ReconcileError {
    match failure.clone() {
        Failure::Transient(m) => types::ReconcileError::Transient(m),
        Failure::Permanent(m) => types::ReconcileError::Permanent(m),
        Failure::Invalid(m) => types::ReconcileError::Invalid(m),
    }
}

/// The request of a call on `primary`, with what `view` holds of its dependents and external
/// state.
fn request(view: &View, primary: &str) -> types::ReconcileRequest {
    types::ReconcileRequest {
        object: primary.to_owned(),
        attempt: 0,
        last_attempt: false,
        dependents: view
            .dependents
            .iter()
            .map(|d| types::DependentState {
                name: d.name.clone(),
                phase: d.phase.into(),
                objects: d.objects.iter().map(Value::to_string).collect(),
            })
            .collect(),
        external: view
            .external
            .iter()
            .map(|o| types::ExternalObject {
                dependent: o.dependent.clone(),
                key: o.key.clone(),
                id: o.id.clone(),
                object: o.object.to_string(),
            })
            .collect(),
        inbound: view.inbound.as_ref().map(Value::to_string),
    }
}

fn outcome(outcome: types::Outcome) -> Result<Outcome, Failure> {
    let status = outcome
        .status
        .map(|s| serde_json::from_str(&s))
        .transpose()
        .map_err(|e| Failure::Permanent(format!("the status the plugin returned is not JSON: {e}")))?;
    Ok(Outcome {
        readiness: outcome.readiness.map(|r| (r.ready, r.message)),
        status,
        labels: outcome.labels,
        annotations: outcome.annotations,
        reschedule_after_ms: outcome.reschedule_after_ms,
        events: outcome
            .events
            .into_iter()
            .map(|e| Event {
                event_type: match e.event_type {
                    types::EventType::Normal => "Normal".into(),
                    types::EventType::Warning => "Warning".into(),
                },
                reason: e.reason,
                action: e.action,
                note: e.note,
            })
            .collect(),
    })
}

impl Guest for Component<'_> {
    fn desired(&self, view: &View, primary: &str) -> Result<Vec<Desired>, Failure> {
        let request = request(view, primary);
        let call = self.module.desired(Self::reads(view), &request);
        let desired = self.runtime.block_on(call).map_err(|e| trapped("desired", e))?.map_err(failure)?;
        desired
            .into_iter()
            .map(|d| match serde_json::from_str(&d.object) {
                Ok(object) => Ok(Desired { dependent: d.dependent, object, keep: d.keep, key: d.key }),
                Err(e) => {
                    Err(Failure::Permanent(format!("desired object of dependent {:?} is invalid: {e}", d.dependent)))
                }
            })
            .collect()
    }

    fn reconcile(&self, view: &View, primary: &str) -> Result<Outcome, Failure> {
        let request = request(view, primary);
        let call = self.module.reconcile(Self::reads(view), &request);
        outcome(self.runtime.block_on(call).map_err(|e| trapped("reconcile", e))?.map_err(failure)?)
    }

    fn error_status(&self, view: &View, primary: &str, failure: &Failure) -> Option<Value> {
        let (request, error) = (request(view, primary), reconcile_error(failure));
        let call = self.module.update_error_status(Self::reads(view), &request, &error);
        let status = self.runtime.block_on(call).ok().flatten()?;
        serde_json::from_str(&status).ok()
    }

    fn check(&self, view: &View, name: &str, primary: &str, dependent: Option<&str>) -> bool {
        let call = self.module.check(Self::reads(view), name, primary, dependent);
        self.runtime.block_on(call).unwrap_or(false)
    }

    fn map_secondary(&self, view: &View, secondary: &str) -> Result<Vec<(Option<String>, String)>, String> {
        let call = self.module.map_secondary(Self::reads(view), secondary, None);
        let refs = self.runtime.block_on(call).map_err(|e| e.to_string())??;
        Ok(refs.into_iter().map(|r| (r.namespace, r.name)).collect())
    }

    fn secondaries_of(&self, view: &View, primary: &str) -> Result<Vec<(KindRef, Option<String>, String)>, String> {
        let call = self.module.secondaries_of(Self::reads(view), primary);
        let refs = self.runtime.block_on(call).map_err(|e| e.to_string())??;
        Ok(refs.into_iter().map(|r| ((&r.kind).into(), r.namespace, r.name)).collect())
    }

    fn filter(&self, name: &str, event: EventKind, object: &Value, old: Option<&Value>) -> bool {
        let (object, old) = (object.to_string(), old.map(Value::to_string));
        let call = self.module.filter(name, event.into(), &object, old.as_deref());
        // A plugin that cannot answer admits the change, as in the host.
        self.runtime.block_on(call).unwrap_or(true)
    }
}

/// The fixture files `paths` name: each file, and the `*.yaml` fixtures and `*.json` records of
/// each directory, sorted.
pub fn fixture_files(paths: &[PathBuf]) -> Result<Vec<PathBuf>, String> {
    let mut files = Vec::new();
    for path in paths {
        if path.is_dir() {
            let entries = std::fs::read_dir(path).map_err(|e| format!("{}: {e}", path.display()))?;
            let mut found: Vec<PathBuf> = entries
                .filter_map(|entry| entry.ok().map(|e| e.path()))
                .filter(|p| p.extension().is_some_and(|e| e == "yaml" || e == "yml") || records::is_record(p))
                .collect();
            found.sort();
            if found.is_empty() {
                return Err(format!("{}: no *.yaml fixtures or *.json records in it", path.display()));
            }
            files.extend(found);
        } else {
            files.push(path.clone());
        }
    }
    Ok(files)
}

/// The fixture in `path`, with `$NS` and `$OTHER` replaced by `namespace` and `other`.
pub fn load(path: &Path, namespace: &str, other: &str) -> Result<Scenario, String> {
    let text = std::fs::read_to_string(path).map_err(|e| format!("{}: {e}", path.display()))?;
    let text = text.replace("$NS", namespace).replace("$OTHER", other);
    let mut scenario: Scenario =
        serde_saphyr::from_str(&text).map_err(|e| format!("{}: not a fixture: {e}", path.display()))?;
    scenario.name = path.file_stem().map(|s| s.to_string_lossy().into_owned()).unwrap_or_default();
    Ok(scenario)
}

/// One pass as shown: its writes, events, requeue and error.
#[derive(Debug, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct ShownPass<'a> {
    /// `initial`, or the change that led to it.
    pub stage: &'a str,
    /// Its number within the stage, from 1.
    pub pass: usize,
    /// What the host would write.
    #[serde(skip_serializing_if = "<[_]>::is_empty")]
    pub writes: &'a [Write],
    /// The events it would record.
    #[serde(skip_serializing_if = "<[_]>::is_empty")]
    pub events: &'a [Event],
    /// The reschedule the reconcile asked for.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub requeue_ms: Option<u64>,
    /// How the reconcile failed (`transient`, `permanent` or `invalid`, and the message).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub error: Option<BTreeMap<&'static str, &'a str>>,
}

impl<'a> ShownPass<'a> {
    fn of(stage: &'a str, number: usize, pass: &'a Pass) -> Self {
        let mut shown =
            ShownPass { stage, pass: number, writes: &pass.writes, events: &[], requeue_ms: None, error: None };
        match &pass.result {
            Ok(outcome) => {
                shown.events = &outcome.events;
                shown.requeue_ms = outcome.reschedule_after_ms;
            }
            Err(failure) => {
                let kind = match failure {
                    Failure::Transient(_) => "transient",
                    Failure::Permanent(_) => "permanent",
                    Failure::Invalid(_) => "invalid",
                };
                shown.error = Some(BTreeMap::from([(kind, failure.message())]));
            }
        }
        shown
    }
}

/// A fixture's run as shown: its name and description, every pass of every stage, and the
/// verdict (`ok`, `FAILED` with the unmet expectations, or none for a fixture that expects
/// nothing).
#[derive(Debug, Serialize)]
pub struct Shown<'a> {
    /// The fixture's file name, without `.yaml`.
    pub fixture: &'a str,
    /// What it shows.
    #[serde(skip_serializing_if = "str::is_empty")]
    pub description: &'a str,
    /// Every pass of every stage.
    pub passes: Vec<ShownPass<'a>>,
    /// `ok` or `FAILED`; absent when the fixture expects nothing.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub result: Option<&'static str>,
    /// The unmet expectations.
    #[serde(skip_serializing_if = "<[_]>::is_empty")]
    pub failures: &'a [String],
}

/// Shows `scenario`'s run.
pub fn render<'a>(scenario: &'a Scenario, outcome: &'a fixture::Outcome) -> Shown<'a> {
    let passes = outcome
        .stages
        .iter()
        .flat_map(|stage| stage.passes.iter().enumerate().map(|(i, p)| ShownPass::of(&stage.title, i + 1, p)))
        .collect();
    let expects = scenario.expect.is_some() || !scenario.changes.is_empty();
    Shown {
        fixture: &scenario.name,
        description: &scenario.description,
        passes,
        result: expects.then_some(if outcome.failures.is_empty() { "ok" } else { "FAILED" }),
        failures: &outcome.failures,
    }
}

/// One fixture's run: the fixture, and what came of it.
#[derive(Debug)]
pub enum Ran {
    /// A fixture, run through the loop.
    Fixture {
        /// The fixture (boxed: it is much larger than a replayed record).
        scenario: Box<Scenario>,
        /// What came of it.
        outcome: fixture::Outcome,
    },
    /// A record, replayed.
    Record(records::Replayed),
}

impl Ran {
    /// The fixture's name: its file name without the extension.
    pub fn name(&self) -> &str {
        match self {
            Ran::Fixture { scenario, .. } => &scenario.name,
            Ran::Record(replayed) => &replayed.name,
        }
    }

    /// Whether its expectations held (true when it has none).
    pub fn held(&self) -> bool {
        match self {
            Ran::Fixture { outcome, .. } => outcome.failures.is_empty(),
            Ran::Record(replayed) => replayed.failures.is_empty(),
        }
    }

    /// Shows it ([`render`]).
    pub fn shown(&self) -> Shown<'_> {
        match self {
            Ran::Fixture { scenario, outcome } => render(scenario, outcome),
            Ran::Record(replayed) => replayed.shown(),
        }
    }
}

/// Runs every fixture in `files` through `module`, `$NS` and `$OTHER` standing for `namespace`
/// and `other`, and replays every record. An error when the plugin's configuration or a fixture cannot be used.
pub fn run(module: &Module, files: &[PathBuf], namespace: &str, other: &str) -> Result<Vec<Ran>, String> {
    let spec = spec(module.config()).map_err(|e| format!("{}: {e}", module.path().display()))?;
    let component = Component::new(module).map_err(|e| e.to_string())?;
    let settle = Settle::new(spec, &component).map_err(|e| format!("{}: {e}", module.path().display()))?;
    files
        .iter()
        .map(|file| {
            if records::is_record(file) {
                return records::replay(&component, file).map(Ran::Record);
            }
            let scenario = load(file, namespace, other)?;
            let outcome =
                fixture::run(&settle, &scenario, namespace).map_err(|e| format!("{}: {e}", file.display()))?;
            Ok(Ran::Fixture { scenario: Box::new(scenario), outcome })
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    fn kind(kind: &str) -> types::KindRef {
        types::KindRef { group: String::new(), version: "v1".into(), kind: kind.into(), plural: None, namespaced: true }
    }

    #[test]
    fn describe_becomes_the_loops_spec_and_a_malformed_predicate_is_refused() {
        let mut config = bindings::test_config("Thing");
        config.watches.push(types::Watch {
            kind: kind("ConfigMap"),
            namespace: None,
            label_selector: Some("a".into()),
            field_selector: None,
            cluster: None,
            mapper: types::Mapper::Annotations,
            projection: None,
            predicate: Some(vec![types::PredicateTerm::Plugin("data".into())]),
        });
        let spec = spec(&config).unwrap();
        assert_eq!(spec.primary.kind, "Thing");
        assert_eq!(spec.watches[0].mapper, Mapper::Annotations);
        assert!(spec.watches[0].predicate.as_ref().is_some_and(|p| p.asks_plugin()));
        assert!(spec.filters.generation_aware);
        config.predicate = Some(vec![types::PredicateTerm::And]);
        assert!(super::spec(&config).unwrap_err().starts_with("the primary's predicate"));
    }

    #[test]
    fn reads_refuse_kinds_the_plugin_does_not_declare() {
        let spec = spec(&bindings::test_config("Thing")).unwrap();
        let config_map = json!({ "metadata": { "name": "c", "namespace": "ns" } });
        let view = View {
            caches: wasmop_core::settle::Caches::new(&spec),
            objects: vec![((&kind("ConfigMap")).into(), config_map)],
            secondaries: Vec::new(),
            dependents: Vec::new(),
            external: Vec::new(),
            inbound: None,
        };
        let reads = Reads(view);
        let refused = futures::executor::block_on(reads.get(&kind("ConfigMap"), Some("ns"), "c")).unwrap_err();
        assert!(refused.contains("v1/ConfigMap is not watched by this plugin (p)"), "{refused}");
        let secondaries = futures::executor::block_on(reads.secondaries(&kind("ConfigMap"))).unwrap_err();
        assert!(secondaries.contains("only watched and dependent kinds"), "{secondaries}");
    }

    #[test]
    fn a_directory_gives_its_fixtures_and_records_in_order_and_an_empty_one_is_an_error() {
        let dir = std::env::temp_dir().join(format!("wasmop-harness-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        for name in ["b.yaml", "a.yaml", "notes.txt", "0-record.json"] {
            std::fs::write(dir.join(name), "").unwrap();
        }
        let files = fixture_files(std::slice::from_ref(&dir)).unwrap();
        assert_eq!(files, [dir.join("0-record.json"), dir.join("a.yaml"), dir.join("b.yaml")]);
        let empty = dir.join("empty");
        std::fs::create_dir_all(&empty).unwrap();
        assert!(fixture_files(&[empty]).unwrap_err().contains("no *.yaml fixtures or *.json records"));
        std::fs::remove_dir_all(&dir).unwrap();
    }

    #[test]
    fn a_fixture_without_expectations_has_no_verdict_and_a_failed_one_names_what_failed() {
        let scenario: Scenario = serde_saphyr::from_str("primary: { metadata: { name: p } }").unwrap();
        let mut outcome = fixture::Outcome { stages: Vec::new(), primary: Value::Null, failures: Vec::new() };
        assert_eq!(render(&scenario, &outcome).result, None);
        let expecting: Scenario =
            serde_saphyr::from_str("primary: { metadata: { name: p } }\nexpect: { status: { a: 1 } }").unwrap();
        assert_eq!(render(&expecting, &outcome).result, Some("ok"));
        outcome.failures.push("status.a: expected 1, got null".into());
        let shown = serde_json::to_value(render(&expecting, &outcome)).unwrap();
        assert_eq!(shown["result"], "FAILED");
        assert_eq!(shown["failures"][0], "status.a: expected 1, got null");
    }
}
