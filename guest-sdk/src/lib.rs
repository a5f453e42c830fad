//! The SDK for writing wasmop reconciler plugins.
//!
//! A plugin is a Kubernetes controller compiled to a WebAssembly component (`wasm32-wasip2`) that
//! the wasmop host loads and runs in a sandbox. The plugin never talks to the API server: it reads
//! the primary object and the host's caches, and returns what it wants written (status, events,
//! a reschedule). The host performs every write.
//!
//! # Where to start
//!
//! Implement [`Reconciler`] for a unit struct and hand it to [`export!`]. The primary type is any
//! serde type; [`k8s_openapi`] (re-exported) has `ObjectMeta`, and [`conditions`] has a lenient
//! `Condition` (other controllers' conditions parse and round-trip) and keeps conditions the
//! Kubernetes way. A primary that does not parse fails its reconcile as invalid, with the path of
//! the field at fault, and is reconciled again on its next change. Unit-test the plugin natively with
//! [`testing::FakeHost`].
//!
//! ```
//! use serde::{Deserialize, Serialize};
//! use wasmop_guest::k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;
//! use wasmop_guest::{Config, Context, Error, Kind, Outcome, Reconciler};
//!
//! /// The primary: only the fields the plugin reads.
//! #[derive(Deserialize)]
//! struct Greeting {
//!     metadata: ObjectMeta,
//!     spec: GreetingSpec,
//! }
//!
//! #[derive(Deserialize)]
//! struct GreetingSpec {
//!     name: String,
//! }
//!
//! #[derive(Serialize)]
//! #[serde(rename_all = "camelCase")]
//! struct GreetingStatus {
//!     message: String,
//!     observed_generation: Option<i64>,
//! }
//!
//! struct Greeter;
//!
//! impl Reconciler for Greeter {
//!     type Primary = Greeting;
//!
//!     fn config() -> Config {
//!         Config::new("greeter", Kind::namespaced("example.com", "v1", "Greeting"))
//!     }
//!
//!     fn reconcile(greeting: Greeting, ctx: &Context) -> Result<Outcome, Error> {
//!         ctx.info(format!("greeting {}", greeting.spec.name));
//!         Ok(Outcome::done().status(GreetingStatus {
//!             message: format!("Hello, {}!", greeting.spec.name),
//!             observed_generation: greeting.metadata.generation,
//!         }))
//!     }
//! }
//!
//! wasmop_guest::export!(Greeter);
//! ```
//!
//! The plugin crate is a `cdylib` (add `rlib` to unit-test it) built with
//! `cargo build --release --target wasm32-wasip2`; the `.wasm` file it produces is the component
//! the host loads.
//!
//! # Secondary resources
//!
//! A primary usually depends on other objects: those it owns, or Secrets and ConfigMaps it refers
//! to. [`Config::watch`] declares each such kind as a [`Watch`]; the host watches and caches the
//! objects, and a change of one reconciles the primaries the watch's [`Mapper`] finds: the owner
//! by default, or the primary named by the annotations [`PRIMARY_NAME_ANNOTATION`] and
//! [`PRIMARY_NAMESPACE_ANNOTATION`], or those [`Reconciler::map_secondary`] names, or those whose
//! [`Reconciler::secondaries_of`] names the object. During a reconcile, [`Context::secondaries`]
//! gives the objects of a watched kind that belong to the primary; [`testing::FakeHost`] stands in
//! with [`testing::FakeHost::with_secondary`].
//!
//! ```
//! use wasmop_guest::k8s_openapi::api::core::v1::{ConfigMap, Secret};
//! use wasmop_guest::serde_json::{Value, json};
//! use wasmop_guest::testing::FakeHost;
//! use wasmop_guest::{Config, Context, Error, Kind, Outcome, Reconciler, Watch};
//!
//! struct Bundle;
//!
//! impl Reconciler for Bundle {
//!     type Primary = Value;
//!
//!     fn config() -> Config {
//!         Config::new("bundle", Kind::namespaced("example.com", "v1", "Bundle"))
//!             // The ConfigMaps each Bundle controls (owner references).
//!             .watch(Watch::new(Kind::of::<ConfigMap>()).label_selector("app=bundle"))
//!             // The Secrets, anywhere, annotated with the Bundle they belong to.
//!             .watch(Watch::new(Kind::of::<Secret>()).annotated())
//!     }
//!
//!     fn reconcile(_bundle: Value, ctx: &Context) -> Result<Outcome, Error> {
//!         let config_maps: Vec<ConfigMap> = ctx.secondaries(&Kind::of::<ConfigMap>())?;
//!         let secrets: Vec<Secret> = ctx.secondaries(&Kind::of::<Secret>())?;
//!         Ok(Outcome::done().status(json!({ "configMaps": config_maps.len(), "secrets": secrets.len() })))
//!     }
//! }
//!
//! wasmop_guest::export!(Bundle);
//!
//! let owned = json!({ "metadata": { "name": "settings", "namespace": "default" } });
//! let run = FakeHost::new()
//!     .with_secondary(&Kind::of::<ConfigMap>(), &owned)
//!     .reconcile::<Bundle>(&json!({ "metadata": { "name": "b", "namespace": "default" } }));
//! assert_eq!(run.status(), Some(&json!({ "configMaps": 1, "secrets": 0 })));
//! ```
//!
//! # serde
//!
//! [`serde`] and [`serde_json`] are re-exported. serde's derive macros name the `serde` crate, so
//! either depend on `serde` (with the `derive` feature) yourself or put
//! `#[serde(crate = "wasmop_guest::serde")]` on each derived type.

// Lets the generated bindings name the runtime as `wasmop_guest::wit_bindgen::rt` in this crate
// and in plugin crates alike.
extern crate self as wasmop_guest;

pub use k8s_openapi;
pub use schemars;
pub use serde;
pub use serde_json;
pub use wit_bindgen;

mod admission;
pub mod conditions;
mod config;
mod context;
mod crd;
mod dependent;
mod external;
mod grant;
pub mod http;
mod kind;
mod outcome;
mod predicate;
mod refs;
mod resource;
pub mod testing;
mod webhook;
mod wire;

pub use admission::{Admission, Verdict};
pub use config::{
    Config, Filters, Finalizer, Mapper, PRIMARY_NAME_ANNOTATION, PRIMARY_NAMESPACE_ANNOTATION, RateLimit, Retry,
    Sharding, Watch,
};
pub use context::{Context, Level};
pub use crd::Crd;
pub use dependent::{Cleanup, Dependent, DependentState, Desired};
pub use external::{External, ExternalDependent, Polling, Tracked, Tracking};
pub use grant::{HttpGrant, Inbound, Origin, OriginError, SecretKey};
pub use kind::Kind;
pub use outcome::{Error, Event, EventType, Outcome};
pub use predicate::{EventKind, Predicate};
pub use refs::{PrimaryRef, SecondaryRef};
pub use resource::Resource;
pub use wasmop_core::check::Check;
pub use wasmop_core::dependent::Phase;
/// What changed between two versions of an object (kopf's `diff`, `on.field`): [`diff::diff`]
/// and [`diff::changed`].
pub use wasmop_core::diff;
/// Durations in Go's syntax (`1h30m`, `500ms`): [`duration::parse`] and [`duration::format`].
pub use wasmop_core::duration;
pub use wasmop_core::quantity::{Format as QuantityFormat, Quantity, QuantityError};
pub use webhook::{FailurePolicy, Operation, Webhook, WebhookType};

/// The raw bindings wit-bindgen generates for the `wasmop:plugin` WIT world `operator`: a
/// reconciler that also exports the admission interface.
///
/// Plugin authors do not need these: [`Reconciler`] and [`export!`] wrap them. They are public so
/// that the [`export!`] macro can name them from the plugin's crate.
///
/// ```
/// use wasmop_guest::bindings::wasmop::plugin::types::LogLevel;
///
/// let _level = LogLevel::Info;
/// ```
#[allow(
    unsafe_code,
    missing_docs,
    clippy::all,
    reason = "generated by wit-bindgen: the canonical ABI glue is unsafe and undocumented"
)]
pub mod bindings;

/// A controller for one kind of primary resource.
///
/// The host calls [`Reconciler::config`] once when it loads the plugin,
/// [`Reconciler::reconcile`] whenever the primary needs attention (it changed, a secondary of it
/// changed, a reschedule came due, a retry is due), and [`Reconciler::error_status`] (optional)
/// when a reconcile failed and no retry will follow. Plugins with [`Watch`]es mapped by the
/// plugin implement [`Reconciler::map_secondary`] and [`Reconciler::secondaries_of`] as their
/// mappers need. Reconcile must be idempotent: it states what the world should look like, and the
/// host writes it.
///
/// ```
/// use wasmop_guest::{Config, Context, Error, Kind, Outcome, Reconciler};
///
/// struct Noop;
///
/// impl Reconciler for Noop {
///     type Primary = wasmop_guest::serde_json::Value;
///
///     fn config() -> Config {
///         Config::new("noop", Kind::namespaced("", "v1", "ConfigMap"))
///     }
///
///     fn reconcile(_primary: Self::Primary, ctx: &Context) -> Result<Outcome, Error> {
///         ctx.debug("nothing to do");
///         Ok(Outcome::done())
///     }
/// }
///
/// wasmop_guest::export!(Noop);
/// ```
pub trait Reconciler {
    /// Any serde type; a primary that does not deserialize gives [`Error::Invalid`] naming the
    /// type and the serde error, and `reconcile` is not called.
    ///
    /// ```
    /// # use wasmop_guest::{Config, Context, Error, Kind, Outcome, Reconciler};
    /// use wasmop_guest::k8s_openapi::api::core::v1::ConfigMap;
    ///
    /// struct Watcher;
    ///
    /// impl Reconciler for Watcher {
    ///     type Primary = ConfigMap;
    /// #   fn config() -> Config { Config::new("watcher", Kind::namespaced("", "v1", "ConfigMap")) }
    /// #   fn reconcile(_: ConfigMap, _: &Context) -> Result<Outcome, Error> { Ok(Outcome::done()) }
    /// }
    /// ```
    type Primary: serde::de::DeserializeOwned;

