//! What a plugin says about itself: [`Config`], [`Watch`], [`Retry`], [`RateLimit`],
//! [`Filters`].

use std::time::Duration;

use crate::bindings::wasmop::plugin::types as wit;
use crate::dependent::Dependent;
use crate::external::{ExternalDependent, Polling};
use crate::grant::{HttpGrant, Inbound};
use crate::kind::Kind;
use crate::predicate::Predicate;
use crate::webhook::Webhook;
use crate::wire::millis;

/// The annotation naming a secondary's primary, read by the annotations mapper
/// ([`Watch::annotated`]): the primary's name.
///
/// ```
/// assert_eq!(wasmop_guest::PRIMARY_NAME_ANNOTATION, "wasmop.dev/primary-name");
/// ```
pub const PRIMARY_NAME_ANNOTATION: &str = wasmop_core::dependent::PRIMARY_NAME_ANNOTATION;

/// The annotation naming the namespace of a secondary's primary, read by the annotations mapper
/// ([`Watch::annotated`]) together with [`PRIMARY_NAME_ANNOTATION`]. When it is absent the primary
/// is in the secondary's own namespace; it is ignored for cluster-scoped primaries.
///
/// ```
/// assert_eq!(wasmop_guest::PRIMARY_NAMESPACE_ANNOTATION, "wasmop.dev/primary-namespace");
/// ```
pub const PRIMARY_NAMESPACE_ANNOTATION: &str = wasmop_core::dependent::PRIMARY_NAMESPACE_ANNOTATION;

/// How a change of a watched secondary finds the primaries to reconcile: JOSDK's
/// `SecondaryToPrimaryMapper` and `PrimaryToSecondaryMapper`, controller-runtime's event handlers.
/// Chosen with the [`Watch`] setters.
///
/// ```
/// use wasmop_guest::{Kind, Mapper, Watch};
///
/// let watch = Watch::new(Kind::namespaced("", "v1", "Secret")).annotated();
/// assert_eq!(watch.mapper, Mapper::Annotations);
/// assert_eq!(Mapper::default(), Mapper::ControllerOwner);
/// ```
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub enum Mapper {
    /// The secondary's owner reference marked `controller: true` that points at the primary's
    /// kind (controller-runtime `Owns`, `handler.EnqueueRequestForOwner(..., OnlyControllerOwner())`;
    /// JOSDK `Mappers.fromOwnerReferences`). The default; see [`Watch::owned_by_controller`].
    #[default]
    ControllerOwner,
    /// Every owner reference of the secondary that points at the primary's kind
    /// (controller-runtime `handler.EnqueueRequestForOwner` without `OnlyControllerOwner`). See
    /// [`Watch::owned_by_any`].
    AnyOwner,
    /// The annotations [`PRIMARY_NAME_ANNOTATION`] and [`PRIMARY_NAMESPACE_ANNOTATION`] on the
    /// secondary (JOSDK `Mappers.fromAnnotation`). See [`Watch::annotated`].
    Annotations,
    /// The plugin's [`Reconciler::map_secondary`](crate::Reconciler::map_secondary)
    /// (controller-runtime `handler.EnqueueRequestsFromMapFunc`, JOSDK's custom
    /// `SecondaryToPrimaryMapper`). See [`Watch::mapped_by_plugin`].
    Plugin,
    /// The primaries whose [`Reconciler::secondaries_of`](crate::Reconciler::secondaries_of)
    /// names the secondary (JOSDK `PrimaryToSecondaryMapper`). See
    /// [`Watch::referenced_by_primary`].
    PrimaryReferences,
}

impl Mapper {
    fn to_wit(self) -> wit::Mapper {
        match self {
            Self::ControllerOwner => wit::Mapper::OwnerReferences(wit::Owners::Controller),
            Self::AnyOwner => wit::Mapper::OwnerReferences(wit::Owners::Any),
            Self::Annotations => wit::Mapper::Annotations,
            Self::Plugin => wit::Mapper::Plugin,
            Self::PrimaryReferences => wit::Mapper::PrimaryReferences,
        }
    }
}

/// A secondary kind the plugin depends on: JOSDK's `InformerEventSource`, controller-runtime's
/// `Owns` and `Watches`. Declared with [`Config::watch`].
///
/// The host watches and caches the objects of the kind (matching the selectors, in the namespace
/// and cluster given), and when one changes it reconciles the primaries the watch's [`Mapper`]
/// finds. During a reconcile, [`Context::secondaries`](crate::Context::secondaries) gives the
/// cached objects of the kind that belong to the primary, and [`Context::get`](crate::Context::get)
/// and [`Context::list`](crate::Context::list) read the kind's cache. Watches are shared: plugins
/// declaring the same kind, cluster, namespace and selectors use one watch and one cache.
///
/// A watch of Secrets reads every Secret it covers, so the host loads the plugin only when its
/// ServiceAccount may list and watch Secrets there, or when the operator allows it
/// (`allowSecretWatches: true` in its overrides).
///
/// Built with [`Watch::new`] and the `#[must_use]` setters below; the fields are public to read.
///
/// | setter | default |
/// |---|---|
/// | [`namespace`](Watch::namespace) | the namespace the host watches primaries in (`--namespace`), else all |
/// | [`label_selector`](Watch::label_selector) | none |
/// | [`field_selector`](Watch::field_selector) | none |
/// | [`cluster`](Watch::cluster) | the primary's cluster |
/// | [`owned_by_controller`](Watch::owned_by_controller) (or another [`Mapper`]) | [`Mapper::ControllerOwner`] |
///
/// ```
/// use wasmop_guest::{Config, Kind, Watch};
///
/// let config = Config::new("web", Kind::namespaced("example.com", "v1", "Web"))
///     // The Deployments each Web controls.
///     .watch(Watch::new(Kind::namespaced("apps", "v1", "Deployment")))
///     // The Secrets in `shared` that say which Web they belong to.
///     .watch(Watch::new(Kind::namespaced("", "v1", "Secret")).namespace("shared").annotated());
/// assert_eq!(config.watches.len(), 2);
/// ```
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub struct Watch {
    /// The watched kind.
    pub kind: Kind,
    /// Only this namespace; when absent, the namespace the host watches primaries in
    /// (`--namespace` or the plugin's `namespace` override), else all namespaces.
    pub namespace: Option<String>,
    /// Only objects matching this label selector (Kubernetes syntax); none by default.
    pub label_selector: Option<String>,
    /// Only objects matching this field selector (Kubernetes syntax); none by default.
    pub field_selector: Option<String>,
    /// The cluster to watch, by the name the host was given; the primary's cluster when absent.
    pub cluster: Option<String>,
    /// How a change of a secondary finds its primaries; [`Mapper::ControllerOwner`] by default.
    pub mapper: Mapper,
    /// The paths the plugin reads of these objects; the host's cache keeps only those and the
    /// metadata. `None` (the default) keeps whole objects.
    pub projection: Option<Vec<String>>,
    /// Only changes for which this holds map to primaries; see [`Watch::predicate`].
    pub predicate: Option<Predicate>,
}

impl Watch {
    /// A watch of `kind` in every namespace of the primary's cluster, without selectors, mapping
    /// each object to the primary named by its controller owner reference.
    ///
    /// ```
    /// use wasmop_guest::{Kind, Mapper, Watch};
    ///
    /// let watch = Watch::new(Kind::namespaced("", "v1", "ConfigMap"));
    /// assert_eq!(watch.mapper, Mapper::ControllerOwner);
    /// assert_eq!((watch.namespace, watch.label_selector, watch.cluster), (None, None, None));
    /// ```
    pub fn new(kind: Kind) -> Self {
        Self {
            kind,
            namespace: None,
            label_selector: None,
            field_selector: None,
            cluster: None,
            mapper: Mapper::default(),
            projection: None,
            predicate: None,
        }
    }

