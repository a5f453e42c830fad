//! The dependents' workflow (JOSDK's workflows): dependents run in dependency order; one whose
//! dependencies are not all ready is skipped; one whose reconcile condition is false has its
//! objects deleted. [`run`] carries a reconcile's workflow out through a [`Driver`], which the
//! host implements against the API server and the FakeHost against its store.
//!
//! Semantics, as JOSDK users expect them:
//! - every desired object is checked ([`capability`](crate::capability)) before the first
//!   write, so a refused one leaves the cluster as it was;
//! - a dependent's objects that are no longer desired are deleted (pruned), except those the
//!   plugin marks as kept ([`Desired::keep`]);
//! - a failing apply or delete does not stop the dependents that do not depend on it: the
//!   errors are collected and returned together, and the dependents after a failed one are
//!   skipped;
//! - a dependent with zero desired objects has its objects pruned; it is ready unless declared
//!   `ready_when_empty: false`, so its readiness is the plugin's choice.

use std::collections::{HashMap, HashSet};

use serde_json::Value;

use crate::capability;
use crate::check::{self, Check};
use crate::dependent::{self, DependentSpec, Desired, Phase, PrimaryRef};
use crate::external::{self, ExternalObject};
use crate::kind::ObjectKey;

/// The dependents of a plugin in an order where each comes after those it depends on.
#[derive(Debug, Clone)]
pub struct Workflow {
    specs: Vec<DependentSpec>,
    order: Vec<usize>,
}

/// What to do with one dependent in this reconcile.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Step {
    /// A dependency is not ready: leave the objects as they are.
    Skip,
    /// The reconcile condition is false: delete the objects.
    Delete,
    /// Apply (or observe) the desired objects.
    Reconcile,
}

impl Workflow {
    /// Orders `specs`; an error names a duplicate name, an unknown dependency or a cycle.
    pub fn new(specs: Vec<DependentSpec>) -> Result<Self, String> {
        let dependents = &specs;
        let mut index = HashMap::new();
        for (i, d) in dependents.iter().enumerate() {
            if index.insert(d.name.as_str(), i).is_some() {
                return Err(format!("two dependents are named {:?}", d.name));
            }
        }
        for d in dependents {
            if let Some(unknown) = d.depends_on.iter().find(|n| !index.contains_key(n.as_str())) {
                return Err(format!("dependent {:?} depends on {unknown:?}, which is not declared", d.name));
            }
        }
        // Kahn's algorithm, keeping the declaration order among independent dependents.
        let mut waiting: Vec<usize> = dependents.iter().map(|d| d.depends_on.len()).collect();
        let mut order = Vec::with_capacity(dependents.len());
        let mut placed = vec![false; dependents.len()];
        while order.len() < dependents.len() {
            let Some(next) = (0..dependents.len()).find(|&i| !placed[i] && waiting[i] == 0) else {
                let stuck: Vec<&str> =
                    (0..dependents.len()).filter(|&i| !placed[i]).map(|i| dependents[i].name.as_str()).collect();
                return Err(format!("the dependents {stuck:?} depend on each other in a cycle"));
            };
            placed[next] = true;
            order.push(next);
            for (i, d) in dependents.iter().enumerate() {
                waiting[i] -= d.depends_on.iter().filter(|n| **n == dependents[next].name).count();
            }
        }
        Ok(Self { specs, order })
    }

    /// The dependents, in declaration order.
    pub fn specs(&self) -> &[DependentSpec] {
        &self.specs
    }

    /// Indexes into [`Workflow::specs`], dependencies first.
    pub fn order(&self) -> &[usize] {
        &self.order
    }
}

/// What to do with `dependent`, given the phases of the dependents before it and whether its
/// reconcile condition holds (`None`: it has none).
pub fn step(dependent: &DependentSpec, phases: &HashMap<String, Phase>, condition: Option<bool>) -> Step {
    let ready = |name: &String| matches!(phases.get(name), Some(Phase::Ready));
    if !dependent.depends_on.iter().all(ready) {
        Step::Skip
    } else if condition == Some(false) {
        Step::Delete
    } else {
        Step::Reconcile
    }
}

