//! Whether a plugin's primaries carry its finalizer (JOSDK's rule: only a reconciler that cleans
//! up gets one), and which finalizer names the driver releases from primaries that carry them
//! without need (objects finalized by an earlier version of the plugin).

use crate::dependent::{DependentSpec, Ownership};
use crate::kind::KindRef;

/// What the plugin says about its finalizer.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Declared {
    /// The default name, `wasmop.dev/<plugin name>`.
    Derived,
    /// This name.
    Named(String),
    /// Never a finalizer, even when one is needed.
    Disabled,
}

/// The driver's finalizer plan for one plugin.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Finalizers {
    /// The finalizer primaries carry: added before the first reconcile, released after cleanup.
    pub kept: Option<String>,
    /// Names the plugin owns but does not use now: a primary that carries one is released of it
    /// once (a live primary in its next reconcile, a deleted one without cleanup).
    pub released: Vec<String>,
}

impl Finalizers {
    /// The plan for plugin `plugin` reconciling `primary`: a finalizer when the plugin cleans up
    /// (`cleanup`) or has a dependent the garbage collector cannot delete with the primary (a
    /// written one owned by annotations, or an external one); none otherwise, and none when
    /// `declared` disables it.
    pub fn plan(
        plugin: &str,
        declared: &Declared,
        cleanup: bool,
        dependents: &[DependentSpec],
        primary: &KindRef,
    ) -> Self {
        let uncollected = |d: &DependentSpec| {
            d.external.is_some() || (!d.read_only && d.ownership(primary) == Ownership::Annotations)
        };
        let needed = cleanup || dependents.iter().any(uncollected);
        let derived = format!("wasmop.dev/{plugin}");
        let name = match declared {
            Declared::Derived => Some(derived.clone()),
            Declared::Named(name) => Some(name.clone()),
            Declared::Disabled => None,
        };
        let kept = name.clone().filter(|_| needed);
        let mut released: Vec<String> = [Some(derived), name].into_iter().flatten().collect();
        released.dedup();
        released.retain(|n| Some(n) != kept.as_ref());
        Self { kept, released }
    }

    /// The finalizers a live primary should carry, given those it carries: the plan's own added,
    /// released names removed. `None` when they are right already.
    pub fn live(&self, carried: &[String]) -> Option<Vec<String>> {
        let mut wanted: Vec<String> = carried.iter().filter(|f| !self.released.contains(f)).cloned().collect();
        if let Some(kept) = &self.kept
            && !wanted.contains(kept)
        {
            wanted.push(kept.clone());
        }
        (wanted.as_slice() != carried).then_some(wanted)
    }

    /// The finalizers of a primary marked for deletion once the driver let go: without its own
    /// and the released names. `None` when it carries none of them.
    pub fn deleted(&self, carried: &[String]) -> Option<Vec<String>> {
        let ours = |f: &String| self.released.contains(f) || self.kept.as_ref() == Some(f);
        carried.iter().any(ours).then(|| carried.iter().filter(|f| !ours(f)).cloned().collect())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn kind(namespaced: bool) -> KindRef {
        KindRef { group: "g".into(), version: "v1".into(), kind: "K".into(), plural: None, namespaced }
    }

    fn dependent(namespaced: bool, ownership: Ownership, read_only: bool) -> DependentSpec {
        DependentSpec {
            name: "d".into(),
            kind: kind(namespaced),
            read_only,
            depends_on: Vec::new(),
            ready_when: None,
            reconcile_when: None,
            ready_when_empty: false,
            namespace: None,
            declared_ownership: ownership,
            adopt: false,
            external: None,
        }
    }

    fn strings(names: &[&str]) -> Vec<String> {
        names.iter().map(|n| n.to_string()).collect()
    }

    #[test]
    fn a_plugin_without_cleanup_gets_no_finalizer_and_releases_its_old_one() {
        let owned = [dependent(true, Ownership::OwnerReference, false)];
        let plan = Finalizers::plan("p", &Declared::Derived, false, &owned, &kind(true));
        assert_eq!(plan, Finalizers { kept: None, released: strings(&["wasmop.dev/p"]) });
        assert_eq!(plan.live(&strings(&["other", "wasmop.dev/p"])), Some(strings(&["other"])));
        assert_eq!(plan.live(&strings(&["other"])), None, "released once: nothing left to do");
    }

    #[test]
    fn cleanup_or_a_dependent_the_garbage_collector_cannot_delete_keeps_one() {
        let plan = Finalizers::plan("p", &Declared::Derived, true, &[], &kind(true));
        assert_eq!(plan.kept.as_deref(), Some("wasmop.dev/p"));
        for dependents in [
            [dependent(true, Ownership::Annotations, false)],
            // Cluster-scoped dependents of namespaced primaries are owned by annotations.
            [dependent(false, Ownership::OwnerReference, false)],
            // Objects outside the cluster are deleted by the host alone.
            [DependentSpec::external("r".into(), vec![], None, None, true, crate::external::Tracking::ConfigMap)],
        ] {
            let plan = Finalizers::plan("p", &Declared::Derived, false, &dependents, &kind(true));
            assert_eq!(plan, Finalizers { kept: Some("wasmop.dev/p".into()), released: Vec::new() });
        }
        let observed = [dependent(true, Ownership::Annotations, true)];
        let plan = Finalizers::plan("p", &Declared::Derived, false, &observed, &kind(true));
        assert_eq!(plan.kept, None, "a read-only dependent is never deleted by the host");
        let cluster_primary = Finalizers::plan(
            "p",
            &Declared::Derived,
            false,
            &[dependent(false, Ownership::OwnerReference, false)],
            &kind(false),
        );
        assert_eq!(cluster_primary.kept, None, "owner references reach a cluster-scoped primary");
    }

    #[test]
    fn a_named_finalizer_is_added_once_and_replaces_the_derived_one() {
        let plan = Finalizers::plan("p", &Declared::Named("x.dev/f".into()), true, &[], &kind(true));
        assert_eq!(plan, Finalizers { kept: Some("x.dev/f".into()), released: strings(&["wasmop.dev/p"]) });
        assert_eq!(plan.live(&strings(&["wasmop.dev/p"])), Some(strings(&["x.dev/f"])));
        assert_eq!(plan.live(&strings(&["x.dev/f"])), None);
        let unneeded = Finalizers::plan("p", &Declared::Named("x.dev/f".into()), false, &[], &kind(true));
        assert_eq!(unneeded.released, strings(&["wasmop.dev/p", "x.dev/f"]));
    }

    #[test]
    fn disabled_keeps_none_even_when_needed() {
        let plan = Finalizers::plan("p", &Declared::Disabled, true, &[], &kind(true));
        assert_eq!(plan, Finalizers { kept: None, released: strings(&["wasmop.dev/p"]) });
    }

    #[test]
    fn a_deleted_primary_lets_go_of_every_name_of_the_plugin() {
        let plan = Finalizers::plan("p", &Declared::Named("x.dev/f".into()), true, &[], &kind(true));
        assert_eq!(plan.deleted(&strings(&["a", "x.dev/f", "wasmop.dev/p"])), Some(strings(&["a"])));
        assert_eq!(plan.deleted(&strings(&["a"])), None);
    }
}
