//! One reconcile of one primary: read it from the cache, keep the finalizer, run the dependents'
//! workflow, call the plugin in its sandbox, and carry out the outcome. A primary marked for
//! deletion runs the plugin's `cleanup` instead and then releases the finalizer.

use std::sync::Arc;
use std::time::Duration;

use kube::ResourceExt;
use kube::api::ApiResource;
use kube::runtime::events::EventType;
use tracing::Instrument;

use wasmop_core::dependent::PrimaryRef;
use wasmop_core::finalizer::Finalizers;
use wasmop_core::status::Report;
use wasmop_core::workflow::WorkflowError;

use crate::dependents::{self, Dependents, OwnWrites};
use crate::external::poller::FetchNow;
use crate::external::{ExternalCalls, ExternalState, Known};
use crate::informer::{Cache, WatchedCache};
use crate::metrics::{self, Metrics};
use crate::object::ObjectKey;
use crate::record::{Recorded, Records};
use crate::runtime::bindings::wasmop::plugin::types::{
    self, CleanupOutcome, DependentState, Event, Outcome, ReconcileError, ReconcileRequest,
};
use crate::runtime::{CacheReader, CallError, Current, Module};
use crate::scheduler::{Priority, Run, Verdict};
use crate::shadow::{Observed, Shadow};
use crate::source::Sink;
use crate::wire::{Object, PrimaryReads};
use crate::writer::{MetadataChanges, WriteError, Writer};

/// Everything a reconcile of one plugin's primaries needs; shared by all its runs.
pub(crate) struct Reconciler {
    /// The plugin's current version; a run keeps the version it started with.
    pub(crate) module: Arc<Current>,
    pub(crate) resource: ApiResource,
    /// The primary's kind, as the plugin declared it.
    pub(crate) primary_kind: wasmop_core::KindRef,
    /// Whether the host keeps the primary's `Ready`, `Reconciling` and `Degraded` conditions.
    pub(crate) conditions: bool,
    /// The primaries' cache.
    pub(crate) primaries: Cache,
    /// What the plugin reads of a primary.
    pub(crate) reads: PrimaryReads,
    /// Everything the plugin may read.
    pub(crate) cache: Arc<WatchedCache>,
    pub(crate) writer: Writer,
    /// The plugin's finalizer, if it needs one, and the names primaries are released of.
    pub(crate) finalizers: Finalizers,
    pub(crate) dependents: Option<Dependents>,
    /// The host's own writes of primaries, whose events reconcile nothing.
    pub(crate) own: Arc<OwnWrites>,
    pub(crate) metrics: Arc<Metrics>,
    /// The scheduler, to reconcile again when someone else wrote during the host's write.
    pub(crate) sink: Arc<dyn Sink>,
    /// Whether the plugin was told that the host replaces its own host-kept conditions.
    pub(crate) replaced: ReplacedConditions,
    /// The plugin's external state and its poller's request channel, when it polls or has
    /// external dependents.
    pub(crate) external: Option<(Arc<ExternalState>, FetchNow)>,
    /// Whether this replica leads; external calls go out only then.
    pub(crate) fence: crate::fence::Fence,
    /// The last inbound payload per primary, when the plugin caches inbound events.
    pub(crate) inbound: Option<Arc<crate::source::inbound::Payloads>>,
    /// The plugin's recording, when the host records (`--record DIR`).
    pub(crate) records: Option<Arc<Records>>,
    /// The plugin's candidate version, if it has one: asked what the live version was asked,
    /// once the live version's writes were sent, and never applied.
    pub(crate) shadow: Arc<Shadow>,
}

/// Tells a plugin once (not once per reconcile) that the host replaces the conditions of the
/// types it keeps (`Ready`, `Reconciling`, `Degraded`) that the plugin's status sets.
#[derive(Debug, Default)]
pub(crate) struct ReplacedConditions(std::sync::atomic::AtomicBool);

impl ReplacedConditions {
    /// The warning for the plugin's `status`, the first time it sets a host-kept condition.
    fn warning(&self, status: &serde_json::Value) -> Option<String> {
        // Told already: no scan of the status on every reconcile.
        if self.0.load(std::sync::atomic::Ordering::Relaxed) {
            return None;
        }
        let types = wasmop_core::status::host_kept_in(status);
        if types.is_empty() || self.0.swap(true, std::sync::atomic::Ordering::Relaxed) {
            return None;
        }
        Some(format!(
            "the plugin's status sets the condition(s) {} that the host keeps, and the host's replace them \
             (warned once); declare Config::own_conditions() to keep them yourself",
            types.join(", ")
        ))
    }
}