/// A dependent's state after the workflow: what `reconcile` gets.
#[derive(Debug, Clone)]
pub struct State<O> {
    /// The dependent's name.
    pub name: String,
    /// Where it stands.
    pub phase: Phase,
    /// Its objects as the cluster holds them now (after the writes).
    pub objects: Vec<O>,
    /// For an external dependent: its objects as the external system holds them now.
    pub external: Vec<ExternalObject>,
}

/// Why a workflow failed.
#[derive(Debug)]
pub enum WorkflowError<E> {
    /// A desired object is unusable (no name, not an object); nothing was written.
    Invalid {
        /// The dependent.
        dependent: String,
        /// What is wrong.
        reason: String,
    },
    /// The plugin asked for a write it may not make; nothing was written.
    Refused {
        /// The dependent the plugin named.
        dependent: String,
        /// The refused object and why.
        reason: String,
    },
    /// Writes failed; the dependents that did not depend on them were reconciled.
    Failed {
        /// Each failed dependent with its error, in workflow order.
        errors: Vec<(String, E)>,
        /// Every error is a conflict with someone else's object ([`conflict`]).
        conflicts: bool,
    },
}

impl<E> WorkflowError<E> {
    /// The reason drivers report it under (Event reason, condition reason).
    pub fn reason(&self) -> &'static str {
        match self {
            Self::Invalid { .. } => "InvalidDependent",
            Self::Refused { .. } => "CapabilityDenied",
            Self::Failed { conflicts: true, .. } => "DependentConflict",
            Self::Failed { .. } => "DependentFailed",
        }
    }

    /// Whether retrying may help: not for a plugin's invalid or refused objects.
    pub fn retry(&self) -> bool {
        matches!(self, Self::Failed { .. })
    }
}

impl<E: std::fmt::Display> std::fmt::Display for WorkflowError<E> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Self::Invalid { dependent, reason } => {
                write!(f, "desired object of dependent {dependent:?} is invalid: {reason}")
            }
            Self::Refused { reason, .. } => write!(f, "may not write {reason}"),
            Self::Failed { errors, .. } => {
                for (i, (dependent, error)) in errors.iter().enumerate() {
                    let sep = if i == 0 { "" } else { "; " };
                    write!(f, "{sep}dependent {dependent:?}: {error}")?;
                }
                Ok(())
            }
        }
    }
}

/// The message of an existing object the plugin would take over without declaring `adopt`.
pub fn conflict(spec: &DependentSpec, key: &ObjectKey) -> String {
    format!(
        "{} {key} exists and is managed by someone else; dependent {:?} does not adopt existing objects (declare it with adopt to take them over)",
        spec.kind, spec.name
    )
}

/// The cluster a workflow runs against.
#[allow(async_fn_in_trait, reason = "drivers are called with their concrete type; the host's futures are Send")]
pub trait Driver {
    /// An object as the driver holds it.
    type Object;
    /// A failed write.
    type Error: std::fmt::Display;

