//! The scheduler's bookkeeping: a pure state machine advanced by the run loop.

use std::collections::VecDeque;
use std::future::poll_fn;
use std::hash::Hash;
use std::sync::Arc;
use std::task::Poll;
use std::time::Duration;

use tokio::time::Instant;
use tokio_util::time::{DelayQueue, delay_queue};
use wasmop_core::table::KeyMap;

use super::handle::{Command, Priority};
use super::interval::Intervals;
use super::settings::Settings;
use super::verdict::{Run, Verdict};
use crate::ratelimit::Window;

/// Why a run happens; decides how a failure counts.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Cause {
    /// A change of the object (or any trigger from outside).
    Event,
    /// A retry after a failure.
    Retry,
    /// A reschedule from the outcome or the maximum reconciliation interval.
    Timer,
}

/// Where a key is in its life cycle.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Phase {
    /// Nothing to do now; a timer may be pending.
    Idle,
    /// Waiting in a ready queue for a free slot.
    Ready(Priority),
    /// A run is in flight; `rerun` records a trigger that arrived meanwhile.
    Running { rerun: Option<Priority> },
}

/// What a pending timer will do when it fires.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
struct Pending {
    cause: Cause,
    priority: Priority,
}

#[derive(Debug)]
struct Entry {
    phase: Phase,
    /// Why the queued or running run happens.
    cause: Cause,
    /// Failed attempts counted since the last success.
    failures: u32,
    /// Runs in a row that could not reach the API server.
    unreachable: u32,
    timer: Option<(delay_queue::Key, Pending)>,
    window: Window,
    /// The key was forgotten while running: drop it when the run finishes.
    forgotten: bool,
    /// The queued, pending or running run is a continuation ([`Verdict::Continue`]): it keeps
    /// live priority, and its own `Continue` waits for the rate limit.
    continued: bool,
    /// When the key became ready to run, while it is.
    ready_since: Option<Instant>,
}

impl Entry {
    fn new() -> Self {
        Self {
            phase: Phase::Idle,
            cause: Cause::Event,
            failures: 0,
            unreachable: 0,
            timer: None,
            window: Window::default(),
            forgotten: false,
            continued: false,
            ready_since: None,
        }
    }
}

/// What expired: a key's timer, or settled keys' maximum interval.
pub(super) enum Expired<K> {
    /// The timer of a key with an entry.
    Timer(Arc<K>),
    /// Settled keys, which have no entry.
    Interval(Vec<K>),
}

/// Per-key phases, the two ready queues and the timers.
///
/// A key with an entry is stored once: the entry's table, the ready queues and the timers
/// share it (`Arc`), so a key queued at start-up costs its queue a pointer, not a copy of its
/// names (an `ObjectKey` is two strings).
pub(super) struct State<K> {
    /// Keys with work queued, running or pending (a retry, a reschedule, a rate limit), or
    /// whose state must outlive a run (failures, a rate limit's window).
    entries: KeyMap<Arc<K>, Entry>,
    /// Settled keys: no entry, only their maximum interval's deadline.
    intervals: Option<Intervals<K>>,
    live: VecDeque<Arc<K>>,
    background: VecDeque<(Arc<K>, Instant)>,
    /// The last run taken was an aged background item: prefer live next.
    served_aged: bool,
    timers: DelayQueue<Arc<K>>,
    settings: Settings,
    /// Keys ready to run now (the work queue's depth).
    ready: usize,
    /// Keys made ready so far (the work queue's adds).
    adds: u64,
    /// Retries scheduled so far.
    retries: u64,
}

impl<K: Clone + Eq + Hash> State<K> {
    pub(super) fn new(settings: Settings) -> Self {
        Self {
            entries: KeyMap::new(),
            intervals: settings.max_interval.map(Intervals::new),
            live: VecDeque::new(),
            background: VecDeque::new(),
            served_aged: false,
            timers: DelayQueue::new(),
            settings,
            ready: 0,
            adds: 0,
            retries: 0,
        }
    }

    /// Takes a command from a [`super::Handle`].
    pub(super) fn command(&mut self, command: Command<K>) {
        match command {
            Command::Trigger(key, priority) => self.trigger(key, priority),
            Command::Forget(key) => self.forget(&key),
        }
    }

    /// Keys ready to run now.
    pub(super) fn depth(&self) -> usize {
        self.ready
    }

    /// Keys made ready so far, and retries scheduled so far.
    pub(super) fn counts(&self) -> (u64, u64) {
        (self.adds, self.retries)
    }

