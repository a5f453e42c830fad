//! Part `dev`: a saved edit to the changed status on the cluster, under `wasmop run
//! --dev-source`, in Python and TypeScript. The host runs the language's dev runtime on a copy
//! of the Greeting's source (TypeScript: on its bundle, `wasmop-guest dev` watching the source)
//! and reconciles one Greeting; `BENCH_DEV_EDITS` times (default 7) the greeting word is edited
//! and saved (written beside, renamed over), and the load generator's watch times the status to
//! show it. No componentize step runs between the save and the reconcile.

use std::path::Path;
use std::time::{Duration, Instant};

use futures::TryStreamExt;
use kube::Client;
use kube::api::{Api, ApiResource, DynamicObject, GroupVersionKind, PostParams};
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

/// One language's dev loop: its dev runtime, the plugin's source file (in the Greeting's
/// directory), and whether the source is bundled (`wasmop-guest dev`) before the runtime reads it.
struct Language {
    name: &'static str,
    runtime: &'static str,
    plugin: &'static str,
    file: &'static str,
    bundled: bool,
}

const LANGUAGES: [Language; 2] = [
    Language { name: "Python", runtime: "dev/python", plugin: "greeting-py", file: "app.py", bundled: false },
    Language { name: "TypeScript", runtime: "dev/typescript", plugin: "greeting-ts", file: "plugin.ts", bundled: true },
];

/// Times `edits` saved edits of `language`'s Greeting to their status, each in ms.
async fn edit_times(client: &Client, kubeconfig: &Path, language: &Language, edits: usize) -> anyhow::Result<Vec<f64>> {
    let root = wasmop_tests::workspace_root();
    let ns = wasmop_tests::namespace(client, &format!("bench-dev-{}", language.plugin)).await?;
    let dir = root.join("target/bench/dev").join(language.plugin);
    let _ = std::fs::remove_dir_all(&dir);
    let (src, bundle) = (dir.join("src"), dir.join("bundle"));
    std::fs::create_dir_all(&src)?;
    let file = src.join(language.file);
    let original = std::fs::read_to_string(root.join("plugins").join(language.plugin).join(language.file))?;
    std::fs::write(&file, &original)?;
    // esbuild watching the source, as a developer runs it beside the host.
    let bundler = if language.bundled {
        let bundler = tokio::process::Command::new("node")
            .arg(root.join("guest-sdk/js/bin/wasmop-guest.mjs"))
            .args(["dev".as_ref(), src.as_os_str(), "--out".as_ref(), bundle.as_os_str()])
            .kill_on_drop(true)
            .spawn()?;
        let bundled = bundle.join("plugin.js");
        tokio::time::timeout(LIMIT, async {
            while !bundled.exists() {
                tokio::time::sleep(Duration::from_millis(50)).await;
            }
        })
        .await?;
        Some(bundler)
    } else {
        None
    };
    let dev_dir = if language.bundled { &bundle } else { &src };
    let runtime = wasmop_tests::plugin(language.runtime).display().to_string();
    let args = ["--plugin".to_string(), runtime, "--dev-source".to_string(), dev_dir.display().to_string()];
    let host = Controller::start(Side::Wasmop, &ns, kubeconfig, &args)?;

    let resource = ApiResource::from_gvk(&GroupVersionKind::gvk("example.wasmop.dev", "v1", "Greeting"));
    let api: Api<DynamicObject> = Api::namespaced_with(client.clone(), &ns, &resource);
    let ada = json!({ "apiVersion": "example.wasmop.dev/v1", "kind": "Greeting", "metadata": { "name": "ada" },
        "spec": { "name": "Ada" } });
    api.create(&PostParams::default(), &serde_json::from_value(ada)?).await?;
    until_message(&api, "Hello, Ada!", Instant::now()).await?;

    let mut times = Vec::new();
    for edit in 1..=edits {
        let word = format!("Edit{edit}");
        let staged = src.join("edited.new");
        std::fs::write(&staged, original.replace("Hello, ", &format!("{word}, ")))?;
        let saved = Instant::now();
        std::fs::rename(&staged, &file)?;
        times.push(until_message(&api, &format!("{word}, Ada!"), saved).await?.as_secs_f64() * 1e3);
    }
    host.stop().await?;
    drop(bundler);
    Ok(times)
}

/// The median of `values`.
fn median(values: &[f64]) -> f64 {
    let mut sorted = values.to_vec();
    sorted.sort_by(f64::total_cmp);
    sorted.get(sorted.len() / 2).copied().unwrap_or_default()
}

/// Runs the part; returns its JSON and markdown.
pub async fn dev(client: &Client, kubeconfig: &Path, edits: usize) -> anyhow::Result<(Value, String)> {
    let root = wasmop_tests::workspace_root();
    wasmop_tests::apply_file(client, &root.join("plugins/greeting/crd.yaml"), None).await?;
    let mut json = serde_json::Map::new();
    let mut md = format!(
        "## Dev loop\n\n`wasmop run --dev-source` with each language's dev runtime: {edits} saved edits of the Greeting's source, each to its new status on the cluster (TypeScript: bundled by `wasmop-guest dev`, esbuild watching).\n\n| language | median | each |\n|---|---|---|\n"
    );
    for language in &LANGUAGES {
        let times = edit_times(client, kubeconfig, language, edits).await?;
        let median = median(&times);
        let each = times.iter().map(|m| format!("{m:.0} ms")).collect::<Vec<_>>().join(", ");
        md.push_str(&format!("| {} | {median:.0} ms | {each} |\n", language.name));
        json.insert(language.name.to_lowercase(), json!({ "saveToStatusMs": times, "medianMs": median }));
    }
    Ok((Value::Object(json), md))
}