    /// The cached objects of `spec` that belong to the primary (see [`dependent::belongs`]),
    /// sorted by namespace and name.
    fn current(&self, spec: &DependentSpec) -> Vec<Self::Object>;
    /// The cached object of `spec` at `key`.
    fn cached(&self, spec: &DependentSpec, key: &ObjectKey) -> Option<Self::Object>;
    /// The key of `object`.
    fn key(&self, object: &Self::Object) -> Option<ObjectKey>;
    /// `object` as JSON, to evaluate conditions on.
    fn json(&self, object: &Self::Object) -> Value;
    /// A read-only dependent names `keys`: from now on a change of one reconciles the primary.
    fn observe(&self, spec: &DependentSpec, keys: &[ObjectKey]);
    /// Makes the cluster hold `object` (prepared) at `key`; `actual` is the cached object.
    /// An existing object someone else manages is taken over only when `spec.adopt`; else the
    /// write fails with [`conflict`].
    async fn apply(
        &self,
        spec: &DependentSpec,
        key: &ObjectKey,
        object: Value,
        actual: Option<Self::Object>,
    ) -> Result<Self::Object, Self::Error>;
    /// Deletes `object`; one already gone is not an error.
    async fn delete(&self, spec: &DependentSpec, object: &Self::Object) -> Result<(), Self::Error>;
    /// Evaluates the plugin condition `name` on the primary and, for a ready condition, a
    /// dependent's object.
    async fn check(&self, name: &str, object: Option<&Value>) -> bool;
    /// Whether `error` is a conflict with an object someone else manages ([`conflict`]).
    fn is_conflict(&self, error: &Self::Error) -> bool;
    /// The external dependent `spec`'s objects of the primary as the last fetch found them
    /// (after the host's own applies and deletes).
    fn fetched(&self, spec: &DependentSpec) -> Vec<ExternalObject>;
    /// Makes the external system hold `desired` (which differs from `actual`); returns the
    /// object as it now is, with its ID.
    async fn apply_external(
        &self,
        spec: &DependentSpec,
        desired: ExternalObject,
        actual: Option<ExternalObject>,
    ) -> Result<ExternalObject, Self::Error>;
    /// Deletes `actual` from the external system.
    async fn delete_external(&self, spec: &DependentSpec, actual: &ExternalObject) -> Result<(), Self::Error>;
}

/// Admitted desired objects by dependent name, each with its key.
pub type Admitted<'w> = HashMap<&'w str, Vec<(ObjectKey, Desired)>>;

/// The plugin's `desired` objects for `primary`, each checked against the dependent it names
/// ([`capability::check`]) and keyed, by dependent; the first object that is refused or invalid
/// fails them all. [`run`] admits every object before its first write, so a refused one leaves
/// the cluster as it was; a shadowed candidate's objects are admitted the same way.
pub fn admit<'w, E>(
    workflow: &'w Workflow,
    primary: &PrimaryRef,
    desired: Vec<Desired>,
) -> Result<Admitted<'w>, WorkflowError<E>> {
    let mut wanted = Admitted::new();
    for d in desired {
        let Some(spec) = workflow.specs().iter().find(|s| s.name == d.dependent) else {
            let reason = format!("objects of dependent {:?}: no dependent of that name is declared", d.dependent);
            return Err(WorkflowError::Refused { dependent: d.dependent, reason });
        };
        let invalid = |reason: String| WorkflowError::Invalid { dependent: d.dependent.clone(), reason };
        if spec.external.is_some() {
            // An external object's key is the plugin's; the cluster's rules do not apply to it.
            let key = ObjectKey { namespace: None, name: d.key.clone().unwrap_or_default() };
            let objects = wanted.entry(spec.name.as_str()).or_default();
            if objects.iter().any(|(k, _)| *k == key) {
                return Err(invalid(format!("two desired objects have the key {:?}", key.name)));
            }
            objects.push((key, d));
            continue;
        }
        if !d.object.is_object() {
            return Err(invalid("not a JSON object".into()));
        }
        capability::check(spec, primary, &d.object)
            .map_err(|reason| WorkflowError::Refused { dependent: d.dependent.clone(), reason })?;
        let key = dependent::key_of(spec, primary, &d.object).map_err(invalid)?;
        wanted.entry(spec.name.as_str()).or_default().push((key, d));
    }
    Ok(wanted)
}

