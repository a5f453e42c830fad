//! `make bench`: wasmop against a native kube-rs controller, in the same run, on the same
//! control plane.
//!
//! 1. Per call: the webpage plugin's `reconcile` in a fresh sandbox (what the host does for
//!    every reconcile) against the same work done natively (parse the object, build the status,
//!    serialize it).
//! 2. End to end: N WebPages in one namespace reconciled to Ready by the wasmop host, and N in
//!    another by a native `kube::runtime::Controller` doing the same writes (the finalizer, the
//!    ConfigMap, Deployment and Service by server-side apply with an owner reference, the status
//!    patch and the Event, skipping objects already Ready for their generation); both with the
//!    same concurrency, timed from start until every object is Ready.
//! 3. Secondary-triggered reconciles: M Links (the `fixture-link` plugin's kind), each the
//!    controller owner of one ConfigMap, reconciled by the wasmop host in one namespace and by a
//!    native `Controller` in another, both with the same concurrency and the same work (list the
//!    Link's ConfigMaps from a cache, merge-patch `.status` with `seen` and the counters). Once
//!    every Link has seen its ConfigMap, every ConfigMap is patched (16 patches in flight), timed
//!    from the first patch until every Link shows a reconcile that saw its ConfigMap's new
//!    resourceVersion.
//! 4. Heap per cached object: see [`cache`]; written to `target/bench/cache.json` too.
//!
//! Uses `WASMOP_TEST_KUBECONFIG` when set, else starts a local control plane. `BENCH_OBJECTS`
//! sets N (default 200), `BENCH_SECONDARIES` M (default 100), `BENCH_CALLS` the number of calls
//! of part 1 (default 2000), `BENCH_CACHED` the ConfigMaps of part 4 (default 10,000), and
//! `BENCH_PARTS` which parts run (`call,end-to-end,secondaries,cache`; default all).

use std::collections::BTreeMap;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

use futures::StreamExt;
use k8s_openapi::api::core::v1::ConfigMap;
use kube::api::{Api, ApiResource, DynamicObject, GroupVersionKind, ListParams, Patch, PatchParams, PostParams};
use kube::runtime::controller::{Action, Controller};
use kube::runtime::events::{Event, EventType, Recorder, Reporter};
use kube::runtime::reflector::{self, ObjectRef, Store};
use kube::runtime::watcher;
use kube::{Client, Resource, ResourceExt};
use serde_json::json;
use wasmop::runtime::bindings::wasmop::plugin::types::ReconcileRequest;
use wasmop::runtime::{CacheReader, Limits};
use wasmop_tests::links::{self, Links, Secondary, Seen, seen_entry, touch_config_map};
use wasmop_tests::{EmptyCache, RunningHost, apply_file, client, namespace, plugin, runtime, workspace_root};

mod cache;

const CONCURRENCY: usize = 4;
/// Writes to the API server in flight when creating or changing the objects of parts 2 and 3.
const WRITES_IN_FLIGHT: usize = 16;

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
    let request =
        ReconcileRequest { object: object.to_string(), attempt: 0, last_attempt: false, dependents: Vec::new() };
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
    let results: Vec<_> = pages.buffer_unordered(WRITES_IN_FLIGHT).collect().await;
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

/// What the native controller needs: the APIs and an event recorder, like the host's writer.
struct Native {
    api: Api<DynamicObject>,
    config_maps: Api<DynamicObject>,
    deployments: Api<DynamicObject>,
    services: Api<DynamicObject>,
    recorder: Recorder,
    resource: ApiResource,
}

/// The controller owner reference to `page`.
fn owner(page: &DynamicObject) -> serde_json::Value {
    json!([{ "apiVersion": "sample.wasmop.dev/v1", "kind": "WebPage", "name": page.name_any(),
             "uid": page.uid().unwrap_or_default(), "controller": true, "blockOwnerDeletion": true }])
}

/// The webpage plugin's ConfigMap, built natively.
fn native_config_map(page: &DynamicObject) -> serde_json::Value {
    json!({ "apiVersion": "v1", "kind": "ConfigMap",
            "metadata": { "name": format!("{}-html", page.name_any()), "ownerReferences": owner(page) },
            "data": { "index.html": page.data["spec"]["html"] } })
}

