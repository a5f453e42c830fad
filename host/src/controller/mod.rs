//! Wires one plugin: primary informer -> change filter -> scheduler -> sandboxed reconcile ->
//! writer, with a secondary source per declared watch and an optional resync timer feeding the
//! same scheduler. Glue only: each step lives in its own module.

mod filter;
mod reconcile;
mod references;

use std::collections::HashSet;
use std::sync::{Arc, RwLock};
use std::time::Duration;

use futures::StreamExt;
use kube::api::ApiResource;
use kube::runtime::watcher;
use kube::{Client, ResourceExt};
use tokio::sync::{Notify, Semaphore, oneshot};
use tokio_util::sync::CancellationToken;

pub use filter::{ChangeFilter, Filters};

use crate::dependents::{self, DependentKind, Dependents, OwnWrites};
use crate::informer::{self, CachedKind, Clusters, Subscription, WatchedCache};
use crate::mapping::{Links, PrimaryKind};
use crate::metrics::Metrics;
use crate::object::ObjectKey;
use crate::retry::RetryPolicy;
use crate::runtime::Current;
use crate::runtime::bindings::wasmop::plugin::types::{Dependent, KindRef, Mapper, Ownership, PluginConfig, Watch};
use crate::scheduler::{self, Priority, Settings};
use crate::settings::Resolved;
use crate::source::secondary::{Mapping, SecondarySource};
use crate::source::{Sink, timer};
use crate::writer::Writer;
use reconcile::Reconciler;
use references::References;

/// How long to wait before asking the API server again about a kind it does not serve.
const DISCOVERY_RETRY: Duration = Duration::from_secs(5);

/// How long an initial-list or resync reconcile yields to live changes before it alternates.
const BACKGROUND_AGING: Duration = Duration::from_secs(5);

/// Resolves `kind` on the cluster of `client`, retrying until it is served or `shutdown` fires.
async fn resolve(client: &Client, kind: &KindRef, plugin: &str, shutdown: &CancellationToken) -> Option<ApiResource> {
    loop {
        match informer::resolve(client, kind).await {
            Ok(resource) => return Some(resource),
            Err(err) => {
                tracing::error!(plugin, %err, "cannot watch {}; retrying in {DISCOVERY_RETRY:?}", kind.kind);
                tokio::select! {
                    _ = tokio::time::sleep(DISCOVERY_RETRY) => {}
                    _ = shutdown.cancelled() => return None,
                }
            }
        }
    }
}

/// How a dependent points at its primary: owner references cannot reach from a cluster-scoped
/// object to a namespaced one.
fn ownership(config: &PluginConfig, dependent: &Dependent) -> Ownership {
    if config.primary.namespaced && !dependent.kind.namespaced { Ownership::Annotations } else { dependent.ownership }
}

/// The watch of a dependent kind: the plugin's objects of that kind, by the management label.
/// Read-only dependents are not the plugin's: their watch covers the kind, and a change of an
/// object reconciles the primaries whose `desired` named it.
fn dependent_watch(config: &PluginConfig, dependent: &Dependent) -> Watch {
    let (label_selector, mapper) = if dependent.read_only {
        (None, Mapper::PrimaryReferences)
    } else {
        let selector = format!("{}={}", dependents::MANAGED_BY_LABEL, config.name);
        (Some(selector), DependentKind::mapper(ownership(config, dependent)))
    };
    Watch { kind: dependent.kind.clone(), namespace: None, label_selector, field_selector: None, cluster: None, mapper }
}

/// A declared watch, subscribed.
struct Secondary {
    watch: Watch,
    resource: ApiResource,
    subscription: Subscription,
    links: Arc<RwLock<Links>>,
}

