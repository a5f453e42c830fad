//! Dependent resources (JOSDK's managed dependents and workflows): the plugin says what should
//! exist, the host makes the cluster match with server-side apply, skips what already matches,
//! deletes what is no longer desired, and tells the plugin where each dependent stands.
//!
//! Every applied object carries the labels `wasmop.dev/managed-by: <plugin>` and
//! `wasmop.dev/dependent: <name>`, and a controller owner reference to its primary (or, where
//! owner references cannot reach, the primary-name/namespace annotations). Each dependent kind is
//! watched (by that label) like a declared watch, so changes made by others reconcile the
//! primary, and the host finds a primary's dependents through the watch's links in O(1) per
//! object, also after a restart.
//!
//! A plugin writes only what it declares (`capability`): every desired object is checked against
//! its dependent's declared kind and its primary's namespace before the first write of a
//! reconcile, and one refused object fails the reconcile with nothing written.

mod capability;
pub mod condition;
pub mod matching;
pub mod workflow;

use std::collections::{HashMap, HashSet};
use std::sync::{Arc, RwLock};

use futures::future::BoxFuture;
use kube::api::{Api, ApiResource, DeleteParams, DynamicObject, Patch, PatchParams};
use kube::{Client, ResourceExt};
use serde_json::{Value, json};

use crate::informer::Cache;
use crate::mapping::{Links, PRIMARY_NAME_ANNOTATION, PRIMARY_NAMESPACE_ANNOTATION};
use crate::metrics::{Metrics, Verb};
use crate::object::ObjectKey;
pub use crate::own_writes::OwnWrites;
use crate::runtime::bindings::wasmop::plugin::types::{
    Dependent, DependentPhase, DependentState, DesiredObject, Mapper, Owners, Ownership,
};
use crate::scheduler::Priority;
use crate::source::Sink;
use workflow::{Step, Workflow};

/// The label naming the plugin that manages an object.
pub const MANAGED_BY_LABEL: &str = "wasmop.dev/managed-by";
/// The label naming the dependent an object belongs to.
pub const DEPENDENT_LABEL: &str = "wasmop.dev/dependent";

/// Errors of reconciling dependents.
#[derive(Debug, thiserror::Error)]
pub enum DependentError {
    /// The plugin's desired object is unusable.
    #[error("desired object of dependent {dependent:?} is invalid: {reason}")]
    InvalidDesired {
        /// The dependent.
        dependent: String,
        /// What is wrong.
        reason: String,
    },
    /// The plugin asked for a write it is not allowed to make (`capability`): an object of a
    /// dependent it did not declare, of another kind than the dependent's declared one, or in
    /// another namespace than its primary's. Nothing of that reconcile was written.
    #[error("plugin {plugin:?} may not write {reason}")]
    Undeclared {
        /// The plugin.
        plugin: String,
        /// The dependent the plugin named.
        dependent: String,
        /// The refused object and why, e.g.
        /// `v1/Secret "x": dependent "bulk" is declared as v1/ConfigMap`.
        reason: String,
    },
    /// An API request failed.
    #[error("{what} {key} failed: {source}")]
    Api {
        /// What was attempted.
        what: &'static str,
        /// The object.
        key: ObjectKey,
        /// The API error.
        #[source]
        source: Box<kube::Error>,
    },
}

impl DependentError {
    /// Whether the request failed because the API server could not be reached.
    pub fn unreachable(&self) -> bool {
        matches!(self, DependentError::Api { source, .. } if crate::reachability::unreachable(source))
    }
}

/// One declared dependent, with its watch.
pub struct DependentKind {
    /// What the plugin declared.
    pub spec: Dependent,
    /// The resolved API resource.
    pub resource: ApiResource,
    /// The watch's cache.
    pub cache: Cache,
    /// The watch's links to primaries.
    pub links: Arc<RwLock<Links>>,
    /// How the objects point at their primary.
    pub ownership: Ownership,
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
    pub object: &'a DynamicObject,
    /// Its key.
    pub key: &'a ObjectKey,
    /// Its API resource.
    pub resource: &'a ApiResource,
}

