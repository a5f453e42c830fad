//! `wasmop run --dev-source`: a plugin's source run by its language's dev runtime, a saved edit
//! of it reconciled on the cluster without a build; the dev runtime runs nothing anywhere else.

use std::path::Path;
use std::sync::Arc;

use kube::api::{Api, ApiResource, DynamicObject, PostParams};
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
    let new = file.with_extension("py.new");
    std::fs::write(&new, text)?;
    std::fs::rename(&new, file)?;
    Ok(())
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_saved_edit_of_a_python_plugin_is_reconciled_without_a_build() -> anyhow::Result<()> {
    let client = client().await?;
    apply_file(&client, &workspace_root().join("plugins/greeting/crd.yaml"), None).await?;
    let ns = namespace(&client, "dev-python").await?;
    // The Python Greeting's source, in a directory of the test's own.
    let source = workspace_root().join("target/dev-sources").join(&ns);
    let _ = std::fs::remove_dir_all(&source);
    std::fs::create_dir_all(&source)?;
    let app = source.join("app.py");
    std::fs::copy(workspace_root().join("plugins/greeting-py/app.py"), &app)?;

    in_process::overlaps();
    let dev = DevSource::new(&source)?;
    let cache_dir = Some(workspace_root().join("target/wasmop-test-cache"));
    let config = RuntimeConfig { cache_dir, limits: Limits::default(), observer: None, dev_source: Some(dev.clone()) };
    let host = Arc::new(Host::new(
        Clusters::new(client.clone()),
        Arc::new(Runtime::new(config)?),
        Metrics::new(),
        settings(&ns, HostConfig::default()),
    ));
    let stop = CancellationToken::new();
    let sources =
        Sources { files: vec![plugin("dev/python")], watch_files: true, dev_source: Some(dev), ..Sources::default() };
    let loader = tokio::spawn(wasmop::loader::run(host, sources, None, stop.clone()));

    let resource = ApiResource {
        group: "example.wasmop.dev".into(),
        version: "v1".into(),
        api_version: "example.wasmop.dev/v1".into(),
        kind: "Greeting".into(),
        plural: "greetings".into(),
    };
    let greetings: Api<DynamicObject> = Api::namespaced_with(client.clone(), &ns, &resource);
    let ada = json!({ "apiVersion": "example.wasmop.dev/v1", "kind": "Greeting", "metadata": { "name": "ada" },
        "spec": { "name": "Ada" } });
    greetings.create(&PostParams::default(), &serde_json::from_value(ada)?).await?;
    let message = |text: &'static str| move |g: &DynamicObject| g.data["status"]["message"] == text;
    // The first load compiles the dev runtime, which on a loaded machine may take a minute.
    let first = std::time::Duration::from_secs(300);
    until_within(first, "the source's greeting", async || Ok(greetings.get("ada").await?), message("Hello, Ada!"))
        .await?;

    let edited = std::fs::read_to_string(&app)?.replace("f\"Hello, ", "f\"Howdy, ");
    assert!(edited.contains("Howdy, "), "the Greeting's source greets with Hello");
    save(&app, &edited)?;
    until("the edited greeting", async || Ok(greetings.get("ada").await?), message("Howdy, Ada!")).await?;

    stop.cancel();
    loader.await??;
    Ok(())
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
