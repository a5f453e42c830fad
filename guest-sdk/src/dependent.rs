//! Dependent resources (JOSDK's managed dependents and workflows): what a plugin declares
//! ([`Dependent`], [`Check`]), what its reconciles want ([`Desired`]), where each dependent
//! stands afterwards ([`DependentState`]), and what a cleanup decides ([`Cleanup`]).

use std::time::Duration;

use serde::Serialize;
use serde::de::DeserializeOwned;
use serde_json::Value;

use crate::bindings::wasmop::plugin::types as wit;
use crate::wire::millis;
use wasmop_core::check::Check;
use wasmop_core::dependent::Phase;

use crate::{Error, Event, Kind};

/// Converts a [`Check`] into its WIT record.
pub(crate) fn check_into_wit(check: Check) -> wit::Condition {
    match check {
        Check::FieldEquals { path, value } => wit::Condition::FieldEquals(wit::FieldValue { path, value }),
        Check::FieldsEqual { left, right } => wit::Condition::FieldsEqual(wit::FieldPair { left, right }),
        Check::ConditionTrue(type_) => wit::Condition::ConditionTrue(type_),
        Check::Plugin(name) => wit::Condition::Plugin(name),
    }
}

/// A kind of object the plugin's reconciles want to exist, applied by the host with
/// server-side apply and tied to the primary (JOSDK's `KubernetesDependentResource`).
///
/// ```
/// use wasmop_guest::{Check, Dependent, Kind};
///
/// let deployment = Dependent::new("deployment", Kind::namespaced("apps", "v1", "Deployment").plural("deployments"))
///     .depends_on("configmap")
///     .ready_when(Check::fields_equal("status.readyReplicas", "spec.replicas"));
/// assert_eq!(deployment.depends_on, ["configmap"]);
/// ```
#[derive(Clone, Debug, PartialEq, Eq)]
#[non_exhaustive]
pub struct Dependent {
    /// Unique within the plugin; [`Desired`] objects and states name it.
    pub name: String,
    /// The kind of its objects.
    pub kind: Kind,
    /// Observed, never written.
    pub read_only: bool,
    /// Dependents that must be ready first.
    pub depends_on: Vec<String>,
    /// When its objects are ready; as soon as they exist when absent.
    pub ready_when: Option<Check>,
    /// When it should exist, evaluated on the primary; always when absent.
    pub reconcile_when: Option<Check>,
    /// Tied to the primary by annotations instead of an owner reference.
    pub annotation_owned: bool,
    /// Ready when the plugin desires none of its objects; true by default.
    pub ready_when_empty: bool,
    /// Takes over existing objects someone else manages; false by default.
    pub adopt: bool,
    /// The one namespace its objects live in, when not the primary's; none by default.
    pub namespace: Option<String>,
}

impl Dependent {
    /// The dependent `name` of kind `kind`: written, owned by the primary through a controller
    /// owner reference, ready once its objects exist.
    pub fn new(name: impl Into<String>, kind: Kind) -> Self {
        Self {
            name: name.into(),
            kind,
            read_only: false,
            depends_on: Vec::new(),
            ready_when: None,
            reconcile_when: None,
            annotation_owned: false,
            ready_when_empty: true,
            adopt: false,
            namespace: None,
        }
    }

    /// Its objects live in `namespace` (a dependent owned by annotations, in another namespace
    /// than the primary's): the host watches just that namespace for it, it is the default
    /// namespace of its desired objects, and objects in any other are refused.
    #[must_use]
    pub fn in_namespace(mut self, namespace: impl Into<String>) -> Self {
        self.namespace = Some(namespace.into());
        self
    }

    /// Not ready while the plugin desires none of its objects (by default a dependent with zero
    /// desired objects is ready: there is nothing to wait for).
    #[must_use]
    pub fn not_ready_when_empty(mut self) -> Self {
        self.ready_when_empty = false;
        self
    }

    /// Takes over an object that already exists and is managed by someone else (a forced
    /// server-side apply). Without it, such an object fails the dependent with a conflict that
    /// names it, and is left as it is.
    #[must_use]
    pub fn adopt(mut self) -> Self {
        self.adopt = true;
        self
    }

    /// Observed, never written: [`Reconciler::desired`](crate::Reconciler::desired) only names
    /// the objects (metadata name and namespace), and the state gives them as they are.
    #[must_use]
    pub fn read_only(mut self) -> Self {
        self.read_only = true;
        self
    }

    /// Reconciled only once the dependent `name` is ready; skipped until then.
    #[must_use]
    pub fn depends_on(mut self, name: impl Into<String>) -> Self {
        self.depends_on.push(name.into());
        self
    }

    /// Ready when `check` holds on every object (JOSDK's ready post-condition).
    #[must_use]
    pub fn ready_when(mut self, check: Check) -> Self {
        self.ready_when = Some(check);
        self
    }

    /// Exists only while `check` holds on the primary; otherwise its objects are deleted
    /// (JOSDK's reconcile pre-condition).
    #[must_use]
    pub fn reconcile_when(mut self, check: Check) -> Self {
        self.reconcile_when = Some(check);
        self
    }