/// Runs the workflow for `primary` (as JSON: `primary_json`) with the plugin's `desired`
/// objects; returns every dependent's state, in declaration order.
pub async fn run<D: Driver>(
    driver: &D,
    workflow: &Workflow,
    plugin: &str,
    primary: &PrimaryRef,
    primary_json: &Value,
    desired: Vec<Desired>,
) -> Result<Vec<State<D::Object>>, WorkflowError<D::Error>> {
    let specs = workflow.specs();
    let mut wanted = admit(workflow, primary, desired)?;
    let mut phases: HashMap<String, Phase> = HashMap::new();
    let mut states: Vec<Option<State<D::Object>>> = (0..specs.len()).map(|_| None).collect();
    let mut errors = Vec::new();
    for &i in workflow.order() {
        let spec = &specs[i];
        let precondition = match &spec.reconcile_when {
            None => None,
            Some(c) => Some(evaluate(driver, c, primary_json, None).await),
        };
        if spec.external.is_some() {
            let desired = wanted.remove(spec.name.as_str()).unwrap_or_default();
            let step = step(spec, &phases, precondition);
            let (phase, objects) = match run_external(driver, spec, step, desired).await {
                Ok(done) => done,
                Err(error) => {
                    errors.push((spec.name.clone(), error));
                    (Phase::NotReady, driver.fetched(spec))
                }
            };
            phases.insert(spec.name.clone(), phase);
            states[i] = Some(State { name: spec.name.clone(), phase, objects: Vec::new(), external: objects });
            continue;
        }
        let result = match step(spec, &phases, precondition) {
            Step::Skip => Ok((Phase::Skipped, driver.current(spec))),
            // Read-only dependents are never written, nor deleted.
            Step::Delete if spec.read_only => Ok((Phase::Skipped, Vec::new())),
            Step::Delete => delete_all(driver, spec, driver.current(spec)).await.map(|()| (Phase::Deleted, Vec::new())),
            Step::Reconcile => {
                let desired = wanted.remove(spec.name.as_str()).unwrap_or_default();
                match reconcile(driver, spec, plugin, primary, desired).await {
                    Ok(objects) => {
                        let ready = ready(driver, spec, &objects).await;
                        Ok((if ready { Phase::Ready } else { Phase::NotReady }, objects))
                    }
                    Err(e) => Err(e),
                }
            }
        };
        let (phase, objects) = result.unwrap_or_else(|error| {
            errors.push((spec.name.clone(), error));
            (Phase::NotReady, driver.current(spec))
        });
        phases.insert(spec.name.clone(), phase);
        states[i] = Some(State { name: spec.name.clone(), phase, objects, external: Vec::new() });
    }
    if errors.is_empty() {
        return Ok(states.into_iter().flatten().collect());
    }
    let conflicts = errors.iter().all(|(_, e)| driver.is_conflict(e));
    Err(WorkflowError::Failed { errors, conflicts })
}

/// Applies (or observes) the desired objects of `spec` and prunes the ones no longer desired.
async fn reconcile<D: Driver>(
    driver: &D,
    spec: &DependentSpec,
    plugin: &str,
    primary: &PrimaryRef,
    desired: Vec<(ObjectKey, Desired)>,
) -> Result<Vec<D::Object>, D::Error> {
    if spec.read_only {
        let keys: Vec<ObjectKey> = desired.into_iter().map(|(key, _)| key).collect();
        driver.observe(spec, &keys);
        return Ok(keys.iter().filter_map(|key| driver.cached(spec, key)).collect());
    }
    let mut objects = Vec::with_capacity(desired.len());
    let mut keep = HashSet::new();
    for (key, d) in desired {
        keep.insert(key.clone());
        let actual = driver.cached(spec, &key);
        if d.keep {
            objects.extend(actual);
            continue;
        }
        let object = dependent::prepare(spec, plugin, primary, &key, d.object);
        objects.push(driver.apply(spec, &key, object, actual).await?);
    }
    let stale = driver.current(spec).into_iter().filter(|o| driver.key(o).is_some_and(|k| !keep.contains(&k)));
    delete_all(driver, spec, stale.collect()).await?;
    Ok(objects)
}