    /// An event for `key`: run it now (subject to the rate limit), or once more after the run
    /// in flight. A trigger replaces any pending retry or reschedule.
    pub(super) fn trigger(&mut self, key: K, priority: Priority) {
        if let Some(intervals) = &mut self.intervals {
            intervals.remove(&key);
        }
        let key = self.entry_for(key);
        let entry = self.entries.get_mut(&key).expect("just made");
        entry.forgotten = false;
        match entry.phase {
            // A continuation waiting for the rate limit stays live, whatever joins it.
            Phase::Idle if entry.continued => self.make_ready(key, Cause::Event, Priority::Live),
            Phase::Idle => self.make_ready(key, Cause::Event, priority),
            Phase::Ready(Priority::Background) if priority == Priority::Live => {
                entry.phase = Phase::Ready(Priority::Live);
                entry.cause = Cause::Event;
                self.live.push_back(key);
            }
            Phase::Ready(_) => entry.cause = Cause::Event,
            Phase::Running { rerun } => {
                let promoted = match rerun {
                    Some(Priority::Live) => Priority::Live,
                    _ => priority,
                };
                entry.phase = Phase::Running { rerun: Some(promoted) };
            }
        }
    }

    /// The shared key of `key`'s entry, made (empty) if it has none.
    fn entry_for(&mut self, key: K) -> Arc<K> {
        if let Some((shared, _)) = self.entries.get_key_value(&key) {
            return shared.clone();
        }
        let shared = Arc::new(key);
        self.entries.insert(shared.clone(), Entry::new());
        shared
    }

    /// Drops every key's pending work: queued keys, timers and retries (the scheduler stops).
    /// Runs in flight find no state when they finish.
    pub(super) fn clear(&mut self) {
        self.entries.clear();
        if let Some(intervals) = &mut self.intervals {
            intervals.clear();
        }
        self.live.clear();
        self.background.clear();
        self.timers.clear();
        self.ready = 0;
    }

    /// Drops pending work for `key`; a run in flight finishes and is then dropped too.
    pub(super) fn forget(&mut self, key: &K) {
        if let Some(intervals) = &mut self.intervals {
            intervals.remove(key);
        }
        let Some(entry) = self.entries.get_mut(key) else { return };
        if let Phase::Running { .. } = entry.phase {
            entry.forgotten = true;
            entry.phase = Phase::Running { rerun: None };
            return;
        }
        if let Some((timer, _)) = entry.timer.take() {
            self.timers.remove(&timer);
        }
        if let Phase::Ready(_) = entry.phase {
            self.ready -= 1;
        }
        // Stale copies may stay in the ready queues; `start_next` skips them.
        self.entries.swap_remove(key);
        self.shrink();
    }

    /// Whether a run could start now.
    pub(super) fn has_ready(&self) -> bool {
        !self.live.is_empty() || !self.background.is_empty()
    }

    /// Takes the next ready key and marks it running.
    ///
    /// Live triggers go first; a background item (initial list, resync) that has waited longer
    /// than [`Settings::aging`] is taken next, alternating with live ones, so neither starves.
    /// Returns the run and how long its key waited in the queue.
    pub(super) fn start_next(&mut self) -> Option<(Run<K>, Duration)> {
        let now = Instant::now();
        loop {
            let aged =
                self.background.front().is_some_and(|(_, since)| now.duration_since(*since) >= self.settings.aging);
            let take_background = self.live.is_empty() || (aged && !self.served_aged);
            let (key, priority) = if take_background {
                let (key, _) = self.background.pop_front()?;
                self.served_aged = aged;
                (key, Priority::Background)
            } else {
                self.served_aged = false;
                (self.live.pop_front()?, Priority::Live)
            };
            let Some(entry) = self.entries.get_mut(&*key) else { continue };
            if entry.phase != Phase::Ready(priority) {
                continue;
            }
            entry.phase = Phase::Running { rerun: None };
            self.ready -= 1;
            if let Some(limit) = &self.settings.rate_limit {
                entry.window.record(limit, now);
            }
            let waited = entry.ready_since.take().map_or(Duration::ZERO, |since| now.duration_since(since));
            let attempt = entry.failures;
            let key = K::clone(&key);
            return Some((Run { key, attempt, last_attempt: self.settings.retry.is_last(attempt) }, waited));
        }
    }

