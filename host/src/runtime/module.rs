//! A loaded plugin: its configuration and a pre-linked instance factory.

use std::path::{Path, PathBuf};
use std::sync::{Arc, RwLock};
use std::time::{Duration, Instant};

use wasmop_core::finalizer::Finalizers;
use wasmop_core::record::{Call as RecordedCall, Ending, Request};
use wasmop_core::webhook::Refused;
use wasmtime::component::{Instance, InstancePre};
use wasmtime::{Engine, Store, Trap, UpdateDeadline};

use super::backend::Backend;
use super::bindings::wasmop::plugin::types::{
    AdmissionRequest, CleanupOutcome, DesiredObject, EventKind, ExternalObject, Finalizer, Mapper, ObjectRef, Outcome,
    PluginConfig, PrimaryState, ReconcileError, ReconcileRequest, SecondaryRef, TrackedId, Verdict, Webhook,
};
use super::dev::DevSource;
use super::error::{CallError, LoadError};
use super::exports::{Admission, Exports};
use super::http::{Hooks, Outbound, Policy, Services};
use super::limits::Limits;
use super::observer::CallObserver;
use super::recorded;
use super::sandbox::{CacheReader, NoCache, Sandbox};
use super::tap::Tap;
use super::ticker::EPOCH_TICK;
use super::ticker::{Running, Ticker};

/// What `reconcile` returned: an outcome or the plugin's own error.
pub type GuestResult = Result<Outcome, ReconcileError>;

/// A compiled, linked and described plugin, ready to be called any number of times.
pub struct Module {
    path: PathBuf,
    digest: String,
    config: PluginConfig,
    instances: Instances,
}

/// Gives each call a sandboxed instance within the plugin's limits: a kept one when there is
/// one, else a fresh one.
pub(crate) struct Instances {
    pre: InstancePre<Sandbox>,
    /// The functions a call runs, found and type-checked at load.
    exports: Exports,
    /// The admission functions, when the plugin exports them.
    admission: Option<Admission>,
    engine: Engine,
    /// Advances `engine`'s epoch while a call runs.
    ticker: Arc<Ticker>,
    /// Whether `engine` meters fuel.
    metered: bool,
    limits: Limits,
    observer: Arc<dyn CallObserver>,
    /// Shared by every plugin's outgoing HTTP.
    http: Arc<Services>,
    /// The plugin's granted outgoing HTTP, once `describe()` declared it.
    outbound: Option<Arc<Outbound>>,
    /// The instances kept between calls, at most [`WARM_INSTANCES`].
    warm: std::sync::Mutex<Vec<Warm>>,
    /// The directory each instance is given, read-only, when the host runs a dev source.
    source: Option<Arc<DevSource>>,
}

/// The instances a plugin keeps between calls: the calls beyond them in flight at once get
/// fresh ones, dropped after the call. Making an instance is most of a small call's cost (a
/// Rust Greeting's), and all of a language runtime's warm-up (CPython, SpiderMonkey).
pub(crate) const WARM_INSTANCES: usize = 2;

/// An instance whose memories grew by more than this since it was made is dropped after its
/// call rather than kept, so that one call over a large input does not hold its memory for
/// good.
pub(crate) const WARM_GROWTH_BYTES: usize = 8 << 20;

/// An instance kept for a later call, in its store.
struct Warm {
    store: Store<Sandbox>,
    instance: Instance,
}

/// One call in progress: its store and the plugin instantiated in it.
struct Call<'a> {
    store: Store<Sandbox>,
    instance: Instance,
    report: Report<'a>,
    clock: Clock,
    /// Keeps the epoch advancing until the call ends.
    _running: Running,
}

/// How long one call may take: the running time its deadline counts
/// ([`limit_running_time`]) and its wall-clock backstop, waiting included ([`within`]).
#[derive(Debug, Clone, Copy)]
struct Clock {
    deadline: Duration,
    wall_clock: Duration,
}

impl Clock {
    /// The clock of a call within `limits`.
    fn of(limits: Limits) -> Self {
        Self { deadline: limits.deadline, wall_clock: limits.wall_clock() }
    }
}

/// What the observer and the log are told when a call ends.
struct Report<'a> {
    /// The plugin's name; empty while it describes itself.
    name: &'a str,
    export: &'static str,
    started: Instant,
    /// The fuel the call started with, when metered.
    budget: Option<u64>,
}

/// A plugin's current version: each reconcile takes the version current when it starts and
/// finishes on it, while a hot reload replaces it for the next ones.
pub struct Current(RwLock<Arc<Module>>);

impl Current {
    /// Holds `module` as the current version.
    pub fn new(module: Arc<Module>) -> Arc<Self> {
        Arc::new(Self(RwLock::new(module)))
    }

    /// The current version.
    pub fn get(&self) -> Arc<Module> {
        self.0.read().expect("never poisoned").clone()
    }

    /// Makes `module` the current version; returns the one it replaces.
    pub fn replace(&self, module: Arc<Module>) -> Arc<Module> {
        std::mem::replace(&mut *self.0.write().expect("never poisoned"), module)
    }
}

impl std::fmt::Debug for Module {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Module")
            .field("path", &self.path)
            .field("digest", &self.digest)
            .field("config", &self.config)
            .finish()
    }
}

impl Module {
    /// Calls `describe()` on a fresh instance and validates the answer. Blocks the thread until
    /// it returns (it reads nothing, so no runtime is needed): call it where loading may block.
    pub(crate) fn describe(path: &Path, digest: String, mut instances: Instances) -> Result<Self, LoadError> {
        let described = async {
            let mut call = instances.enter("", "describe", Arc::new(NoCache), None).await?;
            // No runtime here to time a backstop: describe() reads nothing, so it cannot wait.
            let config = instances.exports.describe(&mut call.store, call.instance).await;
            instances.leave(call, Ok(config))
        };
        let mut config = futures::executor::block_on(described)
            .map_err(|source| LoadError::DescribeFailed { path: path.into(), source })?;
        validate(&config).map_err(|reason| LoadError::InvalidConfig { path: path.into(), reason })?;
        config.webhooks = webhooks(&config, instances.admission.is_some()).map_err(|refused| match refused {
            Refused::NotExported { plugin } => LoadError::AdmissionNotExported { path: path.into(), plugin },
            Refused::Invalid(reason) => LoadError::InvalidConfig { path: path.into(), reason },
        })?;
        if let Some(grant) = &config.http {
            let policy = Policy::new(grant).map_err(|reason| LoadError::InvalidConfig { path: path.into(), reason })?;
            instances.outbound = Some(Arc::new(Outbound::new(&config.name, policy, instances.http.clone())));
        }
        Ok(Self { path: path.into(), digest, config, instances })
    }

