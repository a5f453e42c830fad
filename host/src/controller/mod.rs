//! Wires one plugin: primary informer -> change filter -> scheduler -> sandboxed reconcile ->
//! writer, with a secondary source per declared watch and an optional resync timer feeding the
//! same scheduler. Glue only: each step lives in its own module.

mod coverage;
mod listed;
mod reconcile;
mod references;
mod unserved;

use std::sync::{Arc, RwLock};
use std::time::Duration;

use futures::StreamExt;
use kube::api::ApiResource;
use kube::runtime::watcher;
use kube::{Client, ResourceExt};
use tokio::sync::{Notify, Semaphore, oneshot};
use tokio_util::sync::CancellationToken;

use wasmop_core::dependent::DependentSpec;
pub use wasmop_core::filter::{ChangeFilter, Filters, Version};

use crate::dependents::{DependentKind, Dependents, OwnWrites};
use crate::external::poller::{FetchNow, Poller};
use crate::external::{ExternalState, TrackingRecords};
use crate::informer::{self, CachedKind, Clusters, Listing, Subscription, WatchedCache};
use crate::mapping::{Links, PrimaryKind};
use crate::metrics::Metrics;
use crate::object::ObjectKey;
use crate::retry::RetryPolicy;
use crate::runtime::Current;
use crate::runtime::bindings::wasmop::plugin::types::{Mapper, PluginConfig, PollingMode, Watch};
use crate::scheduler::{self, Priority, Settings};
use crate::settings::Resolved;
use crate::source::filter::EventFilter;
use crate::source::inbound::{Inlet, Payloads};
use crate::source::secondary::{Mapping, SecondarySource};
use crate::source::{Sink, timer};
use crate::wire::PrimaryReads;
use crate::writer::Writer;
pub use coverage::{Covered, covered};
use reconcile::Reconciler;
use references::References;
pub use unserved::Unserved;
use unserved::{Declared, Owner, Waiting};

/// How often a sharded controller counts the primaries it owns (`wasmop_shard_objects`).
const OWNED_EVERY: Duration = Duration::from_secs(1);

/// How long an initial-list or resync reconcile yields to live changes before it alternates.
const BACKGROUND_AGING: Duration = Duration::from_secs(5);

/// A declared watch, subscribed.
struct Secondary {
    watch: Watch,
    resource: ApiResource,
    subscription: Subscription,
    links: Arc<RwLock<Links>>,
}

