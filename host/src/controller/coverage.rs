//! What a plugin has the host watch for it: the primary, each declared watch and one watch per
//! dependent kind, each in the namespaces of the cluster it covers. The controller subscribes by
//! these rules, and the host checks them at load (a watch of Secrets reads every Secret it
//! covers, see [`crate::secret_access`]).

use wasmop_core::dependent::DependentSpec;

use crate::dependents::{self, DependentKind};
use crate::runtime::bindings::wasmop::plugin::types::{Dependent, Mapper, PluginConfig, Watch};
use wasmop_core::KindRef;

/// One kind the host watches for a plugin, and where.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Covered {
    /// The kind.
    pub kind: KindRef,
    /// The one namespace watched; `None`: every namespace (or a cluster-scoped kind).
    pub namespace: Option<String>,
    /// The cluster, by the name the host was given; `None`: the primary's.
    pub cluster: Option<String>,
    /// What the plugin watches it as: `its primary`, `its watch of v1/Secret`,
    /// `its dependent tokens`.
    pub purpose: String,
}

/// Every kind the host watches for `config` whose primaries are watched in `primary_namespace`
/// (`None`: all), in the order the controller subscribes: the primary, the declared watches,
/// the dependents.
pub fn covered(config: &PluginConfig, primary_namespace: Option<&str>) -> Vec<Covered> {
    let primary = Covered {
        kind: KindRef::from(&config.primary),
        namespace: primary_namespace.filter(|_| config.primary.namespaced).map(str::to_owned),
        cluster: None,
        purpose: "its primary".into(),
    };
    let declared =
        config.watches.iter().map(|watch| (watch.clone(), format!("its watch of {}", KindRef::from(&watch.kind))));
    let dependents =
        config.dependents.iter().map(|d| (dependent_watch(config, d), format!("its dependent {}", d.name)));
    let watches = declared.chain(dependents).map(|(watch, purpose)| Covered {
        namespace: namespace_of(&watch, primary_namespace).map(str::to_owned),
        kind: KindRef::from(&watch.kind),
        cluster: watch.cluster,
        purpose,
    });
    std::iter::once(primary).chain(watches).collect()
}

/// The namespace a watch covers. A watch of a namespaced kind without a namespace of its own
/// follows the primaries' namespace when they are narrowed to one (`--namespace`, or the
/// plugin's `namespace` override), except a watch mapped by annotations, which exists to reach
/// other namespaces, and a watch of another cluster: they cover all namespaces unless they name
/// one.
pub(super) fn namespace_of<'a>(watch: &'a Watch, primary_namespace: Option<&'a str>) -> Option<&'a str> {
    match &watch.namespace {
        Some(ns) => Some(ns.as_str()),
        None if watch.kind.namespaced && watch.cluster.is_none() && !matches!(watch.mapper, Mapper::Annotations) => {
            primary_namespace
        }
        None => None,
    }
}

/// The watch of a dependent kind: the plugin's objects of that kind, by the management label.
/// Read-only dependents are not the plugin's: their watch covers the kind, and a change of an
/// object reconciles the primaries whose `desired` named it.
pub(super) fn dependent_watch(config: &PluginConfig, dependent: &Dependent) -> Watch {
    let (label_selector, mapper) = if dependent.read_only {
        (None, Mapper::PrimaryReferences)
    } else {
        let selector = format!("{}={}", dependents::MANAGED_BY_LABEL, config.name);
        let ownership = DependentSpec::from(dependent).ownership(&(&config.primary).into());
        (Some(selector), DependentKind::mapper(ownership))
    };
    let namespace = dependent.namespace.clone();
    // Dependents are read whole: the matcher compares them with what the plugin desires.
    Watch {
        kind: dependent.kind.clone(),
        namespace,
        label_selector,
        field_selector: None,
        cluster: None,
        mapper,
        projection: None,
        predicate: None,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::runtime::bindings::wasmop::plugin::types::{KindRef as WitKind, Ownership, Watch};

    fn kind(group: &str, kind: &str, namespaced: bool) -> WitKind {
        WitKind { group: group.into(), version: "v1".into(), kind: kind.into(), plural: None, namespaced }
    }

    fn watch(kind: WitKind, namespace: Option<&str>, cluster: Option<&str>, mapper: Mapper) -> Watch {
        Watch {
            kind,
            namespace: namespace.map(Into::into),
            label_selector: None,
            field_selector: None,
            cluster: cluster.map(Into::into),
            mapper,
            projection: None,
            predicate: None,
        }
    }

    fn dependent(name: &str, kind: WitKind, namespace: Option<&str>) -> Dependent {
        Dependent {
            name: name.into(),
            kind,
            read_only: false,
            depends_on: Vec::new(),
            ready_when: None,
            reconcile_when: None,
            ownership: Ownership::OwnerReference,
            ready_when_empty: true,
            namespace: namespace.map(Into::into),
            adopt: false,
        }
    }

    fn coverage(covered: &[Covered]) -> Vec<(String, Option<&str>, Option<&str>, &str)> {
        covered
            .iter()
            .map(|c| (c.kind.kind.clone(), c.namespace.as_deref(), c.cluster.as_deref(), c.purpose.as_str()))
            .collect()
    }

    #[test]
    fn a_watch_follows_the_primaries_namespace_unless_it_exists_to_reach_further() {
        let secret = kind("", "Secret", true);
        let config = PluginConfig {
            watches: vec![
                watch(secret.clone(), None, None, Mapper::Plugin),
                watch(secret.clone(), None, None, Mapper::Annotations),
                watch(secret.clone(), Some("ops"), None, Mapper::Annotations),
                watch(secret.clone(), None, Some("edge"), Mapper::Plugin),
                watch(kind("", "Namespace", false), None, None, Mapper::Plugin),
            ],
            dependents: vec![
                dependent("tokens", secret, None),
                dependent("mirror", kind("", "Secret", true), Some("ops")),
            ],
            ..crate::runtime::bindings::test_config("K")
        };
        assert_eq!(
            coverage(&covered(&config, Some("team"))),
            [
                ("K".into(), Some("team"), None, "its primary"),
                ("Secret".into(), Some("team"), None, "its watch of v1/Secret"),
                ("Secret".into(), None, None, "its watch of v1/Secret"),
                ("Secret".into(), Some("ops"), None, "its watch of v1/Secret"),
                ("Secret".into(), None, Some("edge"), "its watch of v1/Secret"),
                ("Namespace".into(), None, None, "its watch of v1/Namespace"),
                ("Secret".into(), Some("team"), None, "its dependent tokens"),
                ("Secret".into(), Some("ops"), None, "its dependent mirror"),
            ]
        );
        // A host on every namespace watches every namespace.
        assert!(covered(&config, None).iter().all(|c| c.namespace.as_deref().is_none_or(|ns| ns == "ops")));
    }
}
