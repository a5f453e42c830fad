//! Polling of external state (JOSDK's `PerResourcePollingEventSource` and `PollingEventSource`):
//! every period, and at once when a reconcile finds a primary whose state is not known yet, the
//! plugin's `fetch` (per primary) or `fetch-all` runs on the poller's own tasks, never in a
//! reconcile slot, at most `concurrency` at a time. A primary is enqueued (at background
//! priority, so live events go first) only when its state changed.

use std::collections::HashSet;
use std::sync::Arc;
use std::time::Duration;

use futures::StreamExt;
use tokio::sync::mpsc;
use tokio_util::sync::CancellationToken;
use wasmop_core::external::ExternalObject;

use super::{ExternalState, from_wit};
use crate::informer::Cache;
use crate::object::ObjectKey;
use crate::runtime::bindings::wasmop::plugin::types::TrackedId;
use crate::runtime::{CacheReader, Current};
use crate::scheduler::Priority;
use crate::source::Sink;

/// Asks the poller to fetch a primary's state now.
#[derive(Clone, Debug)]
pub struct FetchNow(mpsc::UnboundedSender<ObjectKey>);

impl FetchNow {
    /// A channel to a poller.
    pub fn channel() -> (Self, mpsc::UnboundedReceiver<ObjectKey>) {
        let (tx, rx) = mpsc::unbounded_channel();
        (Self(tx), rx)
    }

    /// Fetches `key`'s state soon; the poller enqueues the primary when it is known.
    pub fn request(&self, key: ObjectKey) {
        // The poller stops with its controller; then no reconcile runs either.
        self.0.send(key).ok();
    }
}

/// One plugin's poller.
pub struct Poller {
    /// Where fetched states go.
    pub state: Arc<ExternalState>,
    /// The plugin.
    pub module: Arc<Current>,
    /// The primaries, whose keys are polled.
    pub primaries: Cache,
    /// What `fetch` may read.
    pub reader: Arc<dyn CacheReader>,
    /// What the plugin reads of a primary.
    pub reads: crate::wire::PrimaryReads,
    /// The scheduler.
    pub sink: Arc<dyn Sink>,
    /// How often every primary is polled.
    pub period: Duration,
    /// One `fetch-all` instead of one `fetch` per primary.
    pub global: bool,
    /// Fetches at once.
    pub concurrency: usize,
    /// Whether this replica leads: only a leader polls, each round under the ticket of its
    /// term (a round's calls go out only while that term lasts).
    pub gate: Option<crate::fence::Gate>,
}

impl Poller {
    /// Polls until `stop` fires.
    pub async fn run(self, mut requests: mpsc::UnboundedReceiver<ObjectKey>, stop: CancellationToken) {
        let plugin = self.module.get().name().to_string();
        tracing::info!(plugin, period = ?self.period, global = self.global, "polling external state");
        let mut tick = tokio::time::interval(self.period);
        tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
        loop {
            let keys: Vec<ObjectKey> = tokio::select! {
                () = stop.cancelled() => return,
                _ = tick.tick() => {
                    let keys = self.primaries.keys();
                    self.state.retain(&keys.iter().cloned().collect());
                    keys
                }
                Some(key) = requests.recv() => {
                    // Every request waiting now, once each.
                    let mut keys = HashSet::from([key]);
                    while let Ok(key) = requests.try_recv() {
                        keys.insert(key);
                    }
                    keys.into_iter().collect()
                }
            };
            // Asked for each round, requested or periodic: a replica that does not lead polls
            // nothing (the leader's own runs ask for what they need).
            let ticket = match &self.gate {
                Some(gate) => match gate.admit() {
                    Some(ticket) => Some(ticket),
                    None => continue,
                },
                None => None,
            };
            let round = async {
                if self.global {
                    self.fetch_all(&keys).await;
                } else {
                    let fetches = futures::stream::iter(keys).map(|key| self.fetch(key));
                    fetches.buffer_unordered(self.concurrency.max(1)).for_each(|()| async {}).await;
                }
            };
            match ticket {
                Some(ticket) => ticket.scope(round).await,
                None => round.await,
            }
        }
    }

    /// Fetches one primary's state.
    async fn fetch(&self, key: ObjectKey) {
        let primary = match self.primaries.fetch(&key).await {
            Ok(Some(primary)) => primary,
            Ok(None) => return self.state.forget(&key),
            Err(err) => return tracing::debug!(object = %key, %err, "cannot read the primary to poll"),
        };
        let result = match self.state.ids(&key, &primary).await {
            Err(err) => Err(format!("cannot read the tracking record: {}", crate::api_error::describe(&err))),
            Ok(ids) => {
                let tracked: Vec<TrackedId> =
                    ids.into_iter().map(|((dependent, key), id)| TrackedId { dependent, key, id }).collect();
                let json = self.reads.json(&primary).unwrap_or_default();
                match self.module.get().fetch(self.reader.clone(), &json, &tracked).await {
                    Ok(Ok(objects)) => Ok(objects.into_iter().map(from_wit).collect()),
                    Ok(Err(reason)) => Err(format!("fetch failed: {reason}")),
                    Err(call) => Err(format!("fetch failed: {call}")),
                }
            }
        };
        self.record(key, result);
    }

    /// Fetches every primary's state at once; `keys` are those known to the cache (a primary the
    /// answer does not name has no external objects).
    async fn fetch_all(&self, keys: &[ObjectKey]) {
        let all: HashSet<ObjectKey> = self.primaries.keys().into_iter().chain(keys.iter().cloned()).collect();
        let answer = match self.module.get().fetch_all(self.reader.clone()).await {
            Ok(Ok(states)) => Ok(states),
            Ok(Err(reason)) => Err(format!("fetch-all failed: {reason}")),
            Err(call) => Err(format!("fetch-all failed: {call}")),
        };
        match answer {
            Err(reason) => {
                for key in all {
                    self.record(key, Err(reason.clone()));
                }
            }
            Ok(states) => {
                let mut found: std::collections::HashMap<ObjectKey, Vec<ExternalObject>> = states
                    .into_iter()
                    .map(|s| {
                        let key = ObjectKey { namespace: s.primary.namespace, name: s.primary.name };
                        (key, s.objects.into_iter().map(from_wit).collect())
                    })
                    .collect();
                for key in all {
                    let objects = found.remove(&key).unwrap_or_default();
                    self.record(key, Ok(objects));
                }
            }
        }
    }

    fn record(&self, key: ObjectKey, result: Result<Vec<ExternalObject>, String>) {
        if let Err(reason) = &result {
            tracing::warn!(object = %key, "{reason}");
        }
        if self.state.fetched(&key, result) {
            tracing::debug!(object = %key, "external state changed");
            self.sink.enqueue(key, Priority::Background);
        }
    }
}
