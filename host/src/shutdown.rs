//! How the host stops on SIGTERM (or Ctrl-C), in the order controller-runtime's manager keeps:
//! 1. [`Shutdown::stop`]: no reconcile starts any more, in any plugin; queued objects, requeues
//!    and retries are dropped (the next leader, or the next start, lists them again);
//! 2. the reconciles in flight finish within `--shutdown-timeout`; then [`Shutdown::cancel`]
//!    drops those still running, with their requests;
//! 3. only then is the lease released (`wasmop run`, `cli/run.rs`), and releasing closes the
//!    fence, which abandons any write still waiting ([`crate::fence::Fence::write`]): no write
//!    of this replica can happen once a standby may lead.
//!
//! A controller stopped on its own (a hot reload, a plugin removed) is not affected: it finishes
//! its queue as before.

use tokio_util::sync::CancellationToken;

/// The process's shutdown, shared by every controller; cheap to clone.
#[derive(Debug, Clone, Default)]
pub struct Shutdown {
    stop: CancellationToken,
    cancel: CancellationToken,
}

impl Shutdown {
    /// Stops starting reconciles.
    pub fn stop(&self) {
        self.stop.cancel();
    }

    /// Drops the reconciles still running (and stops starting new ones).
    pub fn cancel(&self) {
        self.stop.cancel();
        self.cancel.cancel();
    }

    /// Resolves once [`Shutdown::stop`] was called.
    pub async fn stopped(&self) {
        self.stop.cancelled().await;
    }

    /// The tokens a scheduler stops and cancels with (`scheduler::Settings::stop` and
    /// `cancel`).
    pub(crate) fn tokens(&self) -> (CancellationToken, CancellationToken) {
        (self.stop.clone(), self.cancel.clone())
    }
}