    /// Records the end of a run and plans the next one.
    pub(super) fn finish(&mut self, key: K, verdict: Verdict) {
        let Some(entry) = self.entries.get_mut(&key) else { return };
        if entry.forgotten {
            self.entries.swap_remove(&key);
            self.shrink();
            return;
        }
        let Phase::Running { rerun } = entry.phase else { return };
        entry.phase = Phase::Idle;
        let continued = std::mem::take(&mut entry.continued);
        let retry = &self.settings.retry;
        entry.unreachable = if verdict == Verdict::Unreachable { entry.unreachable.saturating_add(1) } else { 0 };
        let next = match verdict {
            Verdict::Done { requeue_after } => {
                entry.failures = 0;
                match (requeue_after, self.settings.max_interval) {
                    (Some(requeue), Some(max)) if max < requeue => Some((max, Cause::Timer, Priority::Background)),
                    (Some(requeue), _) => Some((requeue, Cause::Timer, Priority::Live)),
                    (None, Some(max)) => Some((max, Cause::Timer, Priority::Background)),
                    (None, None) => None,
                }
            }
            Verdict::Failed { retry: true } | Verdict::RetryAfter(_) if !retry.is_last(entry.failures) => {
                // An event run during a retry sequence does not count as an attempt, so spurious
                // events cannot inflate the backoff.
                if entry.cause == Cause::Retry || entry.failures == 0 {
                    entry.failures += 1;
                }
                let asked = if let Verdict::RetryAfter(asked) = verdict { Some(asked) } else { None };
                let delay = retry.retry_delay(entry.failures, asked, fastrand::f64());
                self.retries += 1;
                Some((delay, Cause::Retry, Priority::Live))
            }
            // Not the plugin's failure: the same run, with the same cause, runs again soon.
            Verdict::Unreachable => {
                let delay = self.settings.reconnect.jittered_delay(entry.unreachable, fastrand::f64());
                Some((delay, entry.cause, Priority::Live))
            }
            // No retry follows: only a new event or the maximum interval runs it again.
            Verdict::Failed { .. } | Verdict::RetryAfter(_) => {
                self.settings.max_interval.map(|max| (max, Cause::Timer, Priority::Background))
            }
            Verdict::Continue => None,
        };
        if verdict == Verdict::Continue {
            // The rest of the work, at live priority whatever arrived meanwhile; an event
            // during the run is its cause from here on. Only the first continuation passes the
            // rate limit (which counted the run before it): a chain of them is limited.
            let cause = if rerun.is_some() { Cause::Event } else { entry.cause };
            entry.continued = true;
            let shared = self.shared(&key);
            if continued {
                self.make_ready(shared, cause, Priority::Live);
            } else {
                self.enqueue(shared, cause, Priority::Live);
            }
        } else if let Some(priority) = rerun {
            // An event arrived during the run: it goes first and replaces any timer.
            self.make_ready(self.shared(&key), Cause::Event, priority);
        } else if self.settled(&key, verdict) {
            // Only the maximum interval is left to wait for: the key keeps its deadline alone.
            self.entries.swap_remove(&key);
            self.shrink();
            if let (Some(intervals), Some((delay, _, _))) = (&mut self.intervals, next) {
                intervals.insert(key, Instant::now() + delay);
            }
        } else if let Some((delay, cause, priority)) = next {
            self.set_timer(self.shared(&key), delay, Pending { cause, priority });
        }
    }

    /// The shared copy of `key`, which has an entry; looked up only where a queue or a timer
    /// takes it, so a run that settles hashes its key once.
    fn shared(&self, key: &K) -> Arc<K> {
        self.entries.get_key_value(key).expect("the key has an entry").0.clone()
    }

    /// Whether `key`, which just finished with `verdict` and has no run to follow at once, has
    /// nothing left but its maximum interval: a success without a reschedule shorter than it,
    /// no state a later run needs (a rate limit's window).
    fn settled(&self, key: &K, verdict: Verdict) -> bool {
        let Verdict::Done { requeue_after } = verdict else { return false };
        let max = self.settings.max_interval;
        let rescheduled = requeue_after.is_some_and(|requeue| max.is_none_or(|max| requeue <= max));
        !rescheduled
            && self.settings.rate_limit.is_none()
            && self.entries.get(key).is_some_and(|entry| entry.timer.is_none() && !entry.continued)
    }

    /// Handles what expired.
    pub(super) fn expired(&mut self, expired: Expired<K>) {
        match expired {
            Expired::Timer(key) => self.timer_fired(key),
            Expired::Interval(keys) => {
                for key in keys {
                    let key = self.entry_for(key);
                    self.make_ready(key, Cause::Timer, Priority::Background);
                }
            }
        }
    }

