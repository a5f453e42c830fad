//! Dependent resources, finalizers and status writes against the real kube-apiserver (with the
//! garbage collector, deployment and replicaset controllers), with the complete `webpage`
//! plugin (ConfigMap, Deployment, Service, and an Ingress while `spec.exposed`), each test in
//! its Rust, Python and TypeScript builds (`webpage`, `webpage-py`, `webpage-ts`) and most in its
//! Go build (`webpage-go`), and the `fixture-probe` plugin (a finalizer it can keep, a slow
//! reconcile).

use std::time::Duration;

use anyhow::Context as _;

use k8s_openapi::api::core::v1::Event as CoreEvent;
use k8s_openapi::api::events::v1::Event;
use kube::api::{Api, ApiResource, DeleteParams, DynamicObject, GroupVersionKind, ListParams, Patch, PatchParams};
use kube::runtime::wait::await_condition;
use kube::{Client, ResourceExt};
use serde_json::json;
use wasmop::metrics::Outcome;
use wasmop::runtime::Limits;
use wasmop_tests::{RunningHost, apply, apply_file, client, namespace, wait_until, within, workspace_root};

const WAIT: Duration = Duration::from_secs(60);

fn api(client: &Client, ns: &str, group: &str, version: &str, kind: &str, plural: &str) -> Api<DynamicObject> {
    let gvk = GroupVersionKind::gvk(group, version, kind);
    Api::namespaced_with(client.clone(), ns, &ApiResource::from_gvk_with_plural(&gvk, plural))
}

/// The APIs of a WebPage and its dependents in one namespace.
struct Page {
    pages: Api<DynamicObject>,
    config_maps: Api<DynamicObject>,
    deployments: Api<DynamicObject>,
    services: Api<DynamicObject>,
    ingresses: Api<DynamicObject>,
}

impl Page {
    async fn new(client: &Client, ns: &str) -> anyhow::Result<Self> {
        apply_file(client, &workspace_root().join("plugins/webpage/crd.yaml"), None).await?;
        Ok(Self {
            pages: api(client, ns, "sample.wasmop.dev", "v1", "WebPage", "webpages"),
            config_maps: api(client, ns, "", "v1", "ConfigMap", "configmaps"),
            deployments: api(client, ns, "apps", "v1", "Deployment", "deployments"),
            services: api(client, ns, "", "v1", "Service", "services"),
            ingresses: api(client, ns, "networking.k8s.io", "v1", "Ingress", "ingresses"),
        })
    }
}

/// Waits until `name` satisfies `condition` (`None`: absent); returns it.
async fn wait_for(
    api: &Api<DynamicObject>,
    name: &str,
    what: &str,
    condition: impl Fn(Option<&DynamicObject>) -> bool + Send + 'static,
) -> anyhow::Result<Option<DynamicObject>> {
    Ok(within(WAIT, &format!("{name}: {what}"), await_condition(api.clone(), name, condition)).await??)
}

fn ready(page: &DynamicObject) -> bool {
    let generation = page.metadata.generation;
    page.data["status"]["observedGeneration"].as_i64() == generation
        && page.data["status"]["conditions"]
            .as_array()
            .into_iter()
            .flatten()
            .any(|c| c["type"] == "Ready" && c["status"] == "True")
}

fn owned_by(object: &DynamicObject, owner: &DynamicObject) -> bool {
    object.owner_references().iter().any(|r| r.controller == Some(true) && Some(&r.uid) == owner.uid().as_ref())
}

/// The host's server-side apply entry of `object`: when it applied what.
fn applied_by_host(object: &DynamicObject) -> Option<(Option<String>, Option<String>)> {
    let entry =
        object.metadata.managed_fields.as_ref()?.iter().find(|f| f.manager.as_deref() == Some("wasmop-webpage"))?;
    Some((entry.time.as_ref().map(|t| t.0.to_string()), entry.fields_v1.as_ref().map(|f| f.0.to_string())))
}

