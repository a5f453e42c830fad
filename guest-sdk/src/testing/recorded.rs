//! The record a fake host was loaded from ([`FakeHost::from_record`](super::FakeHost::from_record)).

use std::time::SystemTime;

use wasmop_core::record::format::ReconcileRequest;
use wasmop_core::record::{Ending, Request};

/// What a [`FakeHost`](super::FakeHost) loaded from a record keeps of it: the reconcile's request, and the
/// exports the host called, with how each ended.
#[derive(Clone, Debug)]
pub(super) struct Recorded {
    pub(super) request: ReconcileRequest,
    pub(super) steps: Vec<(Request, Ending)>,
    /// The wall clock's readings during the reconcile, in order.
    pub(super) wall_clock: Vec<SystemTime>,
}
