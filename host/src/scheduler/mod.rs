//! Per-key serialized scheduling of reconciles.
//!
//! [`run`] runs an action for each triggered key concurrently, while making sure never to run
//! equal keys at the same time. It knows nothing of Kubernetes or wasm: keys are any
//! `Hash + Eq + Clone` value and the action is any future returning a [`Verdict`].
//!
//! Guarantees (each has a unit test named after it in `tests.rs`):
//! - at most one run per key at any time;
//! - different keys run concurrently, up to [`Settings::max_concurrent`] per scheduler and the
//!   permits of a [`Settings::global`] semaphore shared by all schedulers; waiting schedulers get
//!   permits first come, first served, so one busy scheduler cannot starve another;
//! - triggers that arrive while a key runs cause exactly one follow-up run after it;
//! - a requeue (reschedule) runs after its delay unless a trigger comes first, which runs at once
//!   and replaces it; after every run the [`Settings::max_interval`] timer is armed anew (a key
//!   with nothing else pending keeps only its deadline, and runs at most a thousandth of the
//!   interval after it);
//! - a retryable failure is retried with the [`RetryPolicy`](crate::retry::RetryPolicy) backoff; the run knows its attempt
//!   number and whether it is the last attempt; success resets retries and earlier reschedules;
//!   a trigger during a pending retry runs at once and does not count as an attempt; after the
//!   last attempt a trigger still runs, still marked last attempt; a failure that asks for its
//!   retry after a delay ([`Verdict::RetryAfter`]) waits that delay instead of the backoff,
//!   capped at the policy's maximum interval, and counts as an attempt;
//! - a run that could not reach the API server ([`Verdict::Unreachable`]) runs again after the
//!   short [`Settings::reconnect`] backoff, indefinitely, and counts no attempt;
//! - with a [`RateLimit`](crate::ratelimit::RateLimit), a key runs at most `max_reconciles` times in any `period`; excess runs
//!   are postponed, never dropped, whatever caused them;
//! - a [`Verdict::Continue`] is followed at once by a run of the rest, with its attempt, past the
//!   rate limit; a continuation's own `Continue` waits for the rate limit like any run, so a
//!   chain of them is limited;
//! - a continuation runs at live priority: a background trigger during the run that returned
//!   `Continue`, during a continued run, or while the continuation waits for the rate limit,
//!   never lowers it;
//! - [`Priority::Background`] triggers (initial lists, resyncs) yield to live ones, but age: one
//!   that waited [`Settings::aging`] alternates with live runs, so every key runs;
//! - with an [`Admission`] (sharding), a key runs only when admitted: a key it refuses for
//!   good is dropped, one it defers waits and runs (as a fresh trigger) once admissions may
//!   have changed; each run holds what the admission gave until it ends;
//! - once [`Settings::stop`] fires no run starts: queued keys, timers and retries are dropped;
//!   runs in flight finish, and then [`run`] returns;
//! - once [`Settings::cancel`] fires the runs in flight are aborted, and [`run`] returns only
//!   after their futures have been dropped;
//! - runs that never wait let other tasks run between them: the task returns to the runtime
//!   every [`TURN`] while it goes on.

mod handle;
mod interval;
mod settings;
mod state;
mod verdict;

use std::future::Future;
use std::hash::Hash;
use std::time::Duration;

use std::panic::AssertUnwindSafe;
use std::pin::Pin;

use futures::FutureExt;
use futures::stream::{FuturesUnordered, StreamExt};
use tokio::sync::{OwnedSemaphorePermit, mpsc};
use tokio_util::sync::CancellationToken;

pub use handle::{Handle, Inbox, Priority, WeakHandle, channel};
pub use settings::{Observer, Settings};
use state::State;
pub use verdict::{Run, Verdict};

/// Whether a key may run now ([`Admission::admit`]).
pub enum Admit {
    /// It may: the token is held while the run is in flight.
    Run(Box<dyn Send>),
    /// Not yet: it runs once admissions change and admit it.
    Later,
    /// Not here: its work is dropped.
    Never,
}

/// What a scheduler asks before it starts a run of a key (a sharded replica: whether it owns
/// the key's object and may run it now).
pub trait Admission<K>: Send {
    /// Whether `key` may run now.
    fn admit(&self, key: &K) -> Admit;
    /// Resolves when admissions may have changed; `false` once they never will.
    fn changed(&mut self) -> impl Future<Output = bool> + Send;
}

/// No admission: every key runs.
pub enum Everyone {}

impl<K> Admission<K> for Everyone {
    fn admit(&self, _: &K) -> Admit {
        match *self {}
    }

    async fn changed(&mut self) -> bool {
        match *self {}
    }
}