async fn create_page(client: &Client, ns: &str, name: &str, html: &str, exposed: bool) -> anyhow::Result<()> {
    let page = json!({
        "apiVersion": "sample.wasmop.dev/v1", "kind": "WebPage", "metadata": { "name": name },
        "spec": { "html": html, "exposed": exposed },
    });
    apply(client, page, Some(ns)).await?;
    Ok(())
}

async fn patch_spec(api: &Api<DynamicObject>, name: &str, spec: serde_json::Value) -> anyhow::Result<DynamicObject> {
    Ok(api.patch(name, &PatchParams::default(), &Patch::Merge(json!({ "spec": spec }))).await?)
}

wasmop_tests::in_every_language!(
    a_webpage_gets_owned_dependents_and_a_html_change_updates_only_its_config_map,
    "webpage", and go
);
async fn a_webpage_gets_owned_dependents_and_a_html_change_updates_only_its_config_map(
    plugin: &str,
) -> anyhow::Result<()> {
    let client = client().await?;
    let ns = namespace(&client, "webpage-dependents").await?;
    let page = Page::new(&client, &ns).await?;
    let host = RunningHost::start(&client, &ns, &[plugin], Limits::default())?;
    create_page(&client, &ns, "site", "<h1>one</h1>", false).await?;
    let site = wait_until(&page.pages, "site", "Ready", ready).await?;
    assert_eq!(site.data["status"]["htmlConfigMap"], "site-html", "the status names the ConfigMap");
    assert!(site.finalizers().contains(&"wasmop.dev/webpage".to_string()), "{:?}", site.finalizers());

    let html = page.config_maps.get("site-html").await?;
    let deployment = page.deployments.get("site").await?;
    let service = page.services.get("site").await?;
    for dependent in [&html, &deployment, &service] {
        assert!(owned_by(dependent, &site), "{} is owned by the WebPage", dependent.name_any());
    }
    assert_eq!(html.data["data"]["index.html"], "<h1>one</h1>");
    assert!(page.ingresses.get_opt("site").await?.is_none(), "no Ingress while not exposed");

    patch_spec(&page.pages, "site", json!({ "html": "<h1>two</h1>" })).await?;
    wait_until(&page.config_maps, "site-html", "new html", |cm| cm.data["data"]["index.html"] == "<h1>two</h1>")
        .await?;
    wait_until(&page.pages, "site", "Ready for generation 2", |p| ready(p) && p.metadata.generation == Some(2)).await?;
    // The deployment controller writes the Deployment's status: compare what the host applied.
    let after = (page.deployments.get("site").await?, page.services.get("site").await?);
    assert_eq!(after.0.metadata.generation, deployment.metadata.generation, "the Deployment's spec is unchanged");
    assert_eq!(applied_by_host(&after.0), applied_by_host(&deployment), "the host did not apply the Deployment again");
    assert_eq!(after.1.resource_version(), service.resource_version(), "the Service was not written");
    host.stop().await;
    Ok(())
}

wasmop_tests::in_every_language!(exposing_a_webpage_creates_its_ingress_and_unexposing_deletes_it, "webpage", and go);
async fn exposing_a_webpage_creates_its_ingress_and_unexposing_deletes_it(plugin: &str) -> anyhow::Result<()> {
    let client = client().await?;
    let ns = namespace(&client, "webpage-ingress").await?;
    let page = Page::new(&client, &ns).await?;
    let host = RunningHost::start(&client, &ns, &[plugin], Limits::default())?;
    create_page(&client, &ns, "site", "<p>hi</p>", false).await?;
    wait_until(&page.pages, "site", "Ready", ready).await?;
    patch_spec(&page.pages, "site", json!({ "exposed": true })).await?;
    let site = page.pages.get("site").await?;
    let ingress = wait_until(&page.ingresses, "site", "created", |_| true).await?;
    assert!(owned_by(&ingress, &site));
    assert_eq!(ingress.data["spec"]["rules"][0]["http"]["paths"][0]["backend"]["service"]["name"], "site");
    patch_spec(&page.pages, "site", json!({ "exposed": false })).await?;
    wait_for(&page.ingresses, "site", "deleted", |o| o.is_none()).await?;
    assert!(page.services.get_opt("site").await?.is_some(), "the other dependents stay");
    host.stop().await;
    Ok(())
}

