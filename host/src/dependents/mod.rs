//! Dependent resources (JOSDK's managed dependents and workflows): the plugin says what should
//! exist, the host makes the cluster match with server-side apply, skips what already matches,
//! deletes what is no longer desired, and tells the plugin where each dependent stands.
//!
//! The rules (capability checks, order, skips, pruning, collected errors, readiness) are
//! `wasmop_core::workflow`'s; this module is the host's [`Driver`] of them: the cache, the API
//! server, the own-write records and the plugin's `check` export.
//!
//! Every applied object carries the labels `wasmop.dev/managed-by: <plugin>` and
//! `wasmop.dev/dependent: <name>`, and a controller owner reference to its primary (or, where
//! owner references cannot reach, the primary-name/namespace annotations). Each dependent kind is
//! watched (by that label) like a declared watch, so changes made by others reconcile the
//! primary, and the host finds a primary's dependents through the watch's links in O(1) per
//! object, also after a restart.
//!
//! An object the cache does not know is applied without forcing: if it exists and someone else
//! manages its fields, the API server answers with a conflict, which fails the dependent (and
//! the reconcile, naming the object) unless the dependent adopts (`adopt`), in which case the
//! host applies again with force. Objects the host applied before are always forced back into
//! shape (drift correction, as JOSDK does).

use std::sync::{Arc, RwLock};

use futures::future::BoxFuture;
use kube::api::{Api, ApiResource, DeleteParams, Patch, PatchParams, Preconditions};
use kube::{Client, ResourceExt};
use serde_json::Value;
use wasmop_core::dependent::{DEPENDENT_LABEL, DependentSpec, Desired, Ownership, PrimaryRef};
use wasmop_core::external::ExternalObject;
use wasmop_core::matching;
use wasmop_core::refusal::{self, Persistence};
use wasmop_core::workflow::{self, Driver, State, Workflow, WorkflowError};

use crate::external::{ExternalCalls, Known};
use crate::fence::Unanswered;
use crate::informer::Cache;
use crate::mapping::Links;
use crate::metrics::{Metrics, Verb};
use crate::object::ObjectKey;
pub use crate::own_writes::OwnWrites;
use crate::runtime::bindings::wasmop::plugin::types::{DesiredObject, Mapper, Owners, PluginConfig};
use crate::scheduler::Priority;
use crate::source::Sink;
use crate::wire::{Object, Wire};

pub use wasmop_core::dependent::MANAGED_BY_LABEL;

/// A failed write of a dependent object.
#[derive(Debug, thiserror::Error)]
pub enum WriteFailure {
    /// An API request failed.
    #[error("{what} {key} failed: {}", crate::api_error::describe(source))]
    Api {
        /// What was attempted.
        what: &'static str,
        /// The object.
        key: ObjectKey,
        /// The API error.
        #[source]
        source: Box<kube::Error>,
    },
    /// The object exists and someone else manages it; the dependent does not adopt.
    #[error("{0}")]
    Conflict(String),
    /// The API server refuses the object itself (its shape, [`crate::api_error::persistence`]):
    /// it fails the same way until the plugin desires another object.
    #[error("{0}")]
    Refused(String),
    /// The write was not sent (this replica does not lead), or its answer did not come in time
    /// and it was abandoned.
    #[error("{0}: {1}")]
    Unanswered(ObjectKey, Unanswered),
    /// The plugin's `apply-external` or `delete-external` failed.
    #[error(transparent)]
    External(#[from] crate::external::CallFailure),
}

impl WriteFailure {
    /// Whether the request failed because the API server could not be reached.
    pub fn unreachable(&self) -> bool {
        match self {
            WriteFailure::Api { source, .. } => crate::reachability::unreachable(source),
            WriteFailure::Unanswered(..) => true,
            WriteFailure::Conflict(_) | WriteFailure::Refused(_) | WriteFailure::External(_) => false,
        }
    }

