//! The epoch ticker: advances an engine's epoch every [`EPOCH_TICK`] while a call runs on, looks
//! for one every [`CHECK_EVERY`] while calls are short, and sleeps while none comes.
//!
//! Epoch interruption is how a call that spins yields to the runtime and traps at its deadline
//! (see `module::limit_running_time`), so the epoch must advance while a call goes on. Most
//! calls end well within a tick (a Rust reconcile takes tens of microseconds), and waking every
//! tick through a burst of them cost the host 4% of its CPU in `make bench`, the ticker's own
//! wake-ups. So the thread looks every [`CHECK_EVERY`]; when it finds a call in progress it
//! advances the epoch (the call yields) and ticks every [`EPOCH_TICK`] until it finds none. A
//! call that spins yields at most [`CHECK_EVERY`] after it started, then every tick. After
//! [`IDLE_CHECKS`] looks without a call begun, the thread waits until the next call starts, so
//! an idle host does not wake at all. A call holds a [`Running`] from before its instance is
//! made until it ends.

use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering::Relaxed, Ordering::SeqCst};
use std::sync::{Arc, Condvar, Mutex};
use std::time::Duration;

use wasmtime::Engine;

/// How often the epoch advances while a call runs on; deadlines are counted in these.
pub const EPOCH_TICK: Duration = Duration::from_millis(10);

/// How often the ticker looks for a call in progress while the last look found none: the
/// longest a call runs before its first yield.
pub const CHECK_EVERY: Duration = Duration::from_millis(50);

/// Looks without a call begun after which the ticker sleeps until the next call (1 s).
const IDLE_CHECKS: u32 = 20;

/// The ticker of one engine; its thread ends when the engine is dropped or every handle is.
#[derive(Debug)]
pub(crate) struct Ticker {
    shared: Arc<Shared>,
}

/// What the ticker's thread and the calls share.
#[derive(Debug, Default)]
struct Shared {
    /// Calls in progress.
    running: AtomicUsize,
    /// Whether a call began since the thread last looked.
    begun: AtomicBool,
    /// Whether the thread waits (or is about to) for a call to start.
    parked: AtomicBool,
    /// Whether every handle is gone.
    stopped: AtomicBool,
    lock: Mutex<()>,
    wake: Condvar,
    /// Turns of the thread's loop (for tests).
    #[cfg(test)]
    turns: AtomicUsize,
}

/// One call in progress: while any exists the epoch advances.
#[derive(Debug)]
#[must_use = "the epoch advances only while the call holds it"]
pub(crate) struct Running(Arc<Shared>);

impl Ticker {
    /// Starts the ticker of `engine` on a thread of its own that holds only a weak reference
    /// to the engine.
    pub(crate) fn start(engine: &Engine) -> Arc<Self> {
        let shared = Arc::new(Shared::default());
        let weak = engine.weak();
        let thread = shared.clone();
        std::thread::Builder::new()
            .name("wasmop-epoch".into())
            .spawn(move || {
                // Whether the last look found a call in progress: then the next comes a tick later.
                let mut ticking = false;
                let mut idle = 0;
                loop {
                    std::thread::sleep(if ticking { EPOCH_TICK } else { CHECK_EVERY });
                    #[cfg(test)]
                    thread.turns.fetch_add(1, SeqCst);
                    let Some(engine) = weak.upgrade() else { return };
                    ticking = thread.running.load(SeqCst) > 0;
                    if ticking {
                        engine.increment_epoch();
                    }
                    drop(engine);
                    idle = if ticking || thread.begun.swap(false, Relaxed) { 0 } else { idle + 1 };
                    if idle >= IDLE_CHECKS {
                        if !thread.park() {
                            return;
                        }
                        // Woken by a call: it is looked at a tick from now.
                        (ticking, idle) = (true, 0);
                    }
                }
            })
            .expect("spawning the epoch ticker thread");
        Arc::new(Self { shared })
    }

    /// Marks a call in progress until the returned guard is dropped, waking the ticker if it
    /// sleeps.
    pub(crate) fn running(&self) -> Running {
        let shared = &self.shared;
        // Counted before `parked` is read, and `parked` is set before `running` is read by the
        // thread (both sequentially consistent): either this call sees the thread parked and
        // wakes it, or the thread sees this call and does not wait.
        shared.begun.store(true, Relaxed);
        if shared.running.fetch_add(1, SeqCst) == 0 && shared.parked.load(SeqCst) {
            let _lock = shared.lock.lock().expect("never poisoned");
            shared.wake.notify_one();
        }
        Running(shared.clone())
    }

    /// Whether the thread sleeps for want of a call (for tests).
    #[cfg(test)]
    pub(crate) fn is_parked(&self) -> bool {
        self.shared.parked.load(SeqCst)
    }
}

