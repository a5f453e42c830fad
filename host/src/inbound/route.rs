//! Which replica takes which primaries of an inbound event: the decisions, kept pure (no I/O) so
//! that they are tested alone. [`super::forward`] carries them out.
//!
//! - A sharded plugin: [`split`] parts the primaries `map-inbound` named by their owner in this
//!   replica's view ([`Assignment::owner`](wasmop_core::shard::Assignment::owner) of the hash of
//!   each one's shard key): this replica's are delivered here, each other owner's are forwarded
//!   to its advertised address.
//! - A plugin the leader runs: [`to_leader`] says whether it runs here or at the leader's
//!   address.
//! - A forwarded request: [`take_forwarded`] checks that the primaries it asks for are among those
//!   the payload maps to here, and that this replica owns every one of them.

use std::collections::BTreeMap;

use crate::object::ObjectKey;
use crate::peers::{Leader, Members};

/// Why an event cannot be placed where it would run.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum Unroutable {
    /// This replica is not a live shard member now: it cannot tell who owns what.
    #[error("this replica is not a live shard member now (joining, or its membership lease lapsed)")]
    NotMember,
    /// An owner advertises no events address.
    #[error("shard member {identity} owns some of the primaries but advertises no events address")]
    NoAddress {
        /// The owner.
        identity: String,
    },
    /// No leader is known now.
    #[error("this replica does not lead, and no live leader is known now")]
    NoLeader,
    /// The leader advertises no events address.
    #[error("this replica does not lead, and the leader {identity} advertises no events address")]
    LeaderWithoutAddress {
        /// The leader.
        identity: String,
    },
    /// A forwarded request reached a replica that does not lead (any more): it is not
    /// forwarded again.
    #[error("this replica does not lead; a forwarded event is not forwarded again")]
    NotLeading,
    /// A forwarded request asks for primaries this replica does not own (any more).
    #[error("this replica does not own {}", names(.0))]
    NotOwned(Vec<ObjectKey>),
    /// A forwarded request asks for primaries the payload does not map to.
    #[error("the payload does not map to {}", names(.0))]
    NotMapped(Vec<ObjectKey>),
}

/// `ns/name, …` of `keys`.
pub fn names(keys: &[ObjectKey]) -> String {
    let name = |k: &ObjectKey| match &k.namespace {
        Some(ns) => format!("{ns}/{}", k.name),
        None => k.name.clone(),
    };
    keys.iter().map(name).collect::<Vec<_>>().join(", ")
}

/// The primaries another owner takes.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Part {
    /// The owner's identity.
    pub identity: String,
    /// Its events address.
    pub address: String,
    /// The primaries it owns.
    pub primaries: Vec<ObjectKey>,
}

/// Where an event's primaries go.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct Plan {
    /// Delivered here.
    pub here: Vec<ObjectKey>,
    /// Forwarded, one part per other owner.
    pub there: Vec<Part>,
}

/// Parts `placed` (each primary with the hash of its shard key; `None` when it does not exist,
/// which no one owns: delivered here, where the scheduler drops it as any replica would) among
/// the members of replica `me`'s view.
pub fn split(placed: Vec<(ObjectKey, Option<u64>)>, me: &str, members: &Members) -> Result<Plan, Unroutable> {
    if !members.member {
        return Err(Unroutable::NotMember);
    }
    let mut plan = Plan::default();
    let mut there: BTreeMap<&str, Vec<ObjectKey>> = BTreeMap::new();
    for (key, hash) in placed {
        match hash.map(|hash| members.assignment.owner(hash)) {
            None => plan.here.push(key),
            Some(None) => return Err(Unroutable::NotMember),
            Some(Some(owner)) if owner == me => plan.here.push(key),
            Some(Some(owner)) => there.entry(owner).or_default().push(key),
        }
    }
    for (identity, primaries) in there {
        let address =
            members.addresses.get(identity).ok_or_else(|| Unroutable::NoAddress { identity: identity.to_string() })?;
        plan.there.push(Part { identity: identity.to_string(), address: address.clone(), primaries });
    }
    Ok(plan)
}

/// Where a plugin the leader runs takes an event.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum LeaderRoute {
    /// Here: this replica leads, or there is no election.
    Here,
    /// At the leader's address, the whole request.
    To {
        /// The leader's identity.
        identity: String,
        /// Its events address.
        address: String,
    },
}

/// Where an event for a plugin the leader runs goes: `leading` is whether this replica's gate is
/// open (`None`: no election), `forwarded` whether the request was forwarded already, `leader`
/// the leader as last seen. A replica that lapsed but still sees itself in the Lease delivers
/// nothing and forwards nothing.
pub fn to_leader(leading: Option<bool>, forwarded: bool, leader: &Leader) -> Result<LeaderRoute, Unroutable> {
    match (leading, leader) {
        (None | Some(true), _) => Ok(LeaderRoute::Here),
        (Some(false), _) if forwarded => Err(Unroutable::NotLeading),
        (Some(false), Leader::Other { identity, address: Some(address) }) => {
            Ok(LeaderRoute::To { identity: identity.clone(), address: address.clone() })
        }
        (Some(false), Leader::Other { identity, address: None }) => {
            Err(Unroutable::LeaderWithoutAddress { identity: identity.clone() })
        }
        (Some(false), Leader::Me | Leader::Unknown) => Err(Unroutable::NoLeader),
    }
}

