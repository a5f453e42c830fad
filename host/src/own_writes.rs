//! The host's own writes, so that their watch events do not reconcile again (a change the host
//! made is already reconciled; JOSDK filters the events of its own updates the same way).
//!
//! A write is announced before it is sent: its watch event can arrive before the API server's
//! response. Events of the object that arrive meanwhile are held; when the write ends, the one
//! carrying the resourceVersion it produced is dropped, and any other that mattered means someone
//! else changed the object too, which the caller must reconcile.
//!
//! Every event of the object settles its record, whether or not it leads to a reconcile: the
//! write's own event, any later version, or the object's deletion; a re-list clears every record
//! no write is in flight for. So the records hold only writes in flight or just answered, never
//! one per object ever written.
//!
//! A write the API server found to change nothing answers with a version the watch already
//! delivered, and no event follows; so an answered write whose event has not come within
//! [`AWAIT_EVENT`] is forgotten. Should its event come later after all, it counts as someone
//! else's, which costs one reconcile more, never one less. A write in flight is never forgotten.

use std::collections::HashMap;
use std::sync::Mutex;
use std::time::Duration;

use prometheus_client::metrics::gauge::Gauge;
use tokio::time::Instant;
use wasmop_core::table::KeySet;

use crate::object::{ObjectKey, version_at_least};

/// How long an answered write waits for its watch event before its record goes (the watch
/// delivers within milliseconds while it runs, and a re-list settles what it missed meanwhile).
pub const AWAIT_EVENT: Duration = Duration::from_secs(60);

/// What a deletion is recorded as.
const DELETED: &str = "";

#[derive(Debug, Default)]
struct Entry {
    /// Writes sent and not answered yet.
    in_flight: u32,
    /// Versions of the events that arrived while writes were in flight, and whether each would
    /// have led to a reconcile.
    seen: Vec<(String, bool)>,
    /// The versions answered writes produced, each until its event (or a later one) arrives:
    /// a second write can be answered before the first one's event comes.
    ours: Vec<String>,
    /// When the record of an answered write goes if its event has not come.
    expires: Option<Instant>,
}

/// The records by object, and the earliest time one of them may expire.
#[derive(Debug, Default)]
struct Ledger {
    entries: HashMap<ObjectKey, Entry>,
    next_expiry: Option<Instant>,
}

impl Ledger {
    /// Forgets the answered writes whose events have not come in time.
    fn expire(&mut self, now: Instant) {
        if self.next_expiry.is_none_or(|at| at > now) {
            return;
        }
        self.entries.retain(|_, entry| entry.expires.is_none_or(|at| at > now));
        self.next_expiry = self.entries.values().filter_map(|entry| entry.expires).min();
    }
}

/// The host's writes of one watch's objects.
#[derive(Debug, Default)]
pub struct OwnWrites {
    ledger: Mutex<Ledger>,
    /// How many records there are, added into a gauge shared with the plugin's other watches.
    records: Gauge,
}

/// The records of one [`OwnWrites`], counted into its gauge when the guard drops.
struct Records<'a> {
    ledger: std::sync::MutexGuard<'a, Ledger>,
    before: usize,
    gauge: &'a Gauge,
}

impl std::ops::Deref for Records<'_> {
    type Target = HashMap<ObjectKey, Entry>;
    fn deref(&self) -> &Self::Target {
        &self.ledger.entries
    }
}

impl std::ops::DerefMut for Records<'_> {
    fn deref_mut(&mut self) -> &mut Self::Target {
        &mut self.ledger.entries
    }
}

impl Drop for Records<'_> {
    fn drop(&mut self) {
        self.gauge.inc_by(self.ledger.entries.len() as i64 - self.before as i64);
    }
}

impl Drop for OwnWrites {
    fn drop(&mut self) {
        self.records.dec_by(self.len() as i64);
    }
}

impl OwnWrites {
    /// Records whose count is added into `records` (the plugin's gauge).
    pub fn counted_in(records: Gauge) -> Self {
        Self { ledger: Mutex::default(), records }
    }

