//! [`FakeHost::run_until_stable`]: the whole reconcile loop, in memory, by the host's rules.
//!
//! Each pass does what the host does for one reconcile, through the same rules crate
//! (`wasmop_core`): `desired`, the capability checks, the dependents' workflow (order, skips,
//! deletes, pruning, kept objects, adoption conflicts, collected errors, readiness), `reconcile`
//! with the dependents' states, then the writes: labels and annotations, and the status merge
//! patch with `observedGeneration` and the host's conditions, written only when it changes
//! something. Passes repeat until one leaves the store as it was.
//!
//! The host itself does not reconcile on its own writes; the extra pass is there to prove that
//! reconciling the result again changes nothing, which the host relies on (a resync, a restart
//! or a foreign change reconciles the same state again).
//!
//! Where the FakeHost differs: it has no field managers, so an existing object of a dependent
//! that the plugin did not write (no `wasmop.dev/managed-by` label naming it) is a conflict
//! unless the dependent adopts, while the API server objects only when fields actually clash;
//! and a write merges the desired object into the stored one (objects merged, lists replaced)
//! where server-side apply would also remove fields the plugin stopped setting.

use std::cell::{Cell, RefCell};

use serde::Serialize;
use serde_json::{Value, json};
use wasmop_core::dependent::{self as core_dependent, DependentSpec, MANAGED_BY_LABEL, PrimaryRef};
use wasmop_core::external::ExternalObject;
use wasmop_core::status::{self, Report};
use wasmop_core::workflow::{self, Driver, Workflow, WorkflowError};
use wasmop_core::{KindRef, ObjectKey};

use super::{FakeHost, Plugin, Request, Run};
use crate::{Config, DependentState, Desired, Error, Kind, Reconciler};

/// The time the FakeHost's clock shows, for `lastTransitionTime`: fixed, so that runs repeat.
pub const FAKE_NOW: &str = "2026-01-01T00:00:00Z";

/// Passes after which a loop that still changes the store is a bug in the plugin.
const MAX_PASSES: usize = 10;

/// The result of [`FakeHost::run_until_stable`]: every pass, and the store as it ended.
#[derive(Debug)]
pub struct Stable {
    passes: Vec<Run>,
    primary: Value,
    objects: Vec<(Kind, Value)>,
}

impl Stable {
    /// How many passes ran; the last one changed nothing.
    pub fn passes(&self) -> usize {
        self.passes.len()
    }

    /// The last pass.
    pub fn last(&self) -> &Run {
        self.passes.last().expect("at least one pass runs")
    }

    /// Every pass, in order.
    pub fn runs(&self) -> &[Run] {
        &self.passes
    }

    /// The primary as the store holds it now.
    pub fn primary(&self) -> &Value {
        &self.primary
    }

    /// The primary's `.status` as the store holds it now (`null` when it has none).
    pub fn status(&self) -> &Value {
        &self.primary["status"]
    }

    /// The primary's condition of type `type_`, if any.
    pub fn condition(&self, type_: &str) -> Option<&Value> {
        self.status()["conditions"].as_array()?.iter().find(|c| c["type"] == type_)
    }

    /// The stored objects of `kind`, sorted by namespace and name.
    pub fn objects(&self, kind: &Kind) -> Vec<&Value> {
        let mut objects: Vec<&Value> =
            self.objects.iter().filter(|(k, _)| k.same_type(kind)).map(|(_, object)| object).collect();
        objects.sort_by_key(|o| ObjectKey::of_json(o));
        objects
    }
}

