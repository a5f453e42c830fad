//! A compiled plugin as the plugin side ([`Guest`]) of `wasmop_core::settle`'s loop: each export
//! called as the host calls it, its `get`, `list` and `secondaries` imports answered from the
//! fixture's objects ([`View`]).

use std::sync::Arc;

use futures::future::{BoxFuture, FutureExt};
use serde_json::Value;
use wasmop_core::KindRef;
use wasmop_core::dependent::Desired;
use wasmop_core::predicate::EventKind;
use wasmop_core::settle::{Event, Failure, Guest, Outcome, View};

use crate::runtime::bindings::wasmop::plugin::types;
use crate::runtime::{CacheReader, CallError, GetResult, ListResult, Module};

/// The fixture's objects as the component's host imports read them.
struct Reads(View);

impl CacheReader for Reads {
    fn get<'a>(
        &'a self,
        kind: &'a types::KindRef,
        namespace: Option<&'a str>,
        name: &'a str,
    ) -> BoxFuture<'a, GetResult> {
        futures::future::ready(self.0.get(&kind.into(), namespace, name)).boxed()
    }

    fn list<'a>(
        &'a self,
        kind: &'a types::KindRef,
        namespace: Option<&'a str>,
        selector: Option<&'a str>,
    ) -> BoxFuture<'a, ListResult> {
        futures::future::ready(self.0.list(&kind.into(), namespace, selector)).boxed()
    }

    fn secondaries<'a>(&'a self, kind: &'a types::KindRef) -> BoxFuture<'a, ListResult> {
        futures::future::ready(self.0.secondaries(&kind.into())).boxed()
    }
}

/// A compiled plugin as the loop's plugin side: each export called as the host calls it (on an
/// instance kept from an earlier call, or a fresh one), on a runtime of its own.
pub struct Component<'m> {
    pub(super) module: &'m Module,
    pub(super) runtime: tokio::runtime::Runtime,
}

impl<'m> Component<'m> {
    /// Calls `module`'s exports; blocks the thread for each call (do not call it from a tokio
    /// runtime's thread).
    pub fn new(module: &'m Module) -> std::io::Result<Self> {
        Ok(Self { module, runtime: tokio::runtime::Builder::new_current_thread().enable_all().build()? })
    }

    fn reads(view: &View) -> Arc<dyn CacheReader> {
        Arc::new(Reads(view.clone()))
    }
}

/// A call that trapped or ran out of its limits, as the host counts it: a failure it retries.
fn trapped(export: &str, error: CallError) -> Failure {
    Failure::Transient(format!("the plugin's {export} failed: {error}"))
}

fn failure(error: types::ReconcileError) -> Failure {
    match error {
        types::ReconcileError::Transient(m) => Failure::Transient(m),
        types::ReconcileError::Permanent(m) => Failure::Permanent(m),
        types::ReconcileError::Invalid(m) => Failure::Invalid(m),
    }
}

fn reconcile_error(failure: &Failure) -> types::ReconcileError {
    match failure.clone() {
        Failure::Transient(m) => types::ReconcileError::Transient(m),
        Failure::Permanent(m) => types::ReconcileError::Permanent(m),
        Failure::Invalid(m) => types::ReconcileError::Invalid(m),
    }
}

/// The request of a call on `primary`, with what `view` holds of its dependents and external
/// state.
fn request(view: &View, primary: &str) -> types::ReconcileRequest {
    types::ReconcileRequest {
        object: primary.to_owned(),
        attempt: 0,
        last_attempt: false,
        dependents: view
            .dependents
            .iter()
            .map(|d| types::DependentState {
                name: d.name.clone(),
                phase: d.phase.into(),
                objects: d.objects.iter().map(Value::to_string).collect(),
            })
            .collect(),
        external: view
            .external
            .iter()
            .map(|o| types::ExternalObject {
                dependent: o.dependent.clone(),
                key: o.key.clone(),
                id: o.id.clone(),
                object: o.object.to_string(),
            })
            .collect(),
        inbound: view.inbound.as_ref().map(Value::to_string),
    }
}

