//! Part `secondaries`: M Links (the `fixture-link` plugin's kind), each the controller owner
//! of one ConfigMap, reconciled by the wasmop host (in-process) in one namespace and by a native
//! `Controller` in another, both with the same concurrency and the same work (list the Link's
//! ConfigMaps from a cache, merge-patch `.status` with `seen` and the counters). Once every Link
//! has seen its ConfigMap, every ConfigMap is patched (16 patches in flight), timed from the
//! first patch until every Link shows a reconcile that saw its ConfigMap's new resourceVersion.

use std::collections::BTreeMap;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

use futures::StreamExt;
use k8s_openapi::api::core::v1::ConfigMap;
use kube::api::{Api, DynamicObject, Patch, PatchParams};
use kube::runtime::controller::{Action, Controller};
use kube::runtime::reflector::{self, ObjectRef, Store};
use kube::runtime::watcher;
use kube::{Client, Resource, ResourceExt};
use serde_json::{Value, json};
use wasmop_tests::links::{self, Links, Secondary, Seen, seen_entry, touch_config_map};
use wasmop_tests::{RunningHost, namespace};

use super::load::WRITES_IN_FLIGHT;

const CONCURRENCY: usize = 4;

/// Creates the Links `link-0`... and, owned by each, the ConfigMap of the same name labelled for
/// `fixture-link`'s owner-reference watch, with `data.v = "0"`; returns how a reconcile that
/// read it reports each ConfigMap, by Link.
async fn create_owned_config_maps(client: &Client, links: &Links, n: usize) -> anyhow::Result<BTreeMap<String, Seen>> {
    let ns = links.api().namespace().expect("Links are namespaced").to_string();
    let created = futures::stream::iter(0..n).map(|i| {
        let ns = ns.clone();
        async move {
            let name = format!("link-{i}");
            let link = links.create(&name, "link", &[]).await?;
            let mut cm = Secondary::config_map(&ns, &name, ("wasmop.dev/link", "owned"));
            cm.owner = Some(&link);
            cm.data = BTreeMap::from([("v", "0")]);
            let entry = seen_entry(&cm.apply(client).await?);
            anyhow::Ok((name, entry))
        }
    });
    let results: Vec<_> = created.buffer_unordered(WRITES_IN_FLIGHT).collect().await;
    results.into_iter().collect()
}

/// The timed part of part 3: patches every ConfigMap (`data.v = "1"`) and waits until every
/// Link has seen its new version.
async fn change_owned_config_maps(client: &Client, links: &Links, n: usize) -> anyhow::Result<Duration> {
    let ns = links.api().namespace().expect("Links are namespaced");
    let started = Instant::now();
    let patched = futures::stream::iter(0..n).map(|i| async move {
        let name = format!("link-{i}");
        let entry = seen_entry(&touch_config_map(client, ns, &name, "v", "1").await?);
        anyhow::Ok((name, entry))
    });
    let results: Vec<_> = patched.buffer_unordered(WRITES_IN_FLIGHT).collect().await;
    let expected = results.into_iter().collect::<anyhow::Result<_>>()?;
    links.all_saw(&expected, Duration::from_secs(600)).await?;
    Ok(started.elapsed())
}

/// What the native Link controller needs: the Links' API and its cache of owned ConfigMaps.
struct NativeLinks {
    api: Api<DynamicObject>,
    config_maps: Store<ConfigMap>,
}

/// The UID of the controller owner of `object`, if any.
fn controller_uid(object: &impl Resource) -> Option<&str> {
    let owner = object.meta().owner_references.iter().flatten().find(|o| o.controller == Some(true));
    owner.map(|o| o.uid.as_str())
}

/// The `fixture-link` plugin's reconcile, natively: the Link's ConfigMaps from the cache, and
/// the same status merge patch. Its own status write triggers the controller again (kube-rs has
/// no generation predicate on the stable API); like the careful controller of part 2 it skips
/// a Link whose status already holds what it would write, which the host's generation-aware
/// filter does before reconciling.
async fn native_link_reconcile(link: Arc<DynamicObject>, native: Arc<NativeLinks>) -> Result<Action, kube::Error> {
    let uid = link.uid();
    let owned = native.config_maps.state_filter(|cm| controller_uid(cm) == uid.as_deref());
    let mut seen: Vec<Seen> = owned
        .iter()
        .map(|cm| {
            (
                "ConfigMap".into(),
                cm.namespace().unwrap_or_default(),
                cm.name_any(),
                cm.resource_version().unwrap_or_default(),
            )
        })
        .collect();
    seen.sort();
    let seen: Vec<_> = seen
        .into_iter()
        .map(|(kind, namespace, name, rv)| json!({ "kind": kind, "namespace": namespace, "name": name, "resourceVersion": rv }))
        .collect();
    let status = &link.data["status"];
    if status["observedGeneration"].as_i64() == link.metadata.generation && status["seen"] == json!(seen) {
        return Ok(Action::await_change());
    }
    let now = SystemTime::now().duration_since(UNIX_EPOCH).unwrap_or_default();
    let patch = json!({ "status": {
        "observedGeneration": link.metadata.generation,
        "reconciles": status["reconciles"].as_i64().unwrap_or(0) + 1,
        "lastReconcileNanos": u64::try_from(now.as_nanos()).unwrap_or(u64::MAX),
        "seen": seen,
    }});
    native.api.patch_status(&link.name_any(), &PatchParams::default(), &Patch::Merge(&patch)).await?;
    Ok(Action::await_change())
}