impl FakeHost {
    /// Runs `R` on `primary` as the host would, over and over, until a pass changes nothing:
    /// see the [module documentation](self). The primary and every object the passes write
    /// stay in this host's store, so a later call (say, after a spec change with
    /// [`FakeHost::insert`]) continues from there.
    ///
    /// Panics when a pass fails (naming the pass and the error; to test a failure, use
    /// [`FakeHost::run_until_settled`]), when the plugin's configuration is invalid (as the host
    /// refuses to load it), or when ten passes still change the store (a reconcile that is not
    /// idempotent).
    ///
    /// ```
    /// use wasmop_guest::k8s_openapi::api::core::v1::ConfigMap;
    /// use wasmop_guest::serde_json::{Value, json};
    /// use wasmop_guest::testing::FakeHost;
    /// use wasmop_guest::{Config, Context, Dependent, Desired, Error, Kind, Outcome, Reconciler};
    ///
    /// struct Copy;
    ///
    /// impl Reconciler for Copy {
    ///     type Primary = Value;
    ///
    ///     fn config() -> Config {
    ///         Config::new("copy", Kind::namespaced("example.com", "v1", "Copy"))
    ///             .dependent(Dependent::new("copy", Kind::of::<ConfigMap>()))
    ///     }
    ///
    ///     fn desired(copy: &Value, _: &Context) -> Result<Vec<Desired>, Error> {
    ///         let data = &copy["spec"]["data"];
    ///         Ok(vec![Desired::new("copy", &json!({ "metadata": { "name": "copy" }, "data": data }))])
    ///     }
    ///
    ///     fn reconcile(_: Value, ctx: &Context) -> Result<Outcome, Error> {
    ///         let copies = ctx.dependent("copy").map_or(0, |d| d.objects.len());
    ///         Ok(Outcome::ready(format!("{copies} copy")))
    ///     }
    /// }
    ///
    /// let mut host = FakeHost::new();
    /// let primary = json!({
    ///     "metadata": { "name": "c", "namespace": "default", "generation": 1 },
    ///     "spec": { "data": { "a": "1" } },
    /// });
    /// let stable = host.run_until_stable::<Copy>(&primary);
    /// assert_eq!(stable.passes(), 2, "the second pass changes nothing");
    /// assert_eq!(stable.objects(&Kind::of::<ConfigMap>())[0]["data"]["a"], "1");
    /// assert_eq!(stable.condition("Ready").unwrap()["message"], "1 copy");
    /// assert_eq!(stable.status()["observedGeneration"], 1);
    /// ```
    pub fn run_until_stable<R: Reconciler>(&mut self, primary: &impl Serialize) -> Stable {
        let stable = self.run_until_settled::<R>(primary);
        if let Some((pass, error)) =
            stable.passes.iter().enumerate().find_map(|(i, run)| run.result().as_ref().err().map(|e| (i + 1, e)))
        {
            panic!(
                "FakeHost::run_until_stable: pass {pass} failed: {error:?}; use run_until_settled to test a \
                 failing reconcile"
            );
        }
        stable
    }

    /// [`FakeHost::run_until_stable`], but a pass that fails is not a test failure: the host
    /// writes its failure conditions (and the plugin's
    /// [`error_status`](Reconciler::error_status)) as it would, and the passes go on until one
    /// changes nothing. For testing how a plugin fails.
    ///
    /// ```
    /// use wasmop_guest::serde_json::{Value, json};
    /// use wasmop_guest::testing::FakeHost;
    /// use wasmop_guest::{Config, Context, Error, Kind, Outcome, Reconciler};
    ///
    /// struct Picky;
    ///
    /// impl Reconciler for Picky {
    ///     type Primary = Value;
    ///
    ///     fn config() -> Config {
    ///         Config::new("picky", Kind::namespaced("example.com", "v1", "Picky"))
    ///     }
    ///
    ///     fn reconcile(_: Value, _: &Context) -> Result<Outcome, Error> {
    ///         Err(Error::permanent("never content"))
    ///     }
    /// }
    ///
    /// let primary = json!({ "metadata": { "name": "p", "namespace": "default" } });
    /// let stable = FakeHost::new().run_until_settled::<Picky>(&primary);
    /// assert_eq!(stable.last().error(), &Error::permanent("never content"));
    /// assert_eq!(stable.condition("Degraded").unwrap()["message"], "never content");
    /// ```
    pub fn run_until_settled<R: Reconciler>(&mut self, primary: &impl Serialize) -> Stable {
        let config = R::config();
        let plugin = Plugin::of::<R>();
        let specs = config.dependents.iter().map(crate::Dependent::to_core);
        let external = config.external_dependents.iter().map(crate::ExternalDependent::to_core);
        let workflow = Workflow::new(specs.chain(external).collect())
            .unwrap_or_else(|e| panic!("FakeHost::run_until_stable: the plugin's dependents are invalid: {e}"));
        let mut primary = super::to_object("run_until_stable", &config.primary, primary);
        let key = ObjectKey::of_json(&primary).expect("FakeHost::run_until_stable: the primary needs metadata.name");
        let metadata = &mut primary["metadata"];
        for (field, default) in [("uid", json!(format!("uid-{}", key.name))), ("resourceVersion", json!("1"))] {
            if metadata[field].is_null() {
                metadata[field] = default;
            }
        }
        self.objects.retain(|(kind, object)| {
            !(kind.same_type(&config.primary) && ObjectKey::of_json(object).as_ref() == Some(&key))
        });
        self.objects.push((config.primary.clone(), primary));
        let mut passes = Vec::new();
        while passes.len() < MAX_PASSES {
            let before = (self.objects.clone(), self.external.clone());
            passes.push(self.pass::<R>(&config, &plugin, &workflow, &key));
            if (&self.objects, &self.external) == (&before.0, &before.1) {
                let primary = self.stored(&config.primary, &key).cloned().unwrap_or(Value::Null);
                return Stable { passes, primary, objects: self.objects.clone() };
            }
        }
        panic!(
            "FakeHost::run_until_stable: still changing after {MAX_PASSES} passes; a reconcile of its own result \
             must change nothing (last pass: {:?})",
            passes.last().map(Run::result)
        );
    }