/// Subscribes to the plugin's declared watches, each in the namespace
/// [`coverage::namespace_of`] gives it.
fn subscribe_all(
    watches: &[Watch],
    resources: &[ApiResource],
    clusters: &Clusters,
    primary_namespace: Option<&str>,
    plugin: &str,
    pool: Option<&informer::Pool>,
    sharded: Option<&informer::ShardedWatch>,
) -> Option<Vec<Secondary>> {
    let mut secondaries = Vec::with_capacity(watches.len());
    for (watch, resource) in watches.iter().zip(resources) {
        let registry = match clusters.get(watch.cluster.as_deref()) {
            Ok(registry) => registry,
            Err(err) => {
                // The host checks clusters before it starts a controller; this is a safety net.
                tracing::error!(plugin, %err, "cannot watch {}", watch.kind.kind);
                return None;
            }
        };
        let namespace = coverage::namespace_of(watch, primary_namespace);
        let selectors =
            informer::Selectors { labels: watch.label_selector.as_deref(), fields: watch.field_selector.as_deref() };
        let shape = informer::Shape {
            projection: watch.projection.as_deref().map(Arc::from),
            pool: pool.cloned(),
            // Only the dependents of the primary's own namespace (a watch of another cluster
            // or namespace stays whole).
            shard: sharded.filter(|_| watch.cluster.is_none() && watch.namespace.is_none()).cloned(),
        };
        let subscription = registry.subscribe(resource, namespace, selectors, &shape);
        let links = Arc::new(RwLock::new(crate::mapping::links_for(&watch.mapper)));
        secondaries.push(Secondary { watch: watch.clone(), resource: resource.clone(), subscription, links });
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
/// [`reconciler`] builds the per-object pipeline a run goes through (read from the cache, call
/// the plugin, write: `reconcile.rs`); [`spawn_sources`] starts the secondary watches' mappers and
/// the resync timer, which feed the scheduler; [`dispatch`] filters the primary's events into the
/// scheduler and starts it once the caches are synced (schedule).
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

/// Why a controller's run ended.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Ended {
    /// Shut down (or it cannot run): the controller is done.
    Stopped,
    /// The API server stopped serving a watched kind (its CRD was deleted): the controller
    /// starts again once every declared kind is served.
    Unserved,
}

/// One run of `controller`, from resolving its kinds to stopping: see [`run`].
async fn run_once(controller: &Controller, handover: Option<Handover>, shutdown: &CancellationToken) -> Ended {
    let Controller {
        module,
        clusters,
        settings,
        global,
        metrics,
        writes,
        handover: _,
        reconcile_all,
        synced: caches_synced,
        unserved,
        fence,
        shards,
        agreement,
        shutdown: process,
        pool,
        inlet,
        shadow,
    } = controller;
    let config = module.get().config().clone();
    let writes = writes.clone().unwrap_or_else(|| clusters.local().client().clone());
    let events = clusters.local().client().clone();
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
    let sharded = shards.as_ref().zip(settings.sharding).map(|(joined, key)| informer::ShardedWatch {
        key,
        owned: joined.shards.owned(),
        counters: metrics.clone(),
        server_side: joined.server_side,
    });
    let base = informer::Shape { projection: None, pool: pool.clone(), shard: sharded.clone() };
    let Some(watched) = watch(&config, clusters, settings, metrics, &base, &waiting, shutdown).await else {
        return Ended::Stopped;
    };
    let after = handover.map(|Handover { subscribed, after }| {
        subscribed.send(()).ok();
        after
    });
    let (handle, inbox) = scheduler::channel();
    // What the runs enqueue into must not keep their own scheduler running.
    let runs_sink: Arc<dyn Sink> = Arc::new(handle.downgrade());
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
    // The plugin's external state, fetched by its poller (started with the sources).
    let records = TrackingRecords::new(
        writes.clone(),
        fence.clone(),
        settings.namespace.clone().unwrap_or_else(|| "default".to_string()),
    );
    let external = ExternalState::new(&config, records).map(|state| (state, FetchNow::channel()));
    let (external, fetch_requests) = match external {
        Some((state, (fetch_now, requests))) => (Some((state, fetch_now)), Some(requests)),
        None => (None, None),
    };
    let polled = external.as_ref().map(|(state, _)| state.clone());
    let outside = Outside { external, inbound: inlet.payloads(), shadow: shadow.clone() };
    let records = settings.record.as_ref().and_then(|to| {
        let described = crate::inspect::describe(&config);
        crate::record::Records::new(&config.name, to, described, metrics.clone())
            .inspect_err(|err| tracing::error!(plugin = config.name, %err, "not recording"))
            .ok()
            .map(Arc::new)
    });
    let reconciler = reconciler(module, &config, &watched, writes, events, metrics, runs_sink, fence, outside, records);
    let Some(reconciler) = reconciler else {
        inlet.detach();
        return Ended::Stopped;
    };
    let references = References {
        module: module.clone(),
        cache: watched.cache.clone(),
        reads: reconciler.reads.clone(),
        watches: watched.secondaries[..config.watches.len()]
            .iter()
            .filter(|s| matches!(s.watch.mapper, Mapper::PrimaryReferences))
            .map(|s| (s.watch.kind.clone(), s.links.clone()))
            .collect(),
    };
    let stop_sources = shutdown.child_token();
    let sink: Arc<dyn Sink> = Arc::new(handle.clone());
    // Any watch answered that its kind is no longer served.
    let gone = std::iter::once(&watched.subscription).chain(watched.secondaries.iter().map(|s| &s.subscription));
    let unserved_kind = futures::future::select_all(gone.map(|s| Box::pin(s.unserved())));
    let Watched { subscription, primaries, secondaries, cache, owns, .. } = watched;
    let primaries_cache = primaries.clone();
    let (mut sources, synced) =
        spawn_sources(module, metrics, &config, settings, secondaries, owns, &cache, &primaries, &sink, &stop_sources);
    if sharded.is_some() {
        let (metrics, primaries, stop, plugin) =
            (metrics.clone(), primaries.clone(), stop_sources.clone(), config.name.clone());
        sources.spawn(async move {
            // The primaries this replica owns, as its sharded cache holds them.
            let mut tick = tokio::time::interval(OWNED_EVERY);
            loop {
                tokio::select! {
                    _ = tick.tick() => metrics.shards().objects(&plugin, primaries.count()),
                    () = stop.cancelled() => return,
                }
            }
        });
    }
    if let (Some(state), Some(requests)) = (polled, fetch_requests) {
        let poller = poller(module, &config, state, &cache, &primaries, &sink, fence);
        let stop = stop_sources.clone();
        sources.spawn(async move { poller.run(requests, stop).await });
    }
    let (stop, cancel) = process.tokens();
    let scheduler_settings = Settings {
        max_concurrent: settings.max_concurrent,
        global: global.clone(),
        retry: settings.retry.clone(),
        reconnect: RetryPolicy::reconnect(),
        max_interval: settings.max_interval,
        rate_limit: settings.rate_limit,
        aging: BACKGROUND_AGING,
        observer: Some(metrics.controller(&config.name)),
        gate: fence.gate(),
        stop: Some(stop),
        cancel: Some(cancel),
    };
    tracing::info!(plugin = config.name, kind = %config.primary.kind, namespace = ?settings.namespace,
        watches = config.watches.len(), "controller started");
    let Some(predicate) = predicate(&config.name, config.predicate.as_deref()) else { return Ended::Stopped };
    let filter = ChangeFilter::with_predicate(settings.filters.clone(), predicate);
    let dispatch = Dispatch {
        plugin: config.name.clone(),
        filter: EventFilter::new(&config.name, PRIMARY_WATCH, filter, module.clone(), reconciler.reads.clone()),
        events: metrics.watch_events(&config.name, PRIMARY_WATCH),
        own: reconciler.own.clone(),
        references,
        primaries,
        handle,
        synced: caches_synced.clone(),
        finalizer: reconciler.finalizers.kept.clone(),
        triage: listed::Triage::default(),
        inlet: inlet.clone(),
    };
    let key = shards.as_ref().and(settings.sharding);
    let admission =
        agreement.clone().map(|agreement| ShardAdmission::new(agreement, &config.name, key, primaries_cache));
    let (scheduler, ended) = dispatch
        .run(
            &subscription,
            (inbox, scheduler_settings, admission, reconciler),
            (synced, after),
            reconcile_all,
            unserved_kind,
            shutdown,
        )
        .await;
    stop_sources.cancel();
    while sources.join_next().await.is_some() {}
    drop(sink);
    drop(subscription);
    if let Some(scheduler) = scheduler {
        scheduler.await;
    }
    inlet.detach();
    if let Some(agreement) = &agreement {
        agreement.declare(&config.name, None);
    }
    tracing::info!(plugin = config.name, "controller stopped");
    ended
}

/// Whether this replica leads now, as `fence` says (always without leader election).
fn leads(fence: &crate::fence::Fence) -> Arc<dyn Fn() -> bool + Send + Sync> {
    let fence = fence.clone();
    Arc::new(move || fence.gate().is_none_or(|gate| gate.is_open()))
}

/// What lets a controller's scheduler on a sharded host start a run: the members agree on how
/// to run the plugin; and for a sharded plugin, the replica's shards and the hash of the
/// primary's shard key (its namespace's, or its UID's as its watch shows it, evicted from a
/// bounded cache or not; a primary the watch does not show is gone or not this replica's).
struct ShardAdmission {
    shards: crate::shards::Shards,
    changes: tokio::sync::watch::Receiver<Arc<crate::shards::Share>>,
    plugin: String,
    /// `None`: the leader runs the plugin whole.
    key: Option<wasmop_core::shard::ShardKey>,
    primaries: informer::Cache,
}

impl ShardAdmission {
    fn new(
        shards: crate::shards::Shards,
        plugin: &str,
        key: Option<wasmop_core::shard::ShardKey>,
        primaries: informer::Cache,
    ) -> Self {
        Self { changes: shards.subscribe(), shards, plugin: plugin.to_string(), key, primaries }
    }

    /// Tells the other members how this replica runs the plugin, now that it reconciles.
    fn declare(&self) {
        let how = self.key.map_or(wasmop_core::shard::UNSHARDED, wasmop_core::shard::ShardKey::name);
        self.shards.declare(&self.plugin, Some(how));
    }
}

impl scheduler::Admission<ObjectKey> for ShardAdmission {
    fn admit(&self, object: &ObjectKey) -> scheduler::Admit {
        use crate::shards::Verdict;
        if !self.shards.agreed(&self.plugin) {
            return scheduler::Admit::Later;
        }
        let Some(key) = self.key else { return scheduler::Admit::Run(Box::new(())) };
        let hash = match key {
            wasmop_core::shard::ShardKey::Namespace => {
                Some(wasmop_core::shard::hash(object.namespace.as_deref().unwrap_or("")))
            }
            wasmop_core::shard::ShardKey::Uid => self.primaries.uid(object).as_deref().map(wasmop_core::shard::hash),
        };
        match hash.map(|hash| self.shards.start(hash)) {
            Some(Ok(guard)) => scheduler::Admit::Run(Box::new(guard)),
            Some(Err(Verdict::Wait)) => scheduler::Admit::Later,
            Some(Err(_)) | None => scheduler::Admit::Never,
        }
    }

    async fn changed(&mut self) -> bool {
        self.changes.changed().await.is_ok()
    }
}

/// The informers one controller reads: the primary's, and one per declared watch and dependent.
struct Watched {
    /// Held for the controller's life: a shared watch stops when its last subscriber goes.
    subscription: Subscription,
    /// The primary's API resource.
    resource: ApiResource,
    primaries: informer::Cache,
    secondaries: Vec<Secondary>,
    /// Everything the plugin may read.
    cache: Arc<WatchedCache>,
    /// The own-write records of each secondary watch: the dependents' watches have one.
    owns: Vec<Option<Arc<OwnWrites>>>,
}

/// Read: resolves the primary kind and subscribes to its watch, the declared watches and one
/// watch per dependent kind (by the management label). `base` says how the plugin's caches are
/// kept: the pool of its bounded caches (primary and declared watches), and its shards (the
/// primary's watch, and the dependents' when sharded by namespace). `None` when `shutdown`
/// fired first.
async fn watch(
    config: &PluginConfig,
    clusters: &Clusters,
    settings: &Resolved,
    metrics: &Metrics,
    base: &informer::Shape,
    waiting: &Waiting<'_>,
    shutdown: &CancellationToken,
) -> Option<Watched> {
    let (pool, sharded) = (base.pool.as_ref(), base.shard.as_ref());
    let plugin = &config.name;
    let local = clusters.local();
    // The dependents' caches stay whole: the workflow reads them between its writes.
    let dependent_watches: Vec<Watch> =
        config.dependents.iter().map(|d| coverage::dependent_watch(config, d)).collect();
    let watches: Vec<&Watch> = config.watches.iter().chain(&dependent_watches).collect();
    let mut declared = vec![Declared { kind: &config.primary, client: local.client() }];
    for watch in &watches {
        match clusters.get(watch.cluster.as_deref()) {
            Ok(registry) => declared.push(Declared { kind: &watch.kind, client: registry.client() }),
            Err(err) => {
                // The host checks clusters before it starts a controller; this is a safety net.
                tracing::error!(plugin, %err, "cannot watch {}", watch.kind.kind);
                return None;
            }
        }
    }
    let mut resources = unserved::resolve_all(&declared, waiting, shutdown).await?.into_iter();
    let resource = resources.next().expect("the primary's resource comes first");
    let resources: Vec<ApiResource> = resources.collect();
    let selectors =
        informer::Selectors { labels: settings.label_selector.as_deref(), fields: settings.field_selector.as_deref() };
    // The host reads the primary's status (to write only changes), whatever the plugin reads.
    let projection = config
        .projection
        .as_ref()
        .map(|paths| paths.iter().cloned().chain(std::iter::once("status".to_string())).collect::<Vec<_>>().into());
    let shape = informer::Shape { projection, ..base.clone() };
    let subscription = local.subscribe(&resource, settings.namespace.as_deref(), selectors, &shape);
    let namespace = settings.namespace.as_deref();
    let (declared_resources, dependent_resources) = resources.split_at(config.watches.len());
    let mut secondaries = subscribe_all(&config.watches, declared_resources, clusters, namespace, plugin, pool, None)?;
    // A namespace keeps its dependents on its replica: their watches are sharded alike.
    let by_namespace = sharded.filter(|s| s.key == wasmop_core::shard::ShardKey::Namespace);
    secondaries.extend(subscribe_all(
        &dependent_watches,
        dependent_resources,
        clusters,
        namespace,
        plugin,
        None,
        by_namespace,
    )?);
    let primaries = subscription.cache();
    let mut kinds = vec![CachedKind {
        kind: config.primary.clone(),
        cache: primaries.clone(),
        links: None,
        reads: PrimaryReads::new(config.projection.as_deref()),
    }];
    kinds.extend(secondaries.iter().map(|s| CachedKind {
        kind: s.watch.kind.clone(),
        cache: s.subscription.cache(),
        links: Some(s.links.clone()),
        reads: PrimaryReads::default(),
    }));
    // The dependents' own writes, per dependent watch.
    let records = || Arc::new(OwnWrites::counted_in(metrics.own_write_records(plugin)));
    let owns = (0..secondaries.len()).map(|i| (i >= config.watches.len()).then(records)).collect();
    let cache = WatchedCache::new(kinds);
    Some(Watched { subscription, resource, primaries, cache, owns, secondaries })
}

/// Call and write: the per-object pipeline every run goes through (`reconcile.rs`), with the
/// dependents' workflow. `None` when the dependents are invalid (checked at load already).
#[allow(clippy::too_many_arguments, reason = "one call site; the stage's inputs, named")]
fn reconciler(
    module: &Arc<Current>,
    config: &PluginConfig,
    watched: &Watched,
    writes: Client,
    events: Client,
    metrics: &Arc<Metrics>,
    runs_sink: Arc<dyn Sink>,
    fence: &crate::fence::Fence,
    outside: Outside,
    records: Option<Arc<crate::record::Records>>,
) -> Option<Arc<Reconciler>> {
    let Outside { external, inbound, shadow } = outside;
    let plugin = &config.name;
    let dependents = if config.dependents.is_empty() && config.external_dependents.is_empty() {
        None
    } else {
        let declared = config.watches.len();
        let (specs, kinds): (Vec<_>, Vec<_>) = config
            .dependents
            .iter()
            .zip(&watched.secondaries[declared..])
            .zip(&watched.owns[declared..])
            .map(|((spec, secondary), own)| {
                let own = own.clone().expect("every dependent watch records its own writes");
                let kind = DependentKind {
                    resource: secondary.resource.clone(),
                    cache: secondary.subscription.cache(),
                    links: secondary.links.clone(),
                    own,
                };
                (DependentSpec::from(spec), kind)
            })
            .unzip();
        // External dependents join the same workflow; they have no kind to watch.
        let specs = specs.into_iter().chain(config.external_dependents.iter().map(DependentSpec::from)).collect();
        match Dependents::new(writes.clone(), plugin, specs, kinds, metrics.clone(), runs_sink.clone(), fence.clone()) {
            Ok(dependents) => Some(dependents),
            Err(err) => {
                // `describe()` was validated at load; this is a safety net.
                tracing::error!(plugin, %err, "invalid dependents");
                return None;
            }
        }
    };
    let resource = watched.resource.clone();
    Some(Arc::new(Reconciler {
        module: module.clone(),
        cache: watched.cache.clone(),
        writer: Writer::new(writes, events, resource.clone(), plugin, metrics.clone(), fence.clone()),
        metrics: metrics.clone(),
        resource,
        primary_kind: (&config.primary).into(),
        reads: watched.cache.primary_reads(),
        conditions: config.conditions,
        primaries: watched.primaries.clone(),
        finalizers: module.get().finalizers(),
        dependents,
        own: Arc::new(OwnWrites::counted_in(metrics.own_write_records(plugin))),
        sink: runs_sink,
        replaced: reconcile::ReplacedConditions::default(),
        external,
        fence: fence.clone(),
        inbound,
        records,
        shadow,
    }))
}

/// What a reconcile knows of the primary beyond the API server, and the candidate version that
/// shadows it.
struct Outside {
    /// The plugin's external state and its poller's request channel, when it polls or has
    /// external dependents.
    external: Option<(Arc<ExternalState>, FetchNow)>,
    /// The last inbound payload per primary, when the plugin caches inbound events.
    inbound: Option<Arc<Payloads>>,
    /// The plugin's candidate version, whose runs see what the live version's saw.
    shadow: Arc<crate::shadow::Shadow>,
}

/// Events in: one source per secondary watch (its mapper turns changes into primary keys) and
/// the resync timer, all feeding `sink`. Returns the tasks and a future that resolves once
/// every secondary cache has synced (an error: a source stopped first).
#[allow(clippy::too_many_arguments, reason = "one call site; the stage's inputs, named")]
fn spawn_sources(
    module: &Arc<Current>,
    metrics: &Metrics,
    config: &PluginConfig,
    settings: &Resolved,
    secondaries: Vec<Secondary>,
    owns: Vec<Option<Arc<OwnWrites>>>,
    cache: &Arc<WatchedCache>,
    primaries: &informer::Cache,
    sink: &Arc<dyn Sink>,
    stop: &CancellationToken,
) -> (tokio::task::JoinSet<()>, futures::future::JoinAll<oneshot::Receiver<()>>) {
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
        let kind = &secondary.watch.kind.kind;
        let Some(predicate) = predicate(&config.name, secondary.watch.predicate.as_deref()) else { continue };
        let filter = predicate.map(|predicate| {
            let filter = ChangeFilter::watch(Some(predicate));
            EventFilter::new(&config.name, kind, filter, module.clone(), PrimaryReads::default())
        });
        let source = SecondarySource {
            plugin: config.name.clone(),
            kind: kind.clone(),
            primary: PrimaryKind::from(&wasmop_core::KindRef::from(&config.primary)),
            mapping,
            links: secondary.links,
            own,
            filter,
            events: metrics.watch_events(&config.name, kind),
        };
        let events = secondary.subscription.events();
        let (sink, stop) = (sink.clone(), stop.clone());
        // The source owns the subscription: the watch lives as long as the source.
        let subscription = secondary.subscription;
        sources.spawn(async move {
            source.run(events, sink, synced, stop).await;
            drop(subscription);
        });
    }
    if let Some(period) = settings.resync_period {
        let (cache, sink, stop) = (primaries.clone(), sink.clone(), stop.clone());
        let keys = move || cache.keys();
        sources.spawn(async move { timer::resync(period, keys, &*sink, stop).await });
    }
    (sources, futures::future::join_all(syncs))
}

