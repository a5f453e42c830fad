//! Recording a reconcile and replaying it (issue 29, part 1): the pure part. The host records
//! and writes; this says what a record is and which records are kept.
//!
//! A sandboxed plugin is a function of what the host hands it: the request of each export and
//! the answers to its import calls (cache reads, clocks, random values, granted HTTP). A record
//! holds exactly that, so a replay needs no cluster: with the same module it is bit-exact, and
//! with another version it shows what the new version would do differently.
//!
//! | module | rule |
//! |---|---|
//! | [`format`] | the record: plugin, request, every import call with its answer, ending |
//! | [`select`] | the `record` setting: which reconciles are recorded (failed, selected, sampled) |
//! | [`redact`] | no Secret data in a record unless the setting keeps it |
//! | [`budget`] | the size cap of a record (largest answers dropped first) and the directory's budget (oldest deleted first) |
//! | [`replay`] | the tape a replay answers the guest from, and the first divergent import call |
//! | [`diff`] | a readable diff of the recorded ending and a replay's |
//!
//! The order the host follows for a reconcile: [`select::Selection::plan`] before it runs; its
//! calls kept while it runs when the plan says so; [`select::Plan::reason`] once it ended; then
//! [`redact::redact`] unless the setting keeps Secrets, [`budget::Budget::admit`], and the
//! writes and deletes that answer says, its counts added to the metrics.

pub mod budget;
pub mod diff;
pub mod format;
pub mod redact;
pub mod replay;
pub mod select;

pub use format::{Answer, Call, Ending, Import, Reason, Record, Request, Step};

#[cfg(test)]
pub(crate) mod sample;
