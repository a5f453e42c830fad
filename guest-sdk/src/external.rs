//! State outside the cluster: [`External`] objects, [`ExternalDependent`]s the host keeps in
//! shape through the plugin's exports, and [`Polling`] of that state (JOSDK's external dependent
//! resources and polling event sources).

use std::time::Duration;

use serde::Serialize;
use serde::de::DeserializeOwned;
use serde_json::Value;

use crate::bindings::wasmop::plugin::types as wit;
use crate::dependent::check_into_wit;
use crate::wire::millis;
use wasmop_core::check::Check;

/// An object outside the cluster: as [`Reconciler::fetch`](crate::Reconciler::fetch) found it,
/// or as [`Reconciler::desired_external`](crate::Reconciler::desired_external) wants it.
///
/// ```
/// use wasmop_guest::External;
///
/// let record = External::new("record", "www", &serde_json::json!({ "type": "A", "value": "10.0.0.1" }));
/// assert_eq!(record.key, "www");
/// assert_eq!(record.id, None);
/// ```
#[derive(Clone, Debug, PartialEq)]
pub struct External {
    /// The external dependent it belongs to (any name for state the plugin only observes).
    pub dependent: String,
    /// Identifies it among the dependent's objects of one primary (e.g. the record's name);
    /// empty for a single object.
    pub key: String,
    /// The ID the external system gave it; in a desired object the host fills it in from its
    /// tracking record.
    pub id: Option<String>,
    /// The object. The host compares desired and actual field by field: every field of the
    /// desired object must be present and equal in the actual one.
    pub object: Value,
}

impl External {
    /// `object` of the dependent `dependent`, under `key`, without an ID; an object that does not
    /// serialize becomes `null`.
    pub fn new(dependent: impl Into<String>, key: impl Into<String>, object: &impl Serialize) -> Self {
        Self {
            dependent: dependent.into(),
            key: key.into(),
            id: None,
            object: serde_json::to_value(object).unwrap_or(Value::Null),
        }
    }

    /// The object with the ID the external system gave it.
    #[must_use]
    pub fn with_id(mut self, id: impl Into<String>) -> Self {
        self.id = Some(id.into());
        self
    }

    /// The object as `T`.
    pub fn object_as<T: DeserializeOwned>(&self) -> Result<T, String> {
        serde_json::from_value(self.object.clone())
            .map_err(|e| format!("external object {}/{} does not decode: {e}", self.dependent, self.key))
    }

    pub(crate) fn into_wit(self) -> wit::ExternalObject {
        wit::ExternalObject { dependent: self.dependent, key: self.key, id: self.id, object: self.object.to_string() }
    }

    pub(crate) fn into_core(self) -> wasmop_core::external::ExternalObject {
        wasmop_core::external::ExternalObject {
            dependent: self.dependent,
            key: self.key,
            id: self.id,
            object: self.object,
        }
    }

    pub(crate) fn from_core(object: wasmop_core::external::ExternalObject) -> Self {
        Self { dependent: object.dependent, key: object.key, id: object.id, object: object.object }
    }

    pub(crate) fn from_wit(object: wit::ExternalObject) -> Self {
        Self {
            dependent: object.dependent,
            key: object.key,
            id: object.id,
            object: serde_json::from_str(&object.object).unwrap_or(Value::Null),
        }
    }
}

/// The IDs the host keeps for a primary's external objects, as [`Reconciler::fetch`](crate::Reconciler::fetch)
/// gets them.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Tracked(pub Vec<(String, String, String)>);

impl Tracked {
    /// The ID the host keeps for `key` of `dependent`.
    pub fn id(&self, dependent: &str, key: &str) -> Option<&str> {
        self.0.iter().find(|(d, k, _)| d == dependent && k == key).map(|(_, _, id)| id.as_str())
    }

    /// Every `(key, id)` kept for `dependent`.
    pub fn of<'a>(&'a self, dependent: &'a str) -> impl Iterator<Item = (&'a str, &'a str)> + 'a {
        self.0.iter().filter(move |(d, _, _)| d == dependent).map(|(_, k, id)| (k.as_str(), id.as_str()))
    }

    pub(crate) fn from_wit(tracked: Vec<wit::TrackedId>) -> Self {
        Self(tracked.into_iter().map(|t| (t.dependent, t.key, t.id)).collect())
    }
}

/// Where the host keeps the IDs of an external dependent's objects: an object named
/// `<primary>-<plugin>-ext`, owned by the primary.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum Tracking {
    /// A ConfigMap (the default).
    #[default]
    ConfigMap,
    /// A Secret, for IDs that must not be read by everyone who can read ConfigMaps.
    Secret,
}

