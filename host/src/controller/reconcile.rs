//! One reconcile of one primary: read it from the cache, call the plugin in its sandbox, and
//! carry out the outcome.

use std::sync::Arc;
use std::time::Duration;

use kube::api::{ApiResource, DynamicObject};
use kube::runtime::events::EventType;
use kube::runtime::reflector::{ObjectRef, Store};
use tracing::Instrument;

use crate::informer::WatchedCache;
use crate::object::ObjectKey;
use crate::runtime::bindings::wasmop::plugin::types::{self, Outcome, ReconcileError, ReconcileRequest};
use crate::runtime::{CacheReader, CallError, Module};
use crate::scheduler::{Run, Verdict};
use crate::writer::Writer;

/// Everything a reconcile of one plugin's primaries needs; shared by all its runs.
pub(crate) struct Reconciler {
    pub(crate) module: Arc<Module>,
    pub(crate) resource: ApiResource,
    pub(crate) store: Store<DynamicObject>,
    pub(crate) cache: Arc<WatchedCache>,
    pub(crate) writer: Writer,
}

impl Reconciler {
    /// Runs one scheduled reconcile and tells the scheduler how it went.
    pub(crate) async fn run(self: Arc<Self>, run: Run<ObjectKey>) -> Verdict {
        // The controller starts the scheduler only once the cache is synced.
        let mut reference = ObjectRef::new_with(&run.key.name, self.resource.clone());
        if let Some(ns) = &run.key.namespace {
            reference = reference.within(ns);
        }
        // Deleted meanwhile: nothing to do, and nothing to complain about.
        let Some(object) = self.store.get(&reference) else { return Verdict::Done { requeue_after: None } };
        let meta = &object.metadata;
        let span = tracing::info_span!(
            "reconcile",
            plugin = self.module.name(),
            "resource.apiVersion" = %self.resource.api_version,
            "resource.kind" = %self.resource.kind,
            "resource.namespace" = meta.namespace.as_deref().unwrap_or(""),
            "resource.name" = %run.key.name,
            "resource.generation" = meta.generation.unwrap_or_default(),
            "resource.resourceVersion" = meta.resource_version.as_deref().unwrap_or(""),
            "resource.uid" = meta.uid.as_deref().unwrap_or(""),
            attempt = run.attempt,
        );
        self.reconcile(run, object).instrument(span).await
    }

    async fn reconcile(&self, run: Run<ObjectKey>, object: Arc<DynamicObject>) -> Verdict {
        let request = match serde_json::to_string(&*object) {
            Ok(json) => {
                Arc::new(ReconcileRequest { object: json, attempt: run.attempt, last_attempt: run.last_attempt })
            }
            Err(err) => {
                tracing::error!(object = %run.key, %err, "cannot serialize the primary");
                return Verdict::Failed { retry: false };
            }
        };
        let view: Arc<dyn CacheReader> = Arc::new(self.cache.for_primary(run.key.clone(), object.metadata.uid.clone()));
        let started = std::time::Instant::now();
        let called =
            self.call(view.clone(), request.clone(), |module, cache, request| module.reconcile(cache, request)).await;
        let elapsed = started.elapsed();
        let (error, reason, retry) = match called {
            Ok(Ok(outcome)) => {
                tracing::debug!(?elapsed, "plugin returned");
                return self.apply(&run.key, &object, outcome).await;
            }
            Ok(Err(error)) => {
                let (reason, retry) = match &error {
                    ReconcileError::Transient(_) => ("ReconcileFailed", true),
                    ReconcileError::Permanent(_) => ("ReconcileFailed", false),
                    ReconcileError::Invalid(_) => ("InvalidResource", false),
                };
                (error, reason, retry)
            }
            // Traps (deadline, memory, panic) are transient: the next attempt gets a fresh sandbox.
            Err(trap) => (ReconcileError::Transient(trap), "ReconcileFailed", true),
        };
        let message = match &error {
            ReconcileError::Transient(m) | ReconcileError::Permanent(m) | ReconcileError::Invalid(m) => m.clone(),
        };
        tracing::warn!(object = %run.key, reason, retry, ?elapsed, "reconcile failed: {message}");
        let note = format!("reconcile of {} failed: {message}", run.key);
        self.writer.publish(&object, EventType::Warning, reason, "Reconcile", Some(note)).await;
        if !retry || run.last_attempt {
            self.update_error_status(&run.key, view, request, error).await;
        }
        Verdict::Failed { retry }
    }

    /// Runs a plugin export on the blocking pool, inside the current span. A trap or a failed
    /// task becomes an error message.
    async fn call<R: Send + 'static>(
        &self,
        cache: Arc<dyn CacheReader>,
        request: Arc<ReconcileRequest>,
        f: impl FnOnce(&Module, Arc<dyn CacheReader>, &ReconcileRequest) -> Result<R, CallError> + Send + 'static,
    ) -> Result<R, String> {
        let module = self.module.clone();
        let span = tracing::Span::current();
        match tokio::task::spawn_blocking(move || span.in_scope(|| f(&module, cache, &request))).await {
            Ok(Ok(value)) => Ok(value),
            Ok(Err(trap)) => Err(trap.to_string()),
            Err(join) => Err(format!("the reconcile task failed: {join}")),
        }
    }

    /// No retry follows a failure: let the plugin put the error on the status
    /// (JOSDK's ErrorStatusHandler).
    async fn update_error_status(
        &self,
        key: &ObjectKey,
        view: Arc<dyn CacheReader>,
        request: Arc<ReconcileRequest>,
        error: ReconcileError,
    ) {
        let update = move |module: &Module, cache, request: &ReconcileRequest| {
            module.update_error_status(cache, request, &error)
        };
        match self.call(view, request, update).await {
            Ok(Some(status)) => {
                if let Err(err) = self.writer.patch_status(key, &status).await {
                    tracing::warn!(object = %key, %err, "cannot write the error status");
                }
            }
            Ok(None) => {}
            Err(err) => tracing::warn!(object = %key, %err, "update-error-status failed"),
        }
    }

    /// Carries out a successful outcome.
    async fn apply(&self, key: &ObjectKey, object: &DynamicObject, outcome: Outcome) -> Verdict {
        if let Some(status) = &outcome.status
            && let Err(err) = self.writer.patch_status(key, status).await
        {
            tracing::warn!(object = %key, %err, "status update failed; will retry");
            return Verdict::Failed { retry: true };
        }
        for event in outcome.events {
            let type_ = match event.event_type {
                types::EventType::Normal => EventType::Normal,
                types::EventType::Warning => EventType::Warning,
            };
            self.writer.publish(object, type_, &event.reason, &event.action, event.note).await;
        }
        let requeue_after = outcome.reschedule_after_ms.map(Duration::from_millis);
        tracing::info!(?requeue_after, "reconciled");
        Verdict::Done { requeue_after }
    }
}
