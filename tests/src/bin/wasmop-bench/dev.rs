//! Part `dev`: a saved edit to the changed status on the cluster, under `wasmop run
//! --dev-source`. The host runs the Python dev runtime on a copy of the Python Greeting's source
//! and reconciles one Greeting; `BENCH_DEV_EDITS` times (default 7) the greeting word is edited
//! and saved (written beside, renamed over), and the load generator's watch times the status to
//! show it. No build runs between the save and the reconcile.

use std::path::Path;
use std::time::{Duration, Instant};

use futures::TryStreamExt;
use kube::Client;
use kube::api::{Api, ApiResource, DynamicObject, PostParams};
use kube::runtime::{WatchStreamExt, watcher};
use serde_json::{Value, json};

use super::process::{Controller, Side};

/// How long one edit may take to show.
const LIMIT: Duration = Duration::from_secs(120);

/// Waits until the Greeting `name` of `api` shows `message`; returns how long after `since`.
async fn until_message(api: &Api<DynamicObject>, message: &str, since: Instant) -> anyhow::Result<Duration> {
    let events = watcher(api.clone(), watcher::Config::default()).default_backoff().applied_objects();
    let mut events = std::pin::pin!(events);
    tokio::time::timeout(LIMIT, async {
        while let Some(greeting) = events.try_next().await? {
            if greeting.data["status"]["message"] == message {
                return anyhow::Ok(since.elapsed());
            }
        }
        anyhow::bail!("the watch of Greetings ended")
    })
    .await?
}

/// Runs the part; returns its JSON and markdown.
pub async fn dev(client: &Client, kubeconfig: &Path, edits: usize) -> anyhow::Result<(Value, String)> {
    let root = wasmop_tests::workspace_root();
    wasmop_tests::apply_file(client, &root.join("plugins/greeting/crd.yaml"), None).await?;
    let ns = wasmop_tests::namespace(client, "bench-dev").await?;
    let source = root.join("target/bench/dev-python");
    let _ = std::fs::remove_dir_all(&source);
    std::fs::create_dir_all(&source)?;
    let app = source.join("app.py");
    let original = std::fs::read_to_string(root.join("plugins/greeting-py/app.py"))?;
    std::fs::write(&app, &original)?;
    let runtime = wasmop_tests::plugin("dev/python").display().to_string();
    let args = ["--plugin".to_string(), runtime, "--dev-source".to_string(), source.display().to_string()];
    let host = Controller::start(Side::Wasmop, &ns, kubeconfig, &args)?;

    let resource = ApiResource {
        group: "example.wasmop.dev".into(),
        version: "v1".into(),
        api_version: "example.wasmop.dev/v1".into(),
        kind: "Greeting".into(),
        plural: "greetings".into(),
    };
    let api: Api<DynamicObject> = Api::namespaced_with(client.clone(), &ns, &resource);
    let ada = json!({ "apiVersion": "example.wasmop.dev/v1", "kind": "Greeting", "metadata": { "name": "ada" },
        "spec": { "name": "Ada" } });
    api.create(&PostParams::default(), &serde_json::from_value(ada)?).await?;
    until_message(&api, "Hello, Ada!", Instant::now()).await?;

    let mut times = Vec::new();
    for edit in 1..=edits {
        let word = format!("Edit{edit}");
        let staged = source.join("app.py.new");
        std::fs::write(&staged, original.replace("f\"Hello, ", &format!("f\"{word}, ")))?;
        let saved = Instant::now();
        std::fs::rename(&staged, &app)?;
        times.push(until_message(&api, &format!("{word}, Ada!"), saved).await?);
    }
    host.stop().await?;
    let millis: Vec<f64> = times.iter().map(|t| t.as_secs_f64() * 1e3).collect();
    let mut sorted = millis.clone();
    sorted.sort_by(f64::total_cmp);
    let median = sorted.get(sorted.len() / 2).copied().unwrap_or_default();
    let json = json!({ "language": "python", "edits": edits, "saveToStatusMs": millis, "medianMs": median });
    let md = format!(
        "## Dev loop\n\n`wasmop run --dev-source` with the Python dev runtime: {edits} saved edits of the Python Greeting's source, each to its new status on the cluster: median {median:.0} ms (each: {}).\n",
        millis.iter().map(|m| format!("{m:.0} ms")).collect::<Vec<_>>().join(", ")
    );
    Ok((json, md))
}
