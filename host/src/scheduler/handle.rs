//! Triggers into a running scheduler: the handles that send them, with their priority, and the
//! inbox its run loop reads.

use tokio::sync::mpsc;

/// How urgent a trigger is.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Priority {
    /// A live change: runs before background work.
    Live,
    /// Initial lists and periodic resyncs: yield to live changes until they age.
    Background,
}

/// What a handle asks of the run loop.
pub(super) enum Command<K> {
    Trigger(K, Priority),
    Forget(K),
}

/// Sends work to a running scheduler. Cheap to clone; the scheduler stops once every handle is
/// dropped and the runs in flight have finished.
#[derive(Debug)]
pub struct Handle<K> {
    tx: mpsc::UnboundedSender<Command<K>>,
}

impl<K> Clone for Handle<K> {
    fn clone(&self) -> Self {
        Self { tx: self.tx.clone() }
    }
}

impl<K> std::fmt::Debug for Command<K> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(match self {
            Command::Trigger(..) => "Trigger",
            Command::Forget(_) => "Forget",
        })
    }
}

/// A handle that does not keep the scheduler running: for the runs themselves, which must not
/// hold their own scheduler open.
pub struct WeakHandle<K> {
    tx: mpsc::WeakUnboundedSender<Command<K>>,
}

impl<K> WeakHandle<K> {
    /// Asks for a run of `key` with the given priority, unless the scheduler has stopped.
    pub fn trigger_with(&self, key: K, priority: Priority) {
        if let Some(tx) = self.tx.upgrade() {
            let _ = tx.send(Command::Trigger(key, priority));
        }
    }
}

impl<K> Handle<K> {
    /// A handle for the scheduler's own runs: it does not keep the scheduler running.
    pub fn downgrade(&self) -> WeakHandle<K> {
        WeakHandle { tx: self.tx.downgrade() }
    }

    /// Asks for a run of `key` as soon as possible (a live event happened).
    pub fn trigger(&self, key: K) {
        self.trigger_with(key, Priority::Live);
    }

    /// Asks for a run of `key` with the given priority.
    pub fn trigger_with(&self, key: K, priority: Priority) {
        // A closed scheduler is shutting down: nothing left to run the key.
        let _ = self.tx.send(Command::Trigger(key, priority));
    }

    /// Drops everything pending for `key` (the object is gone). A run in flight finishes.
    pub fn forget(&self, key: K) {
        let _ = self.tx.send(Command::Forget(key));
    }
}

/// The receiving end of a [`Handle`], consumed by [`run`].
#[derive(Debug)]
pub struct Inbox<K> {
    pub(super) rx: mpsc::UnboundedReceiver<Command<K>>,
}

/// Creates a connected [`Handle`] and [`Inbox`].
pub fn channel<K>() -> (Handle<K>, Inbox<K>) {
    let (tx, rx) = mpsc::unbounded_channel();
    (Handle { tx }, Inbox { rx })
}