/// Why a reconcile did not succeed.
struct Failure {
    error: ReconcileError,
    reason: &'static str,
    retry: bool,
    /// The API server could not be reached: no fault of the plugin or the object.
    unreachable: bool,
}

/// The reason of a failed write of the primary that met a newer version (409).
const CONFLICT: &str = "Conflict";

impl Failure {
    fn from_plugin(error: ReconcileError) -> Self {
        let (reason, retry) = match &error {
            ReconcileError::Transient(_) => ("ReconcileFailed", true),
            ReconcileError::Permanent(_) => ("ReconcileFailed", false),
            ReconcileError::Invalid(_) => ("InvalidResource", false),
        };
        Self { error, reason, retry, unreachable: false }
    }

    /// The call into the plugin failed: a deadline, a memory-limit hit, fuel, a panic or another
    /// trap, each with its own reason.
    fn trap(error: CallError) -> Self {
        Self::transient(error.reason(), error.to_string())
    }

    fn permanent(reason: &'static str, message: String) -> Self {
        Self { error: ReconcileError::Permanent(message), reason, retry: false, unreachable: false }
    }

    /// Traps (deadline, memory, panic) and host-side failures are transient: the next attempt
    /// gets a fresh sandbox and fresh state.
    fn transient(reason: &'static str, message: String) -> Self {
        Self { error: ReconcileError::Transient(message), reason, retry: true, unreachable: false }
    }

    /// A failed write of the primary; one the API server refuses for what it carries is not
    /// retried (the same write would fail the same way).
    fn write(err: WriteError) -> Self {
        if err.permanent() {
            return Self::permanent("WriteRefused", err.to_string());
        }
        let reason = if matches!(err, WriteError::Conflict { .. }) { CONFLICT } else { "WriteFailed" };
        Self { unreachable: err.unreachable(), ..Self::transient(reason, err.to_string()) }
    }

    /// A tracking record could not be written: the IDs would be lost, so the run fails.
    fn tracking(err: crate::external::TrackingError) -> Self {
        Self { unreachable: err.unreachable(), ..Self::transient("TrackingFailed", err.to_string()) }
    }

    /// A tracking record could not be read: without the IDs, objects could be created twice.
    fn tracking_read(err: kube::Error) -> Self {
        Self::tracking(crate::external::TrackingError::Api(err))
    }

    fn cleanup(err: dependents::WriteFailure) -> Self {
        Self { unreachable: err.unreachable(), ..Self::transient("CleanupFailed", err.to_string()) }
    }

    fn dependents(plugin: &str, err: dependents::DependentError) -> Self {
        let reason = err.reason();
        match &err {
            WorkflowError::Invalid { .. } => Self::permanent(reason, err.to_string()),
            WorkflowError::Refused { .. } => Self::permanent(reason, format!("plugin {plugin:?} {err}")),
            // Every failed write refused for the object's shape: not retried until the plugin
            // desires other objects (a new generation of the primary).
            WorkflowError::Failed { errors, .. } if errors.iter().all(|(_, e)| e.permanent()) => {
                Self::permanent("DependentRefused", err.to_string())
            }
            WorkflowError::Failed { errors, .. } => {
                let unreachable = errors.iter().any(|(_, e)| e.unreachable());
                Self { unreachable, ..Self::transient(reason, err.to_string()) }
            }
        }
    }

    fn message(&self) -> &str {
        match &self.error {
            ReconcileError::Transient(m) | ReconcileError::Permanent(m) | ReconcileError::Invalid(m) => m,
        }
    }
}

