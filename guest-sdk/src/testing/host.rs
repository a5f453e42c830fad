//! The fake host itself: the objects a plugin reads, the failures to inject, what it logged,
//! and a run of one of its handlers ([`Run`]).

use std::cell::RefCell;
use std::rc::Rc;
use std::time::Duration;

use serde::Serialize;
use serde::de::DeserializeOwned;
use serde_json::Value;

use wasmop_core::retry::RetryPolicy;
use wasmop_core::settle::{Caches, View};

use super::recorded::Recorded;
use super::spec::spec_of;
use crate::context::Host;
use crate::{Cleanup, Context, DependentState, Desired, Error, Event, Kind, Level, Outcome, Phase, Reconciler};

/// A stand-in for the wasmop host: objects by kind for the plugin to read, the secondaries of the
/// primary, failures to inject, and a record of what the plugin logged.
///
/// ```
/// use wasmop_guest::k8s_openapi::api::core::v1::ConfigMap;
/// use wasmop_guest::k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;
/// use wasmop_guest::serde_json::json;
/// use wasmop_guest::testing::FakeHost;
/// use wasmop_guest::Kind;
///
/// let settings = ConfigMap {
///     metadata: ObjectMeta {
///         name: Some("settings".into()),
///         namespace: Some("default".into()),
///         ..ObjectMeta::default()
///     },
///     ..ConfigMap::default()
/// };
/// let host = FakeHost::new()
///     .with(&Kind::of::<ConfigMap>(), &settings)
///     .with(
///         &Kind::namespaced("example.com", "v1", "Widget"),
///         &json!({ "metadata": { "name": "w", "namespace": "default" } }),
///     );
/// ```
#[derive(Clone, Debug, Default)]
pub struct FakeHost {
    pub(super) objects: Vec<(Kind, Value)>,
    pub(super) secondaries: Vec<(Kind, Value)>,
    pub(super) failures: Vec<(Kind, String)>,
    pub(super) dependents: Vec<DependentState>,
    /// The store's last resourceVersion.
    pub(super) revision: u64,
    /// The fake external system: the primary's external objects, as `fetch` would find them.
    pub(super) external: Vec<crate::External>,
    /// The last inbound payload mapped to the primary, as the host caches it.
    pub(super) inbound: Option<Value>,
    /// The record the host was loaded from ([`FakeHost::from_record`]).
    pub(super) recorded: Option<Box<Recorded>>,
}

impl FakeHost {
    /// An empty host: every `get` finds nothing, every `list` is empty, and the primary has no
    /// secondaries.
    ///
    /// ```
    /// let host = wasmop_guest::testing::FakeHost::new();
    /// ```
    pub fn new() -> Self {
        Self::default()
    }

    /// The primary's external state as `fetch` would find it: what `desired`, `reconcile` and
    /// [`Context::external`](crate::Context::external) see, and what the workflow compares the
    /// desired external objects with. [`FakeHost::run_until_stable`] plays the external system:
    /// it applies and deletes these objects as the host's workflow would call the plugin's
    /// `apply_external` and `delete_external` (without calling them: test your external client
    /// on its own), giving new objects the IDs `fake-1`, `fake-2`, ...
    ///
    /// ```
    /// use wasmop_guest::External;
    /// use wasmop_guest::serde_json::json;
    /// use wasmop_guest::testing::FakeHost;
    ///
    /// let host = FakeHost::new().with_external(&[External::new("record", "www", &json!({ "value": "1" })).with_id("r1")]);
    /// assert_eq!(host.external()[0].id.as_deref(), Some("r1"));
    /// ```
    #[must_use]
    pub fn with_external(mut self, objects: &[crate::External]) -> Self {
        self.external = objects.to_vec();
        self
    }

    /// The last inbound payload mapped to the primary, as a host caching inbound events
    /// ([`Inbound::caching`](crate::Inbound::caching)) gives it: what
    /// [`Context::inbound`](crate::Context::inbound) returns in `reconcile`.
    ///
    /// ```
    /// use wasmop_guest::serde_json::json;
    /// use wasmop_guest::testing::FakeHost;
    ///
    /// let host = FakeHost::new().with_inbound(&json!({ "ref": "main" }));
    /// ```
    #[must_use]
    pub fn with_inbound(mut self, payload: &Value) -> Self {
        self.inbound = Some(payload.clone());
        self
    }

    /// The fake external system's objects now.
    pub fn external(&self) -> &[crate::External] {
        &self.external
    }

    /// Adds an object of kind `kind`: a typed object (e.g. a `k8s_openapi` type) or a
    /// [`serde_json::Value`]. Its `metadata.name` and `metadata.namespace` are what `get` and
    /// `list` match on. An object of the same kind, namespace and name already there is
    /// replaced, as a write to the API server would: this is how a test changes an object
    /// between two runs. Panics if it does not serialize to a JSON object.
    ///
    /// ```
    /// use wasmop_guest::serde_json::json;
    /// use wasmop_guest::testing::FakeHost;
    /// use wasmop_guest::Kind;
    ///
    /// let mut host = FakeHost::new();
    /// host.insert(
    ///     &Kind::namespaced("", "v1", "Secret"),
    ///     &json!({ "metadata": { "name": "db", "namespace": "default" } }),
    /// );
    /// ```
    pub fn insert(&mut self, kind: &Kind, object: &impl Serialize) -> &mut Self {
        let object = to_object("insert", kind, object);
        replace(&mut self.objects, kind, object);
        self
    }

    /// Adds an object given as JSON text, replacing one of the same kind, namespace and name as
    /// [`FakeHost::insert`] does. Panics if the text is not a JSON object.
    ///
    /// ```
    /// use wasmop_guest::testing::FakeHost;
    /// use wasmop_guest::Kind;
    ///
    /// let mut host = FakeHost::new();
    /// host.insert_json(
    ///     &Kind::namespaced("", "v1", "ConfigMap"),
    ///     r#"{"metadata": {"name": "settings", "namespace": "default"}}"#,
    /// );
    /// ```
    pub fn insert_json(&mut self, kind: &Kind, json: &str) -> &mut Self {
        let object: Value =
            serde_json::from_str(json).unwrap_or_else(|e| panic!("FakeHost::insert_json: not JSON: {e}"));
        self.insert(kind, &object)
    }

    /// [`FakeHost::insert`], builder style.
    ///
    /// ```
    /// use wasmop_guest::serde_json::json;
    /// use wasmop_guest::testing::FakeHost;
    /// use wasmop_guest::Kind;
    ///
    /// let host = FakeHost::new().with(
    ///     &Kind::cluster("", "v1", "Namespace"),
    ///     &json!({ "metadata": { "name": "default" } }),
    /// );
    /// ```
    #[must_use]
    pub fn with(mut self, kind: &Kind, object: &impl Serialize) -> Self {
        self.insert(kind, object);
        self
    }

    /// Adds a secondary of the primary: an object of kind `kind` that
    /// [`Context::secondaries`](crate::Context::secondaries) returns, as the real host does for the
    /// objects the watch's [`Mapper`](crate::Mapper) relates to the primary being reconciled. It is
    /// in the cache too, for `get` and `list`. Panics if it does not serialize to a JSON object.
    ///
    /// A secondary of the same kind, namespace and name already there is replaced.
    /// `secondaries` gives them sorted by namespace and name, and fails, as the real host does,
    /// for a kind the reconciler's [`Config`](crate::Config) declares no [`Watch`](crate::Watch)
    /// of.
    ///
    /// ```
    /// use wasmop_guest::serde_json::json;
    /// use wasmop_guest::testing::FakeHost;
    /// use wasmop_guest::Kind;
    ///
    /// let mut host = FakeHost::new();
    /// for name in ["a", "b"] {
    ///     host.insert_secondary(
    ///         &Kind::namespaced("", "v1", "ConfigMap"),
    ///         &json!({ "metadata": { "name": name, "namespace": "default" } }),
    ///     );
    /// }
    /// ```
    pub fn insert_secondary(&mut self, kind: &Kind, object: &impl Serialize) -> &mut Self {
        let object = to_object("insert_secondary", kind, object);
        replace(&mut self.secondaries, kind, object);
        self
    }