    /// Sets the `.status` of the stored object of `kind` at `namespace`/`name`, as another
    /// controller would (say, the Deployment controller's `readyReplicas` on a dependent
    /// Deployment), with a new `resourceVersion`; the rest of the object stays. The next
    /// [`FakeHost::run_until_stable`] sees it in the dependent's state and in `get`/`list`.
    /// Panics if there is no such object.
    ///
    /// ```
    /// use wasmop_guest::k8s_openapi::api::apps::v1::Deployment;
    /// use wasmop_guest::serde_json::json;
    /// use wasmop_guest::testing::FakeHost;
    /// use wasmop_guest::Kind;
    ///
    /// let mut host = FakeHost::new()
    ///     .with(&Kind::of::<Deployment>(), &json!({ "metadata": { "name": "web", "namespace": "default" } }));
    /// host.set_status(&Kind::of::<Deployment>(), Some("default"), "web", &json!({ "readyReplicas": 1 }));
    /// assert_eq!(host.objects_of(&Kind::of::<Deployment>())[0]["status"]["readyReplicas"], 1);
    /// ```
    pub fn set_status(&mut self, kind: &Kind, namespace: Option<&str>, name: &str, status: &impl Serialize) {
        let status = serde_json::to_value(status)
            .unwrap_or_else(|e| panic!("FakeHost::set_status: the status does not serialize: {e}"));
        let at = |(k, object): &&mut (Kind, Value)| {
            k.same_type(kind)
                && object["metadata"]["name"].as_str() == Some(name)
                && object["metadata"]["namespace"].as_str() == namespace
        };
        let Some((_, object)) = self.objects.iter_mut().chain(self.secondaries.iter_mut()).find(at) else {
            panic!("FakeHost::set_status: no {kind} {}/{name} in the store", namespace.unwrap_or_default());
        };
        object["status"] = status;
        self.revision += 1;
        object["metadata"]["resourceVersion"] = json!(self.revision.to_string());
    }

    /// The stored objects of `kind`: the primary, what the plugin's writes left, and what the
    /// test inserted.
    pub fn objects_of(&self, kind: &Kind) -> Vec<&Value> {
        self.objects.iter().filter(|(k, _)| k.same_type(kind)).map(|(_, object)| object).collect()
    }

    fn stored(&self, kind: &Kind, key: &ObjectKey) -> Option<&Value> {
        self.objects
            .iter()
            .find(|(k, object)| k.same_type(kind) && ObjectKey::of_json(object).as_ref() == Some(key))
            .map(|(_, object)| object)
    }

