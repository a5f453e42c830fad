//! `wasmop run --dev-source`: a plugin's source run by its language's dev runtime, a saved edit
//! of it reconciled on the cluster without a build, in Python and TypeScript; the dev runtime
//! runs nothing anywhere else.

use std::path::Path;
use std::sync::Arc;

use kube::api::{Api, ApiResource, DynamicObject, GroupVersionKind, PostParams};
use serde_json::json;
use tokio_util::sync::CancellationToken;
use wasmop::host::Host;
use wasmop::informer::Clusters;
use wasmop::loader::Sources;
use wasmop::metrics::Metrics;
use wasmop::runtime::dev::DevSource;
use wasmop::runtime::{Limits, Runtime, RuntimeConfig};
use wasmop::settings::HostConfig;
use wasmop_tests::{
    apply_file, client, in_process, namespace, plugin, runtime, settings, until, until_within, workspace_root,
};

/// Saves `text` as `file` the way editors do: a new file renamed over the old one.
fn save(file: &Path, text: &str) -> anyhow::Result<()> {
    let new = file.with_extension("new");
    std::fs::write(&new, text)?;
    std::fs::rename(&new, file)?;
    Ok(())
}

/// Runs the dev runtime `runtime` (in `plugins/dist/dev`) on the source directory `dev` in
/// namespace `ns`, has it greet a Greeting, then saves `file` with its greeting word `from`
/// replaced by `to` and waits for the new greeting on the Greeting.
async fn an_edit_is_reconciled(
    runtime: &str,
    ns: &str,
    dev: &Path,
    file: &Path,
    from: &str,
    to: &str,
) -> anyhow::Result<()> {
    let client = client().await?;
    in_process::overlaps();
    let dev = DevSource::new(dev)?;
    let cache_dir = Some(workspace_root().join("target/wasmop-test-cache"));
    let config = RuntimeConfig { cache_dir, limits: Limits::default(), observer: None, dev_source: Some(dev.clone()) };
    let host = Arc::new(Host::new(
        Clusters::new(client.clone()),
        Arc::new(Runtime::new(config)?),
        Metrics::new(),
        settings(ns, HostConfig::default()),
    ));
    let stop = CancellationToken::new();
    let sources = Sources {
        files: vec![plugin(&format!("dev/{runtime}"))],
        watch_files: true,
        dev_source: Some(dev),
        ..Sources::default()
    };
    let loader = tokio::spawn(wasmop::loader::run(host, sources, None, stop.clone()));

    let resource = ApiResource::from_gvk(&GroupVersionKind::gvk("example.wasmop.dev", "v1", "Greeting"));
    let greetings: Api<DynamicObject> = Api::namespaced_with(client.clone(), ns, &resource);
    let ada = json!({ "apiVersion": "example.wasmop.dev/v1", "kind": "Greeting", "metadata": { "name": "ada" },
        "spec": { "name": "Ada" } });
    greetings.create(&PostParams::default(), &serde_json::from_value(ada)?).await?;
    let message = |text: String| move |g: &DynamicObject| g.data["status"]["message"] == text.as_str();
    // The first load compiles the dev runtime, which on a loaded machine may take a minute.
    let first = std::time::Duration::from_secs(300);
    let greeted = message(format!("{from}, Ada!"));
    until_within(first, "the source's greeting", async || Ok(greetings.get("ada").await?), greeted).await?;

    let edited = std::fs::read_to_string(file)?.replace(&format!("{from}, "), &format!("{to}, "));
    assert!(edited.contains(&format!("{to}, ")), "the source greets with {from}");
    save(file, &edited)?;
    let greeted = message(format!("{to}, Ada!"));
    until("the edited greeting", async || Ok(greetings.get("ada").await?), greeted).await?;

    stop.cancel();
    loader.await??;
    Ok(())
}

/// A directory of the test's own under `target/dev-sources`, holding a copy of `plugin`'s
/// file `name`.
fn copied(ns: &str, plugin: &str, name: &str) -> anyhow::Result<std::path::PathBuf> {
    let dir = workspace_root().join("target/dev-sources").join(ns);
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(dir.join("src"))?;
    std::fs::copy(workspace_root().join("plugins").join(plugin).join(name), dir.join("src").join(name))?;
    Ok(dir)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_saved_edit_of_a_python_plugin_is_reconciled_without_a_build() -> anyhow::Result<()> {
    let client = client().await?;
    apply_file(&client, &workspace_root().join("plugins/greeting/crd.yaml"), None).await?;
    let ns = namespace(&client, "dev-python").await?;
    let src = copied(&ns, "greeting-py", "app.py")?.join("src");
    an_edit_is_reconciled("python", &ns, &src, &src.join("app.py"), "Hello", "Howdy").await
}

/// A TypeScript plugin's source is bundled (by `wasmop-guest dev`, esbuild watching it), not
/// built into a component: the dev runtime runs the bundle.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_saved_edit_of_a_typescript_plugin_is_reconciled_without_a_build() -> anyhow::Result<()> {
    let client = client().await?;
    apply_file(&client, &workspace_root().join("plugins/greeting/crd.yaml"), None).await?;
    let ns = namespace(&client, "dev-typescript").await?;
    let dir = copied(&ns, "greeting-ts", "plugin.ts")?;
    let (src, bundle) = (dir.join("src"), dir.join("bundle"));
    let mut bundler = tokio::process::Command::new("node")
        .arg(workspace_root().join("guest-sdk/js/bin/wasmop-guest.mjs"))
        .args(["dev".as_ref(), src.as_os_str(), "--out".as_ref(), bundle.as_os_str()])
        .kill_on_drop(true)
        .spawn()?;
    let bundled = bundle.join("plugin.js");
    until("the first bundle", async || Ok(bundled.exists()), |exists| *exists).await?;
    let edited = an_edit_is_reconciled("typescript", &ns, &bundle, &src.join("plugin.ts"), "Hello", "Howdy").await;
    bundler.kill().await?;
    edited
}

/// Loaded any other way, the dev runtime has no source to run: it is refused. Given a source,
/// the same runtime loads as the plugin that source is.
#[test]
fn the_dev_runtime_runs_nothing_without_a_dev_source() -> anyhow::Result<()> {
    let refused = runtime(Limits::default())?.load(&plugin("dev/python")).err();
    let refused = refused.map(|e| format!("{e:#}")).unwrap_or_default();
    assert!(refused.contains("describe() failed"), "{refused}");

    let dev_source = Some(DevSource::new(&workspace_root().join("plugins/greeting-py"))?);
    let cache_dir = Some(workspace_root().join("target/wasmop-test-cache"));
    let given = Runtime::new(RuntimeConfig { cache_dir, limits: Limits::default(), observer: None, dev_source })?;
    assert_eq!(given.load(&plugin("dev/python"))?.name(), "greeting");
    Ok(())
}
