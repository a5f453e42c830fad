//! `wasmop new`: the scaffolded crate passes its unit tests (its crd.yaml is what its types
//! generate, its validating webhook refuses an empty message under the fake host), builds for
//! wasm32-wasip2, `wasmop crd --plugin` prints its CRD, which the API server takes, and `wasmop
//! run --plugin --webhook-addr` reconciles the scaffolded example in the cluster and refuses an
//! object with an empty message at `kubectl apply`, through the host's webhook: the guide of
//! `docs/src/writing-plugins/rust.md`. The same for the Python and TypeScript scaffolds, whose
//! crd.yaml is generated from their types too.

use std::path::Path;
use std::process::{Command, Stdio};
use std::time::Duration;

use anyhow::Context as _;
use k8s_openapi::api::admissionregistration::v1::ValidatingWebhookConfiguration;
use k8s_openapi::api::core::v1::ConfigMap;
use kube::api::{Api, ApiResource, DynamicObject, GroupVersionKind, PostParams};
use kube::runtime::wait::await_condition;
use wasmop_tests::{apply_file, client, kubeconfig, namespace, plugin, until, wasmop_binary, within, workspace_root};

/// How long the host may take to compile a scaffolded plugin it has never seen (a Python or
/// TypeScript component of 20-40 MB: a minute of a busy 2-core machine's time) and reconcile
/// its example; a wait on the condition, not a sleep.
const WAIT: Duration = Duration::from_secs(180);

/// A `wasmop run` process this test started, killed when dropped (on failure too).
struct Running(std::process::Child);

impl Drop for Running {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

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

    // The CRD, generated from the plugin's types, is the one the scaffold wrote.
    let printed = Command::new(wasmop_binary()?).arg("crd").arg("--plugin").arg(&wasm).output()?;
    let stdout = String::from_utf8(printed.stdout)?;
    assert!(printed.status.success(), "wasmop crd --plugin failed: {}", String::from_utf8_lossy(&printed.stderr));
    let generated: serde_json::Value = serde_saphyr::from_str(&stdout)?;
    let written: serde_json::Value = serde_saphyr::from_str(&std::fs::read_to_string(crate_dir.join("crd.yaml"))?)?;
    assert_eq!(generated, written, "crd.yaml is what `wasmop crd --plugin` prints");
    let version = &generated["spec"]["versions"][0];
    assert_eq!(version["subresources"]["status"], serde_json::json!({}));
    assert_eq!(version["schema"]["openAPIV3Schema"]["properties"]["spec"]["required"], serde_json::json!(["message"]));
    // A plugin without crd() is told so.
    let none = Command::new(wasmop_binary()?).arg("crd").arg("--plugin").arg(plugin("greeting")).output()?;
    let stderr = String::from_utf8_lossy(&none.stderr);
    assert!(!none.status.success() && stderr.contains("declares no CustomResourceDefinition"), "{stderr}");

    let crd_file = dir.join("generated-crd.yaml");
    std::fs::write(&crd_file, &stdout)?;
    reconciles_its_example(&wasm, &crd_file, &crate_dir, ("Hello", "hellos")).await
}

