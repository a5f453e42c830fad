//! Sharding the primaries across replicas (`wasmop run --shards`).
//!
//! Every replica holds a Lease of its own ([`membership`]); the live members split the hash space
//! of the shard key ([`wasmop_core::shard`]). This module is the replica's side of it that the
//! rest of the host reads ([`share`]): [`Shards`] says which objects this replica owns (its watches ask the
//! API server for those only, or filter them as they arrive) and which it may run now, and it
//! counts the runs in flight, so the membership acknowledges a new view only once the runs of
//! objects it lost have finished.

pub mod membership;
mod share;

pub use membership::{MembershipSettings, join};
pub use share::{Joined, Publisher, RunGuard, Shards, Share, Verdict};
