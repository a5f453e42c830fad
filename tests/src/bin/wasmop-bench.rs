//! `make bench`: wasmop against a native kube-rs controller, in the same run, on the same
//! control plane.
//!
//! 1. Per call: the webpage plugin's `reconcile` in a fresh sandbox (what the host does for
//!    every reconcile) against the same work done natively (parse the object, build the status,
//!    serialize it).
//! 2. End to end: N WebPages in one namespace reconciled to Ready by the wasmop host, and N in
//!    another by a native `kube::runtime::Controller` doing the same writes (status patch and
//!    Event, skipping objects already Ready for their generation); both with the same
//!    concurrency, timed from start until every object is Ready.
//!
//! Uses `WASMOP_TEST_KUBECONFIG` when set, else starts a local control plane. `BENCH_OBJECTS`
//! sets N (default 200), `BENCH_CALLS` the number of calls of part 1 (default 2000).

use std::sync::Arc;
use std::time::{Duration, Instant};

use futures::StreamExt;
use kube::api::{Api, ApiResource, DynamicObject, GroupVersionKind, ListParams, Patch, PatchParams, PostParams};
use kube::runtime::controller::{Action, Controller};
use kube::runtime::events::{Event, EventType, Recorder, Reporter};
use kube::runtime::watcher;
use kube::{Client, Resource, ResourceExt};
use serde_json::json;
use wasmop::runtime::bindings::wasmop::plugin::types::ReconcileRequest;
use wasmop::runtime::{CacheReader, Limits};
use wasmop_tests::{EmptyCache, RunningHost, apply_file, client, namespace, plugin, runtime, workspace_root};

const CONCURRENCY: usize = 4;

fn env_number(name: &str, default: usize) -> usize {
    std::env::var(name).ok().and_then(|v| v.parse().ok()).unwrap_or(default)
}

fn webpage_json(name: &str, generation: i64) -> serde_json::Value {
    json!({
        "apiVersion": "sample.wasmop.dev/v1", "kind": "WebPage",
        "metadata": { "name": name, "namespace": "bench", "generation": generation, "uid": "0b5e8c3c-2f1e-4bba-9a51-0c8f4f4f5f10",
                      "resourceVersion": "12345", "labels": { "app": "bench" } },
        "spec": { "html": "<html><body>".to_string() + &"<p>wasmop benchmark paragraph</p>".repeat(50) + "</body></html>" }
    })
}

/// The status the webpage plugin computes, computed natively.
fn native_status(object: &serde_json::Value) -> serde_json::Value {
    let generation = object["metadata"]["generation"].as_i64();
    json!({
        "observedGeneration": generation,
        "conditions": [{
            "type": "Ready", "status": "True", "reason": "Reconciled", "message": "the WebPage is reconciled",
            "observedGeneration": generation, "lastTransitionTime": "2026-01-01T00:00:00Z"
        }]
    })
}

fn percentile(sorted: &[Duration], p: f64) -> Duration {
    sorted[((sorted.len() - 1) as f64 * p).round() as usize]
}

fn per_call(calls: usize) -> anyhow::Result<()> {
    let module = runtime(Limits::default())?.load(&plugin("webpage"))?;
    let object = webpage_json("page", 3);
    let request = ReconcileRequest { object: object.to_string(), attempt: 0, last_attempt: false };
    let cache: Arc<dyn CacheReader> = Arc::new(EmptyCache);
    for _ in 0..50 {
        module.reconcile(cache.clone(), &request)?.map_err(|e| anyhow::anyhow!("{e:?}"))?;
    }
    let mut wasm = Vec::with_capacity(calls);
    for _ in 0..calls {
        let start = Instant::now();
        let outcome = module.reconcile(cache.clone(), &request)?.map_err(|e| anyhow::anyhow!("{e:?}"))?;
        wasm.push(start.elapsed());
        std::hint::black_box(outcome);
    }
    let mut native = Vec::with_capacity(calls);
    for _ in 0..calls {
        let start = Instant::now();
        let parsed: serde_json::Value = serde_json::from_str(&request.object)?;
        let status = serde_json::to_string(&native_status(&parsed))?;
        native.push(start.elapsed());
        std::hint::black_box(status);
    }
    wasm.sort();
    native.sort();
    let mean = |v: &[Duration]| v.iter().sum::<Duration>() / v.len() as u32;
    println!("per call ({} calls, {} B object):", calls, request.object.len());
    for (name, v) in [("wasmop sandbox", &wasm), ("native", &native)] {
        println!(
            "  {name:<15} mean {:>8.1?}  p50 {:>8.1?}  p99 {:>8.1?}",
            mean(v),
            percentile(v, 0.5),
            percentile(v, 0.99)
        );
    }
    println!("  ratio wasmop/native (mean): {:.1}x", mean(&wasm).as_secs_f64() / mean(&native).as_secs_f64());
    Ok(())
}