/// Subscribes to the plugin's declared watches. Owner-reference watches without a namespace
/// follow the primary's namespace: owned objects live beside their owner.
async fn subscribe_all(
    watches: &[Watch],
    clusters: &Clusters,
    primary_namespace: Option<&str>,
    plugin: &str,
    shutdown: &CancellationToken,
) -> Option<Vec<Secondary>> {
    let mut secondaries = Vec::with_capacity(watches.len());
    for watch in watches {
        let registry = match clusters.get(watch.cluster.as_deref()) {
            Ok(registry) => registry,
            Err(err) => {
                // The host checks clusters before it starts a controller; this is a safety net.
                tracing::error!(plugin, %err, "cannot watch {}", watch.kind.kind);
                return None;
            }
        };
        let resource = resolve(registry.client(), &watch.kind, plugin, shutdown).await?;
        let namespace = match (&watch.namespace, &watch.mapper) {
            (Some(ns), _) => Some(ns.as_str()),
            (None, Mapper::OwnerReferences(_)) => primary_namespace,
            (None, _) => None,
        };
        let selectors =
            informer::Selectors { labels: watch.label_selector.as_deref(), fields: watch.field_selector.as_deref() };
        let subscription = registry.subscribe(&resource, namespace, selectors);
        let links = Arc::new(RwLock::new(Links::for_mapper(&watch.mapper)));
        secondaries.push(Secondary { watch: watch.clone(), resource, subscription, links });
    }
    Some(secondaries)
}

/// What one controller runs with.
pub struct Controller {
    /// The plugin's current version, replaced in place by a hot reload.
    pub module: Arc<Current>,
    /// The clusters to watch.
    pub clusters: Clusters,
    /// The plugin's effective settings.
    pub settings: Resolved,
    /// Reconciles in flight across all plugins; a run holds a permit.
    pub global: Option<Arc<Semaphore>>,
    /// The host's metrics.
    pub metrics: Arc<Metrics>,
    /// The client that writes for the plugin (for example one impersonating its service
    /// account); `None` writes with the primaries' cluster client.
    pub writes: Option<Client>,
    /// The first reconcile waits for this as well: a controller that replaces another starts
    /// once the other has finished its reconciles in flight.
    pub after: Option<oneshot::Receiver<()>>,
    /// Notified when every cached primary should be reconciled again (a new version swapped
    /// in); they are, at background priority.
    pub reconcile_all: Arc<Notify>,
}