    /// The same plugin with other limits (on the same engine: metering cannot change here).
    pub(crate) fn with_limits(mut self, limits: Limits) -> Self {
        self.instances.limits = limits;
        self
    }

    /// The same plugin with its outgoing HTTP refused, whatever it declared: a shadow candidate
    /// sends nothing out.
    pub(crate) fn without_http(mut self) -> Self {
        self.instances.outbound = None;
        self
    }

    /// The limits of every call.
    pub fn limits(&self) -> Limits {
        self.instances.limits
    }

    /// The plugin's own configuration, as `describe()` returned it.
    pub fn config(&self) -> &PluginConfig {
        &self.config
    }

    /// The plugin's name.
    pub fn name(&self) -> &str {
        &self.config.name
    }

    /// The sha256 of the module's bytes, hex encoded.
    pub fn digest(&self) -> &str {
        &self.digest
    }

    /// How many instances are kept for later calls now: at most two.
    pub fn kept_instances(&self) -> usize {
        self.instances.warm.lock().expect("never poisoned").len()
    }

    /// Where the module was loaded from.
    pub fn path(&self) -> &Path {
        &self.path
    }

    /// Runs `reconcile` in a fresh sandbox that reads from `cache`. The call yields to the
    /// runtime at every epoch tick and fails once it has run for its deadline (see
    /// [`Limits::deadline`]) or taken its wall-clock backstop.
    pub async fn reconcile(
        &self,
        cache: Arc<dyn CacheReader>,
        request: &ReconcileRequest,
    ) -> Result<GuestResult, CallError> {
        let call = |cache, tap| self.reconcile_tapped(cache, request, tap);
        recording(cache, call, |result| {
            (recorded::step_request("reconcile", request), recorded::ending(result, recorded::reconciled))
        })
        .await
    }

    async fn reconcile_tapped(
        &self,
        cache: Arc<dyn CacheReader>,
        request: &ReconcileRequest,
        tap: Option<Arc<Tap>>,
    ) -> Result<GuestResult, CallError> {
        let mut call = self.instances.enter(&self.config.name, "reconcile", cache, tap).await?;
        let export = self.instances.exports.reconcile(&mut call.store, call.instance, request);
        let result = within(call.clock.wall_clock, export).await;
        self.instances.leave(call, result)
    }

    /// Runs `reconcile` as a shadow candidate: every read the live version made in its call
    /// (`calls`, in the recorded form) is answered as the live version read it, the rest by
    /// `cache` ([`Tap::following`]).
    pub async fn reconcile_following(
        &self,
        cache: Arc<dyn CacheReader>,
        request: &ReconcileRequest,
        calls: Vec<RecordedCall>,
    ) -> Result<GuestResult, CallError> {
        self.reconcile_tapped(cache, request, Some(Tap::following(calls))).await
    }

    /// Runs `desired` as a shadow candidate, reading as the live version read
    /// ([`Module::reconcile_following`]).
    pub async fn desired_following(
        &self,
        cache: Arc<dyn CacheReader>,
        request: &ReconcileRequest,
        calls: Vec<RecordedCall>,
    ) -> Result<Result<Vec<DesiredObject>, ReconcileError>, CallError> {
        self.desired_tapped(cache, request, Some(Tap::following(calls))).await
    }

    /// Runs the export of a recorded step with its request, every import answered by `tap`
    /// (which replays the step's calls, outgoing HTTP included), and returns how it ended.
    pub async fn replay(&self, request: &Request, tap: Arc<Tap>) -> Ending {
        let (cache, tap): (Arc<dyn CacheReader>, _) = (Arc::new(NoCache), Some(tap));
        match request {
            Request::Reconcile(r) => {
                let result = self.reconcile_tapped(cache, &recorded::request_back(r), tap).await;
                recorded::ending(&result, recorded::reconciled)
            }
            Request::Desired(r) => {
                let result = self.desired_tapped(cache, &recorded::request_back(r), tap).await;
                recorded::ending(&result, |objects| recorded::desired(objects))
            }
            Request::Cleanup(r) => {
                let result = self.cleanup_tapped(cache, &recorded::request_back(r), tap).await;
                recorded::ending(&result, recorded::cleaned_up)
            }
            Request::UpdateErrorStatus { request, error } => {
                let (request, error) = (recorded::request_back(request), recorded::failure_back(error));
                recorded::error_status(&self.update_error_status_tapped(cache, &request, &error, tap).await)
            }
            Request::ApplyExternal { primary, desired, actual } => {
                let (desired, actual) =
                    (recorded::external_back(desired), actual.as_ref().map(recorded::external_back));
                let result = self.apply_external_tapped(cache, primary, &desired, actual.as_ref(), tap).await;
                recorded::ending(&result, recorded::applied)
            }
            Request::DeleteExternal { primary, actual } => {
                let result = self.delete_external_tapped(cache, primary, &recorded::external_back(actual), tap).await;
                recorded::ending(&result, |()| Ending::Deleted)
            }
        }
    }
}

impl Module {
    /// Runs `update-error-status` after a failure no retry will follow; returns the status to
    /// merge, if the plugin gives one.
    pub async fn update_error_status(
        &self,
        cache: Arc<dyn CacheReader>,
        request: &ReconcileRequest,
        error: &ReconcileError,
    ) -> Result<Option<String>, CallError> {
        let call = |cache, tap| self.update_error_status_tapped(cache, request, error, tap);
        recording(cache, call, |result| {
            let step =
                Request::UpdateErrorStatus { request: recorded::request(request), error: recorded::failure(error) };
            (step, recorded::error_status(result))
        })
        .await
    }

