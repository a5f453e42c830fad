//! Per-key serialized scheduling of reconciles.
//!
//! [`run`] runs an action for each triggered key in parallel, while making sure never to run
//! equal keys at the same time. It knows nothing of Kubernetes or wasm: keys are any
//! `Hash + Eq + Clone` value and the action is any future returning a [`Verdict`].
//!
//! Guarantees:
//! - at most one run per key at any time;
//! - different keys run concurrently, up to [`Settings::max_concurrent`];
//! - triggers that arrive while a key runs cause exactly one follow-up run after it;
//! - a requeue (reschedule) runs after its delay unless a trigger comes first, which runs at once
//!   and replaces it;
//! - a retryable failure is retried with the [`RetryPolicy`] backoff; the run knows its attempt
//!   number and whether it is the last attempt; success resets the attempt count.

mod state;

use std::future::Future;
use std::hash::Hash;
use std::time::Duration;

use tokio::sync::mpsc;
use tokio::task::JoinSet;

use crate::retry::RetryPolicy;
use state::State;

/// One run of the action for a key.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Run<K> {
    /// The key to act on.
    pub key: K,
    /// 0 for a first run, `n` for the n-th retry after failures.
    pub attempt: u32,
    /// True when a failure of this run will not be retried.
    pub last_attempt: bool,
}

/// What the action reports back about a run.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Verdict {
    /// The run succeeded; run again after `requeue_after` unless triggered earlier.
    Done {
        /// Delay before the next run, if any.
        requeue_after: Option<Duration>,
    },
    /// The run failed; `retry` says whether a retry with backoff may help.
    Failed {
        /// Whether to retry with backoff.
        retry: bool,
    },
}

/// Scheduler settings.
#[derive(Debug, Clone)]
pub struct Settings {
    /// Maximum number of runs in flight at once (at least 1).
    pub max_concurrent: usize,
    /// Backoff for failed runs.
    pub retry: RetryPolicy,
}

enum Command<K> {
    Trigger(K),
    Forget(K),
}

/// Sends work to a running scheduler. Cheap to clone; the scheduler stops once every handle is
/// dropped and the runs in flight have finished.
#[derive(Debug)]
pub struct Handle<K> {
    tx: mpsc::UnboundedSender<Command<K>>,
}

impl<K> Clone for Handle<K> {
    fn clone(&self) -> Self {
        Self { tx: self.tx.clone() }
    }
}

impl<K> std::fmt::Debug for Command<K> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(match self {
            Command::Trigger(_) => "Trigger",
            Command::Forget(_) => "Forget",
        })
    }
}

impl<K> Handle<K> {
    /// Asks for a run of `key` as soon as possible (an event happened).
    pub fn trigger(&self, key: K) {
        // A closed scheduler is shutting down: nothing left to run the key.
        let _ = self.tx.send(Command::Trigger(key));
    }

    /// Drops everything pending for `key` (the object is gone). A run in flight finishes.
    pub fn forget(&self, key: K) {
        let _ = self.tx.send(Command::Forget(key));
    }
}

/// The receiving end of a [`Handle`], consumed by [`run`].
#[derive(Debug)]
pub struct Inbox<K> {
    rx: mpsc::UnboundedReceiver<Command<K>>,
}

/// Creates a connected [`Handle`] and [`Inbox`].
pub fn channel<K>() -> (Handle<K>, Inbox<K>) {
    let (tx, rx) = mpsc::unbounded_channel();
    (Handle { tx }, Inbox { rx })
}

/// Runs `action` for the keys sent to `inbox` under the guarantees listed in the module docs,
/// until every [`Handle`] is dropped and the runs in flight have finished.
///
/// A run whose future panics counts as a retryable failure.
pub async fn run<K, F, Fut>(mut inbox: Inbox<K>, settings: Settings, mut action: F)
where
    K: Clone + Eq + Hash + Send + 'static,
    F: FnMut(Run<K>) -> Fut,
    Fut: Future<Output = Verdict> + Send + 'static,
{
    let max_concurrent = settings.max_concurrent.max(1);
    let mut state: State<K> = State::new(settings.retry);
    let mut in_flight: JoinSet<Verdict> = JoinSet::new();
    let mut keys_in_flight = std::collections::HashMap::new();
    let mut inbox_open = true;
    loop {
        while in_flight.len() < max_concurrent {
            let Some(next) = state.start_next() else { break };
            let key = next.key.clone();
            let handle = in_flight.spawn(action(next));
            keys_in_flight.insert(handle.id(), key);
        }
        if !inbox_open && in_flight.is_empty() {
            return;
        }
        tokio::select! {
            command = inbox.rx.recv(), if inbox_open => match command {
                Some(Command::Trigger(key)) => state.trigger(key),
                Some(Command::Forget(key)) => state.forget(&key),
                None => inbox_open = false,
            },
            Some(key) = state.next_expired() => state.timer_fired(key),
            Some(joined) = in_flight.join_next_with_id(), if !in_flight.is_empty() => {
                let (id, verdict) = match joined {
                    Ok((id, verdict)) => (id, verdict),
                    Err(err) => (err.id(), Verdict::Failed { retry: true }),
                };
                if let Some(key) = keys_in_flight.remove(&id) {
                    state.finish(key, verdict);
                }
            }
        }
    }
}

#[cfg(test)]
mod tests;
