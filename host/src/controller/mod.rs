//! Wires one plugin: primary informer -> change filter -> scheduler -> sandboxed reconcile ->
//! writer, with a secondary source per declared watch and an optional resync timer feeding the
//! same scheduler. Glue only: each step lives in its own module, and this one holds the wiring.

mod admission;
mod coverage;
mod dispatch;
mod listed;
mod pipeline;
mod reconcile;
mod references;
mod sources;
mod unserved;
mod watch;

use std::sync::Arc;
use std::time::Duration;

use kube::Client;
use kube::api::ApiResource;
use tokio::sync::{Notify, Semaphore, oneshot};
use tokio_util::sync::CancellationToken;

pub use wasmop_core::filter::{ChangeFilter, Filters, Version};

use crate::informer::{self, Clusters};
use crate::mapping::PrimaryKind;
use crate::metrics::Metrics;
use crate::object::ObjectKey;
use crate::retry::RetryPolicy;
use crate::runtime::Current;
use crate::runtime::bindings::wasmop::plugin::types::{Mapper, PluginConfig};
use crate::scheduler::{self, Settings};
use crate::settings::Resolved;
use crate::source::Sink;
use crate::source::inbound::Inlet;
use crate::writer::Writer;
use admission::ShardAdmission;
pub use coverage::{Covered, covered};
use dispatch::{Dispatch, Ended, Scheduler};
use listed::List;
use pipeline::Outside;
pub use pipeline::records;
use reconcile::Reconciler;
use references::References;
use sources::Feeds;
pub use unserved::Unserved;
use unserved::{Owner, Waiting};
use watch::Watched;

/// How long an initial-list or resync reconcile yields to live changes before it alternates.
const BACKGROUND_AGING: Duration = Duration::from_secs(5);

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
    /// Where its reconciles (and webhook calls) are recorded, when they are ([`records`]).
    pub records: Option<Arc<crate::record::Records>>,
    /// The clients that write for the plugin (its objects, for example as its ServiceAccount,
    /// and its Events), within the fence's terms ([`Clusters::writing`]).
    pub writes: informer::Writes,
    /// Where the primary's and the declared watches' bounded caches keep warm objects; `None`
    /// caches every object.
    pub pool: Option<informer::Pool>,
    /// Set for a controller that replaces another (see [`Handover`]).
    pub handover: Option<Handover>,
    /// Notified when every cached primary should be reconciled again (a new version swapped
    /// in); they are, at background priority.
    pub reconcile_all: Arc<Notify>,
    /// Set once the primary's and every watch's caches have synced (readiness).
    pub synced: Arc<std::sync::atomic::AtomicBool>,
    /// Set while a declared kind is not served: the controller waits for it.
    pub unserved: Unserved,
    /// Whether this replica leads (or, sharded, is a live member): runs start and writes go
    /// out only then.
    pub fence: crate::fence::Fence,
    /// The replica's shards, for a sharded plugin: its primary watch holds only the objects
    /// this replica owns (and so do its dependents' watches when sharded by namespace), and a
    /// run starts only while this replica may run the object.
    pub shards: Option<crate::shards::Joined>,
    /// The host's shard state when it runs sharded, for every plugin, sharded or run whole by
    /// the leader: the controller declares there how it runs the plugin once it reconciles,
    /// and starts runs only while the members agree ([`crate::shards::Shards::agreed`]).
    pub agreement: Option<crate::shards::Shards>,
    /// The process's shutdown: no run starts once it stops; runs in flight are dropped once it
    /// cancels.
    pub shutdown: crate::shutdown::Shutdown,
    /// Where the host's events endpoint hands the plugin's inbound events: attached to the
    /// scheduler while the controller runs.
    pub inlet: Inlet,
    /// The plugin's candidate version, shadowed beside the live one; it outlives a controller
    /// replaced by a new configuration.
    pub shadow: Arc<crate::shadow::Shadow>,
}

/// How a controller takes over from the one it replaces: it subscribes its watches while the
/// other still holds them, so the watches they share keep running, and reconciles only once the
/// other has finished its reconciles in flight.
pub struct Handover {
    /// Told once the watches are subscribed (dropped if subscribing failed).
    pub subscribed: oneshot::Sender<()>,
    /// Fires (or is dropped) once the predecessor has stopped.
    pub after: oneshot::Receiver<()>,
}

/// Runs `controller` until `shutdown` fires; reconciles in flight then finish. The first
/// reconcile waits until the primary and every declared watch are synced (and `after`). The
/// configuration comes from the module current at start: a version that changes it runs in a new
/// controller.
///
/// The stages, in order: [`watch`] subscribes the informers the plugin reads (the read side);
/// [`pipeline`] builds the per-object pipeline a run goes through (read from the cache, call
/// the plugin, write: `reconcile.rs`); [`sources`] starts the secondary watches' mappers, the
/// resync timer and the poller, which feed the scheduler; [`dispatch`] filters the primary's
/// events into the scheduler and starts it once the caches are synced (schedule), admitting runs
/// by [`admission`] on a sharded host.
pub async fn run(mut controller: Controller, shutdown: CancellationToken) {
    let mut handover = controller.handover.take();
    loop {
        match run_once(&controller, handover.take(), &shutdown).await {
            Ended::Stopped => return,
            // Back to waiting for the kinds, as at start, with nothing cached.
            Ended::Unserved => controller.synced.store(false, std::sync::atomic::Ordering::Release),
        }
    }
}