impl Reconciler {
    /// Runs one scheduled reconcile and tells the scheduler how it went.
    pub(crate) async fn run(self: Arc<Self>, run: Run<ObjectKey>) -> Verdict {
        // Deleted meanwhile: nothing to do, and nothing to complain about.
        let object = match self.primaries.fetch(&run.key).await {
            Ok(Some(object)) => object,
            Ok(None) => return Verdict::Done { requeue_after: None },
            Err(err) => {
                // Only a bounded cache asks the API server, for an object it evicted.
                tracing::warn!(object = %run.key, %err, "cannot fetch the evicted primary; reconciling again soon");
                return Verdict::Unreachable;
            }
        };
        let module = self.module.get();
        let meta = &object.metadata;
        let span = tracing::info_span!(
            "reconcile",
            plugin = module.name(),
            digest = &module.digest()[..12],
            "resource.apiVersion" = %self.resource.api_version,
            "resource.kind" = %self.resource.kind,
            "resource.namespace" = meta.namespace.as_deref().unwrap_or(""),
            "resource.name" = %run.key.name,
            "resource.generation" = meta.generation.unwrap_or_default(),
            "resource.resourceVersion" = meta.resource_version.as_deref().unwrap_or(""),
            "resource.uid" = meta.uid.as_deref().unwrap_or(""),
            attempt = run.attempt,
        );
        self.reconcile(&module, run, object).instrument(span).await
    }

    async fn reconcile(&self, module: &Arc<Module>, run: Run<ObjectKey>, object: Arc<Object>) -> Verdict {
        tracing::debug!("reconcile started");
        let view: Arc<dyn CacheReader> = Arc::new(self.cache.for_primary(run.key.clone(), object.uid()));
        // Recorded (`--record`): the plan, and a view that keeps the calls when it asks for them.
        let recording = self.records.as_ref().map(|records| (records, records.plan(&object)));
        let recording = recording.filter(|(_, plan)| plan.keeps_calls());
        // Shadowed: the live version's calls are kept too, for the candidate to read as it did.
        let mut observed = self.shadow.observe();
        let view: Arc<dyn CacheReader> = match recording.is_some() || observed.keeps_calls() {
            true => Arc::new(Recorded::new(view)),
            false => view,
        };
        let started = std::time::Instant::now();
        let deleting = object.metadata.deletion_timestamp.is_some();
        let result = if deleting {
            self.finalize(module, &run, &object, &view).await.map(|requeue_after| Verdict::Done { requeue_after })
        } else {
            self.apply(module, &run, object.clone(), &view, &mut observed).await
        };
        let elapsed = started.elapsed();
        let failure = match result {
            Ok(verdict) => {
                tracing::info!(?verdict, ?elapsed, deleting, "reconciled");
                self.metrics.reconciled(module.name(), metrics::Outcome::Success);
                if let Some((records, plan)) = recording {
                    records.finish(plan, false, module.digest(), &run.key, steps(&view)).await;
                }
                self.shadowed(observed, &run, &object);
                return verdict;
            }
            Err(failure) => failure,
        };
        self.metrics.reconciled(module.name(), metrics::Outcome::Failure);
        let (reason, retry, message) = (failure.reason, failure.retry, failure.message().to_string());
        self.metrics.failed(module.name(), reason);
        if failure.unreachable {
            if let Some((records, plan)) = recording {
                records.finish(plan, true, module.digest(), &run.key, steps(&view)).await;
            }
            // Neither an Event nor an error status could be written now; the run repeats soon.
            tracing::warn!(object = %run.key, reason, ?elapsed, "API server unreachable, reconciling again soon: {message}");
            self.shadowed(observed, &run, &object);
            return Verdict::Unreachable;
        }
        let retrying = retry && !run.last_attempt;
        if reason == CONFLICT && retrying {
            if let Some((records, plan)) = recording {
                records.finish(plan, true, module.digest(), &run.key, steps(&view)).await;
            }
            // Someone wrote the object while this run read it: its newer version runs next (at
            // once if its event came meanwhile). The object is fine, so no Warning Event and no
            // failure conditions, which would flip `Ready` and cost two writes per conflict;
            // only a conflict on the last attempt is reported.
            tracing::info!(object = %run.key, ?elapsed, "changed meanwhile, reconciling its newer version: {message}");
            self.shadowed(observed, &run, &object);
            return Verdict::Failed { retry: true };
        }
        tracing::warn!(object = %run.key, reason, retry, ?elapsed, "reconcile failed: {message}");
        let note = format!("reconcile of {} failed: {message}", run.key);
        self.writer.publish(&object, EventType::Warning, reason, "Reconcile", Some(note)).await;
        // The run may have written the primary (its finalizer): patch the latest version.
        let latest = self.primaries.fetch(&run.key).await.ok().flatten().unwrap_or_else(|| object.clone());
        let status = match retrying {
            true => None,
            false => self.error_status(module, &run, &latest, view.clone(), failure.error).await,
        };
        if let Some((records, plan)) = recording {
            records.finish(plan, true, module.digest(), &run.key, steps(&view)).await;
        }
        let report = self.conditions.then_some(Report::Failure { reason, message: &message, retrying });
        if (status.is_some() || report.is_some())
            && let Err(err) = self.write_status(&latest, status, report.as_ref()).await
        {
            tracing::warn!(object = %run.key, %err, "cannot write the error status");
        }
        self.shadowed(observed, &run, &object);
        match view.asked_retry_after() {
            Some(delay) if retry => Verdict::RetryAfter(delay),
            _ => Verdict::Failed { retry },
        }
    }