    /// Describes the plugin: its name, its primary kind and how the host should schedule it.
    ///
    /// ```
    /// # use wasmop_guest::{Config, Context, Error, Kind, Outcome, Reconciler};
    /// # struct Watcher;
    /// impl Reconciler for Watcher {
    /// #   type Primary = wasmop_guest::serde_json::Value;
    ///     fn config() -> Config {
    ///         Config::new("watcher", Kind::namespaced("", "v1", "ConfigMap"))
    ///             .label_selector("app=watched")
    ///             .generation_aware(false)
    ///     }
    /// #   fn reconcile(_: Self::Primary, _: &Context) -> Result<Outcome, Error> { Ok(Outcome::done()) }
    /// }
    /// ```
    fn config() -> Config;

    /// Brings the world in line with `primary` and says what the host should write.
    ///
    /// Returning an [`Error`] makes the host retry ([`Error::Transient`]) or give up until the
    /// primary changes ([`Error::Permanent`], [`Error::Invalid`]). A panic traps the component
    /// instance: the reconcile fails and the panic message goes to the host's log.
    ///
    /// ```
    /// # use wasmop_guest::{Config, Context, Error, Kind, Outcome, Reconciler};
    /// # use std::time::Duration;
    /// # struct Watcher;
    /// impl Reconciler for Watcher {
    /// #   type Primary = wasmop_guest::serde_json::Value;
    /// #   fn config() -> Config { Config::new("watcher", Kind::namespaced("", "v1", "ConfigMap")) }
    ///     fn reconcile(primary: Self::Primary, ctx: &Context) -> Result<Outcome, Error> {
    ///         if primary["data"].is_null() {
    ///             return Err(Error::invalid("the ConfigMap has no data"));
    ///         }
    ///         ctx.info("ConfigMap has data");
    ///         Ok(Outcome::done().reschedule_after(Duration::from_secs(60)))
    ///     }
    /// }
    /// ```
    fn reconcile(primary: Self::Primary, ctx: &Context) -> Result<Outcome, Error>;

    /// The status to record when a reconcile failed and no retry will follow (JOSDK's
    /// `ErrorStatusHandler.updateErrorStatus`): after the last attempt of a transient error (a trap
    /// such as a panic counts as one, its message the trap's), or after a permanent or invalid
    /// one. Returns `None` (the default) to leave the status alone.
    ///
    /// What it returns must serialize to a JSON object, which the host merges into `.status` as
    /// [`Outcome::status`] does; anything else is logged as an error and ignored. `primary` is
    /// the object the failed attempt saw, `error` what it returned, and `ctx` has the failed
    /// attempt's [`Context::attempt`] and [`Context::is_last_attempt`] (false for a permanent
    /// error before the last attempt) and can read the host's caches. The hook is not called for
    /// a primary that does not deserialize as [`Reconciler::Primary`].
    ///
    /// ```
    /// # use wasmop_guest::{Config, Context, Error, Kind, Outcome, Reconciler};
    /// use wasmop_guest::serde::Serialize;
    /// use wasmop_guest::serde_json::json;
    /// # struct Watcher;
    /// impl Reconciler for Watcher {
    /// #   type Primary = wasmop_guest::serde_json::Value;
    /// #   fn config() -> Config { Config::new("watcher", Kind::namespaced("", "v1", "ConfigMap")) }
    /// #   fn reconcile(_: Self::Primary, _: &Context) -> Result<Outcome, Error> { Ok(Outcome::done()) }
    ///     fn error_status(_primary: Self::Primary, error: &Error, ctx: &Context) -> Option<impl Serialize> {
    ///         Some(json!({ "phase": "Failed", "message": error.message(), "attempts": ctx.attempt() + 1 }))
    ///     }
    /// }
    /// ```
    ///
    /// A typed status works too, and may borrow from `error`:
    ///
    /// ```
    /// # use wasmop_guest::{Config, Context, Error, Kind, Outcome, Reconciler};
    /// #[derive(serde::Serialize)]
    /// #[serde(rename_all = "camelCase")]
    /// struct Failed<'a> {
    ///     last_error: &'a str,
    /// }
    /// # struct Watcher;
    /// impl Reconciler for Watcher {
    /// #   type Primary = wasmop_guest::serde_json::Value;
    /// #   fn config() -> Config { Config::new("watcher", Kind::namespaced("", "v1", "ConfigMap")) }
    /// #   fn reconcile(_: Self::Primary, _: &Context) -> Result<Outcome, Error> { Ok(Outcome::done()) }
    ///     fn error_status(
    ///         _primary: Self::Primary,
    ///         error: &Error,
    ///         _ctx: &Context,
    ///     ) -> Option<impl serde::Serialize> {
    ///         Some(Failed { last_error: error.message() })
    ///     }
    /// }
    /// ```
    fn error_status(primary: Self::Primary, error: &Error, ctx: &Context) -> Option<impl serde::Serialize> {
        let _ = (primary, error, ctx);
        None::<()>
    }

    /// The primaries to reconcile for a change of `secondary`, an object of a kind watched with
    /// [`Watch::mapped_by_plugin`] (controller-runtime's `handler.EnqueueRequestsFromMapFunc`,
    /// JOSDK's `SecondaryToPrimaryMapper`). An empty list ignores the change.
    ///
    /// `secondary` is the object as JSON; on a deletion, its last known state. `previous` is the
    /// version before an update (`None` for other changes), so that a secondary that moved from
    /// one primary to another can name both. A [`PrimaryRef`] without
    /// a namespace names a primary in the secondary's namespace when the primary kind is
    /// namespaced. An `Err` (like an object that is not JSON) names no primary; the host logs it.
    ///
    /// The default fails, naming the plugin: a plugin with a [`Mapper::Plugin`] watch must
    /// implement it.
    ///
    /// ```
    /// # use wasmop_guest::{Config, Context, Error, Kind, Outcome, Reconciler};
    /// use wasmop_guest::serde_json::{Value, json};
    /// use wasmop_guest::{PrimaryRef, Watch};
    /// # struct Web;
    /// impl Reconciler for Web {
    /// #   type Primary = Value;
    ///     fn config() -> Config {
    ///         Config::new("web", Kind::namespaced("example.com", "v1", "Web"))
    ///             .watch(Watch::new(Kind::namespaced("", "v1", "ConfigMap")).mapped_by_plugin())
    ///     }
    /// #   fn reconcile(_: Self::Primary, _: &Context) -> Result<Outcome, Error> { Ok(Outcome::done()) }
    ///
    ///     // A ConfigMap names its Web, in its own namespace, in `data.web`.
    ///     fn map_secondary(secondary: &Value, previous: Option<&Value>, _: &Context) -> Result<Vec<PrimaryRef>, String> {
    ///         let namespace = secondary["metadata"]["namespace"].as_str().ok_or("no namespace")?;
    ///         let web = |cm: &Value| cm["data"]["web"].as_str().map(|name| PrimaryRef::namespaced(namespace, name));
    ///         // Before and after an update: a ConfigMap moved to another Web reconciles both.
    ///         let mut webs: Vec<PrimaryRef> = web(secondary).into_iter().chain(previous.and_then(web)).collect();
    ///         webs.dedup();
    ///         Ok(webs)
    ///     }
    /// }
    ///
    /// let cm = json!({ "metadata": { "namespace": "default" }, "data": { "web": "front" } });
    /// let mapped = wasmop_guest::testing::FakeHost::new().map_secondary::<Web>(&cm, None);
    /// assert_eq!(mapped, Ok(vec![PrimaryRef::namespaced("default", "front")]));
    /// ```
    fn map_secondary(
        secondary: &serde_json::Value,
        previous: Option<&serde_json::Value>,
        ctx: &Context,
    ) -> Result<Vec<PrimaryRef>, String> {
        let _ = (secondary, previous, ctx);
        Err(format!(
            "plugin {} declares a watch with the plugin mapper but does not implement Reconciler::map_secondary",
            Self::config().name
        ))
    }

    /// The secondaries `primary` uses, for the kinds watched with
    /// [`Watch::referenced_by_primary`] (JOSDK's `PrimaryToSecondaryMapper`): a change of any of
    /// them reconciles `primary`, and [`Context::secondaries`] gives them to its reconciles. The
    /// host asks whenever a primary is created or changes and keeps the answers as an index, so
    /// many primaries may name one secondary. Each [`SecondaryRef`] must name a watched kind.
    ///
    /// The default names none. For a primary that does not deserialize as
    /// [`Reconciler::Primary`] this is not called: the host gets an error naming the type and the
    /// serde error, and logs it.
    ///
    /// ```
    /// # use wasmop_guest::{Config, Context, Error, Kind, Outcome, Reconciler};
    /// use wasmop_guest::k8s_openapi::api::core::v1::ConfigMap;
    /// use wasmop_guest::serde_json::{Value, json};
    /// use wasmop_guest::{SecondaryRef, Watch};
    /// # struct Web;
    /// impl Reconciler for Web {
    /// #   type Primary = Value;
    ///     fn config() -> Config {
    ///         Config::new("web", Kind::namespaced("example.com", "v1", "Web"))
    ///             .watch(Watch::new(Kind::of::<ConfigMap>()).referenced_by_primary())
    ///     }
    /// #   fn reconcile(_: Self::Primary, _: &Context) -> Result<Outcome, Error> { Ok(Outcome::done()) }
    ///
    ///     // A Web uses the ConfigMap named in `spec.settings`, in its own namespace.
    ///     fn secondaries_of(web: &Value, _: &Context) -> Vec<SecondaryRef> {
    ///         let namespace = web["metadata"]["namespace"].as_str();
    ///         let settings = web["spec"]["settings"].as_str();
    ///         settings.map(|name| SecondaryRef::new(Kind::of::<ConfigMap>(), namespace, name)).into_iter().collect()
    ///     }
    /// }
    ///
    /// let web = json!({ "metadata": { "namespace": "default" }, "spec": { "settings": "web-settings" } });
    /// let used = wasmop_guest::testing::FakeHost::new().secondaries_of::<Web>(&web).unwrap();
    /// assert_eq!(used[0].name, "web-settings");
    /// ```
    fn secondaries_of(primary: &Self::Primary, ctx: &Context) -> Vec<SecondaryRef> {
        let _ = (primary, ctx);
        Vec::new()
    }