/// One external dependent's step: applies the desired objects that differ from what the last
/// fetch found ([`external::matches`]), deletes those no longer desired (or all, on
/// [`Step::Delete`]), and says whether they are ready.
async fn run_external<D: Driver>(
    driver: &D,
    spec: &DependentSpec,
    step: Step,
    desired: Vec<(ObjectKey, Desired)>,
) -> Result<(Phase, Vec<ExternalObject>), D::Error> {
    let fetched = driver.fetched(spec);
    match step {
        Step::Skip => return Ok((Phase::Skipped, fetched)),
        Step::Delete => {
            for object in &fetched {
                driver.delete_external(spec, object).await?;
            }
            return Ok((Phase::Deleted, Vec::new()));
        }
        Step::Reconcile => {}
    }
    let mut objects = Vec::with_capacity(desired.len());
    for (key, d) in &desired {
        let actual = fetched.iter().find(|o| o.key == key.name).cloned();
        if d.keep {
            objects.extend(actual);
            continue;
        }
        match actual {
            Some(actual) if external::matches(&d.object, &actual.object) => objects.push(actual),
            actual => {
                let want = ExternalObject {
                    dependent: spec.name.clone(),
                    key: key.name.clone(),
                    id: actual.as_ref().and_then(|a| a.id.clone()),
                    object: d.object.clone(),
                };
                objects.push(driver.apply_external(spec, want, actual).await?);
            }
        }
    }
    for stale in fetched.iter().filter(|o| !desired.iter().any(|(k, _)| k.name == o.key)) {
        driver.delete_external(spec, stale).await?;
    }
    let ready = if objects.is_empty() {
        spec.ready_when_empty
    } else if let Some(ready_when) = &spec.ready_when {
        let mut all = true;
        for object in &objects {
            all &= evaluate(driver, ready_when, &object.object, Some(&object.object)).await;
        }
        all
    } else {
        true
    };
    Ok((if ready { Phase::Ready } else { Phase::NotReady }, objects))
}

async fn delete_all<D: Driver>(driver: &D, spec: &DependentSpec, objects: Vec<D::Object>) -> Result<(), D::Error> {
    for object in objects {
        driver.delete(spec, &object).await?;
    }
    Ok(())
}

/// Whether every object satisfies the dependent's ready condition (existing is enough without
/// one); zero objects are ready unless the dependent says otherwise.
async fn ready<D: Driver>(driver: &D, spec: &DependentSpec, objects: &[D::Object]) -> bool {
    if objects.is_empty() {
        return spec.ready_when_empty;
    }
    let Some(ready_when) = &spec.ready_when else { return true };
    for object in objects {
        let json = driver.json(object);
        if !evaluate(driver, ready_when, &json, Some(&json)).await {
            return false;
        }
    }
    true
}

/// Evaluates `condition` on `target`; a plugin condition asks the driver, with `dependent`.
async fn evaluate<D: Driver>(driver: &D, condition: &Check, target: &Value, dependent: Option<&Value>) -> bool {
    match (check::holds(condition, target), condition) {
        (Some(holds), _) => holds,
        (None, Check::Plugin(name)) => driver.check(name, dependent).await,
        (None, _) => false,
    }
}

/// Runs a future that never waits, as the FakeHost's drivers' are, to completion.
pub fn complete<F: std::future::Future>(future: F) -> F::Output {
    let mut future = std::pin::pin!(future);
    let mut context = std::task::Context::from_waker(std::task::Waker::noop());
    match future.as_mut().poll(&mut context) {
        std::task::Poll::Ready(output) => output,
        std::task::Poll::Pending => panic!("a synchronous driver's future waited"),
    }
}

#[cfg(test)]
mod tests {
    use std::cell::RefCell;

    use serde_json::json;

    use super::*;
    use crate::dependent::tests::{config_maps, primary};

    fn names(workflow: &Workflow) -> Vec<&str> {
        workflow.order().iter().map(|&i| workflow.specs()[i].name.as_str()).collect()
    }

    #[test]
    fn dependencies_come_first_and_independent_ones_keep_their_order() {
        let deps = vec![
            config_maps("ingress", &["service"]),
            config_maps("configmap", &[]),
            config_maps("service", &["configmap"]),
            config_maps("deployment", &["configmap"]),
        ];
        assert_eq!(names(&Workflow::new(deps).unwrap()), ["configmap", "service", "ingress", "deployment"]);
    }

    #[test]
    fn unknown_dependencies_duplicates_and_cycles_are_refused() {
        let unknown = Workflow::new(vec![config_maps("a", &["b"])]).unwrap_err();
        assert!(unknown.contains("\"b\", which is not declared"), "{unknown}");
        let twice = Workflow::new(vec![config_maps("a", &[]), config_maps("a", &[])]).unwrap_err();
        assert!(twice.contains("two dependents"), "{twice}");
        let cycle =
            Workflow::new(vec![config_maps("a", &["b"]), config_maps("b", &["a"]), config_maps("c", &[])]).unwrap_err();
        assert!(cycle.contains("[\"a\", \"b\"]") && cycle.contains("cycle"), "{cycle}");
    }