    /// Once the live version's writes were sent: asks the candidate, if the plugin has one,
    /// what the live version was asked in this run, reading the caches as this run did.
    fn shadowed(&self, observed: Observed, run: &Run<ObjectKey>, object: &Object) {
        let view: Arc<dyn CacheReader> = Arc::new(self.cache.for_primary(run.key.clone(), object.uid()));
        self.shadow.compare(observed, view, run.key.clone());
    }

    /// The request the plugin's exports get for `object`.
    fn request(
        &self,
        run: &Run<ObjectKey>,
        object: &Object,
        dependents: Vec<DependentState>,
    ) -> Result<ReconcileRequest, Failure> {
        let json = self
            .reads
            .json(object)
            .map_err(|e| Failure::transient("ReconcileFailed", format!("cannot serialize the primary: {e}")))?;
        Ok(ReconcileRequest {
            object: json,
            attempt: run.attempt,
            last_attempt: run.last_attempt,
            dependents,
            external: Vec::new(),
            inbound: None,
        })
    }

    /// Reconciles a live primary: finalizer, dependents, the plugin, then the writes.
    async fn apply(
        &self,
        module: &Arc<Module>,
        run: &Run<ObjectKey>,
        mut object: Arc<Object>,
        view: &Arc<dyn CacheReader>,
        observed: &mut Observed,
    ) -> Result<Verdict, Failure> {
        if let Some(finalizers) = self.finalizers.live(object.finalizers()) {
            let changes = MetadataChanges { finalizers: Some(finalizers), ..MetadataChanges::default() };
            self.write_metadata(&object, &changes).await.map_err(Failure::write)?;
            // The plugin runs in a pass of its own, queued now (as kube-rs's finalizer helper
            // does). Run at once, the status patch would find the API server's watch cache one
            // write behind, which costs a read of etcd and a second try: 4,827 reads for 10,000
            // new objects, and 10% of their throughput.
            tracing::debug!(object = %run.key, "finalizers set; the plugin runs in the next pass");
            return Ok(Verdict::Continue);
        }
        if !self.external_known(&run.key)? {
            return Ok(Verdict::Done { requeue_after: None });
        }
        let states = match &self.dependents {
            None => Vec::new(),
            Some(dependents) => self.reconcile_dependents(module, run, &object, dependents, view, observed).await?,
        };
        let request = self.with_outside(&run.key, self.request(run, &object, states)?);
        let outcome = module.reconcile(view.clone(), &request).await;
        observed.reconciled(request, &outcome, view.as_ref());
        let outcome: Outcome = outcome.map_err(Failure::trap)?.map_err(Failure::from_plugin)?;
        let changes =
            MetadataChanges { labels: outcome.labels, annotations: outcome.annotations, ..MetadataChanges::default() };
        object = self.write_metadata(&object, &changes).await.map_err(Failure::write)?;
        let readiness = outcome.readiness.as_ref().map(|r| (r.ready, r.message.as_str()));
        let report = self.conditions.then_some(Report::Success { readiness });
        if outcome.status.is_some() || report.is_some() {
            let status = outcome.status.as_deref().map(parse_status).transpose().map_err(Failure::write)?;
            if let (Some(status), true) = (&status, self.conditions)
                && let Some(warning) = self.replaced.warning(status)
            {
                tracing::warn!("{warning}");
            }
            self.write_status(&object, status, report.as_ref()).await.map_err(Failure::write)?;
        }
        self.publish(&object, outcome.events).await;
        Ok(Verdict::Done { requeue_after: outcome.reschedule_after_ms.map(Duration::from_millis) })
    }