    /// Tied to the primary by the `wasmop.dev/primary-name` and `wasmop.dev/primary-namespace`
    /// annotations: for objects in other namespaces. Cluster-scoped dependents of namespaced
    /// primaries always are.
    #[must_use]
    pub fn owned_by_annotations(mut self) -> Self {
        self.annotation_owned = true;
        self
    }

    /// The dependent as the core's workflow sees it, as the host converts the WIT record.
    pub(crate) fn to_core(&self) -> wasmop_core::dependent::DependentSpec {
        use wasmop_core::dependent::Ownership;
        wasmop_core::dependent::DependentSpec {
            name: self.name.clone(),
            kind: self.kind.to_core(),
            read_only: self.read_only,
            depends_on: self.depends_on.clone(),
            ready_when: self.ready_when.clone(),
            reconcile_when: self.reconcile_when.clone(),
            ready_when_empty: self.ready_when_empty,
            namespace: self.namespace.clone(),
            declared_ownership: if self.annotation_owned { Ownership::Annotations } else { Ownership::OwnerReference },
            adopt: self.adopt,
            external: None,
        }
    }

    pub(crate) fn into_wit(self) -> wit::Dependent {
        wit::Dependent {
            name: self.name,
            kind: self.kind.to_wit(),
            read_only: self.read_only,
            depends_on: self.depends_on,
            ready_when: self.ready_when.map(check_into_wit),
            reconcile_when: self.reconcile_when.map(check_into_wit),
            ownership: if self.annotation_owned { wit::Ownership::Annotations } else { wit::Ownership::OwnerReference },
            ready_when_empty: self.ready_when_empty,
            namespace: self.namespace,
            adopt: self.adopt,
        }
    }
}

/// One desired object of a dependent.
///
/// ```
/// use wasmop_guest::Desired;
/// use wasmop_guest::serde_json::json;
///
/// let html = Desired::new("configmap", &json!({
///     "apiVersion": "v1", "kind": "ConfigMap",
///     "metadata": { "name": "site-html" },
///     "data": { "index.html": "<h1>hi</h1>" },
/// }));
/// assert_eq!(html.dependent, "configmap");
/// ```
#[derive(Clone, Debug, PartialEq)]
pub struct Desired {
    /// The dependent's name.
    pub dependent: String,
    /// The object: `apiVersion`, `kind`, `metadata.name` (the namespace defaults to the
    /// primary's) and the fields the plugin manages.
    pub object: Value,
    /// Leave the object as the cluster holds it: neither applied nor pruned.
    pub keep: bool,
    /// For an external dependent: the object's key among the primary's objects of it.
    pub key: Option<String>,
}

impl Desired {
    /// `object` for the dependent `dependent`; an object that does not serialize becomes `null`,
    /// which the host refuses with an error naming the dependent.
    pub fn new(dependent: impl Into<String>, object: &impl Serialize) -> Self {
        Self {
            dependent: dependent.into(),
            object: serde_json::to_value(object).unwrap_or(Value::Null),
            keep: false,
            key: None,
        }
    }

    /// `object` of the external dependent `dependent` under `key` (e.g. the record's name):
    /// the host compares it with what `fetch` found and calls
    /// [`Reconciler::apply_external`](crate::Reconciler::apply_external) when they differ.
    ///
    /// ```
    /// use wasmop_guest::Desired;
    ///
    /// let record = Desired::external("record", "www", &serde_json::json!({ "value": "10.0.0.1" }));
    /// assert_eq!(record.key.as_deref(), Some("www"));
    /// ```
    pub fn external(dependent: impl Into<String>, key: impl Into<String>, object: &impl Serialize) -> Self {
        Self { key: Some(key.into()), ..Self::new(dependent, object) }
    }

    /// "Leave this one as it is": the object `name` (in `namespace`, default the primary's) of
    /// the dependent stays as the cluster holds it, neither applied nor pruned.
    ///
    /// ```
    /// use wasmop_guest::Desired;
    ///
    /// let untouched = Desired::unchanged("configmap", "site-html", None);
    /// assert!(untouched.keep);
    /// ```
    pub fn unchanged(dependent: impl Into<String>, name: &str, namespace: Option<&str>) -> Self {
        let mut object = serde_json::json!({ "metadata": { "name": name } });
        if let Some(namespace) = namespace {
            object["metadata"]["namespace"] = namespace.into();
        }
        Self { dependent: dependent.into(), object, keep: true, key: None }
    }

    pub(crate) fn into_wit(self) -> wit::DesiredObject {
        wit::DesiredObject {
            dependent: self.dependent,
            object: self.object.to_string(),
            keep: self.keep,
            key: self.key,
        }
    }
}

/// A dependent's state, as [`Context::dependent`](crate::Context::dependent) gives it.
#[derive(Clone, Debug, PartialEq)]
pub struct DependentState {
    /// The dependent's name.
    pub name: String,
    /// Where it stands.
    pub phase: Phase,
    /// Its objects as the cluster holds them now.
    pub objects: Vec<Value>,
}

