//! The host's reconcile loop in memory, by the host's rules: the loop of the SDK's `FakeHost`
//! (a Rust reconciler run natively) and of `wasmop test` (a compiled component run without a
//! cluster). The plugin side is a [`Guest`]: its exports in the contract's terms.
//!
//! Each pass ([`Settle::settle`]) does what the host does for one reconcile: `desired`, the
//! capability checks, the dependents' workflow (order, skips, deletes, pruning, kept objects,
//! adoption conflicts, collected errors, readiness) on an in-memory store, `reconcile` with the
//! dependents' states, then the writes: labels and annotations, and the status merge patch with
//! `observedGeneration` and the host's conditions, written only when it changes something.
//! Passes repeat until one leaves the store as it was. External dependents are played by a fake
//! external system: the workflow's applies and deletes change it directly, without calling the
//! plugin's `apply-external` and `delete-external`.
//!
//! Where the store differs from the API server: it has no field managers, so an existing object
//! of a dependent that the plugin did not write (no `wasmop.dev/managed-by` label naming it) is a
//! conflict unless the dependent adopts, while the API server objects only when fields actually
//! clash; and a write merges the desired object into the stored one (objects merged, lists
//! replaced) where server-side apply would also remove fields the plugin stopped setting.
//!
//! [`Settle::reconciles_on`] and [`Settle::reconciles_on_watched`] decide which watch events
//! reconcile a primary, by [`crate::filter`] and [`crate::predicate`], the plugin's `filter`
//! answering plugin terms.

mod changes;
mod reads;
mod spec;
mod store;
mod world;

use std::cell::{Cell, RefCell};

use serde::Serialize;
use serde_json::{Value, json};

pub use reads::{Caches, View};
pub use spec::{Mapper, PluginSpec, WatchSpec};
pub use store::spec_of;
pub use world::{DependentState, World, Write};

use crate::dependent::{self, Desired, MANAGED_BY_LABEL, PrimaryRef};
use crate::external::Tracking;
use crate::kind::{KindRef, ObjectKey};
use crate::predicate::EventKind;
use crate::status::{self, Report};
use crate::workflow::{self, Workflow, WorkflowError};

/// The time the loop's clock shows, for `lastTransitionTime`: fixed, so that runs repeat.
pub const FAKE_NOW: &str = "2026-01-01T00:00:00Z";

/// Passes after which a loop that still changes the store is a bug in the plugin.
pub const MAX_PASSES: usize = 10;

/// A failed call of the plugin, or a failed workflow, as the host classifies it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Failure {
    /// Retried with backoff.
    Transient(String),
    /// Not retried until the object changes.
    Permanent(String),
    /// The primary is invalid.
    Invalid(String),
}

impl Failure {
    /// The message.
    pub fn message(&self) -> &str {
        match self {
            Self::Transient(m) | Self::Permanent(m) | Self::Invalid(m) => m,
        }
    }

    /// The reason the host gives a plugin's error: `InvalidResource` for an invalid primary,
    /// `ReconcileFailed` otherwise.
    pub fn reason(&self) -> &'static str {
        if matches!(self, Self::Invalid(_)) { "InvalidResource" } else { "ReconcileFailed" }
    }
}

/// A Kubernetes Event the plugin records on the primary (and, as recorded, read back by a replay).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, serde::Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Event {
    /// `Normal` or `Warning`.
    #[serde(rename = "type")]
    pub event_type: String,
    /// Short CamelCase reason.
    pub reason: String,
    /// What was done.
    pub action: String,
    /// Detail.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub note: Option<String>,
}

/// What a successful `reconcile` asks of the host.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Outcome {
    /// Whether the primary is ready, and the conditions' message.
    pub readiness: Option<(bool, String)>,
    /// Merged into `.status`.
    pub status: Option<Value>,
    /// Labels of the primary to set or remove.
    pub labels: Vec<(String, Option<String>)>,
    /// Annotations of the primary to set or remove.
    pub annotations: Vec<(String, Option<String>)>,
    /// Reconcile again after this many milliseconds.
    pub reschedule_after_ms: Option<u64>,
    /// Events to record.
    pub events: Vec<Event>,
}