    /// A timer for `key` expired.
    fn timer_fired(&mut self, key: Arc<K>) {
        let Some(entry) = self.entries.get_mut(&*key) else { return };
        let Some((_, pending)) = entry.timer.take() else { return };
        if entry.phase == Phase::Idle {
            self.make_ready(key, pending.cause, pending.priority);
        }
    }

    /// Waits for the next expired timer or maximum interval; `None` at once when none is pending.
    pub(super) async fn next_expired(&mut self) -> Option<Expired<K>> {
        poll_fn(|cx| {
            if let Poll::Ready(Some(expired)) = self.timers.poll_expired(cx) {
                return Poll::Ready(Some(Expired::Timer(expired.into_inner())));
            }
            match &mut self.intervals {
                Some(intervals) if intervals.len() > 0 => {
                    intervals.poll_due(cx).map(|keys| Some(Expired::Interval(keys)))
                }
                _ if self.timers.is_empty() => Poll::Ready(None),
                _ => Poll::Pending,
            }
        })
        .await
    }

    /// How many keys have an entry, and how many only a maximum interval's deadline.
    #[cfg(test)]
    pub(super) fn sizes(&self) -> (usize, usize) {
        (self.entries.len(), self.intervals.as_ref().map_or(0, Intervals::len))
    }

    /// Gives back the room of tables and queues that a burst grew and that are now mostly
    /// empty: a table keeps its largest size otherwise, so a controller that once queued every
    /// object at start-up would hold room for all of them for ever (at 33,000 objects, 14 MiB
    /// of a settled host's 76). Halving when a quarter is used keeps the cost of shrinking in
    /// proportion to the inserts that grew it.
    fn shrink(&mut self) {
        /// Below this many elements' room, a table or queue is left as it is.
        const SMALL: usize = 64;
        let sparse = |len: usize, capacity: usize| capacity > SMALL && len * 4 < capacity;
        if sparse(self.entries.len(), self.entries.capacity()) {
            self.entries.shrink_to(self.entries.len() * 2);
        }
        if sparse(self.live.len(), self.live.capacity()) {
            self.live.shrink_to(self.live.len() * 2);
        }
        if sparse(self.background.len(), self.background.capacity()) {
            self.background.shrink_to(self.background.len() * 2);
        }
    }

    /// Queues an idle key, or postpones it while its rate limit is used up.
    fn make_ready(&mut self, key: Arc<K>, cause: Cause, priority: Priority) {
        let Some(entry) = self.entries.get_mut(&*key) else { return };
        let now = Instant::now();
        if let Some(limit) = &self.settings.rate_limit
            && let Some(at) = entry.window.next_allowed(limit, now)
        {
            self.set_timer(key, at - now, Pending { cause, priority });
            return;
        }
        self.enqueue(key, cause, priority);
    }

    /// Queues an idle key now.
    fn enqueue(&mut self, key: Arc<K>, cause: Cause, priority: Priority) {
        let Some(entry) = self.entries.get_mut(&*key) else { return };
        if let Some((timer, _)) = entry.timer.take() {
            self.timers.remove(&timer);
        }
        let now = Instant::now();
        entry.cause = cause;
        entry.phase = Phase::Ready(priority);
        entry.ready_since = Some(now);
        self.ready += 1;
        self.adds += 1;
        match priority {
            Priority::Live => self.live.push_back(key),
            Priority::Background => self.background.push_back((key, now)),
        }
    }

    fn set_timer(&mut self, key: Arc<K>, delay: Duration, pending: Pending) {
        let Some(entry) = self.entries.get_mut(&*key) else { return };
        if let Some((old, _)) = entry.timer.take() {
            self.timers.remove(&old);
        }
        entry.timer = Some((self.timers.insert(key, delay), pending));
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn with_max_interval() -> State<&'static str> {
        State::new(Settings { max_interval: Some(Duration::from_secs(10)), ..Settings::default() })
    }

    fn run(state: &mut State<&'static str>, key: &'static str, verdict: Verdict) {
        state.trigger(key, Priority::Live);
        let (run, _) = state.start_next().expect("ready");
        state.finish(run.key, verdict);
    }