    #[test]
    fn a_dependent_runs_only_when_its_dependencies_are_ready() {
        let ingress = config_maps("ingress", &["service"]);
        let mut phases = HashMap::new();
        assert_eq!(step(&ingress, &phases, None), Step::Skip);
        phases.insert("service".to_string(), Phase::NotReady);
        assert_eq!(step(&ingress, &phases, Some(true)), Step::Skip);
        phases.insert("service".to_string(), Phase::Ready);
        assert_eq!(step(&ingress, &phases, None), Step::Reconcile);
        assert_eq!(step(&ingress, &phases, Some(false)), Step::Delete);
    }

    /// A store of JSON objects; applying the object named `fail` fails.
    #[derive(Default)]
    struct Store {
        objects: RefCell<Vec<Value>>,
        external: RefCell<Vec<ExternalObject>>,
        writes: RefCell<Vec<String>>,
    }

    impl Driver for Store {
        type Object = Value;
        type Error = String;

        fn current(&self, spec: &DependentSpec) -> Vec<Value> {
            self.objects.borrow().iter().filter(|o| dependent::belongs(spec, &primary(), o)).cloned().collect()
        }
        fn cached(&self, _: &DependentSpec, key: &ObjectKey) -> Option<Value> {
            self.objects.borrow().iter().find(|o| ObjectKey::of_json(o).as_ref() == Some(key)).cloned()
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
            _: &DependentSpec,
            key: &ObjectKey,
            object: Value,
            _: Option<Value>,
        ) -> Result<Value, String> {
            if key.name == "fail" {
                return Err("refused by the server".into());
            }
            self.writes.borrow_mut().push(format!("apply {key}"));
            self.objects.borrow_mut().retain(|o| ObjectKey::of_json(o).as_ref() != Some(key));
            self.objects.borrow_mut().push(object.clone());
            Ok(object)
        }
        async fn delete(&self, _: &DependentSpec, object: &Value) -> Result<(), String> {
            let key = ObjectKey::of_json(object);
            self.writes.borrow_mut().push(format!("delete {}", key.as_ref().unwrap()));
            self.objects.borrow_mut().retain(|o| ObjectKey::of_json(o) != key);
            Ok(())
        }
        async fn check(&self, _: &str, _: Option<&Value>) -> bool {
            true
        }
        fn is_conflict(&self, _: &String) -> bool {
            false
        }
        fn fetched(&self, spec: &DependentSpec) -> Vec<ExternalObject> {
            self.external.borrow().iter().filter(|o| o.dependent == spec.name).cloned().collect()
        }
        async fn apply_external(
            &self,
            _: &DependentSpec,
            desired: ExternalObject,
            _: Option<ExternalObject>,
        ) -> Result<ExternalObject, String> {
            self.writes.borrow_mut().push(format!("apply-external {}", desired.key));
            let id = desired.id.clone().unwrap_or_else(|| format!("id-{}", desired.key));
            let applied = ExternalObject { id: Some(id), ..desired };
            self.external.borrow_mut().retain(|o| o.key != applied.key);
            self.external.borrow_mut().push(applied.clone());
            Ok(applied)
        }
        async fn delete_external(&self, _: &DependentSpec, actual: &ExternalObject) -> Result<(), String> {
            self.writes.borrow_mut().push(format!("delete-external {}", actual.key));
            self.external.borrow_mut().retain(|o| o.key != actual.key);
            Ok(())
        }
    }

    fn desired(dependent: &str, name: &str) -> Desired {
        Desired { dependent: dependent.into(), object: json!({ "metadata": { "name": name } }), keep: false, key: None }
    }

    fn run_on(
        store: &Store,
        workflow: &Workflow,
        desired: Vec<Desired>,
    ) -> Result<Vec<State<Value>>, WorkflowError<String>> {
        complete(run(store, workflow, "p", &primary(), &json!({}), desired))
    }