wasmop_tests::in_every_language!(
    a_hand_edit_of_a_managed_deployment_field_is_reverted_and_a_quiet_period_writes_nothing,
    "webpage", and go
);
async fn a_hand_edit_of_a_managed_deployment_field_is_reverted_and_a_quiet_period_writes_nothing(
    plugin: &str,
) -> anyhow::Result<()> {
    let client = client().await?;
    let ns = namespace(&client, "webpage-revert").await?;
    let page = Page::new(&client, &ns).await?;
    // A resync every 2 s: the quiet period below still reconciles the page about ten times,
    // and each of those must find nothing to write.
    let overrides = "plugins:\n  webpage:\n    resyncPeriodMs: 2000\n";
    let host = RunningHost::start_with_yaml(&client, &ns, &[plugin], overrides)?;
    create_page(&client, &ns, "site", "<p>hi</p>", false).await?;
    wait_until(&page.pages, "site", "Ready", ready).await?;
    wait_until(&page.deployments, "site", "created", |_| true).await?;

    let by_hand = PatchParams { field_manager: Some("by-hand".into()), ..PatchParams::default() };
    let edit = json!({ "spec": { "replicas": 3 } });
    let edited = page.deployments.patch("site", &by_hand, &Patch::Merge(&edit)).await?;
    assert_eq!(edited.data["spec"]["replicas"], 3);
    wait_until(&page.deployments, "site", "replicas reverted to 1", |d| d.data["spec"]["replicas"] == 1).await?;

    // Steady state: the deployment and replicaset controllers settle the Deployment's status;
    // wait until its status reflects the current generation, then count the host's writes.
    wait_until(&page.deployments, "site", "status observed", |d| {
        d.data["status"]["observedGeneration"].as_i64() == d.metadata.generation
    })
    .await?;
    let metrics = host.host().metrics().clone();
    let versions = || async {
        let mut versions = Vec::new();
        for (api, name) in [
            (&page.pages, "site"),
            (&page.config_maps, "site-html"),
            (&page.deployments, "site"),
            (&page.services, "site"),
        ] {
            versions.push(api.get(name).await?.resource_version());
        }
        anyhow::Ok(versions)
    };
    // Let in-flight reconciles of the revert finish: two equal samples of the write counter,
    // more than a resync period apart.
    let mut writes = metrics.writes_of("webpage");
    within(WAIT, "the host to stop writing", async {
        loop {
            tokio::time::sleep(Duration::from_secs(3)).await;
            let now = metrics.writes_of("webpage");
            if now == writes {
                break;
            }
            writes = now;
        }
    })
    .await?;
    let before = versions().await?;
    let reconciles = metrics.reconciles_of("webpage", Outcome::Success);
    tokio::time::sleep(Duration::from_secs(20)).await;
    let during = metrics.reconciles_of("webpage", Outcome::Success) - reconciles;
    assert!(during >= 5, "the resync reconciled the page during the quiet period ({during} times)");
    assert_eq!(metrics.writes_of("webpage"), writes, "the host wrote during a quiet period");
    assert_eq!(versions().await?, before, "an object changed during a quiet period");
    host.stop().await;
    Ok(())
}