    /// The CustomResourceDefinition of the primary kind, generated from the plugin's spec and
    /// status types (see [`Crd`]); `wasmop crd --plugin x.wasm` prints it as YAML. None by
    /// default: a built-in primary kind, or a CRD written by hand.
    ///
    /// ```
    /// use wasmop_guest::schemars::JsonSchema;
    /// use wasmop_guest::serde::{Deserialize, Serialize};
    /// use wasmop_guest::{Config, Context, Crd, Error, Kind, Outcome, Reconciler, Resource};
    ///
    /// #[derive(Deserialize, JsonSchema)]
    /// #[schemars(crate = "wasmop_guest::schemars")]
    /// # #[serde(crate = "wasmop_guest::serde")]
    /// struct Spec {
    ///     message: String,
    /// }
    ///
    /// #[derive(Serialize, JsonSchema)]
    /// #[schemars(crate = "wasmop_guest::schemars")]
    /// # #[serde(crate = "wasmop_guest::serde")]
    /// struct Status {
    ///     echo: String,
    /// }
    ///
    /// struct Echo;
    ///
    /// impl Reconciler for Echo {
    ///     type Primary = Resource<Spec>;
    ///
    ///     fn config() -> Config {
    ///         Config::new("echo", Kind::namespaced("example.com", "v1", "Echo"))
    ///     }
    ///
    ///     fn crd() -> Option<Crd> {
    ///         Some(Crd::of::<Spec, Status>(&Self::config().primary).printer_column("Echo", "string", ".status.echo"))
    ///     }
    ///
    ///     fn reconcile(echo: Resource<Spec>, _: &Context) -> Result<Outcome, Error> {
    ///         Ok(Outcome::done().status(Status { echo: echo.spec.message }))
    ///     }
    /// }
    ///
    /// let crd = Echo::crd().unwrap().to_value();
    /// assert_eq!(crd["metadata"]["name"], "echos.example.com");
    /// ```
    fn crd() -> Option<Crd> {
        None
    }

    /// The desired objects of the plugin's [`Dependent`]s for `primary` (JOSDK's `desired`).
    /// Called before every [`Reconciler::reconcile`] when the plugin declares dependents; a
    /// dependent with no desired object has its objects deleted. None by default.
    ///
    /// ```
    /// # use wasmop_guest::{Config, Context, Dependent, Desired, Error, Kind, Outcome, Reconciler};
    /// # use wasmop_guest::serde_json::{Value, json};
    /// struct Site;
    /// impl Reconciler for Site {
    ///     type Primary = Value;
    ///     fn config() -> Config {
    ///         Config::new("site", Kind::namespaced("example.com", "v1", "Site"))
    ///             .dependent(Dependent::new("html", Kind::namespaced("", "v1", "ConfigMap").plural("configmaps")))
    ///     }
    /// #   fn reconcile(_: Value, _: &Context) -> Result<Outcome, Error> { Ok(Outcome::done()) }
    ///     fn desired(site: &Value, _ctx: &Context) -> Result<Vec<Desired>, Error> {
    ///         let name = format!("{}-html", site["metadata"]["name"].as_str().unwrap_or_default());
    ///         Ok(vec![Desired::new("html", &json!({
    ///             "apiVersion": "v1", "kind": "ConfigMap", "metadata": { "name": name },
    ///             "data": { "index.html": site["spec"]["html"] },
    ///         }))])
    ///     }
    /// }
    /// ```
    fn desired(primary: &Self::Primary, ctx: &Context) -> Result<Vec<Desired>, Error> {
        let _ = (primary, ctx);
        Ok(Vec::new())
    }

    /// Evaluates the plugin condition `name` ([`Check::plugin`]) on `primary` and, for a ready
    /// condition, one of the dependent's objects. False by default.
    fn check(name: &str, primary: &Self::Primary, dependent: Option<&serde_json::Value>, ctx: &Context) -> bool {
        let _ = (name, primary, dependent, ctx);
        false
    }

    /// The external state of `primary` (JOSDK's `PerResourcePollingEventSource` fetcher, and the
    /// actual state of external dependents): called every polling period outside the primary's
    /// reconcile, with the IDs the host tracks for it. Outgoing HTTP ([`http`]) is allowed here.
    fn fetch(primary: &Self::Primary, tracked: &Tracked, ctx: &Context) -> Result<Vec<External>, String> {
        let _ = (primary, tracked, ctx);
        Err(format!("plugin {} polls per resource but does not implement Reconciler::fetch", Self::config().name))
    }

    /// The external state of every primary (JOSDK's `PollingEventSource`). Outgoing HTTP is
    /// allowed here.
    fn fetch_all(ctx: &Context) -> Result<Vec<(PrimaryRef, Vec<External>)>, String> {
        let _ = ctx;
        Err(format!("plugin {} polls globally but does not implement Reconciler::fetch_all", Self::config().name))
    }

    /// Makes the external system hold `desired` (its `id` filled in by the host when tracked);
    /// `actual` is what the last fetch found. Returns the object as it now is, with its ID.
    /// Outgoing HTTP is allowed here.
    fn apply_external(
        primary: &Self::Primary,
        desired: &External,
        actual: Option<&External>,
        ctx: &Context,
    ) -> Result<External, Error> {
        let _ = (primary, desired, actual, ctx);
        Err(Error::permanent(
            "the plugin declares external dependents but does not implement Reconciler::apply_external",
        ))
    }

    /// Deletes `actual` from the external system; one already gone is not an error. Outgoing
    /// HTTP is allowed here.
    fn delete_external(primary: &Self::Primary, actual: &External, ctx: &Context) -> Result<(), Error> {
        let _ = (primary, actual, ctx);
        Err(Error::permanent(
            "the plugin declares external dependents but does not implement Reconciler::delete_external",
        ))
    }

    /// The primaries an inbound event's payload concerns (JOSDK's inbound event sources,
    /// controller-runtime's `source.Channel`); an error answers the caller 422.
    fn map_inbound(payload: &serde_json::Value, ctx: &Context) -> Result<Vec<PrimaryRef>, String> {
        let _ = (payload, ctx);
        Err(format!(
            "plugin {} accepts inbound events but does not implement Reconciler::map_inbound",
            Self::config().name
        ))
    }

    /// The plugin predicate `name` ([`Predicate::plugin`]) on a watch event: `object` is the
    /// new version (the last one of a deletion), `old` the previous one of an update, both as
    /// the host's cache holds them (cut to the watch's projection). Called only for a
    /// [`Config::predicate`] or [`Watch::predicate`] with a plugin term, and only when its
    /// answer can change the result; it cannot read the cache. Keep it cheap: it runs in a fresh
    /// sandbox for every event that asks it. True by default.
    fn filter(name: &str, event: EventKind, object: &serde_json::Value, old: Option<&serde_json::Value>) -> bool {
        let _ = (name, event, object, old);
        true
    }
}

/// A [`Reconciler`] with work to do before its primary is deleted (JOSDK's `Cleaner`).
///
/// Implementing it is what gives the plugin's primaries a finalizer: the host adds it before the
/// first reconcile, calls [`Cleaner::cleanup`] once a primary is marked for deletion, and removes
/// the finalizer when cleanup succeeds. A plugin without it gets no finalizer (unless it has
/// dependents owned by annotations, which the host deletes itself), so deleting a namespace never
/// waits for the host. [`export!`] finds the implementation by itself.
///
/// ```
/// use std::time::Duration;
/// use wasmop_guest::{Cleaner, Cleanup, Config, Context, Error, Kind, Outcome, Reconciler};
/// use wasmop_guest::serde_json::{Value, json};
/// use wasmop_guest::testing::FakeHost;
///
/// struct Site;
/// impl Reconciler for Site {
///     type Primary = Value;
///     fn config() -> Config { Config::new("site", Kind::namespaced("example.com", "v1", "Site")) }
///     fn reconcile(_: Value, _: &Context) -> Result<Outcome, Error> { Ok(Outcome::done()) }
/// }
/// impl Cleaner for Site {
///     fn cleanup(site: Value, _ctx: &Context) -> Result<Cleanup, Error> {
///         // Wait while something the garbage collector cannot see still uses the site.
///         if site["status"]["inUse"] == true {
///             return Ok(Cleanup::done().keep_finalizer().reschedule_after(Duration::from_secs(30)));
///         }
///         Ok(Cleanup::done())
///     }
/// }
/// wasmop_guest::export!(Site);
///
/// let cleanup = FakeHost::new().cleanup::<Site>(&json!({ "metadata": { "name": "a" } })).unwrap();
/// assert!(!cleanup.keeps_finalizer());
/// ```
pub trait Cleaner: Reconciler {
    /// The primary is marked for deletion and carries the plugin's finalizer: release what the
    /// garbage collector will not (JOSDK's `Cleaner.cleanup`). The host removes the finalizer
    /// when this succeeds, unless [`Cleanup::keep_finalizer`] says otherwise.
    fn cleanup(primary: Self::Primary, ctx: &Context) -> Result<Cleanup, Error>;
}

