//! Event sources: where the reasons to reconcile a primary come from (JOSDK's event sources,
//! controller-runtime's sources).
//!
//! A source is a task that puts primary keys into a [`Sink`], the controller's scheduler. The
//! controller runs the primary watch itself, a [`secondary`] source per declared watch and,
//! when asked for, a [`timer`]; the host's events endpoint feeds it through an [`inbound`]
//! inlet; the primary's and the watches' events pass their [`filter`] (the plugin's filters and
//! predicates) first. Any other internal source (the poller of external state) only needs a
//! `Sink`: the scheduler serializes, rate-limits and retries whatever they enqueue.

pub mod filter;
pub mod inbound;
pub mod secondary;
pub mod timer;

use crate::object::ObjectKey;
use crate::scheduler::{Handle, Priority, WeakHandle};

/// Where sources enqueue primaries to reconcile.
pub trait Sink: Send + Sync {
    /// Asks for a reconcile of the primary `key`.
    fn enqueue(&self, key: ObjectKey, priority: Priority);
}

impl Sink for Handle<ObjectKey> {
    fn enqueue(&self, key: ObjectKey, priority: Priority) {
        self.trigger_with(key, priority);
    }
}

impl Sink for WeakHandle<ObjectKey> {
    fn enqueue(&self, key: ObjectKey, priority: Priority) {
        self.trigger_with(key, priority);
    }
}

#[cfg(test)]
pub(crate) mod testing {
    use std::sync::Mutex;

    use super::*;

    /// A sink that records what it is given.
    #[derive(Default)]
    pub(crate) struct Recorder(pub(crate) Mutex<Vec<(ObjectKey, Priority)>>);

    impl Recorder {
        /// Takes what was enqueued so far.
        pub(crate) fn take(&self) -> Vec<(ObjectKey, Priority)> {
            std::mem::take(&mut self.0.lock().unwrap())
        }
    }

    impl Sink for Recorder {
        fn enqueue(&self, key: ObjectKey, priority: Priority) {
            self.0.lock().unwrap().push((key, priority));
        }
    }
}
