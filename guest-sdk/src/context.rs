//! [`Context`]: what a reconcile can ask of the host.

use std::any::type_name;

use k8s_openapi::Resource;
use serde::de::DeserializeOwned;

use crate::Kind;
use crate::bindings::wasmop::plugin::{host as wit_host, types as wit};
use crate::dependent::DependentState;
use crate::external::External;
use crate::outcome::Error;

/// Severity of a log line.
///
/// ```
/// # use wasmop_guest::{Context, Level};
/// fn log(ctx: &Context) {
///     ctx.log(Level::Warn, "slow dependency", &[("service", "db")]);
/// }
/// ```
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum Level {
    /// Very detailed tracing.
    Trace,
    /// Detail useful when debugging.
    Debug,
    /// Normal operation.
    Info,
    /// Something unexpected that the plugin handled.
    Warn,
    /// Something failed.
    Error,
}

/// The host imports, behind a trait so that [`crate::testing`] can stand in for the real host.
pub(crate) trait Host {
    fn log(&self, level: Level, message: &str, fields: &[(&str, &str)]);
    fn get(&self, kind: &Kind, namespace: Option<&str>, name: &str) -> Result<Option<String>, String>;
    fn list(&self, kind: &Kind, namespace: Option<&str>, label_selector: Option<&str>) -> Result<Vec<String>, String>;
    fn secondaries(&self, kind: &Kind) -> Result<Vec<String>, String>;
}

/// The real host: the component's `wasmop:plugin/host` imports. Only reachable in `wasm32`; the
/// native stubs wit-bindgen generates panic.
pub(crate) struct WitHost;

impl Host for WitHost {
    fn log(&self, level: Level, message: &str, fields: &[(&str, &str)]) {
        let level = match level {
            Level::Trace => wit::LogLevel::Trace,
            Level::Debug => wit::LogLevel::Debug,
            Level::Info => wit::LogLevel::Info,
            Level::Warn => wit::LogLevel::Warn,
            Level::Error => wit::LogLevel::Error,
        };
        let fields: Vec<(String, String)> =
            fields.iter().map(|(key, value)| ((*key).to_owned(), (*value).to_owned())).collect();
        wit_host::log(level, message, &fields);
    }

    fn get(&self, kind: &Kind, namespace: Option<&str>, name: &str) -> Result<Option<String>, String> {
        wit_host::get(&kind.to_wit(), namespace, name)
    }

    fn list(&self, kind: &Kind, namespace: Option<&str>, label_selector: Option<&str>) -> Result<Vec<String>, String> {
        wit_host::list(&kind.to_wit(), namespace, label_selector)
    }

    fn secondaries(&self, kind: &Kind) -> Result<Vec<String>, String> {
        wit_host::secondaries(&kind.to_wit())
    }
}

/// What a reconcile can ask of the host: which attempt this is, logging, and typed reads of the
/// host's caches.
///
/// ```
/// use wasmop_guest::k8s_openapi::api::core::v1::Secret;
/// use wasmop_guest::{Context, Error, Kind, Outcome};
///
/// fn reconcile(ctx: &Context) -> Result<Outcome, Error> {
///     let secret: Option<Secret> = ctx.get(&Kind::of::<Secret>(), Some("default"), "db")?;
///     match secret {
///         Some(_) => Ok(Outcome::done()),
///         None if ctx.is_last_attempt() => Err(Error::permanent("Secret default/db never appeared")),
///         None => Err(Error::transient("waiting for Secret default/db")),
///     }
/// }
/// ```
pub struct Context {
    host: Box<dyn Host>,
    attempt: u32,
    last_attempt: bool,
    dependents: Vec<DependentState>,
    external: Vec<External>,
    inbound: Option<serde_json::Value>,
}

impl Context {
    pub(crate) fn new(host: Box<dyn Host>, attempt: u32, last_attempt: bool) -> Self {
        Self { host, attempt, last_attempt, dependents: Vec::new(), external: Vec::new(), inbound: None }
    }