    /// One reconcile of the primary at `key`, with its writes.
    fn pass<R: Reconciler>(&mut self, config: &Config, plugin: &Plugin, workflow: &Workflow, key: &ObjectKey) -> Run {
        let primary = self.stored(&config.primary, key).cloned().expect("the primary stays in the store");
        // The plugin reads the primary as the host's cache holds it.
        let json = plugin.shaped(&config.primary, &primary).to_string();
        let reference = PrimaryRef {
            kind: config.primary.to_core(),
            key: key.clone(),
            uid: primary["metadata"]["uid"].as_str().unwrap_or_default().to_owned(),
        };
        let states = if workflow.specs().is_empty() {
            Ok(Vec::new())
        } else {
            self.dependents::<R>(config, plugin, workflow, &reference, &primary)
        };
        let related = |kind: &Kind, object: &Value| mapped::<R>(config, plugin, self, &reference, &json, kind, object);
        let view = self.view(workflow, &reference, states.as_ref().map(Vec::as_slice).unwrap_or_default(), &related);
        let (ctx, logs) = view.context(plugin, 0, false);
        // A failed workflow has its own reason, as in the host; the plugin is not called.
        let (result, reason) = match states {
            Ok(_) => (crate::run::<R>(&json, &ctx), None),
            Err((error, reason)) => (Err(error), Some(reason)),
        };
        drop(ctx);
        let request = Request { host: view, plugin: plugin.clone(), json, attempt: 0, last_attempt: false };
        let run = Run { result, logs: logs.take(), request, error_status: crate::error_status::<R> };
        self.write(config, key, &primary, &run, reason);
        run
    }

    /// Writes the primary's tracking records as the host does: the IDs of the external
    /// dependents' objects, in a ConfigMap (or Secret) `<primary>-<plugin>-ext` owned by the
    /// primary ([`wasmop_core::external`]'s contents).
    fn track(&mut self, config: &Config, primary: &PrimaryRef, primary_json: &Value) {
        use wasmop_core::external::{Ids, encode, record_name};
        for tracking in [crate::Tracking::ConfigMap, crate::Tracking::Secret] {
            let dependents: Vec<&str> =
                config.external_dependents.iter().filter(|d| d.tracking == tracking).map(|d| d.name.as_str()).collect();
            if dependents.is_empty() {
                continue;
            }
            let ids: Ids = self
                .external
                .iter()
                .filter(|o| dependents.contains(&o.dependent.as_str()))
                .filter_map(|o| Some(((o.dependent.clone(), o.key.clone()), o.id.clone()?)))
                .collect();
            let data = encode(&ids);
            let owner = json!([{ "apiVersion": primary_json["apiVersion"], "kind": primary_json["kind"],
                "name": primary.key.name, "uid": primary.uid, "controller": true }]);
            let metadata = json!({ "name": record_name(&primary.key.name, &config.name),
                "namespace": primary.key.namespace, "ownerReferences": owner,
                "labels": { MANAGED_BY_LABEL: config.name } });
            let (kind, object) = match tracking {
                crate::Tracking::ConfigMap => (
                    Kind::namespaced("", "v1", "ConfigMap").plural("configmaps"),
                    json!({
                    "apiVersion": "v1", "kind": "ConfigMap", "metadata": metadata, "data": data }),
                ),
                crate::Tracking::Secret => {
                    let data: std::collections::BTreeMap<String, k8s_openapi::ByteString> =
                        data.into_iter().map(|(k, v)| (k, k8s_openapi::ByteString(v.into_bytes()))).collect();
                    (
                        Kind::namespaced("", "v1", "Secret").plural("secrets"),
                        json!({
                        "apiVersion": "v1", "kind": "Secret", "metadata": metadata, "data": data }),
                    )
                }
            };
            let before = self.objects.clone();
            super::replace(&mut self.objects, &kind, object);
            if self.objects != before {
                self.revision += 1;
            }
        }
    }

