//! Secondary-to-primary mapping: which primaries a change of a watched object concerns, and the
//! relations that answer "the secondaries of this primary" with one hash lookup per hit.
//! Pure: the drivers hand in an object's owner references and annotations (the host from its
//! typed metadata, the FakeHost from JSON), and the plugin mapper's answers come in as data.

use std::collections::{HashMap, HashSet};
use std::hash::Hash;

use serde_json::Value;

use crate::dependent::{PRIMARY_NAME_ANNOTATION, PRIMARY_NAMESPACE_ANNOTATION};
use crate::kind::{KindRef, ObjectKey};

/// Which owner references point a secondary at its primary.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Owners {
    /// Only the owner reference marked `controller: true`.
    Controller,
    /// Every owner reference of the primary's kind.
    Any,
}

/// One owner reference of an object, borrowed from the driver's copy.
#[derive(Debug, Clone, Copy)]
pub struct OwnerRef<'a> {
    /// `apiVersion` of the owner.
    pub api_version: &'a str,
    /// Kind of the owner.
    pub kind: &'a str,
    /// Name of the owner.
    pub name: &'a str,
    /// UID of the owner.
    pub uid: &'a str,
    /// Whether it is the controller reference.
    pub controller: bool,
}

/// A primary a secondary points at.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct Target {
    /// The primary's namespace and name.
    pub key: ObjectKey,
    /// The owner's UID, for owner references: a re-created primary of the same name is another
    /// owner and does not inherit the old one's secondaries.
    pub uid: Option<String>,
}

impl Target {
    /// A primary named by its key alone.
    pub fn by_key(key: ObjectKey) -> Self {
        Self { key, uid: None }
    }
}

/// The primary kind, as the mapping needs it.
#[derive(Debug, Clone)]
pub struct PrimaryKind {
    /// API group of the primary.
    pub group: String,
    /// Kind of the primary.
    pub kind: String,
    /// Whether primaries live in namespaces.
    pub namespaced: bool,
}

impl From<&KindRef> for PrimaryKind {
    fn from(kind: &KindRef) -> Self {
        Self { group: kind.group.clone(), kind: kind.kind.clone(), namespaced: kind.namespaced }
    }
}

impl PrimaryKind {
    /// The primary key `name` in `namespace` stands for: cluster-scoped primaries have none.
    pub fn key(&self, namespace: Option<&str>, name: &str) -> ObjectKey {
        ObjectKey { namespace: namespace.filter(|_| self.namespaced).map(String::from), name: name.to_string() }
    }

    /// The primaries the owner references `refs` of an object in `namespace` name.
    pub fn owners<'a>(
        &self,
        namespace: Option<&str>,
        refs: impl IntoIterator<Item = OwnerRef<'a>>,
        which: Owners,
    ) -> Vec<Target> {
        refs.into_iter()
            .filter(|r| r.kind == self.kind && api_group(r.api_version) == self.group)
            .filter(|r| which == Owners::Any || r.controller)
            .map(|r| Target { key: self.key(namespace, r.name), uid: Some(r.uid.to_owned()) })
            .collect()
    }

    /// The primary the annotations of an object in `namespace` name, if any (`annotation`
    /// looks one up).
    pub fn annotated<'a>(
        &self,
        namespace: Option<&'a str>,
        annotation: impl Fn(&str) -> Option<&'a str>,
    ) -> Option<Target> {
        let name = annotation(PRIMARY_NAME_ANNOTATION)?;
        let namespace = annotation(PRIMARY_NAMESPACE_ANNOTATION).or(namespace);
        Some(Target::by_key(self.key(namespace, name)))
    }

    /// The primaries a plugin's `map-secondary` named (`(namespace, name)`) for a secondary in
    /// `namespace`.
    pub fn named(
        &self,
        namespace: Option<&str>,
        refs: impl IntoIterator<Item = (Option<String>, String)>,
    ) -> Vec<Target> {
        refs.into_iter().map(|(ns, name)| Target::by_key(self.key(ns.as_deref().or(namespace), &name))).collect()
    }

    /// [`PrimaryKind::owners`] of an object given as JSON.
    pub fn owners_of_json(&self, object: &Value, which: Owners) -> Vec<Target> {
        let refs = object["metadata"]["ownerReferences"].as_array().into_iter().flatten().map(|r| OwnerRef {
            api_version: r["apiVersion"].as_str().unwrap_or_default(),
            kind: r["kind"].as_str().unwrap_or_default(),
            name: r["name"].as_str().unwrap_or_default(),
            uid: r["uid"].as_str().unwrap_or_default(),
            controller: r["controller"] == true,
        });
        self.owners(object["metadata"]["namespace"].as_str(), refs, which)
    }

    /// [`PrimaryKind::annotated`] of an object given as JSON.
    pub fn annotated_json(&self, object: &Value) -> Option<Target> {
        let annotations = &object["metadata"]["annotations"];
        self.annotated(object["metadata"]["namespace"].as_str(), |key| annotations[key].as_str())
    }
}

