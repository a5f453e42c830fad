//! Scheduler guarantees, on paused tokio time: every assertion is on exact virtual times.

use std::collections::HashSet;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use tokio::time::{Instant, sleep};
use tokio_util::sync::CancellationToken;

use super::*;
use crate::ratelimit::RateLimit;
use crate::retry::RetryPolicy;

/// One recorded run: key, start time in ms since the test began, attempt, last attempt.
type Record = (&'static str, u64, u32, bool);

#[derive(Default)]
struct Log {
    runs: Vec<Record>,
    in_flight: HashSet<&'static str>,
    overlaps: Vec<&'static str>,
    max_in_flight: usize,
}

fn settings(max_concurrent: usize, retry: RetryPolicy) -> Settings {
    Settings { max_concurrent, retry, ..Settings::default() }
}

/// Starts a scheduler whose action sleeps `work` and then returns `verdict(run, n)`, where `n`
/// counts earlier runs of the same key.
fn start<V>(
    max_concurrent: usize,
    retry: RetryPolicy,
    work: Duration,
    verdict: V,
) -> (Handle<&'static str>, Arc<Mutex<Log>>)
where
    V: Fn(&Run<&'static str>, usize) -> Verdict + Send + Sync + 'static,
{
    start_with(settings(max_concurrent, retry), work, verdict, Arc::new(Mutex::new(Log::default())))
}

/// Like [`start`] with full settings, recording into `log` (which schedulers may share).
fn start_with<V>(
    settings: Settings,
    work: Duration,
    verdict: V,
    log: Arc<Mutex<Log>>,
) -> (Handle<&'static str>, Arc<Mutex<Log>>)
where
    V: Fn(&Run<&'static str>, usize) -> Verdict + Send + Sync + 'static,
{
    let (handle, log, _task) = spawn_with(settings, work, verdict, log);
    (handle, log)
}

/// Like [`start_with`], also returning the scheduler's task.
fn spawn_with<V>(
    settings: Settings,
    work: Duration,
    verdict: V,
    log: Arc<Mutex<Log>>,
) -> (Handle<&'static str>, Arc<Mutex<Log>>, tokio::task::JoinHandle<()>)
where
    V: Fn(&Run<&'static str>, usize) -> Verdict + Send + Sync + 'static,
{
    let (handle, inbox) = channel();
    let verdict = Arc::new(verdict);
    let t0 = Instant::now();
    let shared = log.clone();
    let task = tokio::spawn(run(inbox, settings, move |r: Run<&'static str>| {
        let log = shared.clone();
        let verdict = verdict.clone();
        async move {
            let n = {
                let mut l = log.lock().unwrap();
                let n = l.runs.iter().filter(|rec| rec.0 == r.key).count();
                l.runs.push((r.key, t0.elapsed().as_millis() as u64, r.attempt, r.last_attempt));
                if !l.in_flight.insert(r.key) {
                    l.overlaps.push(r.key);
                }
                l.max_in_flight = l.max_in_flight.max(l.in_flight.len());
                n
            };
            sleep(work).await;
            log.lock().unwrap().in_flight.remove(r.key);
            verdict(&r, n)
        }
    }));
    (handle, log, task)
}

fn done() -> Verdict {
    Verdict::Done { requeue_after: None }
}

fn times(log: &Arc<Mutex<Log>>, key: &str) -> Vec<u64> {
    log.lock().unwrap().runs.iter().filter(|r| r.0 == key).map(|r| r.1).collect()
}

fn runs(log: &Arc<Mutex<Log>>, key: &str) -> Vec<(u64, u32, bool)> {
    log.lock().unwrap().runs.iter().filter(|r| r.0 == key).map(|r| (r.1, r.2, r.3)).collect()
}

fn fail() -> Verdict {
    Verdict::Failed { retry: true }
}

#[tokio::test(start_paused = true)]
async fn never_runs_the_same_key_twice_at_once() {
    let (h, log) = start(4, RetryPolicy::default(), Duration::from_millis(100), |_, _| done());
    for _ in 0..3 {
        h.trigger("a");
        sleep(Duration::from_millis(30)).await;
    }
    sleep(Duration::from_secs(5)).await;
    let l = log.lock().unwrap();
    assert!(l.overlaps.is_empty(), "overlapping runs: {:?}", l.overlaps);
    assert_eq!(l.max_in_flight, 1);
}

#[tokio::test(start_paused = true)]
async fn different_keys_run_concurrently_up_to_the_limit() {
    let (h, log) = start(2, RetryPolicy::default(), Duration::from_millis(100), |_, _| done());
    for key in ["a", "b", "c"] {
        h.trigger(key);
    }
    sleep(Duration::from_secs(1)).await;
    assert_eq!(times(&log, "a"), vec![0]);
    assert_eq!(times(&log, "b"), vec![0]);
    assert_eq!(times(&log, "c"), vec![100]);
    assert_eq!(log.lock().unwrap().max_in_flight, 2);
}

#[tokio::test(start_paused = true)]
async fn events_during_a_run_cause_exactly_one_follow_up() {
    let (h, log) = start(4, RetryPolicy::default(), Duration::from_millis(100), |_, _| done());
    h.trigger("a");
    sleep(Duration::from_millis(10)).await;
    for _ in 0..5 {
        h.trigger("a");
    }
    sleep(Duration::from_secs(5)).await;
    assert_eq!(times(&log, "a"), vec![0, 100]);
}

#[tokio::test(start_paused = true)]
async fn a_trigger_while_queued_does_not_add_a_run() {
    let (h, log) = start(1, RetryPolicy::default(), Duration::from_millis(100), |_, _| done());
    h.trigger("a");
    h.trigger("b");
    h.trigger("b");
    sleep(Duration::from_secs(1)).await;
    assert_eq!(times(&log, "b"), vec![100]);
}

#[tokio::test(start_paused = true)]
async fn a_requeue_runs_after_its_delay() {
    let (h, log) = start(4, RetryPolicy::default(), Duration::from_millis(10), |_, n| Verdict::Done {
        requeue_after: (n == 0).then(|| Duration::from_secs(3)),
    });
    h.trigger("a");
    sleep(Duration::from_secs(10)).await;
    assert_eq!(times(&log, "a"), vec![0, 3010]);
}

#[tokio::test(start_paused = true)]
async fn an_event_before_a_requeue_runs_at_once_and_replaces_it() {
    let (h, log) = start(4, RetryPolicy::default(), Duration::from_millis(10), |_, n| Verdict::Done {
        requeue_after: (n == 0).then(|| Duration::from_secs(3)),
    });
    h.trigger("a");
    sleep(Duration::from_secs(1)).await;
    h.trigger("a");
    sleep(Duration::from_secs(10)).await;
    assert_eq!(times(&log, "a"), vec![0, 1000]);
}

#[tokio::test(start_paused = true)]
async fn a_retryable_failure_is_retried_with_backoff_and_attempt_numbers() {
    let (h, log) =
        start(
            4,
            RetryPolicy::default(),
            Duration::ZERO,
            |_, n| {
                if n < 2 { Verdict::Failed { retry: true } } else { done() }
            },
        );
    h.trigger("a");
    sleep(Duration::from_secs(60)).await;
    let runs = log.lock().unwrap().runs.clone();
    assert_eq!(runs, vec![("a", 0, 0, false), ("a", 2000, 1, false), ("a", 5000, 2, false)]);
}

#[tokio::test(start_paused = true)]
async fn retries_stop_after_the_last_attempt_which_is_flagged() {
    let retry = RetryPolicy { max_attempts: 2, ..RetryPolicy::default() };
    let (h, log) = start(4, retry, Duration::ZERO, |_, _| Verdict::Failed { retry: true });
    h.trigger("a");
    sleep(Duration::from_secs(600)).await;
    let runs = log.lock().unwrap().runs.clone();
    assert_eq!(runs, vec![("a", 0, 0, false), ("a", 2000, 1, false), ("a", 5000, 2, true)]);
}

#[tokio::test(start_paused = true)]
async fn an_asked_delay_replaces_the_backoff_for_its_retry_only() {
    let (h, log) = start(4, RetryPolicy::default(), Duration::ZERO, |_, n| match n {
        0 => Verdict::RetryAfter(Duration::from_millis(500)),
        1 => Verdict::Failed { retry: true },
        _ => done(),
    });
    h.trigger("a");
    sleep(Duration::from_secs(60)).await;
    let runs = log.lock().unwrap().runs.clone();
    // 500 ms as asked, then the backoff of the second retry (3 s): the ask counted an attempt.
    assert_eq!(runs, vec![("a", 0, 0, false), ("a", 500, 1, false), ("a", 3500, 2, false)]);
}

#[tokio::test(start_paused = true)]
async fn an_asked_delay_is_capped_at_the_max_interval_and_ends_at_the_last_attempt() {
    let retry = RetryPolicy { max_attempts: 2, max_interval: Duration::from_secs(10), ..RetryPolicy::default() };
    let (h, log) = start(4, retry, Duration::ZERO, |_, _| Verdict::RetryAfter(Duration::from_secs(3600)));
    h.trigger("a");
    sleep(Duration::from_secs(7200)).await;
    let runs = log.lock().unwrap().runs.clone();
    assert_eq!(runs, vec![("a", 0, 0, false), ("a", 10_000, 1, false), ("a", 20_000, 2, true)]);
}

#[tokio::test(start_paused = true)]
async fn a_permanent_failure_is_not_retried() {
    let (h, log) = start(4, RetryPolicy::default(), Duration::ZERO, |_, _| Verdict::Failed { retry: false });
    h.trigger("a");
    sleep(Duration::from_secs(600)).await;
    assert_eq!(times(&log, "a"), vec![0]);
}

#[tokio::test(start_paused = true)]
async fn success_resets_the_attempt_count() {
    let (h, log) =
        start(
            4,
            RetryPolicy::default(),
            Duration::ZERO,
            |_, n| {
                if n == 0 { Verdict::Failed { retry: true } } else { done() }
            },
        );
    h.trigger("a");
    sleep(Duration::from_secs(10)).await;
    h.trigger("a");
    sleep(Duration::from_secs(10)).await;
    let attempts: Vec<u32> = log.lock().unwrap().runs.iter().map(|r| r.2).collect();
    assert_eq!(attempts, vec![0, 1, 0]);
}

#[tokio::test(start_paused = true)]
async fn forgetting_a_key_cancels_its_pending_requeue() {
    let (h, log) = start(4, RetryPolicy::default(), Duration::ZERO, |_, _| Verdict::Done {
        requeue_after: Some(Duration::from_secs(1)),
    });
    h.trigger("a");
    sleep(Duration::from_millis(500)).await;
    h.forget("a");
    sleep(Duration::from_secs(10)).await;
    assert_eq!(times(&log, "a"), vec![0]);
}

#[tokio::test(start_paused = true)]
async fn a_panicking_run_is_retried_and_does_not_stop_the_scheduler() {
    let (h, log) = start(4, RetryPolicy::default(), Duration::ZERO, |r, n| {
        if r.key == "a" && n == 0 {
            panic!("boom");
        }
        done()
    });
    h.trigger("a");
    h.trigger("b");
    sleep(Duration::from_secs(10)).await;
    assert_eq!(times(&log, "a"), vec![0, 2000]);
    assert_eq!(times(&log, "b"), vec![0]);
}

// ---- Rule 1: retry (GenericRetry) ----

#[tokio::test(start_paused = true)]
async fn retry_follows_generic_retry_defaults_and_flags_the_last_attempt() {
    let (h, log) = start(4, RetryPolicy::default(), Duration::ZERO, |_, _| fail());
    h.trigger("a");
    sleep(Duration::from_secs(600)).await;
    // 2000 ms, then x1.5 each time: 2000, 3000, 4500, 6750, 10125.
    assert_eq!(
        runs(&log, "a"),
        vec![(0, 0, false), (2000, 1, false), (5000, 2, false), (9500, 3, false), (16250, 4, false), (26375, 5, true)]
    );
}

// ---- Rule 3: interplay of retries, reschedules and events ----

#[tokio::test(start_paused = true)]
async fn success_resets_retries_and_earlier_reschedules() {
    let (h, log) = start(4, RetryPolicy::default(), Duration::ZERO, |_, n| match n {
        0 => fail(),
        1 => done(),
        _ => Verdict::Done { requeue_after: Some(Duration::from_secs(1)) },
    });
    h.trigger("a"); // fails at 0: retry pending at 2000
    sleep(Duration::from_millis(500)).await;
    h.trigger("a"); // succeeds at 500: the retry at 2000 is gone
    sleep(Duration::from_secs(10)).await;
    assert_eq!(runs(&log, "a"), vec![(0, 0, false), (500, 1, false)]);
}

#[tokio::test(start_paused = true)]
async fn an_event_during_a_pending_retry_runs_at_once_and_does_not_count_as_an_attempt() {
    let (h, log) = start(4, RetryPolicy::default(), Duration::ZERO, |_, n| if n < 2 { fail() } else { done() });
    h.trigger("a"); // attempt 0 fails at 0; retry (attempt 1) due at 2000
    sleep(Duration::from_millis(1000)).await;
    h.trigger("a"); // runs at 1000 as attempt 1 and fails: not counted, retry re-armed for 3000
    sleep(Duration::from_secs(30)).await;
    assert_eq!(runs(&log, "a"), vec![(0, 0, false), (1000, 1, false), (3000, 1, false)]);
}

#[tokio::test(start_paused = true)]
async fn spurious_events_do_not_inflate_the_backoff() {
    let (h, log) = start(4, RetryPolicy::default(), Duration::ZERO, |_, _| fail());
    h.trigger("a");
    for _ in 0..5 {
        sleep(Duration::from_millis(100)).await;
        h.trigger("a");
    }
    sleep(Duration::from_millis(3000)).await;
    // Every event run reports attempt 1 and re-arms the same 2000 ms delay.
    let attempts: Vec<u32> = runs(&log, "a").iter().map(|r| r.1).collect();
    assert_eq!(attempts, vec![0, 1, 1, 1, 1, 1, 1]);
    assert_eq!(times(&log, "a").last(), Some(&2500));
}

#[tokio::test(start_paused = true)]
async fn after_the_retry_limit_a_new_event_still_reconciles_marked_last_attempt() {
    let retry = RetryPolicy { max_attempts: 1, ..RetryPolicy::default() };
    let (h, log) = start(4, retry, Duration::ZERO, |_, _| fail());
    h.trigger("a");
    sleep(Duration::from_secs(60)).await;
    h.trigger("a");
    sleep(Duration::from_secs(60)).await;
    assert_eq!(runs(&log, "a"), vec![(0, 0, false), (2000, 1, true), (60000, 1, true)]);
}

// ---- Rule 4: reschedule and maximum reconciliation interval ----

fn with_max_interval(max: u64) -> Settings {
    Settings { max_interval: Some(Duration::from_secs(max)), ..Settings::default() }
}

#[tokio::test(start_paused = true)]
async fn max_reconcile_interval_is_armed_after_each_run_not_at_a_fixed_rate() {
    let log = Arc::new(Mutex::new(Log::default()));
    let (h, log) = start_with(with_max_interval(10), Duration::ZERO, |_, _| done(), log);
    h.trigger("a");
    sleep(Duration::from_secs(3)).await;
    h.trigger("a");
    sleep(Duration::from_secs(20)).await;
    assert_eq!(times(&log, "a"), vec![0, 3000, 13000]);
}

#[tokio::test(start_paused = true)]
async fn a_shorter_reschedule_wins_over_the_max_interval() {
    let log = Arc::new(Mutex::new(Log::default()));
    let (h, log) = start_with(
        with_max_interval(10),
        Duration::ZERO,
        |_, n| Verdict::Done { requeue_after: (n == 0).then(|| Duration::from_secs(2)) },
        log,
    );
    h.trigger("a");
    sleep(Duration::from_secs(15)).await;
    assert_eq!(times(&log, "a"), vec![0, 2000, 12000]);
}

#[tokio::test(start_paused = true)]
async fn retries_are_not_affected_by_the_max_interval() {
    let log = Arc::new(Mutex::new(Log::default()));
    let (h, log) = start_with(with_max_interval(1), Duration::ZERO, |_, n| if n == 0 { fail() } else { done() }, log);
    h.trigger("a");
    sleep(Duration::from_millis(2500)).await;
    assert_eq!(times(&log, "a"), vec![0, 2000]);
}

// ---- Rule 5: per-resource rate limit ----

fn rate_limited(max_reconciles: u32, period: u64) -> Settings {
    let rate_limit = Some(RateLimit { max_reconciles, period: Duration::from_secs(period) });
    Settings { rate_limit, ..Settings::default() }
}

#[tokio::test(start_paused = true)]
async fn the_rate_limit_postpones_and_never_cancels() {
    let log = Arc::new(Mutex::new(Log::default()));
    let (h, log) = start_with(rate_limited(2, 3), Duration::from_millis(10), |_, _| done(), log);
    for _ in 0..10 {
        h.trigger("a");
        sleep(Duration::from_millis(100)).await;
    }
    sleep(Duration::from_secs(10)).await;
    // Two runs, then everything that came after is folded into one run when the window allows.
    assert_eq!(times(&log, "a"), vec![0, 100, 3000]);
}

#[tokio::test(start_paused = true)]
async fn the_rate_limit_takes_precedence_over_retry_and_reschedule() {
    let log = Arc::new(Mutex::new(Log::default()));
    let (h, log) = start_with(
        rate_limited(1, 5),
        Duration::ZERO,
        |_, n| match n {
            0 => fail(),
            _ => Verdict::Done { requeue_after: Some(Duration::from_secs(1)) },
        },
        log,
    );
    h.trigger("a");
    sleep(Duration::from_millis(10500)).await;
    // The retry due at 2000 waits for 5000; the reschedule due at 6000 waits for 10000.
    assert_eq!(runs(&log, "a"), vec![(0, 0, false), (5000, 1, false), (10000, 0, false)]);
}

#[tokio::test(start_paused = true)]
async fn a_continued_run_follows_at_once_past_the_rate_limit_with_its_attempt() {
    let log = Arc::new(Mutex::new(Log::default()));
    let (h, log) = start_with(
        rate_limited(1, 5),
        Duration::ZERO,
        |_, n| match n {
            0 => fail(),
            1 => Verdict::Continue,
            _ => done(),
        },
        log,
    );
    h.trigger("a");
    sleep(Duration::from_secs(20)).await;
    // The retry waits for the window (5000); the rest of its work follows at once, as the same
    // attempt, although the window is used up; then nothing more runs.
    assert_eq!(runs(&log, "a"), vec![(0, 0, false), (5000, 1, false), (5000, 1, false)]);
}

#[tokio::test(start_paused = true)]
async fn a_chain_of_continues_passes_through_the_rate_limit_after_the_first() {
    let log = Arc::new(Mutex::new(Log::default()));
    let (h, log) = start_with(
        rate_limited(1, 10),
        Duration::from_millis(10),
        |_, n| if n < 5 { Verdict::Continue } else { done() },
        log,
    );
    h.trigger("a");
    sleep(Duration::from_secs(60)).await;
    // The first continuation follows at once; each later one waits for the window (1 per 10 s).
    assert_eq!(times(&log, "a"), vec![0, 10, 10010, 20010, 30010, 40010]);
}

#[tokio::test(start_paused = true)]
async fn a_continuation_keeps_live_priority_when_a_background_trigger_arrives_during_its_run() {
    let log = Arc::new(Mutex::new(Log::default()));
    let (h, log) = start_with(
        settings(1, RetryPolicy::default()),
        Duration::from_millis(100),
        |r, n| if r.key == "a" && n < 2 { Verdict::Continue } else { done() },
        log,
    );
    h.trigger("a");
    sleep(Duration::from_millis(10)).await;
    for key in ["i1", "i2", "i3", "i4"] {
        h.trigger_with(key, Priority::Background);
    }
    // A resync during the run that returns Continue, and again during the continued run, which
    // returns Continue too: both continuations stay ahead of the background items.
    h.trigger_with("a", Priority::Background);
    sleep(Duration::from_millis(100)).await;
    h.trigger_with("a", Priority::Background);
    sleep(Duration::from_millis(100)).await;
    h.trigger_with("a", Priority::Background);
    sleep(Duration::from_secs(2)).await;
    // The resync during the last run is a follow-up of its own, at background priority.
    assert_eq!(times(&log, "a"), vec![0, 100, 200, 700]);
    assert_eq!(times(&log, "i1"), vec![300]);
}

#[tokio::test(start_paused = true)]
async fn a_background_trigger_does_not_lower_a_continuation_waiting_for_the_rate_limit() {
    let log = Arc::new(Mutex::new(Log::default()));
    let (h, log) = start_with(
        Settings { max_concurrent: 1, ..rate_limited(1, 10) },
        Duration::from_millis(10),
        |r, n| if r.key == "a" && n < 2 { Verdict::Continue } else { done() },
        log,
    );
    h.trigger("a"); // runs at 0 and 10; the second continuation waits for 10010
    sleep(Duration::from_secs(5)).await;
    h.trigger_with("a", Priority::Background);
    sleep(Duration::from_millis(5005)).await;
    h.trigger_with("b1", Priority::Background);
    h.trigger_with("b2", Priority::Background);
    sleep(Duration::from_secs(1)).await;
    // b1 runs 10005-10015; "a", ready at 10010, goes before b2.
    assert_eq!(times(&log, "a"), vec![0, 10, 10015]);
    assert_eq!(times(&log, "b2"), vec![10025]);
}

#[tokio::test(start_paused = true)]
async fn the_rate_limit_of_one_object_does_not_affect_others() {
    let log = Arc::new(Mutex::new(Log::default()));
    let (h, log) = start_with(rate_limited(1, 5), Duration::ZERO, |_, _| done(), log);
    h.trigger("a");
    sleep(Duration::from_millis(100)).await;
    h.trigger("a");
    h.trigger("b");
    sleep(Duration::from_secs(10)).await;
    assert_eq!(times(&log, "a"), vec![0, 5000]);
    assert_eq!(times(&log, "b"), vec![100]);
}

// ---- Rule 7: concurrency and fairness ----

#[tokio::test(start_paused = true)]
async fn the_global_limit_is_shared_first_come_first_served_so_a_busy_plugin_cannot_starve_another() {
    let global = Some(Arc::new(tokio::sync::Semaphore::new(1)));
    let log = Arc::new(Mutex::new(Log::default()));
    let busy = Settings { max_concurrent: 4, global: global.clone(), ..Settings::default() };
    let (a, log) = start_with(busy.clone(), Duration::from_millis(100), |_, _| done(), log);
    let (b, log) = start_with(busy, Duration::from_millis(100), |_, _| done(), log);
    for key in ["a1", "a2", "a3", "a4", "a5", "a6"] {
        a.trigger(key);
    }
    sleep(Duration::from_millis(50)).await;
    b.trigger("b1");
    sleep(Duration::from_secs(2)).await;
    assert_eq!(log.lock().unwrap().max_in_flight, 1, "one global permit");
    // a1 holds the permit; a2 queued first, b1 next: b1 runs third, not seventh.
    assert_eq!(times(&log, "b1"), vec![200]);
    assert_eq!(times(&log, "a6"), vec![600]);
}

#[tokio::test(start_paused = true)]
async fn the_initial_list_does_not_starve_live_changes() {
    let log = Arc::new(Mutex::new(Log::default()));
    let (h, log) = start_with(settings(1, RetryPolicy::default()), Duration::from_millis(100), |_, _| done(), log);
    for key in ["i1", "i2", "i3", "i4", "i5"] {
        h.trigger_with(key, Priority::Background);
    }
    sleep(Duration::from_millis(50)).await;
    h.trigger("live");
    sleep(Duration::from_secs(2)).await;
    assert_eq!(times(&log, "live"), vec![100]);
    assert_eq!(times(&log, "i5"), vec![500]);
}

/// The runs are polled in the scheduler's task and may end without waiting (a settled object:
/// nothing to write): every trigger already queued is still taken before the next run starts,
/// so a live one queued behind many background ones runs first, not among them.
#[tokio::test(start_paused = true)]
async fn triggers_already_queued_are_taken_before_the_next_run_starts() {
    let (handle, inbox) = channel();
    for i in 0..100 {
        handle.trigger_with(format!("listed-{i}"), Priority::Background);
    }
    handle.trigger("changed".to_string());
    let order = Arc::new(Mutex::new(Vec::new()));
    let seen = order.clone();
    let scheduler = tokio::spawn(run(inbox, settings(1, RetryPolicy::default()), move |r: Run<String>| {
        seen.lock().unwrap().push(r.key);
        std::future::ready(done())
    }));
    while order.lock().unwrap().len() < 101 {
        sleep(Duration::from_millis(1)).await;
    }
    drop(handle);
    scheduler.await.unwrap();
    let order = order.lock().unwrap();
    assert_eq!(order.iter().position(|k| k == "changed"), Some(0), "ran as {:?}", &order[..5]);
}

#[tokio::test(start_paused = true)]
async fn background_items_age_so_every_item_runs_under_live_load() {
    let log = Arc::new(Mutex::new(Log::default()));
    let aging = Settings { max_concurrent: 1, aging: Duration::from_millis(500), ..Settings::default() };
    let (h, log) = start_with(aging, Duration::from_millis(100), |_, _| done(), log);
    let live: Vec<&'static str> = (0..20).map(|i| &*format!("l{i}").leak()).collect();
    for key in &live {
        h.trigger(key);
    }
    h.trigger_with("bg", Priority::Background);
    sleep(Duration::from_secs(5)).await;
    // Live keys go first until "bg" has waited 500 ms; then it runs, then live keys again.
    assert_eq!(times(&log, "bg"), vec![500]);
    assert_eq!(times(&log, "l4"), vec![400]);
    assert_eq!(times(&log, "l5"), vec![600]);
}

#[tokio::test(start_paused = true)]
async fn a_live_trigger_promotes_a_queued_background_item() {
    let log = Arc::new(Mutex::new(Log::default()));
    let (h, log) = start_with(settings(1, RetryPolicy::default()), Duration::from_millis(100), |_, _| done(), log);
    h.trigger("busy");
    for key in ["i1", "i2", "i3"] {
        h.trigger_with(key, Priority::Background);
    }
    h.trigger("i3");
    sleep(Duration::from_secs(1)).await;
    assert_eq!(times(&log, "i3"), vec![100]);
    assert_eq!(times(&log, "i1"), vec![200]);
    assert_eq!(times(&log, "i2"), vec![300]);
}

#[tokio::test(start_paused = true)]
async fn an_unreachable_api_server_is_retried_soon_without_using_up_attempts() {
    let reconnect = RetryPolicy {
        initial_interval: Duration::from_millis(250),
        multiplier: 2.0,
        max_interval: Duration::from_secs(1),
        ..RetryPolicy::default()
    };
    let retry = RetryPolicy { max_attempts: 1, ..RetryPolicy::default() };
    let settings = Settings { max_concurrent: 4, retry, reconnect, ..Settings::default() };
    let verdict = |_: &Run<&'static str>, n: usize| match n {
        0..5 => Verdict::Unreachable,
        5 => fail(),
        _ => done(),
    };
    let (h, log) = start_with(settings, Duration::ZERO, verdict, Arc::new(Mutex::new(Log::default())));
    h.trigger("a");
    sleep(Duration::from_secs(60)).await;
    // 250, 500, then 1000 ms apart at most, all still the first attempt; the real failure after
    // them is the first retry, and the last one.
    assert_eq!(
        runs(&log, "a"),
        vec![
            (0, 0, false),
            (250, 0, false),
            (750, 0, false),
            (1750, 0, false),
            (2750, 0, false),
            (3750, 0, false),
            (5750, 1, true)
        ]
    );
}

/// What an [`Observer`] was told, in order.
#[derive(Default)]
struct Seen {
    max: usize,
    adds: u64,
    retries: u64,
    depths: Vec<usize>,
    waits: Vec<Duration>,
    finished: Vec<(Duration, Verdict)>,
}

struct Recorder(Mutex<Seen>);

impl Observer for Recorder {
    fn started(&self, max: usize) {
        self.0.lock().unwrap().max = max;
    }
    fn queue(&self, depth: usize, adds: u64, retries: u64, _active: usize) {
        let mut seen = self.0.lock().unwrap();
        seen.depths.push(depth);
        seen.adds += adds;
        seen.retries += retries;
    }
    fn run_started(&self, waited: Duration) {
        self.0.lock().unwrap().waits.push(waited);
    }
    fn run_finished(&self, took: Duration, verdict: Verdict) {
        self.0.lock().unwrap().finished.push((took, verdict));
    }
}

#[tokio::test(start_paused = true)]
async fn the_observer_sees_adds_waits_work_times_retries_and_verdicts() {
    let recorder = Arc::new(Recorder(Mutex::new(Seen::default())));
    let retry = RetryPolicy { initial_interval: Duration::from_secs(1), ..RetryPolicy::default() };
    let settings = Settings { observer: Some(recorder.clone()), ..settings(1, retry) };
    // "b" fails once, then succeeds; "a" succeeds. One worker: "b" waits for "a".
    let verdict =
        |r: &Run<&'static str>, n: usize| if r.key == "b" && n == 0 { Verdict::Failed { retry: true } } else { done() };
    let (handle, _log) =
        start_with(settings, Duration::from_millis(100), verdict, Arc::new(Mutex::new(Log::default())));
    handle.trigger("a");
    handle.trigger("b");
    sleep(Duration::from_secs(5)).await;
    let seen = recorder.0.lock().unwrap();
    assert_eq!(seen.max, 1);
    assert_eq!((seen.adds, seen.retries), (3, 1), "a, b, and b's retry were queued; one retry");
    assert_eq!(seen.waits, [Duration::ZERO, Duration::from_millis(100), Duration::ZERO]);
    let verdicts: Vec<Verdict> = seen.finished.iter().map(|(_, v)| *v).collect();
    assert_eq!(verdicts, [done(), Verdict::Failed { retry: true }, done()]);
    assert!(seen.finished.iter().all(|(took, _)| *took == Duration::from_millis(100)));
    assert_eq!(seen.depths.last(), Some(&0), "the queue ends empty");
    assert!(seen.depths.contains(&1), "b waited in the queue");
}

// ---- Shutdown: stop taking work, then cancel ----

fn stoppable(max_concurrent: usize) -> (Settings, CancellationToken, CancellationToken) {
    let (stop, cancel) = (CancellationToken::new(), CancellationToken::new());
    let settings =
        Settings { max_concurrent, stop: Some(stop.clone()), cancel: Some(cancel.clone()), ..Settings::default() };
    (settings, stop, cancel)
}

#[tokio::test(start_paused = true)]
async fn after_stop_no_queued_key_timer_or_retry_starts() {
    let (settings, stop, _cancel) = stoppable(1);
    let verdict = |r: &Run<&'static str>, _: usize| match r.key {
        "f" => fail(),
        "t" => Verdict::Done { requeue_after: Some(Duration::from_millis(500)) },
        _ => done(),
    };
    let log = Arc::new(Mutex::new(Log::default()));
    let (h, log, task) = spawn_with(settings, Duration::from_millis(100), verdict, log);
    // One at a time: f fails (retry due at 2100), t asks for a requeue at 700, a runs 200-300,
    // q waits in the queue.
    for key in ["f", "t", "a", "q"] {
        h.trigger(key);
    }
    sleep(Duration::from_millis(250)).await;
    stop.cancel();
    h.trigger("new");
    sleep(Duration::from_secs(10)).await;
    assert!(task.is_finished());
    let started: Vec<&str> = log.lock().unwrap().runs.iter().map(|r| r.0).collect();
    assert_eq!(started, ["f", "t", "a"]);
}

#[tokio::test(start_paused = true)]
async fn after_stop_runs_in_flight_finish_and_then_run_returns() {
    let (settings, stop, _cancel) = stoppable(4);
    let log = Arc::new(Mutex::new(Log::default()));
    let (h, log, task) = spawn_with(settings, Duration::from_millis(300), |_, _| done(), log);
    let t0 = Instant::now();
    h.trigger("a");
    sleep(Duration::from_millis(100)).await;
    h.trigger("b");
    sleep(Duration::from_millis(100)).await;
    stop.cancel();
    // The handle stays alive: the stop alone ends the scheduler, once b (100-400) has finished.
    task.await.unwrap();
    assert_eq!(t0.elapsed(), Duration::from_millis(400));
    assert!(log.lock().unwrap().in_flight.is_empty(), "both runs finished");
    drop(h);
}

/// Sets its flag when dropped: shows that a run's future is gone.
struct DropFlag(Arc<std::sync::atomic::AtomicBool>);

impl Drop for DropFlag {
    fn drop(&mut self) {
        self.0.store(true, std::sync::atomic::Ordering::SeqCst);
    }
}

#[tokio::test(start_paused = true)]
async fn after_cancel_runs_in_flight_are_dropped_before_run_returns() {
    let (settings, stop, cancel) = stoppable(4);
    let (h, inbox) = channel();
    let dropped = Arc::new(std::sync::atomic::AtomicBool::new(false));
    let finished = Arc::new(std::sync::atomic::AtomicBool::new(false));
    let (flag, done_flag) = (dropped.clone(), finished.clone());
    let task = tokio::spawn(run(inbox, settings, move |_: Run<&'static str>| {
        let guard = DropFlag(flag.clone());
        let finished = done_flag.clone();
        async move {
            let _guard = guard;
            sleep(Duration::from_secs(60)).await;
            finished.store(true, std::sync::atomic::Ordering::SeqCst);
            done()
        }
    }));
    let t0 = Instant::now();
    h.trigger("a");
    sleep(Duration::from_millis(100)).await;
    stop.cancel();
    sleep(Duration::from_millis(100)).await;
    assert!(!task.is_finished(), "the run is still in flight after the stop");
    cancel.cancel();
    task.await.unwrap();
    assert_eq!(t0.elapsed(), Duration::from_millis(200));
    assert!(dropped.load(std::sync::atomic::Ordering::SeqCst), "the run's future was dropped");
    assert!(!finished.load(std::sync::atomic::Ordering::SeqCst), "the run never finished");
    drop(h);
}

/// Admits the keys in `run`, defers those in `later` and refuses the rest; `changed` resolves
/// when the test says so.
struct Keys {
    run: Arc<Mutex<HashSet<&'static str>>>,
    later: Arc<Mutex<HashSet<&'static str>>>,
    changes: tokio::sync::watch::Receiver<()>,
    /// Runs in flight, by the tokens they hold.
    in_flight: Arc<()>,
}

impl Admission<&'static str> for Keys {
    fn admit(&self, key: &&'static str) -> Admit {
        if self.run.lock().unwrap().contains(key) {
            Admit::Run(Box::new(self.in_flight.clone()))
        } else if self.later.lock().unwrap().contains(key) {
            Admit::Later
        } else {
            Admit::Never
        }
    }

    async fn changed(&mut self) -> bool {
        self.changes.changed().await.is_ok()
    }
}

#[tokio::test(start_paused = true)]
async fn with_an_admission_refused_keys_are_dropped_and_deferred_ones_run_once_admitted() {
    let (run_set, later) = (Arc::new(Mutex::new(HashSet::new())), Arc::new(Mutex::new(HashSet::from(["mine"]))));
    let (changed, changes) = tokio::sync::watch::channel(());
    let in_flight = Arc::new(());
    let admission = Keys { run: run_set.clone(), later: later.clone(), changes, in_flight: in_flight.clone() };
    let ran = Arc::new(Mutex::new(Vec::new()));
    let (handle, inbox) = channel();
    let record = ran.clone();
    let task = tokio::spawn(run_admitted(inbox, Settings::default(), Some(admission), move |r: Run<&'static str>| {
        record.lock().unwrap().push(r.key);
        async { Verdict::Done { requeue_after: None } }
    }));
    for key in ["mine", "theirs"] {
        handle.trigger(key);
    }
    sleep(Duration::from_millis(10)).await;
    assert!(ran.lock().unwrap().is_empty(), "nothing admitted yet");
    later.lock().unwrap().clear();
    run_set.lock().unwrap().insert("mine");
    changed.send_replace(());
    sleep(Duration::from_millis(10)).await;
    assert_eq!(*ran.lock().unwrap(), ["mine"], "the deferred key runs once admitted; the refused one never");
    // Held by the test and the admission: the finished run gave its token back.
    assert_eq!(Arc::strong_count(&in_flight), 2, "a finished run gave its token back");
    drop(handle);
    task.await.unwrap();
    assert_eq!(Arc::strong_count(&in_flight), 1);
}

/// Runs that end without waiting (a plugin call, nothing to write) do not hold the thread for as
/// long as they keep coming: the scheduler's task returns to the runtime every [`TURN`], so a
/// task woken on its thread (a write's HTTP response, a watch) goes on meanwhile. On one thread,
/// 200 runs of half a millisecond each left no turn to another task before.
#[tokio::test(flavor = "current_thread")]
async fn runs_that_never_wait_let_other_tasks_run_between_them() {
    use std::sync::atomic::{AtomicUsize, Ordering::SeqCst};

    let (handle, inbox) = channel();
    let finished = Arc::new(AtomicUsize::new(0));
    let counted = finished.clone();
    let scheduler = tokio::spawn(run(inbox, settings(1, RetryPolicy::default()), move |_: Run<usize>| {
        let counted = counted.clone();
        async move {
            let began = std::time::Instant::now();
            while began.elapsed() < Duration::from_micros(500) {
                std::hint::spin_loop();
            }
            counted.fetch_add(1, SeqCst);
            done()
        }
    }));
    for key in 0..200 {
        handle.trigger(key);
    }
    let turns = tokio::spawn(async move {
        let mut turns = 0;
        while finished.load(SeqCst) < 200 {
            turns += 1;
            tokio::task::yield_now().await;
        }
        turns
    })
    .await
    .unwrap();
    drop(handle);
    scheduler.await.unwrap();
    // 100 ms of runs: a turn every 10 ms, less what a slow machine takes.
    assert!(turns >= 5, "another task had {turns} turns during 200 runs that never waited");
}

/// Runs that wait (as an API call does) return the task to the runtime on their own: the turn
/// starts over then, and no yield is added, however long the runs take.
#[tokio::test(flavor = "current_thread")]
async fn runs_that_wait_are_not_interrupted_by_yields() {
    let (handle, inbox) = channel();
    super::YIELDS.with(|y| y.set(0));
    let scheduler = tokio::spawn(run(inbox, settings(1, RetryPolicy::default()), |_: Run<usize>| async {
        tokio::time::sleep(Duration::from_millis(12)).await;
        done()
    }));
    for key in 0..10 {
        handle.trigger(key);
    }
    drop(handle);
    scheduler.await.unwrap();
    let yields = super::YIELDS.with(|y| y.get());
    assert_eq!(yields, 0, "the scheduler yielded {yields} times between 10 runs that each waited 12 ms");
}

/// A replica continued after a stop (SIGSTOP) past its lease's deadline: the flag the timer task
/// clears is still up when the scheduler takes its queued keys, and no run may start. Once a
/// renewal opens a new term, the runs start, each under that term's ticket.
#[tokio::test(start_paused = true)]
async fn no_run_starts_past_the_fences_deadline_and_each_runs_under_its_ticket() {
    use crate::fence::tests_support::{fence, lead};
    let (terms, leading, fence) = fence();
    lead(&terms, &leading, Duration::from_secs(10));
    // Stopped and continued 11 s later: the deadline passed, the flag is still up.
    tokio::time::advance(Duration::from_secs(11)).await;
    assert!(*leading.borrow());
    let settings = Settings { gate: fence.gate(), ..settings(4, RetryPolicy::default()) };
    let (handle, inbox) = channel();
    let tickets = Arc::new(Mutex::new(Vec::new()));
    let seen = tickets.clone();
    tokio::spawn(run(inbox, settings, move |_: Run<&'static str>| {
        let seen = seen.clone();
        async move {
            seen.lock().unwrap().push(crate::fence::Ticket::current().map(|t| t.open()));
            done()
        }
    }));
    for key in ["a", "b", "c"] {
        handle.trigger(key);
    }
    sleep(Duration::from_secs(1)).await;
    assert!(tickets.lock().unwrap().is_empty(), "runs started past the deadline: {:?}", tickets.lock().unwrap());
    lead(&terms, &leading, Duration::from_secs(10));
    sleep(Duration::from_millis(10)).await;
    assert_eq!(*tickets.lock().unwrap(), vec![Some(true); 3], "each run has an open ticket");
}