    /// [`FakeHost::insert_secondary`], builder style.
    ///
    /// ```
    /// use wasmop_guest::k8s_openapi::api::core::v1::Secret;
    /// use wasmop_guest::serde_json::json;
    /// use wasmop_guest::testing::FakeHost;
    /// use wasmop_guest::Kind;
    ///
    /// let host = FakeHost::new().with_secondary(
    ///     &Kind::of::<Secret>(),
    ///     &json!({ "metadata": { "name": "db", "namespace": "default" } }),
    /// );
    /// ```
    #[must_use]
    pub fn with_secondary(mut self, kind: &Kind, object: &impl Serialize) -> Self {
        self.insert_secondary(kind, object);
        self
    }

    /// Makes every `get`, `list` and `secondaries` of `kind` fail with `message`, as the real
    /// host does for a kind it does not watch. The plugin sees [`Error::Transient`].
    ///
    /// ```
    /// use wasmop_guest::testing::FakeHost;
    /// use wasmop_guest::Kind;
    ///
    /// let host = FakeHost::new().failing(&Kind::namespaced("", "v1", "Secret"), "not watched");
    /// ```
    #[must_use]
    pub fn failing(mut self, kind: &Kind, message: impl Into<String>) -> Self {
        self.failures.push((kind.clone(), message.into()));
        self
    }

    /// Runs `R` on `primary` (a typed object or a [`serde_json::Value`]) as a first attempt that
    /// is not the last.
    ///
    /// The primary goes through JSON as it does in the component, so a primary that does not fit
    /// `R::Primary` gives [`Error::Invalid`].
    ///
    /// ```
    /// # use wasmop_guest::{Config, Context, Error, Kind, Outcome, Reconciler};
    /// use wasmop_guest::serde_json::json;
    /// use wasmop_guest::testing::FakeHost;
    /// # struct Noop;
    /// # impl Reconciler for Noop {
    /// #     type Primary = wasmop_guest::serde_json::Value;
    /// #     fn config() -> Config { Config::new("noop", Kind::namespaced("", "v1", "ConfigMap")) }
    /// #     fn reconcile(_: Self::Primary, _: &Context) -> Result<Outcome, Error> { Ok(Outcome::done()) }
    /// # }
    ///
    /// let run = FakeHost::new().reconcile::<Noop>(&json!({ "metadata": { "name": "a" } }));
    /// assert!(run.result().is_ok());
    /// ```
    pub fn reconcile<R: Reconciler>(&self, primary: &impl Serialize) -> Run {
        self.reconcile_attempt::<R>(primary, 0, false)
    }

    /// Runs `R` on `primary` as attempt number `attempt` (0 for the first), which is the last one
    /// when `last_attempt` is true.
    ///
    /// ```
    /// # use wasmop_guest::{Config, Context, Error, Kind, Outcome, Reconciler};
    /// use wasmop_guest::serde_json::json;
    /// use wasmop_guest::testing::FakeHost;
    /// # struct Noop;
    /// # impl Reconciler for Noop {
    /// #     type Primary = wasmop_guest::serde_json::Value;
    /// #     fn config() -> Config { Config::new("noop", Kind::namespaced("", "v1", "ConfigMap")) }
    /// #     fn reconcile(_: Self::Primary, _: &Context) -> Result<Outcome, Error> { Ok(Outcome::done()) }
    /// # }
    ///
    /// let run = FakeHost::new().reconcile_attempt::<Noop>(&json!({}), 5, true);
    /// ```
    pub fn reconcile_attempt<R: Reconciler>(&self, primary: &impl Serialize, attempt: u32, last_attempt: bool) -> Run {
        let json = serde_json::to_string(primary)
            .unwrap_or_else(|e| panic!("FakeHost::reconcile: the primary does not serialize: {e}"));
        self.reconcile_json::<R>(&json, attempt, last_attempt)
    }

    /// Runs `R` on a primary given as JSON text, exactly as the host passes it.
    ///
    /// ```
    /// # use wasmop_guest::{Config, Context, Error, Kind, Outcome, Reconciler};
    /// use wasmop_guest::testing::FakeHost;
    /// # struct Strict;
    /// # impl Reconciler for Strict {
    /// #     type Primary = wasmop_guest::k8s_openapi::api::core::v1::ConfigMap;
    /// #     fn config() -> Config { Config::new("strict", Kind::namespaced("", "v1", "ConfigMap")) }
    /// #     fn reconcile(_: Self::Primary, _: &Context) -> Result<Outcome, Error> { Ok(Outcome::done()) }
    /// # }
    ///
    /// let run = FakeHost::new().reconcile_json::<Strict>(r#"{"data": 42}"#, 0, false);
    /// assert!(matches!(run.error(), Error::Invalid(_)));
    /// ```
    pub fn reconcile_json<R: Reconciler>(&self, json: &str, attempt: u32, last_attempt: bool) -> Run {
        let plugin = Plugin::of::<R>();
        let (ctx, logs) = self.context(&plugin, attempt, last_attempt);
        let result = crate::run::<R>(&plugin.primary_json(json.to_owned()), &ctx);
        drop(ctx);
        let logs = logs.take();
        Run {
            result,
            logs,
            request: Request { host: self.clone(), plugin, json: json.to_owned(), attempt, last_attempt },
            error_status: crate::error_status::<R>,
        }
    }

    /// Calls `R`'s [`Reconciler::error_status`] hook for `primary` after `error`, as the host
    /// does when a first attempt (not the last) fails with no retry to follow, i.e. with a
    /// permanent or invalid error. Returns the status the host would merge into `.status`.
    ///
    /// As in the component, `None` when the primary does not deserialize as `R::Primary`, when
    /// the hook returns `None`, or when what it returns is not a JSON object (the plugin's log,
    /// printed on stderr, says why).
    ///
    /// ```
    /// # use wasmop_guest::{Config, Context, Error, Kind, Outcome, Reconciler};
    /// use wasmop_guest::serde_json::json;
    /// use wasmop_guest::testing::FakeHost;
    /// # struct Noop;
    /// # impl Reconciler for Noop {
    /// #     type Primary = wasmop_guest::serde_json::Value;
    /// #     fn config() -> Config { Config::new("noop", Kind::namespaced("", "v1", "ConfigMap")) }
    /// #     fn reconcile(_: Self::Primary, _: &Context) -> Result<Outcome, Error> { Ok(Outcome::done()) }
    /// # }
    ///
    /// // Noop keeps the default hook: no error status.
    /// let status = FakeHost::new().error_status::<Noop>(&json!({}), &Error::permanent("broken"));
    /// assert_eq!(status, None);
    /// ```
    pub fn error_status<R: Reconciler>(&self, primary: &impl Serialize, error: &Error) -> Option<Value> {
        self.error_status_attempt::<R>(primary, error, 0, false)
    }

    /// [`FakeHost::error_status`] after attempt number `attempt` (0 for the first), which is the
    /// last one when `last_attempt` is true: the usual case for a transient error.
    ///
    /// ```
    /// # use wasmop_guest::{Config, Context, Error, Kind, Outcome, Reconciler};
    /// use wasmop_guest::serde_json::json;
    /// use wasmop_guest::testing::FakeHost;
    /// # struct Noop;
    /// # impl Reconciler for Noop {
    /// #     type Primary = wasmop_guest::serde_json::Value;
    /// #     fn config() -> Config { Config::new("noop", Kind::namespaced("", "v1", "ConfigMap")) }
    /// #     fn reconcile(_: Self::Primary, _: &Context) -> Result<Outcome, Error> { Ok(Outcome::done()) }
    /// # }
    ///
    /// let status = FakeHost::new().error_status_attempt::<Noop>(&json!({}), &Error::transient("down"), 5, true);
    /// ```
    pub fn error_status_attempt<R: Reconciler>(
        &self,
        primary: &impl Serialize,
        error: &Error,
        attempt: u32,
        last_attempt: bool,
    ) -> Option<Value> {
        let json = serde_json::to_string(primary)
            .unwrap_or_else(|e| panic!("FakeHost::error_status: the primary does not serialize: {e}"));
        self.error_status_json::<R>(&json, error, attempt, last_attempt)
    }

