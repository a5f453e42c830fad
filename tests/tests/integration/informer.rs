//! Shared watches against the real kube-apiserver: one watch per (kind, namespace, selectors)
//! however many controllers subscribe, reference-counted, and a late subscriber misses nothing.

use std::sync::{Arc, Mutex};
use std::time::Duration;

use futures::{Stream, StreamExt};
use k8s_openapi::api::core::v1::ConfigMap;
use kube::api::{Api, ApiResource, DeleteParams, PostParams};
use kube::runtime::watcher::Event;
use kube::{Client, ResourceExt};
use serde_json::json;
use wasmop::informer::{Registry, Selectors, Shape, SharedEvent};
use wasmop::wire::Object;
use wasmop_tests::{client, namespace, within};

const WAIT: Duration = Duration::from_secs(30);

async fn create_config_map(client: &Client, ns: &str, name: &str) -> anyhow::Result<()> {
    let cm: ConfigMap = serde_json::from_value(serde_json::json!({ "metadata": { "name": name } }))?;
    Api::<ConfigMap>::namespaced(client.clone(), ns).create(&PostParams::default(), &cm).await?;
    Ok(())
}

/// Waits for an `Apply` (or `InitApply`) of the object called `name`.
async fn applied<S: Stream<Item = SharedEvent> + Unpin>(events: &mut S, name: &str) -> anyhow::Result<()> {
    seen(events, name, false).await
}

/// Waits for a `Delete` of the object called `name`.
async fn deleted<S: Stream<Item = SharedEvent> + Unpin>(events: &mut S, name: &str) -> anyhow::Result<()> {
    seen(events, name, true).await
}