/// The group of an `apiVersion` (`apps/v1` -> `apps`, `v1` -> the core group "").
fn api_group(api_version: &str) -> &str {
    api_version.rsplit_once('/').map_or("", |(group, _)| group)
}

/// A many-to-many relation with O(1) lookups both ways: each `A` names a set of `B`s.
#[derive(Debug)]
pub struct Relation<A, B> {
    forward: HashMap<A, HashSet<B>>,
    reverse: HashMap<B, HashSet<A>>,
}

impl<A, B> Default for Relation<A, B> {
    fn default() -> Self {
        Self { forward: HashMap::new(), reverse: HashMap::new() }
    }
}

impl<A: Hash + Eq + Clone, B: Hash + Eq + Clone> Relation<A, B> {
    /// Makes `a` name exactly `bs`; returns what it named before.
    pub fn set(&mut self, a: A, bs: impl IntoIterator<Item = B>) -> HashSet<B> {
        let bs: HashSet<B> = bs.into_iter().collect();
        let old = self.remove(&a);
        for b in &bs {
            self.reverse.entry(b.clone()).or_default().insert(a.clone());
        }
        if !bs.is_empty() {
            self.forward.insert(a, bs);
        }
        old
    }

    /// Forgets `a`; returns what it named.
    pub fn remove(&mut self, a: &A) -> HashSet<B> {
        let old = self.forward.remove(a).unwrap_or_default();
        for b in &old {
            if let Some(sources) = self.reverse.get_mut(b) {
                sources.remove(a);
                if sources.is_empty() {
                    self.reverse.remove(b);
                }
            }
        }
        old
    }

    /// What `a` names.
    pub fn targets(&self, a: &A) -> impl Iterator<Item = &B> {
        self.forward.get(a).into_iter().flatten()
    }

    /// What names `b`.
    pub fn sources(&self, b: &B) -> impl Iterator<Item = &A> {
        self.reverse.get(b).into_iter().flatten()
    }
}

/// How one watch relates its objects to primaries, kept up to date from events.
#[derive(Debug)]
pub enum Links {
    /// Each secondary names its primaries (owner references, annotations, the plugin mapper).
    FromSecondary(Relation<ObjectKey, Target>),
    /// Each primary names its secondaries (`secondaries-of`, many-to-many).
    FromPrimary(Relation<ObjectKey, ObjectKey>),
}

impl Links {
    /// The empty relation a watch fills: from the primary for the primary-references mapper,
    /// from the secondary for the others.
    pub fn new(from_primary: bool) -> Self {
        if from_primary { Self::FromPrimary(Relation::default()) } else { Self::FromSecondary(Relation::default()) }
    }

    /// Records that `secondary` now names `targets` (from-secondary links only); returns the
    /// primaries to reconcile: those named before and after the change.
    pub fn secondary_changed(&mut self, secondary: &ObjectKey, targets: Vec<Target>) -> Vec<ObjectKey> {
        match self {
            Self::FromSecondary(relation) => {
                let mut affected: HashSet<ObjectKey> = targets.iter().map(|t| t.key.clone()).collect();
                affected.extend(relation.set(secondary.clone(), targets).into_iter().map(|t| t.key));
                affected.into_iter().collect()
            }
            Self::FromPrimary(relation) => relation.sources(secondary).cloned().collect(),
        }
    }