    /// [`FakeHost::error_status`] on a primary given as JSON text, exactly as the host passes it.
    ///
    /// ```
    /// # use wasmop_guest::{Config, Context, Error, Kind, Outcome, Reconciler};
    /// use wasmop_guest::testing::FakeHost;
    /// # struct Noop;
    /// # impl Reconciler for Noop {
    /// #     type Primary = wasmop_guest::k8s_openapi::api::core::v1::ConfigMap;
    /// #     fn config() -> Config { Config::new("noop", Kind::namespaced("", "v1", "ConfigMap")) }
    /// #     fn reconcile(_: Self::Primary, _: &Context) -> Result<Outcome, Error> { Ok(Outcome::done()) }
    /// # }
    ///
    /// // A primary that does not deserialize gets no error status.
    /// let status = FakeHost::new().error_status_json::<Noop>(r#"{"data": 42}"#, &Error::invalid("bad"), 0, false);
    /// assert_eq!(status, None);
    /// ```
    pub fn error_status_json<R: Reconciler>(
        &self,
        json: &str,
        error: &Error,
        attempt: u32,
        last_attempt: bool,
    ) -> Option<Value> {
        let plugin = Plugin::of::<R>();
        let (ctx, _logs) = self.context(&plugin, attempt, last_attempt);
        crate::error_status::<R>(&plugin.primary_json(json.to_owned()), error, &ctx)
    }

    /// Gives `reconcile` the state of the dependent `name`, as the host does after running the
    /// workflow; objects are typed objects or [`serde_json::Value`]s.
    ///
    /// ```
    /// use wasmop_guest::serde_json::json;
    /// use wasmop_guest::testing::FakeHost;
    /// use wasmop_guest::Phase;
    ///
    /// let host = FakeHost::new().with_dependent_state("deployment", Phase::NotReady, &[json!({ "spec": { "replicas": 1 } })]);
    /// ```
    #[must_use]
    pub fn with_dependent_state(mut self, name: &str, phase: Phase, objects: &[impl Serialize]) -> Self {
        let objects = objects.iter().map(|o| serde_json::to_value(o).expect("dependent objects serialize")).collect();
        self.dependents.push(DependentState { name: name.to_string(), phase, objects });
        self
    }

    /// Calls `R`'s [`Reconciler::desired`] for `primary`, as the host does before each reconcile.
    ///
    /// ```
    /// # use wasmop_guest::{Config, Context, Error, Kind, Outcome, Reconciler};
    /// use wasmop_guest::serde_json::json;
    /// use wasmop_guest::testing::FakeHost;
    /// # struct Noop;
    /// # impl Reconciler for Noop {
    /// #     type Primary = wasmop_guest::serde_json::Value;
    /// #     fn config() -> Config { Config::new("noop", Kind::namespaced("", "v1", "ConfigMap")) }
    /// #     fn reconcile(_: Self::Primary, _: &Context) -> Result<Outcome, Error> { Ok(Outcome::done()) }
    /// # }
    /// let desired = FakeHost::new().desired::<Noop>(&json!({ "metadata": { "name": "a" } })).unwrap();
    /// assert!(desired.is_empty());
    /// ```
    pub fn desired<R: Reconciler>(&self, primary: &impl Serialize) -> Result<Vec<Desired>, Error> {
        let plugin = Plugin::of::<R>();
        let json = plugin.primary_json(serde_json::to_string(primary).expect("the primary serializes"));
        let (ctx, _logs) = self.context(&plugin, 0, false);
        crate::desired::<R>(&json, &ctx)
    }

    /// Calls `R`'s [`Cleaner::cleanup`](crate::Cleaner::cleanup) for `primary`, as the host does
    /// once it is marked for deletion.
    ///
    /// ```
    /// # use wasmop_guest::{Cleaner, Cleanup, Config, Context, Error, Kind, Outcome, Reconciler};
    /// use wasmop_guest::serde_json::json;
    /// use wasmop_guest::testing::FakeHost;
    /// # struct Noop;
    /// # impl Reconciler for Noop {
    /// #     type Primary = wasmop_guest::serde_json::Value;
    /// #     fn config() -> Config { Config::new("noop", Kind::namespaced("", "v1", "ConfigMap")) }
    /// #     fn reconcile(_: Self::Primary, _: &Context) -> Result<Outcome, Error> { Ok(Outcome::done()) }
    /// # }
    /// # impl Cleaner for Noop {
    /// #     fn cleanup(_: Self::Primary, _: &Context) -> Result<Cleanup, Error> { Ok(Cleanup::done()) }
    /// # }
    /// let cleanup = FakeHost::new().cleanup::<Noop>(&json!({ "metadata": { "name": "a" } })).unwrap();
    /// assert!(!cleanup.keeps_finalizer());
    /// ```
    pub fn cleanup<R: crate::Cleaner>(&self, primary: &impl Serialize) -> Result<Cleanup, Error> {
        let plugin = Plugin::of::<R>();
        let json = plugin.primary_json(serde_json::to_string(primary).expect("the primary serializes"));
        let (ctx, _logs) = self.context(&plugin, 0, false);
        crate::cleanup::<R>(&json, &ctx)
    }

    /// Calls `R`'s [`Reconciler::map_secondary`] for a change of `secondary` (and its
    /// `previous` version), as the host does for a watch mapped by the plugin; its
    /// [`Context`] reads this host's objects.
    ///
    /// ```
    /// # use wasmop_guest::{Config, Context, Error, Kind, Outcome, Reconciler};
    /// use wasmop_guest::serde_json::json;
    /// use wasmop_guest::testing::FakeHost;
    /// # struct Noop;
    /// # impl Reconciler for Noop {
    /// #     type Primary = wasmop_guest::serde_json::Value;
    /// #     fn config() -> Config { Config::new("noop", Kind::namespaced("", "v1", "ConfigMap")) }
    /// #     fn reconcile(_: Self::Primary, _: &Context) -> Result<Outcome, Error> { Ok(Outcome::done()) }
    /// # }
    /// // Noop has no mapper: the default says so.
    /// assert!(FakeHost::new().map_secondary::<Noop>(&json!({}), None).is_err());
    /// ```
    pub fn map_secondary<R: Reconciler>(
        &self,
        secondary: &impl Serialize,
        previous: Option<&Value>,
    ) -> Result<Vec<crate::PrimaryRef>, String> {
        let secondary = serde_json::to_string(secondary).expect("the secondary serializes");
        let previous = previous.map(Value::to_string);
        let (ctx, _logs) = self.context(&Plugin::of::<R>(), 0, false);
        crate::map_secondary::<R>(&secondary, previous.as_deref(), &ctx)
    }

    /// Calls `R`'s [`Reconciler::map_inbound`] for an inbound event's `payload`, as the host does
    /// for `POST /plugins/<name>/events`; its [`Context`] reads this host's objects.
    pub fn map_inbound<R: Reconciler>(&self, payload: &Value) -> Result<Vec<crate::PrimaryRef>, String> {
        let (ctx, _logs) = self.context(&Plugin::of::<R>(), 0, false);
        R::map_inbound(payload, &ctx)
    }

    /// Calls `R`'s [`Reconciler::secondaries_of`] for `primary`, as the host does for watches
    /// referenced by the primary; its [`Context`] reads this host's objects.
    pub fn secondaries_of<R: Reconciler>(&self, primary: &impl Serialize) -> Result<Vec<crate::SecondaryRef>, String> {
        let plugin = Plugin::of::<R>();
        let primary = plugin.primary_json(serde_json::to_string(primary).expect("the primary serializes"));
        let (ctx, _logs) = self.context(&plugin, 0, false);
        crate::secondaries_of::<R>(&primary, &ctx)
    }

    /// Evaluates `R`'s plugin condition `name` ([`Reconciler::check`]) on `primary` and, for a
    /// ready condition, a `dependent` object, as the host's workflow does.
    pub fn check<R: Reconciler>(&self, name: &str, primary: &impl Serialize, dependent: Option<&Value>) -> bool {
        let plugin = Plugin::of::<R>();
        let primary = plugin.primary_json(serde_json::to_string(primary).expect("the primary serializes"));
        let dependent = dependent.map(Value::to_string);
        let (ctx, _logs) = self.context(&plugin, 0, false);
        crate::check::<R>(name, &primary, dependent.as_deref(), &ctx)
    }

    /// A [`Context`] for `plugin` on a copy of this host's objects, and the log it records to.
    pub(super) fn context(
        &self,
        plugin: &Plugin,
        attempt: u32,
        last_attempt: bool,
    ) -> (Context, Rc<RefCell<Vec<LogLine>>>) {
        let logs = Rc::new(RefCell::new(Vec::new()));
        let core = |objects: &[(Kind, Value)]| objects.iter().map(|(k, o)| (k.to_core(), o.clone())).collect();
        let view = View {
            caches: plugin.caches.clone(),
            objects: core(&self.objects),
            secondaries: core(&self.secondaries),
            dependents: Vec::new(),
            external: Vec::new(),
            inbound: None,
        };
        let backend = Backend { view, failures: self.failures.clone(), logs: Rc::clone(&logs) };
        let ctx = Context::new(Box::new(backend), attempt, last_attempt)
            .with_dependents(self.dependents.clone())
            .with_external(self.external.clone(), self.inbound.clone());
        (ctx, logs)
    }
}

