//! A record `wasmop run --record DIR` wrote, as a test fixture: [`FakeHost::from_record`] loads
//! what the recorded reconcile read, [`FakeHost::replay`] runs the reconciler natively on the
//! recorded request, and [`Replayed::diff`] compares the outcome with the recorded one, as
//! `wasmop replay RECORD --plugin` does for a compiled version.
//!
//! What the host holds from a record:
//!
//! - every object a `get`, `list` or `secondaries` answered (secondaries as secondaries), and
//!   each kind whose read failed, failing with the recorded words;
//! - the reconcile's request: the primary exactly as the host passed it, the attempt, the
//!   dependents' states, the external state and the last inbound payload.
//!
//! Natively the reconciler reads the machine's clocks and random numbers, not the recorded
//! ones: an outcome that depends on them differs. [`FakeHost::recorded_wall_clock`] gives the
//! readings the recorded reconcile made, for code that takes the time as an argument. A record with answers dropped to fit its size
//! cap is refused, since the host could not answer what the reconcile read; so is one without a
//! `reconcile` (a deletion's `cleanup`).

use std::time::{Duration, SystemTime, UNIX_EPOCH};

use serde_json::Value;
use wasmop_core::record::diff::{Diff, Summary, diff};
use wasmop_core::record::format::{DesiredObject, Failure, Outcome as RecordedOutcome, ReadError, Readiness};
use wasmop_core::record::{Answer, Ending, Import, Record, Request, Step};

use super::host::{FakeHost, Run};
use super::recorded::Recorded;
use super::until_stable;
use crate::{DependentState, Desired, Error, External, Kind, Phase, Reconciler};

/// Why a record cannot be a fixture.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum RecordError {
    /// Not a record this SDK reads.
    Read(ReadError),
    /// Answers were dropped to fit the record's size cap.
    Truncated,
    /// The record holds no `reconcile`.
    NoReconcile,
}

impl std::fmt::Display for RecordError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            RecordError::Read(error) => error.fmt(f),
            RecordError::Truncated => f.write_str(
                "the record's answers were dropped to fit its size cap: raise `maxRecordKiB` and record again",
            ),
            RecordError::NoReconcile => {
                f.write_str("the record holds no reconcile (a deletion's cleanup is not replayed)")
            }
        }
    }
}

impl std::error::Error for RecordError {}

/// A record's reconcile run again natively ([`FakeHost::replay`]): the run, and its outcome
/// beside the recorded one.
#[derive(Debug)]
pub struct Replayed {
    run: Run,
    recorded: Summary,
    replayed: Summary,
}

impl Replayed {
    /// The run, to assert on as any test reconcile.
    pub fn run(&self) -> &Run {
        &self.run
    }

    /// How the outcome differs from the recorded one: verdict, status, labels and annotations,
    /// desired objects and events. Empty when it is the same; prints as `wasmop replay
    /// --plugin` does.
    pub fn diff(&self) -> Diff {
        diff(&self.recorded, &self.replayed)
    }

    /// Panics, printing the diff, unless the outcome is the recorded one.
    pub fn assert_as_recorded(&self) {
        let diff = self.diff();
        assert!(diff.is_empty(), "the replay differs from the record:\n{diff}");
    }
}

impl FakeHost {
    /// A host holding what the reconcile in `record` (a record's JSON, as `wasmop run --record
    /// DIR` wrote it) read, ready to [`FakeHost::replay`] it.
    ///
    /// ```no_run
    /// # use wasmop_guest::{Config, Context, Error, Kind, Outcome, Reconciler};
    /// use wasmop_guest::testing::FakeHost;
    /// # struct MyReconciler;
    /// # impl Reconciler for MyReconciler {
    /// #     type Primary = wasmop_guest::serde_json::Value;
    /// #     fn config() -> Config { Config::new("p", Kind::namespaced("", "v1", "ConfigMap")) }
    /// #     fn reconcile(_: Self::Primary, _: &Context) -> Result<Outcome, Error> { Ok(Outcome::done()) }
    /// # }
    ///
    /// # fn f() -> Result<(), Box<dyn std::error::Error>> {
    /// // In a test: `FakeHost::from_record(include_bytes!("../records/broken.json"))?`.
    /// let host = FakeHost::from_record(&std::fs::read("records/broken.json")?)?;
    /// host.replay::<MyReconciler>().assert_as_recorded();
    /// # Ok(()) }
    /// ```
    pub fn from_record(record: &[u8]) -> Result<Self, RecordError> {
        let record = Record::from_slice(record).map_err(RecordError::Read)?;
        if record.truncated {
            return Err(RecordError::Truncated);
        }
        let reconcile = record.steps.iter().find(|step| matches!(step.request, Request::Reconcile(_)));
        let Some(Step { request: Request::Reconcile(request), calls, .. }) = reconcile else {
            return Err(RecordError::NoReconcile);
        };
        let request = request.clone();
        let wall_clock = calls
            .iter()
            .filter_map(|call| match call.answer {
                Answer::Instant { seconds, nanoseconds } => Some(UNIX_EPOCH + Duration::new(seconds, nanoseconds)),
                _ => None,
            })
            .collect();
        let mut host = FakeHost::new();
        for call in record.steps.iter().flat_map(|step| &step.calls) {
            host.answered(&call.import, &call.answer);
        }
        host.dependents = request.dependents.iter().map(dependent).collect();
        host.external = request.external.iter().map(external).collect();
        host.inbound = request.inbound.as_deref().map(json);
        let steps = record.steps.into_iter().map(|step| (step.request, step.ending)).collect();
        host.recorded = Some(Box::new(Recorded { request, steps, wall_clock }));
        Ok(host)
    }