    /// Whether sending the write again cannot help (see [`WriteFailure::Refused`]).
    pub fn permanent(&self) -> bool {
        match self {
            WriteFailure::Refused(_) => true,
            WriteFailure::External(failure) => failure.permanent,
            _ => false,
        }
    }
}

/// Errors of reconciling dependents.
pub type DependentError = WorkflowError<WriteFailure>;

/// One declared dependent kind, with its watch.
pub struct DependentKind {
    /// The resolved API resource.
    pub resource: ApiResource,
    /// The watch's cache.
    pub cache: Cache,
    /// The watch's links to primaries.
    pub links: Arc<RwLock<Links>>,
    /// The host's writes of these objects, whose watch events reconcile nothing.
    pub own: Arc<OwnWrites>,
}

impl DependentKind {
    /// The watch mapper that finds a dependent's primary.
    pub fn mapper(ownership: Ownership) -> Mapper {
        match ownership {
            Ownership::OwnerReference => Mapper::OwnerReferences(Owners::Controller),
            Ownership::Annotations => Mapper::Annotations,
        }
    }
}

/// The primary a reconcile is about.
pub struct Primary<'a> {
    /// The object.
    pub object: &'a Object,
    /// What the workflow knows of it.
    pub reference: PrimaryRef,
}

/// Evaluates a plugin condition: `(name, dependent object JSON)` to whether it holds.
pub type PluginCheck<'a> = &'a (dyn Fn(String, Option<String>) -> BoxFuture<'static, bool> + Send + Sync);

/// The workflow of the dependents `config` declares: its dependents on the cluster, then its
/// external ones, in declaration order. Errors as [`Workflow::new`].
pub fn workflow_of(config: &PluginConfig) -> Result<Workflow, String> {
    let specs = config.dependents.iter().map(DependentSpec::from);
    Workflow::new(specs.chain(config.external_dependents.iter().map(DependentSpec::from)).collect())
}

/// The plugin's `desired` objects with their JSON decoded; the error says which dependent's
/// object is not JSON (the reconcile fails with reason `InvalidDependent`).
pub fn decode_desired(desired: Vec<DesiredObject>) -> Result<Vec<Desired>, String> {
    desired
        .into_iter()
        .map(|d| match serde_json::from_str(&d.object) {
            Ok(object) => Ok(Desired { dependent: d.dependent, object, keep: d.keep, key: d.key }),
            Err(e) => Err(format!("desired object of dependent {:?} is invalid: {e}", d.dependent)),
        })
        .collect()
}

/// Why the host would fail a reconcile of `primary` whose plugin, with `workflow`, desired
/// `desired`, before writing anything: the reason (`InvalidDependent`, `CapabilityDenied`) and
/// the message; `None` when every object is admitted ([`workflow::admit`]).
pub fn refusal(
    workflow: &Workflow,
    primary: &PrimaryRef,
    desired: Vec<DesiredObject>,
) -> Option<(&'static str, String)> {
    let desired = match decode_desired(desired) {
        Ok(desired) => desired,
        Err(message) => return Some(("InvalidDependent", message)),
    };
    let refused = workflow::admit::<std::convert::Infallible>(workflow, primary, desired).err()?;
    Some((refused.reason(), refused.to_string()))
}

/// The dependents of one plugin.
pub struct Dependents {
    client: Client,
    sink: Arc<dyn Sink>,
    metrics: Arc<Metrics>,
    plugin: String,
    manager: String,
    kinds: Vec<DependentKind>,
    workflow: Workflow,
    fence: crate::fence::Fence,
}

impl Dependents {
    /// The dependents `specs` of `plugin` with their `kinds` (in the same order), applied with
    /// field manager `wasmop-<plugin>`; a primary whose dependent someone else changed during a
    /// write is enqueued in `sink`. Errors when the workflow is invalid.
    pub fn new(
        client: Client,
        plugin: &str,
        specs: Vec<DependentSpec>,
        kinds: Vec<DependentKind>,
        metrics: Arc<Metrics>,
        sink: Arc<dyn Sink>,
        fence: crate::fence::Fence,
    ) -> Result<Self, String> {
        let workflow = Workflow::new(specs)?;
        let manager = format!("wasmop-{plugin}");
        Ok(Self { client, sink, metrics, plugin: plugin.to_string(), manager, kinds, workflow, fence })
    }

    /// The workflow of these dependents.
    pub fn workflow(&self) -> &Workflow {
        &self.workflow
    }

    /// Runs the workflow for `primary` with the plugin's `desired` objects; returns every
    /// dependent's state, in declaration order.
    pub async fn reconcile(
        &self,
        primary: &Primary<'_>,
        desired: Vec<Desired>,
        check: PluginCheck<'_>,
        external: Option<&ExternalCalls>,
    ) -> Result<Vec<State<Arc<Object>>>, DependentError> {
        let primary_json = serde_json::to_value(primary.object).unwrap_or(Value::Null);
        let driver = HostDriver { dependents: self, primary, check, external };
        workflow::run(&driver, &self.workflow, &self.plugin, &primary.reference, &primary_json, desired).await
    }

    /// Deletes the dependents the garbage collector will not: those tied by annotations.
    pub async fn delete_annotated(&self, primary: &Primary<'_>) -> Result<(), WriteFailure> {
        let never = |_: String, _: Option<String>| -> BoxFuture<'static, bool> { Box::pin(async { false }) };
        let driver = HostDriver { dependents: self, primary, check: &never, external: None };
        for spec in self.workflow.specs() {
            // External dependents are deleted through the plugin (`ExternalCalls`), not here.
            if spec.external.is_none()
                && spec.ownership(&primary.reference.kind) == Ownership::Annotations
                && !spec.read_only
            {
                for object in driver.current(spec) {
                    driver.delete(spec, &object).await?;
                }
            }
        }
        Ok(())
    }

    fn kind(&self, spec: &DependentSpec) -> &DependentKind {
        let index = self.workflow.specs().iter().position(|s| s.name == spec.name);
        &self.kinds[index.expect("the workflow's specs are the kinds'")]
    }

    /// Someone else changed a dependent while the host wrote it: reconcile its primary again.
    fn reconcile_again_if(&self, foreign: bool, primary: &ObjectKey) {
        if foreign {
            self.sink.enqueue(primary.clone(), Priority::Live);
        }
    }

    fn api(&self, kind: &DependentKind, key: &ObjectKey) -> Api<Wire> {
        match &key.namespace {
            Some(ns) => Api::namespaced_with(self.client.clone(), ns, &kind.resource),
            None => Api::all_with(self.client.clone(), &kind.resource),
        }
    }

    /// Server-side applies `object`, forced or not, inside the fence; the object as written.
    async fn patch(
        &self,
        kind: &DependentKind,
        primary: &ObjectKey,
        key: &ObjectKey,
        object: &Value,
        force: bool,
    ) -> Result<Result<Object, kube::Error>, Unanswered> {
        let mut params = PatchParams::apply(&self.manager);
        params.force = force;
        kind.own.begin(key);
        let request = async {
            self.metrics.wrote(&self.plugin, &kind.resource.kind, Verb::Apply);
            self.api(kind, key).patch(&key.name, &params, &Patch::Apply(object)).await.map(Wire::into_inner)
        };
        let written = self.fence.write(request).await;
        let foreign = match &written {
            Ok(Ok(written)) => kind.own.wrote(key, written.resource_version()),
            _ => kind.own.failed(key),
        };
        self.reconcile_again_if(foreign, primary);
        written
    }
}

/// The host's side of one workflow run.
struct HostDriver<'a> {
    dependents: &'a Dependents,
    primary: &'a Primary<'a>,
    check: PluginCheck<'a>,
    /// The plugin's external calls, when it has external dependents.
    external: Option<&'a ExternalCalls>,
}

