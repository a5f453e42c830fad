//! The maximum reconciliation interval of keys with nothing else pending: one deadline per key,
//! instead of a scheduler entry and a timer each, and taken in batches.
//!
//! A settled key (its last run succeeded, no retry, reschedule or rate limit pending) is all
//! most keys are most of the time; its entry and its timer in a timer wheel cost about 420 bytes,
//! a deadline here the key and 16 bytes. Deadlines are checked when the earliest one passes, and
//! then not again for [`SLACK_DIVISOR`]-th of the interval, so a key runs at most that much after
//! its deadline (36 s of the default 10 h) and a cluster of deadlines costs one pass, not one per
//! key; never before its deadline.

use std::hash::Hash;
use std::pin::Pin;
use std::task::{Context, Poll, ready};
use std::time::Duration;

use tokio::time::{Instant, Sleep};
use wasmop_core::table::KeyMap;

/// The fraction of the interval a key may run after its deadline.
pub(super) const SLACK_DIVISOR: u32 = 1000;

/// Deadlines of settled keys.
pub(super) struct Intervals<K> {
    due: KeyMap<K, Instant>,
    /// When to look for keys due next.
    wake_at: Option<Instant>,
    sleep: Option<Pin<Box<Sleep>>>,
    slack: Duration,
}

impl<K: Clone + Eq + Hash> Intervals<K> {
    /// Deadlines for keys of a scheduler whose maximum interval is `max`.
    pub(super) fn new(max: Duration) -> Self {
        Self { due: KeyMap::new(), wake_at: None, sleep: None, slack: max / SLACK_DIVISOR }
    }

    /// How many keys wait for their maximum interval.
    pub(super) fn len(&self) -> usize {
        self.due.len()
    }

    /// `key` runs again at `deadline`, unless it is [`Intervals::remove`]d first.
    pub(super) fn insert(&mut self, key: K, deadline: Instant) {
        self.due.insert(key, deadline);
        self.wake_at = Some(self.wake_at.map_or(deadline, |at| at.min(deadline)));
    }

    /// `key` has work of its own now: its deadline goes.
    pub(super) fn remove(&mut self, key: &K) {
        self.due.swap_remove(key);
    }

    /// Drops every deadline.
    pub(super) fn clear(&mut self) {
        self.due.clear();
        self.wake_at = None;
    }

    /// The keys whose deadline has passed, once the earliest has; they leave.
    pub(super) fn poll_due(&mut self, cx: &mut Context<'_>) -> Poll<Vec<K>> {
        let Some(at) = self.wake_at else { return Poll::Pending };
        let sleep = self.sleep.get_or_insert_with(|| Box::pin(tokio::time::sleep_until(at)));
        if sleep.deadline() != at {
            sleep.as_mut().reset(at);
        }
        ready!(sleep.as_mut().poll(cx));
        let now = Instant::now();
        let due: Vec<K> = self.due.extract_if(.., |_, deadline| *deadline <= now).map(|(key, _)| key).collect();
        self.wake_at = self.due.values().min().map(|earliest| (*earliest).max(now + self.slack));
        Poll::Ready(due)
    }
}

#[cfg(test)]
mod tests {
    use std::future::poll_fn;

    use super::*;

    #[tokio::test(start_paused = true)]
    async fn keys_are_taken_at_their_deadline_or_within_the_slack_after_it_never_before() {
        let start = Instant::now();
        let mut intervals = Intervals::new(Duration::from_secs(1000));
        intervals.insert("a", start + Duration::from_secs(1000));
        intervals.insert("b", start + Duration::from_millis(1_000_500));
        intervals.insert("gone", start + Duration::from_secs(1000));
        intervals.remove(&"gone");
        assert_eq!(poll_fn(|cx| intervals.poll_due(cx)).await, ["a"]);
        assert_eq!(start.elapsed(), Duration::from_secs(1000));
        // The next pass is a slack (1 s) later, not at b's deadline half a second later.
        assert_eq!(poll_fn(|cx| intervals.poll_due(cx)).await, ["b"]);
        assert_eq!(start.elapsed(), Duration::from_secs(1001));
        assert_eq!(intervals.len(), 0);
        assert!(tokio::time::timeout(Duration::from_secs(5000), poll_fn(|cx| intervals.poll_due(cx))).await.is_err());
    }
}