impl DependentState {
    /// Whether its phase is [`Phase::Ready`].
    ///
    /// ```
    /// use wasmop_guest::{DependentState, Phase};
    ///
    /// let state = DependentState { name: "deployment".into(), phase: Phase::NotReady, objects: Vec::new() };
    /// assert!(!state.is_ready());
    /// ```
    pub fn is_ready(&self) -> bool {
        self.phase == Phase::Ready
    }

    /// Its objects decoded as `T`; an object that does not decode is a permanent error.
    pub fn objects_as<T: DeserializeOwned>(&self) -> Result<Vec<T>, Error> {
        self.objects
            .iter()
            .map(|o| serde_json::from_value(o.clone()))
            .collect::<Result<_, _>>()
            .map_err(|e| Error::permanent(format!("an object of dependent {} does not decode: {e}", self.name)))
    }

    pub(crate) fn from_wit(state: wit::DependentState) -> Self {
        let phase = match state.phase {
            wit::DependentPhase::Ready => Phase::Ready,
            wit::DependentPhase::NotReady => Phase::NotReady,
            wit::DependentPhase::Skipped => Phase::Skipped,
            wit::DependentPhase::Deleted => Phase::Deleted,
        };
        let objects = state.objects.iter().filter_map(|o| serde_json::from_str(o).ok()).collect();
        Self { name: state.name, phase, objects }
    }
}

/// What a [`Reconciler::cleanup`](crate::Reconciler::cleanup) decided (JOSDK's `DeleteControl`).
///
/// ```
/// use std::time::Duration;
/// use wasmop_guest::Cleanup;
///
/// // Not done yet: keep the primary until the external resource is gone.
/// let later = Cleanup::done().keep_finalizer().reschedule_after(Duration::from_secs(30));
/// assert!(later.keeps_finalizer());
/// ```
#[derive(Clone, Debug, Default, PartialEq)]
pub struct Cleanup {
    keep_finalizer: bool,
    reschedule_after: Option<Duration>,
    events: Vec<Event>,
}

impl Cleanup {
    /// Cleanup is complete: the host removes the finalizer.
    pub fn done() -> Self {
        Self::default()
    }

    /// Keep the finalizer: deletion waits. Pair it with a reschedule (or a watch) so that
    /// cleanup runs again.
    #[must_use]
    pub fn keep_finalizer(mut self) -> Self {
        self.keep_finalizer = true;
        self
    }

    /// Run cleanup again after `delay` unless an event comes first.
    #[must_use]
    pub fn reschedule_after(mut self, delay: Duration) -> Self {
        self.reschedule_after = Some(delay);
        self
    }

    /// Records `event` on the primary.
    #[must_use]
    pub fn event(mut self, event: Event) -> Self {
        self.events.push(event);
        self
    }

    /// Whether the finalizer is kept.
    pub fn keeps_finalizer(&self) -> bool {
        self.keep_finalizer
    }

    /// The events to record.
    pub fn events(&self) -> &[Event] {
        &self.events
    }

    pub(crate) fn into_wit(self) -> wit::CleanupOutcome {
        wit::CleanupOutcome {
            keep_finalizer: self.keep_finalizer,
            reschedule_after_ms: self.reschedule_after.map(millis),
            events: self.events.into_iter().map(Event::into_wit).collect(),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn dependents_and_checks_cross_into_the_contract() {
        let d = Dependent::new("ingress", Kind::namespaced("networking.k8s.io", "v1", "Ingress"))
            .depends_on("service")
            .reconcile_when(Check::field_equals("spec.exposed", true))
            .owned_by_annotations()
            .into_wit();
        assert_eq!(d.depends_on, ["service"]);
        assert!(matches!(&d.reconcile_when, Some(wit::Condition::FieldEquals(f)) if f.value == "true"));
        assert!(matches!(d.ownership, wit::Ownership::Annotations));
        assert!(d.ready_when.is_none() && !d.read_only);
    }

    #[test]
    fn states_decode_their_objects() {
        let state = DependentState::from_wit(wit::DependentState {
            name: "cm".into(),
            phase: wit::DependentPhase::Ready,
            objects: vec![r#"{"metadata":{"name":"a"}}"#.into()],
        });
        assert!(state.is_ready());
        let objects: Vec<k8s_openapi::api::core::v1::ConfigMap> = state.objects_as().unwrap();
        assert_eq!(objects[0].metadata.name.as_deref(), Some("a"));
        assert!(state.objects_as::<u32>().is_err());
    }

    #[test]
    fn cleanup_keeps_the_finalizer_only_when_asked() {
        let done = Cleanup::done().into_wit();
        assert!(!done.keep_finalizer && done.reschedule_after_ms.is_none());
        let kept = Cleanup::done().keep_finalizer().reschedule_after(Duration::from_secs(1)).into_wit();
        assert!(kept.keep_finalizer);
        assert_eq!(kept.reschedule_after_ms, Some(1000));
    }
}
