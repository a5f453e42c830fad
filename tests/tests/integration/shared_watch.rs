//! Two plugins declaring the same watch share one watch connection, counted by the API server
//! itself (`apiserver_longrunning_requests`), and unloading one keeps the other's events
//! flowing. Alone in its test binary so that no other test opens watches meanwhile.

use std::collections::BTreeMap;
use std::time::Duration;

use kube::Client;
use kube::api::{Api, ApiResource, DynamicObject, GroupVersionKind};
use kube::runtime::wait::await_condition;
use wasmop::runtime::Limits;
use wasmop_tests::links::{Links, Secondary, touch_config_map};
use wasmop_tests::{RunningHost, apply, apply_file, client, namespace, within, workspace_root};

const WAIT: Duration = Duration::from_secs(60);

/// Namespace-scoped watches of ConfigMaps open on the API server.
async fn namespaced_config_map_watches(client: &Client) -> anyhow::Result<u64> {
    let request = http_get("/metrics")?;
    let text = client.request_text(request).await?;
    let line = text
        .lines()
        .find(|l| {
            l.starts_with("apiserver_longrunning_requests{")
                && l.contains("resource=\"configmaps\"")
                && l.contains("scope=\"namespace\"")
                && l.contains("verb=\"WATCH\"")
        })
        .unwrap_or("none 0");
    Ok(line.rsplit(' ').next().unwrap_or("0").parse::<f64>()? as u64)
}

fn http_get(path: &str) -> anyhow::Result<http::Request<Vec<u8>>> {
    Ok(http::Request::builder().uri(path).body(Vec::new())?)
}

/// Waits until the API server counts `expected` namespace-scoped ConfigMap watches.
async fn wait_for_watches(client: &Client, expected: u64) -> anyhow::Result<()> {
    within(WAIT, &format!("{expected} namespace-scoped ConfigMap watches"), async {
        loop {
            if namespaced_config_map_watches(client).await? == expected {
                return anyhow::Ok(());
            }
            tokio::time::sleep(Duration::from_millis(200)).await;
        }
    })
    .await?
}

fn probes(client: &Client, ns: &str) -> Api<DynamicObject> {
    let gvk = GroupVersionKind::gvk("test.wasmop.dev", "v1", "Probe");
    Api::namespaced_with(client.clone(), ns, &ApiResource::from_gvk_with_plural(&gvk, "probes"))
}

/// Waits until the probe `name` has been reconciled more than `runs` times; returns the count.
async fn probe_reconciled_beyond(api: &Api<DynamicObject>, name: &str, runs: i64) -> anyhow::Result<i64> {
    let reconciles = |o: &DynamicObject| o.data["status"]["reconciles"].as_i64().unwrap_or(0);
    let condition = move |o: Option<&DynamicObject>| o.is_some_and(|o| reconciles(o) > runs);
    let found =
        within(WAIT, &format!("probe {name} reconciled"), await_condition(api.clone(), name, condition)).await??;
    Ok(found.as_ref().map_or(0, reconciles))
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn two_plugins_declaring_one_watch_share_one_connection_and_unloading_one_keeps_the_other_flowing()
-> anyhow::Result<()> {
    let client = client().await?;
    let ns = namespace(&client, "shared-plugins").await?;
    let links = Links::new(&client, &ns).await?;
    apply_file(&client, &workspace_root().join("plugins/fixtures/probe/crd.yaml"), None).await?;
    let probes = probes(&client, &ns);
    let before = namespaced_config_map_watches(&client).await?;

    // Both declare the ConfigMap watch labeled wasmop.dev/link=owned in the primaries'
    // namespace. fixture-link's other two ConfigMap watches (other label selectors) follow the
    // host's namespace too; its Secret watch, mapped by annotations, is cluster-wide.
    let host = RunningHost::start(&client, &ns, &["fixture-link", "fixture-probe"], Limits::default())?;
    let link = links.create("link", "link", &[]).await?;
    let probe = apply(
        &client,
        serde_json::json!({ "apiVersion": "test.wasmop.dev/v1", "kind": "Probe", "metadata": { "name": "probe" } }),
        Some(&ns),
    )
    .await?;
    links.reconciled("link").await?;
    let runs = probe_reconciled_beyond(&probes, "probe", 0).await?;

    // An owned ConfigMap for each plugin: both subscribers' events flow, so every watch either
    // of them needs is connected.
    let mut owned_by_link = Secondary::config_map(&ns, "of-link", ("wasmop.dev/link", "owned"));
    owned_by_link.owner = Some(&link);
    links.saw("link", &owned_by_link.apply(&client).await?).await?;
    let mut owned_by_probe = Secondary::config_map(&ns, "of-probe", ("wasmop.dev/link", "owned"));
    owned_by_probe.owner = Some(&probe);
    owned_by_probe.data = BTreeMap::from([("v", "1")]);
    owned_by_probe.apply(&client).await?;
    let runs = probe_reconciled_beyond(&probes, "probe", runs).await?;

    wait_for_watches(&client, before + 3).await?;
    // fixture-link: its primary and four watches; fixture-probe: its primary and the shared watch.
    assert_eq!(host.host().clusters().local().active(), 6);

    assert!(host.host().stop("fixture-link").await);
    assert_eq!(host.host().clusters().local().active(), 2, "fixture-probe keeps its primary and the shared watch");
    wait_for_watches(&client, before + 1).await?;
    touch_config_map(&client, &ns, "of-probe", "v", "2").await?;
    probe_reconciled_beyond(&probes, "probe", runs).await?;

    host.stop().await;
    wait_for_watches(&client, before).await?;
    Ok(())
}
