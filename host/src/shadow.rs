//! Shadow rollouts: a candidate version of a plugin (a `ReconcilerPlugin`'s `spec.candidate`)
//! runs beside the live one. After each reconcile of the live version, once its writes were
//! sent, the candidate is asked exactly what the live version was asked (the same requests: the
//! same primary, the same dependents' states), reading what the live version read at the same
//! moment (its calls are recorded and followed, [`Module::reconcile_following`]; what the live
//! version did not read comes from the caches as they are then), and its endings are compared
//! with the live version's ([`wasmop_core::shadow::compare`]). Desired objects are admitted
//! as a reconcile admits them before its first write ([`wasmop_core::workflow::admit`]): the
//! live version's by its workflow, the candidate's by the workflow of the dependents it declares,
//! so a candidate whose objects the host would refuse once promoted ends with that refusal
//! (`CapabilityDenied`), a difference in its verdict, and is asked nothing more. Nothing the candidate
//! returns is applied: no write, no finalizer, no Event, no external call; its outgoing HTTP is
//! refused ([`Module::without_http`]). Its runs are spawned apart from the live reconcile, a few
//! at a time, each within the candidate's own limits; its traps and timeouts are counted as
//! shadow failures and never reach the live version. The webhook requests the live version
//! answers are asked of the candidate too, once the live answer is made: the two answers are
//! compared and counted ([`Shadow::compare_answer`]), and only the live one is returned.

use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex, RwLock};

use tokio::sync::Semaphore;
use tracing::Instrument;
use wasmop_core::dependent::PrimaryRef;
use wasmop_core::record::format::Failure;
use wasmop_core::record::{Call, Ending};
use wasmop_core::shadow::{Differed, Tally, compare, short};
use wasmop_core::workflow::Workflow;

use crate::dependents::{self, workflow_of};
use crate::metrics::Metrics;
use crate::object::ObjectKey;
use crate::runtime::bindings::wasmop::plugin::types::{DesiredObject, ReconcileError, ReconcileRequest};
use crate::runtime::recorded;
use crate::runtime::{CacheReader, CallError, GuestResult, Module};

/// Runs of a plugin's candidate at once.
const RUNNING: usize = 4;

/// Runs of a plugin's candidate waiting or running; past this, a reconcile is not shadowed
/// (counted as an `Overloaded` failure) rather than queue without bound.
const WAITING: usize = 1024;

/// A plugin's candidate version, if it has one, and what its shadow runs came to.
pub struct Shadow {
    plugin: String,
    candidate: RwLock<Option<Candidate>>,
    running: Arc<Semaphore>,
    waiting: AtomicUsize,
    tally: Mutex<Tally>,
    metrics: Arc<Metrics>,
}

/// A candidate version and the workflow of the dependents it declares, which admits its
/// desired objects as the live version's workflow admits the live ones.
#[derive(Clone)]
struct Candidate {
    module: Arc<Module>,
    workflow: Arc<Workflow>,
}

/// One export call of the live version in a reconcile: what it was asked (for `desired`, about
/// which primary: the candidate's objects are admitted for it).
enum Asked {
    Desired(ReconcileRequest, PrimaryRef),
    Reconcile(ReconcileRequest),
}

/// One export call of the live version: what it was asked, the import calls it made (with the
/// answers it got) and how it ended: its ending, then the reconcile's failure when the host
/// refused what it returned.
struct Live {
    asked: Asked,
    calls: Vec<Call>,
    endings: Vec<Ending>,
}

/// What the live version was asked in one reconcile, what it read and how each call ended,
/// kept only while the plugin has a candidate (taken when the reconcile starts).
pub(crate) struct Observed {
    candidate: Option<Candidate>,
    calls: Vec<Live>,
}

impl Observed {
    /// Whether the live version's import calls are to be kept: its reconciles read through a
    /// recording view ([`crate::record::Recorded`]) while the plugin has a candidate.
    pub(crate) fn keeps_calls(&self) -> bool {
        self.candidate.is_some()
    }

    /// Keeps the live version's `desired` call, which read through `view`, about the primary
    /// of `admission`, whose workflow admits (or refuses) the objects it returned.
    pub(crate) fn desired(
        &mut self,
        request: &ReconcileRequest,
        result: &Result<Result<Vec<DesiredObject>, ReconcileError>, CallError>,
        view: &dyn CacheReader,
        (workflow, primary): (&Workflow, &PrimaryRef),
    ) {
        if self.candidate.is_some() {
            let endings = admitted(result, workflow, primary);
            let asked = Asked::Desired(request.clone(), primary.clone());
            self.calls.push(Live { asked, calls: read(view), endings });
        }
    }

    /// Keeps the live version's `reconcile` call, which read through `view`: its request, moved
    /// rather than copied (the live run is done with it, and it holds the dependents' objects).
    pub(crate) fn reconciled(
        &mut self,
        request: ReconcileRequest,
        result: &Result<GuestResult, CallError>,
        view: &dyn CacheReader,
    ) {
        if self.candidate.is_some() {
            let endings = vec![recorded::ending(result, recorded::reconciled)];
            self.calls.push(Live { asked: Asked::Reconcile(request), calls: read(view), endings });
        }
    }
}

