//! The kustomize base users apply (`deploy/`) is accepted by the real API server: every resource
//! it lists passes a server-side dry-run apply (schema, RBAC rules, the Deployment's spec), and
//! its ReconcilerPlugin CRD is the one `wasmop crd` prints.

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
async fn the_kustomize_base_is_accepted_by_the_api_server() -> anyhow::Result<()> {
    let client = client().await?;
    let base = workspace_root().join("deploy");
    let kustomization: serde_json::Value =
        serde_saphyr::from_str(&std::fs::read_to_string(base.join("kustomization.yaml"))?)?;
    let mut kinds = Vec::new();
    for file in kustomization["resources"].as_array().expect("a resources list") {
        let file = file.as_str().expect("file names");
        let text = std::fs::read_to_string(base.join(file))?;
        for value in serde_saphyr::from_multiple::<serde_json::Value>(&text)? {
            let kind = value["kind"].as_str().unwrap_or_default().to_string();
            // The namespace and the CRD are applied for real (harmless, and the dry runs of the
            // namespaced objects need the namespace to exist).
            if kind == "Namespace" || kind == "CustomResourceDefinition" {
                wasmop_tests::apply(&client, value, None).await?;
            } else {
                dry_run_apply(&client, value).await?;
            }
            kinds.push(kind);
        }
    }
    let expected = [
        "Namespace",
        "CustomResourceDefinition",
        "ServiceAccount",
        "Role",
        "RoleBinding",
        "ClusterRole",
        "ClusterRoleBinding",
        "Deployment",
        "PodDisruptionBudget",
        "Service",
    ];
    assert_eq!(kinds, expected);
    let crd = std::fs::read_to_string(base.join("crd.yaml"))?;
    assert_eq!(crd, wasmop::loader::resource::crd_yaml(), "deploy/crd.yaml is `wasmop crd`'s output");
    let deployment = std::fs::read_to_string(base.join("deployment.yaml"))?;
    for needle in ["replicas: 2", "--leader-elect", "/readyz", "RuntimeDefault", "readOnlyRootFilesystem: true"] {
        assert!(deployment.contains(needle), "the Deployment has {needle}");
    }
    Ok(())
}