    async fn update_error_status_tapped(
        &self,
        cache: Arc<dyn CacheReader>,
        request: &ReconcileRequest,
        error: &ReconcileError,
        tap: Option<Arc<Tap>>,
    ) -> Result<Option<String>, CallError> {
        let mut call = self.instances.enter(&self.config.name, "update-error-status", cache, tap).await?;
        let export = self.instances.exports.update_error_status(&mut call.store, call.instance, request, error);
        let result = within(call.clock.wall_clock, export).await;
        self.instances.leave(call, result)
    }

    /// Runs `desired`: the desired objects of the plugin's dependents.
    pub async fn desired(
        &self,
        cache: Arc<dyn CacheReader>,
        request: &ReconcileRequest,
    ) -> Result<Result<Vec<DesiredObject>, ReconcileError>, CallError> {
        let call = |cache, tap| self.desired_tapped(cache, request, tap);
        recording(cache, call, |result| {
            let ending = recorded::ending(result, |objects| recorded::desired(objects));
            (recorded::step_request("desired", request), ending)
        })
        .await
    }

    async fn desired_tapped(
        &self,
        cache: Arc<dyn CacheReader>,
        request: &ReconcileRequest,
        tap: Option<Arc<Tap>>,
    ) -> Result<Result<Vec<DesiredObject>, ReconcileError>, CallError> {
        let mut call = self.instances.enter(&self.config.name, "desired", cache, tap).await?;
        let export = self.instances.exports.desired(&mut call.store, call.instance, request);
        let result = within(call.clock.wall_clock, export).await;
        self.instances.leave(call, result)
    }

    /// Runs `cleanup` for a primary marked for deletion.
    pub async fn cleanup(
        &self,
        cache: Arc<dyn CacheReader>,
        request: &ReconcileRequest,
    ) -> Result<Result<CleanupOutcome, ReconcileError>, CallError> {
        let call = |cache, tap| self.cleanup_tapped(cache, request, tap);
        recording(cache, call, |result| {
            (recorded::step_request("cleanup", request), recorded::ending(result, recorded::cleaned_up))
        })
        .await
    }

    async fn cleanup_tapped(
        &self,
        cache: Arc<dyn CacheReader>,
        request: &ReconcileRequest,
        tap: Option<Arc<Tap>>,
    ) -> Result<Result<CleanupOutcome, ReconcileError>, CallError> {
        let mut call = self.instances.enter(&self.config.name, "cleanup", cache, tap).await?;
        let export = self.instances.exports.cleanup(&mut call.store, call.instance, request);
        let result = within(call.clock.wall_clock, export).await;
        self.instances.leave(call, result)
    }

    /// Runs `check`: whether the plugin condition `name` holds.
    pub async fn check(
        &self,
        cache: Arc<dyn CacheReader>,
        name: &str,
        primary: &str,
        dependent: Option<&str>,
    ) -> Result<bool, CallError> {
        let mut call = self.instances.enter(&self.config.name, "check", cache, None).await?;
        let export = self.instances.exports.check(&mut call.store, call.instance, name, primary, dependent);
        let result = within(call.clock.wall_clock, export).await;
        self.instances.leave(call, result)
    }

    /// The finalizer the host manages for this plugin: kept when it cleans up or has
    /// dependents the garbage collector cannot delete, released otherwise.
    pub fn finalizers(&self) -> Finalizers {
        super::bindings::finalizers(&self.config)
    }

    /// Runs `map-secondary`: the primaries a change of `secondary` (JSON) concerns; `Ok(Err)`
    /// is the plugin's own error.
    pub async fn map_secondary(
        &self,
        cache: Arc<dyn CacheReader>,
        secondary: &str,
        previous: Option<&str>,
    ) -> Result<Result<Vec<ObjectRef>, String>, CallError> {
        let mut call = self.instances.enter(&self.config.name, "map-secondary", cache, None).await?;
        let export = self.instances.exports.map_secondary(&mut call.store, call.instance, secondary, previous);
        let result = within(call.clock.wall_clock, export).await;
        self.instances.leave(call, result)
    }

    /// Runs `crd`: the CustomResourceDefinition of the plugin's primary kind as JSON text, if
    /// the plugin generates one (`wasmop crd --plugin`). It reads nothing.
    pub async fn crd(&self) -> Result<Option<String>, CallError> {
        let mut call = self.instances.enter(&self.config.name, "crd", Arc::new(NoCache), None).await?;
        let export = self.instances.exports.crd(&mut call.store, call.instance);
        let result = within(call.clock.wall_clock, export).await;
        self.instances.leave(call, result)
    }

    /// Runs `secondaries-of`: the secondaries `primary` (JSON) names; `Ok(Err)` is the plugin's
    /// own error.
    pub async fn secondaries_of(
        &self,
        cache: Arc<dyn CacheReader>,
        primary: &str,
    ) -> Result<Result<Vec<SecondaryRef>, String>, CallError> {
        let mut call = self.instances.enter(&self.config.name, "secondaries-of", cache, None).await?;
        let export = self.instances.exports.secondaries_of(&mut call.store, call.instance, primary);
        let result = within(call.clock.wall_clock, export).await;
        self.instances.leave(call, result)
    }
}

/// The exports beyond the API server (contract 0.6.0): polling, external dependents, inbound
/// events and predicates.
impl Module {
    /// Runs `fetch`: the external state of `primary` (JSON), given the IDs the host tracks.
    pub async fn fetch(
        &self,
        cache: Arc<dyn CacheReader>,
        primary: &str,
        tracked: &[TrackedId],
    ) -> Result<Result<Vec<ExternalObject>, String>, CallError> {
        let mut call = self.instances.enter(&self.config.name, "fetch", cache, None).await?;
        let export = self.instances.exports.fetch(&mut call.store, call.instance, primary, tracked);
        let result = within(call.clock.wall_clock, export).await;
        self.instances.leave(call, result)
    }

    /// Runs `fetch-all`: the external state of every primary.
    pub async fn fetch_all(&self, cache: Arc<dyn CacheReader>) -> Result<Result<Vec<PrimaryState>, String>, CallError> {
        let mut call = self.instances.enter(&self.config.name, "fetch-all", cache, None).await?;
        let export = self.instances.exports.fetch_all(&mut call.store, call.instance);
        let result = within(call.clock.wall_clock, export).await;
        self.instances.leave(call, result)
    }

