//! Part `cache`: heap memory per cached object. `BENCH_CACHED` ConfigMaps (default 10,000) made as
//! `kubectl apply` makes them (about 1 KB of data, the `last-applied-configuration` annotation
//! holding a second copy, kubectl's managed fields) are listed into each kind of cache in turn,
//! and the heap the cache holds once synced is divided by the number of objects:
//! - a kube-rs reflector store of typed `ConfigMap`s, as a native controller caches them;
//! - a reflector store of `DynamicObject`s as the API server sends them (the host before trimming);
//! - the host's cache (`wasmop::informer::watch`), which trims objects as they enter it;
//! - the host's cache with a projection of one of the eight data keys (`data.key-0`);
//! - the host's cache of a metadata-only watch (an empty projection);
//! - the host's bounded cache with a pool of [`BOUNDED_BUDGET`] bytes: every key and version,
//!   and the warm objects within the budget.
//!
//! The heap is counted by the bench's global allocator (`cap`), so the figures are bytes the
//! process holds, not resident pages.

use std::time::Instant;

use futures::{Stream, StreamExt};
use k8s_openapi::api::core::v1::ConfigMap;
use kube::Client;
use kube::api::{Api, ApiResource, DynamicObject, PostParams};
use kube::runtime::reflector::{self, store::Writer};
use kube::runtime::watcher;
use serde_json::json;
use wasmop::informer::{Budget, Pool, PoolMetrics, Shape};

/// The heap, counted, for part `cache`.
#[global_allocator]
static ALLOCATOR: cap::Cap<std::alloc::System> = cap::Cap::new(std::alloc::System, usize::MAX);

/// The pool of the bounded cache measured.
const BOUNDED_BUDGET: u64 = 1 << 20;

/// One kind of cache and what it held per object.
pub struct Measured {
    /// What was measured.
    pub cache: &'static str,
    /// Heap bytes per cached object.
    pub bytes_per_object: f64,
    /// Objects the cache held.
    pub objects: usize,
}

fn config_map(name: &str) -> serde_json::Value {
    let data: serde_json::Map<String, serde_json::Value> =
        (0..8).map(|i| (format!("key-{i}"), json!(format!("{i}-{}", "v".repeat(120))))).collect();
    let applied = json!({ "apiVersion": "v1", "kind": "ConfigMap", "metadata": { "name": name }, "data": data });
    json!({
        "apiVersion": "v1", "kind": "ConfigMap",
        "metadata": {
            "name": name,
            "labels": { "app": "bench-cache" },
            "annotations": { wasmop::informer::LAST_APPLIED: applied.to_string() },
        },
        "data": data,
    })
}

/// Creates `n` ConfigMaps in `ns`, [`super::load::WRITES_IN_FLIGHT`] at a time, with kubectl's field
/// manager.
async fn create(client: &Client, ns: &str, n: usize) -> anyhow::Result<()> {
    let api: Api<DynamicObject> = Api::namespaced_with(client.clone(), ns, &ApiResource::erase::<ConfigMap>(&()));
    let params = PostParams { field_manager: Some("kubectl-client-side-apply".into()), ..PostParams::default() };
    let created = futures::stream::iter(0..n)
        .map(|i| {
            let (api, params) = (api.clone(), params.clone());
            async move {
                let object: DynamicObject = serde_json::from_value(config_map(&format!("cm-{i}")))?;
                api.create(&params, &object).await?;
                anyhow::Ok(())
            }
        })
        .buffer_unordered(super::load::WRITES_IN_FLIGHT);
    created.collect::<Vec<_>>().await.into_iter().collect()
}

/// Drives `stream` until its first list has ended.
async fn until_listed<K, E: std::fmt::Debug>(stream: impl Stream<Item = Result<watcher::Event<K>, E>>) {
    let mut stream = std::pin::pin!(stream);
    while let Some(event) = stream.next().await {
        if matches!(event, Ok(watcher::Event::InitDone)) {
            return;
        }
    }
}