/// A [`Reconciler`] that validates its objects as the API server admits them (controller-runtime's
/// `Validator[T]`, kubebuilder's validating webhook): declare it with
/// [`Webhook::validating`](crate::Webhook::validating), and [`export!`](crate::export) finds the
/// implementation by itself.
///
/// It runs in a sandbox for every admission the webhook declares (creates and updates of the
/// primary by default), reading the host's caches through `ctx`; it must have no side effects,
/// for the API server may not store what it admits. A simple rule the API server can check
/// itself (a pattern, a minimum length, a CEL rule in the CRD) needs no webhook.
///
/// ```
/// use wasmop_guest::serde_json::{Value, json};
/// use wasmop_guest::testing::FakeHost;
/// use wasmop_guest::{Admission, Config, Context, Error, Kind, Outcome, Reconciler, Validator, Verdict, Webhook};
///
/// struct Page;
/// impl Reconciler for Page {
///     type Primary = Value;
///     fn config() -> Config {
///         Config::new("page", Kind::namespaced("example.com", "v1", "Page")).webhook(Webhook::validating())
///     }
///     fn reconcile(_: Value, _: &Context) -> Result<Outcome, Error> { Ok(Outcome::done()) }
/// }
/// impl Validator for Page {
///     fn validate(request: &Admission<Value>, _ctx: &Context) -> Verdict {
///         match request.object.as_ref().and_then(|page| page["spec"]["html"].as_str()) {
///             Some("") => Verdict::deny("html must not be empty").at("spec.html"),
///             _ => Verdict::allow(),
///         }
///     }
/// }
/// wasmop_guest::export!(Page);
///
/// let empty = json!({ "apiVersion": "example.com/v1", "kind": "Page", "metadata": { "name": "a" }, "spec": { "html": "" } });
/// let verdict = FakeHost::new().validate::<Page>(&Admission::create(&empty)).unwrap();
/// assert_eq!(verdict.message(), Some("html must not be empty"));
/// ```
pub trait Validator: Reconciler {
    /// Admits or denies a request about a primary. A primary that does not deserialize as
    /// [`Reconciler::Primary`] is denied without a call, naming the field at fault.
    fn validate(request: &Admission<Self::Primary>, ctx: &Context) -> Verdict;

    /// Admits or denies a request about an object of another kind the webhook declares
    /// ([`Webhook::kinds`](crate::Webhook::kinds)). The default denies, naming the plugin: a
    /// plugin whose webhook names other kinds must implement it.
    fn validate_other(request: &Admission, ctx: &Context) -> Verdict {
        let _ = ctx;
        Verdict::deny(format!(
            "plugin {} validates {} but does not implement Validator::validate_other",
            Self::config().name,
            request.kind
        ))
    }
}

/// A [`Reconciler`] that fills in the defaults of its objects as the API server admits them
/// (controller-runtime's `Defaulter[T]`, kubebuilder's defaulting webhook): declare it with
/// [`Webhook::mutating`](crate::Webhook::mutating).
///
/// The object is given as [`Reconciler::Primary`]; what `default` changes in it is changed in
/// the object the API server sent, and fields the type does not know are kept. The host answers
/// with the JSON patch.
///
/// ```
/// use wasmop_guest::serde::{Deserialize, Serialize};
/// use wasmop_guest::serde_json::{Value, json};
/// use wasmop_guest::testing::FakeHost;
/// use wasmop_guest::{Admission, Config, Context, Defaulter, Error, Kind, Outcome, Reconciler, Webhook};
///
/// #[derive(Deserialize, Serialize)]
/// # #[serde(crate = "wasmop_guest::serde")]
/// struct Page {
///     spec: PageSpec,
/// }
/// #[derive(Deserialize, Serialize)]
/// # #[serde(crate = "wasmop_guest::serde")]
/// struct PageSpec {
///     exposed: Option<bool>,
/// }
///
/// struct Pages;
/// impl Reconciler for Pages {
///     type Primary = Page;
///     fn config() -> Config {
///         Config::new("page", Kind::namespaced("example.com", "v1", "Page")).webhook(Webhook::mutating())
///     }
///     fn reconcile(_: Page, _: &Context) -> Result<Outcome, Error> { Ok(Outcome::done()) }
/// }
/// impl Defaulter for Pages {
///     fn default(page: &mut Page, _ctx: &Context) -> Result<(), String> {
///         page.spec.exposed.get_or_insert(false);
///         Ok(())
///     }
/// }
/// wasmop_guest::export!(Pages);
///
/// let page = json!({ "apiVersion": "example.com/v1", "kind": "Page", "metadata": { "name": "a" }, "spec": { "html": "hi" } });
/// let stored = FakeHost::new().default_object::<Pages>(&Admission::create(&page)).unwrap();
/// assert_eq!(stored["spec"], json!({ "html": "hi", "exposed": false }));
/// ```
pub trait Defaulter: Reconciler<Primary: serde::Serialize> {
    /// Fills in the defaults of a primary as it is created or updated; an `Err` denies the
    /// request with its message. A primary that does not deserialize is denied without a call,
    /// naming the field at fault.
    fn default(object: &mut Self::Primary, ctx: &Context) -> Result<(), String>;

    /// Fills in the defaults of an object of another kind the webhook declares. The default
    /// denies, naming the plugin.
    fn default_other(object: &mut serde_json::Value, ctx: &Context) -> Result<(), String> {
        let _ = (object, ctx);
        Err(format!("plugin {} does not implement Defaulter::default_other", Self::config().name))
    }
}

/// A [`Reconciler`] whose primary's CustomResourceDefinition serves several versions, converted
/// by the plugin: declare it with [`Webhook::conversion`](crate::Webhook::conversion).
///
/// ```
/// use wasmop_guest::serde_json::{Value, json};
/// use wasmop_guest::testing::FakeHost;
/// use wasmop_guest::{Config, Context, Converter, Error, Kind, Outcome, Reconciler, Webhook};
///
/// struct Pages;
/// impl Reconciler for Pages {
///     type Primary = Value;
///     fn config() -> Config {
///         Config::new("page", Kind::namespaced("example.com", "v2", "Page")).webhook(Webhook::conversion())
///     }
///     fn reconcile(_: Value, _: &Context) -> Result<Outcome, Error> { Ok(Outcome::done()) }
/// }
/// impl Converter for Pages {
///     // v1 has `spec.content`, v2 calls it `spec.html`.
///     fn convert(mut page: Value, to: &str, _ctx: &Context) -> Result<Value, String> {
///         let spec = page["spec"].as_object_mut().ok_or("no spec")?;
///         let (from, into) = if to == "example.com/v2" { ("content", "html") } else { ("html", "content") };
///         if let Some(value) = spec.remove(from) {
///             spec.insert(into.into(), value);
///         }
///         Ok(page)
///     }
/// }
/// wasmop_guest::export!(Pages);
///
/// let v1 = json!({ "apiVersion": "example.com/v1", "kind": "Page", "spec": { "content": "hi" } });
/// let v2 = FakeHost::new().convert::<Pages>(&[v1], "example.com/v2").unwrap();
/// assert_eq!(v2[0], json!({ "apiVersion": "example.com/v2", "kind": "Page", "spec": { "html": "hi" } }));
/// ```
pub trait Converter: Reconciler {
    /// `object` (JSON, of a version of the primary's CRD other than `desired_api_version`)
    /// converted to `desired_api_version` (`group/version`); the SDK sets its `apiVersion`.
    /// An `Err` fails the conversion with its message.
    fn convert(
        object: serde_json::Value,
        desired_api_version: &str,
        ctx: &Context,
    ) -> Result<serde_json::Value, String>;
}

/// Runs `R`'s validation of `request` (objects as JSON text): the one code path shared by the
/// component export and [`crate::testing`].
pub(crate) fn validate<R: Validator>(request: Admission<String>, ctx: &Context) -> Verdict {
    if crate::admission::is_primary(&request.kind, &R::config().primary) {
        match request.try_map(|object| decode_at::<R::Primary>(&object)) {
            Ok(request) => R::validate(&request, ctx),
            Err(invalid) => crate::admission::undecodable(invalid),
        }
    } else {
        match request.try_map(|object| decode_at::<serde_json::Value>(&object)) {
            Ok(request) => R::validate_other(&request, ctx),
            Err(invalid) => crate::admission::undecodable(invalid),
        }
    }
}

/// Runs `R`'s defaulting of `request`'s object: the object as it should be stored (JSON text),
/// or the refusal. Shared by the component export and [`crate::testing`].
pub(crate) fn default_object<R: Defaulter>(request: Admission<String>, ctx: &Context) -> Result<String, String> {
    let refused = |(field, message): (Option<String>, String)| match field {
        Some(field) => format!("{field}: {message}"),
        None => message,
    };
    let object = request.object.ok_or_else(|| format!("a {:?} request has no object to default", request.operation))?;
    let mut sent: serde_json::Value = decode_at(&object).map_err(refused)?;
    if !crate::admission::is_primary(&request.kind, &R::config().primary) {
        R::default_other(&mut sent, ctx)?;
        return Ok(sent.to_string());
    }
    let mut typed: R::Primary = decode_at(&object).map_err(refused)?;
    let before = serde_json::to_value(&typed).map_err(|e| format!("the primary does not serialize: {e}"))?;
    R::default(&mut typed, ctx)?;
    let after = serde_json::to_value(&typed).map_err(|e| format!("the defaulted primary does not serialize: {e}"))?;
    crate::admission::apply_changes(&mut sent, &before, &after);
    Ok(sent.to_string())
}

/// Runs `R`'s conversion of `objects` (JSON text) to `desired_api_version`: an object already of
/// that version is kept as it is, each converted one gets the version as its `apiVersion`.
/// Shared by the component export and [`crate::testing`].
pub(crate) fn convert<R: Converter>(
    objects: Vec<String>,
    desired_api_version: &str,
    ctx: &Context,
) -> Result<Vec<String>, String> {
    objects
        .into_iter()
        .map(|object| {
            let object: serde_json::Value =
                serde_json::from_str(&object).map_err(|e| format!("an object to convert is not JSON: {e}"))?;
            if object["apiVersion"] == desired_api_version {
                return Ok(object.to_string());
            }
            let mut converted = R::convert(object, desired_api_version, ctx)?;
            if !converted.is_object() {
                return Err(format!("the conversion to {desired_api_version} did not give an object: {converted}"));
            }
            converted["apiVersion"] = desired_api_version.into();
            Ok(converted.to_string())
        })
        .collect()
}