    #[test]
    fn a_failing_apply_skips_its_dependents_but_not_the_independent_ones() {
        let workflow =
            Workflow::new(vec![config_maps("a", &[]), config_maps("b", &["a"]), config_maps("c", &[])]).unwrap();
        let store = Store::default();
        let err =
            run_on(&store, &workflow, vec![desired("a", "fail"), desired("b", "b1"), desired("c", "c1")]).unwrap_err();
        assert_eq!(err.to_string(), "dependent \"a\": refused by the server");
        assert_eq!((err.reason(), err.retry()), ("DependentFailed", true));
        assert_eq!(*store.writes.borrow(), ["apply ns/c1"], "c does not depend on a; b does");
    }

    #[test]
    fn objects_no_longer_desired_are_pruned_unless_kept() {
        let workflow = Workflow::new(vec![config_maps("a", &[])]).unwrap();
        let store = Store::default();
        run_on(&store, &workflow, vec![desired("a", "x"), desired("a", "y"), desired("a", "z")]).unwrap();
        let keep_y = Desired { keep: true, ..desired("a", "y") };
        let states = run_on(&store, &workflow, vec![desired("a", "x"), keep_y]).unwrap();
        assert_eq!(states[0].objects.len(), 2);
        assert!(store.writes.borrow().contains(&"delete ns/z".to_string()));
        assert!(!store.writes.borrow().iter().any(|w| w.ends_with("/y") && w.starts_with("delete")));
        // Zero desired objects: everything is pruned, and the dependent is ready by default.
        let states = run_on(&store, &workflow, Vec::new()).unwrap();
        assert_eq!((states[0].phase, states[0].objects.len()), (Phase::Ready, 0));
        assert!(store.objects.borrow().is_empty());
        let strict = Workflow::new(vec![DependentSpec { ready_when_empty: false, ..config_maps("a", &[]) }]).unwrap();
        assert_eq!(run_on(&store, &strict, Vec::new()).unwrap()[0].phase, Phase::NotReady);
    }

    #[test]
    fn a_refused_object_stops_the_workflow_before_any_write() {
        let workflow = Workflow::new(vec![config_maps("a", &[])]).unwrap();
        let store = Store::default();
        let secret = Desired { object: json!({ "kind": "Secret", "metadata": { "name": "s" } }), ..desired("a", "s") };
        let err = run_on(&store, &workflow, vec![desired("a", "x"), secret]).unwrap_err();
        assert!(matches!(err, WorkflowError::Refused { .. }), "{err}");
        assert!(store.writes.borrow().is_empty());
        let unknown = run_on(&store, &workflow, vec![desired("zzz", "x")]).unwrap_err();
        assert!(unknown.to_string().contains("no dependent of that name"), "{unknown}");
    }

    #[test]
    fn admitting_keys_the_objects_by_dependent_and_refuses_as_run_does() {
        let workflow = Workflow::new(vec![config_maps("a", &[]), config_maps("b", &[])]).unwrap();
        let admitted = admit::<std::convert::Infallible>(
            &workflow,
            &primary(),
            vec![desired("a", "x"), desired("b", "y"), desired("a", "z")],
        )
        .unwrap();
        let names = |d: &str| admitted[d].iter().map(|(key, _)| key.name.clone()).collect::<Vec<_>>();
        assert_eq!((names("a"), names("b")), (vec!["x".to_string(), "z".to_string()], vec!["y".to_string()]));
        let secret = Desired { object: json!({ "kind": "Secret", "metadata": { "name": "s" } }), ..desired("a", "s") };
        let refused =
            admit::<std::convert::Infallible>(&workflow, &primary(), vec![desired("a", "x"), secret]).unwrap_err();
        assert_eq!(refused.reason(), "CapabilityDenied", "{refused}");
        let store = Store::default();
        let secret = Desired { object: json!({ "kind": "Secret", "metadata": { "name": "s" } }), ..desired("a", "s") };
        assert_eq!(run_on(&store, &workflow, vec![secret]).unwrap_err().to_string(), refused.to_string());
        let invalid = admit::<std::convert::Infallible>(
            &workflow,
            &primary(),
            vec![Desired { object: json!([1]), ..desired("a", "x") }],
        );
        assert_eq!(invalid.unwrap_err().reason(), "InvalidDependent");
    }

