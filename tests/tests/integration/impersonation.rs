//! Writes as a plugin's ServiceAccount, against the real kube-apiserver with RBAC: cluster RBAC,
//! not the host's own rights, bounds what the plugin may write.

use std::time::Duration;

use k8s_openapi::api::core::v1::ConfigMap;
use kube::api::{Api, PostParams};
use wasmop::informer::Clusters;
use wasmop::runtime::Limits;
use wasmop_tests::{RunningHost, apply, client, config, event_note, namespace, within};

const WAIT: Duration = Duration::from_secs(60);

/// A host on `ns` running `fixture-bulk` as the ServiceAccount `account` of `ns`, and the
/// primary `bulk` (one ConfigMap to write, `bulk-0`) created.
async fn bulk_as(client: &kube::Client, ns: &str, account: &str) -> anyhow::Result<RunningHost> {
    let yaml = format!("plugins:\n  fixture-bulk:\n    serviceAccount: {{ namespace: {ns}, name: {account} }}\n");
    let host = RunningHost::start_on(
        Clusters::from_config(config().await?)?,
        ns,
        &["fixture-bulk"],
        Limits::default(),
        serde_saphyr::from_str(&yaml)?,
    )?;
    let primary: ConfigMap = serde_json::from_value(serde_json::json!({
        "metadata": { "name": "bulk", "labels": { "wasmop.dev/fixture": "bulk" } }, "data": { "count": "1" }
    }))?;
    Api::<ConfigMap>::namespaced(client.clone(), ns).create(&PostParams::default(), &primary).await?;
    Ok(host)
}

/// The ConfigMap `bulk-0` once it is written (`what` names the wait).
async fn written(config_maps: &Api<ConfigMap>, what: &str) -> anyhow::Result<ConfigMap> {
    within(WAIT, what, async {
        loop {
            if let Some(written) = config_maps.get_opt("bulk-0").await? {
                return anyhow::Ok(written);
            }
            tokio::time::sleep(Duration::from_millis(200)).await;
        }
    })
    .await?
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_plugin_writes_only_what_its_service_account_may() -> anyhow::Result<()> {
    let client = client().await?;
    let ns = namespace(&client, "impersonation").await?;
    let account = serde_json::json!({ "apiVersion": "v1", "kind": "ServiceAccount", "metadata": { "name": "bulk" } });
    apply(&client, account, Some(&ns)).await?;
    let host = bulk_as(&client, &ns, "bulk").await?;
    let config_maps: Api<ConfigMap> = Api::namespaced(client.clone(), &ns);
    // The host itself may write ConfigMaps; the account may not, and the API server says so.
    let user = format!("system:serviceaccount:{ns}:bulk");
    let note = event_note(&client, &ns, WAIT, "bulk", &format!("User \"{user}\" cannot patch")).await?;
    assert!(note.contains("configmaps"), "{note}");
    assert!(config_maps.get_opt("bulk-0").await?.is_none(), "nothing was written");

    let role = serde_json::json!({
        "apiVersion": "rbac.authorization.k8s.io/v1", "kind": "Role", "metadata": { "name": "bulk" },
        "rules": [{ "apiGroups": [""], "resources": ["configmaps"],
                    "verbs": ["get", "list", "watch", "create", "patch", "update", "delete"] }]
    });
    let binding = serde_json::json!({
        "apiVersion": "rbac.authorization.k8s.io/v1", "kind": "RoleBinding", "metadata": { "name": "bulk" },
        "roleRef": { "apiGroup": "rbac.authorization.k8s.io", "kind": "Role", "name": "bulk" },
        "subjects": [{ "kind": "ServiceAccount", "name": "bulk", "namespace": ns }]
    });
    apply(&client, role, Some(&ns)).await?;
    apply(&client, binding, Some(&ns)).await?;
    // Retried with backoff: once RBAC allows it, the dependent is written as the account.
    written(&config_maps, "bulk-0 written once RBAC allows it").await?;
    host.stop().await;
    Ok(())
}

/// Whether `user` may `verb` ConfigMaps in `ns`, as `kubectl auth can-i --as` asks.
async fn can_i(client: &kube::Client, user: &str, verb: &str, ns: &str) -> anyhow::Result<bool> {
    use k8s_openapi::api::authorization::v1::{ResourceAttributes, SubjectAccessReview, SubjectAccessReviewSpec};
    let review = SubjectAccessReview {
        spec: SubjectAccessReviewSpec {
            user: Some(user.into()),
            resource_attributes: Some(ResourceAttributes {
                namespace: Some(ns.into()),
                verb: Some(verb.into()),
                resource: Some("configmaps".into()),
                ..ResourceAttributes::default()
            }),
            ..SubjectAccessReviewSpec::default()
        },
        ..SubjectAccessReview::default()
    };
    let answered = Api::<SubjectAccessReview>::all(client.clone()).create(&PostParams::default(), &review).await?;
    Ok(answered.status.is_some_and(|s| s.allowed))
}

/// The test bed runs the ClusterRole aggregation controller, as a real cluster does: the
/// built-in `edit` role has its rules, so a RoleBinding to it gives a plugin's account what
/// `kubectl auth can-i --as` then says it has.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_plugin_whose_account_is_bound_to_the_edit_role_writes_as_it() -> anyhow::Result<()> {
    let client = client().await?;
    let ns = namespace(&client, "impersonation-edit").await?;
    let account = serde_json::json!({ "apiVersion": "v1", "kind": "ServiceAccount", "metadata": { "name": "editor" } });
    apply(&client, account, Some(&ns)).await?;
    let binding = serde_json::json!({
        "apiVersion": "rbac.authorization.k8s.io/v1", "kind": "RoleBinding", "metadata": { "name": "editor" },
        "roleRef": { "apiGroup": "rbac.authorization.k8s.io", "kind": "ClusterRole", "name": "edit" },
        "subjects": [{ "kind": "ServiceAccount", "name": "editor", "namespace": ns }]
    });
    apply(&client, binding, Some(&ns)).await?;
    let user = format!("system:serviceaccount:{ns}:editor");
    // The aggregation runs once, soon after the controller manager starts.
    within(WAIT, "the edit role to let the account patch ConfigMaps", async {
        while !can_i(&client, &user, "patch", &ns).await? {
            tokio::time::sleep(Duration::from_millis(200)).await;
        }
        anyhow::Ok(())
    })
    .await??;

    let host = bulk_as(&client, &ns, "editor").await?;
    let config_maps: Api<ConfigMap> = Api::namespaced(client.clone(), &ns);
    let written = written(&config_maps, "bulk-0 written as the editor").await?;
    let managers: Vec<_> = written.metadata.managed_fields.iter().flatten().filter_map(|f| f.manager.clone()).collect();
    assert_eq!(managers, ["wasmop-fixture-bulk"]);
    host.stop().await;
    Ok(())
}