/// Panics, naming the plugin and the trait, when `config` declares a webhook whose function the
/// plugin does not implement, given which of [`Validator`], [`Defaulter`] and [`Converter`] it
/// implements: the host then refuses the plugin at load (`describe` failed), as it refuses a
/// component declaring webhooks without the admission export.
pub(crate) fn check_implemented(config: &Config, validates: bool, defaults: bool, converts: bool) {
    for webhook in &config.webhooks {
        let (implemented, trait_name) = match webhook.webhook_type {
            crate::WebhookType::Validating => (validates, "Validator"),
            crate::WebhookType::Mutating => (defaults, "Defaulter"),
            crate::WebhookType::Conversion => (converts, "Converter"),
        };
        assert!(
            implemented,
            "plugin {} declares a {} webhook but does not implement wasmop_guest::{trait_name}",
            config.name,
            webhook.webhook_type.name()
        );
    }
}

/// Exports a [`Reconciler`] as the plugin's `wasmop:plugin/reconciler` implementation.
///
/// Call it once, at the top level of the plugin crate. It implements the wit-bindgen `Guest`
/// trait for the reconciler and, when compiling for `wasm32`, emits the component exports. On
/// other targets it only type-checks, so the plugin crate also builds natively for unit tests.
///
/// ```
/// use wasmop_guest::{Config, Context, Error, Kind, Outcome, Reconciler};
///
/// struct MyReconciler;
///
/// impl Reconciler for MyReconciler {
///     type Primary = wasmop_guest::serde_json::Value;
///
///     fn config() -> Config {
///         Config::new("my-plugin", Kind::namespaced("", "v1", "ConfigMap"))
///     }
///
///     fn reconcile(_primary: Self::Primary, _ctx: &Context) -> Result<Outcome, Error> {
///         Ok(Outcome::done())
///     }
/// }
///
/// wasmop_guest::export!(MyReconciler);
/// ```
#[macro_export]
macro_rules! export {
    ($reconciler:ty $(,)?) => {
        #[allow(unsafe_code, reason = "wit-bindgen's component export shims")]
        const _: () = {
            #[doc(hidden)]
            pub struct __WasmopGuestExport;

            impl $crate::__private::Guest for __WasmopGuestExport {
                fn describe() -> $crate::__private::PluginConfig {
                    #[allow(unused_imports, reason = "one of each two probes answers")]
                    use $crate::__private::{
                        ProbeCleaner as _, ProbeConverter as _, ProbeDefaulter as _, ProbeNoCleaner as _,
                        ProbeNoConverter as _, ProbeNoDefaulter as _, ProbeNoValidator as _, ProbeValidator as _,
                    };
                    let probe = &&$crate::__private::Probe::<$reconciler>::new();
                    let implements = $crate::__private::Implements {
                        cleanup: probe.cleans(),
                        validate: probe.validates(),
                        default: probe.defaults(),
                        convert: probe.converts(),
                    };
                    $crate::__private::describe::<$reconciler>(implements)
                }

                fn reconcile(
                    request: $crate::__private::ReconcileRequest,
                ) -> ::core::result::Result<$crate::__private::WitOutcome, $crate::__private::ReconcileError> {
                    $crate::__private::reconcile::<$reconciler>(request)
                }

                fn update_error_status(
                    request: $crate::__private::ReconcileRequest,
                    error: $crate::__private::ReconcileError,
                ) -> ::core::option::Option<::std::string::String> {
                    $crate::__private::update_error_status::<$reconciler>(request, error)
                }

                fn map_secondary(
                    secondary: ::std::string::String,
                    previous: ::core::option::Option<::std::string::String>,
                ) -> ::core::result::Result<::std::vec::Vec<$crate::__private::WitObjectRef>, ::std::string::String>
                {
                    $crate::__private::map_secondary::<$reconciler>(secondary, previous)
                }

                fn secondaries_of(
                    primary: ::std::string::String,
                ) -> ::core::result::Result<::std::vec::Vec<$crate::__private::WitSecondaryRef>, ::std::string::String>
                {
                    $crate::__private::secondaries_of::<$reconciler>(primary)
                }

                fn crd() -> ::core::option::Option<::std::string::String> {
                    $crate::__private::crd::<$reconciler>()
                }

                fn desired(
                    request: $crate::__private::ReconcileRequest,
                ) -> ::core::result::Result<
                    ::std::vec::Vec<$crate::__private::WitDesiredObject>,
                    $crate::__private::ReconcileError,
                > {
                    $crate::__private::desired::<$reconciler>(request)
                }

                fn cleanup(
                    request: $crate::__private::ReconcileRequest,
                ) -> ::core::result::Result<$crate::__private::WitCleanupOutcome, $crate::__private::ReconcileError>
                {
                    #[allow(unused_imports, reason = "one of the two probes answers")]
                    use $crate::__private::{ProbeCleaner as _, ProbeNoCleaner as _};
                    (&&$crate::__private::Probe::<$reconciler>::new()).cleanup(request)
                }

                fn check(
                    name: ::std::string::String,
                    primary: ::std::string::String,
                    dependent: ::core::option::Option<::std::string::String>,
                ) -> bool {
                    $crate::__private::check::<$reconciler>(name, primary, dependent)
                }

                fn fetch(
                    primary: ::std::string::String,
                    tracked: ::std::vec::Vec<$crate::__private::WitTrackedId>,
                ) -> ::core::result::Result<::std::vec::Vec<$crate::__private::WitExternalObject>, ::std::string::String>
                {
                    $crate::__private::fetch::<$reconciler>(primary, tracked)
                }

                fn fetch_all()
                -> ::core::result::Result<::std::vec::Vec<$crate::__private::WitPrimaryState>, ::std::string::String> {
                    $crate::__private::fetch_all::<$reconciler>()
                }

                fn apply_external(
                    primary: ::std::string::String,
                    desired: $crate::__private::WitExternalObject,
                    actual: ::core::option::Option<$crate::__private::WitExternalObject>,
                ) -> ::core::result::Result<$crate::__private::WitExternalObject, $crate::__private::ReconcileError> {
                    $crate::__private::apply_external::<$reconciler>(primary, desired, actual)
                }

                fn delete_external(
                    primary: ::std::string::String,
                    actual: $crate::__private::WitExternalObject,
                ) -> ::core::result::Result<(), $crate::__private::ReconcileError> {
                    $crate::__private::delete_external::<$reconciler>(primary, actual)
                }

                fn map_inbound(
                    payload: ::std::string::String,
                ) -> ::core::result::Result<::std::vec::Vec<$crate::__private::WitObjectRef>, ::std::string::String> {
                    $crate::__private::map_inbound::<$reconciler>(payload)
                }

                fn filter(
                    name: ::std::string::String,
                    event: $crate::__private::WitEventKind,
                    object: ::std::string::String,
                    old: ::core::option::Option<::std::string::String>,
                ) -> bool {
                    $crate::__private::filter::<$reconciler>(name, event, object, old)
                }
            }

            impl $crate::__private::AdmissionGuest for __WasmopGuestExport {
                fn validate(request: $crate::__private::WitAdmissionRequest) -> $crate::__private::WitVerdict {
                    #[allow(unused_imports, reason = "one of the two probes answers")]
                    use $crate::__private::{ProbeNoValidator as _, ProbeValidator as _};
                    (&&$crate::__private::Probe::<$reconciler>::new()).validate(request)
                }

                fn default(
                    request: $crate::__private::WitAdmissionRequest,
                ) -> ::core::result::Result<::std::string::String, ::std::string::String> {
                    #[allow(unused_imports, reason = "one of the two probes answers")]
                    use $crate::__private::{ProbeDefaulter as _, ProbeNoDefaulter as _};
                    (&&$crate::__private::Probe::<$reconciler>::new()).default_object(request)
                }

                fn convert(
                    objects: ::std::vec::Vec<::std::string::String>,
                    desired_api_version: ::std::string::String,
                ) -> ::core::result::Result<::std::vec::Vec<::std::string::String>, ::std::string::String> {
                    #[allow(unused_imports, reason = "one of the two probes answers")]
                    use $crate::__private::{ProbeConverter as _, ProbeNoConverter as _};
                    (&&$crate::__private::Probe::<$reconciler>::new()).convert(objects, desired_api_version)
                }
            }

            #[cfg(target_arch = "wasm32")]
            $crate::__export_operator_impl!(
                __WasmopGuestExport with_types_in $crate::bindings
            );

            // Natively there are no exports to keep the reconciler alive: root it here, or
            // every type it uses would be reported as dead code.
            #[cfg(not(target_arch = "wasm32"))]
            #[used]
            static __WASMOP_GUEST_ROOTS: (
                fn() -> $crate::__private::PluginConfig,
                fn(
                    $crate::__private::ReconcileRequest,
                ) -> ::core::result::Result<$crate::__private::WitOutcome, $crate::__private::ReconcileError>,
                fn(
                    $crate::__private::ReconcileRequest,
                    $crate::__private::ReconcileError,
                ) -> ::core::option::Option<::std::string::String>,
                fn(
                    ::std::string::String,
                    ::core::option::Option<::std::string::String>,
                )
                    -> ::core::result::Result<::std::vec::Vec<$crate::__private::WitObjectRef>, ::std::string::String>,
                fn(
                    ::std::string::String,
                ) -> ::core::result::Result<
                    ::std::vec::Vec<$crate::__private::WitSecondaryRef>,
                    ::std::string::String,
                >,
                fn(
                    $crate::__private::ReconcileRequest,
                ) -> ::core::result::Result<
                    ::std::vec::Vec<$crate::__private::WitDesiredObject>,
                    $crate::__private::ReconcileError,
                >,
                fn(
                    $crate::__private::ReconcileRequest,
                )
                    -> ::core::result::Result<$crate::__private::WitCleanupOutcome, $crate::__private::ReconcileError>,
                fn(::std::string::String, ::std::string::String, ::core::option::Option<::std::string::String>) -> bool,
                fn($crate::__private::WitAdmissionRequest) -> $crate::__private::WitVerdict,
                fn(
                    $crate::__private::WitAdmissionRequest,
                ) -> ::core::result::Result<::std::string::String, ::std::string::String>,
                fn(
                    ::std::vec::Vec<::std::string::String>,
                    ::std::string::String,
                ) -> ::core::result::Result<::std::vec::Vec<::std::string::String>, ::std::string::String>,
            ) = (
                <__WasmopGuestExport as $crate::__private::Guest>::describe,
                <__WasmopGuestExport as $crate::__private::Guest>::reconcile,
                <__WasmopGuestExport as $crate::__private::Guest>::update_error_status,
                <__WasmopGuestExport as $crate::__private::Guest>::map_secondary,
                <__WasmopGuestExport as $crate::__private::Guest>::secondaries_of,
                <__WasmopGuestExport as $crate::__private::Guest>::desired,
                <__WasmopGuestExport as $crate::__private::Guest>::cleanup,
                <__WasmopGuestExport as $crate::__private::Guest>::check,
                <__WasmopGuestExport as $crate::__private::AdmissionGuest>::validate,
                <__WasmopGuestExport as $crate::__private::AdmissionGuest>::default,
                <__WasmopGuestExport as $crate::__private::AdmissionGuest>::convert,
            );
        };
    };
}