fn ready(object: &DynamicObject) -> bool {
    let status = &object.data["status"];
    status["observedGeneration"].as_i64() == object.metadata.generation
        && status["conditions"]
            .as_array()
            .is_some_and(|cs| cs.iter().any(|c| c["type"] == "Ready" && c["status"] == "True"))
}

async fn create_pages(api: &Api<DynamicObject>, n: usize) -> anyhow::Result<()> {
    let pages = futures::stream::iter(0..n).map(|i| async move {
        let mut page = webpage_json(&format!("page-{i}"), 1);
        page["metadata"] = json!({ "name": format!("page-{i}") });
        let object: DynamicObject = serde_json::from_value(page)?;
        api.create(&PostParams::default(), &object).await?;
        anyhow::Ok(())
    });
    let results: Vec<_> = pages.buffer_unordered(16).collect().await;
    results.into_iter().collect()
}

async fn until_all_ready(api: &Api<DynamicObject>, n: usize, started: Instant) -> anyhow::Result<Duration> {
    loop {
        let list = api.list(&ListParams::default()).await?;
        if list.items.iter().filter(|o| ready(o)).count() == n {
            return Ok(started.elapsed());
        }
        if started.elapsed() > Duration::from_secs(600) {
            anyhow::bail!("not all {n} objects became Ready within 10 minutes");
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
}

/// What the native controller needs: the API and an event recorder, like the host's writer.
struct Native {
    api: Api<DynamicObject>,
    recorder: Recorder,
    resource: ApiResource,
}

async fn native_reconcile(object: Arc<DynamicObject>, native: Arc<Native>) -> Result<Action, kube::Error> {
    // What a careful kube-rs controller does without a generation predicate: skip objects whose
    // status already reflects their generation (its own status patch triggers it again).
    if ready(&object) {
        return Ok(Action::requeue(Duration::from_secs(36000)));
    }
    let value = serde_json::to_value(&*object).expect("objects serialize");
    let patch = json!({ "status": native_status(&value) });
    native.api.patch_status(&object.name_any(), &PatchParams::default(), &Patch::Merge(&patch)).await?;
    // The same Event the webpage plugin asks the host to record when a page becomes Ready.
    let event = Event {
        type_: EventType::Normal,
        reason: "Ready".into(),
        note: Some("the WebPage is ready".into()),
        action: "Reconcile".into(),
        secondary: None,
    };
    native.recorder.publish(&event, &object.object_ref(&native.resource)).await?;
    Ok(Action::requeue(Duration::from_secs(36000)))
}

async fn end_to_end(client: &Client, n: usize) -> anyhow::Result<()> {
    apply_file(client, &workspace_root().join("plugins/webpage/crd.yaml"), None).await?;
    let gvk = GroupVersionKind::gvk("sample.wasmop.dev", "v1", "WebPage");
    let resource = ApiResource::from_gvk_with_plural(&gvk, "webpages");

    let ns = namespace(client, "bench-wasmop").await?;
    let api: Api<DynamicObject> = Api::namespaced_with(client.clone(), &ns, &resource);
    create_pages(&api, n).await?;
    let yaml = format!("plugins:\n  webpage:\n    maxConcurrentReconciles: {CONCURRENCY}\n");
    let started = Instant::now();
    let host = RunningHost::start_with_yaml(client, &ns, &["webpage"], &yaml)?;
    let wasmop = until_all_ready(&api, n, started).await?;
    host.stop().await;

    let ns = namespace(client, "bench-native").await?;
    let api: Api<DynamicObject> = Api::namespaced_with(client.clone(), &ns, &resource);
    create_pages(&api, n).await?;
    let started = Instant::now();
    let recorder = Recorder::new(client.clone(), Reporter { controller: "native-bench".into(), instance: None });
    let shared = Arc::new(Native { api: api.clone(), recorder, resource: resource.clone() });
    let controller = Controller::new_with(api.clone(), watcher::Config::default(), resource.clone())
        .with_config(kube::runtime::controller::Config::default().concurrency(CONCURRENCY as u16))
        .run(native_reconcile, |_, _, _| Action::requeue(Duration::from_secs(1)), shared)
        .for_each(|_| async {});
    let native = tokio::select! {
        elapsed = until_all_ready(&api, n, started) => elapsed?,
        _ = controller => anyhow::bail!("the native controller stopped"),
    };
    println!("end to end ({n} WebPages from start to all Ready, concurrency {CONCURRENCY}):");
    println!("  wasmop host       {wasmop:>8.2?}  ({:.0} objects/s)", n as f64 / wasmop.as_secs_f64());
    println!("  native kube-rs    {native:>8.2?}  ({:.0} objects/s)", n as f64 / native.as_secs_f64());
    println!("  ratio wasmop/native: {:.2}x", wasmop.as_secs_f64() / native.as_secs_f64());
    Ok(())
}

#[tokio::main]
async fn main() -> anyhow::Result<()> {
    per_call(env_number("BENCH_CALLS", 2000))?;
    let client = client().await?;
    end_to_end(&client, env_number("BENCH_OBJECTS", 200)).await
}
