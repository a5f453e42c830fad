//! The DnsRecord sample (`plugins/dnsrecord`): an external dependent kept in an HTTP service
//! (`wasmop_tests::records`) through granted outgoing HTTP, polled per resource, its ID tracked
//! in a ConfigMap owned by the primary, deleted through the finalizer. Each scenario runs the
//! Python and TypeScript samples (`plugins/dnsrecord-py`, `plugins/dnsrecord-ts`) too, through
//! their SDKs' HTTP clients, against the same service.

use std::time::{Duration, Instant};

use k8s_openapi::api::core::v1::{ConfigMap, Secret};
use kube::api::{Api, ApiResource, DeleteParams, DynamicObject, GroupVersionKind, Patch, PatchParams, PostParams};
use kube::{Client, ResourceExt};
use serde_json::json;
use wasmop::settings::HostConfig;
use wasmop_tests::records::{self, Records};
use wasmop_tests::{RunningHost, allowing, apply_file, client, namespace, wait_until, within, workspace_root};

const TOKEN: &str = "s3cret-dns-token";

/// The sample's configuration (`plugins/dnsrecord/wasmop.yaml`): the operator allows it its
/// Secrets, and its token over plain HTTP to the local records service.
fn sample_config() -> anyhow::Result<HostConfig> {
    Ok(HostConfig::read(&workspace_root().join("plugins/dnsrecord/wasmop.yaml"))?)
}
/// The sample's polling period.
const PERIOD: Duration = Duration::from_secs(2);

async fn setup(test: &str) -> anyhow::Result<(Client, String, Api<DynamicObject>, Records)> {
    let client = client().await?;
    apply_file(&client, &workspace_root().join("plugins/dnsrecord/crd.yaml"), None).await?;
    let ns = namespace(&client, test).await?;
    let token: Secret = serde_json::from_value(json!({
        "metadata": { "name": "dns-api-token" }, "stringData": { "token": TOKEN } }))?;
    Api::<Secret>::namespaced(client.clone(), &ns).create(&PostParams::default(), &token).await?;
    let gvk = GroupVersionKind::gvk("sample.wasmop.dev", "v1", "DnsRecord");
    let api = Api::namespaced_with(client.clone(), &ns, &ApiResource::from_gvk_with_plural(&gvk, "dnsrecords"));
    Ok((client, ns, api, Records::shared(TOKEN)?))
}

async fn create(api: &Api<DynamicObject>, zone: &str, name: &str, value: &str) -> anyhow::Result<()> {
    let record: DynamicObject = serde_json::from_value(json!({
        "apiVersion": "sample.wasmop.dev/v1", "kind": "DnsRecord", "metadata": { "name": name },
        "spec": { "zone": zone, "name": name, "type": "A", "value": value } }))?;
    api.create(&PostParams::default(), &record).await?;
    Ok(())
}

fn condition(object: &DynamicObject, type_: &str) -> Option<serde_json::Value> {
    object.data["status"]["conditions"].as_array()?.iter().find(|c| c["type"] == type_).cloned()
}

fn ready(object: &DynamicObject) -> bool {
    condition(object, "Ready").is_some_and(|c| c["status"] == "True")
}

wasmop_tests::in_every_language!(
    a_record_is_created_tracked_and_a_restarted_host_neither_loses_nor_duplicates_it,
    "dnsrecord"
);

