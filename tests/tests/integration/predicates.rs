//! Guest predicates against the real kube-apiserver, with the `fixture-predicate` plugin: its
//! primary's predicate (`generation-changed or (labels-changed and plugin("not-only-tier"))`)
//! keeps updates of the `tier` label alone from reconciling, and its watch of owned ConfigMaps'
//! predicate (`plugin("data-changed")`) keeps ConfigMap changes without new data from
//! reconciling. The calls of the plugin's `filter` export are counted from the host's metrics.
//!
//! "Not reconciled" is checked with a barrier. The host's count of a watch's events
//! (`wasmop_watch_events_total`, passed or filtered) shows when it has decided the change under
//! test; a change that passes, made after that, must then reconcile exactly once. A change that
//! wrongly passed would have been enqueued at its decision, before the barrier was even sent,
//! and counted as a reconcile of its own (a change arriving while a reconcile runs reconciles
//! again afterwards).

use std::sync::Arc;

use kube::api::{Api, ApiResource, DynamicObject, GroupVersionKind, Patch, PatchParams, PostParams};
use kube::{Client, ResourceExt};
use serde_json::{Value, json};
use wasmop::metrics::{Metrics, WatchEvents};
use wasmop::runtime::Limits;
use wasmop_tests::{RunningHost, apply_file, client, namespace, until, wait_until, workspace_root};

const PLUGIN: &str = "fixture-predicate";

fn tiereds(client: &Client, ns: &str) -> Api<DynamicObject> {
    let gvk = GroupVersionKind::gvk("test.wasmop.dev", "v1", "Tiered");
    Api::namespaced_with(client.clone(), ns, &ApiResource::from_gvk_with_plural(&gvk, "tiereds"))
}

async fn setup(test: &str) -> anyhow::Result<(Client, String, Api<DynamicObject>)> {
    let client = client().await?;
    apply_file(&client, &workspace_root().join("plugins/fixtures/predicate/crd.yaml"), None).await?;
    let ns = namespace(&client, test).await?;
    let api = tiereds(&client, &ns);
    Ok((client, ns, api))
}

async fn create(api: &Api<DynamicObject>, name: &str, labels: Value) -> anyhow::Result<()> {
    let object = json!({ "apiVersion": "test.wasmop.dev/v1", "kind": "Tiered",
                         "metadata": { "name": name, "labels": labels }, "spec": { "payload": "one" } });
    api.create(&PostParams::default(), &serde_json::from_value(object)?).await?;
    Ok(())
}

fn reconciles(object: &DynamicObject) -> u64 {
    object.data["status"]["reconciles"].as_u64().unwrap_or(0)
}

async fn patch(api: &Api<DynamicObject>, name: &str, patch: Value) -> anyhow::Result<()> {
    api.patch(name, &PatchParams::default(), &Patch::Merge(&patch)).await?;
    Ok(())
}

/// Waits until the host has decided one more event of `events` than `before` (passed, filtered).
async fn decided(events: &WatchEvents, before: (u64, u64), what: &str) -> anyhow::Result<(u64, u64)> {
    let now = async || Ok((events.passed(), events.filtered()));
    until(what, now, |(passed, filtered)| passed + filtered > before.0 + before.1).await
}

fn counts(events: &WatchEvents) -> (u64, u64) {
    (events.passed(), events.filtered())
}