    /// Asks the plugin for its desired dependents and runs the workflow.
    async fn reconcile_dependents(
        &self,
        module: &Arc<Module>,
        run: &Run<ObjectKey>,
        object: &Arc<Object>,
        dependents: &Dependents,
        view: &Arc<dyn CacheReader>,
        observed: &mut Observed,
    ) -> Result<Vec<DependentState>, Failure> {
        let request = self.with_outside(&run.key, self.request(run, object, Vec::new())?);
        let desired = module.desired(view.clone(), &request).await;
        let primary = self.primary(run, object);
        observed.desired(&request, &desired, view.as_ref(), (dependents.workflow(), &primary.reference));
        let desired = desired.map_err(Failure::trap)?.map_err(Failure::from_plugin)?;
        let plugin = module.name().to_string();
        let primary_json = Arc::new(request.object);
        let external = self.external_calls(module, view, &run.key, &primary_json);
        let (module, view) = (module.clone(), view.clone());
        let check = move |name: String, dependent: Option<String>| {
            let (module, view, primary) = (module.clone(), view.clone(), primary_json.clone());
            Box::pin(async move {
                module.check(view, &name, &primary, dependent.as_deref()).await.unwrap_or_else(|trap| {
                    tracing::warn!(%trap, "plugin condition failed; taken as false");
                    false
                })
            }) as futures::future::BoxFuture<'static, bool>
        };
        let desired = dependents::decode_desired(desired).map_err(|e| Failure::permanent("InvalidDependent", e))?;
        if let Some((state, _)) = &self.external {
            state.ids(&run.key, object).await.map_err(Failure::tracking_read)?;
        }
        let states = dependents.reconcile(&primary, desired, &check, external.as_ref()).await;
        // What the external system holds now is recorded, whether the workflow failed or not.
        if let Some((state, _)) = &self.external {
            state.persist(&run.key, object).await.map_err(Failure::tracking)?;
        }
        let states = states.map_err(|err| Failure::dependents(&plugin, err))?;
        Ok(states
            .into_iter()
            .map(|state| {
                let kube = state.objects.iter().filter_map(|o| serde_json::to_string(&**o).ok());
                let external = state.external.iter().map(|o| o.object.to_string());
                DependentState { name: state.name, phase: state.phase.into(), objects: kube.chain(external).collect() }
            })
            .collect())
    }