    #[tokio::test(start_paused = true)]
    async fn a_settled_key_keeps_only_its_deadline_and_work_brings_its_entry_back() {
        let mut state = with_max_interval();
        run(&mut state, "a", Verdict::Done { requeue_after: None });
        assert_eq!(state.sizes(), (0, 1), "no entry, one deadline");
        state.trigger("a", Priority::Live);
        assert_eq!(state.sizes(), (1, 0), "a trigger replaces the deadline");
        let (next, _) = state.start_next().unwrap();
        state.finish(next.key, Verdict::Done { requeue_after: Some(Duration::from_secs(2)) });
        assert_eq!(state.sizes(), (1, 0), "a reschedule keeps its entry and timer");
        state.forget(&"a");
        assert_eq!(state.sizes(), (0, 0));
        run(&mut state, "b", Verdict::Failed { retry: false });
        assert_eq!(state.sizes(), (1, 0), "a failure keeps its entry: the next run is its last attempt");
    }

    /// The bytes the per-key tables and the ready queues have room for.
    fn room(state: &State<String>) -> usize {
        state.entries.capacity() * std::mem::size_of::<(Arc<String>, Entry)>()
            + state.live.capacity() * std::mem::size_of::<Arc<String>>()
            + state.background.capacity() * std::mem::size_of::<(Arc<String>, Instant)>()
    }

    #[tokio::test(start_paused = true)]
    async fn tables_shrink_once_a_burst_has_settled() {
        let mut state: State<String> =
            State::new(Settings { max_interval: Some(Duration::from_secs(10)), ..Settings::default() });
        let keys: Vec<String> = (0..10_000).map(|i| format!("key-{i}")).collect();
        for (i, key) in keys.iter().enumerate() {
            let priority = if i % 2 == 0 { Priority::Live } else { Priority::Background };
            state.trigger(key.clone(), priority);
        }
        let burst = room(&state);
        while let Some((run, _)) = state.start_next() {
            state.finish(run.key, Verdict::Done { requeue_after: None });
        }
        assert_eq!(state.sizes(), (0, 10_000), "every key settled with its deadline");
        // What a settled controller holds between bursts: not room for the whole burst again.
        assert!(room(&state) * 16 < burst, "{} bytes of room after the burst, {burst} during it", room(&state));
    }

    /// Copies of [`Counted`] keys alive.
    static COUNTED: std::sync::atomic::AtomicIsize = std::sync::atomic::AtomicIsize::new(0);

    /// A key that counts its live copies in [`COUNTED`].
    #[derive(PartialEq, Eq, Hash)]
    struct Counted(u32);

    impl Counted {
        fn new(id: u32) -> Self {
            COUNTED.fetch_add(1, std::sync::atomic::Ordering::SeqCst);
            Self(id)
        }
    }

    impl Clone for Counted {
        fn clone(&self) -> Self {
            Self::new(self.0)
        }
    }

    impl Drop for Counted {
        fn drop(&mut self) {
            COUNTED.fetch_sub(1, std::sync::atomic::Ordering::SeqCst);
        }
    }

    #[tokio::test(start_paused = true)]
    async fn a_queued_key_is_stored_once_and_a_retried_one_too() {
        let alive = || COUNTED.load(std::sync::atomic::Ordering::SeqCst);
        let mut state: State<Counted> = State::new(Settings::default());
        for id in 0..1_000 {
            let priority = if id % 2 == 0 { Priority::Live } else { Priority::Background };
            state.trigger(Counted::new(id), priority);
            // Triggered again while queued: no second copy either.
            state.trigger(Counted::new(id), Priority::Live);
        }
        assert_eq!(alive(), 1_000, "one copy per queued key (the table and the ready queues share it)");
        let (run, _) = state.start_next().expect("ready");
        state.finish(run.key, Verdict::Failed { retry: true });
        assert_eq!(alive(), 1_000, "a key waiting for its retry keeps one copy, shared with its timer");
        state.clear();
        assert_eq!(alive(), 0);
    }

    #[tokio::test(start_paused = true)]
    async fn without_a_maximum_interval_a_settled_key_leaves_nothing() {
        let mut state = State::new(Settings::default());
        run(&mut state, "a", Verdict::Done { requeue_after: None });
        assert_eq!(state.sizes(), (0, 0));
        assert!(state.next_expired().await.is_none());
    }

    #[tokio::test(start_paused = true)]
    async fn a_settled_key_runs_again_in_the_background_at_its_deadline() {
        let mut state = with_max_interval();
        run(&mut state, "a", Verdict::Done { requeue_after: None });
        let start = Instant::now();
        let expired = state.next_expired().await.expect("a deadline is pending");
        assert_eq!(start.elapsed(), Duration::from_secs(10));
        state.expired(expired);
        let (run, _) = state.start_next().expect("ready again");
        assert_eq!(run.key, "a");
        assert_eq!(state.background.len() + state.live.len(), 0);
    }
}
