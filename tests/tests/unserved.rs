//! A declared kind the API server does not serve, against the real kube-apiserver:
//! `fixture-unserved` declares a dependent of kind `Widgit` (`unserved.wasmop.dev/v1`), a typo of
//! the served `Widget`. The plugin loads, its primaries say which kind is missing and what it
//! may have meant, `/readyz` says so too; once a CRD serves `Widgit`, the plugin reconciles
//! without a restart.
//!
//! A CRD deleted while its plugin runs is reported the same way, and the plugin reconciles again
//! once it is back.
//!
//! The CRDs are cluster-wide: each test removes the `Widgit` CRD before and after it runs, one
//! test at a time.

use std::path::Path;
use std::time::Duration;

use k8s_openapi::apiextensions_apiserver::pkg::apis::apiextensions::v1::CustomResourceDefinition;
use kube::Client;
use kube::api::{Api, ApiResource, DeleteParams, DynamicObject, GroupVersionKind, ListParams};
use kube::runtime::wait::{await_condition, conditions};
use serde_json::json;
use wasmop_tests::{
    apply, apply_file, bare_host, client, condition, event_note, namespace, plugin, until, within, workspace_root,
};

const WAIT: Duration = Duration::from_secs(60);
const GROUP: &str = "unserved.wasmop.dev";
const EXPECTED: &str = "Widgit is not served by the API server (unserved.wasmop.dev/v1); did you mean Widget?";

/// The tests add and remove the cluster-wide `Widgit` CRD: one at a time.
static WIDGITS: tokio::sync::Mutex<()> = tokio::sync::Mutex::const_new(());

/// A namespaced CRD of `kind` in [`GROUP`], with a free-form spec.
fn crd(kind: &str) -> serde_json::Value {
    let plural = format!("{}s", kind.to_lowercase());
    json!({
        "apiVersion": "apiextensions.k8s.io/v1", "kind": "CustomResourceDefinition",
        "metadata": { "name": format!("{plural}.{GROUP}") },
        "spec": {
            "group": GROUP, "scope": "Namespaced",
            "names": { "kind": kind, "plural": plural, "singular": kind.to_lowercase(), "listKind": format!("{kind}List") },
            "versions": [{ "name": "v1", "served": true, "storage": true, "schema": { "openAPIV3Schema": {
                "type": "object", "x-kubernetes-preserve-unknown-fields": true } } }],
        },
    })
}

/// Deletes the `Widgit` CRD, if any, and waits until it is gone and the API server no longer
/// serves the kind: the CRD object goes before its handler and its discovery entry do, and a
/// host that starts in between sees `Widgit` served.
async fn remove_widgits(client: &Client) -> anyhow::Result<()> {
    let crds: Api<CustomResourceDefinition> = Api::all(client.clone());
    let name = format!("widgits.{GROUP}");
    if crds.delete(&name, &DeleteParams::default()).await.is_ok() {
        within(WAIT, "the Widgit CRD to go", await_condition(crds, &name, conditions::is_deleted(""))).await??;
    }
    let gvk = GroupVersionKind::gvk(GROUP, "v1", "Widgit");
    let widgits: Api<DynamicObject> =
        Api::all_with(client.clone(), &ApiResource::from_gvk_with_plural(&gvk, "widgits"));
    let served = async || {
        let discovered = kube::discovery::pinned_kind(client, &gvk).await.is_ok();
        let listed = widgits.list(&ListParams::default().limit(1)).await.is_ok();
        Ok(discovered || listed)
    };
    until("the API server to stop serving Widgit", served, |served| !served).await?;
    Ok(())
}

/// `wasmop inspect --check-cluster` of the fixture, against the test bed's API server.
fn inspect_check_cluster() -> anyhow::Result<std::process::Output> {
    Ok(std::process::Command::new(wasmop_tests::wasmop_binary()?)
        .args(["inspect", "--check-cluster"])
        .arg(plugin("fixture-unserved"))
        .env("KUBECONFIG", wasmop_tests::kubeconfig())
        .env("RUST_LOG", "off")
        .output()?)
}

