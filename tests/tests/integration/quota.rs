//! The NamespaceQuota sample (`plugins/quota`): dependents kept by the host, and a status-only
//! change of a dependent (the quota controller counting the namespace) reconciling its primary.

use std::time::Duration;

use k8s_openapi::api::core::v1::{ConfigMap, LimitRange, ResourceQuota};
use kube::ResourceExt;
use kube::api::{Api, ApiResource, DynamicObject, GroupVersionKind, PostParams};
use kube::runtime::wait::await_condition;
use serde_json::json;
use wasmop::runtime::Limits;
use wasmop_tests::{RunningHost, apply_file, client, namespace, within, workspace_root};

const WAIT: Duration = Duration::from_secs(60);

/// The ConfigMaps the NamespaceQuota reports in use, once Ready says the quota is counted.
fn used_config_maps(object: Option<&DynamicObject>) -> Option<u64> {
    let object = object?;
    let ready =
        object.data["status"]["conditions"].as_array()?.iter().any(|c| c["type"] == "Ready" && c["status"] == "True");
    ready.then_some(())?;
    object.data["status"]["used"]["configmaps"].as_str()?.parse().ok()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_namespace_quota_reports_usage_as_the_quota_controller_counts_it() -> anyhow::Result<()> {
    let client = client().await?;
    apply_file(&client, &workspace_root().join("plugins/quota/crd.yaml"), None).await?;
    let ns = namespace(&client, "quota").await?;
    let host = RunningHost::start(&client, &ns, &["quota"], Limits::default())?;
    apply_file(&client, &workspace_root().join("plugins/quota/example.yaml"), Some(&ns)).await?;
    let gvk = GroupVersionKind::gvk("sample.wasmop.dev", "v1", "NamespaceQuota");
    let api: Api<DynamicObject> =
        Api::namespaced_with(client.clone(), &ns, &ApiResource::from_gvk_with_plural(&gvk, "namespacequotas"));
    let counted = |o: Option<&DynamicObject>| used_config_maps(o).is_some();
    let team = within(WAIT, "the usage reported", await_condition(api.clone(), "team", counted)).await??;
    let team = team.expect("exists");
    let before = used_config_maps(Some(&team)).expect("counted");
    assert!(team.finalizers().is_empty(), "no cleanup, owned dependents: no finalizer ({:?})", team.finalizers());
    let quota = Api::<ResourceQuota>::namespaced(client.clone(), &ns).get("team").await?;
    assert_eq!(quota.spec.and_then(|s| s.hard).map(|h| h["configmaps"].0.clone()), Some("10".into()));
    let limits = Api::<LimitRange>::namespaced(client.clone(), &ns).get("team").await?;
    assert_eq!(limits.owner_references()[0].uid, team.uid().expect("uid"));

    // Only the ResourceQuota's status changes (the API server counts the new ConfigMap): the
    // NamespaceQuota is reconciled for it.
    let extra: ConfigMap = serde_json::from_value(json!({ "metadata": { "name": "extra" } }))?;
    Api::<ConfigMap>::namespaced(client.clone(), &ns).create(&PostParams::default(), &extra).await?;
    let one_more = move |o: Option<&DynamicObject>| used_config_maps(o) == Some(before + 1);
    within(WAIT, "the new ConfigMap counted", await_condition(api.clone(), "team", one_more)).await??;
    host.stop().await;
    Ok(())
}
