//! Shadow rollouts against the real kube-apiserver: a `ReconcilerPlugin`'s `spec.candidate` runs
//! beside the live version (`fixture-swap` v1) on the same reconciles and is never applied.
//! A candidate that differs for some Swaps yields exactly those differences, counted, logged and
//! summed up on the resource's status, and no write; a candidate that is another plugin is
//! refused on the status; a candidate that panics or spins leaves the live version's reconciles
//! untouched; promoting a candidate under a burst of changes loses
//! none of them. A candidate of the `webpage` plugin that desires other dependents for some
//! pages counts and logs exactly those as `desired` differences and applies none of them; one
//! whose desired objects the host would refuse differs in its verdict (`CapabilityDenied`). A
//! candidate named in the configuration file (`candidates:`) is shadowed beside the plugin file
//! `wasmop run --config` runs, and one that is another plugin is refused while the live version
//! runs.
//!
//! Every test runs its own `ReconcilerPlugin` through a resource loader that sees every
//! `ReconcilerPlugin` of the cluster, so the tests of this file run one at a time.

use std::collections::{BTreeMap, BTreeSet};
use std::process::Stdio;
use std::sync::{Arc, Mutex, OnceLock};
use std::time::Duration;

use k8s_openapi::api::core::v1::{ConfigMap, Service};
use k8s_openapi::api::networking::v1::Ingress;
use kube::api::{Api, ApiResource, DeleteParams, DynamicObject, GroupVersionKind, Patch, PatchParams, PostParams};
use kube::{Client, ResourceExt};
use sha2::{Digest, Sha256};
use tokio::io::{AsyncBufReadExt, BufReader};
use tracing::field::{Field, Visit};
use tracing_subscriber::EnvFilter;
use tracing_subscriber::layer::{Context, Layer, SubscriberExt};
use wasmop::metrics::{Metrics, Outcome};
use wasmop::settings::HostConfig;
use wasmop_tests::swaps::{self, all_settled};
use wasmop_tests::{
    ResourceHost, apply_file, client, condition, http_get, kubeconfig, module_map, namespace, plugin, settings, until,
    wasmop_binary, within, workspace_root,
};

const PLUGIN: &str = "fixture-swap";

/// One test at a time: each one's loader would run the others' resources.
static SERIAL: tokio::sync::Mutex<()> = tokio::sync::Mutex::const_new(());

/// The objects of the host's "the candidate differs" log lines, with their messages, in order.
#[derive(Default)]
struct Differences(Mutex<Vec<(String, String)>>);

impl Differences {
    /// The objects of the lines so far.
    fn objects(&self) -> Vec<String> {
        self.0.lock().expect("never poisoned").iter().map(|(object, _)| object.clone()).collect()
    }

    /// The messages of the lines about `object` so far.
    fn about(&self, object: &str) -> Vec<String> {
        let lines = self.0.lock().expect("never poisoned");
        lines.iter().filter(|(o, _)| o == object).map(|(_, message)| message.clone()).collect()
    }
}

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
            self.0.0.lock().expect("never poisoned").push((fields.object, fields.message));
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

    /// Deletes the resource `name` (its plugin `plugin` stops) and stops the loader.
    async fn down(self, name: &str, plugin: &str) -> anyhow::Result<()> {
        self.resources.delete(name, &DeleteParams::default()).await?;
        until("the resource gone", async || Ok(self.resources.get_opt(name).await?), |r| r.is_none()).await?;
        assert!(self.loader.host.plugins().is_empty(), "the plugin stopped");
        assert!(self.loader.host.shadowed(plugin).is_none(), "nothing of the candidate is left");
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
    let lines: Vec<String> = logged.objects();
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
    bed.down(&name, PLUGIN).await
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
    let live_failures = bed.loader.host.metrics().reconciles_of(PLUGIN, Outcome::Failure);
    assert_eq!(live_failures, 0, "the live version never failed");
    let failed = |r: &DynamicObject| r.data["status"]["shadow"]["failures"].as_u64() >= Some(OBJECTS as u64);
    until("the status counts the failures", async || Ok(bed.resources.get(&name).await?), failed).await?;
    eprintln!("six changes settled on the live version in {settled_in:?} beside a candidate spinning 300 ms each");
    bed.down(&name, PLUGIN).await
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
    bed.down(&name, PLUGIN).await
}

