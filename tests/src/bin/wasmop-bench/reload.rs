//! Part `reload`: hot reload to the first reconcile by the new version. The wasmop host watches
//! a directory holding `fixture-swap` (status `version: v1`) and reconciles `BENCH_SWAPS` Swaps
//! (default 200); the module is then replaced in place (written beside, renamed over) by
//! `fixture-swap-v2`, and the load generator's watch times the first and the last Swap to show
//! `version: v2` (a swap queues every primary again, at background priority). A native
//! controller has no equivalent: it is rebuilt and restarted.

use std::path::Path;
use std::time::{Duration, Instant};

use futures::TryStreamExt;
use kube::Client;
use kube::runtime::{WatchStreamExt, watcher};
use serde_json::{Value, json};

use super::process::{Controller, Side};

/// How long the Swaps may take to show a version.
const LIMIT: Duration = Duration::from_secs(300);

/// Waits until `count` Swaps of `api` show `version`; returns when the first and the last did,
/// counted from `since`.
async fn until_all(
    api: &kube::Api<kube::api::DynamicObject>,
    count: usize,
    version: &str,
    since: Instant,
) -> anyhow::Result<(Duration, Duration)> {
    let mut done = std::collections::HashSet::new();
    let mut first = None;
    let events = watcher(api.clone(), watcher::Config::default()).default_backoff().applied_objects();
    let mut events = std::pin::pin!(events);
    let waited = tokio::time::timeout(LIMIT, async {
        while let Some(swap) = events.try_next().await? {
            if swap.data["status"]["version"] == version {
                first.get_or_insert_with(|| since.elapsed());
                done.insert(swap.metadata.name.clone());
                if done.len() == count {
                    return anyhow::Ok(since.elapsed());
                }
            }
        }
        anyhow::bail!("the watch of Swaps ended")
    })
    .await??;
    Ok((first.unwrap_or(waited), waited))
}

/// Runs the part; returns its JSON and markdown.
pub async fn reload(client: &Client, kubeconfig: &Path) -> anyhow::Result<(Value, String)> {
    let root = wasmop_tests::workspace_root();
    wasmop_tests::apply_file(client, &root.join("plugins/fixtures/swap/crd.yaml"), None).await?;
    let ns = wasmop_tests::namespace(client, "bench-reload").await?;
    let count = super::knobs::env_number("BENCH_SWAPS", 200);
    let dir = root.join("target/bench/reload");
    std::fs::create_dir_all(&dir)?;
    let module = dir.join("swap.wasm");
    std::fs::copy(wasmop_tests::plugin("fixture-swap"), &module)?;
    let args = ["--plugins".to_string(), dir.display().to_string(), "--watch".to_string()];
    let host = Controller::start(Side::Wasmop, &ns, kubeconfig, &args)?;
    let api = wasmop_tests::swaps::api(client, &ns);
    wasmop_tests::swaps::create(&api, count).await?;
    until_all(&api, count, "v1", Instant::now()).await?;

    let staged = dir.join("swap.wasm.new");
    std::fs::copy(wasmop_tests::plugin("fixture-swap-v2"), &staged)?;
    let replaced = Instant::now();
    std::fs::rename(&staged, &module)?;
    let (first, last) = until_all(&api, count, "v2", replaced).await?;
    host.stop().await?;
    let json = json!({ "swaps": count, "firstNewVersionMs": first.as_secs_f64() * 1e3, "allNewVersionMs": last.as_secs_f64() * 1e3 });
    let md = format!(
        "## Hot reload\n\n{count} Swaps reconciled by `fixture-swap`; its file replaced by `fixture-swap-v2`: the first Swap showed v2's status {:.0} ms later, all {count} after {:.0} ms (no native equivalent: a native controller is rebuilt and restarted).\n",
        first.as_secs_f64() * 1e3,
        last.as_secs_f64() * 1e3
    );
    Ok((json, md))
}
