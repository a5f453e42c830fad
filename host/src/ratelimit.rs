//! Per-object rate limiting (JOSDK's per-resource rate limiter): at most `max_reconciles` runs
//! of one object in any window of `period`. A sliding log of start times, so the bound holds for
//! every window, not just aligned ones.

use std::collections::VecDeque;
use std::time::Duration;

use tokio::time::Instant;

/// At most `max_reconciles` runs of one object within any `period`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct RateLimit {
    /// Runs allowed per window (at least 1).
    pub max_reconciles: u32,
    /// The window length.
    pub period: Duration,
}

/// The recent run starts of one object.
#[derive(Debug, Default, Clone)]
pub struct Window {
    starts: VecDeque<Instant>,
}

impl Window {
    /// When the next run may start: `None` if it may start at `now`.
    pub fn next_allowed(&mut self, limit: &RateLimit, now: Instant) -> Option<Instant> {
        self.expire(limit, now);
        if self.starts.len() < limit.max_reconciles.max(1) as usize {
            return None;
        }
        self.starts.front().map(|oldest| *oldest + limit.period)
    }

    /// Records a run starting at `now`.
    pub fn record(&mut self, limit: &RateLimit, now: Instant) {
        self.expire(limit, now);
        self.starts.push_back(now);
    }

    fn expire(&mut self, limit: &RateLimit, now: Instant) {
        while self.starts.front().is_some_and(|start| *start + limit.period <= now) {
            self.starts.pop_front();
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test(start_paused = true)]
    async fn the_window_slides_with_each_run() {
        let limit = RateLimit { max_reconciles: 2, period: Duration::from_secs(3) };
        let t0 = Instant::now();
        let mut w = Window::default();
        assert_eq!(w.next_allowed(&limit, t0), None);
        w.record(&limit, t0);
        w.record(&limit, t0 + Duration::from_secs(1));
        assert_eq!(w.next_allowed(&limit, t0 + Duration::from_secs(2)), Some(t0 + Duration::from_secs(3)));
        assert_eq!(w.next_allowed(&limit, t0 + Duration::from_secs(3)), None);
        w.record(&limit, t0 + Duration::from_secs(3));
        assert_eq!(w.next_allowed(&limit, t0 + Duration::from_secs(3)), Some(t0 + Duration::from_secs(4)));
    }
}