    /// Asks for the desired objects and runs the workflow on the store.
    fn dependents<R: Reconciler>(
        &mut self,
        config: &Config,
        plugin: &Plugin,
        workflow: &Workflow,
        primary: &PrimaryRef,
        primary_json: &Value,
    ) -> Result<Vec<DependentState>, (Error, &'static str)> {
        let json = primary_json.to_string();
        let related = |kind: &Kind, object: &Value| mapped::<R>(config, plugin, self, primary, &json, kind, object);
        let view = self.view(workflow, primary, &[], &related);
        let (ctx, _logs) = view.context(plugin, 0, false);
        let (check_ctx, _check_logs) = view.context(plugin, 0, false);
        let desired = crate::desired::<R>(&primary_json.to_string(), &ctx).map_err(|e| {
            let reason = plugin_failure_reason(&e);
            (e, reason)
        })?;
        let desired = desired.into_iter().map(|Desired { dependent, object, keep, key }| core_dependent::Desired {
            dependent,
            object,
            keep,
            key,
        });
        let driver = Store {
            objects: RefCell::new(std::mem::take(&mut self.objects)),
            external: RefCell::new(self.external.iter().cloned().map(crate::External::into_core).collect()),
            ids: Cell::new(self.external.len() as u64),
            revision: Cell::new(self.revision),
            primary,
            primary_json: primary_json.to_string(),
            check: &|name, primary, dependent| crate::check::<R>(name, primary, dependent, &check_ctx),
        };
        let states = workflow::complete(workflow::run(
            &driver,
            workflow,
            &config.name,
            primary,
            primary_json,
            desired.collect(),
        ));
        self.objects = driver.objects.into_inner();
        self.external = driver.external.into_inner().into_iter().map(crate::External::from_core).collect();
        self.revision = driver.revision.get();
        self.track(config, primary, primary_json);
        let states = states.map_err(|err| {
            let error = match &err {
                WorkflowError::Refused { .. } => Error::permanent(format!("plugin {:?} {err}", config.name)),
                WorkflowError::Invalid { .. } => Error::permanent(err.to_string()),
                WorkflowError::Failed { .. } => Error::transient(err.to_string()),
            };
            (error, err.reason())
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

    /// This host as the plugin sees it during a pass: the dependents' objects of the primary
    /// are its secondaries (as the host's dependent watches map them), and `states` are the
    /// dependents' states.
    fn view(
        &self,
        workflow: &Workflow,
        primary: &PrimaryRef,
        states: &[DependentState],
        mapped: &dyn Fn(&Kind, &Value) -> bool,
    ) -> FakeHost {
        let owned = |kind: &Kind, object: &Value| {
            workflow.specs().iter().any(|spec| {
                !spec.read_only
                    && kind.to_core().same_type(&spec.kind)
                    && core_dependent::belongs(spec, primary, object)
            })
        };
        let (secondaries, objects): (Vec<_>, Vec<_>) =
            self.objects.iter().cloned().partition(|(kind, object)| owned(kind, object) || mapped(kind, object));
        FakeHost {
            objects,
            secondaries: self.secondaries.iter().cloned().chain(secondaries).collect(),
            failures: self.failures.clone(),
            dependents: if states.is_empty() { self.dependents.clone() } else { states.to_vec() },
            revision: self.revision,
            external: self.external.clone(),
            inbound: self.inbound.clone(),
        }
    }

    /// The writes after a reconcile: metadata, then the status with the host's conditions.
    fn write(&mut self, config: &Config, key: &ObjectKey, before: &Value, run: &Run, reason: Option<&'static str>) {
        let mut primary = before.clone();
        let (status, report) = match run.result() {
            Ok(outcome) => {
                let metadata = &mut primary["metadata"];
                for (field, changes) in [("labels", outcome.labels()), ("annotations", outcome.annotations())] {
                    for (name, value) in changes {
                        match value {
                            Some(value) => metadata[field][name] = json!(value),
                            None => {
                                if let Some(map) = metadata[field].as_object_mut() {
                                    map.remove(name);
                                }
                            }
                        }
                    }
                }
                (outcome.status.clone(), Some(Report::Success { readiness: outcome.readiness() }))
            }
            Err(error) => {
                let retrying = matches!(error, Error::Transient(_));
                let status = if retrying { None } else { run.error_status() };
                let reason = reason.unwrap_or_else(|| plugin_failure_reason(error));
                (status, Some(Report::Failure { reason, message: error.message(), retrying }))
            }
        };
        let report = report.filter(|_| config.conditions);
        let generation = primary["metadata"]["generation"].as_i64();
        match status::patch(primary.get("status"), status, generation, report.as_ref(), FAKE_NOW) {
            Ok(Some(patch)) => status::merge(&mut primary, &patch),
            Ok(None) => {}
            Err(reason) => panic!("FakeHost: the status is unusable: {reason}"),
        }
        if primary != *before {
            self.revision += 1;
            primary["metadata"]["resourceVersion"] = json!(self.revision.to_string());
            if let Some(slot) = self
                .objects
                .iter_mut()
                .find(|(k, o)| k.same_type(&config.primary) && ObjectKey::of_json(o).as_ref() == Some(key))
            {
                slot.1 = primary;
            }
        }
    }
}

/// Whether one of the plugin's declared watches relates `object` of `kind` to the primary, by
/// the watch's mapper, as the host's watches do (`wasmop_core::mapping`): owner references to
/// the primary's UID, the primary-name annotations, the plugin's `map_secondary` or its
/// `secondaries_of`.
fn mapped<R: Reconciler>(
    config: &Config,
    plugin: &Plugin,
    host: &FakeHost,
    primary: &PrimaryRef,
    primary_json: &str,
    kind: &Kind,
    object: &Value,
) -> bool {
    config.watches.iter().any(|watch| maps::<R>(watch, plugin, host, primary, primary_json, kind, object))
}

/// Whether `watch` selects `object` of `kind` and relates it to the primary by its mapper.
pub(super) fn maps<R: Reconciler>(
    watch: &crate::Watch,
    plugin: &Plugin,
    host: &FakeHost,
    primary: &PrimaryRef,
    primary_json: &str,
    kind: &Kind,
    object: &Value,
) -> bool {
    use wasmop_core::mapping::{Owners, PrimaryKind};
    let primary_kind = PrimaryKind::from(&primary.kind);
    let points_here = |target: &wasmop_core::mapping::Target| {
        target.key == primary.key && target.uid.as_deref().is_none_or(|uid| uid == primary.uid)
    };
    if !watch.kind.same_type(kind) {
        return false;
    }
    let selected = watch
        .label_selector
        .as_deref()
        .is_none_or(|s| s.parse::<wasmop_core::selector::LabelSelector>().is_ok_and(|s| s.matches_object(object)));
    if !selected {
        return false;
    }
    let (ctx, _logs) = host.context(plugin, 0, false);
    match watch.mapper {
        crate::Mapper::ControllerOwner => {
            primary_kind.owners_of_json(object, Owners::Controller).iter().any(points_here)
        }
        crate::Mapper::AnyOwner => primary_kind.owners_of_json(object, Owners::Any).iter().any(points_here),
        crate::Mapper::Annotations => primary_kind.annotated_json(object).is_some_and(|t| points_here(&t)),
        crate::Mapper::Plugin => {
            let namespace = object["metadata"]["namespace"].as_str();
            let refs = crate::map_secondary::<R>(&object.to_string(), None, &ctx).unwrap_or_default();
            primary_kind.named(namespace, refs.into_iter().map(|r| (r.namespace, r.name))).iter().any(points_here)
        }
        crate::Mapper::PrimaryReferences => {
            let key = ObjectKey::of_json(object);
            let refs = crate::secondaries_of::<R>(primary_json, &ctx).unwrap_or_default();
            refs.iter().any(|r| {
                r.kind.same_type(kind) && key.as_ref().is_some_and(|k| k.name == r.name && k.namespace == r.namespace)
            })
        }
    }
}

/// The reason the host gives a plugin's error: `InvalidResource` for an invalid primary,
/// `ReconcileFailed` otherwise.
fn plugin_failure_reason(error: &Error) -> &'static str {
    if matches!(error, Error::Invalid(_)) { "InvalidResource" } else { "ReconcileFailed" }
}

/// A failed write of the FakeHost's store: only an object someone else manages can refuse one.
#[derive(Debug)]
struct Conflict(String);

impl std::fmt::Display for Conflict {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&self.0)
    }
}