/// A kind of object outside the cluster the plugin's reconciles keep in shape (JOSDK's external
/// dependent resource). The host compares what the plugin desires with what `fetch` found, and
/// calls [`Reconciler::apply_external`](crate::Reconciler::apply_external) or
/// [`Reconciler::delete_external`](crate::Reconciler::delete_external) only when they differ;
/// on deletion of the primary it deletes the objects before it releases the finalizer.
///
/// ```
/// use wasmop_guest::{ExternalDependent, Tracking};
///
/// let record = ExternalDependent::new("record").tracked_in(Tracking::Secret);
/// assert_eq!(record.tracking, Tracking::Secret);
/// ```
#[derive(Clone, Debug, PartialEq)]
#[non_exhaustive]
pub struct ExternalDependent {
    /// Unique among the plugin's dependents.
    pub name: String,
    /// Dependents that must be ready first.
    pub depends_on: Vec<String>,
    /// When the objects count as ready.
    pub ready_when: Option<Check>,
    /// Evaluated on the primary: when false the objects are deleted.
    pub reconcile_when: Option<Check>,
    /// Ready when no object is desired.
    pub ready_when_empty: bool,
    /// Where the IDs are kept.
    pub tracking: Tracking,
}

impl ExternalDependent {
    /// The external dependent `name`, tracked in a ConfigMap.
    pub fn new(name: impl Into<String>) -> Self {
        Self {
            name: name.into(),
            depends_on: Vec::new(),
            ready_when: None,
            reconcile_when: None,
            ready_when_empty: true,
            tracking: Tracking::ConfigMap,
        }
    }

    /// Reconciled only once `dependent` is ready.
    #[must_use]
    pub fn depends_on(mut self, dependent: impl Into<String>) -> Self {
        self.depends_on.push(dependent.into());
        self
    }

    /// Ready only when `check` holds on each fetched object.
    #[must_use]
    pub fn ready_when(mut self, check: Check) -> Self {
        self.ready_when = Some(check);
        self
    }

    /// Reconciled only while `check` holds on the primary; its objects are deleted otherwise.
    #[must_use]
    pub fn reconcile_when(mut self, check: Check) -> Self {
        self.reconcile_when = Some(check);
        self
    }

    /// Keeps the IDs in `tracking`.
    #[must_use]
    pub fn tracked_in(mut self, tracking: Tracking) -> Self {
        self.tracking = tracking;
        self
    }

    pub(crate) fn to_core(&self) -> wasmop_core::dependent::DependentSpec {
        let tracking = match self.tracking {
            Tracking::ConfigMap => wasmop_core::external::Tracking::ConfigMap,
            Tracking::Secret => wasmop_core::external::Tracking::Secret,
        };
        wasmop_core::dependent::DependentSpec::external(
            self.name.clone(),
            self.depends_on.clone(),
            self.ready_when.clone(),
            self.reconcile_when.clone(),
            self.ready_when_empty,
            tracking,
        )
    }

    pub(crate) fn into_wit(self) -> wit::ExternalDependent {
        wit::ExternalDependent {
            name: self.name,
            depends_on: self.depends_on,
            ready_when: self.ready_when.map(check_into_wit),
            reconcile_when: self.reconcile_when.map(check_into_wit),
            ready_when_empty: self.ready_when_empty,
            tracking: match self.tracking {
                Tracking::ConfigMap => wit::Tracking::ConfigMap,
                Tracking::Secret => wit::Tracking::Secret,
            },
        }
    }
}

/// How the host polls external state.
///
/// ```
/// use std::time::Duration;
/// use wasmop_guest::Polling;
///
/// let polling = Polling::per_resource(Duration::from_secs(30));
/// assert_eq!(polling.period, Duration::from_secs(30));
/// ```
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Polling {
    /// One `fetch` per primary (JOSDK's PerResourcePollingEventSource), or one `fetch_all`
    /// (PollingEventSource).
    pub global: bool,
    /// How often.
    pub period: Duration,
}

impl Polling {
    /// [`Reconciler::fetch`](crate::Reconciler::fetch) for each primary every `period`.
    pub fn per_resource(period: Duration) -> Self {
        Self { global: false, period }
    }

    /// [`Reconciler::fetch_all`](crate::Reconciler::fetch_all) every `period`.
    pub fn global(period: Duration) -> Self {
        Self { global: true, period }
    }

    pub(crate) fn into_wit(self) -> wit::Polling {
        wit::Polling {
            mode: if self.global { wit::PollingMode::Global } else { wit::PollingMode::PerResource },
            period_ms: millis(self.period),
        }
    }
}
