//! Where a `ReconcilerPlugin` may load its module from, against the real kube-apiserver: a file
//! outside the directories the operator allows (`/dev/zero` among them) is refused on the status,
//! never read, and the host keeps serving; a module pinned by its sha256 that already runs is not
//! fetched again.

use std::sync::Arc;

use kube::api::{Api, DynamicObject, Patch, PatchParams, PostParams};
use sha2::{Digest, Sha256};
use tokio_util::sync::CancellationToken;
use wasmop::host::Host;
use wasmop::loader::fetch::FetchPolicy;
use wasmop::metrics::Metrics;
use wasmop::runtime::Limits;
use wasmop::settings::HostConfig;
use wasmop_tests::swaps;
use wasmop_tests::{
    apply_file, client, condition, namespace, observed_runtime, plugin, settings, until, workspace_root,
};

fn degraded_with(needle: &'static str) -> impl Fn(&DynamicObject) -> bool {
    move |r| {
        condition(r, "Degraded")
            .is_some_and(|c| c["status"] == "True" && c["message"].as_str().unwrap_or("").contains(needle))
    }
}

fn loaded(r: &DynamicObject) -> bool {
    condition(r, "Loaded").is_some_and(|c| c["status"] == "True")
        && condition(r, "Degraded").is_some_and(|c| c["status"] == "False")
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn files_outside_the_allowed_directories_are_refused_and_pinned_modules_are_not_fetched_again()
-> anyhow::Result<()> {
    let client = client().await?;
    apply_file(&client, &workspace_root().join("host/crds/reconcilerplugin.yaml"), None).await?;
    apply_file(&client, &workspace_root().join("plugins/fixtures/swap/crd.yaml"), None).await?;
    let ns = namespace(&client, "module-sources").await?;
    let allowed = workspace_root().join(format!("target/module-sources-{ns}"));
    std::fs::create_dir_all(&allowed)?;
    let module = allowed.join("swap.wasm");
    let v1 = std::fs::read(plugin("fixture-swap"))?;
    std::fs::write(&module, &v1)?;

    let metrics = Metrics::new();
    let runtime = Arc::new(observed_runtime(Limits::default(), Some(metrics.clone()))?);
    let clusters = wasmop::informer::Clusters::new(client.clone());
    let host = Arc::new(Host::new(clusters, runtime, metrics, settings(&ns, HostConfig::default())));
    let stop = CancellationToken::new();
    let policy = FetchPolicy::new(std::slice::from_ref(&allowed)).map_err(anyhow::Error::msg)?;
    let loader = tokio::spawn(wasmop::loader::resource::run(host.clone(), policy, stop.clone()));

    let resources: Api<DynamicObject> = Api::all_with(client.clone(), &wasmop::loader::resource::resource());
    let create = async |name: &str, module: serde_json::Value| {
        let resource: DynamicObject = serde_json::from_value(serde_json::json!({
            "apiVersion": "wasmop.dev/v1alpha1", "kind": "ReconcilerPlugin", "metadata": { "name": name },
            "spec": { "module": module, "overrides": { "namespace": ns } }
        }))?;
        anyhow::Ok(resources.create(&PostParams::default(), &resource).await?)
    };
    let get = |name: String| {
        let resources = resources.clone();
        async move || Ok(resources.get(&name).await?)
    };

    // A pinned module in an allowed directory runs.
    let pinned = format!("pinned-{ns}");
    create(&pinned, serde_json::json!({ "file": module, "sha256": hex::encode(Sha256::digest(&v1)) })).await?;
    until("the pinned module loaded", get(pinned.clone()), loaded).await?;
    let api = swaps::api(&client, &ns);
    swaps::create(&api, 1).await?;
    swaps::all_settled(&api, 1, "v1", |v| v + 1).await?;

    // /dev/zero and a module outside the allowed directory are refused, never read.
    let zero = format!("zero-{ns}");
    create(&zero, serde_json::json!({ "file": "/dev/zero" })).await?;
    let outside = format!("outside-{ns}");
    create(&outside, serde_json::json!({ "file": plugin("fixture-swap") })).await?;
    let escape = format!("escape-{ns}");
    create(&escape, serde_json::json!({ "file": allowed.join("../../plugins/dist/fixture-swap.wasm") })).await?;
    for name in [&zero, &outside, &escape] {
        until("refused", get(name.clone()), degraded_with("outside the module directories")).await?;
    }

    // The pinned module is not fetched again: a changed file goes unnoticed while its digest
    // runs, and the plugin keeps reconciling.
    std::fs::write(&module, b"not the pinned module")?;
    let checks = host.metrics().plugin_resource_checks(&pinned);
    until("two more checks", async || Ok(host.metrics().plugin_resource_checks(&pinned)), |c| *c >= checks + 2).await?;
    assert!(loaded(&resources.get(&pinned).await?), "the pinned module was not fetched again");
    api.patch("swap-0", &PatchParams::default(), &Patch::Merge(serde_json::json!({ "spec": { "value": 7 } }))).await?;
    swaps::all_settled(&api, 1, "v1", |v| v + 1).await?;
    assert_eq!(host.plugins(), vec!["fixture-swap".to_string()], "only the pinned plugin runs");

    for name in [&pinned, &zero, &outside, &escape] {
        resources.delete(name, &Default::default()).await?;
    }
    until("the plugin stopped", async || Ok(host.plugins()), |p: &Vec<String>| p.is_empty()).await?;
    stop.cancel();
    loader.await?;
    std::fs::remove_dir_all(&allowed)?;
    Ok(())
}