    /// Runs `apply-external`: makes the external system hold `desired`.
    pub async fn apply_external(
        &self,
        cache: Arc<dyn CacheReader>,
        primary: &str,
        desired: &ExternalObject,
        actual: Option<&ExternalObject>,
    ) -> Result<Result<ExternalObject, ReconcileError>, CallError> {
        let call = |cache, tap| self.apply_external_tapped(cache, primary, desired, actual, tap);
        recording(cache, call, |result| {
            (recorded::apply_request(primary, desired, actual), recorded::ending(result, recorded::applied))
        })
        .await
    }

    async fn apply_external_tapped(
        &self,
        cache: Arc<dyn CacheReader>,
        primary: &str,
        desired: &ExternalObject,
        actual: Option<&ExternalObject>,
        tap: Option<Arc<Tap>>,
    ) -> Result<Result<ExternalObject, ReconcileError>, CallError> {
        let mut call = self.instances.enter(&self.config.name, "apply-external", cache, tap).await?;
        let export = self.instances.exports.apply_external(&mut call.store, call.instance, primary, desired, actual);
        let result = within(call.clock.wall_clock, export).await;
        self.instances.leave(call, result)
    }

    /// Runs `delete-external`: deletes `actual` from the external system.
    pub async fn delete_external(
        &self,
        cache: Arc<dyn CacheReader>,
        primary: &str,
        actual: &ExternalObject,
    ) -> Result<Result<(), ReconcileError>, CallError> {
        let call = |cache, tap| self.delete_external_tapped(cache, primary, actual, tap);
        recording(cache, call, |result| {
            (recorded::delete_request(primary, actual), recorded::ending(result, |()| Ending::Deleted))
        })
        .await
    }

    async fn delete_external_tapped(
        &self,
        cache: Arc<dyn CacheReader>,
        primary: &str,
        actual: &ExternalObject,
        tap: Option<Arc<Tap>>,
    ) -> Result<Result<(), ReconcileError>, CallError> {
        let mut call = self.instances.enter(&self.config.name, "delete-external", cache, tap).await?;
        let export = self.instances.exports.delete_external(&mut call.store, call.instance, primary, actual);
        let result = within(call.clock.wall_clock, export).await;
        self.instances.leave(call, result)
    }

    /// Runs `map-inbound`: the primaries an inbound payload (JSON) concerns.
    pub async fn map_inbound(
        &self,
        cache: Arc<dyn CacheReader>,
        payload: &str,
    ) -> Result<Result<Vec<ObjectRef>, String>, CallError> {
        let mut call = self.instances.enter(&self.config.name, "map-inbound", cache, None).await?;
        let export = self.instances.exports.map_inbound(&mut call.store, call.instance, payload);
        let result = within(call.clock.wall_clock, export).await;
        self.instances.leave(call, result)
    }

    /// Runs `filter`: whether the plugin predicate `name` holds for a watch event.
    pub async fn filter(
        &self,
        name: &str,
        event: EventKind,
        object: &str,
        old: Option<&str>,
    ) -> Result<bool, CallError> {
        let mut call = self.instances.enter(&self.config.name, "filter", Arc::new(NoCache), None).await?;
        let export = self.instances.exports.filter(&mut call.store, call.instance, name, event, object, old);
        let result = within(call.clock.wall_clock, export).await;
        self.instances.leave(call, result)
    }
}

/// The admission and conversion webhooks (contract 0.8.0). Each call runs in a sandbox like a
/// reconcile's, within the plugin's memory cap, and counted and logged as every call is; outgoing
/// HTTP is refused in them as everywhere outside the exports made for it
/// ([`super::http::HTTP_EXPORTS`]), whatever the plugin's grant. The API server waits for an
/// answer only so long: a call may run for `deadline` (or the plugin's own deadline, if
/// shorter) and takes at most `deadline` by the wall clock, waiting included; past either it
/// fails with [`CallError::DeadlineExceeded`] or [`CallError::WallClockExceeded`], whichever
/// came first (a call that spins meets both at about the same time).
impl Module {
    /// The webhooks the plugin declared in describe().
    ///
    /// Checked at load, with their defaults filled in: a timeout (10 s when the plugin gives
    /// none) and, for admission webhooks, their operations (create and update when it gives
    /// none). Empty `kinds` means the primary. A module with webhooks exports the admission
    /// interface.
    pub fn webhooks(&self) -> &[Webhook] {
        &self.config.webhooks
    }

    /// `validate` in a fresh sandbox reading `cache`, under `deadline` (capped by the module's own).
    pub async fn validate(
        &self,
        cache: Arc<dyn CacheReader>,
        request: &AdmissionRequest,
        deadline: Duration,
    ) -> Result<Verdict, CallError> {
        let admission = self.admission("validate")?;
        let mut call =
            self.instances.enter_on(&self.config.name, "validate", cache, None, self.clock(deadline)).await?;
        let export = admission.validate(&mut call.store, call.instance, request);
        let result = within(call.clock.wall_clock, export).await;
        self.instances.leave(call, result)
    }

    /// `default`: the object as it should be stored (JSON), or the plugin's refusal.
    pub async fn default_object(
        &self,
        cache: Arc<dyn CacheReader>,
        request: &AdmissionRequest,
        deadline: Duration,
    ) -> Result<Result<String, String>, CallError> {
        let admission = self.admission("default")?;
        let mut call = self.instances.enter_on(&self.config.name, "default", cache, None, self.clock(deadline)).await?;
        let export = admission.default(&mut call.store, call.instance, request);
        let result = within(call.clock.wall_clock, export).await;
        self.instances.leave(call, result)
    }

    /// `convert`: the objects in `desired_api_version`, or the plugin's refusal.
    pub async fn convert(
        &self,
        cache: Arc<dyn CacheReader>,
        objects: &[String],
        desired_api_version: &str,
        deadline: Duration,
    ) -> Result<Result<Vec<String>, String>, CallError> {
        let admission = self.admission("convert")?;
        let mut call = self.instances.enter_on(&self.config.name, "convert", cache, None, self.clock(deadline)).await?;
        let export = admission.convert(&mut call.store, call.instance, objects, desired_api_version);
        let result = within(call.clock.wall_clock, export).await;
        self.instances.leave(call, result)
    }

