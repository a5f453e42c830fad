//! Sharding primaries across replicas: which replica owns an object, and how that changes
//! when replicas come and go.
//!
//! - An object's place is the 64-bit FNV-1a hash of its shard key (its UID, or its namespace),
//!   the hash the API server's sharded list and watch use (KEP-5866, `shardRange`).
//! - The hash space is cut into [`BUCKETS`] equal buckets; each bucket goes to the live member
//!   that scores highest for it (rendezvous hashing), so a member that joins takes about
//!   `1/n` of the buckets from the others and one that leaves gives only its own away: nothing
//!   else moves. Every replica computes the same [`Assignment`] from the same members.
//! - A member's buckets, merged where adjacent, are its [`Ranges`]; [`Ranges::selector`] writes
//!   them as the API server's `shardSelector`.
//! - [`Handover`] decides which of its objects a member may run while ownership moves: only
//!   those no one else may still run.

use std::collections::BTreeSet;

/// How many equal parts the hash space is cut into. 512 keeps each member's share within a few
/// percent of `1/n` for a handful of members, with selectors of at most ~130 ranges each.
pub const BUCKETS: usize = 512;

/// The hash space's upper bound, exclusive (2^64).
const END: u128 = 1 << 64;

/// Width of one bucket.
const WIDTH: u128 = END / BUCKETS as u128;

/// What identifies an object's place: the field the API server hashes.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default)]
pub enum ShardKey {
    /// The object's UID: objects spread evenly.
    #[default]
    Uid,
    /// The object's namespace: a namespace, and the dependents in it, stay together.
    Namespace,
}

impl ShardKey {
    /// The field path the API server's `shardRange` takes.
    pub fn field(self) -> &'static str {
        match self {
            ShardKey::Uid => "object.metadata.uid",
            ShardKey::Namespace => "object.metadata.namespace",
        }
    }
}

/// The 64-bit FNV-1a hash of `value`, as the API server computes it for `shardRange`.
pub fn hash(value: &str) -> u64 {
    let mut hash: u64 = 0xcbf2_9ce4_8422_2325;
    for byte in value.bytes() {
        hash ^= u64::from(byte);
        hash = hash.wrapping_mul(0x0100_0000_01b3);
    }
    hash
}

/// The bucket of a hash.
fn bucket(hash: u64) -> usize {
    (u128::from(hash) / WIDTH) as usize
}

