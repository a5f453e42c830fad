//! Shared watches against the real kube-apiserver: one watch per (kind, namespace, selectors)
//! however many controllers subscribe, reference-counted, and a late subscriber misses nothing.

use std::time::Duration;

use futures::{Stream, StreamExt};
use k8s_openapi::api::core::v1::ConfigMap;
use kube::api::{Api, ApiResource, PostParams};
use kube::runtime::watcher::Event;
use kube::{Client, ResourceExt};
use wasmop::informer::{Registry, Selectors, SharedEvent};
use wasmop_tests::{client, namespace, within};

const WAIT: Duration = Duration::from_secs(30);

async fn create_config_map(client: &Client, ns: &str, name: &str) -> anyhow::Result<()> {
    let cm: ConfigMap = serde_json::from_value(serde_json::json!({ "metadata": { "name": name } }))?;
    Api::<ConfigMap>::namespaced(client.clone(), ns).create(&PostParams::default(), &cm).await?;
    Ok(())
}

/// Waits for an `Apply` (or `InitApply`) of the object called `name`.
async fn applied<S: Stream<Item = SharedEvent> + Unpin>(events: &mut S, name: &str) -> anyhow::Result<()> {
    within(WAIT, &format!("{name} applied"), async {
        while let Some(event) = events.next().await {
            if let Event::Apply(o) | Event::InitApply(o) = event
                && o.name_any() == name
            {
                return Ok(());
            }
        }
        anyhow::bail!("the event stream ended")
    })
    .await?
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn subscribers_share_one_watch_and_one_leaving_keeps_the_others_events_flowing() -> anyhow::Result<()> {
    let client = client().await?;
    let ns = namespace(&client, "shared-watch").await?;
    let registry = Registry::new(client.clone());
    let config_maps = ApiResource::erase::<ConfigMap>(&());

    let first = registry.subscribe(&config_maps, Some(&ns), Selectors::default());
    let second = registry.subscribe(&config_maps, Some(&ns), Selectors::default());
    assert_eq!(registry.active(), 1, "the same watch is shared");
    let mut first_events = Box::pin(first.events());
    let mut second_events = Box::pin(second.events());

    create_config_map(&client, &ns, "one").await?;
    applied(&mut first_events, "one").await?;
    applied(&mut second_events, "one").await?;

    drop(first_events);
    drop(first);
    assert_eq!(registry.active(), 1, "the other subscriber keeps the watch");
    create_config_map(&client, &ns, "two").await?;
    applied(&mut second_events, "two").await?;

    // A subscriber joining a synced watch gets the cache first, so it misses nothing.
    let late = registry.subscribe(&config_maps, Some(&ns), Selectors::default());
    let mut late_events = Box::pin(late.events());
    applied(&mut late_events, "one").await?;
    assert_eq!(late.cache().state().len(), 2);

    let other = registry.subscribe(&config_maps, Some(&ns), Selectors { labels: Some("app=x"), fields: None });
    assert_eq!(registry.active(), 2, "other selectors are another watch");
    drop(other);
    drop((second, late, second_events, late_events));
    assert_eq!(registry.active(), 0, "the watch stops with its last subscriber");
    Ok(())
}