/// The FakeHost's store as the workflow's driver.
struct Store<'a> {
    objects: RefCell<Vec<(Kind, Value)>>,
    /// The fake external system.
    external: RefCell<Vec<ExternalObject>>,
    /// IDs given out.
    ids: Cell<u64>,
    revision: Cell<u64>,
    primary: &'a PrimaryRef,
    primary_json: String,
    check: &'a dyn Fn(&str, &str, Option<&str>) -> bool,
}

impl Store<'_> {
    fn matches(kind: &Kind, object: &Value, spec: &DependentSpec, key: &ObjectKey) -> bool {
        same_kind(kind, &spec.kind) && ObjectKey::of_json(object).as_ref() == Some(key)
    }

    fn next_revision(&self) -> String {
        self.revision.set(self.revision.get() + 1);
        self.revision.get().to_string()
    }
}

/// Everything but `metadata` and `status`: what bumps `metadata.generation` when it changes.
fn spec_of(object: &Value) -> Vec<(&String, &Value)> {
    object.as_object().into_iter().flatten().filter(|(k, _)| *k != "metadata" && *k != "status").collect()
}

fn same_kind(kind: &Kind, core: &KindRef) -> bool {
    kind.group == core.group && kind.version == core.version && kind.kind == core.kind
}

impl Driver for Store<'_> {
    type Object = Value;
    type Error = Conflict;

    fn fetched(&self, spec: &DependentSpec) -> Vec<ExternalObject> {
        self.external.borrow().iter().filter(|o| o.dependent == spec.name).cloned().collect()
    }

    async fn apply_external(
        &self,
        _: &DependentSpec,
        desired: ExternalObject,
        _: Option<ExternalObject>,
    ) -> Result<ExternalObject, Conflict> {
        let id = desired.id.clone().unwrap_or_else(|| {
            self.ids.set(self.ids.get() + 1);
            format!("fake-{}", self.ids.get())
        });
        let applied = ExternalObject { id: Some(id), ..desired };
        let mut external = self.external.borrow_mut();
        external.retain(|o| o.dependent != applied.dependent || o.key != applied.key);
        external.push(applied.clone());
        Ok(applied)
    }

    async fn delete_external(&self, _: &DependentSpec, actual: &ExternalObject) -> Result<(), Conflict> {
        self.external.borrow_mut().retain(|o| o.dependent != actual.dependent || o.key != actual.key);
        Ok(())
    }

    fn current(&self, spec: &DependentSpec) -> Vec<Value> {
        let mut objects: Vec<Value> = self
            .objects
            .borrow()
            .iter()
            .filter(|(kind, object)| same_kind(kind, &spec.kind) && core_dependent::belongs(spec, self.primary, object))
            .filter(|_| !spec.read_only)
            .map(|(_, object)| object.clone())
            .collect();
        objects.sort_by_key(ObjectKey::of_json);
        objects
    }

    fn cached(&self, spec: &DependentSpec, key: &ObjectKey) -> Option<Value> {
        let objects = self.objects.borrow();
        objects.iter().find(|(kind, object)| Self::matches(kind, object, spec, key)).map(|(_, object)| object.clone())
    }

    fn key(&self, object: &Value) -> Option<ObjectKey> {
        ObjectKey::of_json(object)
    }

    fn json(&self, object: &Value) -> Value {
        object.clone()
    }

    fn observe(&self, _: &DependentSpec, _: &[ObjectKey]) {}

    async fn apply(
        &self,
        spec: &DependentSpec,
        key: &ObjectKey,
        object: Value,
        actual: Option<Value>,
    ) -> Result<Value, Conflict> {
        let mut objects = self.objects.borrow_mut();
        let plugin = object["metadata"]["labels"][MANAGED_BY_LABEL].clone();
        let written = match actual {
            Some(actual) if actual["metadata"]["labels"][MANAGED_BY_LABEL] != plugin && !spec.adopt => {
                return Err(Conflict(workflow::conflict(spec, key)));
            }
            Some(actual) => {
                let mut merged = actual.clone();
                status::merge(&mut merged, &object);
                if merged == actual {
                    return Ok(actual);
                }
                if spec_of(&merged) != spec_of(&actual) {
                    merged["metadata"]["generation"] =
                        json!(actual["metadata"]["generation"].as_i64().unwrap_or(1) + 1);
                }
                merged["metadata"]["resourceVersion"] = json!(self.next_revision());
                objects.retain(|(kind, o)| !Self::matches(kind, o, spec, key));
                merged
            }
            None => {
                let mut created = object;
                created["metadata"]["uid"] = json!(format!("uid-{}", key.name));
                created["metadata"]["generation"] = json!(1);
                created["metadata"]["resourceVersion"] = json!(self.next_revision());
                created
            }
        };
        let kind = &spec.kind;
        let kind = Kind {
            group: kind.group.clone(),
            version: kind.version.clone(),
            kind: kind.kind.clone(),
            plural: kind.plural.clone(),
            namespaced: kind.namespaced,
        };
        objects.push((kind, written.clone()));
        Ok(written)
    }

    async fn delete(&self, spec: &DependentSpec, object: &Value) -> Result<(), Conflict> {
        let Some(key) = ObjectKey::of_json(object) else { return Ok(()) };
        self.objects.borrow_mut().retain(|(kind, o)| !Self::matches(kind, o, spec, &key));
        Ok(())
    }

    async fn check(&self, name: &str, object: Option<&Value>) -> bool {
        let object = object.map(Value::to_string);
        (self.check)(name, &self.primary_json, object.as_deref())
    }

    fn is_conflict(&self, _: &Conflict) -> bool {
        true
    }
}

