//! What the API server refuses for good, against the real kube-apiserver: a dependent whose
//! desired object has a shape the API server refuses (`fixture-refused`: a ConfigMap with a
//! number in `data`) fails its primary once, in plain words, without retries, until the
//! primary's generation changes.

use std::path::Path;

use kube::Client;
use kube::api::{Api, ApiResource, DynamicObject, GroupVersionKind, Patch, PatchParams};
use serde_json::json;
use wasmop::metrics::Outcome;
use wasmop_tests::{
    apply_file, bare_host, client, condition, namespace, plugin, wait_until, warnings_about, workspace_root,
};

/// The Shapes of `ns`, their CRD applied.
async fn shapes(client: &Client, ns: &str) -> anyhow::Result<Api<DynamicObject>> {
    apply_file(client, &workspace_root().join("plugins/fixtures/refused/crd.yaml"), None).await?;
    let gvk = GroupVersionKind::gvk("fixture.wasmop.dev", "v1", "Shape");
    Ok(Api::namespaced_with(client.clone(), ns, &ApiResource::from_gvk_with_plural(&gvk, "shapes")))
}

/// Applies Shape `name` whose ConfigMap has `data`.
async fn apply_shape(api: &Api<DynamicObject>, name: &str, data: serde_json::Value) -> anyhow::Result<()> {
    let shape = json!({
        "apiVersion": "fixture.wasmop.dev/v1", "kind": "Shape", "metadata": { "name": name },
        "spec": { "configMap": { "data": data } },
    });
    api.patch(name, &PatchParams::apply("refusals-test").force(), &Patch::Apply(&shape)).await?;
    Ok(())
}

/// The number of Warning Events (series counted whole) about `object`, with their notes.
async fn warnings_on(client: &Client, ns: &str, object: &str) -> anyhow::Result<(i32, Vec<String>)> {
    let warnings = warnings_about(client, ns, object).await?;
    let count = warnings.iter().map(|e| e.series.as_ref().map_or(1, |s| s.count)).sum();
    Ok((count, warnings.into_iter().filter_map(|e| e.note).collect()))
}

fn holds(object: &DynamicObject, type_: &str, status: &str) -> bool {
    condition(object, type_).is_some_and(|c| c["status"] == status)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_dependent_the_api_server_refuses_fails_once_per_generation_in_plain_words() -> anyhow::Result<()> {
    let client = client().await?;
    let ns = namespace(&client, "refused-shape").await?;
    let api = shapes(&client, &ns).await?;
    let host = bare_host(&client, &ns)?;
    // Retries 50 ms apart: were the refusal retried, all five attempts would be over in a second.
    let overrides = serde_saphyr::from_str("retry: { initialIntervalMs: 50, multiplier: 1.0 }")?;
    let bytes = std::fs::read(plugin("fixture-refused"))?;
    host.install("test", Path::new("fixture-refused.wasm"), bytes, Some(overrides)).await?;

    apply_shape(&api, "bad", json!({ "a": 1 })).await?;
    let failed = wait_until(&api, "bad", "Degraded", |o| holds(o, "Degraded", "True")).await?;
    let degraded = condition(&failed, "Degraded").expect("waited for it");
    let expected = format!("the ConfigMap \"{ns}/bad\" was refused by the API server: .data.a: expected string, got 1");
    let message = degraded["message"].as_str().unwrap_or_default();
    assert!(message.contains(&expected), "{message}");
    assert!(!message.contains("(, 500)") && !message.contains("valueUnstructured"), "{message}");
    assert_eq!(degraded["reason"], "DependentRefused");
    assert!(holds(&failed, "Reconciling", "False"), "no retry follows: {:?}", failed.data["status"]);
    assert!(holds(&failed, "Ready", "False"));

    // The Warning Event is there once the condition is (it is published first).
    let (warnings, notes) = warnings_on(&client, &ns, "bad").await?;
    assert_eq!(warnings, 1, "one Warning Event for the refusal: {notes:?}");
    assert!(notes[0].contains(&expected), "{notes:?}");

    // A new generation with a ConfigMap the API server takes: reconciled, and ready.
    apply_shape(&api, "bad", json!({ "a": "1" })).await?;
    let generation = api.get("bad").await?.metadata.generation;
    wait_until(&api, "bad", "Ready at the new generation", move |o| {
        holds(o, "Ready", "True") && o.data["status"]["observedGeneration"].as_i64() == generation
    })
    .await?;
    let metrics = host.metrics();
    assert_eq!(metrics.reconciles_of("fixture-refused", Outcome::Failure), 1, "the refused generation ran once");
    assert_eq!(metrics.failures_of("fixture-refused", "DependentRefused"), 1);
    let (warnings, notes) = warnings_on(&client, &ns, "bad").await?;
    assert_eq!(warnings, 1, "{notes:?}");
    let config_maps: Api<k8s_openapi::api::core::v1::ConfigMap> = Api::namespaced(client.clone(), &ns);
    let data = config_maps.get("bad").await?.data.unwrap_or_default();
    assert_eq!(data.get("a").map(String::as_str), Some("1"), "{data:?}");
    host.stop_all().await;
    Ok(())
}
