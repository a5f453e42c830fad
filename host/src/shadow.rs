//! Shadow rollouts: a candidate version of a plugin (a `ReconcilerPlugin`'s `spec.candidate`)
//! runs beside the live one. After each reconcile of the live version, once its writes were
//! sent, the candidate is asked exactly what the live version was asked (the same requests: the
//! same primary, the same dependents' states), reading what the live version read at the same
//! moment (its calls are recorded and followed, [`Module::reconcile_following`]; what the live
//! version did not read comes from the caches as they are then), and its endings are compared
//! with the live version's ([`wasmop_core::shadow::compare`]). Nothing the candidate
//! returns is applied: no write, no finalizer, no Event, no external call; its outgoing HTTP is
//! refused ([`Module::without_http`]). Its runs are spawned apart from the live reconcile, a few
//! at a time, each within the candidate's own limits; its traps and timeouts are counted as
//! shadow failures and never reach the live version.

use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex, RwLock};

use tokio::sync::Semaphore;
use tracing::Instrument;
use wasmop_core::record::{Call, Ending};
use wasmop_core::shadow::{Differed, Tally, compare, short};

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
    candidate: RwLock<Option<Arc<Module>>>,
    running: Arc<Semaphore>,
    waiting: AtomicUsize,
    tally: Mutex<Tally>,
    metrics: Arc<Metrics>,
}

/// One export call of the live version in a reconcile: what it was asked.
enum Asked {
    Desired(ReconcileRequest),
    Reconcile(ReconcileRequest),
}

/// One export call of the live version: what it was asked, the import calls it made (with the
/// answers it got) and how it ended.
struct Live {
    asked: Asked,
    calls: Vec<Call>,
    ending: Ending,
}

/// What the live version was asked in one reconcile, what it read and how each call ended,
/// kept only while the plugin has a candidate (taken when the reconcile starts).
pub(crate) struct Observed {
    candidate: Option<Arc<Module>>,
    calls: Vec<Live>,
}

impl Observed {
    /// Whether the live version's import calls are to be kept: its reconciles read through a
    /// recording view ([`crate::record::Recorded`]) while the plugin has a candidate.
    pub(crate) fn keeps_calls(&self) -> bool {
        self.candidate.is_some()
    }

    /// Keeps the live version's `desired` call, which read through `view`.
    pub(crate) fn desired(
        &mut self,
        request: &ReconcileRequest,
        result: &Result<Result<Vec<DesiredObject>, ReconcileError>, CallError>,
        view: &dyn CacheReader,
    ) {
        if self.candidate.is_some() {
            let ending = recorded::ending(result, |objects| recorded::desired(objects));
            self.calls.push(Live { asked: Asked::Desired(request.clone()), calls: read(view), ending });
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
            let ending = recorded::ending(result, recorded::reconciled);
            self.calls.push(Live { asked: Asked::Reconcile(request), calls: read(view), ending });
        }
    }
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
        let mut current = self.candidate.write().expect("never poisoned");
        if current.as_ref().map(|m| m.digest()) != candidate.as_ref().map(|m| m.digest()) {
            *self.tally.lock().expect("never poisoned") = Tally::default();
        }
        *current = candidate;
    }

    /// The candidate version, if any.
    pub fn candidate(&self) -> Option<Arc<Module>> {
        self.candidate.read().expect("never poisoned").clone()
    }

    /// What the current candidate's shadow runs came to.
    pub fn tally(&self) -> Tally {
        self.tally.lock().expect("never poisoned").clone()
    }

    /// Starts observing a reconcile of the live version: the candidate it is compared with is
    /// the one current now.
    pub(crate) fn observe(&self) -> Observed {
        Observed { candidate: self.candidate(), calls: Vec::new() }
    }

    /// Asks the candidate what the live version was asked in `observed`, reading `view`, and
    /// compares: spawned, so the live reconcile never waits for it.
    pub(crate) fn compare(self: &Arc<Self>, observed: Observed, view: Arc<dyn CacheReader>, key: ObjectKey) {
        let Observed { candidate: Some(candidate), calls } = observed else { return };
        if calls.is_empty() {
            return;
        }
        if self.waiting.fetch_add(1, Ordering::AcqRel) >= WAITING {
            self.waiting.fetch_sub(1, Ordering::AcqRel);
            self.failed(&candidate, "Overloaded");
            return;
        }
        let shadow = self.clone();
        // A span of its own, not the live reconcile's: the candidate's log lines say so.
        let span = tracing::info_span!(parent: None, "shadow", plugin = %self.plugin, candidate = &candidate.digest()[..12],
            "resource.namespace" = key.namespace.as_deref().unwrap_or(""), "resource.name" = %key.name);
        let task = async move {
            let permit = shadow.running.clone().acquire_owned().await;
            let ended = run(&candidate, calls, view).await;
            drop(permit);
            shadow.waiting.fetch_sub(1, Ordering::AcqRel);
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

    /// Whether `candidate` is still the candidate: runs of one replaced or dropped meanwhile
    /// are not counted.
    fn current(&self, candidate: &Arc<Module>) -> bool {
        self.candidate.read().expect("never poisoned").as_ref().is_some_and(|c| Arc::ptr_eq(c, candidate))
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
        self.metrics.shadow().compared(&self.plugin, &kinds);
        let differed = (!kinds.is_empty()).then(|| {
            tracing::info!(object = %key, ?kinds, "the candidate differs from the live version:\n{}", short(&comparison.diff));
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
/// endings and the candidate's, in order, or the trap that stopped the candidate.
async fn run(
    candidate: &Module,
    calls: Vec<Live>,
    view: Arc<dyn CacheReader>,
) -> Result<(Vec<Ending>, Vec<Ending>), CallError> {
    let (mut live, mut shadowed) = (Vec::new(), Vec::new());
    for Live { asked, calls, ending } in calls {
        let candidates = match asked {
            Asked::Desired(request) => {
                let result = Ok(candidate.desired_following(view.clone(), &request, calls).await?);
                recorded::ending(&result, |objects| recorded::desired(objects))
            }
            Asked::Reconcile(request) => {
                let result = Ok(candidate.reconcile_following(view.clone(), &request, calls).await?);
                recorded::ending(&result, recorded::reconciled)
            }
        };
        live.push(ending);
        shadowed.push(candidates);
    }
    Ok((live, shadowed))
}