    /// The wall clock's readings the recorded reconcile made, in order (empty for a host not
    /// loaded from a record): the times to give code of the plugin that takes the time as an
    /// argument, since natively `SystemTime::now()` reads the machine's clock.
    pub fn recorded_wall_clock(&self) -> &[SystemTime] {
        self.recorded.as_ref().map_or(&[], |recorded| &recorded.wall_clock)
    }

    /// Puts what the host answered `import` with in this host.
    fn answered(&mut self, import: &Import, answer: &Answer) {
        match (import, answer) {
            (Import::Get { kind, .. }, Answer::Object(Ok(Some(object)))) => {
                self.insert_json(&Kind::from_core(kind), object);
            }
            (Import::List { kind, .. }, Answer::Objects(Ok(objects))) => {
                for object in objects {
                    self.insert_json(&Kind::from_core(kind), object);
                }
            }
            (Import::Secondaries { kind }, Answer::Objects(Ok(objects))) => {
                for object in objects {
                    self.insert_secondary(&Kind::from_core(kind), &json(object));
                }
            }
            (
                Import::Get { kind, .. } | Import::List { kind, .. } | Import::Secondaries { kind },
                Answer::Object(Err(message)) | Answer::Objects(Err(message)),
            ) => self.failures.push((Kind::from_core(kind), message.clone())),
            _ => {}
        }
    }

    /// Runs `R` on the request of the record this host was loaded from
    /// ([`FakeHost::from_record`]): `desired` and `update-error-status` too when the host called
    /// them. Panics when the host was not loaded from a record.
    pub fn replay<R: Reconciler>(&self) -> Replayed {
        let recorded = self.recorded.as_ref().expect("FakeHost::replay: load the host with FakeHost::from_record");
        let request = &recorded.request;
        let run = self.reconcile_json::<R>(&request.object, request.attempt, request.last_attempt);
        let mut endings = Vec::new();
        let mut replayed = Vec::new();
        for (step, ending) in &recorded.steps {
            let again = match step {
                Request::Desired(_) => desired(self.desired::<R>(&json(&request.object))),
                Request::Reconcile(_) => reconciled(run.result()),
                Request::UpdateErrorStatus { .. } if run.result().is_err() => {
                    Ending::ErrorStatus(run.error_status().map(|status| status.to_string()))
                }
                // Not called after a success; cleanup and external calls are not replayed here.
                _ => continue,
            };
            endings.push(ending);
            replayed.push(again);
        }
        Replayed { run, recorded: Summary::of(endings), replayed: Summary::of(&replayed) }
    }
}

/// `text` as JSON (`null` when it is not JSON).
fn json(text: &str) -> Value {
    serde_json::from_str(text).unwrap_or_default()
}

fn dependent(state: &wasmop_core::record::format::DependentState) -> DependentState {
    let phase = match state.phase.as_str() {
        "ready" => Phase::Ready,
        "skipped" => Phase::Skipped,
        "deleted" => Phase::Deleted,
        _ => Phase::NotReady,
    };
    DependentState { name: state.name.clone(), phase, objects: state.objects.iter().map(|o| json(o)).collect() }
}

fn external(object: &wasmop_core::record::format::ExternalObject) -> External {
    External {
        dependent: object.dependent.clone(),
        key: object.key.clone(),
        id: object.id.clone(),
        object: json(&object.object),
    }
}

