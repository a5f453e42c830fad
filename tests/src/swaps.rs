//! Swaps (`test.wasmop.dev/v1`), the primaries of `fixture-swap`: creating them, changing their
//! spec, and waiting until the plugin's status reflects every last spec.

use std::time::Duration;

use kube::api::{Api, ApiResource, DynamicObject, GroupVersionKind, Patch, PatchParams, PostParams};
use kube::{Client, ResourceExt};

use crate::within;

/// The Swaps of `ns`.
pub fn api(client: &Client, ns: &str) -> Api<DynamicObject> {
    let gvk = GroupVersionKind::gvk("test.wasmop.dev", "v1", "Swap");
    Api::namespaced_with(client.clone(), ns, &ApiResource::from_gvk_with_plural(&gvk, "swaps"))
}

/// Creates `swap-0` .. `swap-{count-1}` with `spec.value` 0.
pub async fn create(api: &Api<DynamicObject>, count: usize) -> anyhow::Result<()> {
    for i in 0..count {
        create_one(api, &format!("swap-{i}")).await?;
    }
    Ok(())
}

/// Creates the Swap `name` with `spec.value` 0.
pub async fn create_one(api: &Api<DynamicObject>, name: &str) -> anyhow::Result<DynamicObject> {
    let swap: DynamicObject = serde_json::from_value(serde_json::json!({
        "apiVersion": "test.wasmop.dev/v1", "kind": "Swap",
        "metadata": { "name": name }, "spec": { "value": 0 }
    }))?;
    Ok(api.create(&PostParams::default(), &swap).await?)
}

/// Sets `spec.value` of Swap `name`.
pub async fn set_value(api: &Api<DynamicObject>, name: &str, value: u64) -> kube::Result<DynamicObject> {
    let patch = serde_json::json!({ "spec": { "value": value } });
    api.patch(name, &PatchParams::default(), &Patch::Merge(&patch)).await
}

/// Whether `swap` carries the status `version` computes for its current spec and generation.
pub fn settled(swap: &DynamicObject, version: &str, compute: fn(i64) -> i64) -> bool {
    let (spec, status) = (&swap.data["spec"], &swap.data["status"]);
    let value = spec["value"].as_i64().unwrap_or(0);
    status["version"] == version
        && status["result"].as_i64() == Some(compute(value))
        && status["observedGeneration"].as_i64() == swap.metadata.generation
}

/// Waits up to 90 s until all `count` Swaps are settled for `version`. Failed lists (an API
/// server that is down) are retried.
pub async fn all_settled(
    api: &Api<DynamicObject>,
    count: usize,
    version: &str,
    compute: fn(i64) -> i64,
) -> anyhow::Result<()> {
    let mut last = String::from("nothing listed yet");
    let waited = within(Duration::from_secs(90), &format!("every Swap settled on {version}"), async {
        loop {
            match api.list(&Default::default()).await {
                Ok(list) => {
                    let unsettled: Vec<String> =
                        list.items.iter().filter(|s| !settled(s, version, compute)).map(|s| s.name_any()).collect();
                    if list.items.len() == count && unsettled.is_empty() {
                        return;
                    }
                    last = format!("{} Swaps, unsettled: {unsettled:?}", list.items.len());
                }
                Err(err) => last = format!("listing failed: {err}"),
            }
            tokio::time::sleep(Duration::from_millis(100)).await;
        }
    })
    .await;
    waited.map_err(|err| anyhow::anyhow!("{err}; last seen: {last}"))
}