/// The webpage plugin's Deployment, built natively.
fn native_deployment(page: &DynamicObject) -> serde_json::Value {
    let name = page.name_any();
    let labels = json!({ "app.kubernetes.io/name": "webpage", "app.kubernetes.io/instance": name });
    json!({ "apiVersion": "apps/v1", "kind": "Deployment",
            "metadata": { "name": name, "labels": labels, "ownerReferences": owner(page) },
            "spec": { "replicas": 1, "selector": { "matchLabels": labels },
                      "template": { "metadata": { "labels": labels },
                                    "spec": { "containers": [{ "name": "nginx", "image": "nginx:1.27-alpine",
                                                               "ports": [{ "name": "http", "containerPort": 80 }],
                                                               "volumeMounts": [{ "name": "html", "mountPath": "/usr/share/nginx/html" }] }],
                                              "volumes": [{ "name": "html", "configMap": { "name": format!("{name}-html") } }] } } } })
}

/// The webpage plugin's Service, built natively.
fn native_service(page: &DynamicObject) -> serde_json::Value {
    let name = page.name_any();
    json!({ "apiVersion": "v1", "kind": "Service",
            "metadata": { "name": name, "ownerReferences": owner(page) },
            "spec": { "selector": { "app.kubernetes.io/name": "webpage", "app.kubernetes.io/instance": name },
                      "ports": [{ "name": "http", "port": 80, "targetPort": "http" }] } })
}

