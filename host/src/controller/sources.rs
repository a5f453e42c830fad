//! Events in, besides the primary's watch: one source per secondary watch (its mapper turns
//! changes into primary keys), the resync timer, the poller of the plugin's external state and,
//! sharded, the count of the primaries this replica owns. All feed the controller's scheduler.

use std::sync::Arc;
use std::time::Duration;

use tokio::sync::mpsc::UnboundedReceiver;
use tokio::sync::oneshot;
use tokio_util::sync::CancellationToken;

use super::watch::Secondary;
use crate::dependents::OwnWrites;
use crate::external::ExternalState;
use crate::external::poller::Poller;
use crate::informer::{self, WatchedCache};
use crate::mapping::PrimaryKind;
use crate::metrics::Metrics;
use crate::object::ObjectKey;
use crate::runtime::Current;
use crate::runtime::bindings::wasmop::plugin::types::{Mapper, PluginConfig, PollingMode, PredicateTerm};
use crate::settings::Resolved;
use crate::source::filter::EventFilter;
use crate::source::secondary::{Mapping, SecondarySource};
use crate::source::{Sink, timer};
use crate::wire::PrimaryReads;
use wasmop_core::filter::ChangeFilter;

/// How often a sharded controller counts the primaries it owns (`wasmop_shard_objects`).
const OWNED_EVERY: Duration = Duration::from_secs(1);

/// Fetches at once when the plugin's HTTP grant does not say (its own default).
const DEFAULT_FETCH_CONCURRENCY: u32 = 8;
/// The polling period of a plugin with external dependents that declares none (refused at load).
const DEFAULT_POLLING_PERIOD_MS: u64 = 60_000;

/// What every source feeds and reads.
pub(super) struct Feeds<'a> {
    pub(super) module: &'a Arc<Current>,
    pub(super) metrics: &'a Arc<Metrics>,
    pub(super) config: &'a PluginConfig,
    /// The plugin's caches, and the primaries' among them.
    pub(super) cache: &'a Arc<WatchedCache>,
    pub(super) primaries: &'a informer::Cache,
    pub(super) sink: &'a Arc<dyn Sink>,
    /// Stops every source.
    pub(super) stop: &'a CancellationToken,
}

/// Events in: one source per secondary watch (its mapper turns changes into primary keys) and
/// the resync timer, all feeding `sink`. Returns the tasks and a future that resolves once
/// every secondary cache has synced (an error: a source stopped first).
pub(super) fn spawn(
    feeds: &Feeds<'_>,
    settings: &Resolved,
    secondaries: Vec<Secondary>,
    owns: Vec<Option<Arc<OwnWrites>>>,
) -> (tokio::task::JoinSet<()>, futures::future::JoinAll<oneshot::Receiver<()>>) {
    let Feeds { module, metrics, config, cache, primaries, sink, stop } = *feeds;
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

/// Counts the primaries this replica owns, as its sharded cache holds them, until `feeds` stop.
pub(super) fn spawn_owned_count(sources: &mut tokio::task::JoinSet<()>, feeds: &Feeds<'_>) {
    let (metrics, primaries, stop, plugin) =
        (feeds.metrics.clone(), feeds.primaries.clone(), feeds.stop.clone(), feeds.config.name.clone());
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

/// Polls the plugin's external `state` on `requests` until `feeds` stop.
pub(super) fn spawn_poller(
    sources: &mut tokio::task::JoinSet<()>,
    feeds: &Feeds<'_>,
    (state, requests): (Arc<ExternalState>, UnboundedReceiver<ObjectKey>),
    fence: &crate::fence::Fence,
) {
    let poller = poller(feeds, state, fence);
    let stop = feeds.stop.clone();
    sources.spawn(async move { poller.run(requests, stop).await });
}

/// The poller of a plugin's external state: every polling period (a plugin with external
/// dependents but no polling is refused at load), at most as many fetches at once as the plugin
/// may have HTTP requests in flight.
fn poller(feeds: &Feeds<'_>, state: Arc<ExternalState>, fence: &crate::fence::Fence) -> Poller {
    let Feeds { module, config, cache, primaries, sink, .. } = *feeds;
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

/// A declared predicate, checked (at load already: `None` is a safety net, logged).
pub(super) fn predicate(
    plugin: &str,
    terms: Option<&[PredicateTerm]>,
) -> Option<Option<wasmop_core::predicate::Predicate>> {
    crate::runtime::bindings::predicate(terms)
        .inspect_err(|err| tracing::error!(plugin, %err, "invalid predicate"))
        .ok()
}