    /// The admission functions, or the error of a call of `export` on a plugin without them
    /// (one that declares no webhooks: the host never calls it so).
    fn admission(&self, export: &str) -> Result<&Admission, CallError> {
        self.instances.admission.as_ref().ok_or_else(|| {
            CallError::NotExported(format!(
                "plugin {} does not export {}@{} and has no function `{export}`",
                self.config.name,
                super::bindings::ADMISSION_INTERFACE,
                super::bindings::CONTRACT_VERSION
            ))
        })
    }

    /// The clock of an admission call given `deadline`: it runs for `deadline` or the plugin's
    /// own deadline, whichever is shorter, and takes `deadline` at most by the wall clock.
    fn clock(&self, deadline: Duration) -> Clock {
        Clock { deadline: deadline.min(self.limits().deadline), wall_clock: deadline }
    }
}

/// The webhooks `config` declares, checked by the core's rules and with their defaults filled in,
/// given whether the plugin exports the admission interface.
fn webhooks(config: &PluginConfig, exports_admission: bool) -> Result<Vec<Webhook>, Refused> {
    let declared: Vec<wasmop_core::webhook::Webhook> = config.webhooks.iter().map(Into::into).collect();
    let checked =
        wasmop_core::webhook::declared(&config.name, &(&config.primary).into(), &declared, exports_admission)?;
    Ok(checked.iter().map(Into::into).collect())
}

/// Runs `call` with a recording tap when `cache` is a recorded reconcile's view (none
/// otherwise), then adds the step `step` makes of its result to the reconcile's record.
async fn recording<R, F>(
    cache: Arc<dyn CacheReader>,
    call: impl FnOnce(Arc<dyn CacheReader>, Option<Arc<Tap>>) -> F,
    step: impl FnOnce(&R) -> (Request, Ending),
) -> R
where
    F: Future<Output = R>,
{
    let tap = cache.recorder().map(|_| Tap::recording());
    // A call that is not recorded clones nothing.
    let recorded = tap.clone().map(|tap| (tap, cache.clone()));
    let result = call(cache, tap).await;
    if let Some((tap, cache)) = recorded
        && let Some(recorder) = cache.recorder()
    {
        let (request, ending) = step(&result);
        recorder.step(request, &tap, ending);
    }
    result
}

impl Instances {
    /// Instances of `pre`.
    pub(super) fn new(
        pre: InstancePre<Sandbox>,
        exports: Exports,
        admission: Option<Admission>,
        backend: &Backend,
        limits: Limits,
        observer: Arc<dyn CallObserver>,
        http: Arc<Services>,
    ) -> Self {
        Self {
            pre,
            exports,
            admission,
            engine: backend.engine.clone(),
            ticker: backend.ticker.clone(),
            metered: backend.metered,
            limits,
            observer,
            http,
            outbound: None,
            warm: std::sync::Mutex::new(Vec::new()),
            source: None,
        }
    }

    /// The same instances, each given `source`'s directory, read-only, when there is one.
    pub(super) fn with_source(mut self, source: Option<Arc<DevSource>>) -> Self {
        self.source = source;
        self
    }

    /// Starts a call of `export` of the plugin `name` (empty while it describes itself): a kept
    /// instance in its store, or a fresh store within the plugin's limits with the plugin
    /// instantiated in it. A call that runs on yields to the runtime at every epoch tick (the
    /// first within the ticker's check, 50 ms) and traps once it has run for its deadline
    /// ([`limit_running_time`]), so a plugin that spins holds a runtime thread for at most a
    /// check, then a tick at a time.
    async fn enter<'a>(
        &self,
        name: &'a str,
        export: &'static str,
        cache: Arc<dyn CacheReader>,
        tap: Option<Arc<Tap>>,
    ) -> Result<Call<'a>, CallError> {
        self.enter_on(name, export, cache, tap, Clock::of(self.limits)).await
    }

    /// Like [`Instances::enter`], for a call that may take only `clock`'s time.
    async fn enter_on<'a>(
        &self,
        name: &'a str,
        export: &'static str,
        cache: Arc<dyn CacheReader>,
        tap: Option<Arc<Tap>>,
        clock: Clock,
    ) -> Result<Call<'a>, CallError> {
        let started = Instant::now();
        let running = self.ticker.running();
        let hooks = Hooks::new(export, self.outbound.clone(), tap.clone());
        let budget = self.metered.then(|| self.limits.fuel.unwrap_or(u64::MAX));
        let report = Report { name, export, started, budget };
        let ready = |store: &mut Store<Sandbox>| {
            limit_running_time(store, clock.deadline);
            if let Some(budget) = budget {
                store.set_fuel(budget).expect("the engine meters fuel");
            }
        };
        // A tapped call's clocks are its own: it never takes or leaves a kept instance.
        let kept = if tap.is_none() { self.warm.lock().expect("never poisoned").pop() } else { None };
        if let Some(Warm { mut store, instance }) = kept {
            store.data_mut().reuse(cache, hooks);
            ready(&mut store);
            return Ok(Call { store, instance, report, clock, _running: running });
        }
        let mut store =
            Store::new(&self.engine, Sandbox::new(self.limits.memory_bytes, cache, hooks, tap, self.source.clone()));
        store.limiter(|s| &mut s.limiter);
        ready(&mut store);
        match self.pre.instantiate_async(&mut store).await {
            Ok(instance) => Ok(Call { store, instance, report, clock, _running: running }),
            Err(e) => {
                let err = match self.classify(&store, e, clock) {
                    CallError::Trapped(msg) => CallError::InstantiateFailed(msg),
                    other => other,
                };
                self.report(&report, &store);
                Err(err)
            }
        }
    }

    /// Ends `call` with the export's `result`, `Err` when it took its wall-clock backstop. An
    /// instance whose call returned is kept for a later call while fewer than
    /// [`WARM_INSTANCES`] are kept; one that trapped, ran out of time, filled much of its
    /// output buffers or grew its memory by more than [`WARM_GROWTH_BYTES`] is dropped.
    fn leave<R>(&self, call: Call<'_>, result: Result<wasmtime::Result<R>, Elapsed>) -> Result<R, CallError> {
        let result = match result {
            Ok(result) => result.map_err(|e| self.classify(&call.store, e, call.clock)),
            Err(Elapsed) => Err(CallError::WallClockExceeded(call.clock.wall_clock)),
        };
        self.report(&call.report, &call.store);
        // The instance `describe()` ran in is not kept: the limits may change after it.
        if result.is_ok()
            && !call.report.name.is_empty()
            && !call.store.data().output_mostly_used()
            && call.store.data().limiter.grown() <= WARM_GROWTH_BYTES
            && !call.store.data().tapped()
        {
            let mut warm = self.warm.lock().expect("never poisoned");
            if warm.len() < WARM_INSTANCES {
                warm.push(Warm { store: call.store, instance: call.instance });
            }
        }
        result
    }

    /// Tells the observer how long a call took and how much fuel it used, and logs what the
    /// guest printed.
    fn report(&self, report: &Report<'_>, store: &Store<Sandbox>) {
        let used = report.budget.map(|budget| budget - store.get_fuel().unwrap_or(0));
        if !report.name.is_empty() {
            self.observer.called(report.name, report.export, report.started.elapsed(), used);
        }
        forward_output(if report.name.is_empty() { report.export } else { report.name }, store);
    }

    /// Turns a wasmtime error of a call on `clock` into the cause a user can act on.
    fn classify(&self, store: &Store<Sandbox>, err: wasmtime::Error, clock: Clock) -> CallError {
        if let Some(exceeded) = store.data().limiter.exceeded {
            return CallError::MemoryLimitExceeded(exceeded);
        }
        match err.downcast_ref::<Trap>() {
            Some(Trap::Interrupt) => return CallError::DeadlineExceeded(clock.deadline),
            Some(Trap::OutOfFuel) => return CallError::FuelExhausted(self.limits.fuel.unwrap_or(u64::MAX)),
            _ => {}
        }
        let [_, (_, stderr)] = store.data().output();
        if let Some(message) = panic_message(&String::from_utf8_lossy(&stderr)) {
            return CallError::Panicked(message);
        }
        CallError::Trapped(format!("{err:#}"))
    }
}