/// One run of `controller`, from resolving its kinds to stopping: see [`run`].
async fn run_once(controller: &Controller, handover: Option<Handover>, shutdown: &CancellationToken) -> Ended {
    let Controller { module, settings, metrics, fence, inlet, .. } = controller;
    let config = module.get().config().clone();
    let informer::Writes { objects: writes, events } = controller.writes.clone();
    let sharded = sharded_watch(controller);
    let Some(watched) = subscribe(controller, &config, (&writes, &events), sharded.clone(), shutdown).await else {
        return Ended::Stopped;
    };
    let after = handover.map(|Handover { subscribed, after }| {
        subscribed.send(()).ok();
        after
    });
    let (handle, inbox) = scheduler::channel();
    // What the runs enqueue into must not keep their own scheduler running.
    let runs_sink: Arc<dyn Sink> = Arc::new(handle.downgrade());
    attach_inlet(controller, &config, &watched, &handle);
    // The plugin's external state, fetched by its poller (started with the sources).
    let namespace = settings.namespace.as_deref();
    let (outside, polled) = Outside::new(&config, (&writes, fence), namespace, inlet.payloads(), &controller.shadow);
    let records = controller.records.clone();
    let reconciler =
        pipeline::reconciler(module, &config, &watched, writes, events, metrics, runs_sink, fence, outside, records);
    let Some(reconciler) = reconciler else {
        inlet.detach();
        return Ended::Stopped;
    };
    let references = references(module, &config, &watched, &reconciler);
    let stop_sources = shutdown.child_token();
    let sink: Arc<dyn Sink> = Arc::new(handle.clone());
    // Any watch answered that its kind is no longer served.
    let unserved_kind = watched.unserved();
    let Watched { subscription, primaries, secondaries, cache, owns, .. } = watched;
    let feeds = Feeds {
        module,
        metrics,
        config: &config,
        cache: &cache,
        primaries: &primaries,
        sink: &sink,
        stop: &stop_sources,
    };
    let (mut sources, synced) = sources::spawn(&feeds, settings, secondaries, owns);
    if sharded.is_some() {
        sources::spawn_owned_count(&mut sources, &feeds);
    }
    if let Some(polled) = polled {
        sources::spawn_poller(&mut sources, &feeds, polled, fence);
    }
    let scheduler_settings = scheduler_settings(controller, &config.name);
    tracing::info!(plugin = config.name, kind = %config.primary.kind, namespace = ?settings.namespace,
        watches = config.watches.len(), "controller started");
    let Some(dispatch) = dispatch(controller, &config, &reconciler, references, &primaries, handle) else {
        return Ended::Stopped;
    };
    let admission = admission(controller, &config.name, primaries);
    let unstarted = (inbox, scheduler_settings, admission, reconciler);
    let (scheduler, ended) = dispatch
        .run(&subscription, unstarted, (synced, after), &controller.reconcile_all, unserved_kind, shutdown)
        .await;
    stop_sources.cancel();
    while sources.join_next().await.is_some() {}
    drop(sink);
    drop(subscription);
    stopped(controller, &config.name, scheduler).await;
    ended
}

/// The shards of the primary's watch, for a sharded plugin.
fn sharded_watch(controller: &Controller) -> Option<informer::ShardedWatch> {
    let Controller { shards, settings, metrics, .. } = controller;
    shards.as_ref().zip(settings.sharding).map(|(joined, key)| informer::ShardedWatch {
        key,
        owned: joined.shards.owned(),
        counters: metrics.clone(),
        server_side: joined.server_side,
    })
}

/// Resolves the plugin's kinds, waiting while one is not served, and subscribes to its watches
/// ([`watch::watch`]), with the clients that write for it and its Events. `None` when
/// `shutdown` fired first.
async fn subscribe(
    controller: &Controller,
    config: &PluginConfig,
    (writes, events): (&Client, &Client),
    sharded: Option<informer::ShardedWatch>,
    shutdown: &CancellationToken,
) -> Option<Watched> {
    let Controller { clusters, settings, metrics, fence, shards, unserved, pool, .. } = controller;
    let writer =
        |resource| Writer::new(writes.clone(), events.clone(), resource, &config.name, metrics.clone(), fence.clone());
    let primaries = |resource: &ApiResource| {
        let client = informer::paged(clusters.local().client().clone());
        let api = match &settings.namespace {
            Some(ns) => kube::Api::namespaced_with(client, ns, resource),
            None => kube::Api::all_with(client, resource),
        };
        let params = kube::api::ListParams {
            label_selector: settings.label_selector.clone(),
            field_selector: settings.field_selector.clone(),
            ..Default::default()
        };
        (api, params)
    };
    let waiting = Waiting {
        plugin: &config.name,
        unserved,
        writer: &writer,
        primaries: &primaries,
        owner: Owner::of(leads(fence), shards.as_ref().zip(settings.sharding).map(|(j, key)| (j.shards.clone(), key))),
        conditions: config.conditions,
    };
    let base = informer::Shape { projection: None, pool: pool.clone(), shard: sharded };
    watch::watch(config, clusters, settings, metrics, &base, &waiting, shutdown).await
}

