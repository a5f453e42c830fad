//! Bounded caches against the real kube-apiserver: with a host budget (`--cache-budget-mib`),
//! the primary's and the declared watches' caches keep only warm objects; an evicted object is
//! fetched from the API server again when a reconcile or the plugin reads it, and the budget
//! is never exceeded by more than one object. The `fixture-link` plugin reads each Link's owned
//! ConfigMap through the `secondaries` import and records what it saw, at which version.

use std::collections::BTreeMap;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicI64, Ordering};
use std::time::Duration;

use futures::StreamExt;
use kube::Client;
use kube::api::{Api, ListParams};
use wasmop::informer::{Budget, trim, weight};
use wasmop::wire::Object;
use wasmop_tests::links::{Links, Secondary, Seen, seen_entry, touch_config_map};
use wasmop_tests::{RunningHost, client, namespace};

/// Creates `n` Links, each the controller owner of a ConfigMap named like it; returns what each
/// Link must see.
async fn linked(client: &Client, links: &Links, ns: &str, n: usize) -> anyhow::Result<BTreeMap<String, Seen>> {
    let created = futures::stream::iter(0..n).map(|i| async move {
        let name = format!("link-{i}");
        let link = links.create(&name, "link", &[]).await?;
        let mut cm = Secondary::config_map(ns, &name, ("wasmop.dev/link", "owned"));
        cm.owner = Some(&link);
        cm.data = BTreeMap::from([("v", "0")]);
        let seen = seen_entry(&cm.apply(client).await?);
        anyhow::Ok((name, seen))
    });
    created.buffer_unordered(8).collect::<Vec<_>>().await.into_iter().collect()
}

/// Changes every ConfigMap of `expected`; returns what each Link must see now.
async fn touch_all(
    client: &Client,
    ns: &str,
    expected: &BTreeMap<String, Seen>,
    value: &str,
) -> anyhow::Result<BTreeMap<String, Seen>> {
    let mut now = BTreeMap::new();
    for name in expected.keys() {
        now.insert(name.clone(), seen_entry(&touch_config_map(client, ns, name, "v", value).await?));
    }
    Ok(now)
}

const WAIT: Duration = Duration::from_secs(90);

#[tokio::test]
async fn with_a_budget_smaller_than_any_object_every_read_is_fetched_and_every_change_reconciled() -> anyhow::Result<()>
{
    let client = client().await?;
    let ns = namespace(&client, "bounded-fetch").await?;
    let links = Links::new(&client, &ns).await?;
    // Nothing fits: the Links and ConfigMaps are all read from the API server.
    let host = RunningHost::start_bounded(&client, &ns, &["fixture-link"], Budget { bytes: 512, idle: None })?;
    let metrics = host.host().metrics().clone();
    let expected = linked(&client, &links, &ns, 10).await?;
    links.all_saw(&expected, WAIT).await?;
    let first = metrics.cache_refetches_of("host");
    // Each reconcile fetched its Link and the plugin's read fetched the ConfigMap.
    assert!(first >= 20, "{first} refetches for 10 Links and their ConfigMaps");
    assert_eq!(metrics.cache_bytes_of("host"), 0);
    let expected = touch_all(&client, &ns, &expected, "1").await?;
    links.all_saw(&expected, WAIT).await?;
    // Every changed ConfigMap the plugin read was fetched. The Link itself may not be: a
    // reconcile that starts before the watch delivered the host's own status write of the first
    // round reads that write (read-your-writes), which the host holds until the watch shows it.
    let second = metrics.cache_refetches_of("host") - first;
    assert!(second >= 10, "{second} refetches for 10 changed ConfigMaps");
    assert_eq!(metrics.cache_bytes_of("host"), 0);
    host.stop().await;
    Ok(())
}

#[tokio::test]
async fn an_evicted_object_is_fetched_again_and_the_budget_is_never_exceeded_by_more_than_one_object()
-> anyhow::Result<()> {
    let client = client().await?;
    let ns = namespace(&client, "bounded-budget").await?;
    let links = Links::new(&client, &ns).await?;
    let budget = 12 * 1024;
    let host = RunningHost::start_bounded(&client, &ns, &["fixture-link"], Budget { bytes: budget, idle: None })?;
    let metrics = host.host().metrics().clone();
    // The pool's size, sampled as the host works.
    let (most, done) = (Arc::new(AtomicI64::new(0)), Arc::new(AtomicBool::new(false)));
    let sampler = {
        let (metrics, most, done) = (metrics.clone(), most.clone(), done.clone());
        tokio::spawn(async move {
            while !done.load(Ordering::Relaxed) {
                most.fetch_max(metrics.cache_bytes_of("host"), Ordering::Relaxed);
                tokio::time::sleep(Duration::from_millis(2)).await;
            }
        })
    };
    let expected = linked(&client, &links, &ns, 30).await?;
    links.all_saw(&expected, WAIT).await?;
    let expected = touch_all(&client, &ns, &expected, "1").await?;
    links.all_saw(&expected, WAIT).await?;
    // link-0, cold since its first reconcile, is evicted: a change of its ConfigMap reconciles
    // it from a fetched copy, and the plugin sees the new version.
    let evictions = metrics.cache_evictions_of("host");
    assert!(evictions > 0, "60 objects of 1 to 10 KB in 12 KiB evict some");
    let refetches = metrics.cache_refetches_of("host");
    let only = BTreeMap::from([(
        "link-0".to_string(),
        seen_entry(&touch_config_map(&client, &ns, "link-0", "v", "2").await?),
    )]);
    links.all_saw(&only, WAIT).await?;
    assert!(metrics.cache_refetches_of("host") > refetches, "the Link was fetched again");
    done.store(true, Ordering::Relaxed);
    sampler.await?;
    // The largest object the pool could have held, weighed as the host weighs it.
    let mut largest = 0;
    let config_maps = kube::api::ApiResource::erase::<k8s_openapi::api::core::v1::ConfigMap>(&());
    for resource in [wasmop_tests::links::resource(), config_maps] {
        let api: Api<Object> = Api::namespaced_with(client.clone(), &ns, &resource);
        for mut object in api.list(&ListParams::default()).await? {
            trim(&mut object);
            largest = largest.max(i64::from(weight(&object)));
        }
    }
    let most = most.load(Ordering::Relaxed);
    println!("pool: at most {most} of {budget} bytes; largest object {largest}; {evictions} evictions");
    assert!(most > 0, "the pool was used");
    assert!(most <= budget as i64 + largest, "the pool held {most} bytes; budget {budget}, largest object {largest}");
    host.stop().await;
    Ok(())
}