/// Waits for an event of the object called `name`: its deletion, or else an apply.
async fn seen<S: Stream<Item = SharedEvent> + Unpin>(events: &mut S, name: &str, deletion: bool) -> anyhow::Result<()> {
    within(WAIT, &format!("{name} {}", if deletion { "deleted" } else { "applied" }), async {
        while let Some(event) = events.next().await {
            let object = match event {
                Event::Apply(o) | Event::InitApply(o) if !deletion => o,
                Event::Delete(o) if deletion => o,
                _ => continue,
            };
            if object.name_any() == name {
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

    let first = registry.subscribe(&config_maps, Some(&ns), Selectors::default(), &Shape::default());
    let second = registry.subscribe(&config_maps, Some(&ns), Selectors::default(), &Shape::default());
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
    let late = registry.subscribe(&config_maps, Some(&ns), Selectors::default(), &Shape::default());
    let mut late_events = Box::pin(late.events());
    applied(&mut late_events, "one").await?;
    assert_eq!(late.cache().state().await?.len(), 2);

    let other = registry.subscribe(
        &config_maps,
        Some(&ns),
        Selectors { labels: Some("app=x"), fields: None },
        &Shape::default(),
    );
    assert_eq!(registry.active(), 2, "other selectors are another watch");
    drop(other);
    drop((second, late, second_events, late_events));
    assert_eq!(registry.active(), 0, "the watch stops with its last subscriber");
    Ok(())
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_create_leaves_the_overlay_once_delivered_so_a_later_deletion_shows() -> anyhow::Result<()> {
    let client = client().await?;
    let ns = namespace(&client, "ghost-overlay").await?;
    let registry = Registry::new(client.clone());
    let subscription =
        registry.subscribe(&ApiResource::erase::<ConfigMap>(&()), Some(&ns), Selectors::default(), &Shape::default());
    let mut events = Box::pin(subscription.events());
    let cache = subscription.cache();
    let api = Api::<Object>::namespaced_with(client.clone(), &ns, &ApiResource::erase::<ConfigMap>(&()));

    // The host creates an object and records its write, then the watch delivers it.
    let created = api
        .create(
            &PostParams::default(),
            &serde_json::from_value(json!({
        "apiVersion": "v1", "kind": "ConfigMap", "metadata": { "name": "mine" } }))?,
        )
        .await?;
    let key = wasmop::object::key_of(&created).expect("named");
    cache.wrote(created, None);
    applied(&mut events, "mine").await?;
    // Someone else deletes it before anything read the key: the cache must show it gone.
    api.delete("mine", &DeleteParams::default()).await?;
    deleted(&mut events, "mine").await?;
    assert!(cache.get(&key).is_none(), "a delivered then deleted create is no longer seen");
    assert!(cache.state().await?.is_empty(), "nor listed");
    Ok(())
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn projected_and_metadata_only_watches_cache_only_what_they_declare() -> anyhow::Result<()> {
    let client = client().await?;
    let ns = namespace(&client, "projection").await?;
    let registry = Registry::new(client.clone());
    let config_maps = ApiResource::erase::<ConfigMap>(&());
    let shape =
        |paths: &[&str]| Shape { projection: Some(paths.iter().map(|p| p.to_string()).collect()), ..Shape::default() };
    let projected = registry.subscribe(&config_maps, Some(&ns), Selectors::default(), &shape(&["data.kept"]));
    let metadata = registry.subscribe(&config_maps, Some(&ns), Selectors::default(), &shape(&[]));
    let whole = registry.subscribe(&config_maps, Some(&ns), Selectors::default(), &Shape::default());
    assert_eq!(registry.active(), 3, "different shapes are different watches");
    let (mut projected_events, mut metadata_events) = (Box::pin(projected.events()), Box::pin(metadata.events()));
    let api = Api::<Object>::namespaced_with(client.clone(), &ns, &config_maps);
    let object = json!({ "apiVersion": "v1", "kind": "ConfigMap",
        "metadata": { "name": "cm", "labels": { "app": "web" } }, "data": { "kept": "1", "dropped": "2" } });
    api.create(&PostParams::default(), &serde_json::from_value(object)?).await?;
    applied(&mut projected_events, "cm").await?;
    applied(&mut metadata_events, "cm").await?;
    let key = wasmop::object::key_of(&api.get("cm").await?).expect("named");
    let cut = projected.cache().get(&key).expect("cached");
    assert_eq!(cut.data.to_value(), json!({ "data": { "kept": "1" } }));
    let meta = metadata.cache().get(&key).expect("cached");
    assert!(meta.data.is_empty(), "a metadata-only watch holds no data");
    assert_eq!(meta.labels().get("app").map(String::as_str), Some("web"));
    assert_eq!(meta.types.as_ref().map(|t| t.kind.as_str()), Some("ConfigMap"));
    drop(whole);
    Ok(())
}

/// A client that records the query of every request it sends.
#[derive(Clone)]
struct Recording {
    client: Client,
    queries: Arc<Mutex<Vec<String>>>,
}

impl tower::Service<http::Request<kube::client::Body>> for Recording {
    type Response = http::Response<kube::client::Body>;
    type Error = kube::Error;
    type Future = futures::future::BoxFuture<'static, Result<Self::Response, Self::Error>>;

    fn poll_ready(&mut self, _: &mut std::task::Context<'_>) -> std::task::Poll<Result<(), Self::Error>> {
        std::task::Poll::Ready(Ok(()))
    }

    fn call(&mut self, request: http::Request<kube::client::Body>) -> Self::Future {
        self.queries.lock().expect("not poisoned").push(request.uri().query().unwrap_or_default().to_string());
        let client = self.client.clone();
        Box::pin(async move { client.send(request).await })
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_list_of_small_objects_asks_for_larger_pages_after_the_first_and_misses_none() -> anyhow::Result<()> {
    const OBJECTS: usize = 3_000;
    let client = client().await?;
    let ns = namespace(&client, "paging").await?;
    // About 300 bytes each: kube's pages of 500 would take 6 requests.
    let api = Api::<ConfigMap>::namespaced(client.clone(), &ns);
    let creates = futures::stream::iter(0..OBJECTS).map(|i| {
        let api = api.clone();
        async move {
            let map =
                serde_json::from_value(json!({ "metadata": { "name": format!("m{i:04}") }, "data": { "k": "v" } }))?;
            api.create(&PostParams::default(), &map).await?;
            anyhow::Ok(())
        }
    });
    creates.buffer_unordered(32).collect::<Vec<_>>().await.into_iter().collect::<anyhow::Result<()>>()?;

    let queries = Arc::new(Mutex::new(Vec::new()));
    let recording = Client::new(Recording { client: client.clone(), queries: queries.clone() }, ns.clone());
    let registry = Registry::new(recording);
    let subscription =
        registry.subscribe(&ApiResource::erase::<ConfigMap>(&()), Some(&ns), Selectors::default(), &Shape::default());
    let mut events = Box::pin(subscription.events());
    within(WAIT, "the list's end", async {
        while let Some(event) = events.next().await {
            if matches!(event, Event::InitDone) {
                return;
            }
        }
    })
    .await?;
    assert_eq!(subscription.cache().state().await?.len(), OBJECTS, "every object listed");

    let limits: Vec<u64> = queries
        .lock()
        .expect("not poisoned")
        .iter()
        .filter(|query| !query.contains("watch=true"))
        .filter_map(|query| query.split('&').find_map(|pair| pair.strip_prefix("limit=")).and_then(|l| l.parse().ok()))
        .collect();
    // The first page as kube asks, the next four times as large (still under a MiB), then the
    // rest in one more page: three requests, where kube's pages of 500 would take six.
    assert_eq!(limits.len(), 3, "the list's pages: {limits:?}");
    assert_eq!(limits[..2], [500, 2_000], "the list's pages: {limits:?}");
    Ok(())
}