/// Lets a call in `store` run for `deadline` of its own time, counted in the epoch ticks
/// ([`EPOCH_TICK`]) that pass while its code runs: at each the call yields to the runtime, and
/// once it has run through more than `deadline` worth of them it traps
/// ([`Trap::Interrupt`]).
///
/// Ticks that pass while the call waits do not count: after a yield, its next deadline is one
/// tick from when it is resumed, so time spent waiting for the thread behind other calls is not
/// the call's; a host import that waits counts as at most the one tick it returns in. So 32
/// calls that each need 200 ms of CPU on one thread all finish, where a wall-clock deadline of
/// 5 s trapped every one still waiting for the thread at 5 s. Waiting is bounded by the
/// wall-clock backstop instead ([`within`]).
fn limit_running_time<T>(store: &mut Store<T>, deadline: Duration) {
    let allowed = deadline.as_nanos().div_ceil(EPOCH_TICK.as_nanos());
    let mut ran: u128 = 0;
    store.epoch_deadline_callback(move |_| {
        ran += 1;
        if ran <= allowed { Ok(UpdateDeadline::Yield(1)) } else { Err(Trap::Interrupt.into()) }
    });
    store.set_epoch_deadline(1);
}

/// The wall-clock backstop ([`Limits::wall_clock`]) ran out.
#[derive(Debug)]
struct Elapsed;

/// Awaits `call` (an export's call in progress) for at most `wall_clock` (a backstop),
/// waiting included; past it the call's future is dropped, which cancels the call.
async fn within<R>(wall_clock: Duration, call: impl Future<Output = R>) -> Result<R, Elapsed> {
    tokio::time::timeout(wall_clock, call).await.map_err(|_| Elapsed)
}

/// Extracts the message of a Rust panic from the guest's stderr.
fn panic_message(stderr: &str) -> Option<String> {
    let (_, after) = stderr.split_once("panicked at ")?;
    let (location, rest) = after.split_once(":\n").unwrap_or((after, ""));
    let message = rest.lines().next().unwrap_or("").trim();
    Some(if message.is_empty() {
        format!("at {}", location.trim())
    } else {
        format!("{message} (at {})", location.trim())
    })
}

/// Writes what the guest printed to the host log.
fn forward_output(plugin: &str, store: &Store<Sandbox>) {
    for (stream, bytes) in store.data().output() {
        for line in String::from_utf8_lossy(&bytes).lines().filter(|l| !l.trim().is_empty()) {
            tracing::info!(target: "wasmop::plugin", plugin, stream, "{line}");
        }
    }
}

/// Checks what `describe()` returned before the host relies on it.
/// The shortest polling period a plugin may declare.
const MIN_POLLING_PERIOD_MS: u64 = 100;

