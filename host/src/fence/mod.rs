//! The fence: whether this replica may start runs and write now, as a leader election or a shard
//! membership decides ([`crate::leader`], [`crate::shards::membership`]).
//!
//! - The election hands out **terms**: writes are allowed until the term's deadline (the last
//!   successful renewal plus the renew deadline). A renewal in time extends the term; a renewal
//!   after a lapse (the deadline passed without one) starts a new term with a new epoch.
//! - A scheduler starts a run only through the [`Gate`], which checks the term's deadline itself
//!   against the clock, not a flag a timer task clears: a process that was stopped (SIGSTOP) and
//!   continued starts nothing before that task ran.
//! - A run carries the [`Ticket`] of the term it was admitted in (a task-local set around the
//!   run, [`Ticket::scope`]). Its writes ([`Fence::write`], [`Fence::hold`]) are refused once
//!   that term ended, even when a later renewal opened another one: a run stuck in a read or a
//!   long plugin call across a lapse never writes after it.
//! - A write in progress waits for its answer while its term lasts, extended by each renewal, and
//!   is abandoned (its future dropped, its connection closed) when the term ends: a healthy
//!   leader finishes a long external call, a replica that lost its lease abandons it.
//! - Outgoing HTTP checks the ticket where bytes leave the process ([`Ticket::open`] in the
//!   socket's write), since `wasi:http` sends run in tasks of their own; so do the clients that
//!   write to the API server for plugins ([`client`]): hyper writes from its connection's task,
//!   after the check in [`Fence::write`].

mod connector;
mod terms;

pub use connector::client;
pub(crate) use terms::Terms;
#[cfg(test)]
pub(crate) use terms::tests_support;
pub use terms::{Fence, Gate, REQUEST_TIMEOUT, Term, Ticket, Unanswered};
