//! Scheduler guarantees, on paused tokio time: every assertion is on exact virtual times.

use std::collections::HashSet;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use tokio::time::{Instant, sleep};

use super::*;

/// One recorded run: key, start time in ms since the test began, attempt, last attempt.
type Record = (&'static str, u64, u32, bool);

#[derive(Default)]
struct Log {
    runs: Vec<Record>,
    in_flight: HashSet<&'static str>,
    overlaps: Vec<&'static str>,
    max_in_flight: usize,
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
    let (handle, inbox) = channel();
    let log = Arc::new(Mutex::new(Log::default()));
    let verdict = Arc::new(verdict);
    let t0 = Instant::now();
    let shared = log.clone();
    tokio::spawn(run(inbox, Settings { max_concurrent, retry }, move |r: Run<&'static str>| {
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
    (handle, log)
}

fn done() -> Verdict {
    Verdict::Done { requeue_after: None }
}

fn times(log: &Arc<Mutex<Log>>, key: &str) -> Vec<u64> {
    log.lock().unwrap().runs.iter().filter(|r| r.0 == key).map(|r| r.1).collect()
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
