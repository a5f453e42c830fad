//! The host's own writes, so that their watch events do not reconcile again (a change the host
//! made is already reconciled; JOSDK filters the events of its own updates the same way).
//!
//! A write is announced before it is sent: its watch event can arrive before the API server's
//! response. Events of the object that arrive meanwhile are held; when the write ends, the one
//! carrying the resourceVersion it produced is dropped, and any other means someone else changed
//! the object too, which the caller must reconcile.

use std::collections::HashMap;
use std::sync::Mutex;

use crate::object::ObjectKey;

/// What a deletion is recorded as.
const DELETED: &str = "";

#[derive(Debug, Default)]
struct Entry {
    /// Writes sent and not answered yet.
    in_flight: u32,
    /// Versions of the events that arrived while writes were in flight.
    seen: Vec<String>,
    /// The version the last write produced, until its event arrives.
    ours: Option<String>,
}

/// The host's writes of one watch's objects.
#[derive(Debug, Default)]
pub struct OwnWrites(Mutex<HashMap<ObjectKey, Entry>>);

impl OwnWrites {
    /// A write of `key` is about to be sent.
    pub fn begin(&self, key: &ObjectKey) {
        self.0.lock().expect("never poisoned").entry(key.clone()).or_default().in_flight += 1;
    }

    /// The write of `key` produced `version`; returns whether events of other writers arrived
    /// while it was in flight (the caller then reconciles the object's primary).
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
        let mut writes = self.0.lock().expect("never poisoned");
        let entry = writes.entry(key.clone()).or_default();
        entry.in_flight = entry.in_flight.saturating_sub(1);
        let mut ours_seen = false;
        let mut foreign = false;
        for version in entry.seen.drain(..) {
            if Some(&version) == produced.as_ref() {
                ours_seen = true;
            } else {
                foreign = true;
            }
        }
        entry.ours = if ours_seen { None } else { produced };
        if entry.in_flight == 0 && entry.ours.is_none() {
            writes.remove(key);
        }
        foreign
    }

    /// Whether the event of `key` at `version` (`None`: a deletion) is to be ignored: it is the
    /// host's own, or a write is in flight (the event is held and judged when the write ends).
    pub fn consume(&self, key: &ObjectKey, version: Option<&str>) -> bool {
        let version = version.unwrap_or(DELETED);
        let mut writes = self.0.lock().expect("never poisoned");
        let Some(entry) = writes.get_mut(key) else { return false };
        if entry.in_flight > 0 {
            entry.seen.push(version.to_string());
            return true;
        }
        let own = entry.ours.as_deref() == Some(version);
        if own {
            writes.remove(key);
        }
        own
    }
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
        assert!(!own.consume(&key("a"), Some("4")), "an older event is someone else's");
        assert!(own.consume(&key("a"), Some("5")));
        assert!(!own.consume(&key("a"), Some("5")), "consumed");
        own.begin(&key("b"));
        assert!(!own.deleted(&key("b")));
        assert!(own.consume(&key("b"), None));
    }

    #[test]
    fn an_event_faster_than_the_response_is_still_recognised() {
        let own = OwnWrites::default();
        own.begin(&key("a"));
        assert!(own.consume(&key("a"), Some("7")), "held while the write is in flight");
        assert!(!own.wrote(&key("a"), Some("7".into())), "it was ours");
        assert!(!own.consume(&key("a"), Some("7")), "and it is forgotten");
    }

    #[test]
    fn a_foreign_event_during_a_write_is_reported_when_it_ends() {
        let own = OwnWrites::default();
        own.begin(&key("a"));
        assert!(own.consume(&key("a"), Some("6")));
        assert!(own.wrote(&key("a"), Some("7".into())), "version 6 was someone else's");
        assert!(own.consume(&key("a"), Some("7")));
        own.begin(&key("b"));
        assert!(own.consume(&key("b"), Some("9")));
        assert!(own.failed(&key("b")), "the write failed; the event was someone else's");
    }
}
