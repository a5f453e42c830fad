//! This replica's share of the shards as the rest of the host reads it: which objects it owns
//! and may run now, and its runs in flight, which the membership waits for before it
//! acknowledges a view in which the replica lost their objects.

use std::collections::{BTreeSet, HashMap};
use std::sync::{Arc, Mutex};

use tokio::sync::{Notify, watch};
use tokio::time::Instant;
use wasmop_core::shard::{Declarations, Ranges};

/// This replica's share, as last decided by its membership.
#[derive(Debug, Clone)]
pub struct Share {
    /// The view (digest of the live members) this share belongs to.
    pub view: String,
    /// What this replica owns in the view: its watches hold these objects.
    pub owned: Ranges,
    /// What it may run now: all it owns once the view settled, before that only what no one
    /// else may still run.
    pub runnable: Ranges,
    /// When the membership changed to this view (by this replica's clock).
    pub since: Instant,
    /// Whether a view has settled since this replica joined: it has had its first assignment.
    pub assigned: bool,
    /// The plugins another live member runs with another shard key (or whole, or sharded):
    /// none of their objects runs here until the members agree.
    pub disputed: BTreeSet<String>,
}

impl Share {
    /// Nothing owned: before the first view, or after this replica left.
    fn none() -> Self {
        Self {
            view: String::new(),
            owned: Ranges::default(),
            runnable: Ranges::default(),
            since: Instant::now(),
            assigned: false,
            disputed: BTreeSet::new(),
        }
    }
}

/// What a replica may do with one object.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Verdict {
    /// Run it now.
    Run,
    /// It is ours, but another replica may still run it: wait for the view to settle.
    Wait,
    /// Another replica owns it.
    NotOurs,
}

/// The replica's shard state, shared by its watches and schedulers; cheap to clone.
#[derive(Debug, Clone)]
pub struct Shards {
    share: watch::Receiver<Arc<Share>>,
    owned: watch::Receiver<Ranges>,
    runs: Arc<Runs>,
    /// How this replica runs each of its plugins, as its membership Lease tells the others.
    declared: Arc<watch::Sender<Declarations>>,
}

/// Where the membership publishes this replica's shares.
#[derive(Debug)]
pub struct Publisher {
    share: watch::Sender<Arc<Share>>,
    owned: watch::Sender<Ranges>,
}

impl Publisher {
    /// Publishes `share` if it differs from the current one (view, ranges or assignment).
    pub fn publish(&self, share: Share) {
        self.owned.send_if_modified(|owned| {
            let changed = *owned != share.owned;
            if changed {
                owned.clone_from(&share.owned);
            }
            changed
        });
        self.share.send_if_modified(|current| {
            let same = current.view == share.view
                && current.owned == share.owned
                && current.runnable == share.runnable
                && current.assigned == share.assigned
                && current.disputed == share.disputed;
            if !same {
                *current = Arc::new(share);
            }
            !same
        });
    }

    /// Nothing owned any more: the replica leaves.
    pub fn leave(&self) {
        self.publish(Share::none());
    }
}

/// The hashes of the runs in flight.
#[derive(Default)]
struct Runs {
    in_flight: Mutex<HashMap<u64, usize>>,
    finished: Notify,
    /// The view of the last run started, to time the first run of each view.
    last_view: Mutex<String>,
    metrics: Option<Arc<crate::metrics::Metrics>>,
}

impl std::fmt::Debug for Runs {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Runs").field("in_flight", &self.in_flight).finish_non_exhaustive()
    }
}

/// Held by a run while it is in flight.
#[derive(Debug)]
pub struct RunGuard {
    runs: Arc<Runs>,
    hash: u64,
}

impl Drop for RunGuard {
    fn drop(&mut self) {
        let mut in_flight = self.runs.in_flight.lock().expect("never poisoned");
        if let Some(count) = in_flight.get_mut(&self.hash) {
            *count -= 1;
            if *count == 0 {
                in_flight.remove(&self.hash);
            }
        }
        drop(in_flight);
        self.runs.finished.notify_waiters();
    }
}

impl Shards {
    /// A shard state and the sender its membership publishes shares with; the first run of
    /// each view is timed in `metrics`, if given.
    pub fn new(metrics: Option<Arc<crate::metrics::Metrics>>) -> (Publisher, Self) {
        let (share_tx, share) = watch::channel(Arc::new(Share::none()));
        let (owned_tx, owned) = watch::channel(Ranges::default());
        let runs = Arc::new(Runs { metrics, ..Runs::default() });
        let declared = Arc::new(watch::channel(Declarations::new()).0);
        (Publisher { share: share_tx, owned: owned_tx }, Self { share, owned, runs, declared })
    }

    /// Declares how this replica runs `plugin` (its shard key's name, or
    /// [`wasmop_core::shard::UNSHARDED`]); `None`: it stopped running it. Called when the
    /// plugin's controller starts reconciling (after the version it replaces stopped), and when
    /// it stops.
    pub fn declare(&self, plugin: &str, how: Option<&str>) {
        self.declared.send_if_modified(|declared| match how {
            Some(how) => declared.insert(plugin.to_string(), how.to_string()).as_deref() != Some(how),
            None => declared.remove(plugin).is_some(),
        });
    }

    /// This replica's declarations, and their changes.
    pub fn declarations(&self) -> watch::Receiver<Declarations> {
        self.declared.subscribe()
    }

