//! [`FakeHost::run_until_stable`]: the whole reconcile loop, in memory, by the host's rules.
//!
//! The loop is `wasmop_core::settle`'s, which `wasmop test` runs too: each pass does what the
//! host does for one reconcile, through the same rules crate: `desired`, the capability checks,
//! the dependents' workflow (order, skips, deletes, pruning, kept objects, adoption conflicts,
//! collected errors, readiness), `reconcile` with the dependents' states, then the writes:
//! labels and annotations, and the status merge patch with `observedGeneration` and the host's
//! conditions, written only when it changes something. Passes repeat until one leaves the store
//! as it was. Here the plugin side of the loop ([`wasmop_core::settle::Guest`]) is the
//! reconciler, run natively.
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

use std::cell::RefCell;
use std::marker::PhantomData;

use serde::Serialize;
use serde_json::{Value, json};
use wasmop_core::dependent::Desired as CoreDesired;
use wasmop_core::fixture::{self, Scenario};
use wasmop_core::predicate::EventKind as CoreEventKind;
use wasmop_core::settle::{
    DependentState as CoreState, Event as CoreEvent, Failure, Guest, MAX_PASSES, Outcome as CoreOutcome, Pass, Settle,
    Unsettled, View, World,
};
use wasmop_core::{KindRef, ObjectKey};

use super::host::{FakeHost, Plugin, Request, Run};
use super::spec::spec_of;
use crate::{DependentState, Desired, Error, Kind, Reconciler};

/// The time the FakeHost's clock shows, for `lastTransitionTime`: fixed, so that runs repeat.
pub const FAKE_NOW: &str = wasmop_core::settle::FAKE_NOW;

/// The result of [`FakeHost::run_until_stable`]: every pass, and the store as it ended.
#[derive(Debug)]
pub struct Stable {
    passes: Vec<Run>,
    primary: Value,
    world: World,
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
        self.world.objects_of(&kind.to_core())
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
        let guest = Native::<R>::new(self.failures.clone());
        let settle = Settle::new(spec_of(&config), &guest)
            .unwrap_or_else(|e| panic!("FakeHost::run_until_stable: the plugin's dependents are invalid: {e}"));
        let primary = super::host::to_object("run_until_stable", &config.primary, primary);
        let key = ObjectKey::of_json(&primary).expect("FakeHost::run_until_stable: the primary needs metadata.name");
        let mut world = self.world();
        let settled = settle.settle(&mut world, primary).expect("the primary has a name");
        let passes = match settled {
            Ok(passes) => passes,
            Err(Unsettled(passes)) => {
                let runs = guest.runs(passes);
                panic!(
                    "FakeHost::run_until_stable: still changing after {MAX_PASSES} passes; a reconcile of its own \
                     result must change nothing (last pass: {:?})",
                    runs.last().map(Run::result)
                )
            }
        };
        self.objects = world.objects.iter().map(|(kind, object)| (Kind::from_core(kind), object.clone())).collect();
        self.external = world.external.iter().cloned().map(crate::External::from_core).collect();
        self.revision = world.revision;
        let primary = world.stored(&config.primary.to_core(), &key).cloned().unwrap_or(Value::Null);
        Stable { passes: guest.runs(passes), primary, world }
    }

    /// Runs a fixture (`wasmop_core::fixture`, the conformance scenarios' format: a primary, the
    /// objects and external records around it, what must hold, and changes made afterwards)
    /// with `R` in `namespace`, as `wasmop test` runs it with a compiled plugin: in a fresh store
    /// (this host gives only the kinds it fails), settled as [`FakeHost::run_until_settled`]
    /// does, each change decided as [`FakeHost::reconciles_on`] and
    /// [`FakeHost::reconciles_on_watched`] do. The outcome's `failures` are the unmet
    /// expectations; an error when the fixture cannot be run (a loop that never settles, a
    /// change of an object that does not exist).
    pub fn run_fixture<R: Reconciler>(&self, scenario: &Scenario, namespace: &str) -> Result<fixture::Outcome, String> {
        let guest = Native::<R>::new(self.failures.clone());
        let settle = Settle::new(spec_of(&R::config()), &guest)?;
        fixture::run(&settle, scenario, namespace)
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
}

impl FakeHost {
    /// This host's store in the loop's terms.
    pub(super) fn world(&self) -> World {
        let core = |objects: &[(Kind, Value)]| objects.iter().map(|(k, o)| (k.to_core(), o.clone())).collect();
        World {
            objects: core(&self.objects),
            secondaries: core(&self.secondaries),
            dependents: self
                .dependents
                .iter()
                .map(|d| CoreState { name: d.name.clone(), phase: d.phase, objects: d.objects.clone() })
                .collect(),
            external: self.external.iter().cloned().map(crate::External::into_core).collect(),
            inbound: self.inbound.clone(),
            revision: self.revision,
        }
    }

    /// The host a plugin's call sees through `view`, failing reads of the kinds this host fails.
    fn of_view(view: &View, failures: &[(Kind, String)]) -> FakeHost {
        let sdk = |objects: &[(KindRef, Value)]| objects.iter().map(|(k, o)| (Kind::from_core(k), o.clone())).collect();
        FakeHost {
            objects: sdk(&view.objects),
            secondaries: sdk(&view.secondaries),
            failures: failures.to_vec(),
            dependents: view
                .dependents
                .iter()
                .map(|d| DependentState { name: d.name.clone(), phase: d.phase, objects: d.objects.clone() })
                .collect(),
            revision: 0,
            external: view.external.iter().cloned().map(crate::External::from_core).collect(),
            inbound: view.inbound.clone(),
            recorded: None,
        }
    }
}