impl Driver for HostDriver<'_> {
    type Object = Arc<Object>;
    type Error = WriteFailure;

    fn current(&self, spec: &DependentSpec) -> Vec<Arc<Object>> {
        let kind = self.dependents.kind(spec);
        let primary = &self.primary.reference;
        let keys = kind.links.read().expect("never poisoned").secondaries_of(&primary.key, Some(&primary.uid));
        let mut objects: Vec<_> = keys
            .iter()
            .filter_map(|key| kind.cache.get(key))
            .filter(|o| spec.read_only || o.labels().get(DEPENDENT_LABEL) == Some(&spec.name))
            .collect();
        objects.sort_by_key(|o| (o.namespace(), o.name_any()));
        objects
    }

    fn cached(&self, spec: &DependentSpec, key: &ObjectKey) -> Option<Arc<Object>> {
        self.dependents.kind(spec).cache.get(key)
    }

    fn key(&self, object: &Arc<Object>) -> Option<ObjectKey> {
        crate::object::key_of(object)
    }

    fn json(&self, object: &Arc<Object>) -> Value {
        serde_json::to_value(&**object).unwrap_or(Value::Null)
    }

    fn observe(&self, spec: &DependentSpec, keys: &[ObjectKey]) {
        // A change of a named object reconciles the primary.
        let links = &self.dependents.kind(spec).links;
        links.write().expect("never poisoned").primary_changed(&self.primary.reference.key, keys.to_vec());
    }

    /// Applies `object` unless the cached object already matches it.
    async fn apply(
        &self,
        spec: &DependentSpec,
        key: &ObjectKey,
        object: Value,
        actual: Option<Arc<Object>>,
    ) -> Result<Arc<Object>, WriteFailure> {
        let dependents = self.dependents;
        let kind = dependents.kind(spec);
        if let Some(actual) = &actual
            && let Ok(actual_json) = serde_json::to_value(&**actual)
            && matching::matches(&object, &actual_json, &dependents.manager)
        {
            return Ok(actual.clone());
        }
        let primary = &self.primary.reference.key;
        // The cache holds only objects the host applied: those are forced back into shape. An
        // unknown one may exist, managed by someone else: that needs `adopt`.
        let known = actual.is_some();
        let written = match dependents.patch(kind, primary, key, &object, known || spec.adopt).await {
            Ok(written) => written,
            Err(unanswered) => return Err(WriteFailure::Unanswered(key.clone(), unanswered)),
        };
        if let Err(kube::Error::Api(status)) = &written
            && status.code == 409
            && !known
        {
            dependents.metrics.conflict(&dependents.plugin);
            return Err(WriteFailure::Conflict(workflow::conflict(spec, key)));
        }
        if let Err(err @ kube::Error::Api(status)) = &written
            && crate::api_error::persistence(err) == Persistence::Permanent
        {
            let message = refusal::refused(&kind.resource.kind, &key.to_string(), &status.message);
            return Err(WriteFailure::Refused(message));
        }
        let mut written = written.map_err(|source| WriteFailure::Api {
            what: "applying",
            key: key.clone(),
            source: Box::new(source),
        })?;
        tracing::debug!(plugin = dependents.plugin, dependent = spec.name, object = %key, "applied");
        keep_own_managed_fields(&mut written, &dependents.manager);
        kind.cache.wrote(written.clone(), actual.and_then(|a| a.resource_version()));
        Ok(Arc::new(written))
    }

    async fn delete(&self, spec: &DependentSpec, object: &Arc<Object>) -> Result<(), WriteFailure> {
        let dependents = self.dependents;
        let kind = dependents.kind(spec);
        let Some(key) = crate::object::key_of(object) else { return Ok(()) };
        let params = delete_params(object);
        kind.own.begin(&key);
        let request = async {
            dependents.metrics.wrote(&dependents.plugin, &kind.resource.kind, Verb::Delete);
            dependents.api(kind, &key).delete(&key.name, &params).await
        };
        let deleted = match dependents.fence.write(request).await {
            Err(unanswered) => Err(WriteFailure::Unanswered(key.clone(), unanswered)),
            Ok(Ok(_)) => Ok(()),
            Ok(Err(kube::Error::Api(status))) if status.code == 404 => Ok(()),
            // A precondition that failed (409) is retried by a new run, with the object as the
            // cache then holds it.
            Ok(Err(source)) => Err(WriteFailure::Api { what: "deleting", key: key.clone(), source: Box::new(source) }),
        };
        let foreign = if deleted.is_ok() { kind.own.deleted(&key) } else { kind.own.failed(&key) };
        dependents.reconcile_again_if(foreign, &self.primary.reference.key);
        deleted?;
        tracing::debug!(plugin = dependents.plugin, dependent = spec.name, object = %key, "deleted");
        kind.cache.deleted(key, object.resource_version());
        Ok(())
    }

    async fn check(&self, name: &str, object: Option<&Value>) -> bool {
        (self.check)(name.to_string(), object.map(Value::to_string)).await
    }

    fn is_conflict(&self, error: &WriteFailure) -> bool {
        matches!(error, WriteFailure::Conflict(_))
    }

    fn fetched(&self, spec: &DependentSpec) -> Vec<ExternalObject> {
        let Some(external) = self.external else { return Vec::new() };
        match external.state.known(&external.key) {
            Known::Objects(objects) => objects.into_iter().filter(|o| o.dependent == spec.name).collect(),
            Known::Unknown | Known::Failed(_) => Vec::new(),
        }
    }

    async fn apply_external(
        &self,
        spec: &DependentSpec,
        desired: ExternalObject,
        actual: Option<ExternalObject>,
    ) -> Result<ExternalObject, WriteFailure> {
        let external = self.external.ok_or_else(|| no_external(spec))?;
        Ok(external.apply(desired, actual).await?)
    }

    async fn delete_external(&self, spec: &DependentSpec, actual: &ExternalObject) -> Result<(), WriteFailure> {
        let external = self.external.ok_or_else(|| no_external(spec))?;
        Ok(external.delete(actual).await?)
    }
}

