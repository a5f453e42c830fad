//! One run of the action for a key, and what the action reports back about it.

use std::time::Duration;

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
    /// The run failed with a transient error whose retry the plugin asked for after this delay:
    /// it replaces the backoff for that retry, capped at the retry policy's maximum interval,
    /// and counts as an attempt like any retry ([`RetryPolicy::retry_delay`](crate::retry::RetryPolicy::retry_delay)).
    RetryAfter(Duration),
    /// The run could not reach the API server (a transport error, or the server is
    /// unavailable): run again soon with the [`Settings::reconnect`](super::Settings::reconnect) backoff, counting no attempt.
    Unreachable,
    /// The run did a first step of the work (the host added its finalizer); the rest follows in
    /// a run of its own, queued at live priority with the same cause and attempt. It follows at
    /// once, not held back by the rate limit, which counted this run; unless this run was itself
    /// such a continuation: then it waits for the rate limit, so a chain of `Continue`s is
    /// limited like any other runs.
    Continue,
}