    /// Only watch objects in this namespace. By default a watch of a namespaced kind follows the
    /// namespace the host watches primaries in (`--namespace`), and covers all namespaces when
    /// the host watches them all.
    ///
    /// ```
    /// # use wasmop_guest::{Kind, Watch};
    /// let watch = Watch::new(Kind::namespaced("", "v1", "Secret")).namespace("shared");
    /// assert_eq!(watch.namespace.as_deref(), Some("shared"));
    /// ```
    #[must_use]
    pub fn namespace(mut self, namespace: impl Into<String>) -> Self {
        self.namespace = Some(namespace.into());
        self
    }

    /// Only watch objects matching this label selector, in Kubernetes syntax (`app=web`,
    /// `env in (prod,staging)`); none by default. Other objects are never cached.
    ///
    /// ```
    /// # use wasmop_guest::{Kind, Watch};
    /// let watch = Watch::new(Kind::namespaced("", "v1", "ConfigMap")).label_selector("app=web");
    /// assert_eq!(watch.label_selector.as_deref(), Some("app=web"));
    /// ```
    #[must_use]
    pub fn label_selector(mut self, selector: impl Into<String>) -> Self {
        self.label_selector = Some(selector.into());
        self
    }

    /// Only watch objects matching this field selector, in Kubernetes syntax
    /// (`metadata.name=settings`); none by default.
    ///
    /// ```
    /// # use wasmop_guest::{Kind, Watch};
    /// let watch = Watch::new(Kind::namespaced("", "v1", "Secret")).field_selector("type=kubernetes.io/tls");
    /// assert_eq!(watch.field_selector.as_deref(), Some("type=kubernetes.io/tls"));
    /// ```
    #[must_use]
    pub fn field_selector(mut self, selector: impl Into<String>) -> Self {
        self.field_selector = Some(selector.into());
        self
    }

    /// Watch objects in another cluster, by the name the host was given for it (`wasmop run
    /// --cluster`); the primary's cluster by default. Owner references cannot cross clusters:
    /// use another mapper, such as [`Watch::annotated`].
    ///
    /// ```
    /// # use wasmop_guest::{Kind, Watch};
    /// let watch = Watch::new(Kind::namespaced("", "v1", "ConfigMap")).cluster("edge").annotated();
    /// assert_eq!(watch.cluster.as_deref(), Some("edge"));
    /// ```
    #[must_use]
    pub fn cluster(mut self, cluster: impl Into<String>) -> Self {
        self.cluster = Some(cluster.into());
        self
    }

    /// Maps an object to the primary named by its owner reference marked `controller: true`
    /// ([`Mapper::ControllerOwner`]): the default, for objects the plugin's primaries control.
    /// The primary must be in the object's namespace, or cluster-scoped.
    ///
    /// ```
    /// # use wasmop_guest::{Kind, Mapper, Watch};
    /// let watch = Watch::new(Kind::namespaced("apps", "v1", "Deployment")).owned_by_controller();
    /// assert_eq!(watch.mapper, Mapper::ControllerOwner);
    /// ```
    #[must_use]
    pub fn owned_by_controller(mut self) -> Self {
        self.mapper = Mapper::ControllerOwner;
        self
    }

    /// Maps an object to every primary its owner references name ([`Mapper::AnyOwner`]),
    /// controller or not.
    ///
    /// ```
    /// # use wasmop_guest::{Kind, Mapper, Watch};
    /// let watch = Watch::new(Kind::namespaced("", "v1", "ConfigMap")).owned_by_any();
    /// assert_eq!(watch.mapper, Mapper::AnyOwner);
    /// ```
    #[must_use]
    pub fn owned_by_any(mut self) -> Self {
        self.mapper = Mapper::AnyOwner;
        self
    }

    /// Maps an object to the primary its annotations [`PRIMARY_NAME_ANNOTATION`] and
    /// [`PRIMARY_NAMESPACE_ANNOTATION`] name ([`Mapper::Annotations`]): for objects in another
    /// namespace or cluster than their primary, which owner references cannot point across.
    ///
    /// ```
    /// # use wasmop_guest::{Kind, Mapper, Watch};
    /// let watch = Watch::new(Kind::namespaced("", "v1", "Secret")).annotated();
    /// assert_eq!(watch.mapper, Mapper::Annotations);
    /// ```
    #[must_use]
    pub fn annotated(mut self) -> Self {
        self.mapper = Mapper::Annotations;
        self
    }

    /// Maps an object to the primaries the plugin's
    /// [`Reconciler::map_secondary`](crate::Reconciler::map_secondary) returns for it
    /// ([`Mapper::Plugin`]), which the plugin must then implement.
    ///
    /// ```
    /// # use wasmop_guest::{Kind, Mapper, Watch};
    /// let watch = Watch::new(Kind::namespaced("", "v1", "ConfigMap")).mapped_by_plugin();
    /// assert_eq!(watch.mapper, Mapper::Plugin);
    /// ```
    #[must_use]
    pub fn mapped_by_plugin(mut self) -> Self {
        self.mapper = Mapper::Plugin;
        self
    }

    /// Maps an object to the primaries whose
    /// [`Reconciler::secondaries_of`](crate::Reconciler::secondaries_of) names it
    /// ([`Mapper::PrimaryReferences`]): for objects the primaries refer to by name, possibly
    /// many primaries to one object. The plugin must implement `secondaries_of`.
    ///
    /// ```
    /// # use wasmop_guest::{Kind, Mapper, Watch};
    /// let watch = Watch::new(Kind::namespaced("", "v1", "ConfigMap")).referenced_by_primary();
    /// assert_eq!(watch.mapper, Mapper::PrimaryReferences);
    /// ```
    #[must_use]
    pub fn referenced_by_primary(mut self) -> Self {
        self.mapper = Mapper::PrimaryReferences;
        self
    }

    /// Keeps only these paths of the watched objects (and their metadata) in the host's cache,
    /// which is what the plugin then reads: `spec.replicas`, `data`, `status.conditions`. A
    /// read-only view that saves memory when the objects are large and the plugin reads little
    /// of them (JOSDK's "Optimizing Caches").
    ///
    /// ```
    /// use wasmop_guest::{Kind, Watch};
    ///
    /// let watch = Watch::new(Kind::namespaced("apps", "v1", "Deployment")).project(["status.readyReplicas"]);
    /// assert_eq!(watch.projection, Some(vec!["status.readyReplicas".to_string()]));
    /// ```
    #[must_use]
    pub fn project<P: Into<String>>(mut self, paths: impl IntoIterator<Item = P>) -> Self {
        self.projection = Some(paths.into_iter().map(Into::into).collect());
        self
    }

    /// Keeps only the metadata of the watched objects: the host watches them metadata-only
    /// (`PartialObjectMetadata`), for kinds the plugin only maps from, by owner or annotations.
    ///
    /// ```
    /// use wasmop_guest::{Kind, Watch};
    ///
    /// let watch = Watch::new(Kind::namespaced("", "v1", "Secret")).annotated().metadata_only();
    /// assert_eq!(watch.projection, Some(Vec::new()));
    /// ```
    #[must_use]
    pub fn metadata_only(mut self) -> Self {
        self.projection = Some(Vec::new());
        self
    }

