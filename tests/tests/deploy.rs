//! The in-cluster manifest (`host/deploy/wasmop.yaml`) is accepted by the real API server: every
//! document passes a server-side dry-run apply (schema, RBAC rules, the Deployment's spec).

use kube::api::{Api, DynamicObject, Patch, PatchParams};
use kube::discovery::{Scope, pinned_kind};
use kube::{Client, ResourceExt};
use wasmop_tests::{client, workspace_root};

async fn dry_run_apply(client: &Client, value: serde_json::Value) -> anyhow::Result<()> {
    let object: DynamicObject = serde_json::from_value(value)?;
    let types = object.types.clone().expect("every document has a type");
    let (resource, caps) = pinned_kind(client, &kube::api::GroupVersionKind::try_from(&types)?).await?;
    let api: Api<DynamicObject> = match (caps.scope, object.namespace()) {
        (Scope::Namespaced, Some(ns)) => Api::namespaced_with(client.clone(), &ns, &resource),
        _ => Api::all_with(client.clone(), &resource),
    };
    let params = PatchParams { dry_run: true, ..PatchParams::apply("wasmop-tests").force() };
    api.patch(&object.name_any(), &params, &Patch::Apply(&object)).await?;
    Ok(())
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_in_cluster_manifest_is_accepted_by_the_api_server() -> anyhow::Result<()> {
    let client = client().await?;
    let text = std::fs::read_to_string(workspace_root().join("host/deploy/wasmop.yaml"))?;
    let mut kinds = Vec::new();
    for value in serde_saphyr::from_multiple::<serde_json::Value>(&text)? {
        kinds.push(value["kind"].as_str().unwrap_or_default().to_string());
        // The namespace does not exist in a dry run: create it for real, it is harmless.
        if value["kind"] == "Namespace" {
            wasmop_tests::apply(&client, value, None).await?;
        } else {
            dry_run_apply(&client, value).await?;
        }
    }
    assert_eq!(kinds, ["Namespace", "ServiceAccount", "ClusterRole", "ClusterRoleBinding", "Deployment"]);
    Ok(())
}