/// Part 3: secondary-triggered reconciles.
/// Runs the part with `n` Links; returns its JSON and markdown.
pub async fn secondaries(client: &Client, n: usize) -> anyhow::Result<(Value, String)> {
    let setup = Duration::from_secs(300);
    let links = Links::new(client, &namespace(client, "bench-link-wasmop").await?).await?;
    let ns = links.api().namespace().expect("Links are namespaced").to_string();
    let expected = create_owned_config_maps(client, &links, n).await?;
    let yaml = format!("plugins:\n  fixture-link:\n    maxConcurrentReconciles: {CONCURRENCY}\n");
    let host = RunningHost::start_with_yaml(client, &ns, &["fixture-link"], &yaml)?;
    links.all_saw(&expected, setup).await?;
    let wasmop = change_owned_config_maps(client, &links, n).await?;
    host.stop().await;

    let links = Links::new(client, &namespace(client, "bench-link-native").await?).await?;
    let ns = links.api().namespace().expect("Links are namespaced").to_string();
    let expected = create_owned_config_maps(client, &links, n).await?;
    // kube 5's `Controller::owns` watches metadata only and keeps no cache; a reflector of its
    // own would be a second watch whose cache may lag the trigger (the reconcile would then see
    // the old ConfigMap, write nothing new and never be triggered again), and sharing one
    // reflector with the trigger (`owns_shared_stream`) needs the `unstable-runtime` features.
    // So the one ConfigMap watch is `watches_with`, whose mapper updates the reflector store
    // before it maps the ConfigMap to its controller owner, as the host's cache does. (The mapper
    // sees objects, not events: a deleted ConfigMap would stay in the store; the bench deletes
    // none.)
    let (config_maps, writer) = reflector::store::<ConfigMap>();
    let writer = Mutex::new(writer);
    let resource = links::resource();
    let owner_kind = resource.clone();
    let to_owner = move |cm: ConfigMap| {
        writer.lock().expect("the store lock").apply_watcher_event(&watcher::Event::Apply(cm.clone()));
        let ns = cm.namespace().unwrap_or_default();
        let owner = cm.owner_references().iter().find(|o| o.controller == Some(true) && o.kind == owner_kind.kind);
        owner.map(|o| ObjectRef::new_with(&o.name, owner_kind.clone()).within(&ns))
    };
    let shared = Arc::new(NativeLinks { api: links.api().clone(), config_maps });
    let controller = Controller::new_with(
        links.api().clone(),
        watcher::Config::default().labels("wasmop.dev/fixture=link"),
        resource,
    )
    .watches_with(
        Api::<ConfigMap>::namespaced(client.clone(), &ns),
        (),
        watcher::Config::default().labels("wasmop.dev/link=owned"),
        to_owner,
    )
    .with_config(kube::runtime::controller::Config::default().concurrency(CONCURRENCY as u16))
    .run(native_link_reconcile, |_, _, _| Action::requeue(Duration::from_secs(1)), shared)
    .for_each(|_| async {});
    let controller = tokio::spawn(controller);
    let native = async {
        links.all_saw(&expected, setup).await?;
        change_owned_config_maps(client, &links, n).await
    }
    .await;
    controller.abort();
    let native = native?;

    let json = json!({ "links": n, "wasmopSeconds": wasmop.as_secs_f64(), "nativeSeconds": native.as_secs_f64(),
                       "ratio": wasmop.as_secs_f64() / native.as_secs_f64() });
    let md = format!(
        "## Secondary-triggered reconciles\n\n{n} Links, one owned ConfigMap each, patched {WRITES_IN_FLIGHT} at a time, until every Link saw its new ConfigMap (concurrency {CONCURRENCY}, wasmop in-process): wasmop {:.2} s, native {:.2} s, ratio {:.2}x.\n",
        wasmop.as_secs_f64(),
        native.as_secs_f64(),
        wasmop.as_secs_f64() / native.as_secs_f64()
    );
    Ok((json, md))
}