/// `wasmop run --plugin`, as the book's guide runs it, reconciles the scaffolded example
/// (kind and plural as given) in a namespace of its own: the echo in its status, the ConfigMap,
/// Ready. Run with `--webhook-addr`, it serves the plugin's validating webhook: the API server
/// refuses an object with an empty message with the plugin's message and field.
async fn reconciles_its_example(
    wasm: &Path,
    crd_file: &Path,
    plugin_dir: &Path,
    (kind, plural): (&str, &str),
) -> anyhow::Result<()> {
    let root = workspace_root();
    let client = client().await?;
    apply_file(&client, crd_file, None).await?;
    let ns = namespace(&client, "scaffold").await?;
    // Compiled into the host's module cache first (`wasmop inspect` loads as `run` does): on a
    // busy machine, compiling a Python or JavaScript runtime takes a good part of WAIT.
    let cache = root.join("target/wasmop-test-cache");
    run(Command::new(wasmop_binary()?).arg("inspect").arg(wasm).env("WASMOP_CACHE_DIR", &cache))?;
    let metrics = std::net::TcpListener::bind("127.0.0.1:0")?.local_addr()?;
    let webhooks = std::net::TcpListener::bind("127.0.0.1:0")?.local_addr()?;
    let host = Running(
        Command::new(wasmop_binary()?)
            .args(["run", "--namespace", &ns, "--metrics-address", &metrics.to_string(), "--plugin"])
            .arg(wasm)
            .args(["--webhook-addr", &webhooks.to_string(), "--webhook-url", &format!("https://{webhooks}")])
            .env("KUBECONFIG", kubeconfig())
            .env("POD_NAMESPACE", &ns)
            .env("WASMOP_CACHE_DIR", &cache)
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()?,
    );
    apply_file(&client, &plugin_dir.join("example.yaml"), Some(&ns)).await?;
    let gvk = GroupVersionKind::gvk("demo.wasmop.dev", "v1", kind);
    let api: Api<DynamicObject> =
        Api::namespaced_with(client.clone(), &ns, &ApiResource::from_gvk_with_plural(&gvk, plural));
    let ready = |o: Option<&DynamicObject>| {
        o.is_some_and(|o| {
            o.data["status"]["echo"] == "hello"
                && o.data["status"]["configMap"] == "example-message"
                && o.data["status"]["conditions"]
                    .as_array()
                    .is_some_and(|cs| cs.iter().any(|c| c["type"] == "Ready" && c["status"] == "True"))
        })
    };
    within(WAIT, "the example echoed and Ready", await_condition(api.clone(), "example", ready)).await??;
    let config_map = Api::<ConfigMap>::namespaced(client.clone(), &ns).get("example-message").await?;
    assert_eq!(config_map.data.unwrap_or_default().get("message").map(String::as_str), Some("hello"));

    // Once the host has written the webhook configuration, an empty message is refused.
    let silent: DynamicObject = serde_json::from_value(serde_json::json!({
        "apiVersion": "demo.wasmop.dev/v1", "kind": kind, "metadata": { "name": "silent" }, "spec": { "message": "" }
    }))?;
    let refusal = async |params: &PostParams| match api.create(params, &silent).await {
        Ok(_) => Ok(None),
        Err(kube::Error::Api(status)) => Ok(Some(*status)),
        Err(other) => Err(anyhow::Error::from(other)),
    };
    let dry_run = PostParams { dry_run: true, ..PostParams::default() };
    let refused =
        until("an empty message refused by the scaffold's webhook", async || refusal(&dry_run).await, Option::is_some)
            .await?
            .expect("refused");
    assert!(refused.message.ends_with("spec.message: the message must not be empty"), "{refused:?}");
    assert!(refusal(&PostParams::default()).await?.is_some(), "a create, not only a dry run, is refused");
    assert!(api.get_opt("silent").await?.is_none(), "the refused object is not stored");
    drop(host);
    // Killed, the host removes nothing (other replicas would still serve): the test does.
    let name = plugin_dir.file_name().and_then(|n| n.to_str()).expect("a plugin directory name");
    Api::<ValidatingWebhookConfiguration>::all(client.clone())
        .delete(&format!("wasmop-{name}-{ns}"), &Default::default())
        .await?;
    Ok(())
}

/// Whether `wasmop crd --plugin wasm` prints the scaffold's crd.yaml: generated from its types.
fn crd_yaml_is_generated(wasm: &Path, plugin_dir: &Path) -> anyhow::Result<()> {
    let printed = Command::new(wasmop_binary()?).arg("crd").arg("--plugin").arg(wasm).output()?;
    assert!(printed.status.success(), "wasmop crd --plugin failed: {}", String::from_utf8_lossy(&printed.stderr));
    let generated: serde_json::Value = serde_saphyr::from_str(&String::from_utf8(printed.stdout)?)?;
    let written: serde_json::Value = serde_saphyr::from_str(&std::fs::read_to_string(plugin_dir.join("crd.yaml"))?)?;
    assert_eq!(generated, written, "crd.yaml is what `wasmop crd --plugin` prints");
    Ok(())
}