/// What one `reconcile` returned and logged.
type Reconciled = (Result<crate::Outcome, Error>, Vec<super::LogLine>);

/// A reconciler run natively: the plugin side of the loop. It keeps what each `reconcile`
/// returned and logged, for the [`Run`]s.
pub(super) struct Native<R> {
    failures: Vec<(Kind, String)>,
    plugin: Plugin,
    reconciles: RefCell<Vec<Reconciled>>,
    reconciler: PhantomData<fn() -> R>,
}

impl<R: Reconciler> Native<R> {
    pub(super) fn new(failures: Vec<(Kind, String)>) -> Self {
        Self { failures, plugin: Plugin::of::<R>(), reconciles: RefCell::default(), reconciler: PhantomData }
    }

    fn context(&self, view: &View) -> (FakeHost, crate::Context, std::rc::Rc<RefCell<Vec<super::LogLine>>>) {
        let host = FakeHost::of_view(view, &self.failures);
        let (ctx, logs) = host.context(&self.plugin, 0, false);
        (host, ctx, logs)
    }

    /// The passes as [`Run`]s: what `reconcile` returned and logged, or the workflow's failure.
    fn runs(&self, passes: Vec<Pass>) -> Vec<Run> {
        let mut reconciles = self.reconciles.take().into_iter();
        passes
            .into_iter()
            .map(|pass| {
                let (result, logs) = match (pass.reconciled, pass.result) {
                    (true, _) => reconciles.next().expect("a reconcile per reconciled pass"),
                    (false, result) => (result.map(|_| crate::Outcome::done()).map_err(from_failure), Vec::new()),
                };
                let host = FakeHost::of_view(&pass.view, &self.failures);
                let request =
                    Request { host, plugin: self.plugin.clone(), json: pass.primary, attempt: 0, last_attempt: false };
                Run { result, logs, request, error_status: crate::error_status::<R> }
            })
            .collect()
    }
}

fn from_failure(failure: Failure) -> Error {
    match failure {
        Failure::Transient(m) => Error::Transient(m),
        Failure::Permanent(m) => Error::Permanent(m),
        Failure::Invalid(m) => Error::Invalid(m),
    }
}

fn to_failure(error: Error) -> Failure {
    match error {
        Error::Transient(m) | Error::TransientAfter(m, _) => Failure::Transient(m),
        Error::Permanent(m) => Failure::Permanent(m),
        Error::Invalid(m) => Failure::Invalid(m),
    }
}

/// `outcome` in the settle loop's terms.
pub(super) fn to_outcome(outcome: &crate::Outcome) -> CoreOutcome {
    CoreOutcome {
        readiness: outcome.readiness.clone(),
        status: outcome.status.clone(),
        labels: outcome.labels.clone(),
        annotations: outcome.annotations.clone(),
        reschedule_after_ms: outcome.reschedule_after.map(|d| d.as_millis() as u64),
        events: outcome
            .events
            .iter()
            .map(|e| CoreEvent {
                event_type: format!("{:?}", e.event_type),
                reason: e.reason.clone(),
                action: e.action.clone(),
                note: e.note.clone(),
            })
            .collect(),
    }
}

impl<R: Reconciler> Guest for Native<R> {
    fn desired(&self, view: &View, primary: &str) -> Result<Vec<CoreDesired>, Failure> {
        let (_host, ctx, _logs) = self.context(view);
        let desired = crate::desired::<R>(primary, &ctx).map_err(to_failure)?;
        Ok(desired
            .into_iter()
            .map(|Desired { dependent, object, keep, key }| CoreDesired { dependent, object, keep, key })
            .collect())
    }

    fn reconcile(&self, view: &View, primary: &str) -> Result<CoreOutcome, Failure> {
        let (_host, ctx, logs) = self.context(view);
        let result = crate::run::<R>(primary, &ctx);
        drop(ctx);
        let core = result.as_ref().map(to_outcome).map_err(|e| to_failure(e.clone()));
        self.reconciles.borrow_mut().push((result, logs.take()));
        core
    }

    fn error_status(&self, view: &View, primary: &str, failure: &Failure) -> Option<Value> {
        let (_host, ctx, _logs) = self.context(view);
        crate::error_status::<R>(primary, &from_failure(failure.clone()), &ctx)
    }

    fn check(&self, view: &View, name: &str, primary: &str, dependent: Option<&str>) -> bool {
        let (_host, ctx, _logs) = self.context(view);
        crate::check::<R>(name, primary, dependent, &ctx)
    }

    fn map_secondary(&self, view: &View, secondary: &str) -> Result<Vec<(Option<String>, String)>, String> {
        let (_host, ctx, _logs) = self.context(view);
        let refs = crate::map_secondary::<R>(secondary, None, &ctx)?;
        Ok(refs.into_iter().map(|r| (r.namespace, r.name)).collect())
    }

    fn secondaries_of(&self, view: &View, primary: &str) -> Result<Vec<(KindRef, Option<String>, String)>, String> {
        let (_host, ctx, _logs) = self.context(view);
        let refs = crate::secondaries_of::<R>(primary, &ctx)?;
        Ok(refs.into_iter().map(|r| (r.kind.to_core(), r.namespace, r.name)).collect())
    }

    fn filter(&self, name: &str, event: CoreEventKind, object: &Value, old: Option<&Value>) -> bool {
        R::filter(name, crate::EventKind::from_core(event), object, old)
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
