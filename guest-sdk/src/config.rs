//! What a plugin says about itself: [`Config`], [`Kind`], [`Retry`].

use std::any::TypeId;
use std::fmt;
use std::time::Duration;

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
impl fmt::Display for Kind {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        if self.group.is_empty() {
            write!(f, "{}/{}", self.version, self.kind)
        } else {
            write!(f, "{}/{}/{}", self.group, self.version, self.kind)
        }
    }
}

/// Retry policy for failed reconciles (JOSDK's `GenericRetry`): the delay starts at
/// `initial_interval` and is multiplied by `multiplier` after each failure, up to `max_interval`.
///
/// ```
/// use std::time::Duration;
/// use wasmop_guest::Retry;
///
/// let retry = Retry {
///     max_attempts: 10,
///     ..Retry::default()
/// };
/// assert_eq!(retry.initial_interval, Duration::from_secs(2));
/// ```
#[derive(Clone, Debug, PartialEq)]
pub struct Retry {
    /// Attempts after the first failure before giving up.
    pub max_attempts: u32,
    /// Delay before the first retry.
    pub initial_interval: Duration,
    /// Factor applied to the delay after each failed attempt.
    pub multiplier: f64,
    /// Upper bound on the delay.
    pub max_interval: Duration,
}

/// 5 attempts, 2 s initial delay, multiplier 1.5, at most 5 minutes between attempts.
///
/// ```
/// let retry = wasmop_guest::Retry::default();
/// assert_eq!(retry.max_attempts, 5);
/// ```
impl Default for Retry {
    fn default() -> Self {
        Self {
            max_attempts: 5,
            initial_interval: Duration::from_secs(2),
            multiplier: 1.5,
            max_interval: Duration::from_secs(300),
        }
    }
}

/// What a plugin says about itself: its name, its primary kind and how it is scheduled.
///
/// Built with [`Config::new`] and the `#[must_use]` setters below; the fields are public to read.
///
/// ```
/// use std::time::Duration;
/// use wasmop_guest::{Config, Kind, Retry};
///
/// let config = Config::new("webpage", Kind::namespaced("sample.wasmop.dev", "v1", "WebPage"))
///     .label_selector("tier=frontend")
///     .retry(Retry { max_attempts: 3, ..Retry::default() })
///     .max_reconcile_interval(Duration::from_secs(600));
/// assert!(config.generation_aware);
/// ```
#[derive(Clone, Debug, PartialEq)]
#[non_exhaustive]
pub struct Config {
    /// Unique plugin name; used for logs, metrics and as the field manager.
    pub name: String,
    /// The primary resource this plugin reconciles.
    pub primary: Kind,
    /// Only reconcile primaries matching this label selector (Kubernetes syntax).
    pub label_selector: Option<String>,
    /// Skip updates that do not change `metadata.generation`; on by default.
    pub generation_aware: bool,
    /// Retry policy; the host's default applies when absent.
    pub retry: Option<Retry>,
    /// Reconcile at least this often even without events; the host's default applies when absent.
    pub max_reconcile_interval: Option<Duration>,
}

impl Config {
    /// A plugin named `name` reconciling objects of kind `primary`, generation aware, with the
    /// host's default retry policy and reconcile interval.
    ///
    /// ```
    /// use wasmop_guest::{Config, Kind};
    ///
    /// let config = Config::new("webpage", Kind::namespaced("sample.wasmop.dev", "v1", "WebPage"));
    /// ```
    pub fn new(name: impl Into<String>, primary: Kind) -> Self {
        Self {
            name: name.into(),
            primary,
            label_selector: None,
            generation_aware: true,
            retry: None,
            max_reconcile_interval: None,
        }
    }

    /// Only reconcile primaries matching this label selector, in Kubernetes syntax
    /// (`app=web,tier!=db`, `env in (prod,staging)`).
    ///
    /// ```
    /// # use wasmop_guest::{Config, Kind};
    /// let config = Config::new("cm", Kind::namespaced("", "v1", "ConfigMap"))
    ///     .label_selector("wasmop.dev/fixture=loop");
    /// ```
    #[must_use]
    pub fn label_selector(mut self, selector: impl Into<String>) -> Self {
        self.label_selector = Some(selector.into());
        self
    }

    /// Whether to skip updates of the primary that do not change `metadata.generation` (status
    /// and metadata-only updates). On by default.
    ///
    /// ## Warning
    ///
    /// Objects without a `metadata.generation`, such as ConfigMaps, never change generation:
    /// turn this off for them, or updates are not seen until the next reschedule.
    ///
    /// ```
    /// # use wasmop_guest::{Config, Kind};
    /// let config = Config::new("cm", Kind::namespaced("", "v1", "ConfigMap")).generation_aware(false);
    /// ```
    #[must_use]
    pub fn generation_aware(mut self, generation_aware: bool) -> Self {
        self.generation_aware = generation_aware;
        self
    }

    /// The retry policy for failed reconciles, instead of the host's default.
    ///
    /// ```
    /// # use std::time::Duration;
    /// # use wasmop_guest::{Config, Kind, Retry};
    /// let config = Config::new("cm", Kind::namespaced("", "v1", "ConfigMap")).retry(Retry {
    ///     max_attempts: 3,
    ///     initial_interval: Duration::from_millis(500),
    ///     multiplier: 2.0,
    ///     max_interval: Duration::from_secs(10),
    /// });
    /// ```
    #[must_use]
    pub fn retry(mut self, retry: Retry) -> Self {
        self.retry = Some(retry);
        self
    }

    /// Reconcile every primary at least this often, even when nothing happens to it.
    ///
    /// ```
    /// # use std::time::Duration;
    /// # use wasmop_guest::{Config, Kind};
    /// let config = Config::new("cm", Kind::namespaced("", "v1", "ConfigMap"))
    ///     .max_reconcile_interval(Duration::from_secs(3600));
    /// ```
    #[must_use]
    pub fn max_reconcile_interval(mut self, interval: Duration) -> Self {
        self.max_reconcile_interval = Some(interval);
        self
    }

    pub(crate) fn into_wit(self) -> wit::PluginConfig {
        wit::PluginConfig {
            primary: self.primary.to_wit(),
            name: self.name,
            label_selector: self.label_selector,
            generation_aware: self.generation_aware,
            retry: self.retry.map(|retry| wit::RetryPolicy {
                max_attempts: retry.max_attempts,
                initial_interval_ms: millis(retry.initial_interval),
                multiplier: retry.multiplier,
                max_interval_ms: millis(retry.max_interval),
            }),
            max_reconcile_interval_ms: self.max_reconcile_interval.map(millis),
        }
    }
}

/// Whole milliseconds, saturating at `u64::MAX`.
pub(crate) fn millis(duration: Duration) -> u64 {
    u64::try_from(duration.as_millis()).unwrap_or(u64::MAX)
}