    /// What the dependents' workflow knows of the primary `object`.
    fn primary<'a>(&self, run: &Run<ObjectKey>, object: &'a Object) -> dependents::Primary<'a> {
        let key = crate::object::key_of(object).unwrap_or_else(|| run.key.clone());
        let reference = PrimaryRef { kind: self.primary_kind.clone(), key, uid: object.uid().unwrap_or_default() };
        dependents::Primary { object, reference }
    }

    /// Whether the primary's external state is known (or the plugin has none). When it is not,
    /// the poller is asked to fetch it and will enqueue the primary; the reconcile waits for
    /// that rather than create objects that may exist. A failed fetch fails the reconcile.
    fn external_known(&self, key: &ObjectKey) -> Result<bool, Failure> {
        let Some((state, fetch_now)) = &self.external else { return Ok(true) };
        match state.known(key) {
            Known::Objects(_) => Ok(true),
            Known::Failed(reason) => Err(Failure::transient("FetchFailed", reason)),
            Known::Unknown => {
                tracing::debug!(object = %key, "external state not fetched yet; fetching first");
                fetch_now.request(key.clone());
                Ok(false)
            }
        }
    }

    /// `request` with the primary's external state and its last inbound payload as the host
    /// holds them now.
    fn with_outside(&self, key: &ObjectKey, mut request: ReconcileRequest) -> ReconcileRequest {
        if let Some((state, _)) = &self.external
            && let Known::Objects(objects) = state.known(key)
        {
            request.external = objects.iter().map(crate::external::to_wit).collect();
        }
        request.inbound = self.inbound.as_ref().and_then(|payloads| payloads.get(key)).map(|p| p.to_string());
        request
    }

    /// The external calls of one reconcile, when the plugin has external state.
    fn external_calls(
        &self,
        module: &Arc<Module>,
        view: &Arc<dyn CacheReader>,
        key: &ObjectKey,
        primary: &Arc<String>,
    ) -> Option<ExternalCalls> {
        let (state, _) = self.external.as_ref()?;
        Some(ExternalCalls {
            state: state.clone(),
            module: module.clone(),
            view: view.clone(),
            key: key.clone(),
            primary: primary.clone(),
            fence: self.fence.clone(),
        })
    }

    /// Deletes the primary's external objects (all of them: the primary is going), then
    /// records what is left. `Ok(false)` when the state is not known yet (a fetch is asked for).
    async fn delete_external(
        &self,
        module: &Arc<Module>,
        run: &Run<ObjectKey>,
        object: &Arc<Object>,
        view: &Arc<dyn CacheReader>,
    ) -> Result<bool, Failure> {
        let Some((state, _)) = &self.external else { return Ok(true) };
        if !state.has_dependents() || !self.external_known(&run.key)? {
            return Ok(!state.has_dependents());
        }
        state.ids(&run.key, object).await.map_err(Failure::tracking_read)?;
        let json = Arc::new(self.request(run, object, Vec::new())?.object);
        let calls = self.external_calls(module, view, &run.key, &json).expect("the plugin has external state");
        let objects = match state.known(&run.key) {
            Known::Objects(objects) => objects.into_iter().filter(|o| state.tracks(o)).collect(),
            Known::Unknown | Known::Failed(_) => Vec::new(),
        };
        let mut result = Ok(true);
        for actual in objects {
            if let Err(err) = calls.delete(&actual).await {
                result = Err(Failure::cleanup(err.into()));
                break;
            }
        }
        state.persist(&run.key, object).await.map_err(Failure::tracking)?;
        result
    }

    /// Runs `cleanup` for a primary marked for deletion and releases the finalizer, unless the
    /// plugin keeps it. Without the plugin's finalizer, it only lets go of names an earlier
    /// version of the plugin left (no cleanup runs for them).
    async fn finalize(
        &self,
        module: &Arc<Module>,
        run: &Run<ObjectKey>,
        object: &Arc<Object>,
        view: &Arc<dyn CacheReader>,
    ) -> Result<Option<Duration>, Failure> {
        let Some(finalizers) = self.finalizers.deleted(object.finalizers()) else {
            return Ok(None);
        };
        if !self.finalizers.kept.as_ref().is_some_and(|f| object.finalizers().contains(f)) {
            tracing::info!("releasing a finalizer the plugin no longer needs");
            return self.release(object, finalizers).await;
        }
        if !self.external_known(&run.key)? {
            return Ok(None);
        }
        let request = self.with_outside(&run.key, self.request(run, object, Vec::new())?);
        let cleaned = module.cleanup(view.clone(), &request).await;
        let CleanupOutcome { keep_finalizer, reschedule_after_ms, events } =
            cleaned.map_err(Failure::trap)?.map_err(Failure::from_plugin)?;
        self.publish(object, events).await;
        let requeue_after = reschedule_after_ms.map(Duration::from_millis);
        if keep_finalizer {
            tracing::info!(?requeue_after, "cleanup keeps the finalizer");
            return Ok(requeue_after);
        }
        if !self.delete_external(module, run, object, view).await? {
            return Ok(None);
        }
        if let Some(dependents) = &self.dependents {
            let primary = self.primary(run, object);
            dependents.delete_annotated(&primary).await.map_err(Failure::cleanup)?;
        }
        self.release(object, finalizers).await
    }

    /// Leaves the primary marked for deletion with `finalizers`, the plugin's removed.
    async fn release(&self, object: &Arc<Object>, finalizers: Vec<String>) -> Result<Option<Duration>, Failure> {
        let changes = MetadataChanges { finalizers: Some(finalizers), ..MetadataChanges::default() };
        match self.write_metadata(object, &changes).await {
            Ok(_) => Ok(None),
            // Gone already: the finalizer was released (by an earlier run whose write this run
            // did not see yet) and the API server removed the object.
            Err(err) if err.gone() => {
                tracing::info!("the object is gone; its finalizer was released already");
                Ok(None)
            }
            Err(err) => Err(Failure::write(err)),
        }
    }

    /// Patches the primary's metadata; returns the object as it is now.
    async fn write_metadata(&self, object: &Arc<Object>, changes: &MetadataChanges) -> Result<Arc<Object>, WriteError> {
        // Most runs ask for no change: nothing to track.
        if changes.is_empty() {
            return Ok(object.clone());
        }
        match self.tracked(object, self.writer.patch_metadata(object, changes)).await? {
            Some(written) => Ok(self.remember(object, written)),
            None => Ok(object.clone()),
        }
    }

    /// Patches the primary's status with the plugin's `status` and the host's conditions for
    /// `report`; the object as it is now, if it was written.
    async fn write_status(
        &self,
        object: &Arc<Object>,
        status: Option<serde_json::Value>,
        report: Option<&Report<'_>>,
    ) -> Result<Option<Arc<Object>>, WriteError> {
        let written = self.tracked(object, self.writer.patch_status(object, status, report)).await?;
        Ok(written.map(|written| self.remember(object, written)))
    }

    /// Runs a write of the primary, so that its watch event is known as the host's own even if
    /// it arrives before the response; a change by someone else meanwhile reconciles again.
    async fn tracked(
        &self,
        object: &Object,
        write: impl std::future::Future<Output = Result<Option<Object>, WriteError>>,
    ) -> Result<Option<Object>, WriteError> {
        let Some(key) = crate::object::key_of(object) else { return write.await };
        self.own.begin(&key);
        let written = write.await;
        let foreign = match &written {
            Ok(Some(written)) => self.own.wrote(&key, written.resource_version()),
            Ok(None) | Err(_) => self.own.failed(&key),
        };
        if foreign {
            tracing::debug!(object = %key, "changed by someone else during the host's write");
            self.sink.enqueue(key, Priority::Live);
        }
        written
    }

    /// Makes a write of the primary visible to the next reconcile at once; returns it as the
    /// cache keeps it (trimmed and projected), which the rest of this run goes on with.
    fn remember(&self, before: &Object, written: Object) -> Arc<Object> {
        self.primaries.wrote(written, before.resource_version())
    }

    async fn publish(&self, object: &Object, events: Vec<Event>) {
        for event in events {
            let type_ = match event.event_type {
                types::EventType::Normal => EventType::Normal,
                types::EventType::Warning => EventType::Warning,
            };
            self.writer.publish(object, type_, &event.reason, &event.action, event.note).await;
        }
    }

    /// No retry follows a failure: the status the plugin puts the error on, if any
    /// (JOSDK's ErrorStatusHandler).
    async fn error_status(
        &self,
        module: &Arc<Module>,
        run: &Run<ObjectKey>,
        object: &Arc<Object>,
        view: Arc<dyn CacheReader>,
        error: ReconcileError,
    ) -> Option<serde_json::Value> {
        let request = self.request(run, object, Vec::new()).ok()?;
        match module.update_error_status(view, &request, &error).await {
            Ok(status) => status
                .as_deref()
                .map(parse_status)?
                .inspect_err(|err| {
                    tracing::warn!(object = %run.key, %err, "cannot write the error status");
                })
                .ok(),
            Err(err) => {
                tracing::warn!(object = %run.key, %err, "update-error-status failed");
                None
            }
        }
    }
}

/// The steps `view` recorded, if it records.
fn steps(view: &Arc<dyn CacheReader>) -> Vec<wasmop_core::record::Step> {
    view.recorder().map(|recorder| recorder.take_steps()).unwrap_or_default()
}

/// The plugin's status, which must be a JSON object.
fn parse_status(status: &str) -> Result<serde_json::Value, WriteError> {
    serde_json::from_str(status).map_err(|e| WriteError::StatusNotAnObject(e.to_string()))
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    #[test]
    fn a_plugins_own_host_kept_condition_is_warned_about_once() {
        let replaced = ReplacedConditions::default();
        assert_eq!(replaced.warning(&json!({ "conditions": [{ "type": "Synced" }] })), None);
        let own = json!({ "conditions": [{ "type": "Ready", "status": "True" }] });
        let warning = replaced.warning(&own).expect("the first time");
        assert!(warning.contains("condition(s) Ready that the host keeps"), "{warning}");
        assert!(warning.contains("Config::own_conditions()"), "{warning}");
        assert_eq!(replaced.warning(&own), None, "once per plugin, not per reconcile");
    }
}
