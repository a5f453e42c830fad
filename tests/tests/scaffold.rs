//! `wasmop new`: the scaffolded crate passes its unit test, builds for wasm32-wasip2, and the
//! component reconciles the scaffolded example in the cluster.

use std::path::Path;
use std::process::Command;
use std::time::Duration;

use anyhow::Context as _;
use kube::api::{Api, ApiResource, DynamicObject, GroupVersionKind};
use kube::runtime::wait::await_condition;
use wasmop_tests::{apply_file, bare_host, client, namespace, wasmop_binary, within, workspace_root};

const WAIT: Duration = Duration::from_secs(60);

/// Runs `command`, failing with its output when it fails.
fn run(command: &mut Command) -> anyhow::Result<()> {
    let output = command.output().with_context(|| format!("cannot run {command:?}"))?;
    anyhow::ensure!(
        output.status.success(),
        "{command:?} failed:\n{}\n{}",
        String::from_utf8_lossy(&output.stdout),
        String::from_utf8_lossy(&output.stderr)
    );
    Ok(())
}

/// Cargo in the scaffolded crate, offline and on the workspace's pinned versions (its lock file
/// copied there), sharing the workspace's target directory.
fn cargo(root: &Path, crate_dir: &Path, script: &str) -> anyhow::Result<()> {
    std::fs::copy(root.join("Cargo.lock"), crate_dir.join("Cargo.lock"))?;
    run(Command::new("bash")
        .arg("-c")
        .arg(script)
        .current_dir(crate_dir)
        .env("ROOT", root)
        .env("CARGO_TARGET_DIR", root.join("target/scaffold"))
        // Small test builds, as the workspace's own profile has them.
        .env("CARGO_PROFILE_DEV_DEBUG", "line-tables-only"))
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_scaffolded_plugin_builds_passes_its_test_and_reconciles_its_example() -> anyhow::Result<()> {
    let root = workspace_root();
    let dir = root.join("target/scaffold-test");
    let crate_dir = dir.join("hello-op");
    if crate_dir.exists() {
        std::fs::remove_dir_all(&crate_dir)?;
    }
    std::fs::create_dir_all(&dir)?;
    run(Command::new(wasmop_binary()?)
        .args(["new", "hello-op", "--group", "demo.wasmop.dev", "--kind", "Hello", "--dir"])
        .arg(&dir))?;
    // Refuses to overwrite.
    let again = Command::new(wasmop_binary()?)
        .args(["new", "hello-op", "--group", "a.b", "--kind", "K", "--dir"])
        .arg(&dir)
        .output()?;
    assert!(!again.status.success(), "a second `new` into the same directory is refused");

    cargo(root, &crate_dir, "cargo test --offline --quiet")?;
    cargo(
        root,
        &crate_dir,
        "source \"$ROOT/tests/testbed/guest-toolchain.sh\" && guest_toolchain_ensure && guest_cargo build --release --offline --quiet",
    )?;
    let wasm = root.join("target/scaffold/wasm32-wasip2/release/hello_op.wasm");
    let wasm = if wasm.exists() {
        wasm
    } else {
        root.join("target/scaffold/guest-debian/wasm32-wasip2/release/hello_op.wasm")
    };

    let client = client().await?;
    apply_file(&client, &crate_dir.join("crd.yaml"), None).await?;
    let ns = namespace(&client, "scaffold").await?;
    let host = bare_host(&client, &ns)?;
    host.install("scaffold", &wasm, std::fs::read(&wasm)?, None).await?;
    apply_file(&client, &crate_dir.join("example.yaml"), Some(&ns)).await?;
    let gvk = GroupVersionKind::gvk("demo.wasmop.dev", "v1", "Hello");
    let api: Api<DynamicObject> =
        Api::namespaced_with(client.clone(), &ns, &ApiResource::from_gvk_with_plural(&gvk, "hellos"));
    let ready = |o: Option<&DynamicObject>| {
        o.is_some_and(|o| {
            o.data["status"]["echo"] == "hello"
                && o.data["status"]["conditions"]
                    .as_array()
                    .is_some_and(|cs| cs.iter().any(|c| c["type"] == "Ready" && c["status"] == "True"))
        })
    };
    within(WAIT, "the example echoed and Ready", await_condition(api, "example", ready)).await??;
    host.stop_all().await;
    Ok(())
}