    fn record(key: &str, value: &str) -> Desired {
        Desired { dependent: "record".into(), object: json!({ "value": value }), keep: false, key: Some(key.into()) }
    }

    #[test]
    fn external_objects_are_applied_only_when_they_differ_and_pruned_when_no_longer_desired() {
        let tracking = crate::external::Tracking::ConfigMap;
        let external = DependentSpec::external("record".into(), vec!["a".into()], None, None, true, tracking);
        let workflow = Workflow::new(vec![config_maps("a", &[]), external]).unwrap();
        let store = Store::default();
        let run = |desired: Vec<Desired>| complete(super::run(&store, &workflow, "p", &primary(), &json!({}), desired));
        let states = run(vec![desired("a", "x"), record("www", "1"), record("mail", "2")]).unwrap();
        assert_eq!(states[1].phase, Phase::Ready);
        assert_eq!(states[1].external.iter().map(|o| o.id.clone().unwrap()).collect::<Vec<_>>(), ["id-www", "id-mail"]);
        assert_eq!(store.writes.take(), ["apply ns/x", "apply-external www", "apply-external mail"]);
        // Unchanged: nothing written to the external system; a changed one applied with its ID.
        store.external.borrow_mut()[0].object["extra"] = json!("set by the system");
        run(vec![desired("a", "x"), record("www", "1"), record("mail", "3")]).unwrap();
        assert_eq!(store.writes.take(), ["apply ns/x", "apply-external mail"]);
        assert_eq!(store.fetched(&workflow.specs()[1])[1].id.as_deref(), Some("id-mail"));
        // No longer desired: deleted.
        run(vec![desired("a", "x"), record("www", "1")]).unwrap();
        assert_eq!(store.writes.take(), ["apply ns/x", "delete-external mail"]);
        // Duplicate keys are invalid before anything is written.
        let twice = run(vec![record("www", "1"), record("www", "2")]).unwrap_err();
        assert!(matches!(twice, WorkflowError::Invalid { .. }), "{twice}");
        assert!(store.writes.take().is_empty());
    }

    #[test]
    fn external_objects_follow_reconcile_when_and_wait_for_their_dependencies() {
        let tracking = crate::external::Tracking::Secret;
        let gated = DependentSpec::external(
            "record".into(),
            vec!["a".into()],
            Some(Check::ConditionTrue("Ready".into())),
            Some(Check::field_equals("spec.published", true)),
            false,
            tracking,
        );
        let strict = DependentSpec { ready_when_empty: false, ..config_maps("a", &[]) };
        let workflow = Workflow::new(vec![strict, gated]).unwrap();
        let store = Store::default();
        let published = json!({ "spec": { "published": true } });
        let run = |primary: &Value, desired: Vec<Desired>| {
            complete(super::run(&store, &workflow, "p", &crate::dependent::tests::primary(), primary, desired))
        };
        // "a" desires nothing and is not ready when empty: the record waits.
        let states = run(&published, vec![record("www", "1")]).unwrap();
        assert_eq!(states[1].phase, Phase::Skipped);
        assert!(store.writes.take().is_empty());
        // Ready dependency: applied; not ready until the fetched object says so.
        let states = run(&published, vec![desired("a", "x"), record("www", "1")]).unwrap();
        assert_eq!(states[1].phase, Phase::NotReady);
        assert_eq!(store.writes.take(), ["apply ns/x", "apply-external www"]);
        store.external.borrow_mut()[0].object["status"] =
            json!({ "conditions": [{ "type": "Ready", "status": "True" }] });
        let states = run(&published, vec![desired("a", "x"), record("www", "1")]).unwrap();
        assert_eq!((states[1].phase, store.writes.take()), (Phase::Ready, vec!["apply ns/x".to_string()]));
        // Unpublished: the record is deleted.
        let states =
            run(&json!({ "spec": { "published": false } }), vec![desired("a", "x"), record("www", "1")]).unwrap();
        assert_eq!(states[1].phase, Phase::Deleted);
        assert_eq!(store.writes.take(), ["apply ns/x", "delete-external www"]);
    }
}
