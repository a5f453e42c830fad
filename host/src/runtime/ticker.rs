//! The epoch ticker: advances an engine's epoch every [`EPOCH_TICK`] while plugin code may run,
//! and sleeps while none does.
//!
//! Epoch interruption is how a call that spins yields to the runtime and traps at its deadline
//! (see `module::limit_running_time`), so the epoch must advance while any call is in
//! progress. An idle host does not need it: after [`IDLE_TICKS`] ticks without a call the
//! ticker's thread waits until the next call starts, instead of waking 100 times a second for
//! ever. A call holds a [`Running`] from before its instance is made until it ends.

use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering::SeqCst};
use std::sync::{Arc, Condvar, Mutex};
use std::time::Duration;

use wasmtime::Engine;

/// How often the epoch advances while calls run; deadlines are rounded up to this granularity.
pub const EPOCH_TICK: Duration = Duration::from_millis(10);

/// Ticks without a call in progress after which the ticker sleeps until the next call (100 ms):
/// a host that reconciles now and then wakes a few times per reconcile, not 100 times a second.
const IDLE_TICKS: u32 = 10;

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
    /// Whether the thread waits (or is about to) for a call to start.
    parked: AtomicBool,
    /// Whether every handle is gone.
    stopped: AtomicBool,
    lock: Mutex<()>,
    wake: Condvar,
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
                let mut idle = 0;
                loop {
                    std::thread::sleep(EPOCH_TICK);
                    let Some(engine) = weak.upgrade() else { return };
                    engine.increment_epoch();
                    drop(engine);
                    idle = if thread.running.load(SeqCst) > 0 { 0 } else { idle + 1 };
                    if idle >= IDLE_TICKS {
                        if !thread.park() {
                            return;
                        }
                        idle = 0;
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
        std::thread::sleep(EPOCH_TICK * (IDLE_TICKS + 5));
        assert!(!ticker.is_parked(), "the ticker ticks while the call runs");
        drop(running);
        assert!(eventually(|| ticker.is_parked()), "the ticker sleeps again after the call");
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