/// Runs one reconcile of `R` on the primary's JSON text: the one code path shared by the
/// component export and [`testing`].
pub(crate) fn run<R: Reconciler>(object: &str, ctx: &Context) -> Result<Outcome, Error> {
    let outcome = R::reconcile(primary::<R>(object)?, ctx)?;
    outcome.check()?;
    Ok(outcome)
}

/// The primary's JSON text as `R::Primary`, or an invalid-resource error in the terms of the
/// object the user wrote: the path of the field at fault, what it should be and the value it has
/// (`spec.replicas: expected an integer, got "three"`).
///
/// A valid primary is decoded without tracking the path, which takes about twice as long and
/// was most of a small reconcile's time in the guest; only an invalid one is decoded again,
/// tracking it, to name the field at fault.
fn primary<R: Reconciler>(object: &str) -> Result<R::Primary, Error> {
    decode_at(object).map_err(|(path, message)| match path {
        Some(path) => Error::invalid(format!("{path}: {message}")),
        None => Error::invalid(message),
    })
}

/// The longest value an invalid-primary message quotes, in characters.
const QUOTED_VALUE: usize = 60;

/// `object` as a `T`, or the path of the field at fault (none for the object itself) and what
/// is wrong with it ([`invalid_field`]).
pub(crate) fn decode_at<T: serde::de::DeserializeOwned>(object: &str) -> Result<T, (Option<String>, String)> {
    serde_json::from_str(object).or_else(|_| {
        let mut json = serde_json::Deserializer::from_str(object);
        serde_path_to_error::deserialize(&mut json).map_err(|e| invalid_field(object, &e))
    })
}

/// The path of the field at fault in `object` (none for the object itself) and what is wrong
/// with it, from serde's error: without serde's position in the JSON text (which the user never
/// sees) or Rust type names.
fn invalid_field(object: &str, error: &serde_path_to_error::Error<serde_json::Error>) -> (Option<String>, String) {
    let inner = error.inner();
    let text = inner.to_string();
    let position = format!(" at line {} column {}", inner.line(), inner.column());
    let message = text.strip_suffix(&position).unwrap_or(&text);
    if !matches!(inner.classify(), serde_json::error::Category::Data) {
        return (None, format!("the primary is not JSON: {message}"));
    }
    let mismatch = message.strip_prefix("invalid type: ").or_else(|| message.strip_prefix("invalid value: "));
    let message = match mismatch.and_then(|m| m.rsplit_once(", expected ")) {
        Some((unexpected, expected)) => {
            let value =
                serde_json::from_str(object).ok().and_then(|object| value_at(&object, error.path()).map(quoted));
            format!("expected {}, got {}", plain(expected), value.unwrap_or_else(|| unexpected.to_owned()))
        }
        None => message.to_owned(),
    };
    let path = error.path().iter().next().is_some().then(|| error.path().to_string());
    (path, message)
}

/// The value at `path` in `object`, if the path leads to one.
fn value_at<'a>(object: &'a serde_json::Value, path: &serde_path_to_error::Path) -> Option<&'a serde_json::Value> {
    use serde_path_to_error::Segment;
    path.iter().try_fold(object, |value, segment| match segment {
        Segment::Seq { index } => value.get(*index),
        Segment::Map { key } | Segment::Enum { variant: key } => value.get(key),
        Segment::Unknown => None,
    })
}

/// `value` as compact JSON, cut to [`QUOTED_VALUE`] characters.
fn quoted(value: &serde_json::Value) -> String {
    let text = value.to_string();
    match text.char_indices().nth(QUOTED_VALUE) {
        Some((end, _)) => format!("{}...", &text[..end]),
        None => text,
    }
}

/// What serde says a field expects, in JSON's terms rather than Rust's.
fn plain(expected: &str) -> &str {
    match expected {
        "i8" | "i16" | "i32" | "i64" | "i128" | "isize" => "an integer",
        "u8" | "u16" | "u32" | "u64" | "u128" | "usize" => "a non-negative integer",
        "f32" | "f64" => "a number",
        "a sequence" => "a list",
        "a map" => "an object",
        _ if expected.starts_with("struct ") => "an object",
        _ => expected,
    }
}

/// Runs `R`'s [`Reconciler::desired`] on the primary's JSON text: shared by the export and
/// [`testing`].
pub(crate) fn desired<R: Reconciler>(object: &str, ctx: &Context) -> Result<Vec<Desired>, Error> {
    R::desired(&primary::<R>(object)?, ctx)
}

/// Runs `R`'s [`Reconciler::cleanup`] on the primary's JSON text: shared by the export and
/// [`testing`].
pub(crate) fn cleanup<R: Cleaner>(object: &str, ctx: &Context) -> Result<Cleanup, Error> {
    R::cleanup(primary::<R>(object)?, ctx)
}

/// Runs `R`'s [`Reconciler::error_status`] on the primary's JSON text after `error`: the one code
/// path shared by the component export and [`testing`]. `None` when the primary does not
/// deserialize, the hook gives nothing, or what it gives is not a JSON object (logged).
pub(crate) fn error_status<R: Reconciler>(object: &str, error: &Error, ctx: &Context) -> Option<serde_json::Value> {
    let primary: R::Primary = serde_json::from_str(object).ok()?;
    let status = R::error_status(primary, error, ctx)?;
    match serde_json::to_value(status) {
        Ok(status @ serde_json::Value::Object(_)) => Some(status),
        Ok(other) => {
            ctx.error(format!("error_status must return a JSON object, got {other}; the status is left alone"));
            None
        }
        Err(e) => {
            ctx.error(format!("the error status does not serialize: {e}; the status is left alone"));
            None
        }
    }
}

/// Runs `R`'s [`Reconciler::check`] on JSON text: false when the primary or the dependent does
/// not decode. Shared by the export and [`testing`].
pub(crate) fn check<R: Reconciler>(name: &str, primary: &str, dependent: Option<&str>, ctx: &Context) -> bool {
    let Ok(primary) = serde_json::from_str::<R::Primary>(primary) else { return false };
    match dependent.map(serde_json::from_str::<serde_json::Value>).transpose() {
        Ok(dependent) => R::check(name, &primary, dependent.as_ref(), ctx),
        Err(_) => false,
    }
}

/// Runs `R`'s [`Reconciler::map_secondary`] on JSON text: an object that is not JSON is an
/// error naming it. Shared by the export and [`testing`].
pub(crate) fn map_secondary<R: Reconciler>(
    secondary: &str,
    previous: Option<&str>,
    ctx: &Context,
) -> Result<Vec<PrimaryRef>, String> {
    let secondary: serde_json::Value =
        serde_json::from_str(secondary).map_err(|e| format!("the secondary is not JSON: {e}"))?;
    let previous: Option<serde_json::Value> = previous
        .map(serde_json::from_str)
        .transpose()
        .map_err(|e| format!("the previous version of the secondary is not JSON: {e}"))?;
    R::map_secondary(&secondary, previous.as_ref(), ctx)
}

/// Runs `R`'s [`Reconciler::secondaries_of`] on JSON text: a primary that does not deserialize
/// is an error naming the type and the serde error. Shared by the export and [`testing`].
pub(crate) fn secondaries_of<R: Reconciler>(primary: &str, ctx: &Context) -> Result<Vec<SecondaryRef>, String> {
    let primary: R::Primary = serde_json::from_str(primary)
        .map_err(|e| format!("the primary does not deserialize as {}: {e}", std::any::type_name::<R::Primary>()))?;
    Ok(R::secondaries_of(&primary, ctx))
}

/// Glue used by [`export!`]; not part of the API.
#[doc(hidden)]
pub mod __private {
    pub use crate::bindings::exports::wasmop::plugin::admission::Guest as AdmissionGuest;
    pub use crate::bindings::exports::wasmop::plugin::reconciler::Guest;
    pub use crate::bindings::wasmop::plugin::types::{
        AdmissionRequest as WitAdmissionRequest, CleanupOutcome as WitCleanupOutcome,
        DesiredObject as WitDesiredObject, EventKind as WitEventKind, ExternalObject as WitExternalObject,
        ObjectRef as WitObjectRef, Outcome as WitOutcome, PluginConfig, PrimaryState as WitPrimaryState,
        ReconcileError, ReconcileRequest, SecondaryRef as WitSecondaryRef, TrackedId as WitTrackedId,
        Verdict as WitVerdict,
    };

    use crate::context::{Context, WitHost};
    use crate::{Cleaner, Converter, Defaulter, Reconciler, Validator};

    /// Which of the optional traits a reconciler implements, as [`export!`](crate::export)'s
    /// probes find out.
    #[derive(Clone, Copy, Debug, Default)]
    pub struct Implements {
        /// [`Cleaner`].
        pub cleanup: bool,
        /// [`Validator`].
        pub validate: bool,
        /// [`Defaulter`].
        pub default: bool,
        /// [`Converter`].
        pub convert: bool,
    }

    /// `describe` for `R`, which implements what `implements` says. Panics when `R` declares a
    /// webhook whose trait it does not implement: the host refuses it at load.
    pub fn describe<R: Reconciler>(implements: Implements) -> PluginConfig {
        let config = R::config();
        crate::check_implemented(&config, implements.validate, implements.default, implements.convert);
        config.into_wit(implements.cleanup)
    }

