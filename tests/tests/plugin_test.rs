//! `wasmop test`: a compiled plugin run through the host's rules without a cluster. Every
//! conformance scenario must hold for each build of the conformance plugin (Rust, Python,
//! TypeScript), as it does under the FakeHost and against the API server
//! (`tests/tests/conformance.rs`); a fixture that fails exits 1 naming what failed, and a file
//! that is not a plugin exits 2 saying so. A record is a fixture too: it holds when the plugin
//! ends as the recorded reconcile did. With `--output json` it prints the store as each loop left
//! it, which the Python and TypeScript fake hosts read.

use std::path::{Path, PathBuf};
use std::process::{Command, Output};

use wasmop_tests::{wasmop_binary, workspace_root};

/// `wasmop test PLUGIN FIXTURES...`.
fn wasmop_test(plugin: &Path, fixtures: &[&Path]) -> anyhow::Result<Output> {
    let mut command = Command::new(wasmop_binary()?);
    command.arg("test").arg(plugin).args(fixtures).env("RUST_LOG", "off");
    Ok(command.output()?)
}

/// A build of the conformance plugin in `plugins/dist`; fails, naming `make plugins`, when it
/// has not been built.
fn build(file: &str) -> PathBuf {
    let path = workspace_root().join("plugins/dist").join(file);
    assert!(path.exists(), "{} is missing: build the plugins with `make plugins`", path.display());
    path
}

/// Every scenario holds for the build `file`; the output names each one `ok`.
fn every_scenario_holds(file: &str) -> anyhow::Result<()> {
    let scenarios = wasmop_conformance::dir();
    let output = wasmop_test(&build(file), &[&scenarios])?;
    let stdout = String::from_utf8_lossy(&output.stdout);
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert!(output.status.success(), "{file}: {:?}\n{stdout}\n{stderr}", output.status);
    let count = wasmop_conformance::load("default", "other").len();
    assert_eq!(stdout.matches("\nresult: ok\n").count(), count, "{file}: every scenario is ok:\n{stdout}");
    assert!(stdout.ends_with(&format!("# {count} fixtures, all held\n")), "{stdout}");
    Ok(())
}

#[test]
fn every_scenario_holds_for_the_rust_build() -> anyhow::Result<()> {
    every_scenario_holds("fixture-conform.wasm")
}

#[test]
fn every_scenario_holds_for_the_python_build() -> anyhow::Result<()> {
    every_scenario_holds("fixture-conform-py.wasm")
}

#[test]
fn every_scenario_holds_for_the_typescript_build() -> anyhow::Result<()> {
    every_scenario_holds("fixture-conform-ts.wasm")
}

/// A scratch directory of this test's own.
fn scratch(test: &str) -> anyhow::Result<PathBuf> {
    let dir = std::env::temp_dir().join(format!("wasmop-plugin-test-{test}-{}", std::process::id()));
    std::fs::create_dir_all(&dir)?;
    Ok(dir)
}