#[cfg(test)]
mod tests {
    use k8s_openapi::api::apps::v1::Deployment;
    use serde_json::{Value, json};

    use super::FakeHost;
    use crate::{Config, Context, Dependent, Desired, Error, Kind, Outcome, Reconciler};

    /// Runs a Deployment and reports its `readyReplicas`, which another controller (the
    /// Deployment controller) writes.
    struct App;

    impl Reconciler for App {
        type Primary = Value;

        fn config() -> Config {
            Config::new("app", Kind::namespaced("example.com", "v1", "App"))
                .dependent(Dependent::new("deployment", Kind::of::<Deployment>()))
        }

        fn desired(_: &Value, _: &Context) -> Result<Vec<Desired>, Error> {
            Ok(vec![Desired::new("deployment", &json!({ "metadata": { "name": "app" }, "spec": { "replicas": 2 } }))])
        }

        fn reconcile(app: Value, ctx: &Context) -> Result<Outcome, Error> {
            if app["spec"]["fail"] == true {
                return Err(Error::permanent("told to fail"));
            }
            let deployment = ctx.dependent("deployment").and_then(|d| d.objects.first());
            let ready = deployment.map_or(Value::Null, |d| d["status"]["readyReplicas"].clone());
            Ok(Outcome::done().status(json!({ "readyReplicas": ready })))
        }
    }