/// The plugin side of the loop: its exports, called with what the host gives them. The SDK's
/// `FakeHost` implements it with a Rust reconciler run natively, `wasmop test` with a compiled
/// component.
pub trait Guest {
    /// `desired` for the primary (JSON).
    fn desired(&self, view: &View, primary: &str) -> Result<Vec<Desired>, Failure>;
    /// `reconcile` for the primary (JSON), its dependents' states in `view`.
    fn reconcile(&self, view: &View, primary: &str) -> Result<Outcome, Failure>;
    /// `update-error-status` after `failure`: the status to merge, if any.
    fn error_status(&self, view: &View, primary: &str, failure: &Failure) -> Option<Value>;
    /// `check`: whether the plugin condition `name` holds.
    fn check(&self, view: &View, name: &str, primary: &str, dependent: Option<&str>) -> bool;
    /// `map-secondary` for a changed `secondary` (JSON): the primaries' namespaces and names.
    fn map_secondary(&self, view: &View, secondary: &str) -> Result<Vec<(Option<String>, String)>, String>;
    /// `secondaries-of` for `primary` (JSON): the secondaries' kinds, namespaces and names.
    fn secondaries_of(&self, view: &View, primary: &str) -> Result<Vec<(KindRef, Option<String>, String)>, String>;
    /// `filter`: whether the plugin predicate `name` holds for a watch event.
    fn filter(&self, name: &str, event: EventKind, object: &Value, old: Option<&Value>) -> bool;
}

/// One pass: one reconcile and its writes.
#[derive(Debug, Clone)]
pub struct Pass {
    /// What the reconcile came to (a failed workflow fails it before the plugin is called).
    pub result: Result<Outcome, Failure>,
    /// Whether the plugin's `reconcile` was called.
    pub reconciled: bool,
    /// What the plugin saw (for its `reconcile` and `update-error-status`).
    pub view: View,
    /// The primary as the plugin read it (JSON).
    pub primary: String,
    /// The writes, in order.
    pub writes: Vec<Write>,
}

/// The loop did not settle: [`MAX_PASSES`] passes still changed the store.
#[derive(Debug)]
pub struct Unsettled(pub Vec<Pass>);

/// The loop for one plugin.
pub struct Settle<'g, G: Guest + ?Sized> {
    spec: PluginSpec,
    caches: Caches,
    workflow: Workflow,
    guest: &'g G,
}

impl<'g, G: Guest + ?Sized> Settle<'g, G> {
    /// The loop of the plugin `spec` describes, calling `guest`; an error when its dependents
    /// are invalid (as the host refuses to load it).
    pub fn new(spec: PluginSpec, guest: &'g G) -> Result<Self, String> {
        let specs = spec.dependents.iter().cloned().chain(spec.external.iter().map(|(d, _)| d.clone()));
        let workflow = Workflow::new(specs.collect())?;
        Ok(Self { caches: Caches::new(&spec), spec, workflow, guest })
    }

    /// The plugin's description.
    pub fn spec(&self) -> &PluginSpec {
        &self.spec
    }

    /// The host's caches for the plugin.
    pub fn caches(&self) -> &Caches {
        &self.caches
    }

    /// The whole store as the plugin reads it outside a reconcile.
    pub fn whole(&self, world: &World) -> View {
        View {
            caches: self.caches.clone(),
            objects: world.objects.clone(),
            secondaries: world.secondaries.clone(),
            dependents: world.dependents.clone(),
            external: world.external.clone(),
            inbound: world.inbound.clone(),
        }
    }

    /// Puts `primary` in `world` (with a `uid` and a `resourceVersion` when it has none) and
    /// reconciles it until a pass changes nothing: every pass, or [`Unsettled`] after
    /// [`MAX_PASSES`]. An error when the primary has no `metadata.name`.
    pub fn settle(&self, world: &mut World, mut primary: Value) -> Result<Result<Vec<Pass>, Unsettled>, String> {
        let key = ObjectKey::of_json(&primary).ok_or("the primary needs metadata.name")?;
        let metadata = &mut primary["metadata"];
        for (field, default) in [("uid", json!(format!("uid-{}", key.name))), ("resourceVersion", json!("1"))] {
            if metadata[field].is_null() {
                metadata[field] = default;
            }
        }
        let kind = &self.spec.primary;
        world.objects.retain(|(k, object)| !(k.same_type(kind) && ObjectKey::of_json(object).as_ref() == Some(&key)));
        world.objects.push((kind.clone(), primary));
        let mut passes = Vec::new();
        while passes.len() < MAX_PASSES {
            let before = (world.objects.clone(), world.external.clone());
            passes.push(self.pass(world, &key));
            if (&world.objects, &world.external) == (&before.0, &before.1) {
                return Ok(Ok(passes));
            }
        }
        Ok(Err(Unsettled(passes)))
    }

