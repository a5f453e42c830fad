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
use crate::runtime::{CacheReader, Module};
use crate::scheduler::{Run, Verdict};
use crate::writer::Writer;

/// Everything a reconcile of one plugin's primaries needs; shared by all its runs.
pub(crate) struct Reconciler {
    pub(crate) module: Arc<Module>,
    pub(crate) resource: ApiResource,
    pub(crate) store: Store<DynamicObject>,
    pub(crate) cache: Arc<WatchedCache>,
    pub(crate) writer: Writer,
    /// Reconcile at least this often; `None` is off.
    pub(crate) max_interval: Option<Duration>,
}

impl Reconciler {
    /// Runs one scheduled reconcile and tells the scheduler how it went.
    pub(crate) async fn run(self: Arc<Self>, run: Run<ObjectKey>) -> Verdict {
        // The cache is synced before the first reconcile.
        if self.store.wait_until_ready().await.is_err() {
            return Verdict::Failed { retry: true };
        }
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
            Ok(json) => ReconcileRequest { object: json, attempt: run.attempt, last_attempt: run.last_attempt },
            Err(err) => {
                tracing::error!(object = %run.key, %err, "cannot serialize the primary");
                return Verdict::Failed { retry: false };
            }
        };
        let module = self.module.clone();
        let cache: Arc<dyn CacheReader> = self.cache.clone();
        let span = tracing::Span::current();
        let started = std::time::Instant::now();
        let called = tokio::task::spawn_blocking(move || span.in_scope(|| module.reconcile(cache, &request))).await;
        let elapsed = started.elapsed();
        let outcome = match called {
            Ok(Ok(Ok(outcome))) => outcome,
            Ok(Ok(Err(error))) => return self.plugin_failed(&run.key, &object, error).await,
            Ok(Err(trap)) => {
                tracing::error!(object = %run.key, error = %trap, ?elapsed, "reconcile failed in the sandbox");
                let note = format!("reconcile of {} failed: {trap}", run.key);
                self.writer.publish(&object, EventType::Warning, "ReconcileFailed", "Reconcile", Some(note)).await;
                return Verdict::Failed { retry: true };
            }
            Err(join) => {
                tracing::error!(object = %run.key, error = %join, "reconcile task failed");
                return Verdict::Failed { retry: true };
            }
        };
        tracing::debug!(?elapsed, "plugin returned");
        self.apply(&run.key, &object, outcome).await
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
        let requested = outcome.reschedule_after_ms.map(Duration::from_millis);
        let requeue_after = match (requested, self.max_interval) {
            (Some(a), Some(b)) => Some(a.min(b)),
            (a, b) => a.or(b),
        };
        tracing::info!(?requeue_after, "reconciled");
        Verdict::Done { requeue_after }
    }

    /// Reports an error the plugin returned.
    async fn plugin_failed(&self, key: &ObjectKey, object: &DynamicObject, error: ReconcileError) -> Verdict {
        let (reason, message, retry) = match error {
            ReconcileError::Transient(m) => ("ReconcileFailed", m, true),
            ReconcileError::Permanent(m) => ("ReconcileFailed", m, false),
            ReconcileError::Invalid(m) => ("InvalidResource", m, false),
        };
        tracing::warn!(object = %key, reason, retry, "plugin returned an error: {message}");
        self.writer.publish(object, EventType::Warning, reason, "Reconcile", Some(message)).await;
        Verdict::Failed { retry }
    }
}
