//! Hot reload under churn, against the real kube-apiserver: while 50 Swaps get 100 spec changes
//! a second for 10 s, `fixture-swap` v1 is replaced by v2 halfway. No change may be lost (every
//! Swap ends with the status v2 computes for its last spec) and no Swap may ever be reconciled by
//! two calls at once (checked on the plugin's own begin/end log lines, as the host logs them).

use std::collections::HashMap;
use std::path::Path;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use kube::api::{Api, ApiResource, DynamicObject, GroupVersionKind, Patch, PatchParams, PostParams};
use kube::{Client, ResourceExt};
use tracing::field::{Field, Visit};
use tracing_subscriber::layer::{Context, SubscriberExt};
use wasmop::host::{Change, Host};
use wasmop::metrics::Metrics;
use wasmop::runtime::Limits;
use wasmop::settings::{HostConfig, Overrides};
use wasmop_tests::{apply_file, client, namespace, observed_runtime, plugin, settings, within, workspace_root};

const OBJECTS: usize = 50;
const CHANGES_PER_SECOND: u64 = 100;
const CHURN: Duration = Duration::from_secs(10);

/// Per Swap, whether a reconcile is running, from the plugin's `swap begin/end <ns>/<name>`
/// lines; and how many began while another was running.
#[derive(Default)]
struct Overlaps {
    running: Mutex<HashMap<String, bool>>,
    begun: AtomicU64,
    overlapping: AtomicU64,
}

impl Overlaps {
    fn line(&self, message: &str) {
        let (begin, key) = if let Some(key) = message.strip_prefix("swap begin ") {
            (true, key)
        } else if let Some(key) = message.strip_prefix("swap end ") {
            (false, key)
        } else {
            return;
        };
        let mut running = self.running.lock().expect("never poisoned");
        let was = running.insert(key.to_string(), begin).unwrap_or(false);
        if begin {
            self.begun.fetch_add(1, Ordering::SeqCst);
            if was {
                self.overlapping.fetch_add(1, Ordering::SeqCst);
            }
        }
    }
}

/// Feeds the plugin's log lines to [`Overlaps`].
struct Capture(Arc<Overlaps>);

struct Message(Option<String>);

impl Visit for Message {
    fn record_debug(&mut self, field: &Field, value: &dyn std::fmt::Debug) {
        if field.name() == "message" {
            self.0 = Some(format!("{value:?}"));
        }
    }
}

impl<S: tracing::Subscriber> tracing_subscriber::Layer<S> for Capture {
    fn on_event(&self, event: &tracing::Event<'_>, _: Context<'_, S>) {
        if event.metadata().target() == "wasmop::plugin" {
            let mut message = Message(None);
            event.record(&mut message);
            if let Some(message) = message.0 {
                self.0.line(&message);
            }
        }
    }
}

fn swaps(client: &Client, ns: &str) -> Api<DynamicObject> {
    let gvk = GroupVersionKind::gvk("test.wasmop.dev", "v1", "Swap");
    Api::namespaced_with(client.clone(), ns, &ApiResource::from_gvk_with_plural(&gvk, "swaps"))
}

/// Whether `swap` carries the status `version` computes for its current spec and generation.
fn settled(swap: &DynamicObject, version: &str, compute: fn(i64) -> i64) -> bool {
    let (spec, status) = (&swap.data["spec"], &swap.data["status"]);
    let value = spec["value"].as_i64().unwrap_or(0);
    status["version"] == version
        && status["result"].as_i64() == Some(compute(value))
        && status["observedGeneration"].as_i64() == swap.metadata.generation
}

/// Waits until all `count` Swaps are settled for `version`.
async fn all_settled(
    api: &Api<DynamicObject>,
    count: usize,
    version: &str,
    compute: fn(i64) -> i64,
) -> anyhow::Result<()> {
    within(Duration::from_secs(90), &format!("every Swap settled on {version}"), async {
        loop {
            let list = api.list(&Default::default()).await?;
            let unsettled: Vec<String> =
                list.items.iter().filter(|s| !settled(s, version, compute)).map(|s| s.name_any()).collect();
            if list.items.len() == count && unsettled.is_empty() {
                return anyhow::Ok(());
            }
            tokio::time::sleep(Duration::from_millis(250)).await;
        }
    })
    .await?
}

async fn create_swaps(api: &Api<DynamicObject>, count: usize) -> anyhow::Result<()> {
    for i in 0..count {
        let swap: DynamicObject = serde_json::from_value(serde_json::json!({
            "apiVersion": "test.wasmop.dev/v1", "kind": "Swap",
            "metadata": { "name": format!("swap-{i}") }, "spec": { "value": 0 }
        }))?;
        api.create(&PostParams::default(), &swap).await?;
    }
    Ok(())
}