    /// The records, after forgetting the answered writes whose events have not come in time.
    fn writes(&self) -> Records<'_> {
        let ledger = self.ledger.lock().expect("never poisoned");
        let mut records = Records { before: ledger.entries.len(), ledger, gauge: &self.records };
        records.ledger.expire(Instant::now());
        records
    }

    /// A write of `key` is about to be sent.
    pub fn begin(&self, key: &ObjectKey) {
        let mut writes = self.writes();
        let entry = writes.entry(key.clone()).or_default();
        entry.in_flight += 1;
        entry.expires = None;
    }

    /// The write of `key` produced `version`; returns whether events of other writers that
    /// mattered arrived while it was in flight (the caller then reconciles the object's primary).
    pub fn wrote(&self, key: &ObjectKey, version: Option<String>) -> bool {
        self.end(key, Some(version.unwrap_or_default()).filter(|v| !v.is_empty()))
    }

    /// The host deleted `key`; returns as [`OwnWrites::wrote`].
    pub fn deleted(&self, key: &ObjectKey) -> bool {
        self.end(key, Some(DELETED.to_string()))
    }

    /// The write of `key` failed; returns as [`OwnWrites::wrote`].
    pub fn failed(&self, key: &ObjectKey) -> bool {
        self.end(key, None)
    }

    fn end(&self, key: &ObjectKey, produced: Option<String>) -> bool {
        let mut writes = self.writes();
        let entry = writes.entry(key.clone()).or_default();
        entry.in_flight = entry.in_flight.saturating_sub(1);
        entry.ours.extend(produced);
        // The events held while writes were in flight: ours (this write's or an earlier one's),
        // or someone else's.
        let mut foreign = false;
        for (version, matters) in std::mem::take(&mut entry.seen) {
            if !settle(&mut entry.ours, &version) {
                foreign |= matters;
            }
        }
        if entry.in_flight > 0 {
            return foreign;
        }
        if entry.ours.is_empty() {
            writes.remove(key);
            return foreign;
        }
        let expires = Instant::now() + AWAIT_EVENT;
        entry.expires = Some(expires);
        let next = &mut writes.ledger.next_expiry;
        *next = Some(next.map_or(expires, |at| at.min(expires)));
        foreign
    }

    /// Whether the event of `key` at `version` (`None`: a deletion) is to be ignored: it is the
    /// host's own, or a write is in flight (the event is held and judged when the write ends).
    /// `matters` says whether the event would reconcile if it were someone else's. Every event of
    /// a key must be passed here, so that its record is settled.
    pub fn consume(&self, key: &ObjectKey, version: Option<&str>, matters: bool) -> bool {
        let version = version.unwrap_or(DELETED);
        let mut writes = self.writes();
        let Some(entry) = writes.get_mut(key) else { return false };
        if entry.in_flight > 0 {
            entry.seen.push((version.to_string(), matters));
            return true;
        }
        let own = settle(&mut entry.ours, version);
        if entry.ours.is_empty() {
            writes.remove(key);
        }
        own
    }

    /// Whether the event of `key` at `version` is known to be the host's own already: its write
    /// was answered with that version and no other write is in flight, so
    /// [`OwnWrites::consume`] will drop it whatever it would have led to, and deciding that (a
    /// predicate that asks the plugin) can be skipped.
    pub fn known_own(&self, key: &ObjectKey, version: Option<&str>) -> bool {
        let version = version.unwrap_or(DELETED);
        self.writes().get(key).is_some_and(|entry| entry.in_flight == 0 && entry.ours.iter().any(|o| o == version))
    }

    /// The watch listed its objects again (each listed version went through
    /// [`OwnWrites::consume`]): the records of objects the list no longer has, with no write in
    /// flight, wait for nothing and go.
    pub fn relisted(&self, listed: &KeySet<ObjectKey>) {
        self.writes().retain(|key, entry| entry.in_flight > 0 || listed.contains(key));
    }

    /// How many objects have a write in flight or an event still awaited.
    pub fn len(&self) -> usize {
        self.writes().len()
    }

    /// Whether no write is in flight or awaited.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }
}

