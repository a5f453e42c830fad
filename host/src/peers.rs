//! Where the other replicas take inbound events, as their Leases advertise it.
//!
//! Each replica writes its events address (`--events-advertise-addr`) into the Lease it holds,
//! in the annotation [`ADDRESS_ANNOTATION`]: a shard member into its membership Lease (the
//! shards' membership), the leader into the election's Lease when it renews (the leader
//! election). The same two loops read the other replicas' Leases and post here what they saw:
//! the shard members with their addresses, and the leader. [`Peers`] is that board, shared by
//! the loops that write it and the events listener that reads it (inbound forwarding). It
//! depends on neither, so both can depend on it.

use std::collections::BTreeMap;
use std::sync::Arc;

use tokio::sync::watch;
use wasmop_core::shard::Assignment;

/// The annotation in which a replica advertises where it takes inbound events (`host:port`).
pub const ADDRESS_ANNOTATION: &str = "wasmop.dev/events-address";

/// The leader of the election, as this replica last saw its Lease.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub enum Leader {
    /// Not known: not seen yet, the Lease free or expired, or this replica could not read it.
    #[default]
    Unknown,
    /// This replica holds the Lease.
    Me,
    /// Another replica holds it, and advertises this address (`None`: none).
    Other {
        /// Its identity.
        identity: String,
        /// Where it takes inbound events.
        address: Option<String>,
    },
}

/// The shard members of this replica's current view, and where each takes inbound events.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Members {
    /// Whether this replica is a member of the view itself: its own Lease renewed in time and
    /// the others' listed. A replica that is not cannot tell who owns what, and forwards
    /// nothing.
    pub member: bool,
    /// Who owns which part of the hash space.
    pub assignment: Assignment,
    /// The members' events addresses, by identity; a member that advertises none is missing.
    pub addresses: BTreeMap<String, String>,
}

impl Default for Members {
    /// No view yet: no members.
    fn default() -> Self {
        Self { member: false, assignment: Assignment::new([]), addresses: BTreeMap::new() }
    }
}

/// The board of the replicas' events addresses; cheap to clone.
#[derive(Debug, Clone)]
pub struct Peers {
    identity: Arc<str>,
    address: Option<Arc<str>>,
    leader: Arc<watch::Sender<Leader>>,
    members: Arc<watch::Sender<Arc<Members>>>,
}

impl Peers {
    /// The board of replica `identity`, which advertises `address` (`None`: it takes no inbound
    /// events).
    pub fn new(identity: &str, address: Option<String>) -> Self {
        Self {
            identity: identity.into(),
            address: address.map(Arc::from),
            leader: Arc::new(watch::channel(Leader::Unknown).0),
            members: Arc::new(watch::channel(Arc::new(Members::default())).0),
        }
    }

    /// This replica's identity in its Leases.
    pub fn identity(&self) -> &str {
        &self.identity
    }

    /// Where this replica takes inbound events, as it advertises it.
    pub fn address(&self) -> Option<&str> {
        self.address.as_deref()
    }

    /// The election's loop saw the Lease held by `holder` (`None`: no one, or expired), which
    /// advertises `address`.
    pub fn saw_leader(&self, holder: Option<&str>, address: Option<&str>) {
        let leader = match holder {
            None | Some("") => Leader::Unknown,
            Some(holder) if holder == &*self.identity => Leader::Me,
            Some(holder) => Leader::Other { identity: holder.to_string(), address: address.map(str::to_string) },
        };
        self.leader.send_if_modified(|current| {
            let changed = *current != leader;
            if changed {
                *current = leader;
            }
            changed
        });
    }

    /// The leader as last seen.
    pub fn leader(&self) -> Leader {
        self.leader.borrow().clone()
    }

    /// The membership decided `members`.
    pub fn saw_members(&self, members: Members) {
        self.members.send_if_modified(|current| {
            let changed = **current != members;
            if changed {
                *current = Arc::new(members);
            }
            changed
        });
    }

    /// The shard members as last decided.
    pub fn members(&self) -> Arc<Members> {
        self.members.borrow().clone()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_leader_is_me_another_or_unknown() {
        let peers = Peers::new("me", Some("10.0.0.1:8443".into()));
        assert_eq!(peers.leader(), Leader::Unknown);
        peers.saw_leader(Some("me"), Some("10.0.0.1:8443"));
        assert_eq!(peers.leader(), Leader::Me);
        peers.saw_leader(Some("other"), Some("10.0.0.2:8443"));
        assert_eq!(peers.leader(), Leader::Other { identity: "other".into(), address: Some("10.0.0.2:8443".into()) });
        peers.saw_leader(Some(""), None);
        assert_eq!(peers.leader(), Leader::Unknown, "a released Lease names no leader");
    }
}