async fn a_record_is_created_tracked_and_a_restarted_host_neither_loses_nor_duplicates_it(
    plugin: &str,
) -> anyhow::Result<()> {
    let (client, ns, api, records) = setup("dns-track").await?;
    let host = RunningHost::start_with_config(&client, &ns, &[plugin], sample_config()?)?;
    create(&api, &ns, "www", "10.0.0.1").await?;
    let www = wait_until(&api, "www", "the record served", |o| ready(o) && o.data["status"]["id"].is_string()).await?;
    let id = www.data["status"]["id"].as_str().expect("an id").to_owned();
    let zone = records.zone(&ns);
    assert_eq!(zone.len(), 1, "{zone:?}");
    assert_eq!((zone[0].id.as_str(), zone[0].value.as_str()), (id.as_str(), "10.0.0.1"));
    assert!(www.finalizers().contains(&"wasmop.dev/dnsrecord".to_string()), "{:?}", www.finalizers());
    // The tracking ConfigMap, owned by the DnsRecord.
    let tracking = Api::<ConfigMap>::namespaced(client.clone(), &ns).get("www-dnsrecord-ext").await?;
    assert_eq!(tracking.data.as_ref().map(|d| d["record"].clone()), Some(format!(r#"{{"www":"{id}"}}"#)));
    assert_eq!(tracking.owner_references()[0].uid, www.uid().expect("uid"));
    host.stop().await;

    // A new host finds the record by its tracked ID: the change updates it in place.
    let host = RunningHost::start_with_config(&client, &ns, &[plugin], sample_config()?)?;
    let patch = json!({ "spec": { "value": "10.0.0.2" } });
    api.patch("www", &PatchParams::default(), &Patch::Merge(&patch)).await?;
    wait_until(&api, "www", "the change served", |o| {
        ready(o) && o.data["status"]["observedGeneration"].as_i64() == o.metadata.generation
    })
    .await?;
    let zone = records.zone(&ns);
    assert_eq!(zone.len(), 1, "no duplicate after the restart: {zone:?}");
    assert_eq!((zone[0].id.as_str(), zone[0].value.as_str()), (id.as_str(), "10.0.0.2"));
    host.stop().await;
    Ok(())
}

wasmop_tests::in_every_language!(
    a_record_changed_out_of_band_is_put_back_within_a_polling_period_and_a_second,
    "dnsrecord"
);

async fn a_record_changed_out_of_band_is_put_back_within_a_polling_period_and_a_second(
    plugin: &str,
) -> anyhow::Result<()> {
    let (client, ns, api, records) = setup("dns-drift").await?;
    let host = RunningHost::start_with_config(&client, &ns, &[plugin], sample_config()?)?;
    create(&api, &ns, "api", "10.0.1.1").await?;
    wait_until(&api, "api", "the record served", ready).await?;
    assert!(records.set_value(&ns, "api", "6.6.6.6"), "the record exists");
    let changed = Instant::now();
    let restored = async {
        while records.zone(&ns).first().map(|r| r.value.as_str()) != Some("10.0.1.1") {
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
    };
    within(PERIOD + Duration::from_secs(1), "the record put back", restored).await?;
    println!("put back {:?} after the out-of-band change (period {PERIOD:?})", changed.elapsed());
    assert_eq!(records.zone(&ns).len(), 1);
    host.stop().await;
    Ok(())
}

wasmop_tests::in_every_language!(deleting_a_record_deletes_it_in_the_service_then_releases_the_finalizer, "dnsrecord");

async fn deleting_a_record_deletes_it_in_the_service_then_releases_the_finalizer(plugin: &str) -> anyhow::Result<()> {
    let (client, ns, api, records) = setup("dns-delete").await?;
    let host = RunningHost::start_with_config(&client, &ns, &[plugin], sample_config()?)?;
    create(&api, &ns, "old", "10.0.2.1").await?;
    wait_until(&api, "old", "the record served", ready).await?;
    assert_eq!(records.zone(&ns).len(), 1);
    api.delete("old", &DeleteParams::default()).await?;
    let gone = async {
        while api.get_opt("old").await.ok().flatten().is_some() {
            tokio::time::sleep(Duration::from_millis(100)).await;
        }
    };
    within(Duration::from_secs(60), "the DnsRecord gone", gone).await?;
    assert!(records.zone(&ns).is_empty(), "deleted in the service first: {:?}", records.zone(&ns));
    host.stop().await;
    Ok(())
}

wasmop_tests::in_every_language!(a_slow_service_degrades_the_record_and_retries_while_other_plugins_go_on, "dnsrecord");

async fn a_slow_service_degrades_the_record_and_retries_while_other_plugins_go_on(plugin: &str) -> anyhow::Result<()> {
    let (client, ns, api, records) = setup("dns-slow").await?;
    apply_file(&client, &workspace_root().join("plugins/greeting/crd.yaml"), None).await?;
    let host = RunningHost::start_with_config(&client, &ns, &[plugin, "greeting"], sample_config()?)?;
    create(&api, &ns, "mail", "10.0.3.1").await?;
    wait_until(&api, "mail", "the record served", ready).await?;
    // Every answer now comes after the plugin's 2 s timeout.
    records.set_delay(&ns, Duration::from_secs(5));
    let patch = json!({ "spec": { "value": "10.0.3.2" } });
    api.patch("mail", &PatchParams::default(), &Patch::Merge(&patch)).await?;
    let degraded =
        wait_until(&api, "mail", "Degraded", |o| condition(o, "Degraded").is_some_and(|c| c["status"] == "True"))
            .await?;
    let message = condition(&degraded, "Degraded").expect("set")["message"].to_string();
    assert!(message.contains("record"), "names the failing dependent: {message}");
    // The other plugin is not held up.
    let gvk = GroupVersionKind::gvk("example.wasmop.dev", "v1", "Greeting");
    let greetings: Api<DynamicObject> =
        Api::namespaced_with(client.clone(), &ns, &ApiResource::from_gvk_with_plural(&gvk, "greetings"));
    let hello: DynamicObject = serde_json::from_value(json!({
        "apiVersion": "example.wasmop.dev/v1", "kind": "Greeting", "metadata": { "name": "hello" },
        "spec": { "name": "wasmop" } }))?;
    greetings.create(&PostParams::default(), &hello).await?;
    wait_until(&greetings, "hello", "the greeting reconciled", |o| o.data["status"]["message"].is_string()).await?;
    // The service recovers: the retry puts the new value in place.
    records.set_delay(&ns, Duration::ZERO);
    wait_until(&api, "mail", "recovered", |o| {
        ready(o) && condition(o, "Degraded").is_some_and(|c| c["status"] == "False")
    })
    .await?;
    let zone = records.zone(&ns);
    assert_eq!(zone.iter().map(|r| r.value.as_str()).collect::<Vec<_>>(), ["10.0.3.2"]);
    host.stop().await;
    Ok(())
}

/// Global polling (the `fixture-global` plugin on DnsRecords): one `fetch-all` for every
/// primary; a change of one record's state reconciles its primary only.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn global_polling_reconciles_only_the_primaries_whose_state_changed() -> anyhow::Result<()> {
    let (client, ns, api, records) = setup("dns-global").await?;
    let record = |name: &str, value: &str| wasmop_tests::records::Record {
        id: String::new(),
        name: name.into(),
        type_: "A".into(),
        value: value.into(),
        ttl: 0,
    };
    records.insert(&ns, record("a", "1"));
    records.insert(&ns, record("b", "1"));
    let allowed = allowing(HostConfig::default(), "global", &["dns-api-token"], &[records::ORIGIN]);
    let host = RunningHost::start_with_config(&client, &ns, &["fixture-global"], allowed)?;
    create(&api, &ns, "a", "ignored").await?;
    create(&api, &ns, "b", "ignored").await?;
    let value = |v: &'static str| {
        move |o: &DynamicObject| o.annotations().get("global.wasmop.dev/value").map(String::as_str) == Some(v)
    };
    let reconciles = |o: &DynamicObject| o.annotations().get("global.wasmop.dev/reconciles").cloned();
    wait_until(&api, "a", "a's state seen", value("1")).await?;
    let b = wait_until(&api, "b", "b's state seen", value("1")).await?;
    let b_reconciles = reconciles(&b);
    assert!(records.set_value(&ns, "a", "2"));
    wait_until(&api, "a", "a's new state seen", value("2")).await?;
    // Another round of polling finds b unchanged: not reconciled.
    let before = records.all_lists();
    let polled = async {
        while records.all_lists() < before + 2 {
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
    };
    within(Duration::from_secs(10), "two more polls", polled).await?;
    let b = api.get("b").await?;
    assert_eq!(reconciles(&b), b_reconciles, "b's state did not change");
    host.stop().await;
    Ok(())
}