    /// One reconcile of the primary at `key`, with its writes.
    fn pass(&self, world: &mut World, key: &ObjectKey) -> Pass {
        let kind = &self.spec.primary;
        let primary = world.stored(kind, key).cloned().expect("the primary stays in the store");
        // The plugin reads the primary cut to its projection, as the host gives it.
        let json = self.caches.shaped(kind, &primary).to_string();
        let reference = PrimaryRef {
            kind: kind.clone(),
            key: key.clone(),
            uid: primary["metadata"]["uid"].as_str().unwrap_or_default().to_owned(),
        };
        let mut writes = Vec::new();
        let states = if self.workflow.specs().is_empty() {
            Ok(Vec::new())
        } else {
            self.dependents(world, &reference, &primary, &mut writes)
        };
        let view = self.view(world, &reference, states.as_ref().map(Vec::as_slice).unwrap_or_default());
        // A failed workflow has its own reason, as in the host; the plugin is not called.
        let (result, reason) = match states {
            Ok(_) => (self.guest.reconcile(&view, &json), None),
            Err((failure, reason)) => (Err(failure), Some(reason)),
        };
        let reconciled = reason.is_none();
        let result = self.write(world, key, &primary, (&view, &json), result, reason, &mut writes);
        Pass { result, reconciled, view, primary: json, writes }
    }

    /// Asks for the desired objects and runs the workflow on the store.
    fn dependents(
        &self,
        world: &mut World,
        primary: &PrimaryRef,
        primary_json: &Value,
        writes: &mut Vec<Write>,
    ) -> Result<Vec<DependentState>, (Failure, &'static str)> {
        let json = primary_json.to_string();
        let view = self.view(world, primary, &[]);
        let desired = self.guest.desired(&view, &json).map_err(|e| {
            let reason = e.reason();
            (e, reason)
        })?;
        let check =
            |name: &str, primary: &str, dependent: Option<&str>| self.guest.check(&view, name, primary, dependent);
        let driver = store::Store {
            objects: RefCell::new(std::mem::take(&mut world.objects)),
            external: RefCell::new(world.external.clone()),
            ids: Cell::new(world.external.len() as u64),
            revision: Cell::new(world.revision),
            primary,
            primary_json: json,
            check: &check,
            writes: RefCell::new(Vec::new()),
        };
        let states =
            workflow::complete(workflow::run(&driver, &self.workflow, &self.spec.name, primary, primary_json, desired));
        world.objects = driver.objects.into_inner();
        world.external = driver.external.into_inner();
        world.revision = driver.revision.get();
        writes.extend(driver.writes.into_inner());
        self.track(world, primary, primary_json, writes);
        let states = states.map_err(|err| {
            let failure = match &err {
                WorkflowError::Refused { .. } => Failure::Permanent(format!("plugin {:?} {err}", self.spec.name)),
                WorkflowError::Invalid { .. } => Failure::Permanent(err.to_string()),
                WorkflowError::Failed { .. } => Failure::Transient(err.to_string()),
            };
            (failure, err.reason())
        })?;
        Ok(states
            .into_iter()
            .map(|state| {
                let external = state.external.into_iter().map(|o| o.object);
                DependentState {
                    name: state.name,
                    phase: state.phase,
                    objects: state.objects.into_iter().chain(external).collect(),
                }
            })
            .collect())
    }

    /// Writes the primary's tracking records as the host does: the IDs of the external
    /// dependents' objects, in a ConfigMap (or Secret) `<primary>-<plugin>-ext` owned by the
    /// primary ([`crate::external`]'s contents).
    fn track(&self, world: &mut World, primary: &PrimaryRef, primary_json: &Value, writes: &mut Vec<Write>) {
        use crate::external::{Ids, encode, record_name};
        for tracking in [Tracking::ConfigMap, Tracking::Secret] {
            let dependents: Vec<&str> =
                self.spec.external.iter().filter(|(_, t)| *t == tracking).map(|(d, _)| d.name.as_str()).collect();
            if dependents.is_empty() {
                continue;
            }
            let ids: Ids = world
                .external
                .iter()
                .filter(|o| dependents.contains(&o.dependent.as_str()))
                .filter_map(|o| Some(((o.dependent.clone(), o.key.clone()), o.id.clone()?)))
                .collect();
            let data = encode(&ids);
            let owner = json!([{ "apiVersion": primary_json["apiVersion"], "kind": primary_json["kind"],
                "name": primary.key.name, "uid": primary.uid, "controller": true }]);
            let metadata = json!({ "name": record_name(&primary.key.name, &self.spec.name),
                "namespace": primary.key.namespace, "ownerReferences": owner,
                "labels": { MANAGED_BY_LABEL: self.spec.name } });
            let core = |kind: &str, plural: &str| KindRef {
                group: String::new(),
                version: "v1".into(),
                kind: kind.into(),
                plural: Some(plural.into()),
                namespaced: true,
            };
            let (kind, object) = match tracking {
                Tracking::ConfigMap => (
                    core("ConfigMap", "configmaps"),
                    json!({ "apiVersion": "v1", "kind": "ConfigMap", "metadata": metadata, "data": data }),
                ),
                Tracking::Secret => {
                    let data: serde_json::Map<String, Value> =
                        data.into_iter().map(|(k, v)| (k, json!(store::base64(v.as_bytes())))).collect();
                    (
                        core("Secret", "secrets"),
                        json!({ "apiVersion": "v1", "kind": "Secret", "metadata": metadata, "data": data }),
                    )
                }
            };
            let before = world.objects.clone();
            World::replace(&mut world.objects, &kind, object.clone());
            if world.objects != before {
                world.revision += 1;
                writes.push(Write::Apply { kind: kind.to_string(), object });
            }
        }
    }