/// Runs `controller` until `shutdown` fires; reconciles in flight then finish. The first
/// reconcile waits until the primary and every declared watch are synced (and `after`). The
/// configuration comes from the module current at start: a version that changes it runs in a new
/// controller.
pub async fn run(controller: Controller, shutdown: CancellationToken) {
    let Controller { module, clusters, settings, global, metrics, writes, after, reconcile_all } = controller;
    let config = module.get().config().clone();
    let plugin = config.name.clone();
    let local = clusters.local();
    let writer_client = writes.unwrap_or_else(|| local.client().clone());
    let Some(resource) = resolve(local.client(), &config.primary, &plugin, &shutdown).await else { return };
    let selectors =
        informer::Selectors { labels: settings.label_selector.as_deref(), fields: settings.field_selector.as_deref() };
    // Held for the controller's life: a shared watch stops when its last subscriber goes.
    let subscription = local.subscribe(&resource, settings.namespace.as_deref(), selectors);
    // Declared watches, then one watch per dependent kind (by the management label).
    let dependent_watches: Vec<Watch> = config.dependents.iter().map(|d| dependent_watch(&config, d)).collect();
    let watches: Vec<Watch> = config.watches.iter().chain(&dependent_watches).cloned().collect();
    let Some(secondaries) = subscribe_all(&watches, &clusters, settings.namespace.as_deref(), &plugin, &shutdown).await
    else {
        return;
    };
    let primaries = subscription.cache();
    let mut kinds = vec![CachedKind { kind: config.primary.clone(), cache: primaries.clone(), links: None }];
    kinds.extend(secondaries.iter().map(|s| CachedKind {
        kind: s.watch.kind.clone(),
        cache: s.subscription.cache(),
        links: Some(s.links.clone()),
    }));
    let cache = WatchedCache::new(kinds);
    let (handle, inbox) = scheduler::channel();
    let sink: Arc<dyn Sink> = Arc::new(handle.clone());
    // What the runs enqueue into must not keep their own scheduler running.
    let runs_sink: Arc<dyn Sink> = Arc::new(handle.downgrade());
    // The dependents' own writes, per dependent watch.
    let records = || Arc::new(OwnWrites::counted_in(metrics.own_write_records(&plugin)));
    let owns: Vec<Option<Arc<OwnWrites>>> =
        (0..secondaries.len()).map(|i| (i >= config.watches.len()).then(records)).collect();
    let dependents = if config.dependents.is_empty() {
        None
    } else {
        let kinds = config
            .dependents
            .iter()
            .zip(&secondaries[config.watches.len()..])
            .zip(&owns[config.watches.len()..])
            .map(|((spec, secondary), own)| DependentKind {
                spec: spec.clone(),
                resource: secondary.resource.clone(),
                cache: secondary.subscription.cache(),
                links: secondary.links.clone(),
                ownership: ownership(&config, spec),
                own: own.clone().expect("every dependent watch records its own writes"),
            })
            .collect();
        match Dependents::new(writer_client.clone(), &plugin, kinds, metrics.clone(), runs_sink.clone()) {
            Ok(dependents) => Some(dependents),
            Err(err) => {
                // `describe()` was validated at load; this is a safety net.
                tracing::error!(plugin, %err, "invalid dependents");
                return;
            }
        }
    };
    let own = records();
    let finalizer = module.get().finalizer();
    let reconciler = Arc::new(Reconciler {
        module: module.clone(),
        cache: cache.clone(),
        writer: Writer::new(writer_client, local.client().clone(), resource.clone(), &plugin, metrics.clone()),
        metrics,
        resource,
        primaries: primaries.clone(),
        finalizer,
        dependents,
        own: own.clone(),
        sink: runs_sink,
    });
    let references = References {
        module: module.clone(),
        cache: cache.clone(),
        watches: secondaries[..config.watches.len()]
            .iter()
            .filter(|s| matches!(s.watch.mapper, Mapper::PrimaryReferences))
            .map(|s| (s.watch.kind.clone(), s.links.clone()))
            .collect(),
    };

    // Sources other than the primary watch: one per declared watch, and the resync timer.
    let stop_sources = shutdown.child_token();
    let mut sources = tokio::task::JoinSet::new();
    let mut syncs = Vec::with_capacity(secondaries.len());
    for (secondary, own) in secondaries.into_iter().zip(owns) {
        let (synced, ready) = oneshot::channel();
        syncs.push(ready);
        let mapping = match secondary.watch.mapper {
            Mapper::OwnerReferences(which) => Mapping::Owners(which),
            Mapper::Annotations => Mapping::Annotations,
            Mapper::Plugin => Mapping::Plugin(module.clone(), cache.clone()),
            Mapper::PrimaryReferences => Mapping::PrimaryReferences,
        };
        let source = SecondarySource {
            plugin: plugin.clone(),
            kind: secondary.watch.kind.kind.clone(),
            primary: PrimaryKind::from(&config.primary),
            mapping,
            links: secondary.links,
            own,
        };
        let events = secondary.subscription.events();
        let (sink, stop) = (sink.clone(), stop_sources.clone());
        // The source owns the subscription: the watch lives as long as the source.
        let subscription = secondary.subscription;
        sources.spawn(async move {
            source.run(events, sink, synced, stop).await;
            drop(subscription);
        });
    }
    if let Some(period) = settings.resync_period {
        let (cache, sink, stop) = (primaries.clone(), sink.clone(), stop_sources.clone());
        let keys = move || cache.state().iter().filter_map(|o| ObjectKey::of(o)).collect();
        sources.spawn(async move { timer::resync(period, keys, &*sink, stop).await });
    }
    let mut secondaries_synced = std::pin::pin!(futures::future::join_all(syncs));
    let mut waiting_for_secondaries = true;
    let mut after = after;
    let mut waiting_for_predecessor = after.is_some();

    let scheduler_settings = Settings {
        max_concurrent: settings.max_concurrent,
        global,
        retry: settings.retry.clone(),
        reconnect: RetryPolicy::reconnect(),
        max_interval: settings.max_interval,
        rate_limit: settings.rate_limit,
        aging: BACKGROUND_AGING,
    };
    // The scheduler starts once every cache is synced; triggers wait in its inbox until then.
    let mut unstarted = Some((inbox, scheduler_settings, reconciler));
    let mut primary_synced = false;
    let mut scheduler = None;

    tracing::info!(plugin, kind = %config.primary.kind, namespace = ?settings.namespace,
        watches = config.watches.len(), "controller started");
    let mut filter = ChangeFilter::new(settings.filters.clone());
    // Keys of the list in progress, to find objects deleted while the watch was down.
    let mut listed = HashSet::new();
    let mut events = std::pin::pin!(subscription.events());
    loop {
        if primary_synced
            && !waiting_for_secondaries
            && !waiting_for_predecessor
            && let Some((inbox, scheduler_settings, reconciler)) = unstarted.take()
        {
            tracing::info!(plugin, "caches synced; reconciling");
            let run = move |run| reconciler.clone().run(run);
            scheduler = Some(tokio::spawn(scheduler::run(inbox, scheduler_settings, run)));
        }
        let event = tokio::select! {
            event = events.next() => event,
            results = &mut secondaries_synced, if waiting_for_secondaries => {
                waiting_for_secondaries = false;
                if results.iter().any(Result::is_err) {
                    tracing::error!(plugin, "a secondary source stopped before its cache synced");
                    break;
                }
                tracing::debug!(plugin, "secondary caches synced");
                continue;
            }
            // Sent or dropped: either way the predecessor is gone.
            _ = async { after.as_mut().expect("waited on only while set").await }, if waiting_for_predecessor => {
                waiting_for_predecessor = false;
                tracing::debug!(plugin, "the previous controller stopped");
                continue;
            }
            () = reconcile_all.notified() => {
                for key in primaries.state().iter().filter_map(|o| ObjectKey::of(o)) {
                    handle.trigger_with(key, Priority::Background);
                }
                continue;
            }
            _ = shutdown.cancelled() => break,
        };
        match event {
            Some(watcher::Event::Apply(object)) => {
                let Some(key) = ObjectKey::of(&object) else { continue };
                // The filter and the own-write records see every change; the host's own writes
                // reconcile nothing.
                let admitted = filter.admit(&key, &object.metadata);
                let own_write = own.consume(&key, object.resource_version().as_deref(), admitted);
                if admitted && !own_write {
                    references.primary_changed(&key, &object).await;
                    handle.trigger_with(key, Priority::Live);
                }
            }
            // The initial list (and re-lists after a watch restart) must not starve live changes.
            Some(watcher::Event::InitApply(object)) => {
                if let Some(key) = ObjectKey::of(&object) {
                    listed.insert(key.clone());
                    own.consume(&key, object.resource_version().as_deref(), false);
                    if filter.admit(&key, &object.metadata) {
                        references.primary_changed(&key, &object).await;
                        handle.trigger_with(key, Priority::Background);
                    }
                }
            }
            Some(watcher::Event::Delete(object)) => {
                if let Some(key) = ObjectKey::of(&object) {
                    own.consume(&key, None, false);
                    filter.forget(&key);
                    references.primary_deleted(&key);
                    handle.forget(key);
                }
            }
            Some(watcher::Event::Init) => {
                listed.clear();
                tracing::debug!(plugin, "listing primaries");
            }
            Some(watcher::Event::InitDone) => {
                own.relisted(&listed);
                for key in filter.retain_listed(&std::mem::take(&mut listed)) {
                    references.primary_deleted(&key);
                    handle.forget(key);
                }
                primary_synced = true;
            }
            None => break,
        }
    }
    stop_sources.cancel();
    while sources.join_next().await.is_some() {}
    drop((handle, sink));
    drop(subscription);
    if let Some(scheduler) = scheduler
        && let Err(err) = scheduler.await
    {
        tracing::error!(plugin, %err, "scheduler stopped abnormally");
    }
    tracing::info!(plugin, "controller stopped");
}
