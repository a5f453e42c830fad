//! The `wasmop` command line, as a user runs it.

use std::path::PathBuf;
use std::process::Command;

fn wasmop() -> Command {
    let mut command = Command::new(env!("CARGO_BIN_EXE_wasmop"));
    let cache = std::env::temp_dir().join(format!("wasmop-cli-test-cache-{}", std::process::id()));
    command.env("WASMOP_CACHE_DIR", cache);
    command
}

fn webpage() -> PathBuf {
    let path = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../plugins/dist/webpage.wasm");
    assert!(path.exists(), "{} is missing: run `make plugins` first", path.display());
    path
}

#[test]
fn inspect_prints_what_describe_returns_as_json_and_yaml() {
    let out = wasmop().args(["inspect", "--output", "json"]).arg(webpage()).output().unwrap();
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    let config: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(config["name"], "webpage");
    assert_eq!(config["primary"]["kind"], "WebPage");
    assert_eq!(config["primary"]["apiVersion"], "sample.wasmop.dev/v1");
    // The settings in the overrides file's words, and the workflow as the SDK declares it.
    assert_eq!(config["settings"]["filters"]["generationAware"], true);
    assert_eq!(config["dependents"][1]["name"], "deployment");
    assert_eq!(config["dependents"][1]["dependsOn"], serde_json::json!(["configmap"]));
    assert_eq!(config["dependents"][1]["readyWhen"], "status.readyReplicas == spec.replicas");
    assert_eq!(config["conditions"], "kept by the host");

    let out = wasmop().arg("inspect").arg(webpage()).output().unwrap();
    assert!(out.status.success());
    let yaml = String::from_utf8(out.stdout).unwrap();
    assert!(yaml.contains("name: webpage"), "{yaml}");
}

#[test]
fn run_refuses_a_file_that_is_not_a_plugin_naming_the_file_and_the_reason() {
    let bad = std::env::temp_dir().join(format!("not-a-plugin-{}.wasm", std::process::id()));
    std::fs::write(&bad, b"\0asm garbage").unwrap();
    let out = wasmop().arg("run").arg("--plugin").arg(&bad).output().unwrap();
    assert!(!out.status.success());
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(stderr.contains(&*bad.to_string_lossy()), "{stderr}");
    assert!(stderr.contains("not a valid WebAssembly component"), "{stderr}");
}

#[test]
fn run_without_plugins_says_how_to_give_them() {
    let out = wasmop().arg("run").output().unwrap();
    assert!(!out.status.success());
    assert!(String::from_utf8_lossy(&out.stderr).contains("--plugin FILE or --plugins DIR"));
}

#[test]
fn a_memory_limit_past_what_wasm32_can_address_is_refused_with_the_range() {
    let out =
        wasmop().args(["run", "--memory-limit-mib", "17592186044416", "--plugin"]).arg(webpage()).output().unwrap();
    assert!(!out.status.success());
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(stderr.contains("out of range: 1 to 4096 MiB"), "{stderr}");
}