/// The watch delivered `version` (`DELETED`: the deletion): whether it is one of `ours`, which
/// then keeps only the versions still to come. Our own event, a later version or the deletion
/// settles a version of ours; an earlier one (someone else's write, delivered after our
/// response) does not. Versions that cannot be ordered are settled by any event.
fn settle(ours: &mut Vec<String>, version: &str) -> bool {
    let own = ours.iter().any(|o| o == version);
    ours.retain(|o| o != version && version != DELETED && !version_at_least(version, o).unwrap_or(true));
    own
}

#[cfg(test)]
mod tests {
    use super::*;

    fn key(name: &str) -> ObjectKey {
        ObjectKey { namespace: Some("ns".into()), name: name.into() }
    }

    #[test]
    fn own_writes_are_recognised_once_and_only_at_their_version() {
        let own = OwnWrites::default();
        own.begin(&key("a"));
        assert!(!own.wrote(&key("a"), Some("5".into())));
        assert!(!own.consume(&key("a"), Some("4"), true), "an older event is someone else's");
        assert!(own.consume(&key("a"), Some("5"), true));
        assert!(!own.consume(&key("a"), Some("5"), true), "consumed");
        own.begin(&key("b"));
        assert!(!own.deleted(&key("b")));
        assert!(own.consume(&key("b"), None, true));
    }

    #[test]
    fn an_answered_write_is_known_own_before_its_event_is_consumed_but_not_while_another_is_in_flight() {
        let own = OwnWrites::default();
        own.begin(&key("a"));
        assert!(!own.known_own(&key("a"), Some("5")), "not answered yet");
        own.wrote(&key("a"), Some("5".into()));
        assert!(own.known_own(&key("a"), Some("5")));
        assert!(!own.known_own(&key("a"), Some("6")), "another version");
        own.begin(&key("a"));
        assert!(!own.known_own(&key("a"), Some("5")), "a write in flight: the event is held, and judged");
        own.wrote(&key("a"), Some("7".into()));
        assert!(own.consume(&key("a"), Some("5"), false));
        assert!(!own.known_own(&key("a"), Some("5")), "consumed");
    }

    #[test]
    fn two_writes_answered_before_either_event_are_both_recognised() {
        let own = OwnWrites::default();
        own.begin(&key("a"));
        assert!(!own.wrote(&key("a"), Some("8".into())));
        own.begin(&key("a"));
        assert!(!own.wrote(&key("a"), Some("10".into())));
        assert!(own.consume(&key("a"), Some("8"), true), "the first write's late event is ours");
        assert!(!own.consume(&key("a"), Some("9"), true), "someone else's between ours");
        assert!(own.consume(&key("a"), Some("10"), true), "the second write's event is ours");
        assert!(own.is_empty());
    }

    #[test]
    fn an_event_faster_than_the_response_is_still_recognised() {
        let own = OwnWrites::default();
        own.begin(&key("a"));
        assert!(own.consume(&key("a"), Some("7"), true), "held while the write is in flight");
        assert!(!own.wrote(&key("a"), Some("7".into())), "it was ours");
        assert!(!own.consume(&key("a"), Some("7"), true), "and it is forgotten");
    }

    #[test]
    fn a_foreign_event_during_a_write_is_reported_when_it_ends() {
        let own = OwnWrites::default();
        own.begin(&key("a"));
        assert!(own.consume(&key("a"), Some("6"), true));
        assert!(own.wrote(&key("a"), Some("7".into())), "version 6 was someone else's");
        assert!(own.consume(&key("a"), Some("7"), true));
        own.begin(&key("b"));
        assert!(own.consume(&key("b"), Some("9"), true));
        assert!(own.failed(&key("b")), "the write failed; the event was someone else's");
    }

    #[test]
    fn the_event_of_an_earlier_write_held_by_a_later_one_is_not_someone_elses() {
        let own = OwnWrites::default();
        own.begin(&key("a"));
        assert!(!own.wrote(&key("a"), Some("5".into())), "the finalizer patch");
        own.begin(&key("a"));
        assert!(own.consume(&key("a"), Some("5"), true), "its event, held by the status patch");
        assert!(!own.wrote(&key("a"), Some("6".into())), "version 5 was ours");
        assert!(own.consume(&key("a"), Some("6"), false));
        assert!(own.is_empty());
    }