    /// The context with the primary's external state and cached inbound payload.
    pub(crate) fn with_external(mut self, external: Vec<External>, inbound: Option<serde_json::Value>) -> Self {
        self.external = external;
        self.inbound = inbound;
        self
    }

    /// The primary's external objects of `dependent` as the last fetch found them (after the
    /// host's applies): what `desired` and `reconcile` compute from. Empty outside them.
    pub fn external(&self, dependent: &str) -> impl Iterator<Item = &External> {
        self.external.iter().filter(move |o| o.dependent == dependent)
    }

    /// The last inbound payload mapped to the primary, when the plugin caches inbound events.
    pub fn inbound(&self) -> Option<&serde_json::Value> {
        self.inbound.as_ref()
    }

    /// The context with the dependents' states the host reconciled before this call.
    pub(crate) fn with_dependents(mut self, dependents: Vec<DependentState>) -> Self {
        self.dependents = dependents;
        self
    }

    /// Where the dependent `name` stands: reconciled by the host just before this reconcile,
    /// with its objects as the cluster holds them now. `None` outside `reconcile` or for an
    /// undeclared name.
    ///
    /// ```
    /// # use wasmop_guest::{Context, Outcome};
    /// # fn f(ctx: &Context) -> Outcome {
    /// let available = ctx.dependent("deployment").is_some_and(|d| d.is_ready());
    /// # Outcome::done()
    /// # }
    /// ```
    pub fn dependent(&self, name: &str) -> Option<&DependentState> {
        self.dependents.iter().find(|d| d.name == name)
    }

    /// Every dependent's state, in declaration order.
    pub fn dependents(&self) -> &[DependentState] {
        &self.dependents
    }

    /// The objects of the dependent `name`, typed: a handle on what the host applied (or
    /// observed) for it just before this reconcile. Fails with [`Error::Permanent`] for an
    /// undeclared name or an object that does not deserialize as `K`.
    ///
    /// ```
    /// use wasmop_guest::k8s_openapi::api::core::v1::ConfigMap;
    /// # use wasmop_guest::{Context, Error};
    /// # fn f(ctx: &Context) -> Result<usize, Error> {
    /// let copies: Vec<ConfigMap> = ctx.dependent_objects::<ConfigMap>("copies")?;
    /// # Ok(copies.len())
    /// # }
    /// ```
    pub fn dependent_objects<K: DeserializeOwned>(&self, name: &str) -> Result<Vec<K>, Error> {
        let state = self
            .dependent(name)
            .ok_or_else(|| Error::permanent(format!("no dependent named {name:?} was reconciled")))?;
        state.objects_as()
    }

    /// One object of the Kubernetes type `K` (a `k8s_openapi` type: its kind comes from the
    /// type) from the host's cache: [`Context::get`] without naming the kind.
    ///
    /// ```
    /// use wasmop_guest::k8s_openapi::api::core::v1::Secret;
    /// # use wasmop_guest::{Context, Error};
    /// # fn f(ctx: &Context) -> Result<bool, Error> {
    /// let credentials: Option<Secret> = ctx.get_of::<Secret>(Some("default"), "db")?;
    /// # Ok(credentials.is_some())
    /// # }
    /// ```
    pub fn get_of<K>(&self, namespace: Option<&str>, name: &str) -> Result<Option<K>, Error>
    where
        K: Resource + DeserializeOwned,
        K::Scope: 'static,
    {
        self.get(&Kind::of::<K>(), namespace, name)
    }

    /// Objects of the Kubernetes type `K` from the host's cache: [`Context::list`] without
    /// naming the kind.
    pub fn list_of<K>(&self, namespace: Option<&str>, label_selector: Option<&str>) -> Result<Vec<K>, Error>
    where
        K: Resource + DeserializeOwned,
        K::Scope: 'static,
    {
        self.list(&Kind::of::<K>(), namespace, label_selector)
    }

