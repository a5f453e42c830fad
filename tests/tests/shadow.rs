//! Shadow rollouts against the real kube-apiserver: a `ReconcilerPlugin`'s `spec.candidate` runs
//! beside the live version (`fixture-swap` v1) on the same reconciles and is never applied.
//! A candidate that differs for some Swaps yields exactly those differences, counted, logged and
//! summed up on the resource's status, and no write; a candidate that is another plugin is
//! refused on the status; a candidate that panics or spins leaves the live version's reconciles
//! untouched; promoting a candidate under a burst of changes loses
//! none of them.
//!
//! Every test runs its own `ReconcilerPlugin` through a resource loader that sees every
//! `ReconcilerPlugin` of the cluster, so the tests of this file run one at a time.

use std::collections::{BTreeMap, BTreeSet};
use std::sync::{Arc, Mutex, OnceLock};
use std::time::Duration;

use k8s_openapi::api::core::v1::ConfigMap;
use kube::api::{Api, DeleteParams, DynamicObject, Patch, PatchParams, PostParams};
use kube::{Client, ResourceExt};
use sha2::{Digest, Sha256};
use tracing::field::{Field, Visit};
use tracing_subscriber::EnvFilter;
use tracing_subscriber::layer::{Context, Layer, SubscriberExt};
use wasmop::metrics::Metrics;
use wasmop::settings::HostConfig;
use wasmop_tests::swaps::{self, all_settled};
use wasmop_tests::{
    ResourceHost, apply_file, client, condition, module_map, namespace, plugin, settings, until, workspace_root,
};

const PLUGIN: &str = "fixture-swap";

/// One test at a time: each one's loader would run the others' resources.
static SERIAL: tokio::sync::Mutex<()> = tokio::sync::Mutex::const_new(());

/// The objects of the host's "the candidate differs" log lines, in order.
#[derive(Default)]
struct Differences(Mutex<Vec<String>>);

/// The log lines of this process's host that report a difference, captured once per process;
/// the host's log also goes to the test's output (`WASMOP_TEST_LOG`).
fn logged() -> Arc<Differences> {
    static GLOBAL: OnceLock<Arc<Differences>> = OnceLock::new();
    GLOBAL
        .get_or_init(|| {
            let differences = Arc::new(Differences::default());
            let filter = EnvFilter::try_from_env("WASMOP_TEST_LOG")
                .unwrap_or_else(|_| EnvFilter::new("warn,wasmop=info,kube_client::client::builder=off"));
            let log = tracing_subscriber::fmt::layer().with_test_writer().with_filter(filter);
            let subscriber = tracing_subscriber::registry().with(Capture(differences.clone())).with(log);
            tracing::subscriber::set_global_default(subscriber).expect("no other global tracing subscriber");
            differences
        })
        .clone()
}

struct Capture(Arc<Differences>);

/// An event's message and `object` field.
#[derive(Default)]
struct Fields {
    message: String,
    object: String,
}

impl Visit for Fields {
    fn record_debug(&mut self, field: &Field, value: &dyn std::fmt::Debug) {
        match field.name() {
            "message" => self.message = format!("{value:?}"),
            "object" => self.object = format!("{value:?}"),
            _ => {}
        }
    }
}

impl<S: tracing::Subscriber> Layer<S> for Capture {
    fn on_event(&self, event: &tracing::Event<'_>, _: Context<'_, S>) {
        if event.metadata().target() != "wasmop::shadow" {
            return;
        }
        let mut fields = Fields::default();
        event.record(&mut fields);
        if fields.message.starts_with("the candidate differs from the live version") {
            self.0.0.lock().expect("never poisoned").push(fields.object);
        }
    }
}

/// The ConfigMap `name` holding `bytes` as `swap.wasm`.
fn module_named(name: &str, bytes: &[u8]) -> ConfigMap {
    let mut map = module_map(bytes);
    map.metadata.name = Some(name.into());
    map
}

/// A `ReconcilerPlugin` running the module of ConfigMap `module` in `ns`, with the module of
/// ConfigMap `candidate` as its candidate, within `deadline_ms`.
fn resource(
    name: &str,
    ns: &str,
    module: &str,
    candidate: Option<&str>,
    deadline_ms: u64,
) -> anyhow::Result<DynamicObject> {
    let source = |map: &str| serde_json::json!({ "configMap": { "namespace": ns, "name": map, "key": "swap.wasm" } });
    Ok(serde_json::from_value(serde_json::json!({
        "apiVersion": "wasmop.dev/v1alpha1", "kind": "ReconcilerPlugin", "metadata": { "name": name },
        "spec": { "module": source(module), "candidate": candidate.map(source),
                  "overrides": { "namespace": ns, "limits": { "deadlineMs": deadline_ms } } }
    }))?)
}