    /// Only changes for which `predicate` holds map to primaries (controller-runtime's
    /// `Watches(..., builder.WithPredicates(...))`): creates, updates and deletions of the
    /// watched objects, the built-in terms holding for all but updates. Plugin terms call
    /// [`Reconciler::filter`](crate::Reconciler::filter) as for [`Config::predicate`]; test it
    /// with [`FakeHost::reconciles_on_watched`](crate::testing::FakeHost::reconciles_on_watched).
    #[must_use]
    pub fn predicate(mut self, predicate: Predicate) -> Self {
        self.predicate = Some(predicate);
        self
    }

    fn into_wit(self) -> wit::Watch {
        wit::Watch {
            kind: self.kind.to_wit(),
            namespace: self.namespace,
            label_selector: self.label_selector,
            field_selector: self.field_selector,
            cluster: self.cluster,
            mapper: self.mapper.to_wit(),
            projection: self.projection,
            predicate: self.predicate.map(Predicate::into_wit),
        }
    }
}

/// Retry policy for failed reconciles (JOSDK's `GenericRetry`; controller-runtime's rate-limited
/// requeue on error): the delay starts at `initial_interval` and is multiplied by `multiplier`
/// after each failure, up to `max_interval`, and each delay is spread at random by `jitter`.
///
/// Only [`Error::Transient`](crate::Error::Transient) failures (and traps) are retried. The plugin
/// sees the attempt number in [`Context::attempt`](crate::Context::attempt) and whether no retry
/// follows in [`Context::is_last_attempt`](crate::Context::is_last_attempt).
///
/// ```
/// use std::time::Duration;
/// use wasmop_guest::Retry;
///
/// let retry = Retry {
///     max_attempts: 10,
///     jitter: 0.1,
///     ..Retry::default()
/// };
/// assert_eq!(retry.initial_interval, Duration::from_secs(2));
/// ```
#[derive(Clone, Debug, PartialEq)]
pub struct Retry {
    /// Attempts after the first failure before giving up (JOSDK `maxAttempts`); default 5.
    pub max_attempts: u32,
    /// Delay before the first retry (JOSDK `initialInterval`); default 2 s.
    pub initial_interval: Duration,
    /// Factor applied to the delay after each failed attempt (JOSDK `intervalMultiplier`);
    /// default 1.5.
    pub multiplier: f64,
    /// Upper bound on the delay (JOSDK `maxInterval`); default 5 minutes.
    pub max_interval: Duration,
    /// Random spread of each delay, as a fraction: 0.1 makes each delay anywhere within +-10% of
    /// its nominal value, so that objects failing together do not retry in lockstep. Default 0.0:
    /// no jitter. The host clamps it to `0.0..=1.0`.
    pub jitter: f64,
}

/// 5 attempts, 2 s initial delay, multiplier 1.5, at most 5 minutes between attempts, no jitter:
/// the host's own default.
///
/// ```
/// let retry = wasmop_guest::Retry::default();
/// assert_eq!(retry.max_attempts, 5);
/// assert_eq!(retry.jitter, 0.0);
/// ```
impl Default for Retry {
    fn default() -> Self {
        Self {
            max_attempts: 5,
            initial_interval: Duration::from_secs(2),
            multiplier: 1.5,
            max_interval: Duration::from_secs(300),
            jitter: 0.0,
        }
    }
}

/// At most `max_reconciles` reconciles of one object within any window of length `period` (JOSDK's
/// `RateLimiter`, as `LinearRateLimiter(refreshPeriod, limitForPeriod)`; controller-runtime has no
/// per-object equivalent).
///
/// The window slides and is kept per object: other objects are not affected. A reconcile that
/// would exceed the limit is postponed until the window allows it, never dropped, whether an
/// event, a retry or a reschedule asked for it. `max_reconciles == 0` or a zero `period` turns
/// the limit off.
///
/// ```
/// use std::time::Duration;
/// use wasmop_guest::RateLimit;
///
/// // At most 2 reconciles of any one object every 3 seconds.
/// let limit = RateLimit { max_reconciles: 2, period: Duration::from_secs(3) };
/// ```
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct RateLimit {
    /// Reconciles allowed per window (JOSDK `limitForPeriod`).
    pub max_reconciles: u32,
    /// Window length (JOSDK `refreshPeriod`).
    pub period: Duration,
}

/// Which changes of a primary lead to a reconcile: controller-runtime's event predicates
/// (`predicate.Funcs{CreateFunc, UpdateFunc, DeleteFunc}`, `AnnotationChangedPredicate`,
/// `LabelChangedPredicate`).
///
/// Updates are first filtered by [`Config::generation_aware`] (JOSDK
/// `generationAwareEventProcessing`, controller-runtime `predicate.GenerationChangedPredicate`):
/// `on_update` admits the updates that pass it, and `on_annotation_change` / `on_label_change`
/// admit updates that changed annotations or labels even when the generation did not change.
/// Reschedules, retries and the maximum reconcile interval are not events and are not filtered.
///
/// The [`Default`] is what a controller usually wants: create, update and delete on, annotation
/// and label changes off.
///
/// ```
/// use wasmop_guest::Filters;
///
/// // Also reconcile when someone relabels an object.
/// let filters = Filters { on_label_change: true, ..Filters::default() };
/// assert!(filters.on_create && filters.on_update && filters.on_delete);
/// assert!(!filters.on_annotation_change);
/// ```
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct Filters {
    /// Reconcile objects when first seen: created, or listed when the host starts
    /// (controller-runtime `CreateFunc`, JOSDK `onAddFilter`). Default true.
    pub on_create: bool,
    /// Reconcile updates that pass generation-aware filtering (controller-runtime `UpdateFunc`,
    /// JOSDK `onUpdateFilter`). Default true.
    pub on_update: bool,
    /// Reconcile when an object is marked for deletion, i.e. `metadata.deletionTimestamp` is set
    /// (controller-runtime `DeleteFunc`). Default true.
    pub on_delete: bool,
    /// Also reconcile when `metadata.annotations` change without a new generation
    /// (controller-runtime `predicate.AnnotationChangedPredicate`). Default false.
    pub on_annotation_change: bool,
    /// Also reconcile when `metadata.labels` change without a new generation
    /// (controller-runtime `predicate.LabelChangedPredicate`). Default false.
    pub on_label_change: bool,
}

/// Create, update and delete on; annotation and label changes off.
///
/// ```
/// let filters = wasmop_guest::Filters::default();
/// assert!(filters.on_create && filters.on_update && filters.on_delete);
/// assert!(!filters.on_annotation_change && !filters.on_label_change);
/// ```
impl Default for Filters {
    fn default() -> Self {
        Self { on_create: true, on_update: true, on_delete: true, on_annotation_change: false, on_label_change: false }
    }
}

impl Filters {
    /// The rules crate's filters, with generation awareness `generation_aware`.
    pub(crate) fn to_core(self, generation_aware: bool) -> wasmop_core::filter::Filters {
        wasmop_core::filter::Filters {
            generation_aware,
            on_create: self.on_create,
            on_update: self.on_update,
            on_delete: self.on_delete,
            on_annotation_change: self.on_annotation_change,
            on_label_change: self.on_label_change,
        }
    }

    fn to_wit(self) -> wit::EventFilters {
        wit::EventFilters {
            on_create: self.on_create,
            on_update: self.on_update,
            on_delete: self.on_delete,
            on_annotation_change: self.on_annotation_change,
            on_label_change: self.on_label_change,
        }
    }
}

