//! The contract's types as a record holds them (`wasmop_core::record::format`), and back: the
//! one conversion of requests and endings for recording and replaying.

use wasmop_core::record::format::{
    CleanupOutcome as RecordedCleanup, DependentState as RecordedDependent, DesiredObject as RecordedDesired,
    Event as RecordedEvent, ExternalObject as RecordedExternal, Failure, Outcome as RecordedOutcome,
    Readiness as RecordedReadiness, ReconcileRequest as RecordedRequest,
};
use wasmop_core::record::{Ending, Request};

use super::CallError;
use super::bindings::wasmop::plugin::types::{
    CleanupOutcome, DependentPhase, DependentState, DesiredObject, Event, EventType, ExternalObject, Outcome,
    Readiness, ReconcileError, ReconcileRequest,
};

/// A request as recorded.
pub(crate) fn request(request: &ReconcileRequest) -> RecordedRequest {
    RecordedRequest {
        object: request.object.clone(),
        attempt: request.attempt,
        last_attempt: request.last_attempt,
        dependents: request
            .dependents
            .iter()
            .map(|d| RecordedDependent {
                name: d.name.clone(),
                phase: phase(d.phase).into(),
                objects: d.objects.clone(),
            })
            .collect(),
        external: request.external.iter().map(external).collect(),
        inbound: request.inbound.clone(),
    }
}

/// A recorded request, as the guest receives it.
pub(crate) fn request_back(request: &RecordedRequest) -> ReconcileRequest {
    ReconcileRequest {
        object: request.object.clone(),
        attempt: request.attempt,
        last_attempt: request.last_attempt,
        dependents: request
            .dependents
            .iter()
            .map(|d| DependentState { name: d.name.clone(), phase: phase_back(&d.phase), objects: d.objects.clone() })
            .collect(),
        external: request.external.iter().map(external_back).collect(),
        inbound: request.inbound.clone(),
    }
}

fn phase(phase: DependentPhase) -> &'static str {
    match phase {
        DependentPhase::Ready => "ready",
        DependentPhase::NotReady => "notReady",
        DependentPhase::Skipped => "skipped",
        DependentPhase::Deleted => "deleted",
    }
}

fn phase_back(phase: &str) -> DependentPhase {
    match phase {
        "ready" => DependentPhase::Ready,
        "skipped" => DependentPhase::Skipped,
        "deleted" => DependentPhase::Deleted,
        _ => DependentPhase::NotReady,
    }
}

fn external(object: &ExternalObject) -> RecordedExternal {
    RecordedExternal {
        dependent: object.dependent.clone(),
        key: object.key.clone(),
        id: object.id.clone(),
        object: object.object.clone(),
    }
}

/// A recorded external object, as the guest receives it.
pub(crate) fn external_back(object: &RecordedExternal) -> ExternalObject {
    ExternalObject {
        dependent: object.dependent.clone(),
        key: object.key.clone(),
        id: object.id.clone(),
        object: object.object.clone(),
    }
}

/// The plugin's error as recorded.
pub(crate) fn failure(error: &ReconcileError) -> Failure {
    match error {
        ReconcileError::Transient(m) => Failure::Transient(m.clone()),
        ReconcileError::Permanent(m) => Failure::Permanent(m.clone()),
        ReconcileError::Invalid(m) => Failure::Invalid(m.clone()),
    }
}

/// A recorded error, as the guest receives it (`update-error-status`).
pub(crate) fn failure_back(failure: &Failure) -> ReconcileError {
    match failure {
        Failure::Transient(m) => ReconcileError::Transient(m.clone()),
        Failure::Permanent(m) => ReconcileError::Permanent(m.clone()),
        Failure::Invalid(m) => ReconcileError::Invalid(m.clone()),
    }
}

fn events(events: &[Event]) -> Vec<RecordedEvent> {
    events
        .iter()
        .map(|e| RecordedEvent {
            event_type: match e.event_type {
                EventType::Normal => "Normal",
                EventType::Warning => "Warning",
            }
            .into(),
            reason: e.reason.clone(),
            action: e.action.clone(),
            note: e.note.clone(),
        })
        .collect()
}

/// How an export call ended: `ended` turns what it returned into the ending.
pub(crate) fn ending<T>(
    result: &Result<Result<T, ReconcileError>, CallError>,
    ended: impl FnOnce(&T) -> Ending,
) -> Ending {
    match result {
        Ok(Ok(value)) => ended(value),
        Ok(Err(error)) => Ending::Failed(failure(error)),
        Err(error) => Ending::Trapped(error.to_string()),
    }
}

/// `reconcile`'s outcome as recorded.
pub(crate) fn reconciled(outcome: &Outcome) -> Ending {
    Ending::Reconciled(RecordedOutcome {
        readiness: outcome
            .readiness
            .as_ref()
            .map(|Readiness { ready, message }| RecordedReadiness { ready: *ready, message: message.clone() }),
        status: outcome.status.clone(),
        labels: outcome.labels.clone(),
        annotations: outcome.annotations.clone(),
        reschedule_after_ms: outcome.reschedule_after_ms,
        events: events(&outcome.events),
    })
}

/// `desired`'s objects as recorded.
pub(crate) fn desired(objects: &[DesiredObject]) -> Ending {
    Ending::Desired(
        objects
            .iter()
            .map(|o| RecordedDesired {
                dependent: o.dependent.clone(),
                object: o.object.clone(),
                keep: o.keep,
                key: o.key.clone(),
            })
            .collect(),
    )
}

/// `cleanup`'s outcome as recorded.
pub(crate) fn cleaned_up(outcome: &CleanupOutcome) -> Ending {
    Ending::CleanedUp(RecordedCleanup {
        keep_finalizer: outcome.keep_finalizer,
        reschedule_after_ms: outcome.reschedule_after_ms,
        events: events(&outcome.events),
    })
}

/// `update-error-status`'s status as recorded.
pub(crate) fn error_status(result: &Result<Option<String>, CallError>) -> Ending {
    match result {
        Ok(status) => Ending::ErrorStatus(status.clone()),
        Err(error) => Ending::Trapped(error.to_string()),
    }
}

/// The request of a step of `export` given `request`.
pub(crate) fn step_request(export: &'static str, request: &ReconcileRequest) -> Request {
    let request = self::request(request);
    match export {
        "desired" => Request::Desired(request),
        "cleanup" => Request::Cleanup(request),
        _ => Request::Reconcile(request),
    }
}

/// The request of a step of `apply-external`.
pub(crate) fn apply_request(primary: &str, desired: &ExternalObject, actual: Option<&ExternalObject>) -> Request {
    Request::ApplyExternal { primary: primary.to_owned(), desired: external(desired), actual: actual.map(external) }
}

/// The request of a step of `delete-external`.
pub(crate) fn delete_request(primary: &str, actual: &ExternalObject) -> Request {
    Request::DeleteExternal { primary: primary.to_owned(), actual: external(actual) }
}

/// `apply-external`'s object as recorded.
pub(crate) fn applied(object: &ExternalObject) -> Ending {
    Ending::Applied(external(object))
}