/// Runs `action` for the keys sent to `inbox` under the guarantees listed in the module docs,
/// until every [`Handle`] is dropped or [`Settings::stop`] fires, and the runs in flight have
/// finished (or [`Settings::cancel`] fired and their futures are dropped).
///
/// The runs are polled in the task that awaits this function, as kube's `Controller` polls its
/// reconciles: a change is handed to no other task on its way to its run. A run that waits
/// (an API call, or a plugin call yielding at an epoch tick) lets the others go on.
///
/// A run whose future panics counts as a retryable failure.
///
/// Runs that end without waiting (a short plugin call with nothing to write) would keep the
/// task busy for as long as they come; the task returns to the runtime once it has gone on for
/// [`TURN`], so tasks woken on its thread meanwhile go on too.
pub async fn run<K, F, Fut>(inbox: Inbox<K>, settings: Settings, action: F)
where
    K: Clone + Eq + Hash + Send + 'static,
    F: FnMut(Run<K>) -> Fut,
    Fut: Future<Output = Verdict> + Send + 'static,
{
    run_admitted(inbox, settings, None::<Everyone>, action).await;
}

/// [`run`], starting runs only of the keys `admission` admits.
pub async fn run_admitted<K, F, Fut, A>(
    mut inbox: Inbox<K>,
    settings: Settings,
    mut admission: Option<A>,
    mut action: F,
) where
    K: Clone + Eq + Hash + Send + 'static,
    F: FnMut(Run<K>) -> Fut,
    Fut: Future<Output = Verdict> + Send + 'static,
    A: Admission<K>,
{
    let mut admission_live = admission.is_some();
    // Keys admitted later, with their priority.
    let mut waiting: std::collections::HashMap<K, Priority> = std::collections::HashMap::new();
    let max_concurrent = settings.max_concurrent.max(1);
    let global = settings.global.clone();
    let observer = settings.observer.clone();
    let mut gate = settings.gate.clone();
    let mut gate_live = gate.is_some();
    let (stop, cancel) = (settings.stop.clone(), settings.cancel.clone());
    let (mut stopping, mut cancelling) = (false, false);
    if let Some(observer) = &observer {
        observer.started(max_concurrent);
    }
    let mut reported = (0, 0);
    let mut state: State<K> = State::new(settings);
    let mut in_flight: FuturesUnordered<InFlight<K>> = FuturesUnordered::new();
    // The wait for a shared permit survives loop turns, so this scheduler keeps its place in
    // the semaphore's first-come-first-served queue.
    let mut permit_wait: Option<PermitWait> = None;
    let mut permit: Option<OwnedSemaphorePermit> = None;
    let mut inbox_open = true;
    // When this task last returned to the runtime (or a turn began).
    let mut turn = std::time::Instant::now();
    loop {
        if !cancelling && fired(&cancel) {
            cancelling = true;
            in_flight.clear();
        }
        if !stopping && (cancelling || fired(&stop)) {
            stopping = true;
            tracing::debug!(in_flight = in_flight.len(), "stopped taking work");
            state.clear();
            waiting.clear();
            permit = None;
            permit_wait = None;
        }
        // Every trigger already queued is taken before the next run starts, so priorities hold
        // between them: runs are polled in this task and may end without waiting, and taking one
        // trigger per turn served a live change behind the background ones queued before it.
        while inbox_open && !stopping {
            match inbox.rx.try_recv() {
                Ok(command) => state.command(command),
                Err(mpsc::error::TryRecvError::Empty) => break,
                Err(mpsc::error::TryRecvError::Disconnected) => inbox_open = false,
            }
        }
        // The stop token is read again before every start: it may fire on another thread.
        while !stopping && !fired(&stop) && in_flight.len() < max_concurrent && state.has_ready() {
            // The gate is asked before every start: it checks the term's deadline by the clock.
            let ticket = match &gate {
                Some(gate) => match gate.admit() {
                    Some(ticket) => Some(ticket),
                    None => break,
                },
                None => None,
            };
            if let Some(semaphore) = &global
                && permit.is_none()
            {
                match semaphore.clone().try_acquire_owned() {
                    Ok(p) if permit_wait.is_none() => permit = Some(p),
                    _ => {
                        permit_wait.get_or_insert_with(|| Box::pin(semaphore.clone().acquire_owned()));
                        break;
                    }
                }
            }
            let Some((next, waited)) = state.start_next() else { break };
            let key = next.key.clone();
            let guard = match admission.as_ref().map(|a| a.admit(&key)) {
                None => None,
                Some(Admit::Run(token)) => Some(token),
                Some(refused) => {
                    // Not started after all: the key leaves the state.
                    state.forget(&key);
                    state.finish(key.clone(), Verdict::Done { requeue_after: None });
                    if matches!(refused, Admit::Later) {
                        waiting.insert(key, Priority::Live);
                    }
                    continue;
                }
            };
            let held = permit.take();
            let run = action(next);
            let run = async move {
                match ticket {
                    Some(ticket) => ticket.scope(run).await,
                    None => run.await,
                }
            };
            tracing::debug!("run started");
            let watcher = observer.clone();
            if let Some(observer) = &watcher {
                observer.run_started(waited);
            }
            in_flight.push(Box::pin(async move {
                let started = tokio::time::Instant::now();
                let verdict = AssertUnwindSafe(run).catch_unwind().await.unwrap_or(Verdict::Failed { retry: true });
                if let Some(observer) = &watcher {
                    observer.run_finished(started.elapsed(), verdict);
                }
                drop(held);
                drop(guard);
                (key, verdict)
            }));
        }
        if let Some(observer) = &observer {
            let (adds, retries) = state.counts();
            observer.queue(state.depth(), adds - reported.0, retries - reported.1, in_flight.len());
            reported = (adds, retries);
        }
        // A permit with nothing left to start goes back to the other schedulers.
        if !state.has_ready() {
            permit = None;
            permit_wait = None;
        }
        if (stopping || !inbox_open) && in_flight.is_empty() {
            return;
        }
        let waited = Waited::new(std::pin::pin!(async { tokio::select! {
            // Handled at the top of the loop.
            () = cancelled(&stop), if !stopping => {}
            () = cancelled(&cancel), if !cancelling => {}
            command = inbox.rx.recv(), if inbox_open && !stopping => match command {
                Some(command) => state.command(command),
                None => inbox_open = false,
            },
            Some(expired) = state.next_expired(), if !stopping => state.expired(expired),
            changed = async { admission.as_mut().expect("guarded by the branch condition").changed().await }, if admission_live && !stopping => {
                admission_live = changed;
                // Keys admitted later are tried again (and run, wait or are dropped then).
                for (key, priority) in waiting.drain() {
                    state.trigger(key, priority);
                }
            }
            changed = async { gate.as_mut().expect("guarded by the branch condition").changed().await }, if gate_live && !stopping => {
                // A gate whose sender is gone stays as it was last (closed, after a release).
                gate_live = changed.is_ok();
            }
            acquired = async { permit_wait.as_mut().expect("guarded by the branch condition").await }, if permit_wait.is_some() => {
                permit_wait = None;
                permit = acquired.ok();
            }
            Some((key, verdict)) = in_flight.next(), if !in_flight.is_empty() => state.finish(key, verdict),
        }}))
        .await;
        // A wait returned the task to the runtime: the turn starts over.
        if waited {
            turn = std::time::Instant::now();
        } else if turn.elapsed() >= TURN {
            #[cfg(test)]
            YIELDS.with(|y| y.set(y.get() + 1));
            tokio::task::yield_now().await;
            turn = std::time::Instant::now();
        }
    }
}