    /// The store as the plugin sees it during a pass: the dependents' objects of the primary
    /// are its secondaries (as the host's dependent watches map them), and so are the objects
    /// a watch's mapper relates to it; `states` are the dependents' states.
    fn view(&self, world: &World, primary: &PrimaryRef, states: &[DependentState]) -> View {
        let whole = self.whole(world);
        let primary_json = world.stored(&primary.kind, &primary.key).map(Value::to_string).unwrap_or_default();
        let owned = |kind: &KindRef, object: &Value| {
            self.workflow
                .specs()
                .iter()
                .any(|spec| !spec.read_only && kind.same_type(&spec.kind) && dependent::belongs(spec, primary, object))
        };
        let mapped = |kind: &KindRef, object: &Value| {
            self.spec.watches.iter().any(|watch| self.maps(watch, &whole, primary, &primary_json, kind, object))
        };
        let (secondaries, objects): (Vec<_>, Vec<_>) =
            world.objects.iter().cloned().partition(|(kind, object)| owned(kind, object) || mapped(kind, object));
        View {
            caches: self.caches.clone(),
            objects,
            secondaries: world.secondaries.iter().cloned().chain(secondaries).collect(),
            dependents: if states.is_empty() { world.dependents.clone() } else { states.to_vec() },
            external: world.external.clone(),
            inbound: world.inbound.clone(),
        }
    }

    /// The writes after a reconcile: metadata, then the status with the host's conditions.
    /// Returns the result, failed when the plugin's status is unusable.
    #[allow(clippy::too_many_arguments, reason = "the pass's parts, kept apart for the borrows")]
    fn write(
        &self,
        world: &mut World,
        key: &ObjectKey,
        before: &Value,
        (view, json): (&View, &str),
        result: Result<Outcome, Failure>,
        reason: Option<&'static str>,
        writes: &mut Vec<Write>,
    ) -> Result<Outcome, Failure> {
        let mut primary = before.clone();
        let (status, report) = match &result {
            Ok(outcome) => {
                let mut patch = serde_json::Map::new();
                let metadata = &mut primary["metadata"];
                for (field, changes) in [("labels", &outcome.labels), ("annotations", &outcome.annotations)] {
                    for (name, value) in changes {
                        let old = metadata[field].get(name).cloned();
                        match value {
                            Some(value) => metadata[field][name] = json!(value),
                            None => {
                                if let Some(map) = metadata[field].as_object_mut() {
                                    map.remove(name);
                                }
                            }
                        }
                        if metadata[field].get(name) != old.as_ref() {
                            patch.entry(field).or_insert_with(|| json!({}))[name] = json!(value);
                        }
                    }
                }
                if !patch.is_empty() {
                    writes.push(Write::Metadata { patch: Value::Object(patch) });
                }
                let readiness = outcome.readiness.as_ref().map(|(ready, message)| (*ready, message.as_str()));
                (outcome.status.clone(), Report::Success { readiness })
            }
            Err(failure) => {
                let retrying = matches!(failure, Failure::Transient(_));
                let status = if retrying { None } else { self.guest.error_status(view, json, failure) };
                let reason = reason.unwrap_or_else(|| failure.reason());
                (status, Report::Failure { reason, message: failure.message(), retrying })
            }
        };
        let report = Some(report).filter(|_| self.spec.conditions);
        let generation = primary["metadata"]["generation"].as_i64();
        let result = match status::patch(primary.get("status"), status, generation, report.as_ref(), FAKE_NOW) {
            Ok(Some(patch)) => {
                status::merge(&mut primary, &patch);
                writes.push(Write::Status { patch: patch["status"].clone() });
                result
            }
            Ok(None) => result,
            Err(reason) => Err(Failure::Permanent(format!("the status is unusable: {reason}"))),
        };
        if primary != *before {
            world.revision += 1;
            primary["metadata"]["resourceVersion"] = json!(world.revision.to_string());
            let kind = &self.spec.primary;
            if let Some(slot) =
                world.objects.iter_mut().find(|(k, o)| k.same_type(kind) && ObjectKey::of_json(o).as_ref() == Some(key))
            {
                slot.1 = primary;
            }
        }
        result
    }
}