wasmop_tests::in_every_language!(
    deleting_a_webpage_runs_cleanup_releases_the_finalizer_and_its_dependents_are_collected,
    "webpage", and go
);
async fn deleting_a_webpage_runs_cleanup_releases_the_finalizer_and_its_dependents_are_collected(
    plugin: &str,
) -> anyhow::Result<()> {
    let client = client().await?;
    let ns = namespace(&client, "webpage-delete").await?;
    let page = Page::new(&client, &ns).await?;
    let host = RunningHost::start(&client, &ns, &[plugin], Limits::default())?;
    create_page(&client, &ns, "site", "<p>bye</p>", true).await?;
    wait_until(&page.pages, "site", "Ready", ready).await?;
    wait_until(&page.ingresses, "site", "created", |_| true).await?;

    page.pages.delete("site", &DeleteParams::default()).await?;
    wait_for(&page.pages, "site", "deleted", |o| o.is_none()).await?;
    let events: Api<Event> = Api::namespaced(client.clone(), &ns);
    let cleaned =
        events.list(&ListParams::default()).await?.items.into_iter().any(|e| e.reason.as_deref() == Some("CleanedUp"));
    assert!(cleaned, "cleanup ran and recorded its Event");
    wait_for(&page.config_maps, "site-html", "collected", |o| o.is_none()).await?;
    for api in [&page.deployments, &page.services, &page.ingresses] {
        wait_for(api, "site", "collected", |o| o.is_none()).await?;
    }
    host.stop().await;
    Ok(())
}

fn probes(client: &Client, ns: &str) -> Api<DynamicObject> {
    api(client, ns, "test.wasmop.dev", "v1", "Probe", "probes")
}