/// The longest the scheduler's task goes on without returning to the runtime. A plugin call
/// that runs on yields at its epoch ticks (10 ms); most end within microseconds, and many of
/// them in a row would otherwise hold the thread, keeping a task woken on it (another run's
/// HTTP response, a watch) waiting.
pub const TURN: Duration = Duration::from_millis(10);

#[cfg(test)]
thread_local! {
    /// How often a scheduler polled on this thread yielded to the runtime.
    static YIELDS: std::cell::Cell<usize> = const { std::cell::Cell::new(0) };
}

/// Awaits a future and tells whether it waited (was pending at least once) on the way.
struct Waited<F> {
    future: F,
    waited: bool,
}

impl<F> Waited<F> {
    fn new(future: F) -> Self {
        Self { future, waited: false }
    }
}

impl<F: Future<Output = ()> + Unpin> Future for Waited<F> {
    type Output = bool;

    fn poll(mut self: Pin<&mut Self>, cx: &mut std::task::Context<'_>) -> std::task::Poll<bool> {
        match Pin::new(&mut self.future).poll(cx) {
            std::task::Poll::Ready(()) => std::task::Poll::Ready(self.waited),
            std::task::Poll::Pending => {
                self.waited = true;
                std::task::Poll::Pending
            }
        }
    }
}

/// Whether `token` is given and has fired.
fn fired(token: &Option<CancellationToken>) -> bool {
    token.as_ref().is_some_and(CancellationToken::is_cancelled)
}

/// Waits until `token` fires; forever when there is none.
async fn cancelled(token: &Option<CancellationToken>) {
    match token {
        Some(token) => token.cancelled().await,
        None => std::future::pending().await,
    }
}

/// A run in flight: its key and, once it ends, its verdict.
type InFlight<K> = Pin<Box<dyn Future<Output = (K, Verdict)> + Send>>;

/// A pending acquisition of a shared permit.
type PermitWait = Pin<Box<dyn Future<Output = Result<OwnedSemaphorePermit, tokio::sync::AcquireError>> + Send>>;

#[cfg(test)]
mod tests;