/// `desired`'s result as a record holds it.
fn desired(result: Result<Vec<Desired>, Error>) -> Ending {
    match result {
        Ok(objects) => Ending::Desired(
            objects
                .into_iter()
                .map(|Desired { dependent, object, keep, key }| DesiredObject {
                    dependent,
                    object: object.to_string(),
                    keep,
                    key,
                })
                .collect(),
        ),
        Err(error) => Ending::Failed(failure(&error)),
    }
}

/// `reconcile`'s result as a record holds it.
fn reconciled(result: &Result<crate::Outcome, Error>) -> Ending {
    let outcome = match result {
        Ok(outcome) => until_stable::to_outcome(outcome),
        Err(error) => return Ending::Failed(failure(error)),
    };
    Ending::Reconciled(RecordedOutcome {
        readiness: outcome.readiness.map(|(ready, message)| Readiness { ready, message }),
        status: outcome.status.map(|status| status.to_string()),
        labels: outcome.labels,
        annotations: outcome.annotations,
        reschedule_after_ms: outcome.reschedule_after_ms,
        events: outcome.events,
    })
}

fn failure(error: &Error) -> Failure {
    match error.clone() {
        Error::Transient(message) | Error::TransientAfter(message, _) => Failure::Transient(message),
        Error::Permanent(message) => Failure::Permanent(message),
        Error::Invalid(message) => Failure::Invalid(message),
    }
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    /// A failed reconcile of `fixture-record` the host recorded: it read the Secret `creds`.
    const BROKEN: &[u8] = include_bytes!("../../../plugins/fixtures/record/records/broken.json");

    /// [`BROKEN`] changed by `edit`.
    fn edited(edit: impl FnOnce(&mut Value)) -> Vec<u8> {
        let mut record: Value = serde_json::from_slice(BROKEN).unwrap();
        edit(&mut record);
        record.to_string().into_bytes()
    }

    #[test]
    fn a_host_from_a_record_holds_what_the_reconcile_read_and_its_request() {
        let host = FakeHost::from_record(BROKEN).unwrap();
        let names: Vec<String> =
            host.objects.iter().map(|(kind, o)| format!("{kind} {}", o["metadata"]["name"])).collect();
        assert_eq!(names, ["v1/Secret \"creds\""]);
        let recorded = host.recorded.as_ref().unwrap();
        assert_eq!(json(&recorded.request.object)["spec"], json!({ "value": -3 }));
        let exports: Vec<&str> = recorded.steps.iter().map(|(request, _)| request.export()).collect();
        assert_eq!(exports, ["reconcile", "update-error-status"]);
        let read = Duration::new(1_795_688_492, 355_089_461);
        assert_eq!(host.recorded_wall_clock(), [UNIX_EPOCH + read]);
        assert!(FakeHost::new().recorded_wall_clock().is_empty());
    }

    #[test]
    fn a_read_that_failed_fails_again_with_the_recorded_words() {
        let record = edited(|r| r["steps"][0]["calls"][3]["answer"] = json!({ "object": { "Err": "not watched" } }));
        let host = FakeHost::from_record(&record).unwrap();
        assert!(host.objects.is_empty());
        assert_eq!(host.failures, [(Kind::namespaced("", "v1", "Secret").plural("secrets"), "not watched".into())]);
    }

    #[test]
    fn a_record_that_cannot_be_a_fixture_is_refused_saying_why() {
        let truncated = edited(|r| r["truncated"] = json!(true));
        assert_eq!(FakeHost::from_record(&truncated).unwrap_err(), RecordError::Truncated);
        let cleanup = edited(|r| r["steps"] = json!([]));
        let error = FakeHost::from_record(&cleanup).unwrap_err();
        assert_eq!(error.to_string(), "the record holds no reconcile (a deletion's cleanup is not replayed)");
        let newer = edited(|r| r["version"] = json!(2));
        assert_eq!(FakeHost::from_record(&newer).unwrap_err(), RecordError::Read(ReadError::Version(2)));
        assert!(matches!(FakeHost::from_record(b"{}"), Err(RecordError::Read(ReadError::Malformed(_)))));
    }

    #[test]
    #[should_panic(expected = "FakeHost::replay: load the host with FakeHost::from_record")]
    fn replaying_a_host_not_loaded_from_a_record_panics_saying_so() {
        struct Noop;
        impl Reconciler for Noop {
            type Primary = Value;
            fn config() -> crate::Config {
                crate::Config::new("noop", Kind::namespaced("", "v1", "ConfigMap"))
            }
            fn reconcile(_: Value, _: &crate::Context) -> Result<crate::Outcome, Error> {
                Ok(crate::Outcome::done())
            }
        }
        FakeHost::new().replay::<Noop>();
    }
}
