//! [`Kind`]: a Kubernetes resource type, as a plugin names it.

use std::any::TypeId;
use std::fmt;

use k8s_openapi::{NamespaceResourceScope, Resource};

use crate::bindings::wasmop::plugin::types as wit;

/// A Kubernetes resource type: group, version, kind, and whether it is namespaced.
///
/// ```
/// use wasmop_guest::Kind;
///
/// let webpage = Kind::namespaced("sample.wasmop.dev", "v1", "WebPage");
/// let config_map = Kind::namespaced("", "v1", "ConfigMap");
/// let node = Kind::cluster("", "v1", "Node");
/// let policy = Kind::namespaced("example.com", "v1", "Policy").plural("policies");
/// assert_eq!(policy.plural.as_deref(), Some("policies"));
/// ```
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub struct Kind {
    /// API group; empty for the core group.
    pub group: String,
    /// API version within the group, e.g. `v1`.
    pub version: String,
    /// Kind, e.g. `WebPage`.
    pub kind: String,
    /// Plural resource name; the host derives it (lower case + "s") when absent.
    pub plural: Option<String>,
    /// Whether objects of this kind live in a namespace.
    pub namespaced: bool,
}

impl Kind {
    /// A kind whose objects live in a namespace.
    ///
    /// ```
    /// let kind = wasmop_guest::Kind::namespaced("apps", "v1", "Deployment");
    /// assert!(kind.namespaced);
    /// ```
    pub fn namespaced(group: impl Into<String>, version: impl Into<String>, kind: impl Into<String>) -> Self {
        Self { group: group.into(), version: version.into(), kind: kind.into(), plural: None, namespaced: true }
    }

    /// A cluster-scoped kind.
    ///
    /// ```
    /// let kind = wasmop_guest::Kind::cluster("", "v1", "Namespace");
    /// assert!(!kind.namespaced);
    /// ```
    pub fn cluster(group: impl Into<String>, version: impl Into<String>, kind: impl Into<String>) -> Self {
        Self { namespaced: false, ..Self::namespaced(group, version, kind) }
    }

    /// The kind of a `k8s_openapi` type, plural and scope included.
    ///
    /// ```
    /// use wasmop_guest::k8s_openapi::api::core::v1::ConfigMap;
    /// use wasmop_guest::Kind;
    ///
    /// let kind = Kind::of::<ConfigMap>();
    /// assert_eq!(kind, Kind::namespaced("", "v1", "ConfigMap").plural("configmaps"));
    /// ```
    pub fn of<K>() -> Self
    where
        K: Resource,
        K::Scope: 'static,
    {
        Self {
            group: K::GROUP.to_owned(),
            version: K::VERSION.to_owned(),
            kind: K::KIND.to_owned(),
            plural: Some(K::URL_PATH_SEGMENT.to_owned()),
            namespaced: TypeId::of::<K::Scope>() == TypeId::of::<NamespaceResourceScope>(),
        }
    }

    /// Sets the plural resource name, for kinds whose plural is not the kind in lower case + "s".
    ///
    /// ```
    /// let kind = wasmop_guest::Kind::namespaced("example.com", "v1", "Proxy").plural("proxies");
    /// ```
    #[must_use]
    pub fn plural(mut self, plural: impl Into<String>) -> Self {
        self.plural = Some(plural.into());
        self
    }

    /// Whether `other` names the same group, version and kind (plural and scope aside).
    pub(crate) fn same_type(&self, other: &Kind) -> bool {
        self.group == other.group && self.version == other.version && self.kind == other.kind
    }

    pub(crate) fn to_wit(&self) -> wit::KindRef {
        wit::KindRef {
            group: self.group.clone(),
            version: self.version.clone(),
            kind: self.kind.clone(),
            plural: self.plural.clone(),
            namespaced: self.namespaced,
        }
    }
}

/// `group/version/Kind`, or `version/Kind` for the core group.
///
/// ```
/// let kind = wasmop_guest::Kind::namespaced("apps", "v1", "Deployment");
/// assert_eq!(kind.to_string(), "apps/v1/Deployment");
/// ```
impl Kind {
    /// The kind as the core's rules see it.
    pub(crate) fn from_core(kind: &wasmop_core::KindRef) -> Self {
        Self {
            group: kind.group.clone(),
            version: kind.version.clone(),
            kind: kind.kind.clone(),
            plural: kind.plural.clone(),
            namespaced: kind.namespaced,
        }
    }

    pub(crate) fn to_core(&self) -> wasmop_core::KindRef {
        wasmop_core::KindRef {
            group: self.group.clone(),
            version: self.version.clone(),
            kind: self.kind.clone(),
            plural: self.plural.clone(),
            namespaced: self.namespaced,
        }
    }
}

impl fmt::Display for Kind {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        if self.group.is_empty() {
            write!(f, "{}/{}", self.version, self.kind)
        } else {
            write!(f, "{}/{}/{}", self.group, self.version, self.kind)
        }
    }
}