/// A host on `ns` whose calls are timed into its metrics.
fn host(client: &Client, ns: &str) -> anyhow::Result<Arc<Host>> {
    let metrics = Metrics::new();
    let runtime = Arc::new(observed_runtime(Limits::default(), Some(metrics.clone()))?);
    let clusters = wasmop::informer::Clusters::new(client.clone());
    Ok(Arc::new(Host::new(clusters, runtime, metrics, settings(ns, HostConfig::default()))))
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn bad_versions_are_refused_and_a_new_configuration_takes_over_on_the_same_watch() -> anyhow::Result<()> {
    let client = client().await?;
    apply_file(&client, &workspace_root().join("plugins/fixtures/swap/crd.yaml"), None).await?;
    let ns = namespace(&client, "takeover").await?;
    let host = host(&client, &ns)?;
    let (v1, v2) = (plugin("fixture-swap"), plugin("fixture-swap-v2"));
    let v1_bytes = std::fs::read(&v1)?;
    host.install("test", &v1, v1_bytes.clone(), None).await?;
    let api = swaps(&client, &ns);
    create_swaps(&api, 5).await?;
    all_settled(&api, 5, "v1", |v| v + 1).await?;
    let running = host.module("fixture-swap").expect("running").digest().to_string();

    // Refused, with the reason; v1 keeps running and reconciling.
    let corrupt = host.install("test", Path::new("corrupt.wasm"), b"not wasm at all".to_vec(), None).await;
    let err = corrupt.expect_err("garbage is refused").to_string();
    assert!(err.contains("corrupt.wasm is not a valid WebAssembly component"), "{err}");
    let future = wasmop_tests::with_contract_version(&v1_bytes, "9.9.9");
    let err = host.install("test", Path::new("future.wasm"), future, None).await.expect_err("refused").to_string();
    assert!(err.contains("built against contract wasmop:plugin@9.9.9"), "{err}");
    let err = host.install("someone-else", &v2, std::fs::read(&v2)?, None).await.expect_err("refused").to_string();
    assert!(err.contains("already loaded from test"), "{err}");
    assert_eq!(host.module("fixture-swap").expect("running").digest(), running);
    let patch = serde_json::json!({ "spec": { "value": 7 } });
    api.patch("swap-0", &PatchParams::default(), &Patch::Merge(&patch)).await?;
    all_settled(&api, 5, "v1", |v| v + 1).await?;

    // Other settings: a new controller, on the same watch, reconciling every Swap with v2.
    let watches = host.clusters().local().started();
    let overrides = Overrides { max_concurrent_reconciles: Some(2), ..Overrides::default() };
    let installed = host.install("test", &v2, std::fs::read(&v2)?, Some(overrides)).await?;
    assert_eq!(installed.change, Change::Restarted);
    all_settled(&api, 5, "v2", |v| v * 2).await?;
    assert_eq!(host.clusters().local().started(), watches, "the new controller shares the running watch");

    // Removed: its watch is released.
    assert!(host.stop("fixture-swap").await);
    assert_eq!(host.plugins(), Vec::<String>::new());
    assert_eq!(host.clusters().local().active(), 0, "no watch is left running");
    Ok(())
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_swap_midway_through_churn_loses_no_change_and_never_overlaps_reconciles() -> anyhow::Result<()> {
    let overlaps = Arc::new(Overlaps::default());
    tracing::subscriber::set_global_default(tracing_subscriber::registry().with(Capture(overlaps.clone())))?;
    let client = client().await?;
    apply_file(&client, &workspace_root().join("plugins/fixtures/swap/crd.yaml"), None).await?;
    let ns = namespace(&client, "hot-reload").await?;
    let host = host(&client, &ns)?;
    let (v1, v2) = (plugin("fixture-swap"), plugin("fixture-swap-v2"));
    let v2_bytes = std::fs::read(&v2)?;
    let installed = host.install("test", &v1, std::fs::read(&v1)?, None).await?;
    assert_eq!(installed.change, Change::Started);

    let api = swaps(&client, &ns);
    create_swaps(&api, OBJECTS).await?;
    all_settled(&api, OBJECTS, "v1", |v| v + 1).await?;

    // Churn: one spec change every 10 ms, round robin, each with a new value; v2 comes in
    // halfway, while changes keep arriving.
    let mut ticks = tokio::time::interval(Duration::from_secs(1) / CHANGES_PER_SECOND as u32);
    let mut changes = tokio::task::JoinSet::new();
    let total = CHANGES_PER_SECOND * CHURN.as_secs();
    let mut swapped = None;
    let started = std::time::Instant::now();
    for n in 0..total {
        ticks.tick().await;
        if n == total / 2 {
            let (host, v2, bytes) = (host.clone(), v2.clone(), v2_bytes.clone());
            swapped = Some(tokio::spawn(async move { host.install("test", &v2, bytes, None).await }));
        }
        let (api, name) = (api.clone(), format!("swap-{}", n as usize % OBJECTS));
        changes.spawn(async move {
            let patch = serde_json::json!({ "spec": { "value": n + 1 } });
            api.patch(&name, &PatchParams::default(), &Patch::Merge(&patch)).await
        });
        while let Some(done) = changes.try_join_next() {
            done??;
        }
    }
    while let Some(done) = changes.join_next().await {
        done??;
    }
    let churned = started.elapsed();
    let installed = swapped.expect("the swap was started").await??;
    assert_eq!(installed.change, Change::Swapped, "same configuration: swapped in place");

    all_settled(&api, OBJECTS, "v2", |v| v * 2).await?;
    let (begun, overlapping) = (overlaps.begun.load(Ordering::SeqCst), overlaps.overlapping.load(Ordering::SeqCst));
    assert!(begun > OBJECTS as u64 * 2, "the capture saw the reconciles ({begun})");
    assert_eq!(overlapping, 0, "no Swap was reconciled by two calls at once ({begun} reconciles)");
    eprintln!("{total} spec changes in {churned:?}; {begun} reconciles, none overlapping; all settled on v2");
    host.stop_all().await;
    Ok(())
}

#[test]
fn the_overlap_detector_counts_a_begin_during_a_run_of_the_same_object() {
    let overlaps = Overlaps::default();
    for line in ["swap begin a/x", "swap begin a/y", "swap end a/x", "swap begin a/x", "swap begin a/y", "other"] {
        overlaps.line(line);
    }
    assert_eq!(overlaps.begun.load(Ordering::SeqCst), 4);
    assert_eq!(overlaps.overlapping.load(Ordering::SeqCst), 1, "a/y began twice without ending");
}
