//! A plugin has only the Secrets it may read, against the real kube-apiserver with RBAC: those its
//! ServiceAccount may get (read as that account, so a grant it loses takes effect) and those the
//! operator allowed it in its overrides. A plugin naming another's Secret is refused at load,
//! whichever way it is loaded, and the Secret's value reaches no listener.
//!
//! The plugins' grants are fixed when they are built: `global` (DnsRecords) polls
//! `http://127.0.0.1:18053` every second with the token of Secret `dns-api-token`, the
//! `dnsrecord` sample's; `fixture-http` calls its primary's `data.url` on
//! `http://127.26.0.1:18026` with the token of Secret `fixture-http-token`. The tests listen on
//! those addresses and record every request.

use std::sync::Arc;
use std::time::Duration;

use k8s_openapi::api::core::v1::{ConfigMap, Secret};
use kube::api::{Api, DeleteParams, DynamicObject, PostParams};
use serde_json::json;
use wasmop::host::Host;
use wasmop::informer::Clusters;
use wasmop::metrics::Metrics;
use wasmop::runtime::Limits;
use wasmop::settings::{HostConfig, Settings};
use wasmop_tests::http_service::HttpService;
use wasmop_tests::records::{self, ADDRESS};
use wasmop_tests::{
    ResourceHost, RunningHost, allowing, apply, apply_file, client, condition, module_map, namespace, observed_runtime,
    plugin, reconciler_plugin, settings, until, wait_until, workspace_root,
};

/// Where `fixture-http` may send its token.
const HTTP_ADDRESS: &str = "127.26.0.1:18026";
const HTTP_ORIGIN: &str = "http://127.26.0.1:18026";

/// A host on `ns` that may impersonate (its client is made from the kubeconfig), with `config`.
async fn host(ns: &str, config: HostConfig) -> anyhow::Result<(Arc<Host>, Arc<Metrics>)> {
    let metrics = Metrics::new();
    let runtime = Arc::new(observed_runtime(Limits::default(), Some(metrics.clone()))?);
    let clusters = Clusters::from_config(wasmop_tests::config().await?)?;
    Ok((Arc::new(Host::new(clusters, runtime, metrics.clone(), settings(ns, config))), metrics))
}

/// Secret `name` in `ns` whose key `token` is `value`.
async fn secret(client: &kube::Client, ns: &str, name: &str, value: &str) -> anyhow::Result<()> {
    let secret: Secret =
        serde_json::from_value(json!({ "metadata": { "name": name }, "stringData": { "token": value } }))?;
    Api::<Secret>::namespaced(client.clone(), ns).create(&PostParams::default(), &secret).await?;
    Ok(())
}

