//! How a scheduler runs: its concurrency, retries, rate limit and stopping, and what it tells
//! an observer.

use std::sync::Arc;
use std::time::Duration;

use tokio::sync::Semaphore;
use tokio_util::sync::CancellationToken;

use super::verdict::Verdict;
use crate::ratelimit::RateLimit;
use crate::retry::RetryPolicy;

/// Scheduler settings.
#[derive(Debug, Clone)]
pub struct Settings {
    /// Maximum number of runs of this scheduler in flight at once (at least 1).
    pub max_concurrent: usize,
    /// Permits shared with other schedulers; a run holds one while in flight.
    pub global: Option<Arc<Semaphore>>,
    /// Backoff for failed runs.
    pub retry: RetryPolicy,
    /// Backoff for runs that could not reach the API server; its `max_attempts` is not used,
    /// they are retried until the server answers.
    pub reconnect: RetryPolicy,
    /// Run every key at least this long after its last run; `None` turns it off.
    pub max_interval: Option<Duration>,
    /// Per-key rate limit; `None` turns it off.
    pub rate_limit: Option<RateLimit>,
    /// How long a background trigger waits before it alternates with live ones.
    pub aging: Duration,
    /// Told about the queue and the runs, for metrics.
    pub observer: Option<Arc<dyn Observer>>,
    /// Runs start only while this is open (leader election), each under the ticket of the term
    /// it was admitted in; triggers queue meanwhile.
    pub gate: Option<crate::fence::Gate>,
    /// Stops taking work once cancelled: no run starts any more (queued keys, timers and
    /// retries are dropped, triggers no longer read), runs in flight go on, and [`run`] returns
    /// once they have finished. `None`: [`run`] returns when every [`Handle`] is dropped.
    pub stop: Option<CancellationToken>,
    /// Aborts the runs in flight once cancelled: their futures are dropped, and [`run`] returns
    /// only when none of them is alive any more. Implies [`Settings::stop`]. For the end of a
    /// shutdown's grace period.
    pub cancel: Option<CancellationToken>,
}

impl std::fmt::Debug for dyn Observer {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("Observer")
    }
}

/// Watches a scheduler work: its queue and its runs (what controller-runtime's workqueue and
/// reconcile metrics count).
pub trait Observer: Send + Sync {
    /// The scheduler starts with at most `max` runs in flight.
    fn started(&self, max: usize);
    /// The queue as it stands: `depth` keys ready, `adds` keys queued and `retries` retries
    /// scheduled since the last report, `active` runs in flight.
    fn queue(&self, depth: usize, adds: u64, retries: u64, active: usize);
    /// A run starts after its key waited `waited` in the queue.
    fn run_started(&self, waited: Duration);
    /// A run took `took` and ended with `verdict`.
    fn run_finished(&self, took: Duration, verdict: Verdict);
}

impl Default for Settings {
    /// 16 concurrent runs, no shared permits, default retries, reconnects after 0.2 s growing
    /// to 1 s (+-50%), no maximum interval, no rate limit, background triggers age after 5 s,
    /// no gate, no stop or cancel token.
    fn default() -> Self {
        Self {
            max_concurrent: 16,
            global: None,
            retry: RetryPolicy::default(),
            reconnect: RetryPolicy::reconnect(),
            max_interval: None,
            rate_limit: None,
            aging: Duration::from_secs(5),
            observer: None,
            gate: None,
            stop: None,
            cancel: None,
        }
    }
}
