//! End to end against the real kube-apiserver: the host, in-process, with compiled plugins.

use std::time::Duration;

use k8s_openapi::api::core::v1::ConfigMap;
use k8s_openapi::api::events::v1::Event;
use kube::api::{
    Api, ApiResource, DeleteParams, DynamicObject, GroupVersionKind, ListParams, Patch, PatchParams, PostParams,
};
use kube::runtime::wait::{await_condition, conditions};
use kube::{Client, ResourceExt};
use wasmop::runtime::Limits;
use wasmop_tests::{RunningHost, apply_file, client, event_note, namespace, within, workspace_root};

const WAIT: Duration = Duration::from_secs(60);

fn webpages(client: &Client, ns: &str) -> Api<DynamicObject> {
    let gvk = GroupVersionKind::gvk("sample.wasmop.dev", "v1", "WebPage");
    Api::namespaced_with(client.clone(), ns, &ApiResource::from_gvk_with_plural(&gvk, "webpages"))
}

async fn install_webpage_crd(client: &Client) -> anyhow::Result<()> {
    apply_file(client, &workspace_root().join("plugins/webpage/crd.yaml"), None).await?;
    Ok(())
}

/// True once the WebPage's status reports Ready for its current generation.
fn ready_for_current_generation(object: Option<&DynamicObject>) -> bool {
    let Some(object) = object else { return false };
    let status = &object.data["status"];
    let observed = status["observedGeneration"].as_i64();
    let ready = status["conditions"]
        .as_array()
        .is_some_and(|cs| cs.iter().any(|c| c["type"] == "Ready" && c["status"] == "True"));
    ready && observed.is_some() && observed == object.metadata.generation
}

fn webpage(name: &str, html: &str) -> DynamicObject {
    serde_json::from_value(serde_json::json!({
        "apiVersion": "sample.wasmop.dev/v1", "kind": "WebPage",
        "metadata": { "name": name },
        "spec": { "html": html }
    }))
    .expect("a valid WebPage")
}

async fn warnings(client: &Client, ns: &str) -> anyhow::Result<Vec<String>> {
    let events: Api<Event> = Api::namespaced(client.clone(), ns);
    let list = events.list(&ListParams::default()).await?;
    // The host's own (its plugins report as `wasmop-<plugin>`): the API server records Warnings
    // of its own in a namespace now and then (its ClusterIP repair loop: "Cluster IP ... is not
    // allocated; repairing", which failed this test once on a fresh clone).
    let hosts = |e: &Event| e.reporting_controller.as_deref().is_some_and(|c| c.starts_with("wasmop"));
    Ok(list
        .items
        .into_iter()
        .filter(|e| e.type_.as_deref() == Some("Warning") && hosts(e))
        .filter_map(|e| e.note)
        .collect())
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn webpage_is_reconciled_on_create_and_on_spec_change_and_deleted_cleanly() -> anyhow::Result<()> {
    let client = client().await?;
    install_webpage_crd(&client).await?;
    let ns = namespace(&client, "webpage").await?;
    let host = RunningHost::start(&client, &ns, &["webpage"], Limits::default())?;
    let api = webpages(&client, &ns);

    api.create(&PostParams::default(), &webpage("hello", "<h1>one</h1>")).await?;
    within(WAIT, "hello Ready at generation 1", await_condition(api.clone(), "hello", ready_for_current_generation))
        .await??;

    let patch = serde_json::json!({ "spec": { "html": "<h1>two</h1>" } });
    let patched = api.patch("hello", &PatchParams::default(), &Patch::Merge(&patch)).await?;
    assert_eq!(patched.metadata.generation, Some(2));
    within(WAIT, "hello Ready at generation 2", await_condition(api.clone(), "hello", ready_for_current_generation))
        .await??;

    let uid = api.get("hello").await?.uid().expect("uid");
    api.delete("hello", &DeleteParams::default()).await?;
    within(WAIT, "hello deleted", await_condition(api.clone(), "hello", conditions::is_deleted(&uid))).await??;
    // An object with the same name made after the delete is reconciled from scratch.
    api.create(&PostParams::default(), &webpage("hello", "<h1>three</h1>")).await?;
    within(WAIT, "new hello Ready", await_condition(api.clone(), "hello", ready_for_current_generation)).await??;

    assert_eq!(warnings(&client, &ns).await?, Vec::<String>::new(), "no errors were reported");
    host.stop().await;
    Ok(())
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn misbehaving_plugins_fail_with_their_cause_while_a_good_plugin_keeps_working() -> anyhow::Result<()> {
    let client = client().await?;
    install_webpage_crd(&client).await?;
    let ns = namespace(&client, "sandbox").await?;
    let limits = Limits { deadline: Duration::from_millis(500), memory_bytes: 64 << 20, fuel: None };
    let plugins = ["webpage", "fixture-loop", "fixture-alloc", "fixture-panic"];
    let host = RunningHost::start(&client, &ns, &plugins, limits)?;

    let config_maps: Api<ConfigMap> = Api::namespaced(client.clone(), &ns);
    for fixture in ["loop", "alloc", "panic"] {
        let cm: ConfigMap = serde_json::from_value(serde_json::json!({
            "metadata": { "name": fixture, "labels": { "wasmop.dev/fixture": fixture } }
        }))?;
        config_maps.create(&PostParams::default(), &cm).await?;
    }
    let api = webpages(&client, &ns);
    api.create(&PostParams::default(), &webpage("good", "<p>fine</p>")).await?;
    within(WAIT, "good Ready", await_condition(api.clone(), "good", ready_for_current_generation)).await??;

    let deadline = event_note(&client, &ns, WAIT, "loop", "deadline of 500ms exceeded").await?;
    let memory = event_note(&client, &ns, WAIT, "alloc", "memory limit of 64 MiB exceeded").await?;
    let panic = event_note(&client, &ns, WAIT, "panic", "panicked: fixture-panic: panicking on purpose").await?;
    for note in [&deadline, &memory, &panic] {
        assert!(note.starts_with("reconcile of "), "the note names the object: {note}");
    }

    // The host is still serving the good plugin after all those traps.
    let patch = serde_json::json!({ "spec": { "html": "<p>still fine</p>" } });
    api.patch("good", &PatchParams::default(), &Patch::Merge(&patch)).await?;
    within(WAIT, "good Ready at generation 2", await_condition(api.clone(), "good", ready_for_current_generation))
        .await??;
    host.stop().await;
    Ok(())
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn every_object_that_exists_before_the_host_starts_is_reconciled_once_cache_is_synced() -> anyhow::Result<()> {
    let client = client().await?;
    install_webpage_crd(&client).await?;
    let ns = namespace(&client, "initial-list").await?;
    let api = webpages(&client, &ns);
    for i in 0..30 {
        api.create(&PostParams::default(), &webpage(&format!("page-{i}"), "<p>early</p>")).await?;
    }
    // Several reconciles start together while the initial list is still arriving.
    let host = RunningHost::start_with_yaml(
        &client,
        &ns,
        &["webpage"],
        "plugins:\n  webpage:\n    maxConcurrentReconciles: 4\n",
    )?;
    within(WAIT, "all 30 pages Ready", async {
        loop {
            let pages = api.list(&Default::default()).await?;
            if pages.items.iter().filter(|p| ready_for_current_generation(Some(p))).count() == 30 {
                return anyhow::Ok(());
            }
            tokio::time::sleep(Duration::from_millis(200)).await;
        }
    })
    .await??;
    host.stop().await;
    Ok(())
}