fn holds(object: &DynamicObject, type_: &str, status: &str) -> bool {
    condition(object, type_).is_some_and(|c| c["status"] == status)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_dependent_of_an_unserved_kind_is_reported_with_the_closest_and_runs_once_served() -> anyhow::Result<()> {
    let _alone = WIDGITS.lock().await;
    let client = client().await?;
    remove_widgits(&client).await?;
    fixture_crds(&client, false).await?;
    let ns = namespace(&client, "unserved").await?;
    let shapes = shapes(&client, &ns);
    apply(&client, shape("s1"), Some(&ns)).await?;

    let host = unserved_host(&client, &ns).await?;

    let expected = EXPECTED;
    let waiting = within(
        WAIT,
        "s1: Degraded, KindNotServed",
        await_condition(shapes.clone(), "s1", |o: Option<&DynamicObject>| {
            o.is_some_and(|o| condition(o, "Degraded").is_some_and(|c| c["reason"] == "KindNotServed"))
        }),
    )
    .await??
    .expect("waited for it");
    let degraded = condition(&waiting, "Degraded").expect("waited for it");
    assert_eq!(degraded["message"], expected);
    assert!(holds(&waiting, "Ready", "False"));
    let note = event_note(&client, &ns, WAIT, "s1", "did you mean Widget?").await?;
    assert_eq!(note, format!("not reconciled: {expected}"));
    assert_eq!(host.unserved("fixture-unserved").as_deref(), Some(expected));
    let readyz = host.ready().expect_err("the plugin waits");
    assert!(readyz.contains(expected), "{readyz}");
    // `wasmop inspect --check-cluster` says the same before anything runs.
    let checked = inspect_check_cluster()?;
    assert!(!checked.status.success(), "inspect --check-cluster passed with Widgit unserved");
    let stderr = String::from_utf8_lossy(&checked.stderr);
    assert!(stderr.contains(expected), "{stderr}");

    // The kind becomes served: the plugin reconciles, without a restart.
    apply(&client, crd("Widgit"), None).await?;
    within(
        WAIT,
        "s1: Ready",
        await_condition(shapes.clone(), "s1", |o: Option<&DynamicObject>| {
            o.is_some_and(|o| holds(o, "Ready", "True") && holds(o, "Degraded", "False"))
        }),
    )
    .await??;
    let gvk = GroupVersionKind::gvk(GROUP, "v1", "Widgit");
    let widgits: Api<DynamicObject> =
        Api::namespaced_with(client.clone(), &ns, &ApiResource::from_gvk_with_plural(&gvk, "widgits"));
    let names: Vec<String> =
        widgits.list(&ListParams::default()).await?.items.into_iter().filter_map(|w| w.metadata.name).collect();
    assert_eq!(names, ["s1"]);
    assert_eq!(host.unserved("fixture-unserved"), None);
    host.ready().map_err(anyhow::Error::msg)?;
    let checked = inspect_check_cluster()?;
    assert!(checked.status.success(), "{}", String::from_utf8_lossy(&checked.stderr));

    host.stop_all().await;
    remove_widgits(&client).await?;
    Ok(())
}

/// Waits until the API server serves `Widgit` (its discovery and its list), after its CRD was
/// applied.
async fn widgits_served(client: &Client) -> anyhow::Result<()> {
    let gvk = GroupVersionKind::gvk(GROUP, "v1", "Widgit");
    let widgits: Api<DynamicObject> =
        Api::all_with(client.clone(), &ApiResource::from_gvk_with_plural(&gvk, "widgits"));
    let served = async || {
        let discovered = kube::discovery::pinned_kind(client, &gvk).await.is_ok();
        let listed = widgits.list(&ListParams::default().limit(1)).await.is_ok();
        Ok(discovered && listed)
    };
    until("the API server to serve Widgit", served, |served| *served).await?;
    Ok(())
}

/// The CRDs of the fixture's kinds: `Shape` (its primary), `Widget`, and, with `widgits`, the
/// `Widgit` it means, once the API server serves it.
async fn fixture_crds(client: &Client, widgits: bool) -> anyhow::Result<()> {
    apply_file(client, &shapes_crd(), None).await?;
    apply(client, crd("Widget"), None).await?;
    if widgits {
        apply(client, crd("Widgit"), None).await?;
        widgits_served(client).await?;
    }
    Ok(())
}

/// The file of the `Shape` CRD.
fn shapes_crd() -> std::path::PathBuf {
    workspace_root().join("plugins/fixtures/refused/crd.yaml")
}

/// The fixture's primaries in `ns`.
fn shapes(client: &Client, ns: &str) -> Api<DynamicObject> {
    let gvk = GroupVersionKind::gvk("fixture.wasmop.dev", "v1", "Shape");
    Api::namespaced_with(client.clone(), ns, &ApiResource::from_gvk_with_plural(&gvk, "shapes"))
}

/// A `Shape` named `name`.
fn shape(name: &str) -> serde_json::Value {
    json!({ "apiVersion": "fixture.wasmop.dev/v1", "kind": "Shape", "metadata": { "name": name } })
}

/// A host of `fixture-unserved` alone, watching `ns`, once it is loaded.
async fn unserved_host(client: &Client, ns: &str) -> anyhow::Result<std::sync::Arc<wasmop::host::Host>> {
    let host = bare_host(client, ns)?;
    let bytes = std::fs::read(plugin("fixture-unserved"))?;
    host.install("test", Path::new("fixture-unserved.wasm"), bytes, None).await?;
    host.loaded();
    Ok(host)
}

/// The CRD of a watched kind deleted while the plugin runs: the host says the kind is not served,
/// as when it is missing at start (the primaries' conditions and Events, `/readyz`, the log);
/// once the CRD is back, the plugin starts again and reconciles, without a restart.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_crd_deleted_while_its_plugin_runs_is_reported_and_the_plugin_reconciles_once_it_is_back()
-> anyhow::Result<()> {
    let _alone = WIDGITS.lock().await;
    let client = client().await?;
    remove_widgits(&client).await?;
    fixture_crds(&client, true).await?;
    let ns = namespace(&client, "unserved-deleted").await?;
    let shapes = shapes(&client, &ns);
    apply(&client, shape("s1"), Some(&ns)).await?;
    let gvk = GroupVersionKind::gvk(GROUP, "v1", "Widgit");
    let widgits: Api<DynamicObject> =
        Api::namespaced_with(client.clone(), &ns, &ApiResource::from_gvk_with_plural(&gvk, "widgits"));
    let names = async || -> anyhow::Result<Vec<String>> {
        Ok(widgits.list(&ListParams::default()).await?.items.into_iter().filter_map(|w| w.metadata.name).collect())
    };
    let ready =
        |o: Option<&DynamicObject>| o.is_some_and(|o| holds(o, "Ready", "True") && holds(o, "Degraded", "False"));

    let host = unserved_host(&client, &ns).await?;
    within(WAIT, "s1: Ready", await_condition(shapes.clone(), "s1", ready)).await??;
    until("the dependent Widgit s1", names, |names| names == &["s1"]).await?;
    assert_eq!(host.unserved("fixture-unserved"), None);

    // The Widgit CRD goes while the plugin runs (and its objects with it).
    remove_widgits(&client).await?;
    let waiting = within(
        WAIT,
        "s1: Degraded, KindNotServed",
        await_condition(shapes.clone(), "s1", |o: Option<&DynamicObject>| {
            o.is_some_and(|o| condition(o, "Degraded").is_some_and(|c| c["reason"] == "KindNotServed"))
        }),
    )
    .await??
    .expect("waited for it");
    assert_eq!(condition(&waiting, "Degraded").expect("waited for it")["message"], EXPECTED);
    assert!(holds(&waiting, "Ready", "False"));
    let note = event_note(&client, &ns, WAIT, "s1", "did you mean Widget?").await?;
    assert_eq!(note, format!("not reconciled: {EXPECTED}"));
    assert_eq!(host.unserved("fixture-unserved").as_deref(), Some(EXPECTED));
    let readyz = host.ready().expect_err("the plugin waits");
    assert!(readyz.contains(EXPECTED), "{readyz}");

    // The CRD is back: the plugin starts again and makes its dependent again.
    apply(&client, crd("Widgit"), None).await?;
    within(WAIT, "s1: Ready again", await_condition(shapes.clone(), "s1", ready)).await??;
    until("the dependent Widgit s1 again", names, |names| names == &["s1"]).await?;
    assert_eq!(host.unserved("fixture-unserved"), None);
    host.ready().map_err(anyhow::Error::msg)?;

    host.stop_all().await;
    remove_widgits(&client).await?;
    Ok(())
}

/// The CRD of the plugin's primary kind deleted while it runs: the host says the kind is not
/// served (`/readyz`, the log), and reconciles the primaries made once the CRD is back.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_primary_crd_deleted_while_its_plugin_runs_is_reported_and_new_primaries_reconcile_once_it_is_back()
-> anyhow::Result<()> {
    let _alone = WIDGITS.lock().await;
    let client = client().await?;
    fixture_crds(&client, true).await?;
    let ns = namespace(&client, "unserved-primary").await?;
    let shapes = shapes(&client, &ns);
    let ready = |o: Option<&DynamicObject>| o.is_some_and(|o| holds(o, "Ready", "True"));
    let host = unserved_host(&client, &ns).await?;
    apply(&client, shape("s1"), Some(&ns)).await?;
    within(WAIT, "s1: Ready", await_condition(shapes.clone(), "s1", ready)).await??;

    // The Shape CRD goes while the plugin runs (and s1 with it).
    let crds: Api<CustomResourceDefinition> = Api::all(client.clone());
    let name = "shapes.fixture.wasmop.dev";
    crds.delete(name, &DeleteParams::default()).await?;
    within(WAIT, "the Shape CRD to go", await_condition(crds.clone(), name, conditions::is_deleted(""))).await??;
    let unserved = async || Ok(host.unserved("fixture-unserved"));
    let told =
        |u: &Option<String>| u.as_deref().is_some_and(|u| u.starts_with("Shape is not served by the API server"));
    until("the host to say Shape is not served", unserved, told).await?;
    let readyz = host.ready().expect_err("the plugin waits");
    assert!(readyz.contains("Shape is not served"), "{readyz}");

    // The CRD is back: a new primary reconciles.
    apply_file(&client, &shapes_crd(), None).await?;
    let created = async || Ok(apply(&client, shape("s2"), Some(&ns)).await.is_ok());
    until("s2 created once Shape is served", created, |created| *created).await?;
    within(WAIT, "s2: Ready", await_condition(shapes.clone(), "s2", ready)).await??;
    assert_eq!(host.unserved("fixture-unserved"), None);
    host.ready().map_err(anyhow::Error::msg)?;

    host.stop_all().await;
    remove_widgits(&client).await?;
    Ok(())
}

/// Installed from a `ReconcilerPlugin`, the waiting plugin shows on the resource's status:
/// loaded, not ready, `Degraded` with `KindNotServed` and the message; Ready once served.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_reconciler_plugin_waiting_for_an_unserved_kind_is_degraded_until_it_is_served() -> anyhow::Result<()> {
    use k8s_openapi::api::core::v1::ConfigMap;
    use kube::api::PostParams;
    use wasmop::metrics::Metrics;
    use wasmop::settings::HostConfig;
    use wasmop_tests::{ResourceHost, module_map, reconciler_plugin, settings};

    let _alone = WIDGITS.lock().await;
    let client = client().await?;
    remove_widgits(&client).await?;
    apply_file(&client, &workspace_root().join("host/crds/reconcilerplugin.yaml"), None).await?;
    fixture_crds(&client, false).await?;
    let ns = namespace(&client, "unserved-resource").await?;
    let loader = ResourceHost::start(&client, settings(&ns, HostConfig::default()), Metrics::new())?;
    let maps: Api<ConfigMap> = Api::namespaced(client.clone(), &ns);
    maps.create(&PostParams::default(), &module_map(&std::fs::read(plugin("fixture-unserved"))?)).await?;
    let resources: Api<DynamicObject> = Api::all_with(client.clone(), &wasmop::loader::resource::resource());
    let name = format!("unserved-{ns}");
    resources.create(&PostParams::default(), &reconciler_plugin(&name, &ns)?).await?;

    let waiting = |r: &DynamicObject| {
        holds(r, "Loaded", "True")
            && holds(r, "Ready", "False")
            && condition(r, "Degraded").is_some_and(|c| {
                c["status"] == "True" && c["reason"] == "KindNotServed" && c["message"].as_str() == Some(EXPECTED)
            })
    };
    until("the resource degraded, naming the kind", async || Ok(resources.get(&name).await?), waiting).await?;
    apply(&client, crd("Widgit"), None).await?;
    let served = |r: &DynamicObject| holds(r, "Ready", "True") && holds(r, "Degraded", "False");
    until("the resource ready once served", async || Ok(resources.get(&name).await?), served).await?;

    resources.delete(&name, &DeleteParams::default()).await?;
    until("the resource gone", async || Ok(resources.get_opt(&name).await?), |r| r.is_none()).await?;
    loader.stop().await?;
    remove_widgits(&client).await?;
    Ok(())
}