/// How much `member` wants `bucket` (rendezvous hashing): FNV-1a of both, mixed so that
/// nearby buckets score independently.
fn score(member: &str, bucket: usize) -> u64 {
    let mut h = hash(member) ^ (bucket as u64).wrapping_mul(0x9e37_79b9_7f4a_7c15);
    // splitmix64's finalizer.
    h = (h ^ (h >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
    h = (h ^ (h >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
    h ^ (h >> 31)
}

/// Which member owns each bucket, for one set of live members.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Assignment {
    members: Vec<String>,
    /// For each bucket, the index of its owner in `members`.
    owners: Vec<u16>,
}

impl Assignment {
    /// The buckets of `members` (order and repeats do not matter); no buckets without members.
    pub fn new<'a>(members: impl IntoIterator<Item = &'a str>) -> Self {
        let members: Vec<String> =
            members.into_iter().collect::<BTreeSet<_>>().into_iter().map(str::to_string).collect();
        let owners = if members.is_empty() {
            Vec::new()
        } else {
            (0..BUCKETS)
                .map(|b| {
                    let best = (0..members.len()).max_by_key(|&m| (score(&members[m], b), std::cmp::Reverse(m)));
                    best.expect("at least one member") as u16
                })
                .collect()
        };
        Self { members, owners }
    }

    /// The members, sorted.
    pub fn members(&self) -> &[String] {
        &self.members
    }

    /// What names this set of members, the same on every replica: a digest of the sorted names.
    pub fn view(&self) -> String {
        format!("{:016x}", hash(&self.members.join("\n")))
    }

    /// The owner of an object whose shard key hashes to `hash`; `None` without members.
    pub fn owner(&self, hash: u64) -> Option<&str> {
        let owner = *self.owners.get(bucket(hash))?;
        Some(&self.members[usize::from(owner)])
    }

    /// The buckets `member` owns, as ranges.
    pub fn ranges(&self, member: &str) -> Ranges {
        let Some(me) = self.members.iter().position(|m| m == member) else {
            return Ranges::default();
        };
        Ranges::from_buckets(self.owners.iter().map(|&o| usize::from(o) == me))
    }
}

/// Parts of the hash space: sorted, disjoint half-open ranges `[start, end)` of whole buckets.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct Ranges {
    buckets: Vec<bool>,
}

impl Ranges {
    /// The whole hash space.
    pub fn all() -> Self {
        Self { buckets: vec![true; BUCKETS] }
    }

    fn from_buckets(buckets: impl Iterator<Item = bool>) -> Self {
        let buckets: Vec<bool> = buckets.collect();
        if buckets.iter().any(|b| *b) { Self { buckets } } else { Self::default() }
    }

    /// Whether `hash` falls in these ranges.
    pub fn contains(&self, hash: u64) -> bool {
        self.buckets.get(bucket(hash)).copied().unwrap_or(false)
    }

    /// Whether these ranges hold nothing.
    pub fn is_empty(&self) -> bool {
        self.buckets.is_empty()
    }

    /// Whether these ranges hold everything.
    pub fn is_all(&self) -> bool {
        self.buckets.len() == BUCKETS && self.buckets.iter().all(|b| *b)
    }

    /// What both hold.
    pub fn intersect(&self, other: &Ranges) -> Ranges {
        if self.is_empty() || other.is_empty() {
            return Ranges::default();
        }
        Ranges::from_buckets(self.buckets.iter().zip(&other.buckets).map(|(a, b)| *a && *b))
    }

    /// The fraction of the hash space these ranges hold, 0 to 1.
    pub fn share(&self) -> f64 {
        self.buckets.iter().filter(|b| **b).count() as f64 / BUCKETS as f64
    }

    /// The ranges as `[start, end)` pairs, adjacent buckets merged; `end` may be 2^64.
    pub fn spans(&self) -> Vec<(u128, u128)> {
        let mut spans: Vec<(u128, u128)> = Vec::new();
        for (i, _) in self.buckets.iter().enumerate().filter(|(_, owned)| **owned) {
            let (start, end) = (i as u128 * WIDTH, (i as u128 + 1) * WIDTH);
            match spans.last_mut() {
                Some(last) if last.1 == start => last.1 = end,
                _ => spans.push((start, end)),
            }
        }
        spans
    }

    /// The API server's `shardSelector` for these ranges of `key`: `shardRange(field, start,
    /// end)` per span, joined with `||`, bounds as 16 hex digits (2^64 as 17). `None` when the
    /// ranges are empty (no selector selects nothing).
    pub fn selector(&self, key: ShardKey) -> Option<String> {
        let spans = self.spans();
        if spans.is_empty() {
            return None;
        }
        let bound = |b: u128| if b == END { "0x10000000000000000".to_string() } else { format!("0x{b:016x}") };
        let parts: Vec<String> = spans
            .into_iter()
            .map(|(start, end)| format!("shardRange({}, '{}', '{}')", key.field(), bound(start), bound(end)))
            .collect();
        Some(parts.join(" || "))
    }
}

/// Which of its objects a member may run while ownership moves: none that another member may
/// still run.
///
/// The protocol: every member acknowledges the view (the set of live members) it has adopted,
/// once it has stopped running objects it does not own in that view. A view is *settled* when
/// every member in it has acknowledged it. A member runs an object only if it owns it in its
/// current view and either that view is settled, or it has owned the object in every view it
/// adopted since the last view it saw settled (no one else can have gained it in between: a
/// gain needs a settled view, which needs this member's acknowledgement, which it gives only
/// after it stopped running what it lost).
#[derive(Debug, Clone, Default)]
pub struct Handover {
    /// The ranges owned in every view adopted since the last settled one.
    kept: Ranges,
    /// The current view's own ranges.
    owned: Ranges,
    settled: bool,
}

impl Handover {
    /// A member that has seen nothing settle yet: it runs nothing until its view settles.
    pub fn new() -> Self {
        Self::default()
    }

    /// The member adopts a view in which it owns `owned`.
    pub fn adopt(&mut self, owned: Ranges) {
        self.kept = self.kept.intersect(&owned);
        self.owned = owned;
        self.settled = false;
    }

    /// Every member of the current view has acknowledged it.
    pub fn settle(&mut self) {
        self.kept = self.owned.clone();
        self.settled = true;
    }

    /// The ranges this member owns in its current view.
    pub fn owned(&self) -> &Ranges {
        &self.owned
    }

    /// Whether its current view has settled.
    pub fn settled(&self) -> bool {
        self.settled
    }

    /// The ranges this member may run now.
    pub fn runnable(&self) -> &Ranges {
        if self.settled { &self.owned } else { &self.kept }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_hash_is_the_api_servers_fnv_1a() {
        // Go: fnv.New64a() over the bytes, as k8s.io/apimachinery/pkg/sharding.HashField.
        assert_eq!(hash(""), 0xcbf2_9ce4_8422_2325);
        assert_eq!(hash("a"), 0xaf63_dc4c_8601_ec8c);
        assert_eq!(hash("foobar"), 0x8594_4171_f739_67e8);
    }

    fn names(n: usize) -> Vec<String> {
        (0..n).map(|i| format!("wasmop-{i}_{:016x}", hash(&i.to_string()))).collect()
    }

    fn assignment(members: &[String]) -> Assignment {
        Assignment::new(members.iter().map(String::as_str))
    }

    #[test]
    fn every_hash_has_exactly_one_owner_and_the_ranges_partition_the_space() {
        let members = names(3);
        let a = assignment(&members);
        let ranges: Vec<Ranges> = members.iter().map(|m| a.ranges(m)).collect();
        for probe in (0..10_000u64).map(|i| hash(&format!("uid-{i}"))) {
            let owners: Vec<&String> =
                members.iter().zip(&ranges).filter(|(_, r)| r.contains(probe)).map(|(m, _)| m).collect();
            assert_eq!(owners.len(), 1);
            assert_eq!(a.owner(probe), Some(owners[0].as_str()));
        }
        let shares: f64 = ranges.iter().map(Ranges::share).sum();
        assert!((shares - 1.0).abs() < 1e-9);
        for share in ranges.iter().map(Ranges::share) {
            assert!((0.28..0.39).contains(&share), "{share}");
        }
    }

    #[test]
    fn the_order_of_members_does_not_matter() {
        let members = names(4);
        let mut reversed = members.clone();
        reversed.reverse();
        assert_eq!(assignment(&members), assignment(&reversed));
        assert_eq!(assignment(&members).view(), assignment(&reversed).view());
        assert_ne!(assignment(&members).view(), assignment(&members[..3]).view());
    }

    #[test]
    fn a_joining_member_takes_about_its_share_and_nothing_else_moves() {
        for n in 1..6 {
            let members = names(n + 1);
            let (before, after) = (assignment(&members[..n]), assignment(&members));
            let newcomer = &members[n];
            let mut moved = 0;
            for b in 0..BUCKETS {
                let probe = (b as u128 * WIDTH) as u64;
                let (was, is) = (before.owner(probe).unwrap(), after.owner(probe).unwrap());
                if was != is {
                    assert_eq!(is, newcomer, "only the newcomer gains");
                    moved += 1;
                }
            }
            let share = moved as f64 / BUCKETS as f64;
            let expected = 1.0 / (n + 1) as f64;
            assert!((share - expected).abs() < 0.06, "{n} -> {}: {share}", n + 1);
        }
    }

    #[test]
    fn a_leaving_member_gives_away_only_its_own() {
        let members = names(4);
        let (before, after) = (assignment(&members), assignment(&members[1..]));
        for b in 0..BUCKETS {
            let probe = (b as u128 * WIDTH) as u64;
            if before.owner(probe) != Some(members[0].as_str()) {
                assert_eq!(before.owner(probe), after.owner(probe));
            }
        }
    }

    #[test]
    fn selectors_follow_the_api_servers_grammar() {
        let a = Assignment::new(["only"]);
        assert_eq!(
            a.ranges("only").selector(ShardKey::Uid).unwrap(),
            "shardRange(object.metadata.uid, '0x0000000000000000', '0x10000000000000000')"
        );
        assert_eq!(a.ranges("other"), Ranges::default());
        assert_eq!(Ranges::default().selector(ShardKey::Uid), None);
        let half = Ranges::from_buckets((0..BUCKETS).map(|b| b >= BUCKETS / 2));
        assert_eq!(
            half.selector(ShardKey::Namespace).unwrap(),
            "shardRange(object.metadata.namespace, '0x8000000000000000', '0x10000000000000000')"
        );
        let members = names(3);
        let a = assignment(&members);
        let selector = a.ranges(&members[0]).selector(ShardKey::Uid).unwrap();
        assert!(selector.split(" || ").count() <= 150, "{}", selector.len());
    }

    #[test]
    fn a_member_runs_only_what_it_kept_until_its_view_settles() {
        let left = Ranges::from_buckets((0..BUCKETS).map(|b| b < BUCKETS / 2));
        let right = Ranges::from_buckets((0..BUCKETS).map(|b| b >= BUCKETS / 2));
        let mut h = Handover::new();
        h.adopt(Ranges::all());
        assert!(h.runnable().is_empty(), "nothing before the first view settles");
        h.settle();
        assert!(h.runnable().is_all());
        // Another member joins: this one keeps the left half at once.
        h.adopt(left.clone());
        assert_eq!(h.runnable(), &left);
        // Before that settles, a view that gives it the right half: it runs nothing new.
        h.adopt(right.clone());
        assert!(h.runnable().is_empty());
        h.settle();
        assert_eq!(h.runnable(), &right);
    }
}