/// What a plugin says about itself: its name, its primary kind and how it is scheduled (JOSDK's
/// `@ControllerConfiguration`; controller-runtime's builder options and predicates).
///
/// Built with [`Config::new`] and the `#[must_use]` setters below; the fields are public to read.
/// Whatever is left unset gets the host's default. Every setting can also be overridden per
/// plugin at deployment time, in the host's configuration file.
///
/// | setter | default | JOSDK | controller-runtime |
/// |---|---|---|---|
/// | [`label_selector`](Config::label_selector) | none | `labelSelector` | `LabelSelectorPredicate` / cache selector |
/// | [`field_selector`](Config::field_selector) | none | - | cache field selector |
/// | [`generation_aware`](Config::generation_aware) | on | `generationAwareEventProcessing` | `predicate.GenerationChangedPredicate` |
/// | [`filters`](Config::filters) | [`Filters::default`] | `onAddFilter` / `onUpdateFilter` | `predicate.Funcs`, `AnnotationChangedPredicate`, `LabelChangedPredicate` |
/// | [`retry`](Config::retry) | host's: [`Retry::default`] | `GenericRetry` | rate-limited requeue on error |
/// | [`max_reconcile_interval`](Config::max_reconcile_interval) | host's: 10 h | `maxReconciliationInterval` | `SyncPeriod` |
/// | [`rate_limit`](Config::rate_limit) | none | `RateLimiter` (`LinearRateLimiter`) | - |
/// | [`max_concurrent_reconciles`](Config::max_concurrent_reconciles) | host's (`--plugin-concurrency`, 8) | `maxConcurrentReconciliations` | `MaxConcurrentReconciles` |
/// | [`watch`](Config::watch) (repeatable) | none | `InformerEventSource` | `Owns`, `Watches` |
/// | [`resync_period`](Config::resync_period) | never | - | `SyncPeriod` (every cached object) |
/// | [`sharding`](Config::sharding) | host's: [`Sharding::Uid`] | - | - (leader election, for [`Sharding::None`]) |
///
/// ```
/// use std::time::Duration;
/// use wasmop_guest::{Config, Filters, Kind, RateLimit, Retry, Watch};
///
/// let config = Config::new("webpage", Kind::namespaced("sample.wasmop.dev", "v1", "WebPage"))
///     .label_selector("tier=frontend")
///     .field_selector("metadata.name!=ignored")
///     .filters(Filters { on_label_change: true, ..Filters::default() })
///     .retry(Retry { max_attempts: 3, jitter: 0.1, ..Retry::default() })
///     .max_reconcile_interval(Duration::from_secs(600))
///     .rate_limit(RateLimit { max_reconciles: 2, period: Duration::from_secs(3) })
///     .max_concurrent_reconciles(4)
///     .watch(Watch::new(Kind::namespaced("", "v1", "ConfigMap").plural("configmaps")))
///     .resync_period(Duration::from_secs(3600));
/// assert!(config.generation_aware);
/// ```
#[derive(Clone, Debug, PartialEq)]
#[non_exhaustive]
pub struct Config {
    /// Unique plugin name; used for logs, metrics and as the field manager.
    pub name: String,
    /// The primary resource this plugin reconciles.
    pub primary: Kind,
    /// Only reconcile primaries matching this label selector (Kubernetes syntax); none by default.
    pub label_selector: Option<String>,
    /// Only reconcile primaries matching this field selector (Kubernetes syntax); none by default.
    pub field_selector: Option<String>,
    /// Which changes of a primary lead to a reconcile; [`Filters::default`] by default.
    pub filters: Filters,
    /// Skip updates that do not change `metadata.generation`; on by default.
    pub generation_aware: bool,
    /// Retry policy; the host's default ([`Retry::default`]) applies when absent.
    pub retry: Option<Retry>,
    /// Reconcile at least this often even without events; the host's default (10 hours) applies
    /// when absent, and zero turns it off.
    pub max_reconcile_interval: Option<Duration>,
    /// Per-object rate limit; none when absent.
    pub rate_limit: Option<RateLimit>,
    /// How many objects of this plugin may be reconciled at once; the host's default applies
    /// when absent.
    pub max_concurrent_reconciles: Option<u32>,
    /// The secondary kinds whose changes reconcile primaries, in the order declared; none by
    /// default.
    pub watches: Vec<Watch>,
    /// Reconcile every cached primary this often; never when absent or zero.
    pub resync_period: Option<Duration>,
    /// The name of the primary's finalizer; [`Finalizer::Derived`] (`wasmop.dev/<name>`) by
    /// default. The host uses it only when the plugin needs one: it implements
    /// [`Cleaner`](crate::Cleaner), or it has dependents owned by annotations.
    pub finalizer: Finalizer,
    /// The kinds the plugin's reconciles create and keep in shape; none by default.
    pub dependents: Vec<Dependent>,
    /// The host keeps the primary's `Ready`, `Reconciling` and `Degraded` conditions from the
    /// outcome's readiness ([`Outcome::ready`](crate::Outcome::ready)) and from failures. On by
    /// default for custom resources (a primary with an API group); off for core kinds (a
    /// ConfigMap has no status to keep them in) and with [`Config::own_conditions`].
    pub conditions: bool,
    /// The paths the plugin reads of its primaries; the host's cache keeps those, `status` and
    /// the metadata. `None` (the default) keeps whole objects.
    pub projection: Option<Vec<String>>,
    /// The primary's predicate; see [`Config::predicate`].
    pub predicate: Option<Predicate>,
    /// Outgoing HTTP the plugin asks for; see [`Config::http`].
    pub http: Option<HttpGrant>,
    /// Polling of external state; see [`Config::polling`].
    pub polling: Option<Polling>,
    /// Inbound events; see [`Config::inbound`].
    pub inbound: Option<Inbound>,
    /// Objects outside the cluster the reconciles keep in shape.
    pub external_dependents: Vec<ExternalDependent>,
    /// How a host run with `--shards` splits the primaries across its replicas; the host's
    /// default ([`Sharding::Uid`]) when absent. See [`Config::sharding`].
    pub sharding: Option<Sharding>,
    /// The admission and conversion webhooks the plugin serves; none by default. See
    /// [`Config::webhook`].
    pub webhooks: Vec<Webhook>,
}

/// How a host run with `--shards` splits a plugin's primaries across its replicas (the host's own
/// type, `wasmop_core::settings::Sharding`): by UID (the default), by namespace, or not at all
/// (the elected leader runs every primary). Without `--shards` the host runs every primary
/// itself, whatever this says.
pub use wasmop_core::settings::Sharding;

/// `sharding` in the contract's words.
fn sharding_to_wit(sharding: Sharding) -> wit::Sharding {
    match sharding {
        Sharding::Uid => wit::Sharding::Uid,
        Sharding::Namespace => wit::Sharding::Namespace,
        Sharding::None => wit::Sharding::None,
    }
}

/// The primary's finalizer (JOSDK's finalizer support), used only when the plugin needs one: it
/// implements [`Cleaner`](crate::Cleaner) or has dependents owned by annotations (which the
/// garbage collector cannot delete). With one, the host adds it before the first reconcile, runs
/// [`Cleaner::cleanup`](crate::Cleaner::cleanup) once the primary is marked for deletion, and
/// removes it afterwards. Primaries that carry it while the plugin no longer needs one (after an
/// upgrade) are released once.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub enum Finalizer {
    /// `wasmop.dev/<plugin name>`.
    #[default]
    Derived,
    /// This qualified name, e.g. `example.com/cleanup`.
    Named(String),
    /// No finalizer even when one is needed: `cleanup` never runs, and dependents owned by
    /// annotations outlive their primary.
    Disabled,
}