    /// Whether this replica's members agree on how to run `plugin`, as far as it knows: a view
    /// settled since it joined, and no live member runs `plugin` differently.
    pub fn agreed(&self, plugin: &str) -> bool {
        let share = self.share.borrow();
        share.assigned && !share.disputed.contains(plugin)
    }

    /// The share as it stands.
    pub fn share(&self) -> Arc<Share> {
        self.share.borrow().clone()
    }

    /// Tells of every new share.
    pub fn subscribe(&self) -> watch::Receiver<Arc<Share>> {
        self.share.clone()
    }

    /// Tells of every change of the ranges this replica owns (what its sharded watches hold).
    pub fn owned(&self) -> watch::Receiver<Ranges> {
        self.owned.clone()
    }

    /// What this replica may do with an object whose shard key hashes to `hash`.
    pub fn verdict(&self, hash: u64) -> Verdict {
        let share = self.share.borrow();
        if !share.owned.contains(hash) {
            Verdict::NotOurs
        } else if share.runnable.contains(hash) {
            Verdict::Run
        } else {
            Verdict::Wait
        }
    }

    /// Starts a run of the object hashing to `hash` if it may run now: the guard counts it in
    /// flight until dropped. Checked and counted under one lock, so a new share cannot slip
    /// between them unseen by [`Shards::drained`].
    pub fn start(&self, hash: u64) -> Result<RunGuard, Verdict> {
        let mut in_flight = self.runs.in_flight.lock().expect("never poisoned");
        match self.verdict(hash) {
            Verdict::Run => {
                *in_flight.entry(hash).or_default() += 1;
                self.first_of_view();
                Ok(RunGuard { runs: self.runs.clone(), hash })
            }
            other => Err(other),
        }
    }

    /// Times the first run of a view, from the membership change to it.
    fn first_of_view(&self) {
        let Some(metrics) = &self.runs.metrics else { return };
        let share = self.share.borrow();
        let mut last = self.runs.last_view.lock().expect("never poisoned");
        if *last != share.view {
            last.clone_from(&share.view);
            metrics.shards().first_run(share.since.elapsed().as_secs_f64());
        }
    }

    /// Resolves once no run is in flight outside `owned`.
    pub async fn drained(&self, owned: &Ranges) {
        loop {
            let finished = self.runs.finished.notified();
            tokio::pin!(finished);
            finished.as_mut().enable();
            let outside = {
                let in_flight = self.runs.in_flight.lock().expect("never poisoned");
                in_flight.keys().any(|hash| !owned.contains(*hash))
            };
            if !outside {
                return;
            }
            finished.await;
        }
    }

    /// How many runs are in flight.
    #[cfg(test)]
    fn in_flight(&self) -> usize {
        self.runs.in_flight.lock().expect("never poisoned").values().sum()
    }
}

/// A replica that joined the shards: its shard state, and the fence its sharded controllers
/// write through (open while its membership Lease is renewed in time).
#[derive(Debug, Clone)]
pub struct Joined {
    /// The replica's shard state.
    pub shards: Shards,
    /// The membership's fence.
    pub fence: crate::fence::Fence,
    /// Whether sharded watches ask the API server to filter (when it honours it); `false`
    /// filters every object here (`--shard-filter client`).
    pub server_side: bool,
}

#[cfg(test)]
mod tests {
    use super::*;
    use wasmop_core::shard::Assignment;

    fn share(members: &[&str], me: &str, settled: bool) -> Share {
        let assignment = Assignment::new(members.iter().copied());
        let owned = assignment.ranges(me);
        let runnable = if settled { owned.clone() } else { Ranges::default() };
        Share {
            view: assignment.view(),
            owned,
            runnable,
            since: Instant::now(),
            assigned: settled,
            disputed: BTreeSet::new(),
        }
    }

    #[tokio::test]
    async fn runs_start_only_where_runnable_and_drain_waits_for_the_lost_ones() {
        let (tx, shards) = Shards::new(None);
        assert_eq!(shards.start(1).unwrap_err(), Verdict::NotOurs, "nothing before the first share");
        tx.publish(share(&["a"], "a", false));
        assert_eq!(shards.start(1).unwrap_err(), Verdict::Wait);
        tx.publish(share(&["a"], "a", true));
        let assignment = Assignment::new(["a", "b"]);
        let lost = (0..u64::MAX).step_by(1 << 50).find(|h| assignment.owner(*h) == Some("b")).unwrap();
        let kept = (0..u64::MAX).step_by(1 << 50).find(|h| assignment.owner(*h) == Some("a")).unwrap();
        let (lost_run, kept_run) = (shards.start(lost).unwrap(), shards.start(kept).unwrap());
        assert_eq!(shards.in_flight(), 2);
        // "b" joins: "a" keeps its part, and the drain for the new share waits for the lost run.
        tx.publish(share(&["a", "b"], "a", false));
        assert_eq!(shards.verdict(lost), Verdict::NotOurs);
        let owned = shards.share().owned.clone();
        let drained = shards.drained(&owned);
        tokio::pin!(drained);
        assert!(futures::poll!(drained.as_mut()).is_pending());
        drop(kept_run);
        assert!(futures::poll!(drained.as_mut()).is_pending(), "a kept run does not hold the drain");
        drop(lost_run);
        drained.await;
        assert_eq!(shards.in_flight(), 0);
    }
}