/// Puts `object` of `kind` in `objects`, in place of the one of the same kind, namespace and
/// name if there is one.
fn replace(objects: &mut Vec<(Kind, Value)>, kind: &Kind, object: Value) {
    let same = |(k, o): &(Kind, Value)| {
        k.same_type(kind)
            && meta_str(o, "namespace") == meta_str(&object, "namespace")
            && meta_str(o, "name") == meta_str(&object, "name")
    };
    match objects.iter_mut().find(|entry| same(entry)) {
        Some(slot) => *slot = (kind.clone(), object),
        None => objects.push((kind.clone(), object)),
    }
}

/// `object` as a JSON object; panics naming `method` and `kind` if it is not one.
pub(super) fn to_object(method: &str, kind: &Kind, object: &impl Serialize) -> Value {
    let object = serde_json::to_value(object)
        .unwrap_or_else(|e| panic!("FakeHost::{method}: the {kind} does not serialize: {e}"));
    assert!(object.is_object(), "FakeHost::{method}: a {kind} must be a JSON object, got {object}");
    object
}

/// What the host knows of the plugin under test: what its caches hold ([`Caches`], the rules
/// `wasmop test` reads by too) and its primary kind.
#[derive(Clone, Debug)]
pub(super) struct Plugin {
    pub(super) caches: Caches,
    pub(super) primary: Kind,
    /// How the host retries the plugin's failed reconciles.
    pub(super) retry: RetryPolicy,
}

impl Plugin {
    pub(super) fn of<R: Reconciler>() -> Self {
        let mut config = R::config();
        // What is cached does not depend on predicates (checked where they are used).
        config.predicate = None;
        config.watches.iter_mut().for_each(|watch| watch.predicate = None);
        let retry = config.retry.clone().unwrap_or_default();
        let retry = RetryPolicy {
            max_attempts: retry.max_attempts,
            initial_interval: retry.initial_interval,
            multiplier: retry.multiplier,
            max_interval: retry.max_interval,
            jitter: retry.jitter,
        };
        Self { caches: Caches::new(&spec_of(&config)), primary: config.primary, retry }
    }

    /// `object` of `kind` as the host's cache holds it (see [`Caches::shaped`]).
    fn shaped(&self, kind: &Kind, object: &Value) -> Value {
        self.caches.shaped(&kind.to_core(), object)
    }

    /// The primary `json` as the host gives it to every handler: cut to the plugin's projection
    /// of it, if it declares one (the host's cache keeps the status too, for its own writes).
    fn primary_json(&self, json: String) -> String {
        match (self.caches.projects_primary(), serde_json::from_str::<Value>(&json)) {
            (true, Ok(object)) => self.shaped(&self.primary, &object).to_string(),
            _ => json,
        }
    }
}

/// What a [`Run`] was asked to do, kept for [`Run::error_status`].
#[derive(Debug)]
pub(super) struct Request {
    pub(super) host: FakeHost,
    pub(super) plugin: Plugin,
    pub(super) json: String,
    pub(super) attempt: u32,
    pub(super) last_attempt: bool,
}

/// The host a [`Context`] talks to in a test run: a copy of the [`FakeHost`]'s objects read by
/// the host's rules ([`View`]), the kinds it fails, and a shared log record.
struct Backend {
    view: View,
    failures: Vec<(Kind, String)>,
    logs: Rc<RefCell<Vec<LogLine>>>,
}

impl Backend {
    fn fail(&self, kind: &Kind) -> Result<(), String> {
        match self.failures.iter().find(|(failing, _)| failing.same_type(kind)) {
            Some((_, message)) => Err(message.clone()),
            None => Ok(()),
        }
    }
}

impl Host for Backend {
    fn log(&self, level: Level, message: &str, fields: &[(&str, &str)]) {
        // Shown by the test harness when the test fails.
        eprintln!("[plugin {level:?}] {message} {fields:?}");
        self.logs.borrow_mut().push(LogLine {
            level,
            message: message.to_owned(),
            fields: fields.iter().map(|(key, value)| ((*key).to_owned(), (*value).to_owned())).collect(),
        });
    }

    fn get(&self, kind: &Kind, namespace: Option<&str>, name: &str) -> Result<Option<String>, String> {
        self.fail(kind)?;
        self.view.get(&kind.to_core(), namespace, name)
    }

    fn list(&self, kind: &Kind, namespace: Option<&str>, label_selector: Option<&str>) -> Result<Vec<String>, String> {
        self.fail(kind)?;
        self.view.list(&kind.to_core(), namespace, label_selector)
    }

    fn secondaries(&self, kind: &Kind) -> Result<Vec<String>, String> {
        self.fail(kind)?;
        self.view.secondaries(&kind.to_core())
    }
}

fn meta_str<'a>(object: &'a Value, field: &str) -> Option<&'a str> {
    object["metadata"][field].as_str()
}

/// A parsed Kubernetes label selector: every requirement must hold.
#[derive(Clone, Debug, PartialEq, Eq)]
#[non_exhaustive]
pub struct LogLine {
    /// Severity.
    pub level: Level,
    /// The message.
    pub message: String,
    /// Structured fields, in the order given.
    pub fields: Vec<(String, String)>,
}

/// The result of one test reconcile, with accessors for what the host would do with it.
///
/// The accessors for a successful outcome panic, naming the error, when the reconcile failed;
/// [`Run::error`] panics when it succeeded.
///
/// ```
/// use std::time::Duration;
/// use wasmop_guest::testing::Run;
///
/// fn check(run: &Run) {
///     assert_eq!(run.reschedule_after(), Some(Duration::from_secs(60)));
///     assert!(run.events().is_empty());
/// }
/// ```
#[derive(Debug)]
pub struct Run {
    pub(super) result: Result<Outcome, Error>,
    pub(super) logs: Vec<LogLine>,
    pub(super) request: Request,
    /// `crate::error_status` for the reconciler that ran.
    pub(super) error_status: fn(&str, &Error, &Context) -> Option<Value>,
}

impl Run {
    /// What `reconcile` returned, after the SDK's checks.
    ///
    /// ```
    /// # fn f(run: &wasmop_guest::testing::Run) {
    /// assert!(run.result().is_ok());
    /// # }
    /// ```
    pub fn result(&self) -> &Result<Outcome, Error> {
        &self.result
    }

    /// What `reconcile` returned, by value.
    ///
    /// ```
    /// # fn f(run: wasmop_guest::testing::Run) {
    /// let outcome = run.into_result().expect("reconcile succeeds");
    /// # }
    /// ```
    pub fn into_result(self) -> Result<Outcome, Error> {
        self.result
    }

    /// The outcome; panics if the reconcile failed.
    ///
    /// ```
    /// # fn f(run: &wasmop_guest::testing::Run) {
    /// let outcome = run.outcome();
    /// # }
    /// ```
    pub fn outcome(&self) -> &Outcome {
        match &self.result {
            Ok(outcome) => outcome,
            Err(e) => panic!("the reconcile failed: {e}"),
        }
    }

    /// The error; panics if the reconcile succeeded.
    ///
    /// ```
    /// # fn f(run: &wasmop_guest::testing::Run) {
    /// assert!(matches!(run.error(), wasmop_guest::Error::Transient(_)));
    /// # }
    /// ```
    pub fn error(&self) -> &Error {
        match &self.result {
            Ok(outcome) => panic!("the reconcile succeeded: {outcome:?}"),
            Err(e) => e,
        }
    }