impl Config {
    /// A plugin named `name` reconciling objects of kind `primary`, generation aware, with the
    /// default [`Filters`], no selectors, no rate limit, no watches, no resync, and the host's
    /// default retry policy, reconcile interval and concurrency.
    ///
    /// ```
    /// use wasmop_guest::{Config, Filters, Kind};
    ///
    /// let config = Config::new("webpage", Kind::namespaced("sample.wasmop.dev", "v1", "WebPage"));
    /// assert_eq!(config.filters, Filters::default());
    /// assert_eq!(config.retry, None);
    /// assert_eq!(config.rate_limit, None);
    /// assert!(config.watches.is_empty());
    /// ```
    pub fn new(name: impl Into<String>, primary: Kind) -> Self {
        let conditions = !primary.group.is_empty();
        Self {
            name: name.into(),
            primary,
            label_selector: None,
            field_selector: None,
            filters: Filters::default(),
            generation_aware: true,
            retry: None,
            max_reconcile_interval: None,
            rate_limit: None,
            max_concurrent_reconciles: None,
            watches: Vec::new(),
            resync_period: None,
            finalizer: Finalizer::Derived,
            dependents: Vec::new(),
            conditions,
            projection: None,
            predicate: None,
            http: None,
            polling: None,
            inbound: None,
            external_dependents: Vec::new(),
            sharding: None,
            webhooks: Vec::new(),
        }
    }

    /// The paths of the primaries the plugin reads: the host's cache keeps only these, the
    /// metadata and the `status` (which the host reads to write only changes), and the plugin is
    /// given only these and the metadata, in `reconcile` and every other call and read. Name
    /// `status` (or parts of it) if the plugin reads its own status.
    ///
    /// ```
    /// use wasmop_guest::{Config, Kind};
    ///
    /// let config = Config::new("greeting", Kind::namespaced("example.wasmop.dev", "v1", "Greeting")).project(["spec"]);
    /// assert_eq!(config.projection, Some(vec!["spec".to_string()]));
    /// ```
    #[must_use]
    pub fn project<P: Into<String>>(mut self, paths: impl IntoIterator<Item = P>) -> Self {
        self.projection = Some(paths.into_iter().map(Into::into).collect());
        self
    }

    /// The plugin keeps the primary's conditions itself: the host writes none of `Ready`,
    /// `Reconciling` and `Degraded`, and ignores the outcome's readiness.
    ///
    /// ```
    /// # use wasmop_guest::{Config, Kind};
    /// let config = Config::new("cm", Kind::namespaced("", "v1", "ConfigMap")).own_conditions();
    /// assert!(!config.conditions);
    /// ```
    #[must_use]
    pub fn own_conditions(mut self) -> Self {
        self.conditions = false;
        self
    }

    /// Only reconcile primaries matching this label selector, in Kubernetes syntax
    /// (`app=web,tier!=db`, `env in (prod,staging)`). None by default.
    ///
    /// JOSDK `labelSelector`; controller-runtime `predicate.LabelSelectorPredicate` or a cache
    /// selector. The host applies it to its watch, so other objects are never even cached.
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

    /// Only reconcile primaries matching this field selector, in Kubernetes syntax
    /// (`metadata.name=web`, `metadata.namespace!=kube-system`). None by default.
    ///
    /// controller-runtime's cache field selector (`cache.Options.ByObject[..].Field`); JOSDK has
    /// none. The host applies it to its watch; which fields are selectable depends on the kind
    /// (`metadata.name` and `metadata.namespace` always are).
    ///
    /// ```
    /// # use wasmop_guest::{Config, Kind};
    /// let config = Config::new("cm", Kind::namespaced("", "v1", "ConfigMap"))
    ///     .field_selector("metadata.name!=kube-root-ca.crt");
    /// assert_eq!(config.field_selector.as_deref(), Some("metadata.name!=kube-root-ca.crt"));
    /// ```
    #[must_use]
    pub fn field_selector(mut self, selector: impl Into<String>) -> Self {
        self.field_selector = Some(selector.into());
        self
    }

    /// Which changes of a primary lead to a reconcile, instead of [`Filters::default`] (create,
    /// update and delete on; annotation and label changes off).
    ///
    /// controller-runtime `predicate.Funcs{CreateFunc, UpdateFunc, DeleteFunc}`,
    /// `predicate.AnnotationChangedPredicate`, `predicate.LabelChangedPredicate`; JOSDK
    /// `onAddFilter` / `onUpdateFilter`.
    ///
    /// ```
    /// # use wasmop_guest::{Config, Filters, Kind};
    /// // Also reconcile when annotations change, e.g. for an annotation-driven "reconcile now".
    /// let config = Config::new("web", Kind::namespaced("example.com", "v1", "Web"))
    ///     .filters(Filters { on_annotation_change: true, ..Filters::default() });
    /// ```
    #[must_use]
    pub fn filters(mut self, filters: Filters) -> Self {
        self.filters = filters;
        self
    }

    /// Whether to skip updates of the primary that do not change `metadata.generation` (status
    /// and metadata-only updates, including the host's own status writes). On by default.
    ///
    /// JOSDK `generationAwareEventProcessing`; controller-runtime
    /// `predicate.GenerationChangedPredicate`. Finalizer changes and deletion marking still
    /// reconcile; annotation and label changes do when their [`Filters`] are on.
    ///
    /// ## Warning
    ///
    /// Objects without a `metadata.generation`, such as ConfigMaps, never change generation: the
    /// host reconciles them on every change whatever this says, but turning it off for them
    /// states the intent.
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

    /// The retry policy for failed reconciles, instead of the host's default
    /// ([`Retry::default`]: 5 attempts, 2 s, x1.5, at most 5 minutes, no jitter).
    ///
    /// JOSDK `GenericRetry`; controller-runtime's rate-limited requeue on error.
    ///
    /// ```
    /// # use std::time::Duration;
    /// # use wasmop_guest::{Config, Kind, Retry};
    /// let config = Config::new("cm", Kind::namespaced("", "v1", "ConfigMap")).retry(Retry {
    ///     max_attempts: 3,
    ///     initial_interval: Duration::from_millis(500),
    ///     multiplier: 2.0,
    ///     max_interval: Duration::from_secs(10),
    ///     jitter: 0.2,
    /// });
    /// ```
    #[must_use]
    pub fn retry(mut self, retry: Retry) -> Self {
        self.retry = Some(retry);
        self
    }

    /// Reconcile every primary at least this often, even when nothing happens to it, instead of
    /// the host's default of 10 hours. [`Duration::ZERO`] turns it off.
    ///
    /// JOSDK `maxReconciliationInterval`; controller-runtime `SyncPeriod`. The interval is armed
    /// anew after every reconcile; a shorter [`Outcome::reschedule_after`](crate::Outcome::reschedule_after)
    /// wins.
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

    /// Limits how often one object is reconciled; none by default. See [`RateLimit`].
    ///
    /// JOSDK `RateLimiter` (`LinearRateLimiter`); controller-runtime has no per-object limit.
    ///
    /// ```
    /// # use std::time::Duration;
    /// # use wasmop_guest::{Config, Kind, RateLimit};
    /// let config = Config::new("cm", Kind::namespaced("", "v1", "ConfigMap"))
    ///     .rate_limit(RateLimit { max_reconciles: 5, period: Duration::from_secs(10) });
    /// ```
    #[must_use]
    pub fn rate_limit(mut self, rate_limit: RateLimit) -> Self {
        self.rate_limit = Some(rate_limit);
        self
    }

    /// How many objects of this plugin may be reconciled at once, instead of the host's default
    /// (its `--plugin-concurrency`, 8 unless set). One object is never reconciled twice at once,
    /// whatever this says; the host's global limit still applies, and 0 counts as 1.
    ///
    /// JOSDK `maxConcurrentReconciliations`; controller-runtime `MaxConcurrentReconciles`.
    ///
    /// ```
    /// # use wasmop_guest::{Config, Kind};
    /// let config = Config::new("cm", Kind::namespaced("", "v1", "ConfigMap")).max_concurrent_reconciles(2);
    /// ```
    #[must_use]
    pub fn max_concurrent_reconciles(mut self, max: u32) -> Self {
        self.max_concurrent_reconciles = Some(max);
        self
    }