    /// Finds out in [`export!`](crate::export) whether a reconciler implements [`Cleaner`]
    /// (autoref dispatch: `(&&Probe::<R>::new())` picks [`ProbeCleaner`] when `R: Cleaner`, and
    /// [`ProbeNoCleaner`] otherwise).
    pub struct Probe<R>(core::marker::PhantomData<R>);

    impl<R> Probe<R> {
        /// The probe of `R`.
        #[allow(clippy::new_without_default, reason = "only export! makes one")]
        pub fn new() -> Self {
            Self(core::marker::PhantomData)
        }
    }

    /// The answer for a reconciler that implements [`Cleaner`].
    pub trait ProbeCleaner {
        /// True.
        fn cleans(&self) -> bool;
        /// `cleanup`, calling [`Cleaner::cleanup`].
        fn cleanup(&self, request: ReconcileRequest) -> Result<WitCleanupOutcome, ReconcileError>;
    }

    impl<R: Cleaner> ProbeCleaner for &Probe<R> {
        fn cleans(&self) -> bool {
            true
        }

        fn cleanup(&self, request: ReconcileRequest) -> Result<WitCleanupOutcome, ReconcileError> {
            let (object, ctx) = context(request);
            crate::cleanup::<R>(&object, &ctx).map(crate::Cleanup::into_wit).map_err(crate::Error::into_host)
        }
    }

    /// The answer for a reconciler without [`Cleaner`]: the host gives its primaries no
    /// finalizer for it, so `cleanup` is never called; if it were, it would release.
    pub trait ProbeNoCleaner {
        /// False.
        fn cleans(&self) -> bool {
            false
        }
        /// `cleanup` that releases the finalizer.
        fn cleanup(&self, request: ReconcileRequest) -> Result<WitCleanupOutcome, ReconcileError> {
            let _ = request;
            Ok(crate::Cleanup::done().into_wit())
        }
    }

    impl<R> ProbeNoCleaner for Probe<R> {}

    /// The answer for a reconciler that implements [`Validator`].
    pub trait ProbeValidator {
        /// True.
        fn validates(&self) -> bool;
        /// `validate`, calling [`Validator::validate`].
        fn validate(&self, request: WitAdmissionRequest) -> WitVerdict;
    }

    impl<R: Validator> ProbeValidator for &Probe<R> {
        fn validates(&self) -> bool {
            true
        }

        fn validate(&self, request: WitAdmissionRequest) -> WitVerdict {
            crate::validate::<R>(crate::Admission::<String>::from_wit(request), &outside()).into_wit()
        }
    }

    /// The answer for a reconciler without [`Validator`]: it may declare no validating webhook,
    /// so `validate` is never called; if it were, it would deny.
    pub trait ProbeNoValidator {
        /// False.
        fn validates(&self) -> bool {
            false
        }
        /// `validate` that denies.
        fn validate(&self, request: WitAdmissionRequest) -> WitVerdict {
            let _ = request;
            crate::Verdict::deny("the plugin does not implement Validator").into_wit()
        }
    }

    impl<R> ProbeNoValidator for Probe<R> {}

    /// The answer for a reconciler that implements [`Defaulter`].
    pub trait ProbeDefaulter {
        /// True.
        fn defaults(&self) -> bool;
        /// `default`, calling [`Defaulter::default`].
        fn default_object(&self, request: WitAdmissionRequest) -> Result<String, String>;
    }

    impl<R: Defaulter> ProbeDefaulter for &Probe<R> {
        fn defaults(&self) -> bool {
            true
        }

        fn default_object(&self, request: WitAdmissionRequest) -> Result<String, String> {
            crate::default_object::<R>(crate::Admission::<String>::from_wit(request), &outside())
        }
    }

    /// The answer for a reconciler without [`Defaulter`]: it may declare no mutating webhook, so
    /// `default` is never called; if it were, it would refuse.
    pub trait ProbeNoDefaulter {
        /// False.
        fn defaults(&self) -> bool {
            false
        }
        /// `default` that refuses.
        fn default_object(&self, request: WitAdmissionRequest) -> Result<String, String> {
            let _ = request;
            Err("the plugin does not implement Defaulter".into())
        }
    }

    impl<R> ProbeNoDefaulter for Probe<R> {}

    /// The answer for a reconciler that implements [`Converter`].
    pub trait ProbeConverter {
        /// True.
        fn converts(&self) -> bool;
        /// `convert`, calling [`Converter::convert`].
        fn convert(&self, objects: Vec<String>, desired_api_version: String) -> Result<Vec<String>, String>;
    }

    impl<R: Converter> ProbeConverter for &Probe<R> {
        fn converts(&self) -> bool {
            true
        }

        fn convert(&self, objects: Vec<String>, desired_api_version: String) -> Result<Vec<String>, String> {
            crate::convert::<R>(objects, &desired_api_version, &outside())
        }
    }

    /// The answer for a reconciler without [`Converter`]: it may declare no conversion webhook,
    /// so `convert` is never called; if it were, it would fail.
    pub trait ProbeNoConverter {
        /// False.
        fn converts(&self) -> bool {
            false
        }
        /// `convert` that fails.
        fn convert(&self, objects: Vec<String>, desired_api_version: String) -> Result<Vec<String>, String> {
            let _ = (objects, desired_api_version);
            Err("the plugin does not implement Converter".into())
        }
    }

    impl<R> ProbeNoConverter for Probe<R> {}

    /// The context of `request`, talking to the real host imports.
    fn context(request: ReconcileRequest) -> (String, Context) {
        let dependents = request.dependents.into_iter().map(crate::DependentState::from_wit).collect();
        let external = request.external.into_iter().map(crate::External::from_wit).collect();
        let inbound = request.inbound.and_then(|payload| serde_json::from_str(&payload).ok());
        let ctx = Context::new(Box::new(WitHost), request.attempt, request.last_attempt)
            .with_dependents(dependents)
            .with_external(external, inbound);
        (request.object, ctx)
    }

    /// `reconcile` for `R`, talking to the real host imports.
    pub fn reconcile<R: Reconciler>(request: ReconcileRequest) -> Result<WitOutcome, ReconcileError> {
        let (object, ctx) = context(request);
        crate::run::<R>(&object, &ctx).map(crate::Outcome::into_wit).map_err(crate::Error::into_host)
    }

    /// `desired` for `R`.
    pub fn desired<R: Reconciler>(request: ReconcileRequest) -> Result<Vec<WitDesiredObject>, ReconcileError> {
        let (object, ctx) = context(request);
        let desired = crate::desired::<R>(&object, &ctx).map_err(crate::Error::into_host)?;
        Ok(desired.into_iter().map(crate::Desired::into_wit).collect())
    }

    /// A context for the calls outside a reconcile (`check`, `map-secondary`,
    /// `secondaries-of`): `get` and `list` read the host's caches.
    fn outside() -> Context {
        Context::new(Box::new(WitHost), 0, false)
    }

    /// `check` for `R`: false when the primary or the dependent does not decode.
    pub fn check<R: Reconciler>(name: String, primary: String, dependent: Option<String>) -> bool {
        crate::check::<R>(&name, &primary, dependent.as_deref(), &outside())
    }

    /// `update-error-status` for `R`, talking to the real host imports.
    pub fn update_error_status<R: Reconciler>(request: ReconcileRequest, error: ReconcileError) -> Option<String> {
        let ctx = Context::new(Box::new(WitHost), request.attempt, request.last_attempt);
        crate::error_status::<R>(&request.object, &crate::Error::from_wit(error), &ctx).map(|status| status.to_string())
    }

    /// `map-secondary` for `R`: an object that is not JSON is an error naming it.
    pub fn map_secondary<R: Reconciler>(
        secondary: String,
        previous: Option<String>,
    ) -> Result<Vec<WitObjectRef>, String> {
        let primaries = crate::map_secondary::<R>(&secondary, previous.as_deref(), &outside())?;
        Ok(primaries.into_iter().map(crate::PrimaryRef::into_wit).collect())
    }

    /// `crd` for `R`: its CRD as JSON text.
    pub fn crd<R: Reconciler>() -> Option<String> {
        R::crd().map(|crd| crd.to_value().to_string())
    }

    /// `secondaries-of` for `R`: a primary that does not deserialize is an error naming the type
    /// and the serde error.
    pub fn secondaries_of<R: Reconciler>(primary: String) -> Result<Vec<WitSecondaryRef>, String> {
        let secondaries = crate::secondaries_of::<R>(&primary, &outside())?;
        Ok(secondaries.into_iter().map(crate::SecondaryRef::into_wit).collect())
    }

    /// The primary's JSON text as `R::Primary`, or the error naming it.
    fn decode<R: Reconciler>(primary: &str) -> Result<R::Primary, String> {
        serde_json::from_str(primary)
            .map_err(|e| format!("the primary does not deserialize as {}: {e}", std::any::type_name::<R::Primary>()))
    }

    /// `fetch` for `R`.
    pub fn fetch<R: Reconciler>(primary: String, tracked: Vec<WitTrackedId>) -> Result<Vec<WitExternalObject>, String> {
        let primary = decode::<R>(&primary)?;
        let objects = R::fetch(&primary, &crate::Tracked::from_wit(tracked), &outside())?;
        Ok(objects.into_iter().map(crate::External::into_wit).collect())
    }

    /// `fetch-all` for `R`.
    pub fn fetch_all<R: Reconciler>() -> Result<Vec<WitPrimaryState>, String> {
        let states = R::fetch_all(&outside())?;
        Ok(states
            .into_iter()
            .map(|(primary, objects)| WitPrimaryState {
                primary: primary.into_wit(),
                objects: objects.into_iter().map(crate::External::into_wit).collect(),
            })
            .collect())
    }

    /// `apply-external` for `R`.
    pub fn apply_external<R: Reconciler>(
        primary: String,
        desired: WitExternalObject,
        actual: Option<WitExternalObject>,
    ) -> Result<WitExternalObject, ReconcileError> {
        let primary = decode::<R>(&primary).map_err(ReconcileError::Invalid)?;
        let desired = crate::External::from_wit(desired);
        let actual = actual.map(crate::External::from_wit);
        R::apply_external(&primary, &desired, actual.as_ref(), &outside())
            .map(crate::External::into_wit)
            .map_err(crate::Error::into_host)
    }