/// Evaluates a plugin condition: `(name, dependent object JSON)` to whether it holds.
pub type PluginCheck<'a> = &'a (dyn Fn(String, Option<String>) -> BoxFuture<'static, bool> + Send + Sync);

/// The dependents of one plugin.
pub struct Dependents {
    client: Client,
    sink: Arc<dyn Sink>,
    metrics: Arc<Metrics>,
    plugin: String,
    params: PatchParams,
    kinds: Vec<DependentKind>,
    workflow: Workflow,
}

impl Dependents {
    /// The dependents `kinds` of `plugin`, applied with field manager `wasmop-<plugin>`; a
    /// primary whose dependent someone else changed during a write is enqueued in `sink`.
    /// Errors when the workflow is invalid.
    pub fn new(
        client: Client,
        plugin: &str,
        kinds: Vec<DependentKind>,
        metrics: Arc<Metrics>,
        sink: Arc<dyn Sink>,
    ) -> Result<Self, String> {
        let specs: Vec<Dependent> = kinds.iter().map(|k| k.spec.clone()).collect();
        let workflow = Workflow::new(&specs)?;
        let params = PatchParams::apply(&format!("wasmop-{plugin}")).force();
        Ok(Self { client, sink, metrics, plugin: plugin.to_string(), params, kinds, workflow })
    }

    /// The field manager of the plugin's writes.
    fn manager(&self) -> &str {
        self.params.field_manager.as_deref().unwrap_or_default()
    }

    /// Runs the workflow for `primary` with the plugin's `desired` objects; returns every
    /// dependent's state, in declaration order.
    pub async fn reconcile(
        &self,
        primary: &Primary<'_>,
        desired: Vec<DesiredObject>,
        check: PluginCheck<'_>,
    ) -> Result<Vec<DependentState>, DependentError> {
        // Every object is checked before the first write, so a refused one leaves the cluster
        // as it was.
        let mut wanted: HashMap<String, Vec<Value>> = HashMap::new();
        for d in desired {
            let undeclared = |reason: String| DependentError::Undeclared {
                plugin: self.plugin.clone(),
                dependent: d.dependent.clone(),
                reason,
            };
            let Some(kind) = self.kinds.iter().find(|k| k.spec.name == d.dependent) else {
                return Err(undeclared(format!(
                    "objects of dependent {:?}: no dependent of that name is declared",
                    d.dependent
                )));
            };
            let invalid = |reason: String| DependentError::InvalidDesired { dependent: d.dependent.clone(), reason };
            let object: Value = serde_json::from_str(&d.object).map_err(|e| invalid(e.to_string()))?;
            if !object.is_object() {
                return Err(invalid("not a JSON object".into()));
            }
            capability::check(&kind.spec, kind.ownership, primary.key.namespace.as_deref(), &object)
                .map_err(undeclared)?;
            self.key_of(kind, primary, &object)?;
            wanted.entry(d.dependent).or_default().push(object);
        }
        let primary_json = serde_json::to_value(primary.object).unwrap_or(Value::Null);
        let mut phases: HashMap<String, DependentPhase> = HashMap::new();
        let mut states: Vec<Option<DependentState>> = (0..self.kinds.len()).map(|_| None).collect();
        for &i in self.workflow.order() {
            let kind = &self.kinds[i];
            let precondition = match &kind.spec.reconcile_when {
                None => None,
                Some(c) => Some(match condition::holds(c, &primary_json) {
                    Some(holds) => holds,
                    None => check(plugin_condition(c), None).await,
                }),
            };
            let (phase, objects) = match workflow::step(&kind.spec, &phases, precondition) {
                Step::Skip => (DependentPhase::Skipped, self.current(kind, primary)),
                // Read-only dependents are never written, nor deleted.
                Step::Delete if kind.spec.read_only => (DependentPhase::Skipped, Vec::new()),
                Step::Delete => {
                    for object in self.current(kind, primary) {
                        self.delete(kind, primary.key, &object).await?;
                    }
                    (DependentPhase::Deleted, Vec::new())
                }
                Step::Reconcile => {
                    let desired = wanted.remove(&kind.spec.name).unwrap_or_default();
                    let objects = if kind.spec.read_only {
                        self.observe(kind, primary, &desired)?
                    } else {
                        self.apply_all(kind, primary, desired).await?
                    };
                    let ready = self.ready(kind, &objects, check).await;
                    (if ready { DependentPhase::Ready } else { DependentPhase::NotReady }, objects)
                }
            };
            phases.insert(kind.spec.name.clone(), phase);
            let objects = objects.iter().filter_map(|o| serde_json::to_string(&**o).ok()).collect();
            states[i] = Some(DependentState { name: kind.spec.name.clone(), phase, objects });
        }
        Ok(states.into_iter().flatten().collect())
    }

    /// Deletes the dependents the garbage collector will not: those tied by annotations.
    pub async fn delete_annotated(&self, primary: &Primary<'_>) -> Result<(), DependentError> {
        for kind in self.kinds.iter().filter(|k| k.ownership == Ownership::Annotations && !k.spec.read_only) {
            for object in self.current(kind, primary) {
                self.delete(kind, primary.key, &object).await?;
            }
        }
        Ok(())
    }

    /// The objects of `kind` that belong to `primary`, from the cache.
    fn current(&self, kind: &DependentKind, primary: &Primary<'_>) -> Vec<Arc<DynamicObject>> {
        let keys =
            kind.links.read().expect("never poisoned").secondaries_of(primary.key, primary.object.uid().as_deref());
        let mut objects: Vec<_> = keys
            .iter()
            .filter_map(|key| kind.cache.get(key))
            .filter(|o| kind.spec.read_only || o.labels().get(DEPENDENT_LABEL) == Some(&kind.spec.name))
            .collect();
        objects.sort_by_key(|o| (o.namespace(), o.name_any()));
        objects
    }

    /// Read-only dependents: the named objects as cached; their watch maps them back to this
    /// primary from now on.
    fn observe(
        &self,
        kind: &DependentKind,
        primary: &Primary<'_>,
        desired: &[Value],
    ) -> Result<Vec<Arc<DynamicObject>>, DependentError> {
        let mut objects = Vec::new();
        let mut keys = Vec::with_capacity(desired.len());
        for d in desired {
            let key = self.key_of(kind, primary, d)?;
            objects.extend(kind.cache.get(&key));
            keys.push(key);
        }
        // A change of a named object reconciles the primary.
        kind.links.write().expect("never poisoned").primary_changed(primary.key, keys);
        Ok(objects)
    }

    /// Applies every desired object that does not match the cluster, then deletes this
    /// primary's objects of `kind` that are no longer desired.
    async fn apply_all(
        &self,
        kind: &DependentKind,
        primary: &Primary<'_>,
        desired: Vec<Value>,
    ) -> Result<Vec<Arc<DynamicObject>>, DependentError> {
        let mut applied = Vec::with_capacity(desired.len());
        let mut keep = HashSet::new();
        for d in desired {
            let (key, object) = self.prepare(kind, primary, d)?;
            keep.insert(key.clone());
            applied.push(self.apply(kind, primary.key, &key, &object).await?);
        }
        for stale in self.current(kind, primary) {
            if ObjectKey::of(&stale).is_some_and(|k| !keep.contains(&k)) {
                self.delete(kind, primary.key, &stale).await?;
            }
        }
        Ok(applied)
    }

    /// Applies `object` unless the cached object already matches it.
    async fn apply(
        &self,
        kind: &DependentKind,
        primary: &ObjectKey,
        key: &ObjectKey,
        object: &Value,
    ) -> Result<Arc<DynamicObject>, DependentError> {
        let actual = kind.cache.get(key);
        if let Some(actual) = &actual
            && let Ok(actual_json) = serde_json::to_value(&**actual)
            && matching::matches(object, &actual_json, self.manager())
        {
            return Ok(actual.clone());
        }
        let api = self.api(kind, key);
        self.metrics.wrote(&self.plugin, &kind.resource.kind, Verb::Apply);
        kind.own.begin(key);
        let written = api.patch(&key.name, &self.params, &Patch::Apply(object)).await;
        let foreign = match &written {
            Ok(written) => kind.own.wrote(key, written.resource_version()),
            Err(_) => kind.own.failed(key),
        };
        self.reconcile_again_if(foreign, primary);
        let mut written = written.map_err(|source| DependentError::Api {
            what: "applying",
            key: key.clone(),
            source: Box::new(source),
        })?;
        tracing::debug!(plugin = self.plugin, dependent = kind.spec.name, object = %key, "applied");
        keep_own_managed_fields(&mut written, self.manager());
        kind.cache.wrote(written.clone(), actual.and_then(|a| a.resource_version()));
        Ok(Arc::new(written))
    }

    async fn delete(
        &self,
        kind: &DependentKind,
        primary: &ObjectKey,
        object: &DynamicObject,
    ) -> Result<(), DependentError> {
        let Some(key) = ObjectKey::of(object) else { return Ok(()) };
        let api = self.api(kind, &key);
        self.metrics.wrote(&self.plugin, &kind.resource.kind, Verb::Delete);
        kind.own.begin(&key);
        let deleted = match api.delete(&key.name, &DeleteParams::background()).await {
            Ok(_) => Ok(()),
            Err(kube::Error::Api(status)) if status.code == 404 => Ok(()),
            Err(source) => Err(DependentError::Api { what: "deleting", key: key.clone(), source: Box::new(source) }),
        };
        let foreign = if deleted.is_ok() { kind.own.deleted(&key) } else { kind.own.failed(&key) };
        self.reconcile_again_if(foreign, primary);
        deleted?;
        tracing::debug!(plugin = self.plugin, dependent = kind.spec.name, object = %key, "deleted");
        kind.cache.deleted(key, object.resource_version());
        Ok(())
    }

    /// Someone else changed a dependent while the host wrote it: reconcile its primary again.
    fn reconcile_again_if(&self, foreign: bool, primary: &ObjectKey) {
        if foreign {
            self.sink.enqueue(primary.clone(), Priority::Live);
        }
    }

    /// Whether every object satisfies the dependent's ready condition (existing is enough
    /// without one).
    async fn ready(&self, kind: &DependentKind, objects: &[Arc<DynamicObject>], check: PluginCheck<'_>) -> bool {
        let Some(ready_when) = &kind.spec.ready_when else { return true };
        for object in objects {
            let json = serde_json::to_value(&**object).unwrap_or(Value::Null);
            let holds = match condition::holds(ready_when, &json) {
                Some(holds) => holds,
                None => check(plugin_condition(ready_when), Some(json.to_string())).await,
            };
            if !holds {
                return false;
            }
        }
        true
    }

    /// The key of a desired object: its name, in its namespace, else the primary's.
    fn key_of(
        &self,
        kind: &DependentKind,
        primary: &Primary<'_>,
        desired: &Value,
    ) -> Result<ObjectKey, DependentError> {
        let invalid = |reason: &str| DependentError::InvalidDesired {
            dependent: kind.spec.name.clone(),
            reason: reason.to_string(),
        };
        let name = desired["metadata"]["name"].as_str().ok_or_else(|| invalid("metadata.name is missing"))?;
        let namespace = if kind.spec.kind.namespaced {
            let given = desired["metadata"]["namespace"].as_str().filter(|ns| !ns.is_empty());
            let ns = given.map(String::from).or_else(|| primary.key.namespace.clone());
            Some(ns.ok_or_else(|| invalid("a namespaced dependent of a cluster-scoped primary needs a namespace"))?)
        } else {
            None
        };
        Ok(ObjectKey { namespace, name: name.to_string() })
    }

    /// Completes a desired object: type, namespace, the management labels and the tie to the
    /// primary.
    fn prepare(
        &self,
        kind: &DependentKind,
        primary: &Primary<'_>,
        mut desired: Value,
    ) -> Result<(ObjectKey, Value), DependentError> {
        let key = self.key_of(kind, primary, &desired)?;
        // The type and namespace were checked before any write (`capability`); fill them in where
        // left out.
        desired["apiVersion"] = json!(kind.resource.api_version);
        desired["kind"] = json!(kind.resource.kind);
        let metadata = &mut desired["metadata"];
        if let Some(ns) = &key.namespace {
            metadata["namespace"] = json!(ns);
        }
        metadata["labels"][MANAGED_BY_LABEL] = json!(self.plugin);
        metadata["labels"][DEPENDENT_LABEL] = json!(kind.spec.name);
        match kind.ownership {
            // In the primary's namespace (`capability`): the reference can point there.
            Ownership::OwnerReference => {
                metadata["ownerReferences"] = json!([{
                    "apiVersion": primary.resource.api_version,
                    "kind": primary.resource.kind,
                    "name": primary.key.name,
                    "uid": primary.object.uid().unwrap_or_default(),
                    "controller": true,
                    "blockOwnerDeletion": true,
                }]);
            }
            Ownership::Annotations => {
                metadata["annotations"][PRIMARY_NAME_ANNOTATION] = json!(primary.key.name);
                if let Some(ns) = &primary.key.namespace {
                    metadata["annotations"][PRIMARY_NAMESPACE_ANNOTATION] = json!(ns);
                }
            }
        }
        Ok((key, desired))
    }

    fn api(&self, kind: &DependentKind, key: &ObjectKey) -> Api<DynamicObject> {
        match &key.namespace {
            Some(ns) => Api::namespaced_with(self.client.clone(), ns, &kind.resource),
            None => Api::all_with(self.client.clone(), &kind.resource),
        }
    }
}

/// The name of a plugin condition.
fn plugin_condition(condition: &crate::runtime::bindings::wasmop::plugin::types::Condition) -> String {
    match condition {
        crate::runtime::bindings::wasmop::plugin::types::Condition::Plugin(name) => name.clone(),
        _ => String::new(),
    }
}

/// Drops every managedFields entry but the host's own Apply entry, as the caches keep them.
pub fn keep_own_managed_fields(object: &mut DynamicObject, manager: &str) {
    if let Some(fields) = object.metadata.managed_fields.as_mut() {
        fields.retain(|f| f.manager.as_deref() == Some(manager) && f.operation.as_deref() == Some("Apply"));
    }
}
