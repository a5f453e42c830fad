//! Secondary resources against the real kube-apiserver (with the garbage collector), with the
//! `fixture-link` plugin: owner references, annotations across namespaces, a plugin mapper that
//! fans out, and many-to-many references. Each reconcile records the secondaries it read from
//! the host's cache (`status.seen`), which the tests compare with what the API server holds.
//!
//! "No other primary was reconciled" is checked with a barrier: after the change under test
//! has reconciled its primaries, a second change of the same secondary is made and awaited.
//! A wrong mapping would have enqueued the bystander together with the right primaries, long
//! before the barrier's reconcile; its reconcile time must still be the one from before.

use std::collections::BTreeMap;

use kube::ResourceExt;
use kube::api::DynamicObject;
use wasmop::mapping::{PRIMARY_NAME_ANNOTATION, PRIMARY_NAMESPACE_ANNOTATION};
use wasmop::runtime::Limits;
use wasmop_tests::links::{Links, Secondary, seen, seen_entry, touch_config_map};
use wasmop_tests::{RunningHost, client, namespace};

const PLUGIN: &str = "fixture-link";

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_change_to_an_owned_config_map_reconciles_its_owner_and_no_other_primary() -> anyhow::Result<()> {
    let client = client().await?;
    let ns = namespace(&client, "owned").await?;
    let links = Links::new(&client, &ns).await?;
    let host = RunningHost::start(&client, &ns, &[PLUGIN], Limits::default())?;
    let owner = links.create("owner", "link", &[]).await?;
    links.create("bystander", "link", &[]).await?;
    links.reconciled("owner").await?;
    let bystander = links.reconciled("bystander").await?;

    let mut cm = Secondary::config_map(&ns, "owned-cm", ("wasmop.dev/link", "owned"));
    cm.owner = Some(&owner);
    cm.data = BTreeMap::from([("v", "1")]);
    let created = cm.apply(&client).await?;
    links.saw("owner", &created).await?;
    let changed = touch_config_map(&client, &ns, "owned-cm", "v", "2").await?;
    links.saw("owner", &changed).await?;
    let barrier = touch_config_map(&client, &ns, "owned-cm", "v", "3").await?;
    links.saw("owner", &barrier).await?;

    assert_eq!(links.last_reconcile("bystander").await?, bystander, "the bystander was reconciled");
    assert_eq!(seen(&links.get("owner").await?), [seen_entry(&barrier)]);
    host.stop().await;
    Ok(())
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_secret_in_another_namespace_annotated_with_its_primary_reconciles_that_primary() -> anyhow::Result<()> {
    let client = client().await?;
    let ns = namespace(&client, "annotated").await?;
    let elsewhere = namespace(&client, "annotated-secrets").await?;
    let links = Links::new(&client, &ns).await?;
    let host = RunningHost::start(&client, &ns, &[PLUGIN], Limits::default())?;
    links.create("target", "link", &[]).await?;
    links.create("bystander", "link", &[]).await?;
    links.reconciled("target").await?;
    let bystander = links.reconciled("bystander").await?;

    let secret = |value| Secondary {
        kind: "Secret",
        namespace: &elsewhere,
        name: "credentials",
        labels: BTreeMap::from([("wasmop.dev/link", "annotated")]),
        annotations: BTreeMap::from([(PRIMARY_NAME_ANNOTATION, "target"), (PRIMARY_NAMESPACE_ANNOTATION, ns.as_str())]),
        owner: None,
        data: BTreeMap::from([("password", value)]),
    };
    let created = secret("one").apply(&client).await?;
    links.saw("target", &created).await?;
    let changed = secret("two").apply(&client).await?;
    assert_ne!(changed.resource_version(), created.resource_version());
    links.saw("target", &changed).await?;
    let barrier = secret("three").apply(&client).await?;
    links.saw("target", &barrier).await?;

    assert_eq!(links.last_reconcile("bystander").await?, bystander, "the bystander was reconciled");
    host.stop().await;
    Ok(())
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_plugin_mapper_fanning_one_config_map_out_to_three_primaries_reconciles_exactly_those() -> anyhow::Result<()>
{
    let client = client().await?;
    let ns = namespace(&client, "fanout").await?;
    let links = Links::new(&client, &ns).await?;
    let host = RunningHost::start(&client, &ns, &[PLUGIN], Limits::default())?;
    let targets = ["p1", "p2", "p3"];
    for name in targets.iter().chain(&["bystander"]) {
        links.create(name, "link", &[]).await?;
        links.reconciled(name).await?;
    }
    let bystander = links.last_reconcile("bystander").await?;

    let mut cm = Secondary::config_map(&ns, "fan", ("wasmop.dev/link", "fanout"));
    cm.data = BTreeMap::from([("targets", "p1, p2,p3"), ("v", "1")]);
    let created = cm.apply(&client).await?;
    for name in targets {
        links.saw(name, &created).await?;
    }
    let changed = touch_config_map(&client, &ns, "fan", "v", "2").await?;
    for name in targets {
        links.saw(name, &changed).await?;
    }
    let barrier = touch_config_map(&client, &ns, "fan", "v", "3").await?;
    for name in targets {
        links.saw(name, &barrier).await?;
    }

    assert_eq!(links.last_reconcile("bystander").await?, bystander, "the bystander was reconciled");
    assert!(seen(&links.get("bystander").await?).is_empty());
    host.stop().await;
    Ok(())
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_shared_config_map_reconciles_every_primary_that_references_it() -> anyhow::Result<()> {
    let client = client().await?;
    let ns = namespace(&client, "many-to-many").await?;
    let links = Links::new(&client, &ns).await?;
    let shared = Secondary::config_map(&ns, "shared", ("wasmop.dev/link", "shared")).apply(&client).await?;
    let other = Secondary::config_map(&ns, "other", ("wasmop.dev/link", "shared")).apply(&client).await?;
    let host = RunningHost::start(&client, &ns, &[PLUGIN], Limits::default())?;
    links.create("m1", "link", &["shared", "other"]).await?;
    links.create("m2", "link", &["shared"]).await?;
    links.create("m3", "link", &["other"]).await?;
    links.saw("m1", &shared).await?;
    links.saw("m1", &other).await?;
    links.saw("m2", &shared).await?;
    links.saw("m3", &other).await?;
    let m3 = links.last_reconcile("m3").await?;

    let changed = touch_config_map(&client, &ns, "shared", "v", "1").await?;
    links.saw("m1", &changed).await?;
    links.saw("m2", &changed).await?;
    let barrier = touch_config_map(&client, &ns, "shared", "v", "2").await?;
    links.saw("m1", &barrier).await?;
    links.saw("m2", &barrier).await?;

    assert_eq!(links.last_reconcile("m3").await?, m3, "m3 does not use the shared ConfigMap");
    let m1 = links.get("m1").await?;
    let mut expected = vec![seen_entry(&other), seen_entry(&barrier)];
    expected.sort();
    assert_eq!(seen(&m1), expected, "m1 reads both of its ConfigMaps from the cache");
    let metrics = host.host().metrics().encode();
    assert!(
        metrics.contains(&format!(r#"plugin="{PLUGIN}",export="secondaries-of""#)),
        "asked:
{metrics}"
    );
    host.stop().await;
    Ok(())
}

/// The guest's `get`/`list` and `secondaries` are served from the cache: after a change, the
/// reconcile it causes reads the new version, the same the API server returns.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_guest_reads_the_same_secondaries_the_api_server_holds() -> anyhow::Result<()> {
    let client = client().await?;
    let ns = namespace(&client, "cache-reads").await?;
    let links = Links::new(&client, &ns).await?;
    let host = RunningHost::start(&client, &ns, &[PLUGIN], Limits::default())?;
    let owner = links.create("reader", "link", &[]).await?;
    let mut stored: Vec<DynamicObject> = Vec::new();
    for name in ["a", "b", "c"] {
        let mut cm = Secondary::config_map(&ns, name, ("wasmop.dev/link", "owned"));
        cm.owner = Some(&owner);
        cm.data = BTreeMap::from([("name", name)]);
        stored.push(cm.apply(&client).await?);
    }
    stored.push(touch_config_map(&client, &ns, "b", "extra", "x").await?);
    stored.remove(1);
    let mut expected: Vec<_> = stored.iter().map(seen_entry).collect();
    expected.sort();
    let want = expected.clone();
    let link = links.wait_for("reader", "a reconcile that saw a, b and c as stored", move |o| seen(o) == want).await?;
    assert_eq!(seen(&link), expected);
    host.stop().await;
    Ok(())
}

/// A plugin's first reconcile waits until its watches are synced: secondaries that exist before
/// the host starts are seen by the very first reconcile of their primary, owned ones and
/// referenced ones alike.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_first_reconcile_sees_secondaries_that_existed_before_the_host_started() -> anyhow::Result<()> {
    let client = client().await?;
    let ns = namespace(&client, "first-reconcile").await?;
    let links = Links::new(&client, &ns).await?;
    let referenced = Secondary::config_map(&ns, "referenced", ("wasmop.dev/link", "shared")).apply(&client).await?;
    let mut expected = Vec::new();
    for name in ["early-1", "early-2", "early-3"] {
        let owner = links.create(name, "link", &["referenced"]).await?;
        let mut owned = Secondary::config_map(&ns, name, ("wasmop.dev/link", "owned"));
        owned.owner = Some(&owner);
        let mut both = vec![seen_entry(&owned.apply(&client).await?), seen_entry(&referenced)];
        both.sort();
        expected.push((name, both));
    }
    let host = RunningHost::start(&client, &ns, &[PLUGIN], Limits::default())?;
    for (name, both) in expected {
        let first = |o: &DynamicObject| o.data["status"]["reconciles"].as_i64() == Some(1);
        let link = links.wait_for(name, "the first reconcile", first).await?;
        assert_eq!(seen(&link), both, "the first reconcile of {name} saw both of its ConfigMaps");
    }
    host.stop().await;
    Ok(())
}