fn digest(bytes: &[u8]) -> String {
    hex::encode(Sha256::digest(bytes))
}

/// Whether `resource` shadows the candidate `digest`.
fn shadowing(resource: &DynamicObject, digest: &str) -> bool {
    condition(resource, "CandidateReady").is_some_and(|c| c["status"] == "True")
        && resource.data["status"]["shadow"]["candidate"] == digest
}

/// What the test set up: the CRDs, a namespace, a loader on it and the ConfigMaps of `modules`
/// (ConfigMap name, plugin file).
struct Bed {
    client: Client,
    ns: String,
    metrics: Arc<Metrics>,
    loader: ResourceHost,
    resources: Api<DynamicObject>,
    maps: Api<ConfigMap>,
}

impl Bed {
    async fn up(test: &str, modules: &[(&str, &str)]) -> anyhow::Result<Self> {
        let client = client().await?;
        apply_file(&client, &workspace_root().join("host/crds/reconcilerplugin.yaml"), None).await?;
        apply_file(&client, &workspace_root().join("plugins/fixtures/swap/crd.yaml"), None).await?;
        let ns = namespace(&client, test).await?;
        let metrics = Metrics::new();
        let loader = ResourceHost::start(&client, settings(&ns, HostConfig::default()), metrics.clone())?;
        let maps: Api<ConfigMap> = Api::namespaced(client.clone(), &ns);
        for (map, file) in modules {
            maps.create(&PostParams::default(), &module_named(map, &std::fs::read(plugin(file))?)).await?;
        }
        let resources = Api::all_with(client.clone(), &wasmop::loader::resource::resource());
        Ok(Self { client, ns, metrics, loader, resources, maps })
    }

