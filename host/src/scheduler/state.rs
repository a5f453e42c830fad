//! The scheduler's bookkeeping: a pure state machine advanced by the run loop.

use std::collections::{HashMap, VecDeque};
use std::future::poll_fn;
use std::hash::Hash;
use std::time::Duration;

use tokio_util::time::{DelayQueue, delay_queue};

use super::{Run, Verdict};
use crate::retry::RetryPolicy;

/// Where a key is in its life cycle.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Phase {
    /// Nothing to do now; a timer may be pending.
    Idle,
    /// Waiting in the ready queue for a free slot.
    Ready,
    /// A run is in flight; `rerun` records a trigger that arrived meanwhile.
    Running { rerun: bool },
}

#[derive(Debug)]
struct Entry {
    phase: Phase,
    /// Failed attempts since the last success.
    attempt: u32,
    timer: Option<delay_queue::Key>,
    /// The key was forgotten while running: drop it when the run finishes.
    forgotten: bool,
}

/// Per-key phases, the ready queue and the timers.
pub(super) struct State<K> {
    entries: HashMap<K, Entry>,
    ready: VecDeque<K>,
    timers: DelayQueue<K>,
    retry: RetryPolicy,
}

impl<K: Clone + Eq + Hash> State<K> {
    pub(super) fn new(retry: RetryPolicy) -> Self {
        Self { entries: HashMap::new(), ready: VecDeque::new(), timers: DelayQueue::new(), retry }
    }

    /// An event for `key`: run it now, or once more after the run in flight.
    pub(super) fn trigger(&mut self, key: K) {
        let entry = self.entries.entry(key.clone()).or_insert(Entry {
            phase: Phase::Idle,
            attempt: 0,
            timer: None,
            forgotten: false,
        });
        entry.forgotten = false;
        match entry.phase {
            Phase::Idle => {
                if let Some(timer) = entry.timer.take() {
                    self.timers.remove(&timer);
                }
                entry.phase = Phase::Ready;
                self.ready.push_back(key);
            }
            Phase::Ready => {}
            Phase::Running { .. } => entry.phase = Phase::Running { rerun: true },
        }
    }

    /// Drops pending work for `key`; a run in flight finishes and is then dropped too.
    pub(super) fn forget(&mut self, key: &K) {
        let Some(entry) = self.entries.get_mut(key) else { return };
        if let Phase::Running { .. } = entry.phase {
            entry.forgotten = true;
            entry.phase = Phase::Running { rerun: false };
            return;
        }
        if let Some(timer) = entry.timer.take() {
            self.timers.remove(&timer);
        }
        // A stale copy may stay in the ready queue; `start_next` skips it.
        self.entries.remove(key);
    }

    /// Takes the next ready key and marks it running.
    pub(super) fn start_next(&mut self) -> Option<Run<K>> {
        while let Some(key) = self.ready.pop_front() {
            let Some(entry) = self.entries.get_mut(&key) else { continue };
            if entry.phase != Phase::Ready {
                continue;
            }
            entry.phase = Phase::Running { rerun: false };
            let attempt = entry.attempt;
            return Some(Run { key, attempt, last_attempt: self.retry.is_last(attempt) });
        }
        None
    }

    /// Records the end of a run and plans the next one.
    pub(super) fn finish(&mut self, key: K, verdict: Verdict) {
        let Some(entry) = self.entries.get_mut(&key) else { return };
        if entry.forgotten {
            self.entries.remove(&key);
            return;
        }
        let rerun = matches!(entry.phase, Phase::Running { rerun: true });
        entry.phase = Phase::Idle;
        let delay = match verdict {
            Verdict::Done { requeue_after } => {
                entry.attempt = 0;
                requeue_after
            }
            Verdict::Failed { retry: true } if !self.retry.is_last(entry.attempt) => {
                entry.attempt += 1;
                Some(self.retry.delay(entry.attempt))
            }
            Verdict::Failed { .. } => None,
        };
        if rerun {
            // An event arrived during the run: it goes first and replaces any timer.
            self.trigger(key);
        } else if let Some(delay) = delay {
            self.set_timer(key, delay);
        }
    }

    /// A timer for `key` expired.
    pub(super) fn timer_fired(&mut self, key: K) {
        let Some(entry) = self.entries.get_mut(&key) else { return };
        entry.timer = None;
        if entry.phase == Phase::Idle {
            entry.phase = Phase::Ready;
            self.ready.push_back(key);
        }
    }

    /// Waits for the next expired timer; `None` at once when no timer is pending.
    pub(super) async fn next_expired(&mut self) -> Option<K> {
        poll_fn(|cx| self.timers.poll_expired(cx)).await.map(|expired| expired.into_inner())
    }

    fn set_timer(&mut self, key: K, delay: Duration) {
        let Some(entry) = self.entries.get_mut(&key) else { return };
        if let Some(old) = entry.timer.take() {
            self.timers.remove(&old);
        }
        entry.timer = Some(self.timers.insert(key, delay));
    }
}