async fn native_reconcile(object: Arc<DynamicObject>, native: Arc<Native>) -> Result<Action, kube::Error> {
    // What a careful kube-rs controller does without a generation predicate: skip objects whose
    // status already reflects their generation (its own status patch triggers it again).
    if ready(&object) {
        return Ok(Action::requeue(Duration::from_secs(36000)));
    }
    // What the webpage plugin has the host do: the finalizer, then the three dependents with
    // server-side apply and a controller owner reference, then status and Event.
    let name = object.name_any();
    if !object.finalizers().iter().any(|f| f == "native-bench/finalizer") {
        let patch = json!({ "metadata": { "finalizers": ["native-bench/finalizer"] } });
        native.api.patch(&name, &PatchParams::default(), &Patch::Merge(&patch)).await?;
    }
    let apply = PatchParams::apply("native-bench").force();
    for (api, dependent) in [
        (&native.config_maps, native_config_map(&object)),
        (&native.deployments, native_deployment(&object)),
        (&native.services, native_service(&object)),
    ] {
        let dependent_name = dependent["metadata"]["name"].as_str().unwrap_or_default().to_string();
        api.patch(&dependent_name, &apply, &Patch::Apply(&dependent)).await?;
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

/// Retries a failed native reconcile after a second, saying why it failed.
fn native_error_policy(page: Arc<DynamicObject>, err: &kube::Error, _: Arc<Native>) -> Action {
    eprintln!("native reconcile of {} failed: {err}", page.name_any());
    Action::requeue(Duration::from_secs(1))
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
    let core = |kind: &str, plural: &str, group: &str| {
        let gvk = GroupVersionKind::gvk(group, "v1", kind);
        Api::<DynamicObject>::namespaced_with(client.clone(), &ns, &ApiResource::from_gvk_with_plural(&gvk, plural))
    };
    let shared = Arc::new(Native {
        api: api.clone(),
        config_maps: core("ConfigMap", "configmaps", ""),
        deployments: core("Deployment", "deployments", "apps"),
        services: core("Service", "services", ""),
        recorder,
        resource: resource.clone(),
    });
    let controller = Controller::new_with(api.clone(), watcher::Config::default(), resource.clone())
        .with_config(kube::runtime::controller::Config::default().concurrency(CONCURRENCY as u16))
        .run(native_reconcile, native_error_policy, shared)
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

/// Creates the Links `link-0`... and, owned by each, the ConfigMap of the same name labelled for
/// `fixture-link`'s owner-reference watch, with `data.v = "0"`; returns how a reconcile that
/// read it reports each ConfigMap, by Link.
async fn create_owned_config_maps(client: &Client, links: &Links, n: usize) -> anyhow::Result<BTreeMap<String, Seen>> {
    let ns = links.api().namespace().expect("Links are namespaced").to_string();
    let created = futures::stream::iter(0..n).map(|i| {
        let ns = ns.clone();
        async move {
            let name = format!("link-{i}");
            let link = links.create(&name, "link", &[]).await?;
            let mut cm = Secondary::config_map(&ns, &name, ("wasmop.dev/link", "owned"));
            cm.owner = Some(&link);
            cm.data = BTreeMap::from([("v", "0")]);
            let entry = seen_entry(&cm.apply(client).await?);
            anyhow::Ok((name, entry))
        }
    });
    let results: Vec<_> = created.buffer_unordered(WRITES_IN_FLIGHT).collect().await;
    results.into_iter().collect()
}

/// The timed part of part 3: patches every ConfigMap (`data.v = "1"`) and waits until every
/// Link has seen its new version.
async fn change_owned_config_maps(client: &Client, links: &Links, n: usize) -> anyhow::Result<Duration> {
    let ns = links.api().namespace().expect("Links are namespaced");
    let started = Instant::now();
    let patched = futures::stream::iter(0..n).map(|i| async move {
        let name = format!("link-{i}");
        let entry = seen_entry(&touch_config_map(client, ns, &name, "v", "1").await?);
        anyhow::Ok((name, entry))
    });
    let results: Vec<_> = patched.buffer_unordered(WRITES_IN_FLIGHT).collect().await;
    let expected = results.into_iter().collect::<anyhow::Result<_>>()?;
    links.all_saw(&expected, Duration::from_secs(600)).await?;
    Ok(started.elapsed())
}

/// What the native Link controller needs: the Links' API and its cache of owned ConfigMaps.
struct NativeLinks {
    api: Api<DynamicObject>,
    config_maps: Store<ConfigMap>,
}

/// The UID of the controller owner of `object`, if any.
fn controller_uid(object: &impl Resource) -> Option<&str> {
    let owner = object.meta().owner_references.iter().flatten().find(|o| o.controller == Some(true));
    owner.map(|o| o.uid.as_str())
}

/// The `fixture-link` plugin's reconcile, natively: the Link's ConfigMaps from the cache, and
/// the same status merge patch. Its own status write triggers the controller again (kube-rs has
/// no generation predicate on the stable API); like the careful controller of part 2 it skips
/// a Link whose status already holds what it would write, which the host's generation-aware
/// filter does before reconciling.
async fn native_link_reconcile(link: Arc<DynamicObject>, native: Arc<NativeLinks>) -> Result<Action, kube::Error> {
    let uid = link.uid();
    let owned = native.config_maps.state_filter(|cm| controller_uid(cm) == uid.as_deref());
    let mut seen: Vec<Seen> = owned
        .iter()
        .map(|cm| {
            (
                "ConfigMap".into(),
                cm.namespace().unwrap_or_default(),
                cm.name_any(),
                cm.resource_version().unwrap_or_default(),
            )
        })
        .collect();
    seen.sort();
    let seen: Vec<_> = seen
        .into_iter()
        .map(|(kind, namespace, name, rv)| json!({ "kind": kind, "namespace": namespace, "name": name, "resourceVersion": rv }))
        .collect();
    let status = &link.data["status"];
    if status["observedGeneration"].as_i64() == link.metadata.generation && status["seen"] == json!(seen) {
        return Ok(Action::await_change());
    }
    let now = SystemTime::now().duration_since(UNIX_EPOCH).unwrap_or_default();
    let patch = json!({ "status": {
        "observedGeneration": link.metadata.generation,
        "reconciles": status["reconciles"].as_i64().unwrap_or(0) + 1,
        "lastReconcileNanos": u64::try_from(now.as_nanos()).unwrap_or(u64::MAX),
        "seen": seen,
    }});
    native.api.patch_status(&link.name_any(), &PatchParams::default(), &Patch::Merge(&patch)).await?;
    Ok(Action::await_change())
}

/// Part 3: secondary-triggered reconciles.
async fn secondaries(client: &Client, n: usize) -> anyhow::Result<()> {
    let setup = Duration::from_secs(300);
    let links = Links::new(client, &namespace(client, "bench-link-wasmop").await?).await?;
    let ns = links.api().namespace().expect("Links are namespaced").to_string();
    let expected = create_owned_config_maps(client, &links, n).await?;
    let yaml = format!("plugins:\n  fixture-link:\n    maxConcurrentReconciles: {CONCURRENCY}\n");
    let host = RunningHost::start_with_yaml(client, &ns, &["fixture-link"], &yaml)?;
    links.all_saw(&expected, setup).await?;
    let wasmop = change_owned_config_maps(client, &links, n).await?;
    host.stop().await;

    let links = Links::new(client, &namespace(client, "bench-link-native").await?).await?;
    let ns = links.api().namespace().expect("Links are namespaced").to_string();
    let expected = create_owned_config_maps(client, &links, n).await?;
    // kube 5's `Controller::owns` watches metadata only and keeps no cache; a reflector of its
    // own would be a second watch whose cache may lag the trigger (the reconcile would then see
    // the old ConfigMap, write nothing new and never be triggered again), and sharing one
    // reflector with the trigger (`owns_shared_stream`) needs the `unstable-runtime` features.
    // So the one ConfigMap watch is `watches_with`, whose mapper updates the reflector store
    // before it maps the ConfigMap to its controller owner, as the host's cache does. (The mapper
    // sees objects, not events: a deleted ConfigMap would stay in the store; the bench deletes
    // none.)
    let (config_maps, writer) = reflector::store::<ConfigMap>();
    let writer = Mutex::new(writer);
    let resource = links::resource();
    let owner_kind = resource.clone();
    let to_owner = move |cm: ConfigMap| {
        writer.lock().expect("the store lock").apply_watcher_event(&watcher::Event::Apply(cm.clone()));
        let ns = cm.namespace().unwrap_or_default();
        let owner = cm.owner_references().iter().find(|o| o.controller == Some(true) && o.kind == owner_kind.kind);
        owner.map(|o| ObjectRef::new_with(&o.name, owner_kind.clone()).within(&ns))
    };
    let shared = Arc::new(NativeLinks { api: links.api().clone(), config_maps });
    let controller = Controller::new_with(
        links.api().clone(),
        watcher::Config::default().labels("wasmop.dev/fixture=link"),
        resource,
    )
    .watches_with(
        Api::<ConfigMap>::namespaced(client.clone(), &ns),
        (),
        watcher::Config::default().labels("wasmop.dev/link=owned"),
        to_owner,
    )
    .with_config(kube::runtime::controller::Config::default().concurrency(CONCURRENCY as u16))
    .run(native_link_reconcile, |_, _, _| Action::requeue(Duration::from_secs(1)), shared)
    .for_each(|_| async {});
    let controller = tokio::spawn(controller);
    let native = async {
        links.all_saw(&expected, setup).await?;
        change_owned_config_maps(client, &links, n).await
    }
    .await;
    controller.abort();
    let native = native?;

    println!(
        "secondary-triggered reconciles ({n} Links, one owned ConfigMap each patched with {WRITES_IN_FLIGHT} \
         patches in flight, until every Link saw its new ConfigMap, concurrency {CONCURRENCY}):"
    );
    println!("  wasmop host       {wasmop:>8.2?}  ({:.0} objects/s)", n as f64 / wasmop.as_secs_f64());
    println!("  native kube-rs    {native:>8.2?}  ({:.0} objects/s)", n as f64 / native.as_secs_f64());
    println!("  ratio wasmop/native: {:.2}x", wasmop.as_secs_f64() / native.as_secs_f64());
    Ok(())
}

/// The heap, counted, for part 4.
#[global_allocator]
static ALLOCATOR: cap::Cap<std::alloc::System> = cap::Cap::new(std::alloc::System, usize::MAX);

/// Whether `BENCH_PARTS` (a comma-separated list of `call`, `end-to-end`, `secondaries`, `cache`;
/// default all) selects `part`.
fn selected(part: &str) -> bool {
    std::env::var("BENCH_PARTS").map_or(true, |parts| parts.split(',').any(|p| p.trim() == part))
}

#[tokio::main]
async fn main() -> anyhow::Result<()> {
    if selected("call") {
        per_call(env_number("BENCH_CALLS", 2000))?;
    }
    if !["end-to-end", "secondaries", "cache"].into_iter().any(selected) {
        return Ok(());
    }
    let client = client().await?;
    if selected("end-to-end") {
        end_to_end(&client, env_number("BENCH_OBJECTS", 200)).await?;
    }
    if selected("secondaries") {
        secondaries(&client, env_number("BENCH_SECONDARIES", 100)).await?;
    }
    if selected("cache") {
        let measured = cache::cache_memory(&client, env_number("BENCH_CACHED", 10_000)).await?;
        let report: Vec<_> = measured
            .iter()
            .map(|m| json!({ "cache": m.cache, "bytesPerObject": m.bytes_per_object, "objects": m.objects }))
            .collect();
        let dir = workspace_root().join("target/bench");
        std::fs::create_dir_all(&dir)?;
        std::fs::write(dir.join("cache.json"), serde_json::to_vec_pretty(&report)?)?;
    }
    Ok(())
}