    /// The primary's secondaries of the Kubernetes type `K`: [`Context::secondaries`] without
    /// naming the kind.
    pub fn secondaries_of<K>(&self) -> Result<Vec<K>, Error>
    where
        K: Resource + DeserializeOwned,
        K::Scope: 'static,
    {
        self.secondaries(&Kind::of::<K>())
    }

    /// 0 on the first attempt, incremented on each retry after a failure.
    ///
    /// ```
    /// # fn f(ctx: &wasmop_guest::Context) {
    /// if ctx.attempt() > 0 {
    ///     ctx.info(format!("retry number {}", ctx.attempt()));
    /// }
    /// # }
    /// ```
    pub fn attempt(&self) -> u32 {
        self.attempt
    }

    /// True when no retry follows if this attempt fails: the moment to give up loudly.
    ///
    /// ```
    /// # fn f(ctx: &wasmop_guest::Context) {
    /// if ctx.is_last_attempt() {
    ///     ctx.warn("last attempt");
    /// }
    /// # }
    /// ```
    pub fn is_last_attempt(&self) -> bool {
        self.last_attempt
    }

    /// Writes a structured log line into the host's log, inside the reconcile's span.
    ///
    /// ```
    /// # fn f(ctx: &wasmop_guest::Context) {
    /// ctx.log(wasmop_guest::Level::Info, "created", &[("kind", "Service"), ("name", "web")]);
    /// # }
    /// ```
    pub fn log(&self, level: Level, message: impl AsRef<str>, fields: &[(&str, &str)]) {
        self.host.log(level, message.as_ref(), fields);
    }

    /// Logs at [`Level::Trace`].
    ///
    /// ```
    /// # fn f(ctx: &wasmop_guest::Context) {
    /// ctx.trace("entering reconcile");
    /// # }
    /// ```
    pub fn trace(&self, message: impl AsRef<str>) {
        self.log(Level::Trace, message, &[]);
    }

    /// Logs at [`Level::Debug`].
    ///
    /// ```
    /// # fn f(ctx: &wasmop_guest::Context) {
    /// ctx.debug("spec unchanged");
    /// # }
    /// ```
    pub fn debug(&self, message: impl AsRef<str>) {
        self.log(Level::Debug, message, &[]);
    }

    /// Logs at [`Level::Info`].
    ///
    /// ```
    /// # fn f(ctx: &wasmop_guest::Context) {
    /// ctx.info(format!("{} replicas", 3));
    /// # }
    /// ```
    pub fn info(&self, message: impl AsRef<str>) {
        self.log(Level::Info, message, &[]);
    }

    /// Logs at [`Level::Warn`].
    ///
    /// ```
    /// # fn f(ctx: &wasmop_guest::Context) {
    /// ctx.warn("falling back to the default port");
    /// # }
    /// ```
    pub fn warn(&self, message: impl AsRef<str>) {
        self.log(Level::Warn, message, &[]);
    }

    /// Logs at [`Level::Error`].
    ///
    /// ```
    /// # fn f(ctx: &wasmop_guest::Context) {
    /// ctx.error("the referenced Secret is malformed");
    /// # }
    /// ```
    pub fn error(&self, message: impl AsRef<str>) {
        self.log(Level::Error, message, &[]);
    }

    /// Reads one object from the host's cache: `namespace` is `None` for cluster-scoped kinds.
    ///
    /// `Ok(None)` when the object does not exist. Fails with [`Error::Transient`] when the host
    /// cannot serve the read (e.g. the kind is not watched) and with [`Error::Permanent`] when the
    /// object does not deserialize as `T`.
    ///
    /// ```
    /// use wasmop_guest::k8s_openapi::api::core::v1::ConfigMap;
    /// use wasmop_guest::{Context, Error, Kind};
    ///
    /// fn settings(ctx: &Context, namespace: &str) -> Result<Option<ConfigMap>, Error> {
    ///     ctx.get::<ConfigMap>(&Kind::of::<ConfigMap>(), Some(namespace), "settings")
    /// }
    /// ```
    pub fn get<T: DeserializeOwned>(
        &self,
        kind: &Kind,
        namespace: Option<&str>,
        name: &str,
    ) -> Result<Option<T>, Error> {
        let what = || match namespace {
            Some(namespace) => format!("{kind} {namespace}/{name}"),
            None => format!("{kind} {name}"),
        };
        let json = self
            .host
            .get(kind, namespace, name)
            .map_err(|e| Error::transient(format!("cannot read {}: {e}", what())))?;
        json.map(|json| decode(&json, &what)).transpose()
    }