    /// Adds a secondary kind whose changes reconcile primaries; see [`Watch`]. Call it once per
    /// watch; none by default.
    ///
    /// JOSDK `InformerEventSource`; controller-runtime `Owns` and `Watches`. During a reconcile,
    /// [`Context::secondaries`](crate::Context::secondaries) gives the objects of the kind that
    /// belong to the primary.
    ///
    /// ```
    /// # use wasmop_guest::{Config, Kind, Watch};
    /// let config = Config::new("web", Kind::namespaced("example.com", "v1", "Web"))
    ///     .watch(Watch::new(Kind::namespaced("apps", "v1", "Deployment")))
    ///     .watch(Watch::new(Kind::namespaced("", "v1", "ConfigMap")).label_selector("app=web").mapped_by_plugin());
    /// assert_eq!(config.watches[1].label_selector.as_deref(), Some("app=web"));
    /// ```
    #[must_use]
    pub fn watch(mut self, watch: Watch) -> Self {
        self.watches.push(watch);
        self
    }

    /// Reconciles every cached primary this often, whatever happened to it; never by default, and
    /// [`Duration::ZERO`] turns it off.
    ///
    /// controller-runtime `SyncPeriod`. Unlike
    /// [`max_reconcile_interval`](Config::max_reconcile_interval), which is armed anew after each
    /// reconcile of an object, this reconciles every cached primary once per period, at background
    /// priority: after the reconciles that events asked for.
    ///
    /// ```
    /// # use std::time::Duration;
    /// # use wasmop_guest::{Config, Kind};
    /// let config = Config::new("cm", Kind::namespaced("", "v1", "ConfigMap")).resync_period(Duration::from_secs(600));
    /// assert_eq!(config.resync_period, Some(Duration::from_secs(600)));
    /// ```
    #[must_use]
    pub fn resync_period(mut self, period: Duration) -> Self {
        self.resync_period = Some(period);
        self
    }

    /// Names the primary's finalizer instead of `wasmop.dev/<plugin name>`.
    ///
    /// JOSDK `@ControllerConfiguration(finalizerName)`.
    ///
    /// ```
    /// # use wasmop_guest::{Config, Finalizer, Kind};
    /// let config = Config::new("web", Kind::namespaced("example.com", "v1", "Web")).finalizer("example.com/cleanup");
    /// assert_eq!(config.finalizer, Finalizer::Named("example.com/cleanup".into()));
    /// ```
    #[must_use]
    pub fn finalizer(mut self, name: impl Into<String>) -> Self {
        self.finalizer = Finalizer::Named(name.into());
        self
    }

    /// No finalizer, even when the plugin would need one: the host never blocks the primary's
    /// deletion, [`Cleaner::cleanup`](crate::Cleaner::cleanup) never runs, and dependents owned
    /// by annotations outlive their primary. Plugins without cleanup get no finalizer anyway.
    ///
    /// ```
    /// # use wasmop_guest::{Config, Finalizer, Kind};
    /// let config = Config::new("web", Kind::namespaced("example.com", "v1", "Web")).no_finalizer();
    /// assert_eq!(config.finalizer, Finalizer::Disabled);
    /// ```
    #[must_use]
    pub fn no_finalizer(mut self) -> Self {
        self.finalizer = Finalizer::Disabled;
        self
    }

    /// Declares a dependent: a kind whose desired objects
    /// [`Reconciler::desired`](crate::Reconciler::desired) returns and the host applies.
    ///
    /// JOSDK's managed dependent resources (`@Workflow(dependents = ...)`).
    ///
    /// ```
    /// # use wasmop_guest::{Config, Dependent, Kind};
    /// let config = Config::new("web", Kind::namespaced("example.com", "v1", "Web"))
    ///     .dependent(Dependent::new("html", Kind::namespaced("", "v1", "ConfigMap").plural("configmaps")));
    /// assert_eq!(config.dependents[0].name, "html");
    /// ```
    #[must_use]
    pub fn dependent(mut self, dependent: Dependent) -> Self {
        self.dependents.push(dependent);
        self
    }

    /// Only events of the primary for which `predicate` holds reconcile (controller-runtime's
    /// `WithEventFilter`); it replaces the update filtering ([`Config::generation_aware`], label
    /// and annotation changes), while the create, update and delete switches of
    /// [`Filters`] still apply. The host evaluates the built-in terms itself and calls
    /// [`Reconciler::filter`](crate::Reconciler::filter) for plugin terms only when their answer
    /// can still change the result, with the object as its cache holds it and, for an update,
    /// the previous version; a call that fails lets the event pass. Test it with
    /// [`FakeHost::reconciles_on`](crate::testing::FakeHost::reconciles_on).
    ///
    /// ```
    /// use wasmop_guest::{Config, Kind, Predicate};
    ///
    /// // Spec changes, and label changes the plugin's "not-only-tier" filter passes.
    /// let config = Config::new("web", Kind::namespaced("example.com", "v1", "Web"))
    ///     .predicate(Predicate::generation_changed().or(Predicate::labels_changed().and(Predicate::plugin("not-only-tier"))));
    /// assert!(config.predicate.is_some());
    /// ```
    #[must_use]
    pub fn predicate(mut self, predicate: Predicate) -> Self {
        self.predicate = Some(predicate);
        self
    }

    /// Asks for outgoing HTTP to the grant's origins, allowed in
    /// [`Reconciler::fetch`](crate::Reconciler::fetch), `fetch_all`, `apply_external` and
    /// `delete_external` only.
    #[must_use]
    pub fn http(mut self, grant: HttpGrant) -> Self {
        self.http = Some(grant);
        self
    }

    /// Polls external state ([`Reconciler::fetch`](crate::Reconciler::fetch) or `fetch_all`).
    #[must_use]
    pub fn polling(mut self, polling: Polling) -> Self {
        self.polling = Some(polling);
        self
    }

    /// Accepts inbound events ([`Reconciler::map_inbound`](crate::Reconciler::map_inbound)).
    #[must_use]
    pub fn inbound(mut self, inbound: Inbound) -> Self {
        self.inbound = Some(inbound);
        self
    }

    /// Declares an external dependent.
    #[must_use]
    pub fn external_dependent(mut self, dependent: ExternalDependent) -> Self {
        self.external_dependents.push(dependent);
        self
    }

    /// How a host run with `--shards` splits this plugin's primaries across its replicas, instead
    /// of by UID (the host's default). [`Sharding::None`] runs the plugin on the elected leader
    /// alone: for a plugin whose reconciles must not run on two replicas at once even for
    /// different primaries, or that must see every primary. A deploy-time override (`sharding`
    /// in the host's configuration file or a `ReconcilerPlugin`'s `spec.overrides`) beats it;
    /// without `--shards` it changes nothing.
    ///
    /// Sharded replicas are wasmop's own: JOSDK and controller-runtime run a controller on the
    /// leader alone (leader election), as [`Sharding::None`] does.
    ///
    /// ```
    /// # use wasmop_guest::{Config, Kind, Sharding};
    /// let config = Config::new("quota", Kind::cluster("example.com", "v1", "Quota")).sharding(Sharding::None);
    /// assert_eq!(config.sharding, Some(Sharding::None));
    /// ```
    #[must_use]
    pub fn sharding(mut self, sharding: Sharding) -> Self {
        self.sharding = Some(sharding);
        self
    }

