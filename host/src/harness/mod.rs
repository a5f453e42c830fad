//! `wasmop test`: runs a compiled plugin through the host's rules without a cluster.
//!
//! The loop is `wasmop_core::settle`'s, the one the SDK's `FakeHost` runs a Rust reconciler in;
//! here its plugin side ([`Guest`]) is the component, called through [`Module`] as the host
//! calls it, its `get`, `list` and `secondaries` imports answered from the fixture's objects by
//! the host's rules ([`View`]: only declared kinds, label selectors, projections). Fixtures are
//! `wasmop_core::fixture`'s: the conformance scenarios are fixtures as they stand.
//!
//! A fixture may also be a record `wasmop run --record` wrote ([`records`]): it holds when the
//! plugin ends as the recorded reconcile did; or an admission or conversion review with the
//! answer expected ([`reviews`]).
//!
//! For each fixture, [`render`] shows the writes the host would make (applies of dependents'
//! objects, deletes, external objects, the primary's metadata and status patches), the events
//! and the requeue of every pass, then `ok` or `FAILED` with the unmet expectations when the
//! fixture has any.

use std::path::{Path, PathBuf};

use wasmop_core::external::Tracking;
use wasmop_core::fixture::{self, Scenario};
use wasmop_core::mapping::Owners;
use wasmop_core::settle::{Mapper, PluginSpec, Settle, WatchSpec};

mod component;
pub mod records;
pub mod reviews;
mod shown;

pub use component::Component;
pub use shown::{End, Shown, ShownExternal, ShownPass, Stored, render};

use crate::runtime::Module;
use crate::runtime::bindings::{self, wasmop::plugin::types};

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
    /// A webhook fixture, answered.
    Review(reviews::Answered),
}

impl Ran {
    /// The fixture's name: its file name without the extension.
    pub fn name(&self) -> &str {
        match self {
            Ran::Fixture { scenario, .. } => &scenario.name,
            Ran::Record(replayed) => &replayed.name,
            Ran::Review(answered) => &answered.name,
        }
    }

    /// Whether its expectations held (true when it has none).
    pub fn held(&self) -> bool {
        match self {
            Ran::Fixture { outcome, .. } => outcome.failures.is_empty(),
            Ran::Record(replayed) => replayed.failures.is_empty(),
            Ran::Review(answered) => answered.failures.is_empty(),
        }
    }

    /// Shows it ([`render`]).
    pub fn shown(&self) -> Shown<'_> {
        match self {
            Ran::Fixture { scenario, outcome } => render(scenario, outcome),
            Ran::Record(replayed) => replayed.shown(),
            Ran::Review(answered) => answered.shown(),
        }
    }

    /// Shows it with the store as a fixture's loop left it ([`End`]).
    pub fn shown_with_end(&self) -> Shown<'_> {
        let mut shown = self.shown();
        if let Ran::Fixture { outcome, .. } = self {
            shown.end = Some(End::of(outcome));
        }
        shown
    }
}

/// Runs every fixture in `files` through `module`, `$NS` and `$OTHER` standing for `namespace`
/// and `other`, answers every webhook fixture and replays every record. An error when the plugin's configuration or a fixture cannot be used.
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
            let text = std::fs::read_to_string(file).map_err(|e| format!("{}: {e}", file.display()))?;
            if crate::webhook::fixture::is_fixture(&text) {
                let text = text.replace("$NS", namespace).replace("$OTHER", other);
                let name = file.file_stem().map(|s| s.to_string_lossy().into_owned()).unwrap_or_default();
                let answered = reviews::answer(module, &component.runtime, &name, &text);
                return answered.map(Ran::Review).map_err(|e| format!("{}: {e}", file.display()));
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
    use serde_json::Value;

    use super::*;

    /// A namespaced kind of the core group.
    pub(super) fn kind(kind: &str) -> types::KindRef {
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
        let mut outcome = fixture::Outcome {
            stages: Vec::new(),
            primary: Value::Null,
            objects: Vec::new(),
            external: Vec::new(),
            failures: Vec::new(),
        };
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
