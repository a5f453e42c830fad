//! A (re-)list of a watch in progress, and the changes it found that wait for its end.

use wasmop_core::table::KeySet;

use crate::object::ObjectKey;

/// The keys a (re-)list has shown so far, and the primaries to enqueue once it ends.
///
/// A whole cache (as kube's reflector store) buffers a list and shows it only at `InitDone`;
/// until then a read returns the object as it was before the watch restarted. A reconcile
/// started by a re-listed change before then would read that old version, succeed, and leave
/// the change unreconciled, since the change filter has already seen it. So the primaries a
/// list's changes concern are enqueued when the list ends.
#[derive(Debug, Default)]
pub struct Listing {
    listed: KeySet<ObjectKey>,
    deferred: Vec<ObjectKey>,
}

impl Listing {
    /// The list showed `key`.
    pub fn listed(&mut self, key: ObjectKey) {
        self.listed.insert(key);
    }

    /// The list started over (its watch restarted, or a subscriber that fell behind gets it
    /// again): what it showed is forgotten, the primaries it deferred are kept. Their changes
    /// were seen (a filter recorded them), so the list shown again would not defer them anew.
    pub fn restart(&mut self) {
        self.listed = KeySet::new();
    }

    /// Primaries to enqueue once the list ends.
    pub fn defer(&mut self, primaries: impl IntoIterator<Item = ObjectKey>) {
        self.deferred.extend(primaries);
    }

    /// Ends the list: the keys it showed, and the deferred primaries, each once.
    pub fn end(self) -> (KeySet<ObjectKey>, Vec<ObjectKey>) {
        let mut once = KeySet::new();
        let deferred = self.deferred.into_iter().filter(|key| once.insert(key.clone())).collect();
        (self.listed, deferred)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn key(name: &str) -> ObjectKey {
        ObjectKey { namespace: Some("ns".into()), name: name.into() }
    }

    #[test]
    fn a_list_returns_what_it_showed_and_each_deferred_primary_once() {
        let mut listing = Listing::default();
        listing.listed(key("a"));
        listing.listed(key("b"));
        listing.defer([key("p"), key("q")]);
        listing.defer([key("p")]);
        let (listed, deferred) = listing.end();
        assert_eq!(listed, KeySet::from([key("a"), key("b")]));
        assert_eq!(deferred, [key("p"), key("q")]);
    }

    #[test]
    fn a_list_started_over_keeps_its_deferred_primaries() {
        let mut listing = Listing::default();
        listing.listed(key("a"));
        listing.defer([key("a")]);
        listing.restart();
        listing.listed(key("b"));
        let (listed, deferred) = listing.end();
        assert_eq!(listed, KeySet::from([key("b")]));
        assert_eq!(deferred, [key("a")]);
    }
}