/// The heap `fill` leaves held by the cache it returns, per object.
async fn measure<S, F>(cache: &'static str, objects: usize, fill: F) -> Measured
where
    F: std::future::Future<Output = S>,
{
    let before = ALLOCATOR.allocated();
    let held = fill.await;
    let after = ALLOCATOR.allocated();
    drop(held);
    let bytes_per_object = after.saturating_sub(before) as f64 / objects as f64;
    Measured { cache, bytes_per_object, objects }
}

/// Runs the part with `n` ConfigMaps; returns its JSON and markdown.
pub async fn cache_memory(client: &Client, n: usize) -> anyhow::Result<(serde_json::Value, String)> {
    let ns = wasmop_tests::namespace(client, "bench-cache").await?;
    let started = Instant::now();
    create(client, &ns, n).await?;
    println!("created in {:.1?}", started.elapsed());
    let resource = ApiResource::erase::<ConfigMap>(&());
    let typed = measure("kube-rs reflector, typed ConfigMap", n, async {
        let writer: Writer<ConfigMap> = Writer::default();
        let store = writer.as_reader();
        until_listed(reflector::reflector(writer, watcher(Api::namespaced(client.clone(), &ns), Default::default())))
            .await;
        store
    })
    .await;
    let untrimmed = measure("DynamicObject as sent (untrimmed)", n, async {
        let writer = Writer::new(resource.clone());
        let store = writer.as_reader();
        let api: Api<DynamicObject> = Api::namespaced_with(client.clone(), &ns, &resource);
        until_listed(reflector::reflector(writer, watcher(api, Default::default()))).await;
        store
    })
    .await;
    let shaped = |projection: Option<&[&str]>| Shape {
        projection: projection.map(|paths| paths.iter().map(|p| p.to_string()).collect()),
        ..Shape::default()
    };
    let mut measured = vec![typed, untrimmed];
    for (name, projection) in [
        ("wasmop's cache (trimmed)", None),
        ("wasmop's cache, projected to data.key-0", Some(&["data.key-0"][..])),
        ("wasmop's cache, metadata only", Some(&[][..])),
    ] {
        let shape = shaped(projection);
        let m = measure(name, n, async {
            let (store, stream) =
                wasmop::informer::watch(client.clone(), &resource, Some(&ns), Default::default(), &shape);
            until_listed(stream).await;
            store
        })
        .await;
        // How the bounded caches' budgets count the same objects.
        let (store, stream) = wasmop::informer::watch(client.clone(), &resource, Some(&ns), Default::default(), &shape);
        until_listed(stream).await;
        let weights: u64 = store.state().iter().map(|o| u64::from(wasmop::informer::weight(o))).sum();
        let per_object = weights as f64 / n as f64;
        println!("{name}: weight() counts {per_object:.0} bytes per object, the heap {:.0}", m.bytes_per_object);
        measured.push(m);
    }
    let bounded = measure("wasmop's bounded cache, 1 MiB pool", n, async {
        let budget = Budget { bytes: BOUNDED_BUDGET, idle: None };
        let shape = Shape { pool: Some(Pool::new("bench", budget, PoolMetrics::default())), ..Shape::default() };
        let pool = shape.pool.clone().expect("bounded");
        let (store, stream) =
            wasmop::informer::watch_bounded(client.clone(), &resource, Some(&ns), Default::default(), &shape, &pool);
        let mut stream = std::pin::pin!(stream);
        while let Some(event) = stream.next().await {
            let Ok(event) = event else { continue };
            let done = matches!(event, watcher::Event::InitDone);
            store.apply(&event);
            if done {
                break;
            }
        }
        println!("bounded pool: {} of {BOUNDED_BUDGET} bytes held", pool.bytes());
        store
    })
    .await;
    measured.push(bounded);
    let mut md = format!(
        "## Heap per cached object\n\n{n} ConfigMaps made as `kubectl apply` makes them (about 1 KB of data, the last-applied annotation, kubectl's managed fields):\n\n| cache | bytes per object | ratio to the kube-rs reflector |\n|---|---|---|\n"
    );
    for m in &measured {
        let ratio = m.bytes_per_object / measured[0].bytes_per_object;
        md.push_str(&format!("| {} | {:.0} | {ratio:.2}x |\n", m.cache, m.bytes_per_object));
    }
    println!("{md}");
    let json = measured
        .iter()
        .map(|m| json!({ "cache": m.cache, "bytesPerObject": m.bytes_per_object, "objects": m.objects }))
        .collect();
    Ok((serde_json::Value::Array(json), md))
}