    /// Deletes the resource `name` (its plugin stops) and stops the loader.
    async fn down(self, name: &str) -> anyhow::Result<()> {
        self.resources.delete(name, &DeleteParams::default()).await?;
        until("the resource gone", async || Ok(self.resources.get_opt(name).await?), |r| r.is_none()).await?;
        assert!(self.loader.host.plugins().is_empty(), "the plugin stopped");
        assert!(self.loader.host.shadowed(PLUGIN).is_none(), "nothing of the candidate is left");
        self.loader.stop().await
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_candidate_that_differs_for_some_objects_counts_and_logs_exactly_those_and_writes_nothing()
-> anyhow::Result<()> {
    let _serial = SERIAL.lock().await;
    let logged = logged();
    let bed = Bed::up("shadow-differs", &[("live", "fixture-swap"), ("candidate", "fixture-swap-odd")]).await?;
    let name = format!("shadow-{}", bed.ns);
    bed.resources.create(&PostParams::default(), &resource(&name, &bed.ns, "live", Some("candidate"), 2000)?).await?;
    let candidate = digest(&std::fs::read(plugin("fixture-swap-odd"))?);
    until("the candidate shadowed", async || Ok(bed.resources.get(&name).await?), |r| shadowing(r, &candidate)).await?;

    // Ten Swaps: the candidate's result differs for swap-1, -3, -5, -7 and -9.
    const OBJECTS: usize = 10;
    let api = swaps::api(&bed.client, &bed.ns);
    swaps::create(&api, OBJECTS).await?;
    all_settled(&api, OBJECTS, "v1", |v| v + 1).await?;
    let shadow = bed.metrics.shadow();
    until("every reconcile compared", async || Ok(shadow.reconciles_of(PLUGIN)), |n| *n >= OBJECTS as u64).await?;

    // Exactly the odd ones, each once, as status differences; counted, logged and summed up.
    let odd: BTreeSet<String> = (1..OBJECTS).step_by(2).map(|i| format!("{}/swap-{i}", bed.ns)).collect();
    assert_eq!(shadow.reconciles_of(PLUGIN), OBJECTS as u64, "one reconcile per Swap, each compared");
    assert_eq!(shadow.differences_of(PLUGIN, "status"), odd.len() as u64);
    for kind in ["verdict", "desired", "events"] {
        assert_eq!(shadow.differences_of(PLUGIN, kind), 0, "no {kind} difference");
    }
    let lines: Vec<String> = logged.0.lock().expect("never poisoned").clone();
    let ours: Vec<&String> = lines.iter().filter(|o| o.starts_with(&format!("{}/", bed.ns))).collect();
    assert_eq!(ours.len(), odd.len(), "one log line per difference: {ours:?}");
    assert_eq!(ours.into_iter().cloned().collect::<BTreeSet<_>>(), odd);
    let summed = |r: &DynamicObject| {
        let shadow = &r.data["status"]["shadow"];
        shadow["compared"] == OBJECTS && shadow["differences"] == odd.len() && shadow["failures"] == 0
    };
    let r = until("the status sums the shadow runs up", async || Ok(bed.resources.get(&name).await?), summed).await?;
    let last = r.data["status"]["shadow"]["lastDifferences"].as_array().cloned().unwrap_or_default();
    assert_eq!(last.len(), 5, "{last:?}");
    for entry in &last {
        assert_eq!(entry["namespace"], bed.ns.as_str());
        assert!(odd.contains(&format!("{}/{}", bed.ns, entry["name"].as_str().unwrap_or(""))), "{entry}");
        assert_eq!(entry["kinds"], serde_json::json!(["status"]));
    }

    // Nothing of the candidate reached the API server: every Swap carries v1's result, written
    // once by the live version, and no field manager but the creator's and the host's.
    let before: BTreeMap<String, BTreeSet<String>> = api
        .list(&Default::default())
        .await?
        .items
        .iter()
        .map(|s| {
            let managers = s.managed_fields().iter().filter_map(|m| m.manager.clone()).collect();
            (s.name_any(), managers)
        })
        .collect();
    for swap in api.list(&Default::default()).await?.items {
        assert_eq!(swap.data["status"]["result"], 1, "{}: the live version's result", swap.name_any());
        assert!(swap.managed_fields().len() <= 2, "{}: {:?}", swap.name_any(), swap.managed_fields());
    }
    // A later change of each Swap is compared too, and still only the live version writes.
    let compared = shadow.reconciles_of(PLUGIN);
    for i in 0..OBJECTS {
        swaps::set_value(&api, &format!("swap-{i}"), 5).await?;
    }
    all_settled(&api, OBJECTS, "v1", |v| v + 1).await?;
    let target = compared + OBJECTS as u64;
    until("the changes compared", async || Ok(shadow.reconciles_of(PLUGIN)), |n| *n >= target).await?;
    assert_eq!(shadow.differences_of(PLUGIN, "status"), 2 * odd.len() as u64);
    for swap in api.list(&Default::default()).await?.items {
        let managers = &before[&swap.name_any()];
        let now: BTreeSet<String> = swap.managed_fields().iter().filter_map(|m| m.manager.clone()).collect();
        assert_eq!(&now, managers, "{}: the same field managers", swap.name_any());
        assert_eq!(swap.data["status"]["result"], 6, "{}: the live version's result", swap.name_any());
    }
    // Once the shadow runs are done, no Swap changes any more: the candidate wrote nothing.
    let settled: Vec<Option<String>> =
        api.list(&Default::default()).await?.items.iter().map(|s| s.resource_version()).collect();
    let checks = bed.loader.host.metrics().plugin_resource_checks(&name);
    until(
        "two more checks",
        async || Ok(bed.loader.host.metrics().plugin_resource_checks(&name)),
        |c| *c >= checks + 2,
    )
    .await?;
    let later: Vec<Option<String>> =
        api.list(&Default::default()).await?.items.iter().map(|s| s.resource_version()).collect();
    assert_eq!(settled, later, "no resourceVersion changed after the live version's writes");
    assert_eq!(shadow.failures_of(PLUGIN, "PluginPanicked"), 0);
    bed.down(&name).await
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_candidate_that_panics_or_spins_leaves_the_live_version_untouched() -> anyhow::Result<()> {
    let _serial = SERIAL.lock().await;
    let _ = logged();
    let modules = [("live", "fixture-swap"), ("candidate", "fixture-swap-panic"), ("other", "fixture-panic")];
    let bed = Bed::up("shadow-fails", &modules).await?;
    let name = format!("shadow-{}", bed.ns);

    // A candidate that is another plugin is refused on the status; the live version runs.
    bed.resources.create(&PostParams::default(), &resource(&name, &bed.ns, "live", Some("other"), 300)?).await?;
    let renamed = |r: &DynamicObject| {
        condition(r, "CandidateReady").is_some_and(|c| c["status"] == "False" && c["reason"] == "CandidateRenamed")
            && condition(r, "Ready").is_some_and(|c| c["status"] == "True")
    };
    until("the other plugin refused as a candidate", async || Ok(bed.resources.get(&name).await?), renamed).await?;
    assert!(bed.loader.host.shadowed(PLUGIN).is_none(), "nothing shadowed");
    let candidate = serde_json::json!({ "spec": { "candidate": { "configMap": { "name": "candidate" } } } });
    bed.resources.patch(&name, &PatchParams::default(), &Patch::Merge(&candidate)).await?;
    let panics = digest(&std::fs::read(plugin("fixture-swap-panic"))?);
    until("the candidate shadowed", async || Ok(bed.resources.get(&name).await?), |r| shadowing(r, &panics)).await?;

    const OBJECTS: usize = 6;
    let api = swaps::api(&bed.client, &bed.ns);
    swaps::create(&api, OBJECTS).await?;
    all_settled(&api, OBJECTS, "v1", |v| v + 1).await?;
    let shadow = bed.metrics.shadow();
    let panicked = async || Ok(shadow.failures_of(PLUGIN, "PluginPanicked"));
    until("every shadow run panicked", panicked, |n| *n >= OBJECTS as u64).await?;

    // The candidate that spins until its deadline, on the same Swaps.
    let spins = std::fs::read(plugin("fixture-swap-loop"))?;
    bed.maps.replace("candidate", &PostParams::default(), &module_named("candidate", &spins)).await?;
    let spins = digest(&spins);
    until("the spinning candidate shadowed", async || Ok(bed.resources.get(&name).await?), |r| shadowing(r, &spins))
        .await?;
    let started = std::time::Instant::now();
    for i in 0..OBJECTS {
        swaps::set_value(&api, &format!("swap-{i}"), 7).await?;
    }
    all_settled(&api, OBJECTS, "v1", |v| v + 1).await?;
    let settled_in = started.elapsed();
    let timed_out = async || Ok(shadow.failures_of(PLUGIN, "DeadlineExceeded"));
    until("every shadow run timed out", timed_out, |n| *n >= OBJECTS as u64).await?;

    // Nothing was compared; the live version never failed, and the status counts the failures.
    assert_eq!(shadow.reconciles_of(PLUGIN), 0);
    let live_failures = bed.loader.host.metrics().reconciles_of(PLUGIN, wasmop::metrics::Outcome::Failure);
    assert_eq!(live_failures, 0, "the live version never failed");
    let failed = |r: &DynamicObject| r.data["status"]["shadow"]["failures"].as_u64() >= Some(OBJECTS as u64);
    until("the status counts the failures", async || Ok(bed.resources.get(&name).await?), failed).await?;
    eprintln!("six changes settled on the live version in {settled_in:?} beside a candidate spinning 300 ms each");
    bed.down(&name).await
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn promoting_the_candidate_under_a_burst_loses_no_change_and_removing_it_leaves_nothing() -> anyhow::Result<()> {
    let _serial = SERIAL.lock().await;
    let _ = logged();
    let modules = [("live", "fixture-swap"), ("candidate", "fixture-swap-v2")];
    let bed = Bed::up("shadow-promote", &modules).await?;
    let name = format!("shadow-{}", bed.ns);
    bed.resources.create(&PostParams::default(), &resource(&name, &bed.ns, "live", Some("candidate"), 2000)?).await?;
    let v2 = digest(&std::fs::read(plugin("fixture-swap-v2"))?);
    until("the candidate shadowed", async || Ok(bed.resources.get(&name).await?), |r| shadowing(r, &v2)).await?;

    const OBJECTS: usize = 30;
    const CHANGES_PER_SECOND: u64 = 60;
    const BURST: Duration = Duration::from_secs(6);
    let api = swaps::api(&bed.client, &bed.ns);
    swaps::create(&api, OBJECTS).await?;
    all_settled(&api, OBJECTS, "v1", |v| v + 1).await?;

    // The burst: a spec change every ~17 ms, round robin; halfway, the spec makes the candidate
    // the module and drops `candidate`.
    let mut ticks = tokio::time::interval(Duration::from_secs(1) / CHANGES_PER_SECOND as u32);
    let mut changes = tokio::task::JoinSet::new();
    let total = CHANGES_PER_SECOND * BURST.as_secs();
    for n in 0..total {
        ticks.tick().await;
        if n == total / 2 {
            let promote = serde_json::json!({ "spec": {
                "module": { "configMap": { "name": "candidate" } }, "candidate": null } });
            bed.resources.patch(&name, &PatchParams::default(), &Patch::Merge(&promote)).await?;
        }
        let (api, swap) = (api.clone(), format!("swap-{}", n as usize % OBJECTS));
        changes.spawn(async move { swaps::set_value(&api, &swap, n + 1).await });
        while let Some(done) = changes.try_join_next() {
            done??;
        }
    }
    while let Some(done) = changes.join_next().await {
        done??;
    }
    all_settled(&api, OBJECTS, "v2", |v| v * 2).await?;

    // v2 runs as the live version; no candidate, no CandidateReady, no summary left.
    let promoted = |r: &DynamicObject| {
        r.data["status"]["digest"] == v2.as_str()
            && condition(r, "CandidateReady").is_none()
            && r.data["status"].get("shadow").is_none_or(serde_json::Value::is_null)
    };
    until("the resource reports v2 live and no candidate", async || Ok(bed.resources.get(&name).await?), promoted)
        .await?;
    assert!(bed.loader.host.shadowed(PLUGIN).is_none(), "the candidate is dropped");
    bed.down(&name).await
}
