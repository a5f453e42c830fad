//! A standby replica and `ReconcilerPlugin` resources, against the real kube-apiserver. Its own
//! test binary: a host's loader watches every ReconcilerPlugin of the cluster, so this test must
//! not run in one process with another host that loads them (cargo runs test binaries one
//! after another).

use std::time::Duration;

use k8s_openapi::api::coordination::v1::Lease;
use k8s_openapi::api::core::v1::ConfigMap;
use kube::api::{Api, DeleteParams, DynamicObject, PostParams};
use tokio_util::sync::CancellationToken;
use wasmop::metrics::Metrics;
use wasmop::settings::HostConfig;
use wasmop_tests::{
    ResourceHost, apply_file, client, condition, module_map, namespace, plugin, reconciler_plugin, settings, until,
    workspace_root,
};

/// A standby loads a ReconcilerPlugin's module (its caches warm to take over) but writes
/// nothing for it: no finalizer, no status, no Event; once it leads, it writes them. The
/// replica's fence comes from a real election on a Lease that another holder keeps at first.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_standby_runs_a_reconciler_plugins_module_but_leaves_its_writes_to_the_leader() -> anyhow::Result<()> {
    let client = client().await?;
    apply_file(&client, &workspace_root().join("host/crds/reconcilerplugin.yaml"), None).await?;
    apply_file(&client, &workspace_root().join("plugins/fixtures/swap/crd.yaml"), None).await?;
    let ns = namespace(&client, "reconciler-plugin-standby").await?;
    let leases: Api<Lease> = Api::namespaced(client.clone(), &ns);
    let now = k8s_openapi::apimachinery::pkg::apis::meta::v1::MicroTime(k8s_openapi::jiff::Timestamp::now());
    let held: Lease = serde_json::from_value(serde_json::json!({
        "metadata": { "name": "standby-test" },
        "spec": { "holderIdentity": "the-leader", "leaseDurationSeconds": 3600, "acquireTime": now, "renewTime": now }
    }))?;
    leases.create(&PostParams::default(), &held).await?;
    let metrics = Metrics::new();
    let lease = wasmop::leader::LeaseSettings {
        namespace: ns.clone(),
        name: "standby-test".into(),
        identity: wasmop::leader::identity("standby"),
        lease_duration: Duration::from_secs(3),
        renew_deadline: Duration::from_secs(2),
        retry_period: Duration::from_millis(200),
        peers: None,
    };
    let release = CancellationToken::new();
    let (fence, election) = wasmop::leader::elect(client.clone(), lease, metrics.clone(), release.clone());
    let settings = wasmop::host::HostSettings { fence, ..settings(&ns, HostConfig::default()) };
    let loader = ResourceHost::start(&client, settings, metrics)?;

    let maps: Api<ConfigMap> = Api::namespaced(client.clone(), &ns);
    maps.create(&PostParams::default(), &module_map(&std::fs::read(plugin("fixture-swap"))?)).await?;
    let resources: Api<DynamicObject> = Api::all_with(client.clone(), &wasmop::loader::resource::resource());
    let name = format!("swap-{ns}");
    resources.create(&PostParams::default(), &reconciler_plugin(&name, &ns)?).await?;
    until("the standby runs the module", async || Ok(loader.host.plugins()), |p: &Vec<String>| !p.is_empty()).await?;
    until("two checks", async || Ok(loader.host.metrics().plugin_resource_checks(&name)), |c| *c >= 2).await?;
    let standing = resources.get(&name).await?;
    assert!(standing.metadata.finalizers.is_none(), "a standby added a finalizer: {:?}", standing.metadata);
    assert!(standing.data.get("status").is_none(), "a standby wrote the status: {:?}", standing.data["status"]);

    // The leader goes: this replica leads and writes.
    leases.delete("standby-test", &DeleteParams::default()).await?;
    let written = until(
        "the new leader's finalizer and status",
        async || Ok(resources.get(&name).await?),
        |r: &DynamicObject| {
            r.metadata.finalizers.as_ref().is_some_and(|f| !f.is_empty())
                && condition(r, "Loaded").is_some_and(|c| c["status"] == "True")
        },
    )
    .await?;
    assert!(written.data["status"]["digest"].is_string());
    resources.delete(&name, &DeleteParams::default()).await?;
    until("the resource gone", async || Ok(resources.get_opt(&name).await?), |r| r.is_none()).await?;
    loader.stop().await?;
    release.cancel();
    election.await?;
    Ok(())
}