/// The WebPages of `ns`, the primaries of the `webpage` plugin.
fn pages(client: &Client, ns: &str) -> Api<DynamicObject> {
    let gvk = GroupVersionKind::gvk("sample.wasmop.dev", "v1", "WebPage");
    Api::namespaced_with(client.clone(), ns, &ApiResource::from_gvk_with_plural(&gvk, "webpages"))
}

/// Whether `page`'s status says its dependents are applied, for its current generation.
fn page_ready(page: &DynamicObject) -> bool {
    page.data["status"]["observedGeneration"].as_i64() == page.metadata.generation
        && condition(page, "Ready").is_some_and(|c| c["status"] == "True")
}

/// A bed for `test` whose `ReconcilerPlugin` runs the webpage plugin with `candidate` (a
/// plugin file) as its candidate, once shadowed, with `count` WebPages `page-0`... all ready;
/// the resource's name and the WebPages' API.
async fn webpages(test: &str, candidate: &str, count: usize) -> anyhow::Result<(Bed, String, Api<DynamicObject>)> {
    let bed = Bed::up(test, &[("live", "webpage"), ("candidate", candidate)]).await?;
    apply_file(&bed.client, &workspace_root().join("plugins/webpage/crd.yaml"), None).await?;
    let name = format!("shadow-{}", bed.ns);
    bed.resources.create(&PostParams::default(), &resource(&name, &bed.ns, "live", Some("candidate"), 2000)?).await?;
    let digest = digest(&std::fs::read(plugin(candidate))?);
    until("the candidate shadowed", async || Ok(bed.resources.get(&name).await?), |r| shadowing(r, &digest)).await?;
    let api = pages(&bed.client, &bed.ns);
    for i in 0..count {
        let page = serde_json::json!({ "apiVersion": "sample.wasmop.dev/v1", "kind": "WebPage",
            "metadata": { "name": format!("page-{i}") }, "spec": { "html": format!("<h1>{i}</h1>") } });
        api.create(&PostParams::default(), &serde_json::from_value(page)?).await?;
    }
    let all_ready = |pages: &Vec<DynamicObject>| pages.len() == count && pages.iter().all(page_ready);
    until("every page ready", async || Ok(api.list(&Default::default()).await?.items), all_ready).await?;
    Ok((bed, name, api))
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_candidate_that_desires_other_dependents_counts_the_differences_and_applies_none() -> anyhow::Result<()> {
    const WEBPAGE: &str = "webpage";
    let _serial = SERIAL.lock().await;
    let logged = logged();
    // Six WebPages: for page-1, -3 and -5 the candidate desires one more ConfigMap key and a
    // Service of another name.
    const PAGES: usize = 6;
    let (bed, name, _) = webpages("shadow-dependents", "fixture-webpage-odd", PAGES).await?;
    // The Deployments' status changes reconcile the pages again: wait until no reconcile and no
    // comparison came for two seconds (a finalizer's pass asks the plugin nothing to compare).
    let (shadow, live) = (bed.metrics.shadow(), bed.loader.host.metrics());
    let runs = || {
        let live_runs = live.reconciles_of(WEBPAGE, Outcome::Success) + live.reconciles_of(WEBPAGE, Outcome::Failure);
        (live_runs, shadow.reconciles_of(WEBPAGE))
    };
    within(Duration::from_secs(60), "the reconciles to stop", async {
        let mut last = runs();
        loop {
            tokio::time::sleep(Duration::from_secs(2)).await;
            let now = runs();
            if now == std::mem::replace(&mut last, now) && now.1 > 0 {
                return;
            }
        }
    })
    .await?;

    // Every difference is a desired one, of an odd page; each odd page differed, no even one.
    let odd: BTreeSet<String> = (1..PAGES).step_by(2).map(|i| format!("{}/page-{i}", bed.ns)).collect();
    let lines: Vec<String> = logged.objects();
    let ours: Vec<&String> = lines.iter().filter(|o| o.starts_with(&format!("{}/", bed.ns))).collect();
    assert_eq!(ours.iter().map(|o| o.to_string()).collect::<BTreeSet<_>>(), odd, "{ours:?}");
    assert_eq!(shadow.differences_of(WEBPAGE, "desired"), ours.len() as u64, "one log line per difference");
    for kind in ["verdict", "status", "events"] {
        assert_eq!(shadow.differences_of(WEBPAGE, kind), 0, "no {kind} difference");
    }
    assert!(shadow.reconciles_of(WEBPAGE) > ours.len() as u64, "the even pages were compared, and equal");
    assert_eq!(shadow.failures_of(WEBPAGE, "PluginPanicked"), 0);
    let summed = |r: &DynamicObject| r.data["status"]["shadow"]["differences"] == ours.len();
    let r = until("the status sums the differences up", async || Ok(bed.resources.get(&name).await?), summed).await?;
    for entry in r.data["status"]["shadow"]["lastDifferences"].as_array().into_iter().flatten() {
        assert_eq!(entry["kinds"], serde_json::json!(["desired"]), "{entry}");
    }

    // Nothing the candidate alone desires reached the API server: no ConfigMap key, in the
    // objects or in any field manager's fields, and no Service of its names.
    let config_maps: Api<ConfigMap> = Api::namespaced(bed.client.clone(), &bed.ns);
    for i in 0..PAGES {
        let map = config_maps.get(&format!("page-{i}-html")).await?;
        let keys: Vec<&String> = map.data.iter().flat_map(|d| d.keys()).collect();
        assert_eq!(keys, ["index.html"], "page-{i}-html holds the live version's key alone");
        let managed = serde_json::to_string(&map.metadata.managed_fields)?;
        assert!(!managed.contains("candidate.html"), "page-{i}-html: no field manager owns the candidate's key");
    }
    let services: Api<Service> = Api::namespaced(bed.client.clone(), &bed.ns);
    let names: BTreeSet<String> =
        services.list(&Default::default()).await?.items.iter().map(|s| s.name_any()).collect();
    assert_eq!(names, (0..PAGES).map(|i| format!("page-{i}")).collect(), "the live version's Services alone");
    let ingresses: Api<Ingress> = Api::namespaced(bed.client.clone(), &bed.ns);
    assert!(ingresses.list(&Default::default()).await?.items.is_empty(), "no page is exposed");
    bed.down(&name, WEBPAGE).await
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_candidate_whose_desired_objects_the_host_would_refuse_differs_in_its_verdict_and_writes_nothing()
-> anyhow::Result<()> {
    const WEBPAGE: &str = "webpage";
    let _serial = SERIAL.lock().await;
    let logged = logged();
    // Four WebPages: for page-1 and page-3 the candidate desires its ConfigMap in kube-system,
    // which the host refuses.
    const PAGES: usize = 4;
    let (bed, name, _) = webpages("shadow-refused", "fixture-webpage-escape", PAGES).await?;
    let odd: BTreeSet<String> = (1..PAGES).step_by(2).map(|i| format!("{}/page-{i}", bed.ns)).collect();
    let shadow = bed.metrics.shadow();
    let each_odd_page_differed = || odd.iter().all(|page| !logged.about(page).is_empty());
    until("each odd page's difference logged", async || Ok(()), |()| each_odd_page_differed()).await?;

    // Only the odd pages differ: in the verdict, the refusal as the host words it, and in the
    // desired objects; the live version's pages are all ready.
    let ours: BTreeSet<String> =
        logged.objects().into_iter().filter(|o| o.starts_with(&format!("{}/", bed.ns))).collect();
    assert_eq!(ours, odd);
    for page in &odd {
        for message in logged.about(page) {
            assert!(message.contains("CapabilityDenied"), "{page}: {message}");
            assert!(message.contains("stay in their primary's namespace"), "{page}: {message}");
        }
    }
    assert!(shadow.differences_of(WEBPAGE, "verdict") >= odd.len() as u64);
    assert_eq!(shadow.differences_of(WEBPAGE, "verdict"), shadow.differences_of(WEBPAGE, "desired"));
    assert_eq!(shadow.failures_of(WEBPAGE, "PluginPanicked"), 0, "a refusal is a difference, not a failed run");
    let with_verdict = |r: &DynamicObject| {
        let last = r.data["status"]["shadow"]["lastDifferences"].as_array().cloned().unwrap_or_default();
        !last.is_empty()
            && last.iter().all(|entry| entry["kinds"].as_array().is_some_and(|k| k.contains(&"verdict".into())))
    };
    until("the status shows verdict differences", async || Ok(bed.resources.get(&name).await?), with_verdict).await?;

    // Nothing the candidate desired reached kube-system.
    let elsewhere: Api<ConfigMap> = Api::namespaced(bed.client.clone(), "kube-system");
    for i in 0..PAGES {
        assert!(elsewhere.get_opt(&format!("page-{i}-html")).await?.is_none(), "page-{i}-html is not in kube-system");
    }
    bed.down(&name, WEBPAGE).await
}

/// The sum of the values of `metrics` lines (a host's `/metrics` text) of `metric` whose labels
/// include each of `labels`.
fn metric(metrics: &str, metric: &str, labels: &[&str]) -> u64 {
    let lines = metrics.lines().filter(|l| l.starts_with(&format!("{metric}{{")));
    let ours = lines.filter(|l| labels.iter().all(|label| l.contains(label)));
    ours.filter_map(|l| l.rsplit(' ').next()?.parse::<f64>().ok()).sum::<f64>() as u64
}

/// `wasmop run --config` as a process: the plugin file of [`PLUGIN`] on its own namespace, with
/// the module file `candidate` as its candidate in the configuration file.
struct ConfiguredHost {
    client: Client,
    ns: String,
    host: tokio::process::Child,
    address: std::net::SocketAddr,
    log: Arc<Mutex<String>>,
}

impl ConfiguredHost {
    /// Starts the host (with `extra` arguments); returns once it is ready (its plugin and
    /// candidate loaded).
    async fn start(test: &str, candidate: &std::path::Path, extra: &[&str]) -> anyhow::Result<Self> {
        let client = client().await?;
        apply_file(&client, &workspace_root().join("plugins/fixtures/swap/crd.yaml"), None).await?;
        let ns = namespace(&client, test).await?;
        let config = config_dir()?.join(format!("{ns}.yaml"));
        let yaml = format!(
            "plugins:\n  {PLUGIN}:\n    limits: {{ deadlineMs: 2000 }}\ncandidates:\n  {PLUGIN}: {candidate:?}\n"
        );
        std::fs::write(&config, yaml)?;
        let address = std::net::TcpListener::bind("127.0.0.1:0")?.local_addr()?;
        let mut host = tokio::process::Command::new(wasmop_binary()?)
            .args(["run", "--namespace", &ns, "--metrics-address", &address.to_string(), "--config"])
            .arg(&config)
            .arg("--plugin")
            .arg(plugin(PLUGIN))
            .args(extra)
            .env("KUBECONFIG", kubeconfig())
            .env("WASMOP_CACHE_DIR", workspace_root().join("target/wasmop-test-cache"))
            .env("RUST_LOG", "warn,wasmop::shadow=info,wasmop::host=info,wasmop::loader=info")
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(Stdio::piped())
            .kill_on_drop(true)
            .spawn()?;
        let log = Arc::new(Mutex::new(String::new()));
        let (mut lines, kept) = (BufReader::new(host.stderr.take().expect("piped")).lines(), log.clone());
        tokio::spawn(async move {
            while let Ok(Some(line)) = lines.next_line().await {
                let mut log = kept.lock().expect("never poisoned");
                log.push_str(&line);
                log.push('\n');
            }
        });
        let ready = async || Ok(http_get(address, "/readyz").await.unwrap_or_default());
        let up = |answer: &String| answer.starts_with("HTTP/1.0 200") || answer.starts_with("HTTP/1.1 200");
        until("the host ready", ready, up).await?;
        Ok(Self { client, ns, host, address, log })
    }

    /// The host's metrics now.
    async fn metrics(&self) -> anyhow::Result<String> {
        Ok(http_get(self.address, "/metrics").await.unwrap_or_default())
    }

    /// The host's log so far.
    fn log(&self) -> String {
        self.log.lock().expect("never poisoned").clone()
    }

    /// Stops the host; its log.
    async fn stop(mut self) -> anyhow::Result<String> {
        self.host.start_kill()?;
        self.host.wait().await?;
        Ok(self.log())
    }
}

/// A directory under `target/` for the tests' configuration and candidate files.
fn config_dir() -> anyhow::Result<std::path::PathBuf> {
    let dir = workspace_root().join("target/test-shadow-config");
    std::fs::create_dir_all(&dir)?;
    Ok(dir)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_candidate_named_in_the_configuration_file_is_shadowed_beside_the_plugin_file() -> anyhow::Result<()> {
    let run = ConfiguredHost::start("shadow-config", &plugin("fixture-swap-odd"), &[]).await?;

    // Ten Swaps: the candidate's result differs for the odd ones, and it writes nothing.
    const OBJECTS: usize = 10;
    let api = swaps::api(&run.client, &run.ns);
    swaps::create(&api, OBJECTS).await?;
    all_settled(&api, OBJECTS, "v1", |v| v + 1).await?;
    let plugin_label = format!("plugin=\"{PLUGIN}\"");
    let compared = |m: &String| metric(m, "wasmop_shadow_reconciles_total", &[&plugin_label]) >= OBJECTS as u64;
    let metrics = until("every reconcile compared", async || run.metrics().await, compared).await?;
    assert_eq!(metric(&metrics, "wasmop_shadow_reconciles_total", &[&plugin_label]), OBJECTS as u64);
    let differences = |kind: &str| metric(&metrics, "wasmop_shadow_differences_total", &[&plugin_label, kind]);
    assert_eq!(differences("kind=\"status\""), OBJECTS as u64 / 2, "{metrics}");
    assert_eq!(differences(""), OBJECTS as u64 / 2, "status differences alone: {metrics}");
    assert_eq!(metric(&metrics, "wasmop_shadow_failures_total", &[&plugin_label]), 0, "{metrics}");
    for swap in api.list(&Default::default()).await?.items {
        assert_eq!(swap.data["status"]["result"], 1, "{}: the live version's result", swap.name_any());
        assert!(swap.managed_fields().len() <= 2, "{}: {:?}", swap.name_any(), swap.managed_fields());
    }
    let ns = run.ns.clone();
    let log = run.stop().await?;
    assert_eq!(log.matches("candidate version shadowed").count(), 1, "{log}");
    assert_eq!(log.matches("the candidate differs from the live version").count(), OBJECTS / 2, "{log}");
    for i in 0..OBJECTS {
        let named = log.contains(&format!("object={ns}/swap-{i} "));
        assert_eq!(named, i % 2 == 1, "swap-{i} is logged as a difference if and only if odd: {log}");
    }
    Ok(())
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_candidate_in_the_configuration_file_that_is_another_plugin_is_refused_and_the_live_version_runs()
-> anyhow::Result<()> {
    let run = ConfiguredHost::start("shadow-config-refused", &plugin("fixture-panic"), &[]).await?;
    const OBJECTS: usize = 4;
    let api = swaps::api(&run.client, &run.ns);
    swaps::create(&api, OBJECTS).await?;
    all_settled(&api, OBJECTS, "v1", |v| v + 1).await?;
    let metrics = run.metrics().await?;
    assert!(metrics.contains("wasmop_reconciles_total"), "{metrics}");
    assert!(!metrics.contains("wasmop_shadow_reconciles_total{"), "nothing shadowed: {metrics}");
    assert!(!metrics.contains("wasmop_shadow_failures_total{"), "nothing shadowed: {metrics}");
    let log = run.stop().await?;
    assert!(log.contains("candidate refused; the live version runs alone"), "{log}");
    assert!(log.contains("a candidate is another version of the live plugin"), "{log}");
    assert!(!log.contains("candidate version shadowed"), "{log}");
    Ok(())
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn with_watch_a_new_candidate_file_is_shadowed_and_a_removed_one_dropped() -> anyhow::Result<()> {
    let candidate = config_dir()?.join(format!("candidate-{}.wasm", std::process::id()));
    std::fs::copy(plugin("fixture-swap-odd"), &candidate)?;
    let run = ConfiguredHost::start("shadow-config-watch", &candidate, &["--watch"]).await?;
    const OBJECTS: usize = 10;
    let api = swaps::api(&run.client, &run.ns);
    swaps::create(&api, OBJECTS).await?;
    all_settled(&api, OBJECTS, "v1", |v| v + 1).await?;
    let plugin_label = format!("plugin=\"{PLUGIN}\"");
    let counts = async || {
        let m = run.metrics().await?;
        let differences = metric(&m, "wasmop_shadow_differences_total", &[&plugin_label, "kind=\"status\""]);
        Ok((metric(&m, "wasmop_shadow_reconciles_total", &[&plugin_label]), differences))
    };
    let first = until("every reconcile compared", counts, |c| c.0 >= OBJECTS as u64).await?;
    assert_eq!(first, (OBJECTS as u64, OBJECTS as u64 / 2), "fixture-swap-odd differs for the odd Swaps");

    // v2 replaces the candidate (written beside, renamed over): it differs for every Swap.
    let staged = candidate.with_extension("new");
    std::fs::copy(plugin("fixture-swap-v2"), &staged)?;
    std::fs::rename(&staged, &candidate)?;
    let shadowed = |log: &String| log.matches("candidate version shadowed").count() == 2;
    until("the new candidate shadowed", async || Ok(run.log()), shadowed).await?;
    for i in 0..OBJECTS {
        swaps::set_value(&api, &format!("swap-{i}"), 5).await?;
    }
    all_settled(&api, OBJECTS, "v1", |v| v + 1).await?;
    let target = 2 * OBJECTS as u64;
    let second = until("the changes compared", counts, |c| c.0 >= target).await?;
    assert_eq!(second, (target, first.1 + OBJECTS as u64), "v2 differs for every Swap");

    // The candidate file removed: the candidate is dropped, and the next changes are not compared.
    std::fs::remove_file(&candidate)?;
    let dropped = |log: &String| log.contains("candidate version dropped");
    until("the candidate dropped", async || Ok(run.log()), dropped).await?;
    for i in 0..OBJECTS {
        swaps::set_value(&api, &format!("swap-{i}"), 9).await?;
    }
    all_settled(&api, OBJECTS, "v1", |v| v + 1).await?;
    tokio::time::sleep(Duration::from_secs(1)).await;
    assert_eq!(counts().await?, second, "nothing compared once the candidate is dropped");
    let log = run.stop().await?;
    assert!(!log.contains("ERROR"), "{log}");
    Ok(())
}
