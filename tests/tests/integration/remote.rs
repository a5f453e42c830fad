//! A watch on a second API server: ConfigMaps there, annotated with a Link of the first cluster,
//! reconcile that Link through the annotations mapper, and the guest reads them from the host's
//! cache of the second cluster. The second control plane is started for this test binary
//! (or named by `WASMOP_TEST_REMOTE_KUBECONFIG`).

use std::collections::BTreeMap;

use wasmop::host::HostError;
use wasmop::informer::Clusters;
use wasmop::mapping::{PRIMARY_NAME_ANNOTATION, PRIMARY_NAMESPACE_ANNOTATION};
use wasmop::runtime::Limits;
use wasmop::settings::HostConfig;
use wasmop_tests::links::{Links, Secondary, seen, seen_entry, touch_config_map};
use wasmop_tests::{RunningHost, client, namespace, remote_client};

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_config_map_on_a_second_api_server_reconciles_its_annotated_primary_in_the_first() -> anyhow::Result<()> {
    let client = client().await?;
    let remote = remote_client().await?;
    let ns = namespace(&client, "remote-primaries").await?;
    let remote_ns = namespace(&remote, "remote-secondaries").await?;
    let links = Links::new(&client, &ns).await?;

    // Without the cluster, the plugin is refused with the reason.
    let refused = RunningHost::start(&client, &ns, &["fixture-remote"], Limits::default()).err().expect("refused");
    let refusal = refused.downcast_ref::<HostError>().expect("a host error");
    assert!(matches!(refusal, HostError::UnknownCluster { .. }), "{refusal}");
    assert!(refusal.to_string().contains("cluster \"remote\" is not known"), "{refusal}");

    let clusters = Clusters::new(client.clone()).with_remote("remote", remote.clone());
    let host = RunningHost::start_on(clusters, &ns, &["fixture-remote"], Limits::default(), HostConfig::default())?;
    links.create("primary", "remote", &[]).await?;
    links.create("bystander", "remote", &[]).await?;
    links.reconciled("primary").await?;
    let bystander = links.reconciled("bystander").await?;

    let mut cm = Secondary::config_map(&remote_ns, "settings", ("wasmop.dev/link", "remote"));
    cm.annotations =
        BTreeMap::from([(PRIMARY_NAME_ANNOTATION, "primary"), (PRIMARY_NAMESPACE_ANNOTATION, ns.as_str())]);
    cm.data = BTreeMap::from([("v", "1")]);
    let created = cm.apply(&remote).await?;
    links.saw("primary", &created).await?;
    let changed = touch_config_map(&remote, &remote_ns, "settings", "v", "2").await?;
    links.saw("primary", &changed).await?;
    let barrier = touch_config_map(&remote, &remote_ns, "settings", "v", "3").await?;
    links.saw("primary", &barrier).await?;

    assert_eq!(seen(&links.get("primary").await?), [seen_entry(&barrier)]);
    assert_eq!(links.last_reconcile("bystander").await?, bystander, "the bystander was reconciled");
    assert_eq!(host.host().clusters().get(Some("remote"))?.active(), 1, "one watch on the second cluster");
    host.stop().await;
    Ok(())
}