    /// Serves `webhook` through the host: the API server calls the host, and the host calls the
    /// plugin's [`Validator`](crate::Validator), [`Defaulter`](crate::Defaulter) or
    /// [`Converter`](crate::Converter), which the plugin must implement (else the host refuses
    /// it at load). At most one webhook of each type.
    ///
    /// ```
    /// use wasmop_guest::{Config, FailurePolicy, Kind, Webhook};
    ///
    /// let config = Config::new("web", Kind::namespaced("example.com", "v1", "Web"))
    ///     .webhook(Webhook::validating().failure_policy(FailurePolicy::Ignore));
    /// assert_eq!(config.webhooks[0].failure_policy, FailurePolicy::Ignore);
    /// ```
    #[must_use]
    pub fn webhook(mut self, webhook: Webhook) -> Self {
        self.webhooks.push(webhook);
        self
    }

    /// The WIT form; `cleanup` says whether the reconciler implements [`Cleaner`](crate::Cleaner).
    pub(crate) fn into_wit(self, cleanup: bool) -> wit::PluginConfig {
        wit::PluginConfig {
            primary: self.primary.to_wit(),
            name: self.name,
            label_selector: self.label_selector,
            field_selector: self.field_selector,
            filters: self.filters.to_wit(),
            generation_aware: self.generation_aware,
            retry: self.retry.map(|retry| wit::RetryPolicy {
                max_attempts: retry.max_attempts,
                initial_interval_ms: millis(retry.initial_interval),
                multiplier: retry.multiplier,
                max_interval_ms: millis(retry.max_interval),
                jitter: retry.jitter,
            }),
            max_reconcile_interval_ms: self.max_reconcile_interval.map(millis),
            rate_limit: self
                .rate_limit
                .map(|limit| wit::RateLimit { max_reconciles: limit.max_reconciles, period_ms: millis(limit.period) }),
            max_concurrent_reconciles: self.max_concurrent_reconciles,
            watches: self.watches.into_iter().map(Watch::into_wit).collect(),
            resync_period_ms: self.resync_period.map(millis),
            finalizer: match self.finalizer {
                Finalizer::Derived => wit::Finalizer::Derived,
                Finalizer::Named(name) => wit::Finalizer::Named(name),
                Finalizer::Disabled => wit::Finalizer::Disabled,
            },
            cleanup,
            dependents: self.dependents.into_iter().map(Dependent::into_wit).collect(),
            conditions: self.conditions,
            projection: self.projection,
            predicate: self.predicate.map(Predicate::into_wit),
            http: self.http.map(HttpGrant::into_wit),
            polling: self.polling.map(Polling::into_wit),
            inbound: self.inbound.map(Inbound::into_wit),
            external_dependents: self.external_dependents.into_iter().map(ExternalDependent::into_wit).collect(),
            sharding: self.sharding.map(sharding_to_wit),
            webhooks: self.webhooks.into_iter().map(Webhook::into_wit).collect(),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::__private::{Implements, describe};
    use crate::{Context, Error, Outcome, Reconciler};

    struct Defaults;

    impl Reconciler for Defaults {
        type Primary = serde_json::Value;

        fn config() -> Config {
            Config::new("defaults", Kind::namespaced("example.com", "v1", "Thing"))
        }

        fn reconcile(_: Self::Primary, _: &Context) -> Result<Outcome, Error> {
            Ok(Outcome::done())
        }
    }

    struct Everything;

    impl Reconciler for Everything {
        type Primary = serde_json::Value;

        fn config() -> Config {
            Config::new("everything", Kind::cluster("example.com", "v2", "Policy").plural("policies"))
                .label_selector("app=web")
                .field_selector("metadata.name!=skip")
                .filters(Filters {
                    on_create: false,
                    on_delete: false,
                    on_annotation_change: true,
                    on_label_change: true,
                    ..Filters::default()
                })
                .generation_aware(false)
                .retry(Retry {
                    max_attempts: 3,
                    initial_interval: Duration::from_millis(250),
                    multiplier: 2.0,
                    max_interval: Duration::from_secs(10),
                    jitter: 0.25,
                })
                .max_reconcile_interval(Duration::ZERO)
                .rate_limit(RateLimit { max_reconciles: 2, period: Duration::from_millis(3_500) })
                .max_concurrent_reconciles(4)
                .watch(Watch::new(Kind::namespaced("", "v1", "ConfigMap").plural("configmaps")))
                .watch(
                    Watch::new(Kind::cluster("", "v1", "Namespace"))
                        .label_selector("team=web")
                        .field_selector("metadata.name!=kube-system")
                        .mapped_by_plugin(),
                )
                .watch(Watch::new(Kind::namespaced("", "v1", "Secret")).namespace("shared").cluster("edge").annotated())
                .resync_period(Duration::from_secs(90))
                .sharding(Sharding::Namespace)
        }

        fn reconcile(_: Self::Primary, _: &Context) -> Result<Outcome, Error> {
            Ok(Outcome::done())
        }
    }

    #[test]
    fn describe_with_defaults() {
        let config = describe::<Defaults>(Implements::default());
        assert_eq!(config.name, "defaults");
        assert_eq!(
            (config.primary.group.as_str(), config.primary.version.as_str(), config.primary.kind.as_str()),
            ("example.com", "v1", "Thing")
        );
        assert_eq!(config.primary.plural, None);
        assert!(config.primary.namespaced);
        assert_eq!(config.label_selector, None);
        assert_eq!(config.field_selector, None);
        let f = config.filters;
        assert_eq!(
            (f.on_create, f.on_update, f.on_delete, f.on_annotation_change, f.on_label_change),
            (true, true, true, false, false)
        );
        assert!(config.generation_aware);
        assert!(config.retry.is_none());
        assert_eq!(config.max_reconcile_interval_ms, None);
        assert!(config.rate_limit.is_none());
        assert_eq!(config.max_concurrent_reconciles, None);
        assert!(config.watches.is_empty());
        assert_eq!(config.resync_period_ms, None);
        assert!(matches!(config.finalizer, wit::Finalizer::Derived));
        assert!(!config.cleanup, "no Cleaner: the host needs no finalizer for cleanup");
        assert_eq!(config.sharding, None, "the host's default");
    }

    #[test]
    fn describe_with_every_setting() {
        let config = describe::<Everything>(Implements { cleanup: true, ..Implements::default() });
        assert_eq!(config.primary.plural.as_deref(), Some("policies"));
        assert!(!config.primary.namespaced);
        assert_eq!(config.label_selector.as_deref(), Some("app=web"));
        assert_eq!(config.field_selector.as_deref(), Some("metadata.name!=skip"));
        let f = config.filters;
        assert_eq!(
            (f.on_create, f.on_update, f.on_delete, f.on_annotation_change, f.on_label_change),
            (false, true, false, true, true)
        );
        assert!(!config.generation_aware);
        let retry = config.retry.expect("a retry policy");
        assert_eq!(retry.max_attempts, 3);
        assert_eq!(retry.initial_interval_ms, 250);
        assert_eq!(retry.multiplier, 2.0);
        assert_eq!(retry.max_interval_ms, 10_000);
        assert_eq!(retry.jitter, 0.25);
        assert_eq!(config.max_reconcile_interval_ms, Some(0), "zero turns the interval off");
        let limit = config.rate_limit.expect("a rate limit");
        assert_eq!((limit.max_reconciles, limit.period_ms), (2, 3_500));
        assert_eq!(config.max_concurrent_reconciles, Some(4));
        assert_eq!(config.resync_period_ms, Some(90_000));
        assert_eq!(config.sharding, Some(wit::Sharding::Namespace));
        let [owned, namespaces, secrets] = &config.watches[..] else { panic!("three watches: {:?}", config.watches) };
        assert_eq!(
            (owned.kind.kind.as_str(), owned.kind.plural.as_deref(), owned.kind.namespaced),
            ("ConfigMap", Some("configmaps"), true)
        );
        assert_eq!(
            (&owned.namespace, &owned.label_selector, &owned.field_selector, &owned.cluster),
            (&None, &None, &None, &None)
        );
        assert!(matches!(owned.mapper, wit::Mapper::OwnerReferences(wit::Owners::Controller)));
        assert!(!namespaces.kind.namespaced);
        assert_eq!(namespaces.label_selector.as_deref(), Some("team=web"));
        assert_eq!(namespaces.field_selector.as_deref(), Some("metadata.name!=kube-system"));
        assert!(matches!(namespaces.mapper, wit::Mapper::Plugin));
        assert_eq!((secrets.namespace.as_deref(), secrets.cluster.as_deref()), (Some("shared"), Some("edge")));
        assert!(matches!(secrets.mapper, wit::Mapper::Annotations));
    }

    #[test]
    fn watch_defaults_and_setters() {
        let kind = Kind::namespaced("apps", "v1", "Deployment");
        let watch = Watch::new(kind.clone());
        assert_eq!(watch.kind, kind);
        assert_eq!(watch.mapper, Mapper::ControllerOwner);
        assert_eq!(
            (watch.namespace, watch.label_selector, watch.field_selector, watch.cluster),
            (None, None, None, None)
        );
        let watch = Watch::new(kind).namespace("ns").label_selector("a=b").field_selector("c=d").cluster("remote");
        assert_eq!(watch.namespace.as_deref(), Some("ns"));
        assert_eq!(watch.label_selector.as_deref(), Some("a=b"));
        assert_eq!(watch.field_selector.as_deref(), Some("c=d"));
        assert_eq!(watch.cluster.as_deref(), Some("remote"));
        // The last mapper setter wins.
        assert_eq!(watch.clone().annotated().owned_by_controller().mapper, Mapper::ControllerOwner);
        assert_eq!(watch.clone().owned_by_any().mapper, Mapper::AnyOwner);
        assert_eq!(watch.clone().annotated().mapper, Mapper::Annotations);
        assert_eq!(watch.clone().mapped_by_plugin().mapper, Mapper::Plugin);
        assert_eq!(watch.referenced_by_primary().mapper, Mapper::PrimaryReferences);
    }

    #[test]
    fn every_mapper_goes_through_describe() {
        let kind = || Kind::namespaced("", "v1", "ConfigMap");
        let config = Config::new("m", Kind::namespaced("example.com", "v1", "Thing"))
            .watch(Watch::new(kind()).owned_by_controller())
            .watch(Watch::new(kind()).owned_by_any())
            .watch(Watch::new(kind()).annotated())
            .watch(Watch::new(kind()).mapped_by_plugin())
            .watch(Watch::new(kind()).referenced_by_primary())
            .into_wit(false);
        let mappers: Vec<_> = config.watches.into_iter().map(|watch| watch.mapper).collect();
        assert!(
            matches!(
                mappers[..],
                [
                    wit::Mapper::OwnerReferences(wit::Owners::Controller),
                    wit::Mapper::OwnerReferences(wit::Owners::Any),
                    wit::Mapper::Annotations,
                    wit::Mapper::Plugin,
                    wit::Mapper::PrimaryReferences,
                ]
            ),
            "{mappers:?}"
        );
    }

    #[test]
    fn every_sharding_goes_through_describe() {
        let kind = || Kind::namespaced("", "v1", "ConfigMap");
        let described: Vec<_> = [Sharding::Uid, Sharding::Namespace, Sharding::None]
            .into_iter()
            .map(|sharding| Config::new("s", kind()).sharding(sharding).into_wit(false).sharding)
            .collect();
        assert_eq!(described, [Some(wit::Sharding::Uid), Some(wit::Sharding::Namespace), Some(wit::Sharding::None)]);
        assert_eq!(Sharding::default(), Sharding::Uid);
    }

    #[test]
    fn zero_resync_period_goes_through_as_zero() {
        let config =
            Config::new("r", Kind::namespaced("", "v1", "ConfigMap")).resync_period(Duration::ZERO).into_wit(false);
        assert_eq!(config.resync_period_ms, Some(0));
    }

    #[test]
    fn retry_default_has_no_jitter_and_goes_through_describe() {
        assert_eq!(Retry::default().jitter, 0.0);
        let config = Config::new("r", Kind::namespaced("", "v1", "ConfigMap")).retry(Retry::default()).into_wit(false);
        let retry = config.retry.expect("a retry policy");
        assert_eq!((retry.max_attempts, retry.initial_interval_ms, retry.max_interval_ms), (5, 2_000, 300_000));
        assert_eq!((retry.multiplier, retry.jitter), (1.5, 0.0));
    }

    #[test]
    fn webhooks_go_through_describe() {
        use crate::{FailurePolicy, Operation, Webhook};
        let config = Config::new("w", Kind::namespaced("example.com", "v1", "Thing"))
            .webhook(
                Webhook::validating()
                    .kinds([Kind::namespaced("", "v1", "ConfigMap")])
                    .operations([Operation::Delete])
                    .failure_policy(FailurePolicy::Ignore)
                    .timeout(Duration::from_secs(3)),
            )
            .webhook(Webhook::conversion())
            .into_wit(false);
        let [validating, conversion] = &config.webhooks[..] else { panic!("two webhooks: {:?}", config.webhooks) };
        assert!(matches!(validating.webhook_type, wit::WebhookType::Validating));
        assert_eq!(validating.kinds[0].kind, "ConfigMap");
        assert!(matches!(validating.operations[..], [wit::Operation::Delete]));
        assert!(matches!(validating.failure_policy, wit::FailurePolicy::Ignore));
        assert_eq!(validating.timeout_ms, Some(3_000));
        assert!(matches!(conversion.webhook_type, wit::WebhookType::Conversion));
        assert!(matches!(conversion.failure_policy, wit::FailurePolicy::Fail), "kubebuilder's default");
        assert_eq!((conversion.timeout_ms, conversion.operations.len()), (None, 0), "the host's defaults");
    }

    /// Declares a validating webhook without implementing Validator.
    struct Undeclared;

    impl Reconciler for Undeclared {
        type Primary = serde_json::Value;

        fn config() -> Config {
            Config::new("undeclared", Kind::namespaced("example.com", "v1", "Thing"))
                .webhook(crate::Webhook::validating())
        }

        fn reconcile(_: Self::Primary, _: &Context) -> Result<Outcome, Error> {
            Ok(Outcome::done())
        }
    }

    #[test]
    #[should_panic(
        expected = "plugin undeclared declares a validating webhook but does not implement wasmop_guest::Validator"
    )]
    fn a_webhook_without_its_trait_fails_describe() {
        describe::<Undeclared>(Implements { default: true, convert: true, ..Implements::default() });
    }

    #[test]
    fn a_webhook_with_its_trait_is_described() {
        let config = describe::<Undeclared>(Implements { validate: true, ..Implements::default() });
        assert_eq!(config.webhooks.len(), 1);
    }

    #[test]
    fn durations_saturate() {
        let config = Config::new("r", Kind::namespaced("", "v1", "ConfigMap"))
            .rate_limit(RateLimit { max_reconciles: 1, period: Duration::MAX })
            .into_wit(false);
        assert_eq!(config.rate_limit.map(|limit| limit.period_ms), Some(u64::MAX));
    }
}