impl Shared {
    /// Waits until a call is in progress: `false` if every handle went first.
    fn park(&self) -> bool {
        let mut lock = self.lock.lock().expect("never poisoned");
        self.parked.store(true, SeqCst);
        while self.running.load(SeqCst) == 0 && !self.stopped.load(SeqCst) {
            lock = self.wake.wait(lock).expect("never poisoned");
        }
        self.parked.store(false, SeqCst);
        !self.stopped.load(SeqCst)
    }
}

impl Drop for Ticker {
    fn drop(&mut self) {
        let _lock = self.shared.lock.lock().expect("never poisoned");
        self.shared.stopped.store(true, SeqCst);
        self.shared.wake.notify_one();
    }
}

impl Drop for Running {
    fn drop(&mut self) {
        self.0.running.fetch_sub(1, SeqCst);
    }
}

#[cfg(test)]
mod tests {
    use std::time::Instant;

    use super::*;

    /// Waits (up to 5 s) until `condition` holds.
    fn eventually(condition: impl Fn() -> bool) -> bool {
        let started = Instant::now();
        while started.elapsed() < Duration::from_secs(5) {
            if condition() {
                return true;
            }
            std::thread::sleep(Duration::from_millis(5));
        }
        false
    }

    /// The ticker sleeps without calls, wakes when one starts and sleeps again after it.
    #[test]
    fn the_ticker_sleeps_while_no_call_runs() {
        let engine = Engine::new(wasmtime::Config::new().epoch_interruption(true)).unwrap();
        let ticker = Ticker::start(&engine);
        assert!(eventually(|| ticker.is_parked()), "the ticker sleeps without calls");
        let running = ticker.running();
        assert!(eventually(|| !ticker.is_parked()), "a call wakes the ticker");
        std::thread::sleep(CHECK_EVERY * (IDLE_CHECKS + 5));
        assert!(!ticker.is_parked(), "the ticker ticks while the call runs");
        drop(running);
        assert!(eventually(|| ticker.is_parked()), "the ticker sleeps again after the call");
    }

    /// A burst of short calls (a reconcile of a Rust plugin takes tens of microseconds) does not
    /// wake the ticker every tick: it looks every [`CHECK_EVERY`] while it finds no call in
    /// progress. Ticking every 10 ms through `make bench`'s bursts cost the host 4% of its CPU.
    #[test]
    fn short_calls_wake_the_ticker_only_at_its_checks() {
        let engine = Engine::new(wasmtime::Config::new().epoch_interruption(true)).unwrap();
        let ticker = Ticker::start(&engine);
        let (before, started) = (ticker.shared.turns.load(SeqCst), Instant::now());
        while started.elapsed() < Duration::from_millis(600) {
            let running = ticker.running();
            let call = Instant::now();
            while call.elapsed() < Duration::from_micros(50) {
                std::hint::spin_loop();
            }
            drop(running);
            std::thread::sleep(Duration::from_millis(1));
        }
        let turns = ticker.shared.turns.load(SeqCst) - before;
        let checks = (started.elapsed().as_millis() / CHECK_EVERY.as_millis()) as usize;
        // Ticking every tick gives 5 turns a check (58 for 12 before); a loaded machine may see
        // a call in progress at some looks, each adding a tick.
        assert!(turns <= 2 * checks, "{turns} turns for {checks} checks");
    }

    /// A call that runs on is seen at the next check, and from then on the epoch advances every
    /// tick until it ends.
    #[test]
    fn a_call_that_runs_on_is_ticked_every_tick() {
        let engine = Engine::new(wasmtime::Config::new().epoch_interruption(true)).unwrap();
        let ticker = Ticker::start(&engine);
        let running = ticker.running();
        std::thread::sleep(CHECK_EVERY + EPOCH_TICK);
        let (before, started) = (ticker.shared.turns.load(SeqCst), Instant::now());
        std::thread::sleep(EPOCH_TICK * 30);
        let turns = ticker.shared.turns.load(SeqCst) - before;
        let ticks = (started.elapsed().as_millis() / EPOCH_TICK.as_millis()) as usize;
        drop(running);
        // Looking only every check would give a fifth of the ticks; a loaded machine's sleeps
        // run long, so half is asked.
        assert!(2 * turns >= ticks, "{turns} turns in {ticks} ticks' time");
    }

    /// Dropping every handle ends the thread, also while it sleeps.
    #[test]
    fn the_thread_ends_with_its_handles() {
        let engine = Engine::new(wasmtime::Config::new().epoch_interruption(true)).unwrap();
        let ticker = Ticker::start(&engine);
        assert!(eventually(|| ticker.is_parked()));
        let shared = Arc::downgrade(&ticker.shared);
        drop(ticker);
        assert!(eventually(|| shared.strong_count() == 0), "the thread let go of its state");
    }
}