/// A fresh `wasmop new --lang LANG` plugin in `target/scaffold-test/NAME`.
fn scaffold(name: &str, lang: &str, kind: &str) -> anyhow::Result<std::path::PathBuf> {
    let dir = workspace_root().join("target/scaffold-test");
    let plugin_dir = dir.join(name);
    if plugin_dir.exists() {
        std::fs::remove_dir_all(&plugin_dir)?;
    }
    std::fs::create_dir_all(&dir)?;
    run(Command::new(wasmop_binary()?)
        .args(["new", name, "--lang", lang, "--group", "demo.wasmop.dev", "--kind", kind, "--dir"])
        .arg(&dir))?;
    Ok(plugin_dir)
}

/// Runs the commands of a scaffolded plugin's README in its directory (`$ROOT` is the
/// repository).
fn shell(plugin_dir: &Path, script: &str) -> anyhow::Result<()> {
    run(Command::new("bash")
        .arg("-euo")
        .arg("pipefail")
        .arg("-c")
        .arg(script)
        .current_dir(plugin_dir)
        .env("ROOT", workspace_root()))
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_scaffolded_python_plugin_passes_its_tests_builds_and_reconciles_its_example() -> anyhow::Result<()> {
    let plugin_dir = scaffold("hello-py", "python", "PyHello")?;
    // Its README's commands.
    shell(
        &plugin_dir,
        r#"source "$ROOT/tests/testbed/python-toolchain.sh" && python_toolchain_ensure
           "$WASMOP_PY" -m pytest -q -p no:cacheprovider
           VIRTUAL_ENV="$WASMOP_PYTHON_VENV" "$WASMOP_COMPONENTIZE" -d "$ROOT/wit" -w operator componentize app -p . -o hello-py.wasm"#,
    )?;
    let readme = std::fs::read_to_string(plugin_dir.join("README.md"))?;
    assert!(readme.contains("componentize app -p . -o hello-py.wasm"), "the README builds what this test builds");
    crd_yaml_is_generated(&plugin_dir.join("hello-py.wasm"), &plugin_dir)?;
    reconciles_its_example(
        &plugin_dir.join("hello-py.wasm"),
        &plugin_dir.join("crd.yaml"),
        &plugin_dir,
        ("PyHello", "pyhellos"),
    )
    .await
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_scaffolded_typescript_plugin_passes_its_tests_builds_and_reconciles_its_example() -> anyhow::Result<()> {
    let plugin_dir = scaffold("hello-ts", "ts", "TsHello")?;
    // Its README's commands (the toolchain of the SDK package first).
    shell(
        &plugin_dir,
        r#""$ROOT/tests/testbed/js-toolchain.sh" >/dev/null
           npm install --offline --no-audit --no-fund --silent
           npm run --silent check
           npm test --silent
           npm run --silent build"#,
    )?;
    let readme = std::fs::read_to_string(plugin_dir.join("README.md"))?;
    assert!(readme.contains("npm run build"), "the README builds what this test builds");
    let wasm = plugin_dir.join("dist/hello-ts.wasm");
    crd_yaml_is_generated(&wasm, &plugin_dir)?;
    reconciles_its_example(&wasm, &plugin_dir.join("crd.yaml"), &plugin_dir, ("TsHello", "tshellos")).await
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_scaffolded_go_plugin_passes_its_tests_builds_and_reconciles_its_example() -> anyhow::Result<()> {
    let plugin_dir = scaffold("hello-go", "go", "GoHello")?;
    // Its README's commands, the componentizer built where `make plugins` builds it.
    shell(
        &plugin_dir,
        r#"go test ./...
           GOOS=wasip1 GOARCH=wasm go build -buildmode=c-shared -o hello-go.core.wasm .
           CARGO_TARGET_DIR="${CARGO_TARGET_DIR:-$ROOT/target}" cargo run --quiet --release --locked \
             --manifest-path "$ROOT/tools/componentize/Cargo.toml" -- "$ROOT/wit" hello-go.core.wasm hello-go.wasm"#,
    )?;
    let readme = std::fs::read_to_string(plugin_dir.join("README.md"))?;
    assert!(readme.contains("hello-go.core.wasm hello-go.wasm"), "the README builds what this test builds");
    let wasm = plugin_dir.join("hello-go.wasm");
    reconciles_its_example(&wasm, &plugin_dir.join("crd.yaml"), &plugin_dir, ("GoHello", "gohellos")).await
}