    /// Forgets a deleted `secondary`; returns the primaries to reconcile.
    pub fn secondary_deleted(&mut self, secondary: &ObjectKey) -> Vec<ObjectKey> {
        match self {
            Self::FromSecondary(relation) => relation.remove(secondary).into_iter().map(|t| t.key).collect(),
            Self::FromPrimary(relation) => relation.sources(secondary).cloned().collect(),
        }
    }

    /// Records the secondaries a primary names (from-primary links only).
    pub fn primary_changed(&mut self, primary: &ObjectKey, secondaries: Vec<ObjectKey>) {
        if let Self::FromPrimary(relation) = self {
            relation.set(primary.clone(), secondaries);
        }
    }

    /// Forgets a deleted primary (from-primary links only).
    pub fn primary_deleted(&mut self, primary: &ObjectKey) {
        if let Self::FromPrimary(relation) = self {
            relation.remove(primary);
        }
    }

    /// The secondaries of the primary `key` with `uid`.
    pub fn secondaries_of(&self, key: &ObjectKey, uid: Option<&str>) -> Vec<ObjectKey> {
        match self {
            Self::FromSecondary(relation) => {
                let mut found: Vec<ObjectKey> = relation.sources(&Target::by_key(key.clone())).cloned().collect();
                if let Some(uid) = uid {
                    let owner = Target { key: key.clone(), uid: Some(uid.to_string()) };
                    found.extend(relation.sources(&owner).cloned());
                }
                found
            }
            Self::FromPrimary(relation) => relation.targets(key).cloned().collect(),
        }
    }

    /// The primaries `secondary` names now (from-secondary links).
    pub fn current(&self, secondary: &ObjectKey) -> Vec<Target> {
        match self {
            Self::FromSecondary(relation) => relation.targets(secondary).cloned().collect(),
            Self::FromPrimary(_) => Vec::new(),
        }
    }
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    fn key(ns: &str, name: &str) -> ObjectKey {
        ObjectKey { namespace: Some(ns.into()), name: name.into() }
    }

    fn link() -> PrimaryKind {
        PrimaryKind { group: "test.wasmop.dev".into(), kind: "Link".into(), namespaced: true }
    }

    fn owner(kind: &str, api_version: &str, name: &str, uid: &str, controller: bool) -> Value {
        json!({ "apiVersion": api_version, "kind": kind, "name": name, "uid": uid, "controller": controller })
    }

    fn meta(ns: &str, owners: Vec<Value>, annotations: &[(&str, &str)]) -> Value {
        let annotations: serde_json::Map<String, Value> =
            annotations.iter().map(|(k, v)| (k.to_string(), json!(v))).collect();
        json!({ "metadata": { "namespace": ns, "name": "cm", "ownerReferences": owners, "annotations": annotations } })
    }

    #[test]
    fn owner_references_name_owners_of_the_primary_kind_only() {
        let m = meta(
            "ns",
            vec![
                owner("Link", "test.wasmop.dev/v1", "a", "uid-a", true),
                owner("Link", "test.wasmop.dev/v1", "b", "uid-b", false),
                owner("Link", "other.dev/v1", "c", "uid-c", true),
                owner("Deployment", "apps/v1", "d", "uid-d", true),
            ],
            &[],
        );
        let controller = link().owners_of_json(&m, Owners::Controller);
        assert_eq!(controller, vec![Target { key: key("ns", "a"), uid: Some("uid-a".into()) }]);
        let any: Vec<_> = link().owners_of_json(&m, Owners::Any).into_iter().map(|t| t.key.name).collect();
        assert_eq!(any, ["a", "b"]);
    }

    #[test]
    fn core_group_owners_match_plain_versions() {
        let cm = PrimaryKind { group: String::new(), kind: "ConfigMap".into(), namespaced: true };
        let m = meta("ns", vec![owner("ConfigMap", "v1", "parent", "u", true)], &[]);
        assert_eq!(cm.owners_of_json(&m, Owners::Controller).len(), 1);
    }