fn outcome(outcome: types::Outcome) -> Result<Outcome, Failure> {
    let status = outcome
        .status
        .map(|s| serde_json::from_str(&s))
        .transpose()
        .map_err(|e| Failure::Permanent(format!("the status the plugin returned is not JSON: {e}")))?;
    Ok(Outcome {
        readiness: outcome.readiness.map(|r| (r.ready, r.message)),
        status,
        labels: outcome.labels,
        annotations: outcome.annotations,
        reschedule_after_ms: outcome.reschedule_after_ms,
        events: outcome
            .events
            .into_iter()
            .map(|e| Event {
                event_type: match e.event_type {
                    types::EventType::Normal => "Normal".into(),
                    types::EventType::Warning => "Warning".into(),
                },
                reason: e.reason,
                action: e.action,
                note: e.note,
            })
            .collect(),
    })
}

impl Guest for Component<'_> {
    fn desired(&self, view: &View, primary: &str) -> Result<Vec<Desired>, Failure> {
        let request = request(view, primary);
        let call = self.module.desired(Self::reads(view), &request);
        let desired = self.runtime.block_on(call).map_err(|e| trapped("desired", e))?.map_err(failure)?;
        desired
            .into_iter()
            .map(|d| match serde_json::from_str(&d.object) {
                Ok(object) => Ok(Desired { dependent: d.dependent, object, keep: d.keep, key: d.key }),
                Err(e) => {
                    Err(Failure::Permanent(format!("desired object of dependent {:?} is invalid: {e}", d.dependent)))
                }
            })
            .collect()
    }

    fn reconcile(&self, view: &View, primary: &str) -> Result<Outcome, Failure> {
        let request = request(view, primary);
        let call = self.module.reconcile(Self::reads(view), &request);
        outcome(self.runtime.block_on(call).map_err(|e| trapped("reconcile", e))?.map_err(failure)?)
    }

    fn error_status(&self, view: &View, primary: &str, failure: &Failure) -> Option<Value> {
        let (request, error) = (request(view, primary), reconcile_error(failure));
        let call = self.module.update_error_status(Self::reads(view), &request, &error);
        let status = self.runtime.block_on(call).ok().flatten()?;
        serde_json::from_str(&status).ok()
    }

    fn check(&self, view: &View, name: &str, primary: &str, dependent: Option<&str>) -> bool {
        let call = self.module.check(Self::reads(view), name, primary, dependent);
        self.runtime.block_on(call).unwrap_or(false)
    }

    fn map_secondary(&self, view: &View, secondary: &str) -> Result<Vec<(Option<String>, String)>, String> {
        let call = self.module.map_secondary(Self::reads(view), secondary, None);
        let refs = self.runtime.block_on(call).map_err(|e| e.to_string())??;
        Ok(refs.into_iter().map(|r| (r.namespace, r.name)).collect())
    }

    fn secondaries_of(&self, view: &View, primary: &str) -> Result<Vec<(KindRef, Option<String>, String)>, String> {
        let call = self.module.secondaries_of(Self::reads(view), primary);
        let refs = self.runtime.block_on(call).map_err(|e| e.to_string())??;
        Ok(refs.into_iter().map(|r| ((&r.kind).into(), r.namespace, r.name)).collect())
    }

    fn filter(&self, name: &str, event: EventKind, object: &Value, old: Option<&Value>) -> bool {
        let (object, old) = (object.to_string(), old.map(Value::to_string));
        let call = self.module.filter(name, event.into(), &object, old.as_deref());
        // A plugin that cannot answer admits the change, as in the host.
        self.runtime.block_on(call).unwrap_or(true)
    }
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;
    use crate::harness::tests::kind;
    use crate::runtime::bindings;

    #[test]
    fn reads_refuse_kinds_the_plugin_does_not_declare() {
        let spec = super::super::spec(&bindings::test_config("Thing")).unwrap();
        let config_map = json!({ "metadata": { "name": "c", "namespace": "ns" } });
        let view = View {
            caches: wasmop_core::settle::Caches::new(&spec),
            objects: vec![((&kind("ConfigMap")).into(), config_map)],
            secondaries: Vec::new(),
            dependents: Vec::new(),
            external: Vec::new(),
            inbound: None,
        };
        let reads = Reads(view);
        let refused = futures::executor::block_on(reads.get(&kind("ConfigMap"), Some("ns"), "c")).unwrap_err();
        assert!(refused.contains("v1/ConfigMap is not watched by this plugin (p)"), "{refused}");
        let secondaries = futures::executor::block_on(reads.secondaries(&kind("ConfigMap"))).unwrap_err();
        assert!(secondaries.contains("only watched and dependent kinds"), "{secondaries}");
    }
}