async fn create_probe(client: &Client, ns: &str, name: &str, spec: serde_json::Value) -> anyhow::Result<()> {
    apply_file(client, &workspace_root().join("plugins/fixtures/probe/crd.yaml"), None).await?;
    let probe =
        json!({ "apiVersion": "test.wasmop.dev/v1", "kind": "Probe", "metadata": { "name": name }, "spec": spec });
    apply(client, probe, Some(ns)).await?;
    Ok(())
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_finalizer_kept_by_the_plugin_holds_deletion_until_the_plugin_lets_go() -> anyhow::Result<()> {
    let client = client().await?;
    let ns = namespace(&client, "kept-finalizer").await?;
    let probes = probes(&client, &ns);
    let host = RunningHost::start(&client, &ns, &["fixture-probe"], Limits::default())?;
    create_probe(&client, &ns, "held", json!({ "holdFinalizer": true })).await?;
    wait_until(&probes, "held", "finalizer added", |p| p.finalizers().contains(&"wasmop.dev/fixture-probe".into()))
        .await?;

    probes.delete("held", &DeleteParams::default()).await?;
    let events: Api<Event> = Api::namespaced(client.clone(), &ns);
    within(WAIT, "two cleanups that kept the finalizer", async {
        loop {
            let kept = events
                .list(&ListParams::default())
                .await?
                .items
                .iter()
                .filter(|e| e.reason.as_deref() == Some("Cleanup"))
                .map(|e| e.series.as_ref().map_or(1, |s| s.count))
                .sum::<i32>();
            if kept >= 2 {
                return anyhow::Ok(());
            }
            tokio::time::sleep(Duration::from_millis(250)).await;
        }
    })
    .await??;
    let held = probes.get("held").await?;
    assert!(
        held.metadata.deletion_timestamp.is_some() && held.finalizers().contains(&"wasmop.dev/fixture-probe".into())
    );

    patch_spec(&probes, "held", json!({ "holdFinalizer": false })).await?;
    wait_for(&probes, "held", "deleted once the plugin lets go", |o| o.is_none()).await?;
    host.stop().await;
    Ok(())
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_status_conflict_with_a_concurrent_writer_is_retried_and_the_final_status_is_right() -> anyhow::Result<()> {
    let client = client().await?;
    let ns = namespace(&client, "status-conflict").await?;
    let probes = probes(&client, &ns);
    let overrides = "plugins:\n  fixture-probe:\n    retry: { initialIntervalMs: 300, maxAttempts: 10 }\n";
    let host = RunningHost::start_with_yaml(&client, &ns, &["fixture-probe"], overrides)?;
    // Each reconcile takes 800 ms; meanwhile another writer changes the status every 100 ms.
    create_probe(&client, &ns, "contested", json!({ "busyMs": 800 })).await?;
    let writer = {
        let probes = probes.clone();
        tokio::spawn(async move {
            // How often the object it wrote showed a `Ready` condition failed for a conflict.
            let mut flipped = 0;
            for n in 0..25 {
                let patch = json!({ "status": { "external": n } });
                // The object may not exist for the first few rounds.
                if let Ok(written) =
                    probes.patch_status("contested", &PatchParams::default(), &Patch::Merge(&patch)).await
                    && wasmop_tests::condition(&written, "Ready").is_some_and(|c| c["reason"] == "Conflict")
                {
                    flipped += 1;
                }
                tokio::time::sleep(Duration::from_millis(100)).await;
            }
            flipped
        })
    };
    let flipped = writer.await?;
    let probe =
        wait_until(&probes, "contested", "reconciled", |p| p.data["status"]["reconciles"].as_i64() >= Some(1)).await?;
    assert!(host.host().metrics().conflicts_of("fixture-probe") >= 1, "the concurrent writer caused a conflict");
    assert_eq!(probe.data["status"]["external"], 24, "the other writer's field is kept");
    assert_eq!(probe.data["status"]["observedGeneration"].as_i64(), probe.metadata.generation);
    // A conflict that is retried is no failure of the object: no Warning Event, no failure
    // conditions (they would flip Ready and cost the API server two writes per conflict).
    let warned: Vec<_> = wasmop_tests::warnings_about(&client, &ns, "contested")
        .await?
        .into_iter()
        .filter_map(|e| e.reason.filter(|r| r == "Conflict"))
        .collect();
    assert_eq!(flipped, 0, "Ready showed a retried conflict as a failure");
    assert!(warned.is_empty(), "retried conflicts were reported as failures: {} Conflict Warning Events", warned.len());
    host.stop().await;
    Ok(())
}

fn annotation(object: &DynamicObject, key: &str) -> Option<String> {
    object.annotations().get(key).cloned()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn bulk_dependents_no_longer_desired_are_deleted_plugin_checks_gate_and_read_only_ones_are_never_written()
-> anyhow::Result<()> {
    let client = client().await?;
    let ns = namespace(&client, "bulk-dependents").await?;
    let config_maps = api(&client, &ns, "", "v1", "ConfigMap", "configmaps");
    let host = RunningHost::start(&client, &ns, &["fixture-bulk"], Limits::default())?;
    let settings = json!({ "apiVersion": "v1", "kind": "ConfigMap", "metadata": { "name": "settings" }, "data": { "value": "v1" } });
    apply(&client, settings, Some(&ns)).await?;
    let primary = json!({
        "apiVersion": "v1", "kind": "ConfigMap",
        "metadata": { "name": "p", "labels": { "wasmop.dev/fixture": "bulk" } },
        "data": { "count": "3", "observe": "settings", "gate": "open" },
    });
    apply(&client, primary, Some(&ns)).await?;
    let p = wait_until(&config_maps, "p", "3 bulk objects and the observed value", |p| {
        annotation(p, "wasmop.dev/bulk").as_deref() == Some("3")
            && annotation(p, "wasmop.dev/observed").as_deref() == Some("v1")
    })
    .await?;
    for i in 0..3 {
        assert!(owned_by(&config_maps.get(&format!("p-{i}")).await?, &p), "p-{i} is owned by its primary");
    }

    assert!(config_maps.get_opt("p-gated").await?.is_some(), "the plugin's check lets the gated dependent exist");

    let shrink = json!({ "data": { "count": "1", "gate": "shut" } });
    config_maps.patch("p", &PatchParams::default(), &Patch::Merge(shrink)).await?;
    wait_for(&config_maps, "p-gated", "deleted: the plugin's check no longer holds", |o| o.is_none()).await?;
    for gone in ["p-1", "p-2"] {
        wait_for(&config_maps, gone, "deleted: no longer desired", |o| o.is_none()).await?;
    }
    wait_until(&config_maps, "p", "1 bulk object", |p| annotation(p, "wasmop.dev/bulk").as_deref() == Some("1"))
        .await?;
    assert!(config_maps.get_opt("p-0").await?.is_some(), "the desired one stays");

    config_maps.patch("settings", &PatchParams::default(), &Patch::Merge(json!({ "data": { "value": "v2" } }))).await?;
    wait_until(&config_maps, "p", "the observed change", |p| {
        annotation(p, "wasmop.dev/observed").as_deref() == Some("v2")
    })
    .await?;
    let settings = config_maps.get("settings").await?;
    let managers: Vec<_> = settings.managed_fields().iter().filter_map(|f| f.manager.clone()).collect();
    assert!(!managers.iter().any(|m| m.starts_with("wasmop-")), "a read-only dependent is never written: {managers:?}");
    host.stop().await;
    Ok(())
}

/// Waits for a Warning Event with `reason` about `object` (core/v1, by `involvedObject.name`);
/// returns its message.
async fn warning(client: &Client, ns: &str, object: &str, reason: &str) -> anyhow::Result<String> {
    let events: Api<CoreEvent> = Api::namespaced(client.clone(), ns);
    let about = ListParams::default().fields(&format!("involvedObject.name={object}"));
    within(WAIT, &format!("a {reason} Warning Event on {object}"), async {
        loop {
            let found = events.list(&about).await?.items.into_iter().find_map(|e| {
                let warning = e.type_.as_deref() == Some("Warning") && e.reason.as_deref() == Some(reason);
                warning.then(|| e.message.unwrap_or_default())
            });
            if let Some(message) = found {
                return anyhow::Ok(message);
            }
            tokio::time::sleep(Duration::from_millis(200)).await;
        }
    })
    .await?
}

/// The host's writes for `plugin` other than Events, from its metrics.
fn writes_but_events(host: &RunningHost, plugin: &str) -> Vec<String> {
    let text = host.host().metrics().encode();
    let prefix = format!("wasmop_writes_total{{plugin=\"{plugin}\"");
    text.lines().filter(|l| l.starts_with(&prefix) && !l.contains("verb=\"Event\"")).map(String::from).collect()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn undeclared_kind_is_refused_and_nothing_is_written() -> anyhow::Result<()> {
    let client = client().await?;
    let ns = namespace(&client, "capability").await?;
    let config_maps = api(&client, &ns, "", "v1", "ConfigMap", "configmaps");
    let secrets = api(&client, &ns, "", "v1", "Secret", "secrets");
    let host = RunningHost::start(&client, &ns, &["fixture-bulk"], Limits::default())?;
    // Two good ConfigMaps, a gated one, and a Secret the plugin never declared.
    let primary = json!({
        "apiVersion": "v1", "kind": "ConfigMap",
        "metadata": { "name": "p", "labels": { "wasmop.dev/fixture": "bulk" } },
        "data": { "count": "2", "gate": "open", "rogue": "Secret" },
    });
    apply(&client, primary, Some(&ns)).await?;
    let message = warning(&client, &ns, "p", "CapabilityDenied").await?;
    assert!(
        message.contains(
            "plugin \"fixture-bulk\" may not write v1/Secret \"p-rogue\": dependent \"bulk\" is declared as v1/ConfigMap"
        ),
        "{message}"
    );
    for name in ["p-0", "p-1", "p-gated"] {
        assert!(config_maps.get_opt(name).await?.is_none(), "{name} was not written either");
    }
    assert!(secrets.get_opt("p-rogue").await?.is_none(), "the Secret was not written");
    let writes = writes_but_events(&host, "fixture-bulk");
    assert!(writes.is_empty(), "the host wrote only Events: {writes:?}");

    // Without the rogue object, the plugin works again.
    config_maps.patch("p", &PatchParams::default(), &Patch::Merge(json!({ "data": { "rogue": null } }))).await?;
    for name in ["p-0", "p-1"] {
        wait_for(&config_maps, name, "written once the plugin behaves", |o| o.is_some()).await?;
    }
    wait_until(&config_maps, "p", "2 bulk objects", |p| annotation(p, "wasmop.dev/bulk").as_deref() == Some("2"))
        .await?;
    assert!(secrets.get_opt("p-rogue").await?.is_none(), "the Secret never was");
    host.stop().await;
    Ok(())
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_dependent_in_another_namespace_is_refused_and_nothing_is_written() -> anyhow::Result<()> {
    let client = client().await?;
    let ns = namespace(&client, "capability-ns").await?;
    let other = namespace(&client, "capability-other").await?;
    let config_maps = api(&client, &ns, "", "v1", "ConfigMap", "configmaps");
    let others = api(&client, &other, "", "v1", "ConfigMap", "configmaps");
    let host = RunningHost::start(&client, &ns, &["fixture-bulk"], Limits::default())?;
    // One good ConfigMap, and one in a namespace the owner reference cannot reach.
    let primary = json!({
        "apiVersion": "v1", "kind": "ConfigMap",
        "metadata": { "name": "p", "labels": { "wasmop.dev/fixture": "bulk" } },
        "data": { "count": "1", "elsewhere": other },
    });
    apply(&client, primary, Some(&ns)).await?;
    let message = warning(&client, &ns, "p", "CapabilityDenied").await?;
    let refused = format!("may not write v1/ConfigMap \"p-elsewhere\" in namespace \"{other}\"");
    assert!(message.contains(&refused), "{message}");
    assert!(others.get_opt("p-elsewhere").await?.is_none(), "nothing was written in the other namespace");
    assert!(config_maps.get_opt("p-0").await?.is_none(), "nor in the primary's");
    let writes = writes_but_events(&host, "fixture-bulk");
    assert!(writes.is_empty(), "the host wrote only Events: {writes:?}");

    // Naming the primary's own namespace is fine.
    config_maps.patch("p", &PatchParams::default(), &Patch::Merge(json!({ "data": { "elsewhere": ns } }))).await?;
    wait_until(&config_maps, "p", "2 bulk objects", |p| annotation(p, "wasmop.dev/bulk").as_deref() == Some("2"))
        .await?;
    assert!(config_maps.get_opt("p-elsewhere").await?.is_some(), "written in the primary's namespace");
    assert!(others.get_opt("p-elsewhere").await?.is_none());
    host.stop().await;
    Ok(())
}

fn nodes(memcached: &DynamicObject) -> Vec<String> {
    let nodes = memcached.data["status"]["nodes"].as_array().cloned().unwrap_or_default();
    nodes.iter().filter_map(|n| n.as_str().map(String::from)).collect()
}

/// The Operator SDK tutorial: the Deployment follows `spec.size`, and the status lists the pods
/// the deployment and replicaset controllers create (they stay Pending: no scheduler runs).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn memcached_sizes_its_deployment_and_lists_its_pods() -> anyhow::Result<()> {
    let client = client().await?;
    let ns = namespace(&client, "memcached").await?;
    apply_file(&client, &workspace_root().join("plugins/memcached/crd.yaml"), None).await?;
    let memcacheds = api(&client, &ns, "cache.wasmop.dev", "v1", "Memcached", "memcacheds");
    let deployments = api(&client, &ns, "apps", "v1", "Deployment", "deployments");
    let pods = api(&client, &ns, "", "v1", "Pod", "pods");
    let host = RunningHost::start(&client, &ns, &["memcached"], Limits::default())?;
    let cache = json!({ "apiVersion": "cache.wasmop.dev/v1", "kind": "Memcached", "metadata": { "name": "cache" }, "spec": { "size": 2 } });
    apply(&client, cache, Some(&ns)).await?;
    for size in [2usize, 3] {
        if size == 3 {
            patch_spec(&memcacheds, "cache", json!({ "size": 3 })).await?;
        }
        wait_until(&deployments, "cache", &format!("{size} replicas"), move |d| d.data["spec"]["replicas"] == size)
            .await?;
        let listed =
            wait_until(&memcacheds, "cache", &format!("{size} nodes"), move |m| nodes(m).len() == size).await?;
        let mut expected: Vec<String> = pods
            .list(&ListParams::default().labels("memcached_cr=cache"))
            .await?
            .items
            .iter()
            .map(|p| p.name_any())
            .collect();
        expected.sort();
        assert_eq!(nodes(&listed), expected, "the status lists the pods the API server holds");
    }
    host.stop().await;
    Ok(())
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_dependent_deleted_by_someone_else_right_after_its_creation_is_created_again() -> anyhow::Result<()> {
    let client = client().await?;
    let ns = namespace(&client, "ghost-dependent").await?;
    let config_maps = api(&client, &ns, "", "v1", "ConfigMap", "configmaps");
    let host = RunningHost::start(&client, &ns, &["fixture-bulk"], Limits::default())?;
    let primary = json!({
        "apiVersion": "v1", "kind": "ConfigMap",
        "metadata": { "name": "p", "labels": { "wasmop.dev/fixture": "bulk" } },
        "data": { "count": "1" },
    });
    apply(&client, primary, Some(&ns)).await?;
    wait_until(&config_maps, "p", "1 bulk object", |p| annotation(p, "wasmop.dev/bulk").as_deref() == Some("1"))
        .await?;
    let first = config_maps.get("p-0").await?;
    // The host must not go on seeing its own create once the watch delivered the object (the
    // cache-level case, with no read in between, is `informer.rs`'s overlay test).
    config_maps.delete("p-0", &DeleteParams::default()).await?;
    let again = wait_until(&config_maps, "p-0", "created again", move |o| o.uid() != first.uid()).await?;
    assert!(owned_by(&again, &config_maps.get("p").await?), "the new p-0 is owned by its primary");
    host.stop().await;
    Ok(())
}

/// The host's records of its own writes empty out once the watches delivered them, whichever
/// the writes: dependents applied and deleted, patches of a primary without a generation, and
/// status and finalizer patches that the generation-aware change filter drops. Before, records
/// of filtered events stayed forever, one per object.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn own_write_records_empty_out_once_the_watches_deliver_the_writes() -> anyhow::Result<()> {
    let client = client().await?;
    let ns = namespace(&client, "own-write-records").await?;
    let config_maps = api(&client, &ns, "", "v1", "ConfigMap", "configmaps");
    let probes = probes(&client, &ns);
    let host = RunningHost::start(&client, &ns, &["fixture-bulk", "fixture-probe"], Limits::default())?;
    for name in ["one", "two"] {
        create_probe(&client, &ns, name, json!({})).await?;
        wait_until(&probes, name, "reconciled", |p| p.data["status"]["observedGeneration"] == 1).await?;
    }
    for p in ["p", "q"] {
        let primary = json!({
            "apiVersion": "v1", "kind": "ConfigMap",
            "metadata": { "name": p, "labels": { "wasmop.dev/fixture": "bulk" } },
            "data": { "count": "3" },
        });
        apply(&client, primary, Some(&ns)).await?;
        wait_until(&config_maps, p, "3 bulk objects", |p| annotation(p, "wasmop.dev/bulk").as_deref() == Some("3"))
            .await?;
    }
    config_maps.patch("p", &PatchParams::default(), &Patch::Merge(json!({ "data": { "count": "1" } }))).await?;
    wait_until(&config_maps, "p", "1 bulk object", |p| annotation(p, "wasmop.dev/bulk").as_deref() == Some("1"))
        .await?;
    wait_for(&config_maps, "p-2", "deleted: no longer desired", |o| o.is_none()).await?;
    let metrics = host.host().metrics().clone();
    let left = || ["fixture-bulk", "fixture-probe"].map(|p| metrics.own_write_records_of(p));
    within(WAIT, "no own-write record left", async {
        while left() != [0, 0] {
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
    })
    .await
    .with_context(|| format!("records left (bulk, probe): {:?}", left()))?;
    host.stop().await;
    Ok(())
}
