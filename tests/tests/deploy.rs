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
        "Role",
        "RoleBinding",
        "ClusterRole",
        "ClusterRoleBinding",
        "Deployment",
        "PodDisruptionBudget",
        "Service",
        "Service",
    ];
    assert_eq!(kinds, expected);
    let crd = std::fs::read_to_string(base.join("crd.yaml"))?;
    assert_eq!(crd, wasmop::loader::resource::crd_yaml(), "deploy/crd.yaml is `wasmop crd`'s output");
    let deployment = std::fs::read_to_string(base.join("deployment.yaml"))?;
    for needle in [
        "replicas: 2",
        "--leader-elect",
        "/readyz",
        "RuntimeDefault",
        "readOnlyRootFilesystem: true",
        "--webhook-service=wasmop/wasmop-webhooks:443",
    ] {
        assert!(deployment.contains(needle), "the Deployment has {needle}");
    }
    Ok(())
}

/// The overlay that shards the primaries across three replicas (`deploy/sharded/`): its
/// patches, laid over the base as kustomize lays them (a strategic merge of these fields), pass
/// the same server-side dry run, and the replicas run with `--shards`.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_sharded_overlay_is_accepted_by_the_api_server() -> anyhow::Result<()> {
    let client = client().await?;
    let root = workspace_root().join("deploy");
    let overlay = root.join("sharded");
    let kustomization: serde_json::Value =
        serde_saphyr::from_str(&std::fs::read_to_string(overlay.join("kustomization.yaml"))?)?;
    assert_eq!(kustomization["resources"], serde_json::json!(["../"]));
    let patches: Vec<&str> =
        kustomization["patches"].as_array().expect("patches").iter().filter_map(|p| p["path"].as_str()).collect();
    assert_eq!(patches, ["deployment.yaml", "pdb.yaml"]);
    wasmop_tests::apply(&client, serde_saphyr::from_str(&std::fs::read_to_string(root.join("namespace.yaml"))?)?, None)
        .await?;

    let mut deployment: serde_json::Value =
        serde_saphyr::from_str(&std::fs::read_to_string(root.join("deployment.yaml"))?)?;
    let patch: serde_json::Value = serde_saphyr::from_str(&std::fs::read_to_string(overlay.join("deployment.yaml"))?)?;
    deployment["spec"]["replicas"] = patch["spec"]["replicas"].clone();
    let container = &patch["spec"]["template"]["spec"]["containers"][0];
    assert_eq!(container["name"], deployment["spec"]["template"]["spec"]["containers"][0]["name"], "merged by name");
    deployment["spec"]["template"]["spec"]["containers"][0]["args"] = container["args"].clone();
    assert_eq!(deployment["spec"]["replicas"], 3);
    let args: Vec<&str> = container["args"].as_array().expect("args").iter().filter_map(|a| a.as_str()).collect();
    assert!(args.contains(&"--shards") && !args.contains(&"--leader-elect"), "{args:?}");
    dry_run_apply(&client, deployment).await?;

    let mut pdb: serde_json::Value = serde_saphyr::from_str(&std::fs::read_to_string(root.join("pdb.yaml"))?)?;
    let patch: serde_json::Value = serde_saphyr::from_str(&std::fs::read_to_string(overlay.join("pdb.yaml"))?)?;
    let spec = pdb["spec"].as_object_mut().expect("a spec");
    spec.remove("minAvailable");
    spec.insert("maxUnavailable".into(), patch["spec"]["maxUnavailable"].clone());
    assert!(patch["spec"]["minAvailable"].is_null(), "the overlay removes minAvailable");
    dry_run_apply(&client, pdb).await?;
    Ok(())
}
