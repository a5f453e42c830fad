//! The on-disk cache of compiled plugins (`--cache-dir`): a second start of the same module
//! loads what the first one compiled, keyed by the module's digest, and a damaged entry costs
//! only a recompile.

use std::path::Path;

use wasmop::runtime::{Limits, Runtime, RuntimeConfig};
use wasmop_tests::{plugin, workspace_root};

/// An empty directory of this test's own under `target/`.
fn empty_dir(name: &str) -> std::path::PathBuf {
    let dir = workspace_root().join("target/compiled-cache-test").join(format!("{name}-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).unwrap();
    dir
}

fn runtime(dir: &Path) -> Runtime {
    let config = RuntimeConfig {
        cache_dir: Some(dir.to_path_buf()),
        limits: Limits::default(),
        observer: None,
        dev_source: None,
    };
    Runtime::new(config).expect("a runtime")
}

/// The compiled artifacts in `dir`.
fn artifacts(dir: &Path) -> Vec<std::path::PathBuf> {
    let mut found: Vec<_> = std::fs::read_dir(dir)
        .map(|entries| entries.map(|e| e.expect("an entry").path()).collect())
        .unwrap_or_default();
    found.retain(|p| p.extension().is_some_and(|e| e == "cwasm"));
    found.sort();
    found
}

#[test]
fn a_second_start_loads_the_compiled_module_the_first_one_stored() {
    let dir = empty_dir("second-start");
    let first = runtime(&dir).load(&plugin("greeting")).unwrap();
    let stored = artifacts(&dir);
    assert_eq!(stored.len(), 1, "one compiled artifact: {stored:?}");
    assert!(stored[0].file_name().unwrap().to_string_lossy().starts_with(first.digest()), "{stored:?}");

    // Put another plugin's compiled code under greeting's name: a start that reads the cache
    // (and does not compile) now describes the other plugin, which proves the cache is used.
    let other_dir = empty_dir("other");
    runtime(&other_dir).load(&plugin("webpage")).unwrap();
    std::fs::copy(&artifacts(&other_dir)[0], &stored[0]).unwrap();
    let second = runtime(&dir).load(&plugin("greeting")).unwrap();
    assert_eq!(second.name(), "webpage", "the second start loaded the stored artifact");
}

#[test]
fn a_damaged_artifact_is_compiled_again() {
    let dir = empty_dir("damaged");
    runtime(&dir).load(&plugin("greeting")).unwrap();
    let stored = artifacts(&dir);
    std::fs::write(&stored[0], b"not a compiled module").unwrap();
    let module = runtime(&dir).load(&plugin("greeting")).unwrap();
    assert_eq!(module.name(), "greeting");
    assert_ne!(std::fs::read(&stored[0]).unwrap(), b"not a compiled module", "the artifact was stored again");
}
