//! `ReconcilerPlugin` resources against the real kube-apiserver: a module in a ConfigMap runs
//! and reconciles, editing the ConfigMap swaps it, a corrupt module and one built against an
//! unknown contract are refused on the resource's status while the old version keeps
//! reconciling, and deleting the resource stops the plugin.

use k8s_openapi::api::core::v1::ConfigMap;
use kube::Client;
use kube::api::{Api, ApiResource, DeleteParams, DynamicObject, GroupVersionKind, Patch, PatchParams, PostParams};
use sha2::{Digest, Sha256};
use wasmop::metrics::Metrics;
use wasmop::settings::HostConfig;
use wasmop_tests::{
    ResourceHost, apply_file, client, condition, module_map, namespace, plugin, reconciler_plugin, settings, until,
    workspace_root,
};

fn swaps(client: &Client, ns: &str) -> Api<DynamicObject> {
    let gvk = GroupVersionKind::gvk("test.wasmop.dev", "v1", "Swap");
    Api::namespaced_with(client.clone(), ns, &ApiResource::from_gvk_with_plural(&gvk, "swaps"))
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_module_from_a_config_map_runs_swaps_on_edit_and_bad_versions_show_on_the_status() -> anyhow::Result<()> {
    let client = client().await?;
    apply_file(&client, &workspace_root().join("host/crds/reconcilerplugin.yaml"), None).await?;
    apply_file(&client, &workspace_root().join("plugins/fixtures/swap/crd.yaml"), None).await?;
    let ns = namespace(&client, "reconciler-plugin").await?;
    let loader = ResourceHost::start(&client, settings(&ns, HostConfig::default()), Metrics::new())?;
    let host = loader.host.clone();

    let (v1, v2) = (std::fs::read(plugin("fixture-swap"))?, std::fs::read(plugin("fixture-swap-v2"))?);
    let maps: Api<ConfigMap> = Api::namespaced(client.clone(), &ns);
    maps.create(&PostParams::default(), &module_map(&v1)).await?;
    let resources: Api<DynamicObject> = Api::all_with(client.clone(), &wasmop::loader::resource::resource());
    let name = format!("swap-{ns}");
    resources.create(&PostParams::default(), &reconciler_plugin(&name, &ns)?).await?;

    let api = swaps(&client, &ns);
    let swap: DynamicObject = serde_json::from_value(serde_json::json!({
        "apiVersion": "test.wasmop.dev/v1", "kind": "Swap", "metadata": { "name": "s" }, "spec": { "value": 3 }
    }))?;
    api.create(&PostParams::default(), &swap).await?;
    let status = |version: &'static str, result: i64| {
        move |s: &DynamicObject| s.data["status"]["version"] == version && s.data["status"]["result"] == result
    };
    until("v1 reconciles the Swap", async || Ok(api.get("s").await?), status("v1", 4)).await?;
    let digest = |bytes: &[u8]| hex::encode(Sha256::digest(bytes));
    let loaded = |digest: String| {
        move |r: &DynamicObject| {
            r.data["status"]["digest"] == digest.as_str()
                && condition(r, "Loaded").is_some_and(|c| c["status"] == "True")
                && condition(r, "Ready").is_some_and(|c| c["status"] == "True")
        }
    };
    until("the resource reports v1 loaded", async || Ok(resources.get(&name).await?), loaded(digest(&v1))).await?;

    // Editing the ConfigMap swaps the plugin; the swap reconciles every Swap with v2.
    maps.replace("module", &PostParams::default(), &module_map(&v2)).await?;
    until("v2 reconciles the Swap", async || Ok(api.get("s").await?), status("v2", 6)).await?;
    until("the resource reports v2 loaded", async || Ok(resources.get(&name).await?), loaded(digest(&v2))).await?;

    // A steady resource's status is not written again while its plugin reconciles: the counts
    // are metrics, and every status write would be an event for the resource's own controller.
    let steady = resources.get(&name).await?.metadata.resource_version;
    let patch = serde_json::json!({ "spec": { "value": 5 } });
    api.patch("s", &PatchParams::default(), &Patch::Merge(&patch)).await?;
    until("v2 reconciles the change", async || Ok(api.get("s").await?), status("v2", 10)).await?;
    let checks = host.metrics().plugin_resource_checks(&name);
    until("two more checks", async || Ok(host.metrics().plugin_resource_checks(&name)), |c| *c >= checks + 2).await?;
    let after = resources.get(&name).await?;
    assert_eq!(after.metadata.resource_version, steady, "no status write: {:?}", after.data["status"]);

    // Refused versions show on the status; v2 keeps reconciling.
    let refused = |needle: &'static str| {
        move |r: &DynamicObject| {
            condition(r, "Loaded").is_some_and(|c| c["status"] == "False")
                && condition(r, "Ready").is_some_and(|c| c["status"] == "True")
                && condition(r, "Degraded")
                    .is_some_and(|c| c["status"] == "True" && c["message"].as_str().unwrap_or("").contains(needle))
        }
    };
    maps.replace("module", &PostParams::default(), &module_map(b"not a module")).await?;
    let corrupt = "is not a valid WebAssembly component";
    until("the corrupt module refused", async || Ok(resources.get(&name).await?), refused(corrupt)).await?;
    let future = wasmop_tests::with_contract_version(&v1, "9.9.9");
    maps.replace("module", &PostParams::default(), &module_map(&future)).await?;
    let mismatch = "built against contract wasmop:plugin@9.9.9";
    let r = until("the future module refused", async || Ok(resources.get(&name).await?), refused(mismatch)).await?;
    assert_eq!(r.data["status"]["digest"], digest(&v2), "v2 still runs");
    let patch = serde_json::json!({ "spec": { "value": 11 } });
    api.patch("s", &PatchParams::default(), &Patch::Merge(&patch)).await?;
    until("v2 still reconciles", async || Ok(api.get("s").await?), status("v2", 22)).await?;

    // Deleting the resource stops the plugin and releases its watch.
    resources.delete(&name, &DeleteParams::default()).await?;
    until("the plugin stopped", async || Ok(host.plugins()), |p: &Vec<String>| p.is_empty()).await?;
    until("the resource gone", async || Ok(resources.get_opt(&name).await?), |r| r.is_none()).await?;
    assert_eq!(host.clusters().local().active(), 0, "the plugin's watch is released");
    loader.stop().await
}