    /// How long the host would wait before it runs this failed reconcile again, by the plugin's
    /// [`Retry`](crate::Retry) policy and the host's rule: the delay the error asked for
    /// ([`Error::retry_after`]) capped at the policy's maximum interval, else the backoff of the
    /// next attempt (its nominal value, without jitter). `None` when the reconcile succeeded,
    /// failed for good (permanent, invalid), or was the last attempt.
    ///
    /// ```
    /// use std::time::Duration;
    /// use wasmop_guest::serde_json::{Value, json};
    /// use wasmop_guest::testing::FakeHost;
    /// use wasmop_guest::{Config, Context, Error, Kind, Outcome, Reconciler};
    ///
    /// struct Busy;
    /// impl Reconciler for Busy {
    ///     type Primary = Value;
    ///     fn config() -> Config { Config::new("busy", Kind::namespaced("", "v1", "ConfigMap")) }
    ///     fn reconcile(_: Value, _: &Context) -> Result<Outcome, Error> {
    ///         Err(Error::transient("the API is rate limited").retry_after(Duration::from_secs(30)))
    ///     }
    /// }
    ///
    /// let run = FakeHost::new().reconcile::<Busy>(&json!({}));
    /// assert_eq!(run.retry_after(), Some(Duration::from_secs(30)));
    /// ```
    pub fn retry_after(&self) -> Option<Duration> {
        let error = self.result.as_ref().err().filter(|e| e.is_transient())?;
        let (policy, attempt) = (&self.request.plugin.retry, self.request.attempt);
        if self.request.last_attempt || policy.is_last(attempt) {
            return None;
        }
        Some(policy.retry_delay(attempt + 1, error.retry_delay(), 0.5))
    }

    /// The status the host would merge into `.status`, if any.
    ///
    /// ```
    /// # fn f(run: &wasmop_guest::testing::Run) {
    /// assert_eq!(run.status().unwrap()["phase"], "Running");
    /// # }
    /// ```
    pub fn status(&self) -> Option<&Value> {
        self.outcome().status.as_ref()
    }

    /// The status decoded as `T`; panics if there is none or it does not decode.
    ///
    /// ```
    /// # fn f(run: &wasmop_guest::testing::Run) {
    /// #[derive(serde::Deserialize)]
    /// struct Status {
    ///     phase: String,
    /// }
    /// assert_eq!(run.status_as::<Status>().phase, "Running");
    /// # }
    /// ```
    pub fn status_as<T: DeserializeOwned>(&self) -> T {
        let status = self.status().expect("the outcome has no status");
        serde_json::from_value(status.clone())
            .unwrap_or_else(|e| panic!("the status does not decode as {}: {e}: {status}", std::any::type_name::<T>()))
    }

    /// When the host would reconcile again unless an event comes first.
    ///
    /// ```
    /// # fn f(run: &wasmop_guest::testing::Run) {
    /// assert_eq!(run.reschedule_after(), None);
    /// # }
    /// ```
    pub fn reschedule_after(&self) -> Option<Duration> {
        self.outcome().reschedule_after
    }

    /// The events the host would record on the primary.
    ///
    /// ```
    /// # fn f(run: &wasmop_guest::testing::Run) {
    /// assert_eq!(run.events()[0].reason, "Ready");
    /// # }
    /// ```
    pub fn events(&self) -> &[Event] {
        &self.outcome().events
    }

    /// What the plugin logged, in order; available whether or not the reconcile failed.
    ///
    /// ```
    /// # fn f(run: &wasmop_guest::testing::Run) {
    /// assert!(run.logs().iter().any(|line| line.message.contains("reconciling")));
    /// # }
    /// ```
    pub fn logs(&self) -> &[LogLine] {
        &self.logs
    }

    /// Calls the reconciler's [`Reconciler::error_status`] hook with this run's primary, attempt
    /// and error, as the host does when no retry follows the failure: what it would merge into
    /// `.status`. Panics if the reconcile succeeded.
    ///
    /// The host only calls the hook when no retry follows (the last attempt, or a permanent or
    /// invalid error); this calls it whatever the error. See [`FakeHost::error_status`] for when
    /// it gives `None`.
    ///
    /// ```
    /// # fn f(run: &wasmop_guest::testing::Run) {
    /// assert_eq!(run.error_status().unwrap()["phase"], "Failed");
    /// # }
    /// ```
    pub fn error_status(&self) -> Option<Value> {
        let error = self.error();
        let Request { host, plugin, json, attempt, last_attempt } = &self.request;
        let (ctx, _logs) = host.context(plugin, *attempt, *last_attempt);
        (self.error_status)(json, error, &ctx)
    }
}

#[cfg(test)]
mod tests {
    use std::time::Duration;

    use k8s_openapi::api::core::v1::ConfigMap;
    use k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;
    use serde::Deserialize;
    use serde_json::json;

    use super::*;
    use crate::{Config, EventType, Watch};

    /// Reads the ConfigMap named in the primary's `data.target` and reports what it found.
    struct Lookup;

    impl Reconciler for Lookup {
        type Primary = ConfigMap;

        fn config() -> Config {
            Config::new("lookup", Kind::of::<ConfigMap>())
        }

        fn reconcile(primary: ConfigMap, ctx: &Context) -> Result<Outcome, Error> {
            let data = primary.data.unwrap_or_default();
            let namespace = primary.metadata.namespace.as_deref();
            let kind = Kind::of::<ConfigMap>();
            let found: Option<ConfigMap> = ctx.get(&kind, namespace, &data["target"])?;
            let labelled: Vec<Value> = ctx.list(&kind, None, data.get("selector").map(String::as_str))?;
            ctx.log(Level::Warn, "looked", &[("attempt", &ctx.attempt().to_string())]);
            let mut outcome = Outcome::done()
                .status(json!({ "found": found.is_some(), "labelled": labelled.len() }))
                .reschedule_after(Duration::from_secs(ctx.attempt().into()));
            if ctx.is_last_attempt() {
                outcome = outcome.event(Event::warning("Last", "Lookup").note("last attempt"));
            }
            Ok(outcome)
        }
    }

    fn config_map(name: &str, labels: Value, data: Value) -> Value {
        json!({
            "apiVersion": "v1",
            "kind": "ConfigMap",
            "metadata": { "name": name, "namespace": "default", "labels": labels },
            "data": data,
        })
    }

    fn host() -> FakeHost {
        let kind = Kind::of::<ConfigMap>();
        let typed = ConfigMap {
            metadata: ObjectMeta {
                name: Some("typed".into()),
                namespace: Some("default".into()),
                labels: Some([("app".to_owned(), "web".to_owned())].into()),
                ..ObjectMeta::default()
            },
            ..ConfigMap::default()
        };
        let mut host = FakeHost::new().with(&kind, &typed);
        host.insert_json(&kind, &config_map("json", json!({ "app": "db", "tier": "back" }), json!({})).to_string());
        host.insert(&kind, &json!({ "metadata": { "name": "other-ns", "namespace": "kube-system" } }));
        host
    }

    #[test]
    fn reads_the_fake_cache_and_reports_the_outcome() {
        let primary = config_map("p", json!({}), json!({ "target": "typed", "selector": "app" }));
        let run = host().reconcile_attempt::<Lookup>(&primary, 3, true);
        assert_eq!(run.status(), Some(&json!({ "found": true, "labelled": 2 })));
        assert_eq!(run.reschedule_after(), Some(Duration::from_secs(3)));
        assert_eq!(run.events().len(), 1);
        assert_eq!(run.events()[0].event_type, EventType::Warning);
        assert_eq!(run.logs()[0].level, Level::Warn);
        assert_eq!(run.logs()[0].fields, [("attempt".to_owned(), "3".to_owned())]);
    }

    #[test]
    fn get_matches_namespace_and_name() {
        let primary = config_map("p", json!({}), json!({ "target": "other-ns" }));
        let run = host().reconcile::<Lookup>(&primary);
        #[derive(Deserialize)]
        struct Status {
            found: bool,
            labelled: usize,
        }
        let status: Status = run.status_as();
        assert!(!status.found, "other-ns lives in kube-system");
        assert_eq!(status.labelled, 3, "no selector, all namespaces");
        assert!(run.events().is_empty());
    }

    #[test]
    fn failing_kind_gives_transient() {
        let primary = config_map("p", json!({}), json!({ "target": "typed" }));
        let run = host().failing(&Kind::of::<ConfigMap>(), "not watched").reconcile::<Lookup>(&primary);
        assert!(
            matches!(run.error(), Error::Transient(m) if m.contains("not watched") && m.contains("v1/ConfigMap default/typed")),
            "{:?}",
            run.error()
        );
    }

    #[test]
    fn cached_object_of_the_wrong_shape_gives_permanent() {
        let kind = Kind::of::<ConfigMap>();
        let host =
            FakeHost::new().with(&kind, &json!({ "metadata": { "name": "bad", "namespace": "default" }, "data": 1 }));
        let primary = config_map("p", json!({}), json!({ "target": "bad" }));
        let run = host.reconcile::<Lookup>(&primary);
        assert!(matches!(run.error(), Error::Permanent(m) if m.contains("ConfigMap")), "{:?}", run.error());
    }