fn filter_calls(metrics: &Arc<Metrics>) -> u64 {
    metrics.calls_of(PLUGIN, "filter")
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn updates_of_the_tier_label_alone_do_not_reconcile_while_other_label_and_spec_changes_do() -> anyhow::Result<()>
{
    let (client, ns, api) = setup("predicate-primary").await?;
    create(&api, "t", json!({ "tier": "a", "team": "x" })).await?;
    let host = RunningHost::start(&client, &ns, &[PLUGIN], Limits::default())?;
    let metrics = host.host().metrics().clone();
    let events = metrics.watch_events(PLUGIN, "primary");
    wait_until(&api, "t", "the first reconcile", |t| reconciles(t) == 1).await?;
    assert_eq!(filter_calls(&metrics), 0, "a create passes on the built-in term");

    // The tier label alone: the plugin is asked, and says no.
    let before = counts(&events);
    patch(&api, "t", json!({ "metadata": { "labels": { "tier": "b" } } })).await?;
    let after = decided(&events, before, "the tier change to be decided").await?;
    assert_eq!(after, (before.0, before.1 + 1), "the tier change was filtered out");
    assert_eq!(filter_calls(&metrics), 1, "the plugin decided it");

    // Another label: the plugin is asked, and passes it; the reconcile sees the tier too.
    patch(&api, "t", json!({ "metadata": { "labels": { "team": "y" } } })).await?;
    let t = wait_until(&api, "t", "the team change reconciled", |t| t.data["status"]["team"] == "y").await?;
    assert_eq!(reconciles(&t), 2, "the tier change did not reconcile: {:?}", t.data["status"]);
    assert_eq!(t.data["status"]["tier"], "b", "the cache holds the tier change");
    assert_eq!(filter_calls(&metrics), 2);

    // An annotation: no built-in term holds, the plugin is not asked.
    let before = counts(&events);
    patch(&api, "t", json!({ "metadata": { "annotations": { "note": "x" } } })).await?;
    let after = decided(&events, before, "the annotation change to be decided").await?;
    assert_eq!(after, (before.0, before.1 + 1), "the annotation change was filtered out");

    // The spec: a new generation passes on the built-in term, without the plugin.
    patch(&api, "t", json!({ "spec": { "payload": "two" } })).await?;
    let t =
        wait_until(&api, "t", "the spec change reconciled", |t| t.data["status"]["observedGeneration"] == 2).await?;
    assert_eq!(reconciles(&t), 3, "neither the annotation change nor another reconciled: {:?}", t.data["status"]);
    assert_eq!(filter_calls(&metrics), 2, "the generation decided without the plugin");
    host.stop().await;
    Ok(())
}

/// The ConfigMap `settings` the Tiered `owner` controls, watched by the plugin.
fn config_map(ns: &str, owner: &DynamicObject, value: &str) -> anyhow::Result<DynamicObject> {
    let owner = json!({ "apiVersion": "test.wasmop.dev/v1", "kind": "Tiered", "name": owner.name_any(),
                        "uid": owner.uid(), "controller": true });
    Ok(serde_json::from_value(json!({
        "apiVersion": "v1", "kind": "ConfigMap",
        "metadata": { "name": "settings", "namespace": ns, "labels": { "wasmop.dev/fixture": "predicate" },
                      "ownerReferences": [owner] },
        "data": { "v": value },
    }))?)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_watch_predicate_keeps_config_map_changes_without_new_data_from_reconciling() -> anyhow::Result<()> {
    let (client, ns, api) = setup("predicate-watch").await?;
    let maps: Api<DynamicObject> = Api::namespaced_with(
        client.clone(),
        &ns,
        &ApiResource::from_gvk(&GroupVersionKind::gvk("", "v1", "ConfigMap")),
    );
    create(&api, "w", json!({})).await?;
    let host = RunningHost::start(&client, &ns, &[PLUGIN], Limits::default())?;
    let metrics = host.host().metrics().clone();
    let events = metrics.watch_events(PLUGIN, "ConfigMap");
    let w = wait_until(&api, "w", "the first reconcile", |w| reconciles(w) == 1).await?;

    // Created: the plugin's filter passes creates.
    maps.create(&PostParams::default(), &config_map(&ns, &w, "1")?).await?;
    let w = wait_until(&api, "w", "the ConfigMap's creation reconciled", |w| w.data["status"]["data"] == json!(["1"]))
        .await?;
    assert_eq!(reconciles(&w), 2);
    let calls = filter_calls(&metrics);
    assert_eq!(calls, 1, "the plugin decided the create");

    // A label only: the plugin says no.
    let before = counts(&events);
    let labelled = json!({ "metadata": { "labels": { "extra": "1" } } });
    maps.patch("settings", &PatchParams::default(), &Patch::Merge(&labelled)).await?;
    let after = decided(&events, before, "the label change to be decided").await?;
    assert_eq!(after, (before.0, before.1 + 1), "the label change was filtered out");
    assert_eq!(filter_calls(&metrics), calls + 1);

    // New data: the plugin passes it.
    let data = json!({ "data": { "v": "2" } });
    maps.patch("settings", &PatchParams::default(), &Patch::Merge(&data)).await?;
    let w = wait_until(&api, "w", "the data change reconciled", |w| w.data["status"]["data"] == json!(["2"])).await?;
    assert_eq!(reconciles(&w), 3, "the label change did not reconcile: {:?}", w.data["status"]);
    host.stop().await;
    Ok(())
}
