//! Records as `wasmop test` fixtures: a record `wasmop run --record DIR` wrote (a `*.json`
//! file) holds when the plugin under test, given the recorded requests with every import
//! answered from the record, ends as the recorded reconcile did. The comparison is `wasmop
//! replay RECORD --plugin`'s ([`crate::replay::against`]): reads answered in any order, logs
//! whatever they say, the endings compared as a diff of verdict, status, labels and
//! annotations, desired objects and events. The diff, and a call the record cannot answer, are
//! the fixture's failures.

use std::path::Path;

use wasmop_core::record::Record;

use super::{Component, Shown};

/// A record replayed with the plugin under test.
#[derive(Debug)]
pub struct Replayed {
    /// The record's file name, without `.json`.
    pub name: String,
    /// Whose reconcile it is, and why it was recorded.
    pub description: String,
    /// The diff's lines and the call the record could not answer; empty when it held.
    pub failures: Vec<String>,
}

impl Replayed {
    /// Shows it as a fixture without passes.
    pub fn shown(&self) -> Shown<'_> {
        Shown {
            fixture: &self.name,
            description: &self.description,
            passes: Vec::new(),
            answer: None,
            result: Some(if self.failures.is_empty() { "ok" } else { "FAILED" }),
            failures: &self.failures,
            end: None,
        }
    }
}

/// Whether `path` names a record rather than a fixture.
pub fn is_record(path: &Path) -> bool {
    path.extension().is_some_and(|e| e == "json")
}

/// Replays the record in `path` with `component`'s module.
pub fn replay(component: &Component<'_>, path: &Path) -> Result<Replayed, String> {
    let bytes = std::fs::read(path).map_err(|e| format!("{}: {e}", path.display()))?;
    let record = Record::from_slice(&bytes).map_err(|e| format!("{}: {e}", path.display()))?;
    let primary = match &record.primary.namespace {
        Some(namespace) => format!("{namespace}/{}", record.primary.name),
        None => record.primary.name.clone(),
    };
    let reason = format!("{:?}", record.reason).to_lowercase();
    let description = format!("a record of {primary}, {reason}, {}", record.recorded_at);
    // Replaying takes a record that lives as long as the process, which tests each file once.
    let record: &'static Record = Box::leak(Box::new(record));
    let against = component.runtime.block_on(crate::replay::against(component.module, record));
    let mut failures: Vec<String> = match against.diff.is_empty() {
        true => Vec::new(),
        false => against.diff.to_string().lines().map(str::to_owned).collect(),
    };
    if let Some(error) = against.unanswered {
        failures.push(format!("the plugin made a call the record cannot answer: {error}"));
    }
    let name = path.file_stem().map(|s| s.to_string_lossy().into_owned()).unwrap_or_default();
    Ok(Replayed { name, description, failures })
}