    /// `delete-external` for `R`.
    pub fn delete_external<R: Reconciler>(primary: String, actual: WitExternalObject) -> Result<(), ReconcileError> {
        let primary = decode::<R>(&primary).map_err(ReconcileError::Invalid)?;
        R::delete_external(&primary, &crate::External::from_wit(actual), &outside()).map_err(crate::Error::into_host)
    }

    /// `map-inbound` for `R`: a payload that is not JSON is an error.
    pub fn map_inbound<R: Reconciler>(payload: String) -> Result<Vec<WitObjectRef>, String> {
        let payload: serde_json::Value =
            serde_json::from_str(&payload).map_err(|e| format!("the payload is not JSON: {e}"))?;
        let primaries = R::map_inbound(&payload, &outside())?;
        Ok(primaries.into_iter().map(crate::PrimaryRef::into_wit).collect())
    }

    /// `filter` for `R`: an object that is not JSON does not pass.
    pub fn filter<R: Reconciler>(name: String, event: WitEventKind, object: String, old: Option<String>) -> bool {
        let Ok(object) = serde_json::from_str::<serde_json::Value>(&object) else { return false };
        let old = old.and_then(|old| serde_json::from_str::<serde_json::Value>(&old).ok());
        R::filter(&name, crate::EventKind::from_wit(event), &object, old.as_ref())
    }
}

#[cfg(test)]
mod tests {
    use serde_json::{Value, json};

    use super::__private::{ReconcileError, ReconcileRequest, update_error_status};
    use super::*;

    /// An error status that names the error and the attempt, without calling the host (the
    /// native stubs of the host imports panic).
    struct Reporter;

    impl Reconciler for Reporter {
        type Primary = k8s_openapi::api::core::v1::ConfigMap;

        fn config() -> Config {
            Config::new("reporter", Kind::namespaced("", "v1", "ConfigMap"))
        }

        fn reconcile(_: Self::Primary, _: &Context) -> Result<Outcome, Error> {
            Err(Error::transient("never works"))
        }

        fn error_status(primary: Self::Primary, error: &Error, ctx: &Context) -> Option<impl serde::Serialize> {
            Some(json!({
                "name": primary.metadata.name,
                "error": error.to_string(),
                "attempt": ctx.attempt(),
                "last": ctx.is_last_attempt(),
            }))
        }
    }

    fn request(object: &str) -> ReconcileRequest {
        ReconcileRequest {
            object: object.to_owned(),
            attempt: 3,
            last_attempt: true,
            dependents: Vec::new(),
            external: Vec::new(),
            inbound: None,
        }
    }

    #[test]
    fn update_error_status_export_decodes_the_request_and_encodes_the_status() {
        let object = json!({ "metadata": { "name": "cm" } }).to_string();
        for (error, text) in [
            (ReconcileError::Transient("t".into()), "transient: t"),
            (ReconcileError::Permanent("p".into()), "permanent: p"),
            (ReconcileError::Invalid("i".into()), "invalid: i"),
        ] {
            let status = update_error_status::<Reporter>(request(&object), error).expect("a status");
            let status: Value = serde_json::from_str(&status).expect("JSON");
            assert_eq!(status, json!({ "name": "cm", "error": text, "attempt": 3, "last": true }));
        }
    }

    #[test]
    fn update_error_status_export_gives_none_for_a_primary_that_does_not_decode() {
        let error = ReconcileError::Invalid("the primary does not deserialize".into());
        assert_eq!(update_error_status::<Reporter>(request(r#"{"data": 42}"#), error), None);
    }

    /// Maps a ConfigMap to the primaries in its `data.primaries` and names the ConfigMaps in a
    /// primary's `data.uses`.
    struct Mapping;

    impl Reconciler for Mapping {
        type Primary = k8s_openapi::api::core::v1::ConfigMap;

        fn config() -> Config {
            Config::new("mapping", Kind::namespaced("", "v1", "ConfigMap"))
        }

        fn reconcile(_: Self::Primary, _: &Context) -> Result<Outcome, Error> {
            Ok(Outcome::done())
        }

        fn map_secondary(secondary: &Value, previous: Option<&Value>, _: &Context) -> Result<Vec<PrimaryRef>, String> {
            let names = secondary["data"]["primaries"].as_str().ok_or("no data.primaries")?;
            let mut primaries: Vec<PrimaryRef> =
                names.split(',').map(|name| PrimaryRef::namespaced("ns", name)).collect();
            primaries.extend(previous.map(|_| PrimaryRef::cluster_scoped("previous")));
            Ok(primaries)
        }

        fn secondaries_of(primary: &Self::Primary, _: &Context) -> Vec<SecondaryRef> {
            let data = primary.data.clone().unwrap_or_default();
            let kind = Kind::of::<k8s_openapi::api::core::v1::ConfigMap>();
            data.get("uses")
                .map(|name| SecondaryRef::new(kind, primary.metadata.namespace.as_deref(), name))
                .into_iter()
                .collect()
        }
    }

    #[test]
    fn map_secondary_and_secondaries_of_default_to_an_error_and_nothing() {
        let secondary = json!({ "metadata": { "name": "cm" } });
        let host = crate::testing::FakeHost::new();
        let error = host.map_secondary::<Reporter>(&secondary, Some(&secondary)).unwrap_err();
        assert_eq!(
            error,
            "plugin reporter declares a watch with the plugin mapper but does not implement Reconciler::map_secondary"
        );
        assert!(host.secondaries_of::<Reporter>(&k8s_openapi::api::core::v1::ConfigMap::default()).unwrap().is_empty());
        let object = secondary.to_string();
        assert_eq!(super::__private::map_secondary::<Reporter>(object.clone(), None).map(|p| p.len()), Err(error));
        assert_eq!(super::__private::secondaries_of::<Reporter>(object).map(|refs| refs.len()), Ok(0));
    }

    #[test]
    fn map_secondary_export_decodes_the_objects_and_encodes_the_primaries() {
        use super::__private::map_secondary;
        let secondary = json!({ "data": { "primaries": "a,b" } }).to_string();
        let primaries = map_secondary::<Mapping>(secondary.clone(), None).expect("primaries");
        let primaries: Vec<_> = primaries.into_iter().map(|p| (p.namespace, p.name)).collect();
        assert_eq!(primaries, [(Some("ns".to_owned()), "a".to_owned()), (Some("ns".to_owned()), "b".to_owned())]);
        let primaries = map_secondary::<Mapping>(secondary.clone(), Some("{}".into())).expect("primaries");
        assert_eq!((primaries[2].namespace.as_deref(), primaries[2].name.as_str()), (None, "previous"));
        assert_eq!(map_secondary::<Mapping>("{}".into(), None).map(|p| p.len()), Err("no data.primaries".into()));
        let error = map_secondary::<Mapping>("not json".into(), None).map(|p| p.len()).unwrap_err();
        assert!(error.starts_with("the secondary is not JSON: "), "{error}");
        let error = map_secondary::<Mapping>(secondary, Some("[".into())).map(|p| p.len()).unwrap_err();
        assert!(error.starts_with("the previous version of the secondary is not JSON: "), "{error}");
    }

    #[test]
    fn secondaries_of_export_decodes_the_primary_and_encodes_the_secondaries() {
        use super::__private::secondaries_of;
        let primary = json!({ "metadata": { "name": "p", "namespace": "ns" }, "data": { "uses": "settings" } });
        let secondaries = secondaries_of::<Mapping>(primary.to_string()).expect("secondaries");
        let [secondary] = &secondaries[..] else { panic!("one secondary") };
        assert_eq!((secondary.namespace.as_deref(), secondary.name.as_str()), (Some("ns"), "settings"));
        let kind = &secondary.kind;
        assert_eq!(
            (kind.group.as_str(), kind.version.as_str(), kind.kind.as_str(), kind.plural.as_deref(), kind.namespaced),
            ("", "v1", "ConfigMap", Some("configmaps"), true)
        );
        let error = secondaries_of::<Mapping>(r#"{"data": 42}"#.into()).map(|s| s.len()).unwrap_err();
        assert!(error.starts_with("the primary does not deserialize as k8s_openapi::"), "{error}");
        assert!(error.contains("ConfigMap"), "{error}");
    }

    #[test]
    fn errors_cross_the_boundary_unchanged() {
        for error in [Error::transient("a"), Error::permanent("b"), Error::invalid("c")] {
            assert_eq!(Error::from_wit(error.clone().into_wit()), error);
        }
    }
    impl Cleaner for Reporter {
        fn cleanup(_: Self::Primary, _: &Context) -> Result<Cleanup, Error> {
            Ok(Cleanup::done().keep_finalizer())
        }
    }

    /// No cleanup.
    struct Plain;

    impl Reconciler for Plain {
        type Primary = Value;

        fn config() -> Config {
            Config::new("plain", Kind::namespaced("example.com", "v1", "Plain"))
        }

        fn reconcile(_: Self::Primary, _: &Context) -> Result<Outcome, Error> {
            Ok(Outcome::done())
        }
    }

    #[test]
    #[allow(clippy::needless_borrow, reason = "the probe is read as export! reads it")]
    fn export_finds_out_whether_a_reconciler_cleans_up() {
        use crate::__private::{Probe, ProbeCleaner as _, ProbeNoCleaner as _};
        assert!((&&Probe::<Reporter>::new()).cleans());
        assert!(!(&&Probe::<Plain>::new()).cleans());
        let request = || ReconcileRequest {
            object: json!({ "metadata": { "name": "a" } }).to_string(),
            attempt: 0,
            last_attempt: false,
            dependents: Vec::new(),
            external: Vec::new(),
            inbound: None,
        };
        // The Cleaner's own answer, and a release for a reconciler without one.
        assert!((&&Probe::<Reporter>::new()).cleanup(request()).expect("cleanup").keep_finalizer);
        assert!(!(&&Probe::<Plain>::new()).cleanup(request()).expect("cleanup").keep_finalizer);
    }
}