    fn app(fail: bool) -> Value {
        json!({
            "metadata": { "name": "app", "namespace": "default", "generation": 1 },
            "spec": { "fail": fail },
        })
    }

    #[test]
    fn another_controller_s_status_write_shows_in_the_next_run() {
        let mut host = FakeHost::new();
        let stable = host.run_until_stable::<App>(&app(false));
        assert_eq!(stable.status()["readyReplicas"], Value::Null);
        let before = stable.objects(&Kind::of::<Deployment>())[0]["metadata"]["resourceVersion"].clone();
        host.set_status(&Kind::of::<Deployment>(), Some("default"), "app", &json!({ "readyReplicas": 2 }));
        let deployments = host.objects_of(&Kind::of::<Deployment>());
        assert_eq!(deployments.len(), 1, "the status is set on the stored Deployment: {deployments:?}");
        assert_ne!(deployments[0]["metadata"]["resourceVersion"], before, "a status write is a new version");
        assert_eq!(deployments[0]["spec"]["replicas"], 2, "the rest of the object stays");
        let stable = host.run_until_stable::<App>(&app(false));
        assert_eq!(stable.status()["readyReplicas"], 2);
        assert_eq!(stable.objects(&Kind::of::<Deployment>())[0]["status"]["readyReplicas"], 2);
    }

    #[test]
    #[should_panic(expected = "FakeHost::set_status: no apps/v1/Deployment default/absent")]
    fn set_status_of_a_missing_object_panics() {
        FakeHost::new().set_status(&Kind::of::<Deployment>(), Some("default"), "absent", &json!({}));
    }

    #[test]
    #[should_panic(expected = "FakeHost::run_until_stable: pass 1 failed: Permanent(\"told to fail\")")]
    fn a_failing_pass_fails_run_until_stable() {
        let _ = FakeHost::new().run_until_stable::<App>(&app(true));
    }

    #[test]
    fn run_until_settled_records_a_failing_pass() {
        let stable = FakeHost::new().run_until_settled::<App>(&app(true));
        assert_eq!(stable.last().error(), &Error::permanent("told to fail"));
        assert_eq!(stable.condition("Ready").map(|c| &c["reason"]), Some(&json!("ReconcileFailed")));
    }
}