/// The poller of a plugin's external state: every polling period (a plugin with external
/// dependents but no polling is refused at load), at most as many fetches at once as the plugin
/// may have HTTP requests in flight.
fn poller(
    module: &Arc<Current>,
    config: &PluginConfig,
    state: Arc<ExternalState>,
    cache: &Arc<WatchedCache>,
    primaries: &informer::Cache,
    sink: &Arc<dyn Sink>,
    fence: &crate::fence::Fence,
) -> Poller {
    let polling = config.polling.as_ref();
    let concurrency = config.http.as_ref().and_then(|h| h.max_concurrent).unwrap_or(DEFAULT_FETCH_CONCURRENCY);
    Poller {
        state,
        module: module.clone(),
        primaries: primaries.clone(),
        reader: cache.clone(),
        reads: cache.primary_reads(),
        sink: sink.clone(),
        period: Duration::from_millis(polling.map_or(DEFAULT_POLLING_PERIOD_MS, |p| p.period_ms)),
        global: polling.is_some_and(|p| matches!(p.mode, PollingMode::Global)),
        concurrency: concurrency as usize,
        gate: fence.gate(),
    }
}

/// Fetches at once when the plugin's HTTP grant does not say (its own default).
const DEFAULT_FETCH_CONCURRENCY: u32 = 8;
/// The polling period of a plugin with external dependents that declares none (refused at load).
const DEFAULT_POLLING_PERIOD_MS: u64 = 60_000;