#[test]
fn a_broken_expectation_fails_with_exit_1_naming_it() -> anyhow::Result<()> {
    let dir = scratch("broken")?;
    let scenario = std::fs::read_to_string(wasmop_conformance::dir().join("selectors.yaml"))?;
    let broken = scenario.replace("listed: [one, two]", "listed: [one, three]");
    anyhow::ensure!(broken != scenario, "the selectors scenario expects listed: [one, two]");
    let fixture = dir.join("broken-selectors.yaml");
    std::fs::write(&fixture, broken)?;
    let passing = wasmop_conformance::dir().join("zero-desired.yaml");
    let output = wasmop_test(&build("fixture-conform.wasm"), &[&passing, &fixture])?;
    let stdout = String::from_utf8_lossy(&output.stdout);
    assert_eq!(output.status.code(), Some(1), "{stdout}\n{}", String::from_utf8_lossy(&output.stderr));
    assert!(stdout.contains("result: FAILED"), "{stdout}");
    assert!(stdout.contains(r#"status.listed: expected [\"one\",\"three\"], got [\"one\",\"two\"]"#), "{stdout}");
    assert!(stdout.ends_with("# 2 fixtures, 1 FAILED: broken-selectors\n"), "{stdout}");
    std::fs::remove_dir_all(&dir)?;
    Ok(())
}

#[test]
fn a_file_that_is_not_a_component_fails_with_exit_2_saying_so() -> anyhow::Result<()> {
    let dir = scratch("not-a-component")?;
    let plugin = dir.join("notes.wasm");
    std::fs::write(&plugin, "not a component")?;
    let output = wasmop_test(&plugin, &[&wasmop_conformance::dir()])?;
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert_eq!(output.status.code(), Some(2), "{stderr}");
    assert!(
        stderr.starts_with(&format!("error: {} is not a valid WebAssembly component", plugin.display())),
        "{stderr}"
    );
    assert_eq!(stderr.lines().count(), 1, "one line: {stderr}");
    assert!(output.stdout.is_empty());
    let missing = wasmop_test(&build("fixture-conform.wasm"), &[&dir.join("absent.yaml")])?;
    assert_eq!(missing.status.code(), Some(2));
    assert!(String::from_utf8_lossy(&missing.stderr).contains("absent.yaml"));
    std::fs::remove_dir_all(&dir)?;
    Ok(())
}

/// A record `wasmop run --record` wrote (`plugins/fixtures/record/records/broken.json`: v1
/// failing for a negative value, against a real API server) is a fixture: the recorded version
/// holds it, ending as the record did; the fixed version fails it with the diff that shows the
/// fix, as `wasmop replay --plugin` prints it; a file that is not a record exits 2.
#[test]
fn a_record_holds_for_the_recorded_version_and_fails_for_one_that_ends_otherwise() -> anyhow::Result<()> {
    let record = workspace_root().join("plugins/fixtures/record/records/broken.json");
    let same = wasmop_test(&build("fixture-record.wasm"), &[&record])?;
    let stdout = String::from_utf8_lossy(&same.stdout);
    assert!(same.status.success(), "{stdout}\n{}", String::from_utf8_lossy(&same.stderr));
    assert!(stdout.contains("fixture: broken\n") && stdout.contains("\nresult: ok\n"), "{stdout}");
    let description = "description: a record of demo/broken, failed, 2026-11-26T10:21:32.410Z\n";
    assert!(stdout.contains(description), "{stdout}");
    assert!(stdout.ends_with("# 1 fixtures, all held\n"), "{stdout}");

    let fixed = wasmop_test(&build("fixture-record-v2.wasm"), &[&record])?;
    let stdout = String::from_utf8_lossy(&fixed.stdout);
    assert_eq!(fixed.status.code(), Some(1), "{stdout}\n{}", String::from_utf8_lossy(&fixed.stderr));
    assert!(stdout.contains("\nresult: FAILED\n"), "{stdout}");
    assert!(stdout.contains("verdict: failed (permanent): negative value → reconciled"), "{stdout}");
    assert!(stdout.contains("result: added 3"), "{stdout}");
    assert!(stdout.ends_with("# 1 fixtures, 1 FAILED: broken\n"), "{stdout}");

    let dir = scratch("not-a-record")?;
    let other = dir.join("notes.json");
    std::fs::write(&other, "{}")?;
    let refused = wasmop_test(&build("fixture-record.wasm"), &[&other])?;
    let stderr = String::from_utf8_lossy(&refused.stderr);
    assert_eq!(refused.status.code(), Some(2), "{stderr}");
    assert!(stderr.contains("notes.json: not a wasmop record"), "{stderr}");
    std::fs::remove_dir_all(&dir)?;
    Ok(())
}

/// The webpage sample's fixtures (`plugins/webpage/fixtures/`, which the book includes) hold for
/// its Rust, Python and TypeScript builds: a page gets its dependents, a Deployment among them (a
/// kind outside the core group), and no Ingress until it is exposed; an invalid page fails in
/// `desired` and gets none; and its validating webhook refuses an empty html at the field.
#[test]
fn the_webpage_fixtures_hold_for_every_language() -> anyhow::Result<()> {
    let fixtures = workspace_root().join("plugins/webpage/fixtures");
    for file in ["webpage.wasm", "webpage-py.wasm", "webpage-ts.wasm"] {
        let output = wasmop_test(&build(file), &[&fixtures])?;
        let stdout = String::from_utf8_lossy(&output.stdout);
        assert!(output.status.success(), "{file}: {stdout}\n{}", String::from_utf8_lossy(&output.stderr));
        for fixture in ["empty-html", "invalid", "page"] {
            assert!(stdout.contains(&format!("fixture: {fixture}\n")), "{file}: {stdout}");
        }
        assert!(stdout.contains("answer:\n  allowed: false\n"), "{file}: {stdout}");
        assert!(stdout.ends_with("# 3 fixtures, all held\n"), "{file}: {stdout}");
    }
    Ok(())
}

#[test]
fn the_json_output_has_every_pass_and_the_store_at_the_end() -> anyhow::Result<()> {
    let page = workspace_root().join("plugins/webpage/fixtures/page.yaml");
    let output = Command::new(wasmop_binary()?)
        .args(["test", "--output", "json"])
        .arg(build("webpage.wasm"))
        .arg(&page)
        .env("RUST_LOG", "off")
        .output()?;
    assert!(output.status.success(), "{}", String::from_utf8_lossy(&output.stderr));
    let shown: serde_json::Value = serde_json::from_slice(&output.stdout)?;
    let [fixture] = shown.as_array().expect("a list of fixtures").as_slice() else { panic!("one fixture: {shown}") };
    assert_eq!(fixture["fixture"], "page");
    let passes = fixture["passes"].as_array().expect("passes");
    assert!(passes.len() >= 2 && passes.last().is_some_and(|p| p.get("writes").is_none()), "the last writes nothing");
    let end = &fixture["end"];
    let ready =
        end["primary"]["status"]["conditions"].as_array().and_then(|cs| cs.iter().find(|c| c["type"] == "Ready"));
    assert_eq!(ready.map(|c| &c["status"]), Some(&serde_json::json!("True")), "{end}");
    let kinds: Vec<&str> =
        end["objects"].as_array().expect("objects").iter().filter_map(|o| o["kind"]["kind"].as_str()).collect();
    for kind in ["WebPage", "ConfigMap", "Deployment", "Service"] {
        assert!(kinds.contains(&kind), "{kind} stored: {kinds:?}");
    }
    // The YAML a person reads has no store.
    let yaml = wasmop_test(&build("webpage.wasm"), &[&page])?;
    assert!(yaml.status.success() && !String::from_utf8_lossy(&yaml.stdout).contains("\nend:"));
    Ok(())
}

/// Webhook fixtures: a defaulting review holds when the patch makes the object expected, and a
/// fixture whose verdict, field or object the plugin does not answer fails naming each; a trap
/// answers as the failure policy says, naming the plugin.
#[test]
fn webhook_fixtures_hold_when_the_plugin_answers_as_expected_and_fail_naming_what_differs() -> anyhow::Result<()> {
    let dir = std::env::temp_dir().join(format!("wasmop-review-fixtures-{}", std::process::id()));
    std::fs::create_dir_all(&dir)?;
    let page = "{ apiVersion: sample.wasmop.dev/v1, kind: WebPage, metadata: { name: p }, spec: { html: x } }";
    std::fs::write(
        dir.join("defaults.yaml"),
        format!(
            "review: {{ webhook: mutating, object: {page} }}\n\
             expect: {{ allowed: true, object: {{ apiVersion: sample.wasmop.dev/v1, kind: WebPage, metadata: {{ name: p }}, spec: {{ html: x, exposed: false }} }} }}\n"
        ),
    )?;
    let held = wasmop_test(&build("webpage.wasm"), &[&dir.join("defaults.yaml")])?;
    let stdout = String::from_utf8_lossy(&held.stdout);
    assert!(held.status.success(), "{stdout}\n{}", String::from_utf8_lossy(&held.stderr));
    assert!(stdout.contains("/spec/exposed"), "the patch is shown: {stdout}");
    assert!(stdout.ends_with("# 1 fixtures, all held\n"), "{stdout}");

    std::fs::write(
        dir.join("wrong.yaml"),
        format!("review: {{ object: {page} }}\nexpect: {{ allowed: false, field: spec.html }}\n"),
    )?;
    let trap = "{ apiVersion: fixture.wasmop.dev/v1, kind: Gate, metadata: { name: g, labels: { wasmop.dev/trap: \"yes\" } } }";
    std::fs::write(
        dir.join("trap.yaml"),
        format!(
            "review: {{ object: {trap} }}\nexpect: {{ allowed: false, message: webhook of plugin \"fixture-admission\" failed }}\n"
        ),
    )?;
    let failed = wasmop_test(&build("webpage.wasm"), &[&dir.join("wrong.yaml")])?;
    let stdout = String::from_utf8_lossy(&failed.stdout);
    assert_eq!(failed.status.code(), Some(1), "{stdout}");
    assert!(stdout.contains("allowed: expected false, got true"), "{stdout}");
    assert!(stdout.contains(r#"field: expected \"spec.html\", got null"#), "{stdout}");
    let trapped = wasmop_test(&build("fixture-admission.wasm"), &[&dir.join("trap.yaml")])?;
    let stdout = String::from_utf8_lossy(&trapped.stdout);
    assert!(trapped.status.success(), "{stdout}\n{}", String::from_utf8_lossy(&trapped.stderr));
    assert!(stdout.contains("traps on purpose"), "{stdout}");
    std::fs::remove_dir_all(&dir)?;
    Ok(())
}
