//! When a failed reconcile runs again: exponential backoff (JOSDK `GenericRetry`), or the delay
//! the plugin asked for with its transient error (kopf's `TemporaryError(delay=)`), bounded by
//! the same policy. The host's scheduler and the SDKs' fake hosts both ask [`RetryPolicy::retry_delay`].

use std::time::Duration;

/// How failed reconciles are retried.
///
/// Attempt 0 is the first run; attempt `n` (1-based retries) waits
/// `initial_interval * multiplier^(n-1)`, capped at `max_interval`. After `max_attempts`
/// retries the object is only reconciled again on a new event.
#[derive(Debug, Clone, PartialEq)]
pub struct RetryPolicy {
    /// Retries after the first failure before giving up.
    pub max_attempts: u32,
    /// Delay before the first retry.
    pub initial_interval: Duration,
    /// Factor applied to the delay after each failed retry.
    pub multiplier: f64,
    /// Upper bound on any delay.
    pub max_interval: Duration,
    /// Random spread of each delay as a fraction (0.1 = +-10%); 0 turns jitter off.
    pub jitter: f64,
}

impl Default for RetryPolicy {
    /// JOSDK's defaults: 5 attempts, 2 s initial interval, multiplier 1.5; capped at 5 minutes.
    fn default() -> Self {
        Self {
            max_attempts: 5,
            initial_interval: Duration::from_millis(2000),
            multiplier: 1.5,
            max_interval: Duration::from_secs(300),
            jitter: 0.0,
        }
    }
}

impl RetryPolicy {
    /// How runs that could not reach the API server are retried: after 200 ms, doubling up to
    /// 1 s, each +-50%, without limit. A down API server costs each waiting object about one
    /// run a second; one that returns is seen within about 1.5 s.
    pub fn reconnect() -> Self {
        Self {
            max_attempts: u32::MAX,
            initial_interval: Duration::from_millis(200),
            multiplier: 2.0,
            max_interval: Duration::from_secs(1),
            jitter: 0.5,
        }
    }

    /// The delay before retry number `attempt` (1 for the first retry).
    pub fn delay(&self, attempt: u32) -> Duration {
        let exponent = attempt.saturating_sub(1).min(i32::MAX as u32) as i32;
        let millis = self.initial_interval.as_millis() as f64 * self.multiplier.powi(exponent);
        let capped = millis.min(self.max_interval.as_millis() as f64);
        Duration::from_millis(capped.max(0.0) as u64)
    }

    /// [`RetryPolicy::delay`] spread by the jitter; `unit` is a random number in `[0, 1)`.
    pub fn jittered_delay(&self, attempt: u32, unit: f64) -> Duration {
        let delay = self.delay(attempt);
        let jitter = self.jitter.clamp(0.0, 1.0);
        if jitter == 0.0 {
            return delay;
        }
        delay.mul_f64(1.0 + jitter * (2.0 * unit.clamp(0.0, 1.0) - 1.0))
    }

    /// The delay before retry number `attempt` (1 for the first retry) of a transient error:
    /// the delay the plugin `asked` for, capped at the maximum interval, in place of the
    /// backoff; without one, the backoff spread by the jitter (`unit` is a random number in
    /// `[0, 1)`). Either way the retry counts as an attempt: [`RetryPolicy::is_last`] still
    /// ends the sequence after `max_attempts`.
    pub fn retry_delay(&self, attempt: u32, asked: Option<Duration>, unit: f64) -> Duration {
        match asked {
            Some(asked) => asked.min(self.max_interval),
            None => self.jittered_delay(attempt, unit),
        }
    }

    /// Whether a failure of `attempt` would not be retried.
    pub fn is_last(&self, attempt: u32) -> bool {
        attempt >= self.max_attempts
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn delays_grow_by_the_multiplier_from_the_initial_interval() {
        let p = RetryPolicy::default();
        let delays: Vec<u64> = (1..=4).map(|n| p.delay(n).as_millis() as u64).collect();
        assert_eq!(delays, vec![2000, 3000, 4500, 6750]);
    }

    #[test]
    fn delays_are_capped_at_the_max_interval() {
        let p = RetryPolicy { max_interval: Duration::from_secs(4), ..RetryPolicy::default() };
        assert_eq!(p.delay(3), Duration::from_secs(4));
        assert_eq!(p.delay(40), Duration::from_secs(4));
    }

    #[test]
    fn jitter_spreads_delays_within_its_fraction() {
        let p = RetryPolicy { jitter: 0.1, ..RetryPolicy::default() };
        assert_eq!(p.jittered_delay(1, 0.0), Duration::from_millis(1800));
        assert_eq!(p.jittered_delay(1, 0.5), Duration::from_millis(2000));
        assert!(p.jittered_delay(1, 0.999) < Duration::from_millis(2200));
        assert_eq!(RetryPolicy::default().jittered_delay(1, 0.0), Duration::from_millis(2000));
    }

    #[test]
    fn an_asked_delay_replaces_the_backoff_up_to_the_max_interval() {
        let p = RetryPolicy { jitter: 0.5, max_interval: Duration::from_secs(60), ..RetryPolicy::default() };
        assert_eq!(p.retry_delay(1, Some(Duration::from_secs(30)), 0.0), Duration::from_secs(30));
        assert_eq!(
            p.retry_delay(4, Some(Duration::from_millis(10)), 0.9),
            Duration::from_millis(10),
            "no jitter, no growth"
        );
        assert_eq!(p.retry_delay(1, Some(Duration::from_secs(3600)), 0.0), Duration::from_secs(60), "capped");
        assert_eq!(p.retry_delay(1, None, 0.5), p.delay(1), "without an ask: the backoff");
        assert_eq!(p.retry_delay(2, None, 0.0), p.jittered_delay(2, 0.0));
    }

    #[test]
    fn the_attempt_equal_to_max_attempts_is_the_last() {
        let p = RetryPolicy { max_attempts: 2, ..RetryPolicy::default() };
        assert!(!p.is_last(0));
        assert!(!p.is_last(1));
        assert!(p.is_last(2));
    }
}