/// A workflow with an external dependent ran without the plugin's external calls: a host bug.
fn no_external(spec: &DependentSpec) -> WriteFailure {
    WriteFailure::Refused(format!("external dependent {:?} cannot be reconciled here", spec.name))
}

/// How the host deletes `object`: in the background (the garbage collector takes its own
/// dependents), and only if it is still the object the host read, not one made anew under its
/// name, and as it was read: a delete that waited cannot remove what changed meanwhile.
fn delete_params(object: &Object) -> DeleteParams {
    let preconditions = Preconditions { uid: object.uid(), resource_version: object.resource_version() };
    DeleteParams { preconditions: Some(preconditions), ..DeleteParams::background() }
}

/// Drops every managedFields entry but the host's own Apply entry, as the caches keep them.
pub fn keep_own_managed_fields(object: &mut Object, manager: &str) {
    if let Some(fields) = object.metadata.managed_fields.as_mut() {
        fields.retain(|f| f.manager.as_deref() == Some(manager) && f.operation.as_deref() == Some("Apply"));
    }
}

#[cfg(test)]
mod tests {
    use kube::api::GroupVersionKind;

    use super::*;

    #[test]
    fn a_delete_names_the_uid_and_the_version_the_host_read() {
        let resource = ApiResource::from_gvk(&GroupVersionKind::gvk("", "v1", "ConfigMap"));
        let mut object = Object::new("a", &resource).within("ns");
        object.metadata.uid = Some("u-1".into());
        object.metadata.resource_version = Some("42".into());
        let params = delete_params(&object);
        let preconditions = params.preconditions.expect("preconditions");
        assert_eq!(
            (preconditions.uid.as_deref(), preconditions.resource_version.as_deref()),
            (Some("u-1"), Some("42"))
        );
        assert_eq!(params.propagation_policy, DeleteParams::background().propagation_policy);
    }
}