/// Checks a forwarded request's `asked` primaries against those the payload maps to here
/// (`mapped`) and those this replica owns (`owns`): every one must be both. A forwarded request
/// narrows what the payload maps to; it never widens it, nor makes a replica run what it does
/// not own.
pub fn take_forwarded(
    asked: &[ObjectKey],
    mapped: &[ObjectKey],
    owns: impl Fn(&ObjectKey) -> bool,
) -> Result<(), Unroutable> {
    let unmapped: Vec<ObjectKey> = asked.iter().filter(|k| !mapped.contains(k)).cloned().collect();
    if !unmapped.is_empty() {
        return Err(Unroutable::NotMapped(unmapped));
    }
    let unowned: Vec<ObjectKey> = asked.iter().filter(|k| !owns(k)).cloned().collect();
    if !unowned.is_empty() {
        return Err(Unroutable::NotOwned(unowned));
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use wasmop_core::shard::Assignment;

    use super::*;

    fn key(name: &str) -> ObjectKey {
        ObjectKey { namespace: Some("ns".into()), name: name.into() }
    }

    fn members(names: &[&str], member: bool) -> Members {
        let addresses = names.iter().map(|n| (n.to_string(), format!("{n}.test:8443"))).collect();
        Members { member, assignment: Assignment::new(names.iter().copied()), addresses }
    }

    /// A hash `owner` owns in `members`.
    fn owned_by(members: &Members, owner: &str, nth: usize) -> u64 {
        (0..u64::MAX).step_by(1 << 48).filter(|h| members.assignment.owner(*h) == Some(owner)).nth(nth).unwrap()
    }

    #[test]
    fn primaries_are_parted_by_owner_mine_delivered_here_and_the_gone_too() {
        let view = members(&["a", "b", "c"], true);
        let placed = vec![
            (key("mine"), Some(owned_by(&view, "a", 0))),
            (key("b1"), Some(owned_by(&view, "b", 0))),
            (key("c1"), Some(owned_by(&view, "c", 0))),
            (key("b2"), Some(owned_by(&view, "b", 1))),
            (key("gone"), None),
        ];
        let plan = split(placed, "a", &view).unwrap();
        assert_eq!(plan.here, [key("mine"), key("gone")]);
        assert_eq!(
            plan.there,
            [
                Part { identity: "b".into(), address: "b.test:8443".into(), primaries: vec![key("b1"), key("b2")] },
                Part { identity: "c".into(), address: "c.test:8443".into(), primaries: vec![key("c1")] },
            ]
        );
        // Everything of its own: nothing forwarded.
        let mine = split(vec![(key("mine"), Some(owned_by(&view, "a", 3)))], "a", &view).unwrap();
        assert!(mine.there.is_empty());
    }

    #[test]
    fn a_replica_outside_the_view_or_an_owner_without_an_address_forwards_nothing() {
        let lapsed = members(&["b", "c"], false);
        let placed = vec![(key("x"), Some(owned_by(&lapsed, "b", 0)))];
        assert_eq!(split(placed.clone(), "a", &lapsed), Err(Unroutable::NotMember));
        let mut silent = members(&["a", "b"], true);
        silent.addresses.remove("b");
        let placed = vec![(key("x"), Some(owned_by(&silent, "b", 0)))];
        assert_eq!(split(placed, "a", &silent), Err(Unroutable::NoAddress { identity: "b".into() }));
        assert_eq!(split(vec![(key("x"), Some(1))], "a", &Members::default()), Err(Unroutable::NotMember));
    }

    #[test]
    fn a_standby_forwards_to_the_leader_once_and_a_lapsed_leader_nowhere() {
        let other = Leader::Other { identity: "l".into(), address: Some("l.test:8443".into()) };
        let to = LeaderRoute::To { identity: "l".into(), address: "l.test:8443".into() };
        assert_eq!(to_leader(None, false, &Leader::Unknown), Ok(LeaderRoute::Here), "no election");
        assert_eq!(to_leader(Some(true), false, &Leader::Me), Ok(LeaderRoute::Here));
        assert_eq!(to_leader(Some(true), true, &other), Ok(LeaderRoute::Here), "a forwarded event at the leader");
        assert_eq!(to_leader(Some(false), false, &other), Ok(to));
        assert_eq!(to_leader(Some(false), true, &other), Err(Unroutable::NotLeading), "never forwarded twice");
        assert_eq!(to_leader(Some(false), false, &Leader::Me), Err(Unroutable::NoLeader), "lapsed");
        assert_eq!(to_leader(Some(false), false, &Leader::Unknown), Err(Unroutable::NoLeader));
        let silent = Leader::Other { identity: "l".into(), address: None };
        assert_eq!(
            to_leader(Some(false), false, &silent),
            Err(Unroutable::LeaderWithoutAddress { identity: "l".into() })
        );
    }

    #[test]
    fn a_forwarded_request_takes_only_what_the_payload_maps_to_and_this_replica_owns() {
        let mapped = [key("a"), key("b")];
        assert_eq!(take_forwarded(&[key("a")], &mapped, |_| true), Ok(()));
        assert_eq!(
            take_forwarded(&[key("a"), key("z")], &mapped, |_| true),
            Err(Unroutable::NotMapped(vec![key("z")]))
        );
        assert_eq!(
            take_forwarded(&[key("a"), key("b")], &mapped, |k| k.name == "a"),
            Err(Unroutable::NotOwned(vec![key("b")]))
        );
        assert_eq!(Unroutable::NotOwned(vec![key("b"), key("c")]).to_string(), "this replica does not own ns/b, ns/c");
    }
}