/// Overrides from YAML.
fn overrides(yaml: &str) -> anyhow::Result<Settings> {
    Ok(serde_saphyr::from_str(yaml)?)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_plugin_naming_another_plugins_secret_is_refused_at_load_and_its_value_reaches_no_listener()
-> anyhow::Result<()> {
    let listener = HttpService::bind(ADDRESS).await.map_err(|e| anyhow::anyhow!("{ADDRESS} must be free: {e}"))?;
    let client = client().await?;
    apply_file(&client, &workspace_root().join("plugins/dnsrecord/crd.yaml"), None).await?;
    apply_file(&client, &workspace_root().join("host/crds/reconcilerplugin.yaml"), None).await?;
    let ns = namespace(&client, "secret-refused").await?;
    // The dnsrecord sample's token, which the operator allowed dnsrecord alone; and a DnsRecord
    // for `global` to poll about.
    let token = format!("token-of-dnsrecord-in-{ns}");
    secret(&client, &ns, "dns-api-token", &token).await?;
    let www = json!({ "apiVersion": "sample.wasmop.dev/v1", "kind": "DnsRecord", "metadata": { "name": "www" },
        "spec": { "zone": ns, "name": "www", "type": "A", "value": "10.0.0.1" } });
    apply(&client, www, Some(&ns)).await?;
    let dnsrecord = ["dns-api-token", "dns-webhook-token"];
    let operator = allowing(HostConfig::default(), "dnsrecord", &dnsrecord, &[records::ORIGIN]);
    // `global` may send secret headers over plain HTTP there: only the Secret is missing.
    let operator = allowing(operator, "global", &[], &[records::ORIGIN]);
    let refusal = format!(
        "plugin \"global\" may not read Secret {ns}/dns-api-token (the secret header authorization of \
         {}): it runs as no serviceAccount of its own, and the operator allowed no such Secret for it (allowedSecrets",
        records::ORIGIN
    );

    // Named on the command line, with the configuration file's overrides.
    let started = RunningHost::start_with_config(&client, &ns, &["fixture-global"], operator.clone());
    let err = started.err().expect("global is refused").to_string();
    assert!(err.contains(&refusal), "{err}");

    // Installed (as a watched file or a ReconcilerPlugin is), with overrides of its own.
    let (host, _) = host(&ns, operator).await?;
    let file = plugin("fixture-global");
    let own = overrides(&format!("namespace: {ns}\nallowPlainHttpSecrets: [\"{}\"]\n", records::ORIGIN))?;
    let err = host.install("test", &file, std::fs::read(&file)?, Some(own)).await.expect_err("refused").to_string();
    assert!(err.contains(&refusal), "{err}");
    assert_eq!(host.plugins(), Vec::<String>::new());

    // A ReconcilerPlugin says why on its status. Its grants are its own spec's alone: the
    // configuration file's entry for the name its module gives itself (here one that allows
    // the Secret) is not the operator's word for a resource anyone may create.
    let file_allowance = allowing(HostConfig::default(), "global", &["dns-api-token"], &[records::ORIGIN]);
    let loader = ResourceHost::start(&client, settings(&ns, file_allowance), Metrics::new())?;
    let modules: Api<ConfigMap> = Api::namespaced(client.clone(), &ns);
    modules.create(&PostParams::default(), &module_map(&std::fs::read(&file)?)).await?;
    let resources: Api<DynamicObject> = Api::all_with(client.clone(), &wasmop::loader::resource::resource());
    let name = format!("global-{ns}");
    let mut resource = reconciler_plugin(&name, &ns)?;
    resource.data["spec"]["overrides"]["allowPlainHttpSecrets"] = json!([records::ORIGIN]);
    resources.create(&PostParams::default(), &resource).await?;
    let refused = wait_until(&resources, &name, "the refusal on the status", |r| {
        condition(r, "Loaded").is_some_and(|c| c["status"] == "False")
    })
    .await?;
    let message = condition(&refused, "Loaded").and_then(|c| c["message"].as_str()).unwrap_or_default().to_owned();
    assert!(message.contains(&refusal), "{message}");
    assert_eq!(loader.host.plugins(), Vec::<String>::new());
    resources.delete(&name, &DeleteParams::default()).await?;
    // Without overrides of its own it has no grants at all.
    let bare = format!("global-bare-{ns}");
    let mut without = reconciler_plugin(&bare, &ns)?;
    without.data["spec"].as_object_mut().expect("a spec").remove("overrides");
    resources.create(&PostParams::default(), &without).await?;
    let refused = wait_until(&resources, &bare, "the refusal on the status", |r| {
        condition(r, "Loaded").is_some_and(|c| c["status"] == "False")
    })
    .await?;
    let message = condition(&refused, "Loaded").and_then(|c| c["message"].as_str()).unwrap_or_default().to_owned();
    assert!(message.contains("plugin \"global\" may not"), "{message}");
    assert_eq!(loader.host.plugins(), Vec::<String>::new());
    resources.delete(&bare, &DeleteParams::default()).await?;
    loader.stop().await?;

    // Running, `global` would have asked every second.
    tokio::time::sleep(Duration::from_secs(3)).await;
    assert_eq!(listener.accepted(), 0, "a refused plugin sent {:?}", listener.seen("/"));
    Ok(())
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_impersonated_plugin_has_the_secrets_its_service_account_may_get_and_loses_them_with_the_grant()
-> anyhow::Result<()> {
    let service =
        HttpService::bind(HTTP_ADDRESS).await.map_err(|e| anyhow::anyhow!("{HTTP_ADDRESS} must be free: {e}"))?;
    let client = client().await?;
    let ns = namespace(&client, "secret-account").await?;
    let token = format!("token-of-{ns}");
    secret(&client, &ns, "fixture-http-token", &token).await?;
    for account in ["reader", "stranger"] {
        apply(
            &client,
            json!({ "apiVersion": "v1", "kind": "ServiceAccount", "metadata": { "name": account } }),
            Some(&ns),
        )
        .await?;
    }
    let role = json!({
        "apiVersion": "rbac.authorization.k8s.io/v1", "kind": "Role", "metadata": { "name": "token-reader" },
        "rules": [{ "apiGroups": [""], "resources": ["secrets"], "resourceNames": ["fixture-http-token"],
                    "verbs": ["get"] }]
    });
    let binding = json!({
        "apiVersion": "rbac.authorization.k8s.io/v1", "kind": "RoleBinding", "metadata": { "name": "token-reader" },
        "roleRef": { "apiGroup": "rbac.authorization.k8s.io", "kind": "Role", "name": "token-reader" },
        "subjects": [{ "kind": "ServiceAccount", "name": "reader", "namespace": ns }]
    });
    apply(&client, role, Some(&ns)).await?;
    apply(&client, binding, Some(&ns)).await?;
    let as_account = |account: &str| {
        overrides(&format!(
            "serviceAccount: {{ namespace: {ns}, name: {account} }}\nallowPlainHttpSecrets: [\"{HTTP_ORIGIN}\"]\n"
        ))
    };
    let (host, metrics) = host(&ns, HostConfig::default()).await?;
    let file = plugin("fixture-http");
    let bytes = std::fs::read(&file)?;
    let primaries: Api<ConfigMap> = Api::namespaced(client.clone(), &ns);
    let caller = |name: &str| -> anyhow::Result<ConfigMap> {
        Ok(serde_json::from_value(json!({
            "metadata": { "name": name, "labels": { "wasmop.dev/fixture": "http" } },
            "data": { "url": format!("{HTTP_ORIGIN}/echo/{ns}/{name}") }
        }))?)
    };
    primaries.create(&PostParams::default(), &caller("first")?).await?;

    // An account that may not get the Secret: refused, naming it and the rule.
    let err = host.install("test", &file, bytes.clone(), Some(as_account("stranger")?)).await.expect_err("refused");
    let expected = format!(
        "plugin \"fixture-http\" may not read Secret {ns}/fixture-http-token (the secret header authorization of \
         {HTTP_ORIGIN}): its ServiceAccount {ns}/stranger may not get it, and the operator allowed no such Secret for it"
    );
    assert!(err.to_string().contains(&expected), "{err}");
    assert_eq!(host.plugins(), Vec::<String>::new());

    // One that may: it runs, and its request carries the token.
    host.install("test", &file, bytes, Some(as_account("reader")?)).await?;
    let first = format!("/echo/{ns}/first");
    until("the first primary's fetch", async || Ok(service.seen(&first)), |seen| !seen.is_empty()).await?;
    assert_eq!(service.seen(&first)[0].authorization, Some(format!("Bearer {token}")));

    // Once the account loses the grant (and the read it made has expired from the cache), the
    // Secret is no longer read for the plugin: the next request fails before it is sent.
    Api::<DynamicObject>::namespaced_with(
        client.clone(),
        &ns,
        &kube::api::ApiResource::erase::<k8s_openapi::api::rbac::v1::RoleBinding>(&()),
    )
    .delete("token-reader", &DeleteParams::default())
    .await?;
    tokio::time::sleep(wasmop::secrets::CACHE_TTL + Duration::from_secs(1)).await;
    // The first primary's retries may have fetched again while the grant held; none after.
    let sent_first = service.seen(&first).len();
    primaries.create(&PostParams::default(), &caller("second")?).await?;
    until(
        "the second primary's fetch to fail",
        async || Ok(metrics.http_requests_of("fixture-http", HTTP_ORIGIN, "error")),
        |failed| *failed > 0,
    )
    .await?;
    assert_eq!(service.seen(&format!("/echo/{ns}/second")), Vec::new());
    assert_eq!(service.seen(&first).len(), sent_first, "the first primary's request went out without the grant");
    assert!(service.seen(&first).iter().all(|r| r.authorization == Some(format!("Bearer {token}"))));
    host.stop_all().await;
    Ok(())
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_plugin_watching_secrets_needs_an_account_that_may_list_them_or_the_operators_word() -> anyhow::Result<()> {
    let client = client().await?;
    apply_file(&client, &workspace_root().join("plugins/fixtures/swap/crd.yaml"), None).await?;
    let ns = namespace(&client, "secret-watch").await?;
    // A Secret `fixture-record` watches (by its label).
    let creds = json!({ "apiVersion": "v1", "kind": "Secret",
        "metadata": { "name": "creds", "labels": { "test.wasmop.dev/record": "yes" } },
        "stringData": { "token": "hunter2" } });
    apply(&client, creds, Some(&ns)).await?;
    for account in ["stranger", "watcher"] {
        let account = json!({ "apiVersion": "v1", "kind": "ServiceAccount", "metadata": { "name": account } });
        apply(&client, account, Some(&ns)).await?;
    }
    // `stranger` may list and watch the Secrets of its own namespace; `watcher` those of every
    // namespace, as `fixture-record`'s watch (mapped by annotations) covers, and keep its Swaps.
    let rules = |resources: &[&str]| {
        json!([
            { "apiGroups": [""], "resources": resources, "verbs": ["get", "list", "watch"] },
            { "apiGroups": ["test.wasmop.dev"], "resources": ["swaps", "swaps/status"],
              "verbs": ["get", "list", "watch", "patch", "update"] },
            { "apiGroups": ["", "events.k8s.io"], "resources": ["events"], "verbs": ["create", "patch"] },
        ])
    };
    let role = |kind: &str, name: &str, account: &str| {
        let role = json!({ "apiVersion": "rbac.authorization.k8s.io/v1", "kind": kind, "metadata": { "name": name },
            "rules": rules(&["secrets"]) });
        let binding = json!({ "apiVersion": "rbac.authorization.k8s.io/v1", "kind": format!("{kind}Binding"),
            "metadata": { "name": name },
            "roleRef": { "apiGroup": "rbac.authorization.k8s.io", "kind": kind, "name": name },
            "subjects": [{ "kind": "ServiceAccount", "name": account, "namespace": ns }] });
        (role, binding)
    };
    let (own, own_binding) = role("Role", "secret-lister", "stranger");
    apply(&client, own, Some(&ns)).await?;
    apply(&client, own_binding, Some(&ns)).await?;
    let everywhere = format!("secret-watcher-{ns}");
    let (cluster_role, cluster_binding) = role("ClusterRole", &everywhere, "watcher");
    apply(&client, cluster_role, None).await?;
    apply(&client, cluster_binding, None).await?;

    let (host, _) = host(&ns, HostConfig::default()).await?;
    let file = plugin("fixture-record");
    let bytes = std::fs::read(&file)?;
    let rule = "its watch of v1/Secret";
    // Without an identity of its own or the operator's word: refused, naming the watch and the rule.
    let err = host.install("test", &file, bytes.clone(), Some(overrides(&format!("namespace: {ns}"))?)).await;
    let err = err.expect_err("refused").to_string();
    assert!(
        err.contains(&format!(
            "plugin \"fixture-record\" may not watch Secrets in every namespace ({rule}): it runs as no \
             serviceAccount of its own, and the operator did not allow it (allowSecretWatches: true"
        )),
        "{err}"
    );
    // An account that may list only its own namespace's Secrets, where the watch covers all.
    let as_account = |account: &str| overrides(&format!("serviceAccount: {{ namespace: {ns}, name: {account} }}"));
    let err = host.install("test", &file, bytes.clone(), Some(as_account("stranger")?)).await;
    let err = err.expect_err("refused").to_string();
    assert!(
        err.contains(&format!(
            "may not watch Secrets in every namespace ({rule}): its ServiceAccount {ns}/stranger may not list and \
             watch them"
        )),
        "{err}"
    );
    assert_eq!(host.plugins(), Vec::<String>::new());

    // One that may: it runs, and reads the Secret its Swap names.
    host.install("test", &file, bytes.clone(), Some(as_account("watcher")?)).await?;
    let swaps: Api<DynamicObject> = Api::namespaced_with(client.clone(), &ns, &swap_resource());
    let swap = json!({ "apiVersion": "test.wasmop.dev/v1", "kind": "Swap",
        "metadata": { "name": "reads", "annotations": { "test.wasmop.dev/secret": "creds" } },
        "spec": { "value": 1 } });
    swaps.create(&PostParams::default(), &serde_json::from_value(swap)?).await?;
    wait_until(&swaps, "reads", "the Secret read", |s| s.data["status"]["secretKeys"] == 1).await?;
    host.stop_all().await;

    // The operator's word, with no account: it runs.
    let (host, _) = host_allowing(&ns).await?;
    host.install("test", &file, bytes, None).await?;
    assert_eq!(host.plugins(), ["fixture-record".to_string()]);
    host.stop_all().await;

    let roles = kube::api::ApiResource::erase::<k8s_openapi::api::rbac::v1::ClusterRole>(&());
    let bindings = kube::api::ApiResource::erase::<k8s_openapi::api::rbac::v1::ClusterRoleBinding>(&());
    for resource in [bindings, roles] {
        Api::<DynamicObject>::all_with(client.clone(), &resource).delete(&everywhere, &DeleteParams::default()).await?;
    }
    Ok(())
}

/// The Swap kind of `fixture-record`.
fn swap_resource() -> kube::api::ApiResource {
    let gvk = kube::api::GroupVersionKind::gvk("test.wasmop.dev", "v1", "Swap");
    kube::api::ApiResource::from_gvk_with_plural(&gvk, "swaps")
}

/// A host on `ns` whose configuration file lets `fixture-record` watch Secrets.
async fn host_allowing(ns: &str) -> anyhow::Result<(Arc<Host>, Arc<Metrics>)> {
    host(ns, wasmop_tests::allowing_secret_watches(HostConfig::default())).await
}