    #[test]
    fn annotations_name_a_primary_defaulting_to_the_secondarys_namespace() {
        let other = meta("secrets", vec![], &[(PRIMARY_NAME_ANNOTATION, "x"), (PRIMARY_NAMESPACE_ANNOTATION, "web")]);
        assert_eq!(link().annotated_json(&other).unwrap().key, key("web", "x"));
        let same = meta("secrets", vec![], &[(PRIMARY_NAME_ANNOTATION, "x")]);
        assert_eq!(link().annotated_json(&same).unwrap().key, key("secrets", "x"));
        assert_eq!(link().annotated_json(&meta("ns", vec![], &[])), None);
        let cluster = PrimaryKind { namespaced: false, ..link() };
        assert_eq!(cluster.annotated_json(&other).unwrap().key, ObjectKey { namespace: None, name: "x".into() });
    }

    #[test]
    fn plugin_refs_without_namespace_are_in_the_secondarys_namespace() {
        let refs = vec![(None, "a".to_string()), (Some("other".to_string()), "b".to_string())];
        let keys: Vec<_> = link().named(Some("ns"), refs).into_iter().map(|t| t.key).collect();
        assert_eq!(keys, [key("ns", "a"), key("other", "b")]);
    }

    #[test]
    fn a_changed_secondary_reconciles_old_and_new_primaries() {
        let mut links = Links::new(false);
        let cm = key("ns", "cm");
        let mut first = links.secondary_changed(&cm, vec![Target::by_key(key("ns", "a"))]);
        first.sort();
        assert_eq!(first, [key("ns", "a")]);
        let mut moved = links.secondary_changed(&cm, vec![Target::by_key(key("ns", "b"))]);
        moved.sort();
        assert_eq!(moved, [key("ns", "a"), key("ns", "b")]);
        assert_eq!(links.secondaries_of(&key("ns", "a"), None), Vec::<ObjectKey>::new());
        assert_eq!(links.secondaries_of(&key("ns", "b"), None), std::slice::from_ref(&cm));
        assert_eq!(links.secondary_deleted(&cm), [key("ns", "b")]);
        assert!(links.secondaries_of(&key("ns", "b"), None).is_empty());
    }

    #[test]
    fn owned_secondaries_belong_to_the_owner_with_that_uid_only() {
        let mut links = Links::new(false);
        let owned = Target { key: key("ns", "a"), uid: Some("uid-1".into()) };
        links.secondary_changed(&key("ns", "cm"), vec![owned]);
        assert_eq!(links.secondaries_of(&key("ns", "a"), Some("uid-1")), [key("ns", "cm")]);
        // A primary re-created under the same name is a different owner.
        assert!(links.secondaries_of(&key("ns", "a"), Some("uid-2")).is_empty());
    }

    #[test]
    fn primary_references_reconcile_every_referencing_primary() {
        let mut links = Links::new(true);
        links.primary_changed(&key("ns", "m1"), vec![key("ns", "shared"), key("ns", "other")]);
        links.primary_changed(&key("ns", "m2"), vec![key("ns", "shared")]);
        links.primary_changed(&key("ns", "m3"), vec![key("ns", "other")]);
        let mut affected = links.secondary_changed(&key("ns", "shared"), Vec::new());
        affected.sort();
        assert_eq!(affected, [key("ns", "m1"), key("ns", "m2")]);
        let mut of_m1 = links.secondaries_of(&key("ns", "m1"), Some("uid"));
        of_m1.sort();
        assert_eq!(of_m1, [key("ns", "other"), key("ns", "shared")]);
        links.primary_changed(&key("ns", "m2"), Vec::new());
        links.primary_deleted(&key("ns", "m1"));
        assert!(links.secondary_deleted(&key("ns", "shared")).is_empty());
    }

    #[test]
    fn a_relation_drops_empty_entries() {
        let mut relation: Relation<u8, u8> = Relation::default();
        relation.set(1, [10, 11]);
        relation.set(2, [10]);
        assert_eq!(relation.set(1, []), HashSet::from([10, 11]));
        assert_eq!(relation.sources(&11).count(), 0);
        assert_eq!(relation.sources(&10).copied().collect::<Vec<_>>(), [2]);
        assert_eq!(relation.targets(&1).count(), 0);
    }
}