/// How metrics and logs name the primary's watch.
const PRIMARY_WATCH: &str = "primary";

/// A declared predicate, checked (at load already: `None` is a safety net, logged).
fn predicate(
    plugin: &str,
    terms: Option<&[crate::runtime::bindings::wasmop::plugin::types::PredicateTerm]>,
) -> Option<Option<wasmop_core::predicate::Predicate>> {
    crate::runtime::bindings::predicate(terms)
        .inspect_err(|err| tracing::error!(plugin, %err, "invalid predicate"))
        .ok()
}

/// Schedule: the primary's watch events, filtered, into the scheduler.
struct Dispatch {
    plugin: String,
    /// The plugin's filters and predicate.
    filter: EventFilter,
    /// The events that passed or not.
    events: crate::metrics::WatchEvents,
    /// The host's own writes of primaries, whose events reconcile nothing.
    own: Arc<OwnWrites>,
    references: References,
    primaries: informer::Cache,
    handle: scheduler::Handle<ObjectKey>,
    /// Set when the caches have synced.
    synced: Arc<std::sync::atomic::AtomicBool>,
    /// The plugin's finalizer, if it has one.
    finalizer: Option<String>,
    /// What the list in progress shows, for the order of its primaries (see [`listed`]).
    triage: listed::Triage,
    /// Told when a primary is gone, to drop its inbound payload.
    inlet: Inlet,
}

