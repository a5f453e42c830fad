//! Names of objects a plugin hands the host: [`PrimaryRef`], [`SecondaryRef`].

use crate::Kind;
use crate::bindings::wasmop::plugin::types as wit;

/// A primary, named by [`Reconciler::map_secondary`](crate::Reconciler::map_secondary): the
/// host reconciles it.
///
/// ```
/// use wasmop_guest::PrimaryRef;
///
/// let web = PrimaryRef::namespaced("default", "web");
/// assert_eq!(web.namespace.as_deref(), Some("default"));
/// let policy = PrimaryRef::cluster_scoped("strict");
/// assert_eq!(policy.namespace, None);
/// ```
#[derive(Clone, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
#[non_exhaustive]
pub struct PrimaryRef {
    /// Namespace; `None` for a cluster-scoped primary. For a namespaced primary kind the host
    /// reads `None` as the secondary's own namespace.
    pub namespace: Option<String>,
    /// Name.
    pub name: String,
}

impl PrimaryRef {
    /// The primary `name` in `namespace`.
    ///
    /// ```
    /// let web = wasmop_guest::PrimaryRef::namespaced("default", "web");
    /// assert_eq!(web.name, "web");
    /// ```
    pub fn namespaced(namespace: impl Into<String>, name: impl Into<String>) -> Self {
        Self { namespace: Some(namespace.into()), name: name.into() }
    }

    /// The cluster-scoped primary `name` (or, for a namespaced primary kind, `name` in the
    /// secondary's namespace).
    ///
    /// ```
    /// let policy = wasmop_guest::PrimaryRef::cluster_scoped("strict");
    /// assert_eq!(policy.namespace, None);
    /// ```
    pub fn cluster_scoped(name: impl Into<String>) -> Self {
        Self { namespace: None, name: name.into() }
    }

    pub(crate) fn into_wit(self) -> wit::ObjectRef {
        wit::ObjectRef { namespace: self.namespace, name: self.name }
    }
}

/// A secondary a primary uses, named by
/// [`Reconciler::secondaries_of`](crate::Reconciler::secondaries_of). Its kind must be the kind of
/// one of the plugin's [`Watch`](crate::Watch)es.
///
/// ```
/// use wasmop_guest::{Kind, SecondaryRef};
///
/// let settings = SecondaryRef::new(Kind::namespaced("", "v1", "ConfigMap"), Some("default"), "settings");
/// assert_eq!(settings.namespace.as_deref(), Some("default"));
/// let node = SecondaryRef::new(Kind::cluster("", "v1", "Node"), None, "worker-1");
/// ```
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub struct SecondaryRef {
    /// Its kind.
    pub kind: Kind,
    /// Namespace; `None` for a cluster-scoped object.
    pub namespace: Option<String>,
    /// Name.
    pub name: String,
}

impl SecondaryRef {
    /// The object `name` of kind `kind`, in `namespace` (`None` for cluster-scoped kinds).
    ///
    /// ```
    /// use wasmop_guest::{Kind, SecondaryRef};
    ///
    /// let secret = SecondaryRef::new(Kind::namespaced("", "v1", "Secret"), Some("default"), "db");
    /// assert_eq!(secret.name, "db");
    /// ```
    pub fn new(kind: Kind, namespace: Option<&str>, name: impl Into<String>) -> Self {
        Self { kind, namespace: namespace.map(str::to_owned), name: name.into() }
    }

    pub(crate) fn into_wit(self) -> wit::SecondaryRef {
        wit::SecondaryRef { kind: self.kind.to_wit(), namespace: self.namespace, name: self.name }
    }
}