    /// Lists objects of a kind from the host's cache, in one namespace (or all when `None`) and
    /// matching a label selector in Kubernetes syntax (or all when `None`).
    ///
    /// Fails like [`Context::get`].
    ///
    /// ```
    /// use wasmop_guest::k8s_openapi::api::core::v1::Pod;
    /// use wasmop_guest::{Context, Error, Kind};
    ///
    /// fn web_pods(ctx: &Context) -> Result<usize, Error> {
    ///     let pods: Vec<Pod> = ctx.list(&Kind::of::<Pod>(), Some("default"), Some("app=web"))?;
    ///     Ok(pods.len())
    /// }
    /// ```
    pub fn list<T: DeserializeOwned>(
        &self,
        kind: &Kind,
        namespace: Option<&str>,
        label_selector: Option<&str>,
    ) -> Result<Vec<T>, Error> {
        let what = || {
            let mut what = format!("{kind} objects");
            if let Some(namespace) = namespace {
                what.push_str(&format!(" in {namespace}"));
            }
            if let Some(selector) = label_selector {
                what.push_str(&format!(" matching {selector:?}"));
            }
            what
        };
        let objects = self
            .host
            .list(kind, namespace, label_selector)
            .map_err(|e| Error::transient(format!("cannot list {}: {e}", what())))?;
        objects.iter().map(|json| decode(json, &what)).collect()
    }

    /// The objects of a watched kind that belong to the primary being reconciled, from the host's
    /// cache, sorted by namespace and name: those the [`Watch`](crate::Watch)es of `kind` relate
    /// to the primary through their [`Mapper`](crate::Mapper) (owned by it, annotated with it,
    /// mapped to it by [`Reconciler::map_secondary`](crate::Reconciler::map_secondary), or named
    /// by its [`Reconciler::secondaries_of`](crate::Reconciler::secondaries_of)).
    ///
    /// Fails with [`Error::Transient`] when the host cannot serve the read (e.g. the plugin
    /// declares no watch of `kind`) and with [`Error::Permanent`] when an object does not
    /// deserialize as `T`.
    ///
    /// ```
    /// use wasmop_guest::k8s_openapi::api::core::v1::ConfigMap;
    /// use wasmop_guest::{Context, Error, Kind};
    ///
    /// fn owned_keys(ctx: &Context) -> Result<usize, Error> {
    ///     let owned: Vec<ConfigMap> = ctx.secondaries(&Kind::of::<ConfigMap>())?;
    ///     Ok(owned.iter().map(|cm| cm.data.as_ref().map_or(0, |data| data.len())).sum())
    /// }
    /// ```
    pub fn secondaries<T: DeserializeOwned>(&self, kind: &Kind) -> Result<Vec<T>, Error> {
        let objects = self
            .host
            .secondaries(kind)
            .map_err(|e| Error::transient(format!("cannot read the {kind} secondaries: {e}")))?;
        objects.iter().map(|json| decode(json, &|| format!("a {kind} secondary"))).collect()
    }
}

/// Decodes a cached object, naming the object and the type when it does not fit.
fn decode<T: DeserializeOwned>(json: &str, what: &dyn Fn() -> String) -> Result<T, Error> {
    serde_json::from_str(json)
        .map_err(|e| Error::permanent(format!("{} does not deserialize as {}: {e}", what(), type_name::<T>())))
}