    #[test]
    fn an_invalid_k8s_openapi_primary_is_told_the_field_without_rust_types() {
        let run = FakeHost::new().reconcile_json::<Lookup>(r#"{"data": 42}"#, 0, false);
        assert_eq!(run.error(), &Error::invalid("data: expected an object, got 42"));
        let run = FakeHost::new().reconcile_json::<Lookup>("not json", 0, false);
        assert_eq!(run.error(), &Error::invalid("the primary is not JSON: expected ident"));
    }

    struct BadStatus;

    impl Reconciler for BadStatus {
        type Primary = Value;

        fn config() -> Config {
            Config::new("bad-status", Kind::namespaced("", "v1", "ConfigMap"))
        }

        fn reconcile(_: Value, _: &Context) -> Result<Outcome, Error> {
            Ok(Outcome::done().status(vec![1, 2]))
        }
    }

    #[test]
    fn non_object_status_is_permanent() {
        let run = FakeHost::new().reconcile::<BadStatus>(&json!({}));
        assert!(matches!(run.error(), Error::Permanent(m) if m.contains("JSON object")));
    }

    #[test]
    #[should_panic(expected = "the reconcile failed: invalid")]
    fn outcome_accessors_panic_on_error() {
        let _ = FakeHost::new().reconcile_json::<Lookup>("[]", 0, false).status();
    }

    /// Fails unless `data.mode` is `ok`; its error status depends on `data.mode` too.
    struct Flaky;

    impl Reconciler for Flaky {
        type Primary = ConfigMap;

        fn config() -> Config {
            Config::new("flaky", Kind::of::<ConfigMap>())
        }

        fn reconcile(primary: ConfigMap, ctx: &Context) -> Result<Outcome, Error> {
            match primary.data.unwrap_or_default().get("mode").map(String::as_str) {
                Some("ok") => Ok(Outcome::done()),
                Some("permanent") => Err(Error::permanent("gave up")),
                _ => Err(Error::transient(format!("down at attempt {}", ctx.attempt()))),
            }
        }

        fn error_status(primary: ConfigMap, error: &Error, ctx: &Context) -> Option<impl Serialize> {
            let mode = primary.data.unwrap_or_default().remove("mode").unwrap_or_default();
            match mode.as_str() {
                "quiet" => return None,
                "array" => return Some(json!([error.message()])),
                _ => {}
            }
            let namespace = primary.metadata.namespace.as_deref();
            let typed: Option<Value> = ctx.get(&Kind::of::<ConfigMap>(), namespace, "typed").ok()?;
            ctx.info("writing the error status");
            Some(json!({
                "error": error.to_string(),
                "attempt": ctx.attempt(),
                "last": ctx.is_last_attempt(),
                "sawTyped": typed.is_some(),
            }))
        }
    }

    fn flaky(mode: &str) -> Value {
        config_map("p", json!({}), json!({ "mode": mode }))
    }

    #[test]
    fn error_status_of_a_run_uses_its_error_attempt_and_host() {
        let run = host().reconcile_attempt::<Flaky>(&flaky("transient"), 4, true);
        assert_eq!(run.error(), &Error::transient("down at attempt 4"));
        assert_eq!(
            run.error_status(),
            Some(json!({ "error": "transient: down at attempt 4", "attempt": 4, "last": true, "sawTyped": true }))
        );
        // The run's logs are the reconcile's only.
        assert!(run.logs().is_empty());
    }

    #[test]
    fn error_status_from_the_fake_host() {
        let status = FakeHost::new().error_status::<Flaky>(&flaky("permanent"), &Error::permanent("gave up"));
        assert_eq!(
            status,
            Some(json!({ "error": "permanent: gave up", "attempt": 0, "last": false, "sawTyped": false }))
        );
        let status = host().error_status_attempt::<Flaky>(&flaky("x"), &Error::invalid("no"), 2, true);
        assert_eq!(status, Some(json!({ "error": "invalid: no", "attempt": 2, "last": true, "sawTyped": true })));
        let json = flaky("x").to_string();
        let status = host().error_status_json::<Flaky>(&json, &Error::transient("t"), 1, false);
        assert_eq!(status.unwrap()["attempt"], 1);
    }

    #[test]
    fn error_status_none_cases() {
        let host = host();
        let error = Error::transient("t");
        assert_eq!(host.error_status::<Flaky>(&flaky("quiet"), &error), None, "the hook says none");
        assert_eq!(host.error_status::<Lookup>(&flaky("x"), &error), None, "the default hook");
        assert_eq!(host.error_status_json::<Flaky>("[]", &error, 0, true), None, "the primary does not decode");
        assert_eq!(host.error_status_json::<Flaky>("not json", &error, 0, true), None, "not JSON");
        let failing = host.failing(&Kind::of::<ConfigMap>(), "not watched");
        assert_eq!(failing.error_status::<Flaky>(&flaky("x"), &error), None, "the hook's own `?`");
    }

    #[test]
    fn non_object_error_status_is_ignored_and_logged() {
        let json = flaky("array").to_string();
        let (ctx, logs) = FakeHost::new().context(&Plugin::of::<Flaky>(), 0, true);
        assert_eq!(crate::error_status::<Flaky>(&json, &Error::transient("t"), &ctx), None);
        drop(ctx);
        let logs = logs.take();
        assert_eq!(logs.len(), 1, "{logs:?}");
        assert_eq!(logs[0].level, Level::Error);
        assert!(logs[0].message.contains("JSON object") && logs[0].message.contains(r#"["t"]"#), "{logs:?}");
    }

    /// Reports the names of its ConfigMap secondaries, and of the Secret ones when
    /// `data.secrets` is set (it watches no Secrets).
    struct Owner;

    impl Reconciler for Owner {
        type Primary = ConfigMap;

        fn config() -> Config {
            Config::new("owner", Kind::of::<ConfigMap>()).watch(Watch::new(Kind::of::<ConfigMap>()))
        }

        fn reconcile(primary: ConfigMap, ctx: &Context) -> Result<Outcome, Error> {
            let names = |objects: Vec<Value>| -> Vec<String> {
                let name = |o: &Value| format!("{}/{}", o["metadata"]["namespace"], o["metadata"]["name"]);
                objects.iter().map(name).collect()
            };
            let config_maps: Vec<Value> = ctx.secondaries(&Kind::of::<ConfigMap>())?;
            let typed: Vec<ConfigMap> = ctx.secondaries(&Kind::namespaced("", "v1", "ConfigMap"))?;
            let cached: Option<Value> = ctx.get(&Kind::of::<ConfigMap>(), Some("b"), "one")?;
            let mut status =
                json!({ "configMaps": names(config_maps), "typed": typed.len(), "cached": cached.is_some() });
            if primary.data.unwrap_or_default().contains_key("secrets") {
                status["secrets"] = json!(names(ctx.secondaries(&Kind::namespaced("", "v1", "Secret"))?));
            }
            Ok(Outcome::done().status(status))
        }
    }

    fn secondary(namespace: &str, name: &str) -> Value {
        json!({ "metadata": { "name": name, "namespace": namespace } })
    }

    fn owner_host() -> FakeHost {
        let kind = Kind::of::<ConfigMap>();
        let mut host = FakeHost::new().with(&kind, &secondary("a", "not-a-secondary"));
        host.insert_secondary(&kind, &secondary("b", "one"))
            .insert_secondary(&kind, &secondary("a", "two"))
            .insert_secondary(&kind, &secondary("a", "one"))
            .insert_secondary(&Kind::namespaced("", "v1", "Secret"), &secondary("a", "s"));
        host
    }

    #[test]
    fn secondaries_are_sorted_by_namespace_and_name_and_cached() {
        let run = owner_host().reconcile::<Owner>(&config_map("p", json!({}), json!({})));
        assert_eq!(
            run.status(),
            Some(
                &json!({ "configMaps": [r#""a"/"one""#, r#""a"/"two""#, r#""b"/"one""#], "typed": 3, "cached": true })
            )
        );
        let run = FakeHost::new().reconcile::<Owner>(&config_map("p", json!({}), json!({})));
        assert_eq!(run.status(), Some(&json!({ "configMaps": [], "typed": 0, "cached": false })), "watched, none");
    }

    #[test]
    fn secondaries_of_a_kind_not_watched_give_transient() {
        let run = owner_host().reconcile::<Owner>(&config_map("p", json!({}), json!({ "secrets": "" })));
        assert!(
            matches!(run.error(), Error::Transient(m) if m.contains("v1/Secret is not watched by plugin owner")),
            "{:?}",
            run.error()
        );
        // Lookup watches nothing: the secondaries it was given are only cached objects.
        let host = FakeHost::new().with_secondary(&Kind::of::<ConfigMap>(), &secondary("a", "b"));
        let (ctx, _logs) = host.context(&Plugin::of::<Lookup>(), 0, false);
        let error = ctx.secondaries::<Value>(&Kind::of::<ConfigMap>()).unwrap_err();
        assert!(error.message().contains("v1/ConfigMap is not watched by plugin lookup"), "{error:?}");
        assert_eq!(ctx.list::<Value>(&Kind::of::<ConfigMap>(), Some("a"), None).map(|l| l.len()), Ok(1));
    }

    #[test]
    fn failing_and_malformed_secondaries() {
        let primary = config_map("p", json!({}), json!({}));
        let run = owner_host().failing(&Kind::of::<ConfigMap>(), "cache down").reconcile::<Owner>(&primary);
        assert_eq!(run.error(), &Error::transient("cannot read the v1/ConfigMap secondaries: cache down"));
        let bad = json!({ "metadata": { "name": "bad", "namespace": "a" }, "data": 1 });
        let run = FakeHost::new().with_secondary(&Kind::of::<ConfigMap>(), &bad).reconcile::<Owner>(&primary);
        assert!(
            matches!(run.error(), Error::Permanent(m) if m.starts_with("a v1/ConfigMap secondary does not")),
            "{:?}",
            run.error()
        );
    }

    #[test]
    #[should_panic(expected = "FakeHost::insert_secondary: a v1/ConfigMap must be a JSON object")]
    fn a_secondary_must_be_an_object() {
        let _ = FakeHost::new().with_secondary(&Kind::of::<ConfigMap>(), &[1]);
    }

    #[test]
    #[should_panic(expected = "the reconcile succeeded")]
    fn error_status_of_a_successful_run_panics() {
        let _ = FakeHost::new().reconcile::<Flaky>(&flaky("ok")).error_status();
    }

    /// Keeps a `Ready` condition in a status it types, beside other controllers' conditions.
    struct Conditioned;

    #[derive(Deserialize)]
    struct WithConditions {
        metadata: ObjectMeta,
        #[serde(default)]
        status: ConditionsStatus,
    }

    #[derive(Default, Deserialize)]
    struct ConditionsStatus {
        #[serde(default)]
        conditions: Vec<crate::conditions::Condition>,
    }

    impl Reconciler for Conditioned {
        type Primary = WithConditions;

        fn config() -> Config {
            Config::new("conditioned", Kind::namespaced("test.wasmop.dev", "v1", "Probe"))
        }

        fn reconcile(primary: WithConditions, _: &Context) -> Result<Outcome, Error> {
            let mut conditions = primary.status.conditions;
            let ready = crate::conditions::new("Ready", true, "Reconciled", "");
            let generation = primary.metadata.generation;
            crate::conditions::set(
                &mut conditions,
                crate::conditions::Condition { observed_generation: generation, ..ready },
            );
            Ok(Outcome::done().status(json!({ "conditions": conditions })))
        }
    }

    fn conditioned(conditions: Value) -> Value {
        json!({ "apiVersion": "test.wasmop.dev/v1", "kind": "Probe",
                "metadata": { "name": "p", "namespace": "ns", "generation": 2 },
                "status": { "conditions": conditions } })
    }

    #[test]
    fn another_controllers_condition_without_a_transition_time_parses_and_is_kept_as_it_was() {
        let foreign = json!({ "type": "Synced", "status": "True", "reason": "", "message": "", "lastProbeTime": null });
        let run = FakeHost::new().reconcile::<Conditioned>(&conditioned(json!([foreign.clone()])));
        let conditions = run.status().expect("a status")["conditions"].as_array().expect("conditions").clone();
        assert_eq!(conditions[0], foreign, "the foreign condition round-trips unchanged");
        assert_eq!(conditions[1]["type"], "Ready");
        assert_eq!(conditions[1]["observedGeneration"], 2);
        assert!(conditions[1]["lastTransitionTime"].is_string());
    }

    #[test]
    fn a_primary_that_does_not_parse_is_invalid_and_the_error_names_the_field() {
        let run = FakeHost::new().reconcile::<Conditioned>(&conditioned(json!([{ "type": "Ready", "status": 1 }])));
        let error = run.error();
        assert!(matches!(error, Error::Invalid(_)), "{error:?}");
        assert_eq!(error.message(), "status.conditions[0].status: expected a string, got 1");
    }

    /// A typed primary, to check what an invalid one is told.
    struct Typed;

    #[derive(Debug, Deserialize)]
    #[allow(dead_code)] // Read through Debug only.
    struct TypedPrimary {
        spec: TypedSpec,
    }

    #[derive(Debug, Deserialize)]
    #[allow(dead_code)] // Read through Debug only.
    struct TypedSpec {
        replicas: i32,
        size: Option<u32>,
        name: String,
        #[serde(default)]
        items: Vec<TypedItem>,
    }

    #[derive(Debug, Deserialize)]
    #[allow(dead_code)] // Read through Debug only.
    struct TypedItem {
        port: u16,
    }

    impl Reconciler for Typed {
        type Primary = TypedPrimary;

        fn config() -> Config {
            Config::new("typed", Kind::namespaced("example.com", "v1", "Typed"))
        }

        fn reconcile(primary: TypedPrimary, _: &Context) -> Result<Outcome, Error> {
            Ok(Outcome::done().status(json!({ "seen": format!("{primary:?}") })))
        }
    }

    #[test]
    fn an_invalid_primary_is_told_the_field_and_the_value_in_its_own_terms() {
        let message = |spec: Value| {
            let run = FakeHost::new()
                .reconcile::<Typed>(&json!({ "metadata": { "name": "t", "namespace": "ns" }, "spec": spec }));
            match run.error() {
                Error::Invalid(message) => message.clone(),
                other => panic!("not invalid: {other:?}"),
            }
        };
        assert_eq!(
            message(json!({ "replicas": "three", "name": "a" })),
            r#"spec.replicas: expected an integer, got "three""#
        );
        assert_eq!(
            message(json!({ "replicas": 1, "size": -1, "name": "a" })),
            "spec.size: expected a non-negative integer, got -1"
        );
        assert_eq!(
            message(json!({ "replicas": 1, "name": "a", "items": [{ "port": 80 }, { "port": "http" }] })),
            r#"spec.items[1].port: expected a non-negative integer, got "http""#
        );
        assert_eq!(
            message(json!({ "replicas": 1, "name": ["a", "b"] })),
            r#"spec.name: expected a string, got ["a","b"]"#
        );
        assert_eq!(message(json!({ "replicas": 1, "name": "a", "items": {} })), "spec.items: expected a list, got {}");
        assert_eq!(message(json!(5)), "spec: expected an object, got 5");
        assert_eq!(message(json!({ "replicas": 1 })), "spec: missing field `name`");
        let long = "x".repeat(200);
        let cut = message(json!({ "replicas": long, "name": "a" }));
        assert!(cut.starts_with(r#"spec.replicas: expected an integer, got "xxx"#) && cut.ends_with("..."), "{cut}");
        assert!(cut.len() < 120, "{cut}");
        let run = FakeHost::new().reconcile_json::<Typed>(r#"{"spec": {"replicas": 1,"#, 0, false);
        assert_eq!(run.error(), &Error::invalid("the primary is not JSON: EOF while parsing a value"));
    }

    struct Related;

    impl Reconciler for Related {
        type Primary = Value;

        fn config() -> Config {
            Config::new("related", Kind::namespaced("example.com", "v1", "Thing"))
                .watch(Watch::new(Kind::of::<ConfigMap>()).label_selector("owned"))
                .watch(Watch::new(Kind::namespaced("", "v1", "Secret")).annotated())
        }

        fn reconcile(_: Value, ctx: &Context) -> Result<Outcome, Error> {
            let names = |objects: Vec<Value>| -> Vec<String> {
                objects.iter().filter_map(|o| o["metadata"]["name"].as_str().map(str::to_owned)).collect()
            };
            let config_maps = names(ctx.secondaries(&Kind::of::<ConfigMap>())?);
            let secrets = names(ctx.secondaries(&Kind::namespaced("", "v1", "Secret"))?);
            Ok(Outcome::done().status(json!({ "configMaps": config_maps, "secrets": secrets })))
        }
    }

    #[test]
    fn the_loop_relates_stored_objects_by_the_watches_mappers_as_the_host_does() {
        let owner = |uid: &str| json!([{ "apiVersion": "example.com/v1", "kind": "Thing", "name": "t", "uid": uid, "controller": true }]);
        let mut host = FakeHost::new()
            .with(&Kind::of::<ConfigMap>(), &json!({ "metadata": { "name": "mine", "namespace": "ns", "labels": { "owned": "" }, "ownerReferences": owner("uid-t") } }))
            // Owned by an earlier Thing of the same name: another owner.
            .with(&Kind::of::<ConfigMap>(), &json!({ "metadata": { "name": "stale", "namespace": "ns", "labels": { "owned": "" }, "ownerReferences": owner("uid-old") } }))
            // Not selected by the watch.
            .with(&Kind::of::<ConfigMap>(), &json!({ "metadata": { "name": "unlabeled", "namespace": "ns", "ownerReferences": owner("uid-t") } }))
            .with(&Kind::namespaced("", "v1", "Secret"), &json!({ "metadata": { "name": "s", "namespace": "elsewhere", "annotations": { "wasmop.dev/primary-name": "t", "wasmop.dev/primary-namespace": "ns" } } }));
        let thing = json!({ "metadata": { "name": "t", "namespace": "ns", "uid": "uid-t" } });
        let stable = host.run_until_stable::<Related>(&thing);
        assert_eq!(stable.status()["configMaps"], json!(["mine"]));
        assert_eq!(stable.status()["secrets"], json!(["s"]));
    }

    /// Reads its own spec (the status, too, if it is given it), a projected ConfigMap and a
    /// metadata-only Secret, and reports what each held.
    struct Projected;

    impl Reconciler for Projected {
        type Primary = Value;

        fn config() -> Config {
            Config::new("projected", Kind::namespaced("example.com", "v1", "Thing"))
                .project(["spec.wanted"])
                .watch(Watch::new(Kind::of::<ConfigMap>()).project(["data.kept"]))
                .watch(Watch::new(Kind::namespaced("", "v1", "Secret")).metadata_only())
        }

        fn reconcile(thing: Value, ctx: &Context) -> Result<Outcome, Error> {
            let config_map: Value = ctx.get(&Kind::of::<ConfigMap>(), Some("ns"), "cm")?.unwrap_or_default();
            let secret: Value = ctx.get(&Kind::namespaced("", "v1", "Secret"), Some("ns"), "s")?.unwrap_or_default();
            Ok(Outcome::done().status(json!({
                "spec": thing["spec"], "status": thing.get("status"), "configMap": config_map["data"],
                "secret": secret.get("data"),
                "secretLabels": secret["metadata"]["labels"],
            })))
        }
    }

    #[test]
    fn reads_see_objects_cut_to_the_projections_as_the_host_s_caches_keep_them() {
        let host = FakeHost::new()
            .with(&Kind::of::<ConfigMap>(), &json!({ "metadata": { "name": "cm", "namespace": "ns" }, "data": { "kept": "1", "dropped": "2" } }))
            .with(&Kind::namespaced("", "v1", "Secret"), &json!({ "metadata": { "name": "s", "namespace": "ns", "labels": { "a": "b" } }, "data": { "password": "c2VjcmV0" } }));
        let thing = json!({ "metadata": { "name": "t", "namespace": "ns" }, "spec": { "wanted": 1, "other": 2 },
                            "status": { "phase": "Up" } });
        let run = host.reconcile::<Projected>(&thing);
        let status = run.status().expect("a status");
        assert_eq!(status["spec"], json!({ "wanted": 1 }));
        // The host keeps the primary's status for its own writes; the plugin does not read it.
        assert_eq!(status["status"], Value::Null, "the projection does not name the status");
        assert_eq!(status["configMap"], json!({ "kept": "1" }));
        assert_eq!(status["secret"], Value::Null, "no data in a metadata-only watch");
        assert_eq!(status["secretLabels"], json!({ "a": "b" }));
    }

    /// Tells in each handler whether it was given its primary cut to its projection: only
    /// `spec.wanted`, no status.
    struct CutPrimary;

    /// Whether `primary` is cut to [`CutPrimary`]'s projection.
    fn is_cut(primary: &Value) -> bool {
        primary["spec"] == json!({ "wanted": 1 }) && primary.get("status").is_none()
    }

    impl Reconciler for CutPrimary {
        type Primary = Value;

        fn config() -> Config {
            Config::new("cut", Kind::namespaced("example.com", "v1", "Thing")).project(["spec.wanted"])
        }

        fn reconcile(thing: Value, _: &Context) -> Result<Outcome, Error> {
            Ok(Outcome::done().status(json!({ "cut": is_cut(&thing) })))
        }

        fn error_status(thing: Value, _: &Error, _: &Context) -> Option<impl Serialize> {
            Some(json!({ "cut": is_cut(&thing) }))
        }

        fn desired(thing: &Value, _: &Context) -> Result<Vec<Desired>, Error> {
            Ok(vec![Desired::new("cut", &json!({ "cut": is_cut(thing) }))])
        }

        fn check(_: &str, thing: &Value, _: Option<&Value>, _: &Context) -> bool {
            is_cut(thing)
        }

        fn secondaries_of(thing: &Value, _: &Context) -> Vec<crate::SecondaryRef> {
            let name = if is_cut(thing) { "cut" } else { "whole" };
            vec![crate::SecondaryRef::new(Kind::namespaced("", "v1", "ConfigMap"), Some("ns"), name)]
        }
    }

    impl crate::Cleaner for CutPrimary {
        fn cleanup(thing: Value, _: &Context) -> Result<Cleanup, Error> {
            Ok(if is_cut(&thing) { Cleanup::done() } else { Cleanup::done().keep_finalizer() })
        }
    }

    #[test]
    fn every_handler_gets_the_primary_cut_to_its_projection_as_the_host_gives_it() {
        let host = FakeHost::new();
        let thing = json!({ "metadata": { "name": "t", "namespace": "ns" }, "spec": { "wanted": 1, "other": 2 },
                            "status": { "phase": "Up" } });
        assert_eq!(host.reconcile::<CutPrimary>(&thing).status(), Some(&json!({ "cut": true })), "reconcile");
        let error = Error::Transient("x".into());
        assert_eq!(host.error_status::<CutPrimary>(&thing, &error), Some(json!({ "cut": true })), "error_status");
        assert_eq!(host.desired::<CutPrimary>(&thing).unwrap()[0].object, json!({ "cut": true }), "desired");
        assert!(host.check::<CutPrimary>("any", &thing, None), "check");
        assert_eq!(host.secondaries_of::<CutPrimary>(&thing).unwrap()[0].name, "cut", "secondaries_of");
        assert!(!host.cleanup::<CutPrimary>(&thing).unwrap().keeps_finalizer(), "cleanup");
    }

    #[test]
    fn insert_replaces_the_object_of_the_same_kind_namespace_and_name() {
        let kind = Kind::of::<ConfigMap>();
        let mut host = FakeHost::new();
        host.insert(&kind, &json!({ "metadata": { "name": "one", "namespace": "b" }, "data": { "v": "old" } }))
            .insert_json(&kind, r#"{"metadata": {"name": "one", "namespace": "b"}, "data": {"v": "new"}}"#)
            // Same name elsewhere: another object.
            .insert(&kind, &json!({ "metadata": { "name": "one", "namespace": "a" }, "data": { "v": "a" } }));
        let host = host.with(&Kind::namespaced("", "v1", "Secret"), &secondary("b", "one"));
        let mut names: Vec<String> = host
            .objects_of(&kind)
            .iter()
            .map(|o| format!("{}/{}", o["metadata"]["namespace"], o["data"]["v"]))
            .collect();
        names.sort();
        assert_eq!(names, [r#""a"/"a""#, r#""b"/"new""#]);
        let host = host
            .with_secondary(&kind, &secondary("b", "two"))
            .with_secondary(&kind, &json!({ "metadata": { "name": "two", "namespace": "b" }, "data": { "v": "2" } }));
        let (ctx, _logs) = host.context(&Plugin::of::<Owner>(), 0, false);
        let secondaries: Vec<Value> = ctx.secondaries(&kind).unwrap();
        assert_eq!(secondaries.len(), 1, "{secondaries:?}");
        assert_eq!(secondaries[0]["data"]["v"], "2");
    }
}