/// Hands the plugin's inbound events to the scheduler behind `handle`, reading from the
/// plugin's caches; a sharded plugin's go to the replica that owns each primary.
fn attach_inlet(
    controller: &Controller,
    config: &PluginConfig,
    watched: &Watched,
    handle: &scheduler::Handle<ObjectKey>,
) {
    let Controller { clusters, settings, shards, inlet, .. } = controller;
    // Inbound events are queued from now on; they run once the scheduler starts.
    let reader: Arc<dyn crate::runtime::CacheReader> = watched.cache.clone();
    inlet.attach(Arc::new(handle.downgrade()), reader, PrimaryKind::from(&wasmop_core::KindRef::from(&config.primary)));
    // A sharded plugin's events go to the replica that owns each primary.
    if let Some((joined, key)) = shards.as_ref().zip(settings.sharding) {
        inlet.place(crate::source::inbound::Placement {
            key,
            shards: joined.shards.clone(),
            fence: joined.fence.clone(),
            primaries: watched.primaries.clone(),
            client: clusters.local().client().clone(),
            resource: watched.resource.clone(),
        });
    }
}

/// How the controller's scheduler runs `plugin`'s reconciles.
fn scheduler_settings(controller: &Controller, plugin: &str) -> Settings {
    let Controller { settings, global, metrics, fence, shutdown: process, .. } = controller;
    let (stop, cancel) = process.tokens();
    Settings {
        max_concurrent: settings.max_concurrent,
        global: global.clone(),
        retry: settings.retry.clone(),
        reconnect: RetryPolicy::reconnect(),
        max_interval: settings.max_interval,
        rate_limit: settings.rate_limit,
        aging: BACKGROUND_AGING,
        observer: Some(metrics.controller(plugin)),
        gate: fence.gate(),
        stop: Some(stop),
        cancel: Some(cancel),
    }
}

/// The plugin's primary-references watches among the declared ones, told of primaries'
/// changes.
fn references(module: &Arc<Current>, config: &PluginConfig, watched: &Watched, reconciler: &Reconciler) -> References {
    References {
        module: module.clone(),
        cache: watched.cache.clone(),
        reads: reconciler.reads.clone(),
        watches: watched.secondaries[..config.watches.len()]
            .iter()
            .filter(|s| matches!(s.watch.mapper, Mapper::PrimaryReferences))
            .map(|s| (s.watch.kind.clone(), s.links.clone()))
            .collect(),
    }
}

/// The dispatch of the primary's events into the scheduler behind `handle`. `None` when the
/// plugin's predicate is invalid (checked at load already).
fn dispatch(
    controller: &Controller,
    config: &PluginConfig,
    reconciler: &Reconciler,
    references: References,
    primaries: &informer::Cache,
    handle: scheduler::Handle<ObjectKey>,
) -> Option<Dispatch> {
    let Controller { module, settings, metrics, synced, inlet, .. } = controller;
    let predicate = sources::predicate(&config.name, config.predicate.as_deref());
    let filter = dispatch::primary_filter(&config.name, &settings.filters, predicate, module, &reconciler.reads)?;
    Some(Dispatch {
        plugin: config.name.clone(),
        filter,
        events: metrics.watch_events(&config.name, dispatch::PRIMARY_WATCH),
        own: reconciler.own.clone(),
        references,
        primaries: primaries.clone(),
        handle,
        synced: synced.clone(),
        finalizer: reconciler.finalizers.kept.clone(),
        list: List::default(),
        inlet: inlet.clone(),
    })
}

/// What admits `plugin`'s runs on a sharded host (see [`ShardAdmission`]).
fn admission(controller: &Controller, plugin: &str, primaries: informer::Cache) -> Option<ShardAdmission> {
    let key = controller.shards.as_ref().and(controller.settings.sharding);
    controller.agreement.clone().map(|agreement| ShardAdmission::new(agreement, plugin, key, primaries))
}

/// Once the controller's sources have stopped: lets the runs in flight finish, takes its
/// inbound events away, and tells the other members it no longer runs `plugin`.
async fn stopped(controller: &Controller, plugin: &str, scheduler: Option<Scheduler>) {
    if let Some(scheduler) = scheduler {
        scheduler.await;
    }
    controller.inlet.detach();
    if let Some(agreement) = &controller.agreement {
        agreement.declare(plugin, None);
    }
    tracing::info!(plugin, "controller stopped");
}

/// Whether this replica leads now, as `fence` says (always without leader election).
fn leads(fence: &crate::fence::Fence) -> Arc<dyn Fn() -> bool + Send + Sync> {
    let fence = fence.clone();
    Arc::new(move || fence.gate().is_none_or(|gate| gate.is_open()))
}