/// How a `desired` call ended: its objects (or its error), then, when `workflow` does not admit
/// them for `primary`, the permanent failure the host ends the reconcile with before writing
/// anything (`CapabilityDenied: ...`, `InvalidDependent: ...`), as it does for the live version.
fn admitted(
    result: &Result<Result<Vec<DesiredObject>, ReconcileError>, CallError>,
    workflow: &Workflow,
    primary: &PrimaryRef,
) -> Vec<Ending> {
    let mut endings = vec![recorded::ending(result, |objects| recorded::desired(objects))];
    if let Ok(Ok(objects)) = result
        && let Some((reason, message)) = dependents::refusal(workflow, primary, objects.clone())
    {
        endings.push(Ending::Failed(Failure::Permanent(format!("{reason}: {message}"))));
    }
    endings
}

/// Whether `endings` end the reconcile: the host refused what the call returned.
fn refused(endings: &[Ending]) -> bool {
    endings.len() > 1
}

/// The import calls of the last export call that read through `view`, if it records them.
fn read(view: &dyn CacheReader) -> Vec<Call> {
    view.recorder().map(|recorder| recorder.last_calls()).unwrap_or_default()
}

impl Shadow {
    /// No candidate yet for `plugin`.
    pub fn new(plugin: &str, metrics: Arc<Metrics>) -> Arc<Self> {
        Arc::new(Self {
            plugin: plugin.to_string(),
            candidate: RwLock::new(None),
            running: Arc::new(Semaphore::new(RUNNING)),
            waiting: AtomicUsize::new(0),
            tally: Mutex::new(Tally::default()),
            metrics,
        })
    }

    /// Makes `candidate` the version shadowed from the next reconcile on (`None`: none). A new
    /// candidate starts a new tally; runs of the one it replaces still in flight are not counted.
    pub fn propose(&self, candidate: Option<Arc<Module>>) {
        let candidate = candidate.map(|module| {
            let workflow = workflow_of(module.config()).expect("a loaded module's dependents form a workflow");
            Candidate { workflow: Arc::new(workflow), module }
        });
        let mut current = self.candidate.write().expect("never poisoned");
        let digest = |c: &Option<Candidate>| c.as_ref().map(|c| c.module.digest().to_string());
        if digest(&current) != digest(&candidate) {
            *self.tally.lock().expect("never poisoned") = Tally::default();
        }
        *current = candidate;
    }

    /// The candidate version, if any.
    pub fn candidate(&self) -> Option<Arc<Module>> {
        self.candidate.read().expect("never poisoned").as_ref().map(|c| c.module.clone())
    }

    /// What the current candidate's shadow runs came to.
    pub fn tally(&self) -> Tally {
        self.tally.lock().expect("never poisoned").clone()
    }

    /// Starts observing a reconcile of the live version: the candidate it is compared with is
    /// the one current now.
    pub(crate) fn observe(&self) -> Observed {
        Observed { candidate: self.candidate.read().expect("never poisoned").clone(), calls: Vec::new() }
    }

    /// Asks the candidate what the live version was asked in `observed`, reading `view`, and
    /// compares: spawned, so the live reconcile never waits for it.
    pub(crate) fn compare(self: &Arc<Self>, observed: Observed, view: Arc<dyn CacheReader>, key: ObjectKey) {
        let Observed { candidate: Some(Candidate { module: candidate, workflow }), calls } = observed else { return };
        if calls.is_empty() {
            return;
        }
        if !self.enqueue(&candidate) {
            return;
        }
        let shadow = self.clone();
        // A span of its own, not the live reconcile's: the candidate's log lines say so.
        let span = tracing::info_span!(parent: None, "shadow", plugin = %self.plugin, candidate = &candidate.digest()[..12],
            "resource.namespace" = key.namespace.as_deref().unwrap_or(""), "resource.name" = %key.name);
        let task = async move {
            let ended = shadow.in_turn(run(&candidate, &workflow, calls, view)).await;
            match ended {
                Ok((live, shadowed)) => shadow.compared(&candidate, &key, &live, &shadowed),
                Err(err) => {
                    tracing::warn!(%err, "the candidate's shadow run failed");
                    shadow.failed(&candidate, err.reason());
                }
            }
        };
        tokio::spawn(task.instrument(span));
    }

    /// Takes a place among the candidate's runs waiting or running; `false`, counted as an
    /// `Overloaded` failure, when there are [`WAITING`] already.
    fn enqueue(&self, candidate: &Arc<Module>) -> bool {
        if self.waiting.fetch_add(1, Ordering::AcqRel) >= WAITING {
            self.waiting.fetch_sub(1, Ordering::AcqRel);
            self.failed(candidate, "Overloaded");
            return false;
        }
        true
    }

    /// Runs `work`, enqueued, once one of the [`RUNNING`] places is free, and leaves the queue.
    async fn in_turn<T>(&self, work: impl Future<Output = T>) -> T {
        let permit = self.running.clone().acquire_owned().await;
        let done = work.await;
        drop(permit);
        self.waiting.fetch_sub(1, Ordering::AcqRel);
        done
    }