/// A started scheduler, polled by the controller's task.
type Scheduler = std::pin::Pin<Box<dyn std::future::Future<Output = ()> + Send>>;

/// What the scheduler waits for besides the primary's cache: the secondaries' caches, and the
/// predecessor to stop.
type Before = (futures::future::JoinAll<oneshot::Receiver<()>>, Option<oneshot::Receiver<()>>);

/// The scheduler's parts, until every cache has synced.
type Unstarted = (scheduler::Inbox<ObjectKey>, Settings, Option<ShardAdmission>, Arc<Reconciler>);

impl Dispatch {
    /// Feeds the primary's events to the scheduler until the watch ends, `shutdown` fires or a
    /// watched kind is no longer served (`unserved_kind`); starts the scheduler once the
    /// primary's and the secondaries' caches are synced and the predecessor (`after`) is gone.
    /// Returns the scheduler, if it started, to be awaited until its runs have finished, and why
    /// it ended.
    ///
    /// The scheduler (and with it the runs) is polled in this task, beside the primary's
    /// events, as kube's `Controller` polls its watch and its reconciles in one: a change
    /// reaches its run without waking another task.
    async fn run(
        mut self,
        subscription: &Subscription,
        unstarted: Unstarted,
        (secondaries_synced, mut after): Before,
        reconcile_all: &Notify,
        mut unserved_kind: impl std::future::Future + Unpin,
        shutdown: &CancellationToken,
    ) -> (Option<Scheduler>, Ended) {
        let plugin = self.plugin.clone();
        let mut unstarted = Some(unstarted);
        let mut secondaries_synced = std::pin::pin!(secondaries_synced);
        let mut waiting_for_secondaries = true;
        let mut waiting_for_predecessor = after.is_some();
        let mut primary_synced = false;
        let mut scheduler = None;
        // The list in progress, to find objects deleted while the watch was down and to enqueue
        // its changes once the store shows them.
        let mut listing = Listing::default();
        let mut events = std::pin::pin!(subscription.events());
        loop {
            if primary_synced
                && !waiting_for_secondaries
                && !waiting_for_predecessor
                && let Some((inbox, scheduler_settings, admission, reconciler)) = unstarted.take()
            {
                tracing::info!(plugin, "caches synced; reconciling");
                self.synced.store(true, std::sync::atomic::Ordering::Release);
                if let Some(admission) = &admission {
                    admission.declare();
                }
                let run = move |run| reconciler.clone().run(run);
                let started: Scheduler = Box::pin(scheduler::run_admitted(inbox, scheduler_settings, admission, run));
                scheduler = Some(started);
            }
            let event = tokio::select! {
                event = events.next() => event,
                // It ends once stopped (`Settings::stop`); the events go on to a closed handle.
                () = async { scheduler.as_mut().expect("polled only once started").await }, if scheduler.is_some() => {
                    scheduler = None;
                    continue;
                }
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
                    for key in self.primaries.keys() {
                        self.handle.trigger_with(key, Priority::Background);
                    }
                    continue;
                }
                _ = &mut unserved_kind => {
                    tracing::error!(plugin, "a watched kind is no longer served; stopping the controller, \
                        which starts again once it is");
                    return (scheduler, Ended::Unserved);
                }
                _ = shutdown.cancelled() => break,
            };
            let Some(event) = event else { break };
            if self.event(event, &mut listing).await {
                primary_synced = true;
            }
        }
        (scheduler, Ended::Stopped)
    }

    /// Handles one event of the primary's watch; true when it ends a (re-)list.
    async fn event(&mut self, event: watcher::Event<Arc<crate::wire::Object>>, listing: &mut Listing) -> bool {
        match event {
            watcher::Event::Apply(object) => {
                let Some(key) = crate::object::key_of(&object) else { return false };
                // The filter and the own-write records see every change; the host's own writes
                // reconcile nothing (and need no decision when known already).
                let version = object.resource_version();
                let observed = self.filter.observe(&key, &object);
                let admitted = observed.is_change()
                    && !self.own.known_own(&key, version.as_deref())
                    && self.filter.decide(observed, &object).await;
                let own_write = self.own.consume(&key, version.as_deref(), admitted);
                if !own_write {
                    self.events.count(admitted);
                }
                if admitted && !own_write {
                    tracing::debug!(plugin = self.plugin, object = %key, version = ?version, "changed");
                    self.references.primary_changed(&key, &object).await;
                    self.handle.trigger_with(key, Priority::Live);
                }
            }
            // A list's changes run when it ends, the store showing them (see `Listing`); the
            // initial list and re-lists after a watch restart must not starve live changes.
            watcher::Event::InitApply(object) => {
                if let Some(key) = crate::object::key_of(&object) {
                    listing.listed(key.clone());
                    self.own.consume(&key, object.resource_version().as_deref(), false);
                    let observed = self.filter.observe(&key, &object);
                    let changed = observed.is_change();
                    let admitted = self.filter.decide(observed, &object).await;
                    if changed {
                        self.events.count(admitted);
                    }
                    self.triage.listed(&key, &object, self.finalizer.as_deref(), admitted);
                    if admitted {
                        self.references.primary_changed(&key, &object).await;
                        listing.defer([key]);
                    }
                }
            }
            watcher::Event::Delete(object) => {
                if let Some(key) = crate::object::key_of(&object) {
                    self.own.consume(&key, None, false);
                    self.filter.forget(&key);
                    self.references.primary_deleted(&key);
                    self.inlet.forget(&key);
                    self.handle.forget(key);
                }
            }
            watcher::Event::Init => {
                listing.restart();
                self.triage = listed::Triage::default();
                tracing::debug!(plugin = self.plugin, "listing primaries");
            }
            watcher::Event::InitDone => {
                let (listed, changed) = std::mem::take(listing).end();
                self.own.relisted(&listed);
                for key in self.filter.retain_listed(&listed) {
                    self.references.primary_deleted(&key);
                    self.inlet.forget(&key);
                    self.handle.forget(key);
                }
                let triage = std::mem::take(&mut self.triage);
                // A primary deferred before its list started over and not listed again is gone.
                for key in changed.into_iter().filter(|key| listed.contains(key)) {
                    let priority = triage.priority(&key);
                    self.handle.trigger_with(key, priority);
                }
                return true;
            }
        }
        false
    }
}