    #[test]
    fn filtered_events_and_deletions_settle_the_records() {
        let own = OwnWrites::default();
        own.begin(&key("status"));
        own.wrote(&key("status"), Some("5".into()));
        assert!(own.consume(&key("status"), Some("5"), false), "a status patch's event reconciles nothing");
        own.begin(&key("gone"));
        own.wrote(&key("gone"), Some("8".into()));
        assert!(!own.consume(&key("gone"), None, true), "someone else deleted it before our event came");
        own.begin(&key("newer"));
        own.wrote(&key("newer"), Some("10".into()));
        assert!(!own.consume(&key("newer"), Some("9"), true), "an older event is someone else's");
        assert_eq!(own.len(), 1, "and ours is still awaited");
        assert!(!own.consume(&key("newer"), Some("11"), true), "ours was skipped");
        assert!(own.is_empty(), "every record settled: {}", own.len());
    }

    #[tokio::test(start_paused = true)]
    async fn an_answered_write_whose_event_never_comes_expires() {
        let gauge = Gauge::default();
        let own = OwnWrites::counted_in(gauge.clone());
        // The watch delivered version 5; a write that changes nothing answers with it again, and
        // no event follows.
        assert!(!own.consume(&key("no-op"), Some("5"), true));
        own.begin(&key("no-op"));
        assert!(!own.wrote(&key("no-op"), Some("5".into())));
        own.begin(&key("late"));
        assert!(!own.wrote(&key("late"), Some("7".into())));
        own.begin(&key("in-flight"));
        tokio::time::advance(AWAIT_EVENT - Duration::from_millis(1)).await;
        assert!(own.consume(&key("late"), Some("7"), true), "a late event is still known as ours");
        tokio::time::advance(Duration::from_millis(1)).await;
        assert_eq!(own.len(), 1, "only the write in flight is left");
        assert_eq!(gauge.get(), 1);
        assert!(!own.consume(&key("no-op"), Some("6"), true), "someone else's change after expiry");
        assert!(own.consume(&key("in-flight"), Some("9"), true), "held: a write in flight never expires");
        assert!(!own.wrote(&key("in-flight"), Some("9".into())));
        assert!(own.is_empty());
    }

    #[test]
    fn the_gauge_counts_the_records_of_every_watch_of_a_plugin() {
        let gauge = Gauge::default();
        let (primary, dependent) = (OwnWrites::counted_in(gauge.clone()), OwnWrites::counted_in(gauge.clone()));
        primary.begin(&key("a"));
        dependent.begin(&key("b"));
        assert_eq!(gauge.get(), 2);
        primary.wrote(&key("a"), Some("3".into()));
        assert!(primary.consume(&key("a"), Some("3"), false));
        assert_eq!(gauge.get(), 1);
        drop(dependent);
        assert_eq!(gauge.get(), 0, "a stopped controller's records leave the gauge");
    }

    #[test]
    fn a_relist_clears_what_it_no_longer_lists_and_a_filtered_foreign_event_is_not_reported() {
        let own = OwnWrites::default();
        own.begin(&key("a"));
        own.wrote(&key("a"), Some("5".into()));
        own.begin(&key("b"));
        assert!(own.consume(&key("b"), Some("6"), false), "held");
        own.begin(&key("listed"));
        own.wrote(&key("listed"), Some("9".into()));
        assert!(!own.consume(&key("listed"), Some("8"), false), "listed at a version before the write");
        own.relisted(&KeySet::from([key("listed")]));
        assert_eq!(own.len(), 2, "the write in flight stays, and so does the listed one");
        assert!(!own.wrote(&key("b"), Some("7".into())), "the held event would not have reconciled");
        assert!(own.consume(&key("b"), Some("7"), false), "its own event");
        assert!(own.consume(&key("listed"), Some("9"), true), "its own event, after the list");
        assert!(own.is_empty());
    }
}