    /// Whether `candidate` is still the candidate: runs of one replaced or dropped meanwhile
    /// are not counted.
    fn current(&self, candidate: &Arc<Module>) -> bool {
        self.candidate.read().expect("never poisoned").as_ref().is_some_and(|c| Arc::ptr_eq(&c.module, candidate))
    }

    fn failed(&self, candidate: &Arc<Module>, reason: &'static str) {
        if self.current(candidate) {
            self.metrics.shadow().failed(&self.plugin, reason);
            self.tally.lock().expect("never poisoned").failed();
        }
    }

    fn compared(&self, candidate: &Arc<Module>, key: &ObjectKey, live: &[Ending], shadowed: &[Ending]) {
        if !self.current(candidate) {
            return;
        }
        let comparison = compare(live, shadowed);
        let kinds: Vec<&'static str> = comparison.kinds.iter().map(|k| k.as_str()).collect();
        self.counted(key, kinds, &comparison.diff);
    }

    /// Asks the candidate, if the plugin has one, the request of `webhook` (`/validate/<plugin>`)
    /// about `key` that the live version answered with the review `live`: `answer` asks it the
    /// same way, `None` when the candidate declares no such webhook. The two review responses
    /// are compared and counted ([`crate::metrics::ShadowMetrics::answered`]), a difference
    /// logged. Spawned once the live answer is made: the API server gets the live version's
    /// answer only, and never waits for the candidate.
    pub(crate) fn compare_answer<F, Fut>(self: &Arc<Self>, (webhook, key): (String, ObjectKey), live: String, answer: F)
    where
        F: FnOnce(Arc<Module>) -> Fut + Send + 'static,
        Fut: Future<Output = Option<String>> + Send + 'static,
    {
        let Some(candidate) = self.candidate() else { return };
        if !self.enqueue(&candidate) {
            return;
        }
        let shadow = self.clone();
        let span = tracing::info_span!(parent: None, "shadow", plugin = %self.plugin, candidate = &candidate.digest()[..12],
            webhook, "resource.namespace" = key.namespace.as_deref().unwrap_or(""), "resource.name" = %key.name);
        let task = async move {
            let shadowed = shadow.in_turn(answer(candidate.clone())).await;
            if !shadow.current(&candidate) {
                return;
            }
            let response = |review: &str| {
                serde_json::from_str::<serde_json::Value>(review).map(|mut v| v["response"].take()).unwrap_or_default()
            };
            let (live, shadowed) = (response(&live), shadowed.as_deref().map(response));
            let same = shadowed.as_ref() == Some(&live);
            shadow.metrics.shadow().answered(&shadow.plugin, &webhook, same);
            if !same {
                let candidate_said = shadowed.map_or_else(|| "no such webhook".to_string(), |s| s.to_string());
                tracing::info!(object = %key, webhook, "the candidate answers differently from the live version:\n- {live}\n+ {candidate_said}");
            }
        };
        tokio::spawn(task.instrument(span));
    }

    /// Counts a comparison about `key` that found the differences `kinds` (none: the same),
    /// logging the `diff` when it found any.
    fn counted(&self, key: &ObjectKey, kinds: Vec<&'static str>, diff: &wasmop_core::record::diff::Diff) {
        self.metrics.shadow().compared(&self.plugin, &kinds);
        let differed = (!kinds.is_empty()).then(|| {
            tracing::info!(object = %key, ?kinds, "the candidate differs from the live version:\n{}", short(diff));
            Differed {
                namespace: key.namespace.clone(),
                name: key.name.clone(),
                kinds,
                at: k8s_openapi::jiff::Timestamp::now().to_string(),
            }
        });
        self.tally.lock().expect("never poisoned").compared(differed);
    }
}

/// Runs the candidate's calls on the live version's requests, following what it read; the live
/// endings and the candidate's, in order, or the trap that stopped the candidate. The
/// candidate's desired objects are admitted by the `workflow` of the dependents it declares.
async fn run(
    candidate: &Module,
    workflow: &Workflow,
    calls: Vec<Live>,
    view: Arc<dyn CacheReader>,
) -> Result<(Vec<Ending>, Vec<Ending>), CallError> {
    let (mut live, mut shadowed) = (Vec::new(), Vec::new());
    // Once the host refuses what the candidate desired, its reconcile has ended: it is asked
    // nothing more.
    let mut ended = false;
    for Live { asked, calls, endings } in calls {
        live.extend(endings);
        if ended {
            continue;
        }
        let endings = match asked {
            Asked::Desired(request, primary) => {
                let result = Ok(candidate.desired_following(view.clone(), &request, calls).await?);
                admitted(&result, workflow, &primary)
            }
            Asked::Reconcile(request) => {
                let result = Ok(candidate.reconcile_following(view.clone(), &request, calls).await?);
                vec![recorded::ending(&result, recorded::reconciled)]
            }
        };
        ended = refused(&endings);
        shadowed.extend(endings);
    }
    Ok((live, shadowed))
}
