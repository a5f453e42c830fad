//! The conformance suite's scenarios (`scenarios/*.yaml`): the same files run against the SDK's
//! `FakeHost` (the `fixture-conform` plugin's tests), against the real host and API server
//! (`tests/tests/conformance.rs`), and through `wasmop test` on every build of the conformance
//! plugin (`tests/tests/plugin_test.rs`); all must meet the same expectations.
//!
//! Their format, and how expectations match, is [`wasmop_core::fixture`]'s; this crate loads
//! the files. A scenario names a primary (a `Scenario` of the `fixture-conform` plugin),
//! optionally the status it already has, the objects and external records that exist before the
//! host starts, what must hold once the host is done, and changes made afterwards.

use std::path::{Path, PathBuf};

pub use wasmop_core::fixture::{Expect, KindSpec, Object, Scenario, Step, check, check_external, mismatch};
pub use wasmop_core::status::merge;

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

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_scenario_file_loads() {
        let scenarios = load("ns", "other");
        assert!(scenarios.len() >= 7, "{} scenarios", scenarios.len());
        assert!(scenarios.iter().all(|s| !s.description.is_empty()));
    }
}