fn validate(config: &PluginConfig) -> Result<(), String> {
    let is_dns_label = |s: &str| {
        !s.is_empty() && s.len() <= 63 && s.bytes().all(|b| b.is_ascii_lowercase() || b.is_ascii_digit() || b == b'-')
    };
    if !is_dns_label(&config.name) {
        return Err(format!(
            "name {:?} must be a DNS label (lower case letters, digits and '-', at most 63)",
            config.name
        ));
    }
    if config.primary.version.is_empty() || config.primary.kind.is_empty() {
        return Err("primary kind needs a version and a kind".into());
    }
    if let Some(retry) = &config.retry
        && !(retry.multiplier.is_finite() && retry.multiplier >= 1.0)
    {
        return Err(format!("retry multiplier {} must be a finite number >= 1", retry.multiplier));
    }
    if let Finalizer::Named(name) = &config.finalizer
        && !(name.contains('/') && name.len() <= 253 && !name.contains(char::is_whitespace))
    {
        return Err(format!("finalizer {name:?} must be a qualified name such as example.com/cleanup"));
    }
    if let Some(grant) = &config.http {
        Policy::new(grant)?;
    }
    let specs = config.dependents.iter().map(Into::into).chain(config.external_dependents.iter().map(Into::into));
    wasmop_core::workflow::Workflow::new(specs.collect())?;
    match &config.polling {
        Some(polling) if polling.period_ms < MIN_POLLING_PERIOD_MS => {
            return Err(format!(
                "polling period {} ms is below the minimum {MIN_POLLING_PERIOD_MS} ms",
                polling.period_ms
            ));
        }
        None if !config.external_dependents.is_empty() => {
            return Err("external dependents need polling (per resource or global): the host learns their \
                        actual state only from fetch"
                .into());
        }
        _ => {}
    }
    if let Some(d) = config.dependents.iter().find(|d| d.kind.version.is_empty() || d.kind.kind.is_empty()) {
        return Err(format!("dependent {:?} needs a kind with a version and a kind", d.name));
    }
    let plugin = &config.name;
    super::bindings::predicate(config.predicate.as_deref())
        .map_err(|reason| format!("plugin {plugin:?}: the primary's predicate is malformed: {reason}"))?;
    for watch in &config.watches {
        let kind = &watch.kind;
        if kind.version.is_empty() || kind.kind.is_empty() {
            return Err("every watched kind needs a version and a kind".into());
        }
        super::bindings::predicate(watch.predicate.as_deref()).map_err(|reason| {
            format!("plugin {plugin:?}: the predicate of the watch of {} is malformed: {reason}", kind.kind)
        })?;
        if let Mapper::OwnerReferences(_) = watch.mapper {
            if let Some(cluster) = &watch.cluster {
                return Err(format!(
                    "the watch of {} on cluster {cluster:?} maps with owner references, which cannot cross \
                     clusters; use the annotations or plugin mapper",
                    kind.kind
                ));
            }
            if config.primary.namespaced && !kind.namespaced {
                return Err(format!(
                    "the watch of cluster-scoped {} maps with owner references to namespaced {}, which \
                     Kubernetes does not allow; use the annotations or plugin mapper",
                    kind.kind, config.primary.kind
                ));
            }
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::runtime::WALL_CLOCK_FACTOR;
    use crate::runtime::bindings::wasmop::plugin::types::{KindRef, Owners, Watch};

    /// A core module exporting `spin(n: i64)`, which counts `n` down to zero (a loop: an epoch
    /// check per turn), and `hang()`, which calls the import `host.hang`.
    const SPIN: &[u8] = &[
        0x00, 0x61, 0x73, 0x6d, 0x01, 0x00, 0x00, 0x00, // magic, version
        0x01, 0x08, 0x02, 0x60, 0x01, 0x7e, 0x00, 0x60, 0x00, 0x00, // types: (i64) -> (), () -> ()
        0x02, 0x0d, 0x01, 0x04, b'h', b'o', b's', b't', 0x04, b'h', b'a', b'n', b'g', 0x00,
        0x01, // import host.hang
        0x03, 0x03, 0x02, 0x00, 0x01, // functions: spin, hang
        0x07, 0x0f, 0x02, 0x04, b's', b'p', b'i', b'n', 0x00, 0x01, 0x04, b'h', b'a', b'n', b'g', 0x00,
        0x02, // exports
        0x0a, 0x17, 0x02, // code: 2 bodies
        0x10, 0x00, 0x03, 0x40, 0x20, 0x00, 0x42, 0x01, 0x7d, 0x22, 0x00, 0x50, 0x45, 0x0d, 0x00, 0x0b,
        0x0b, // spin
        0x04, 0x00, 0x10, 0x00, 0x0b, // hang: call host.hang
    ];

    /// An engine configured as the host's (epoch interruption, the epoch ticker), the spin
    /// module and a linker whose `host.hang` never returns.
    type Spin = (Engine, Arc<Ticker>, wasmtime::Module, wasmtime::Linker<()>);

    fn spin_module() -> Spin {
        let mut config = wasmtime::Config::new();
        config.epoch_interruption(true);
        let engine = Engine::new(&config).unwrap();
        let ticker = Ticker::start(&engine);
        let module = wasmtime::Module::new(&engine, SPIN).unwrap();
        let mut linker = wasmtime::Linker::new(&engine);
        linker.func_wrap_async("host", "hang", |_, ()| Box::new(std::future::pending::<()>())).unwrap();
        (engine, ticker, module, linker)
    }

    /// Calls `export` of the spin module in a fresh store, as [`Instances::enter`] and the
    /// export calls do: running while it runs, the running-time deadline, the wall-clock
    /// backstop.
    async fn call(
        (engine, ticker, module, linker): &Spin,
        export: &str,
        n: Option<i64>,
        deadline: Duration,
    ) -> Result<wasmtime::Result<()>, Elapsed> {
        let _running = ticker.running();
        let mut store = Store::new(engine, ());
        limit_running_time(&mut store, deadline);
        let limits = Limits { deadline, ..Limits::default() };
        within(limits.wall_clock(), async {
            let instance = linker.instantiate_async(&mut store, module).await?;
            match n {
                Some(n) => instance.get_typed_func::<i64, ()>(&mut store, export)?.call_async(&mut store, n).await,
                None => instance.get_typed_func::<(), ()>(&mut store, export)?.call_async(&mut store, ()).await,
            }
        })
        .await
    }

    fn interrupted(result: &Result<wasmtime::Result<()>, Elapsed>) -> bool {
        matches!(result, Ok(Err(e)) if e.downcast_ref::<Trap>() == Some(&Trap::Interrupt))
    }

    /// The deadline counts the ticks a call ran, not those it waited for the one thread behind
    /// the others: 24 calls that each need a tenth of the deadline, together more than twice
    /// the deadline, all finish; one that spins for ever among them still traps.
    #[tokio::test(flavor = "current_thread")]
    async fn the_deadline_counts_the_time_a_call_ran_not_the_time_it_waited_for_the_thread() {
        let spin = Arc::new(spin_module());
        let deadline = Duration::from_millis(1000);
        // How many turns take about a tenth of the deadline here.
        let probe = 20_000_000;
        let started = Instant::now();
        assert!(call(&spin, "spin", Some(probe), deadline).await.unwrap().is_ok());
        let per_turn = started.elapsed().as_secs_f64() / probe as f64;
        let turns = (deadline.as_secs_f64() / 10.0 / per_turn) as i64;
        let mut calls = tokio::task::JoinSet::new();
        for _ in 0..24 {
            let spin = spin.clone();
            calls.spawn(async move { call(&spin, "spin", Some(turns), deadline).await });
        }
        let forever = tokio::spawn({
            let spin = spin.clone();
            async move { call(&spin, "spin", Some(i64::MAX), deadline).await }
        });
        let started = Instant::now();
        let results = calls.join_all().await;
        let took = started.elapsed();
        assert!(took > deadline, "the calls did not contend for the thread: {took:?}");
        let failed: Vec<_> = results.iter().filter(|r| !matches!(r, Ok(Ok(())))).collect();
        assert!(failed.is_empty(), "{} of 24 calls failed after {took:?}: {:?}", failed.len(), failed[0]);
        assert!(interrupted(&forever.await.unwrap()));
    }

    #[tokio::test(flavor = "current_thread")]
    async fn a_call_that_spins_for_ever_traps_at_about_its_deadline() {
        let spin = spin_module();
        let deadline = Duration::from_millis(300);
        let started = Instant::now();
        let result = call(&spin, "spin", Some(i64::MAX), deadline).await;
        let took = started.elapsed();
        assert!(interrupted(&result), "{result:?}");
        // Loose above: the ticker's granularity is a few milliseconds, but a busy machine (the
        // other tests) may not schedule the thread for a while; without the deadline it spins on.
        assert!(took >= deadline && took < deadline + Duration::from_secs(2), "{took:?}");
    }

    /// The ticker sleeps while no call runs; a call that spins from the start still traps.
    #[tokio::test(flavor = "current_thread")]
    async fn a_call_that_spins_after_the_ticker_slept_traps_at_about_its_deadline() {
        let spin = spin_module();
        let idle = Instant::now();
        while !spin.1.is_parked() {
            assert!(idle.elapsed() < Duration::from_secs(5), "the ticker never slept");
            tokio::time::sleep(EPOCH_TICK).await;
        }
        let deadline = Duration::from_millis(300);
        let started = Instant::now();
        let result = call(&spin, "spin", Some(i64::MAX), deadline).await;
        let took = started.elapsed();
        assert!(interrupted(&result), "{result:?}");
        // Loose above: the ticker's granularity is a few milliseconds, but a busy machine (the
        // other tests) may not schedule the thread for a while; without the deadline it spins on.
        assert!(took >= deadline && took < deadline + Duration::from_secs(2), "{took:?}");
    }

    #[tokio::test(start_paused = true)]
    async fn a_call_stuck_in_a_host_import_is_cancelled_at_the_wall_clock_backstop() {
        let spin = spin_module();
        let deadline = Duration::from_millis(300);
        let started = tokio::time::Instant::now();
        let result = call(&spin, "hang", None, deadline).await;
        assert!(result.is_err(), "{result:?}");
        assert_eq!(started.elapsed(), deadline * WALL_CLOCK_FACTOR);
    }

    #[test]
    fn panic_message_is_taken_from_rust_panic_output() {
        let stderr = "\nthread '<unnamed>' panicked at src/lib.rs:12:5:\nfixture-panic: panicking on purpose\nnote: run with `RUST_BACKTRACE=1`\n";
        assert_eq!(panic_message(stderr).as_deref(), Some("fixture-panic: panicking on purpose (at src/lib.rs:12:5)"));
        assert_eq!(panic_message("some other output"), None);
    }

    #[test]
    fn config_names_must_be_dns_labels() {
        let mut config = crate::runtime::bindings::test_config("");
        config.primary.version = "v1".into();
        config.primary.kind = "WebPage".into();
        config.name = "Web Page".into();
        assert!(validate(&config).unwrap_err().contains("DNS label"));
        config.name = "webpage".into();
        assert_eq!(validate(&config), Ok(()));
    }

    fn watch(kind: &str, namespaced: bool, cluster: Option<&str>, mapper: Mapper) -> Watch {
        Watch {
            kind: KindRef { group: String::new(), version: "v1".into(), kind: kind.into(), plural: None, namespaced },
            namespace: None,
            label_selector: None,
            field_selector: None,
            cluster: cluster.map(String::from),
            mapper,
            projection: None,
            predicate: None,
        }
    }

    #[test]
    fn malformed_predicates_are_refused_at_load_naming_the_plugin_and_the_watch() {
        use crate::runtime::bindings::wasmop::plugin::types::PredicateTerm;
        let mut config = crate::runtime::bindings::test_config("Link");
        config.predicate = Some(vec![PredicateTerm::GenerationChanged, PredicateTerm::And]);
        let err = validate(&config).unwrap_err();
        assert_eq!(err, "plugin \"p\": the primary's predicate is malformed: term 1 (and) needs 2 operands, has 1");
        config.predicate =
            Some(vec![PredicateTerm::GenerationChanged, PredicateTerm::Plugin("x".into()), PredicateTerm::Or]);
        assert_eq!(validate(&config), Ok(()));
        let mut watched = watch("ConfigMap", true, None, Mapper::Annotations);
        watched.predicate = Some(Vec::new());
        config.watches = vec![watched];
        let err = validate(&config).unwrap_err();
        assert!(err.contains("the watch of ConfigMap") && err.contains("no terms"), "{err}");
    }

    #[test]
    fn owner_references_cannot_cross_clusters() {
        let mut config = crate::runtime::bindings::test_config("Link");
        config.watches = vec![watch("ConfigMap", true, Some("remote"), Mapper::OwnerReferences(Owners::Controller))];
        let err = validate(&config).unwrap_err();
        assert!(err.contains("cannot cross clusters") && err.contains("\"remote\""), "{err}");
        config.watches = vec![watch("ConfigMap", true, Some("remote"), Mapper::Annotations)];
        assert_eq!(validate(&config), Ok(()));
    }

    #[test]
    fn cluster_scoped_secondaries_cannot_be_owned_by_namespaced_primaries() {
        let mut config = crate::runtime::bindings::test_config("Link");
        config.watches = vec![watch("Namespace", false, None, Mapper::OwnerReferences(Owners::Any))];
        assert!(validate(&config).unwrap_err().contains("does not allow"));
        config.watches = vec![watch("Namespace", false, None, Mapper::Plugin)];
        assert_eq!(validate(&config), Ok(()));
    }
}
