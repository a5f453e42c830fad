//! Schedule: the dispatch of the primary's watch events, filtered, into the scheduler, which it
//! starts once the caches are synced and polls beside the events until the controller stops.

use std::sync::Arc;

use futures::StreamExt;
use kube::ResourceExt;
use kube::runtime::watcher;
use tokio::sync::{Notify, oneshot};
use tokio_util::sync::CancellationToken;

use super::admission::ShardAdmission;
use super::listed::List;
use super::reconcile::Reconciler;
use super::references::References;
use crate::dependents::OwnWrites;
use crate::informer::{self, Subscription};
use crate::object::ObjectKey;
use crate::runtime::Current;
use crate::scheduler::{self, Priority, Settings};
use crate::source::filter::EventFilter;
use crate::source::inbound::Inlet;
use crate::wire::{Object, PrimaryReads};
use wasmop_core::filter::{ChangeFilter, Filters};

/// How metrics and logs name the primary's watch.
pub(super) const PRIMARY_WATCH: &str = "primary";

/// Why a controller's run ended.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum Ended {
    /// Shut down (or it cannot run): the controller is done.
    Stopped,
    /// The API server stopped serving a watched kind (its CRD was deleted): the controller
    /// starts again once every declared kind is served.
    Unserved,
}

/// Schedule: the primary's watch events, filtered, into the scheduler.
pub(super) struct Dispatch {
    pub(super) plugin: String,
    /// The plugin's filters and predicate.
    pub(super) filter: EventFilter,
    /// The events that passed or not.
    pub(super) events: crate::metrics::WatchEvents,
    /// The host's own writes of primaries, whose events reconcile nothing.
    pub(super) own: Arc<OwnWrites>,
    pub(super) references: References,
    pub(super) primaries: informer::Cache,
    pub(super) handle: scheduler::Handle<ObjectKey>,
    /// Set when the caches have synced.
    pub(super) synced: Arc<std::sync::atomic::AtomicBool>,
    /// The plugin's finalizer, if it has one.
    pub(super) finalizer: Option<String>,
    /// The list in progress, to find objects deleted while the watch was down and to enqueue
    /// its changes once the store shows them, in the order [`super::listed`] gives.
    pub(super) list: List,
    /// Told when a primary is gone, to drop its inbound payload.
    pub(super) inlet: Inlet,
}

/// The filter of the primary's events: the plugin's `filters` and declared predicate (`None`
/// when the predicate is invalid, checked at load already).
pub(super) fn primary_filter(
    plugin: &str,
    filters: &Filters,
    predicate: Option<Option<wasmop_core::predicate::Predicate>>,
    module: &Arc<Current>,
    reads: &PrimaryReads,
) -> Option<EventFilter> {
    let filter = ChangeFilter::with_predicate(filters.clone(), predicate?);
    Some(EventFilter::new(plugin, PRIMARY_WATCH, filter, module.clone(), reads.clone()))
}

/// A started scheduler, polled by the controller's task.
pub(super) type Scheduler = std::pin::Pin<Box<dyn std::future::Future<Output = ()> + Send>>;

/// What the scheduler waits for besides the primary's cache: the secondaries' caches, and the
/// predecessor to stop.
pub(super) type Before = (futures::future::JoinAll<oneshot::Receiver<()>>, Option<oneshot::Receiver<()>>);

/// The scheduler's parts, until every cache has synced.
pub(super) type Unstarted = (scheduler::Inbox<ObjectKey>, Settings, Option<ShardAdmission>, Arc<Reconciler>);

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
    pub(super) async fn run(
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
        let mut events = std::pin::pin!(subscription.events());
        loop {
            if primary_synced
                && !waiting_for_secondaries
                && !waiting_for_predecessor
                && let Some(unstarted) = unstarted.take()
            {
                scheduler = Some(self.start(unstarted));
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
            if self.event(event).await {
                primary_synced = true;
            }
        }
        (scheduler, Ended::Stopped)
    }

    /// Starts the scheduler, every cache synced: the controller is ready and, sharded, declares
    /// how it runs the plugin.
    fn start(&self, (inbox, settings, admission, reconciler): Unstarted) -> Scheduler {
        tracing::info!(plugin = self.plugin, "caches synced; reconciling");
        self.synced.store(true, std::sync::atomic::Ordering::Release);
        if let Some(admission) = &admission {
            admission.declare();
        }
        let run = move |run| reconciler.clone().run(run);
        Box::pin(scheduler::run_admitted(inbox, settings, admission, run))
    }

    /// Handles one event of the primary's watch; true when it ends a (re-)list.
    async fn event(&mut self, event: watcher::Event<Arc<Object>>) -> bool {
        match event {
            watcher::Event::Apply(object) => self.applied(&object).await,
            // A list's changes run when it ends, the store showing them (see `List`); the
            // initial list and re-lists after a watch restart must not starve live changes.
            watcher::Event::InitApply(object) => self.listed(&object).await,
            watcher::Event::Delete(object) => {
                if let Some(key) = crate::object::key_of(&object) {
                    self.own.consume(&key, None, false);
                    self.filter.forget(&key);
                    self.forget(key);
                }
            }
            watcher::Event::Init => {
                self.list.restart();
                tracing::debug!(plugin = self.plugin, "listing primaries");
            }
            watcher::Event::InitDone => {
                let (listed, runs) = self.list.end();
                self.own.relisted(&listed);
                for key in self.filter.retain_listed(&listed) {
                    self.forget(key);
                }
                for (key, priority) in runs {
                    self.handle.trigger_with(key, priority);
                }
                return true;
            }
        }
        false
    }

    /// A primary changed: reconciled at once unless the filter holds it back or the change is
    /// the host's own write.
    async fn applied(&mut self, object: &Arc<Object>) {
        let Some(key) = crate::object::key_of(object) else { return };
        // The filter and the own-write records see every change; the host's own writes
        // reconcile nothing (and need no decision when known already).
        let version = object.resource_version();
        let observed = self.filter.observe(&key, object);
        let admitted = observed.is_change()
            && !self.own.known_own(&key, version.as_deref())
            && self.filter.decide(observed, object).await;
        let own_write = self.own.consume(&key, version.as_deref(), admitted);
        if !own_write {
            self.events.count(admitted);
        }
        if admitted && !own_write {
            tracing::debug!(plugin = self.plugin, object = %key, version = ?version, "changed");
            self.references.primary_changed(&key, object).await;
            self.handle.trigger_with(key, Priority::Live);
        }
    }

    /// A (re-)list shows a primary: reconciled once the list ends, when the filter lets it.
    async fn listed(&mut self, object: &Arc<Object>) {
        let Some(key) = crate::object::key_of(object) else { return };
        self.list.shows(&key);
        self.own.consume(&key, object.resource_version().as_deref(), false);
        let observed = self.filter.observe(&key, object);
        let changed = observed.is_change();
        let admitted = self.filter.decide(observed, object).await;
        if changed {
            self.events.count(admitted);
        }
        self.list.triage(&key, object, self.finalizer.as_deref(), admitted);
        if admitted {
            self.references.primary_changed(&key, object).await;
            self.list.defer(key);
        }
    }

    /// A primary is gone: its references, inbound payload and queued runs are dropped.
    fn forget(&mut self, key: ObjectKey) {
        self.references.primary_deleted(&key);
        self.inlet.forget(&key);
        self.handle.forget(key);
    }
}
