//! State outside the cluster (JOSDK's external dependent resources and polling event sources):
//! what the plugin's `fetch` last found per primary, the IDs the external system gave its
//! objects (kept in a tracking ConfigMap or Secret owned by the primary), and the calls of the
//! plugin's `apply-external` and `delete-external` exports on behalf of the workflow.
//!
//! The rules (when state changed, when an object needs an apply, what a tracking record holds)
//! are `wasmop_core::external`'s; this module holds the state and does the I/O. [`poller`]
//! fetches, outside every reconcile slot, and enqueues a primary only when its state changed.

pub mod poller;
mod tracking;

use std::collections::HashMap;
use std::sync::{Arc, Mutex};

use wasmop_core::external::{ExternalObject, Ids, Tracking};

use crate::object::ObjectKey;
use crate::runtime::bindings::wasmop::plugin::types::{self as wit, PluginConfig};
use crate::wire::Object;

pub use tracking::{TrackingError, TrackingRecords};

/// What the host knows of one primary's external state.
#[derive(Debug, Clone, PartialEq)]
pub enum Known {
    /// Not fetched yet: a reconcile must wait for the first fetch, or it would create objects
    /// that exist already.
    Unknown,
    /// The last fetch failed (the plugin's words); the state before it, if any, is kept.
    Failed(String),
    /// The objects the last fetch found, with the host's applies and deletes since.
    Objects(Vec<ExternalObject>),
}

#[derive(Debug, Default)]
struct Entry {
    objects: Option<Vec<ExternalObject>>,
    failed: Option<String>,
    /// The IDs tracked for the primary, once read from its tracking records.
    ids: Option<Ids>,
    /// The IDs its tracking records hold, as last read or written.
    recorded: Option<Ids>,
}

/// One plugin's external state, per primary.
pub struct ExternalState {
    plugin: String,
    /// The tracking of each external dependent, by name.
    trackings: HashMap<String, Tracking>,
    entries: Mutex<HashMap<ObjectKey, Entry>>,
    records: TrackingRecords,
}

impl ExternalState {
    /// The state of `config`'s plugin; `None` when it neither polls nor has external dependents.
    pub fn new(config: &PluginConfig, records: TrackingRecords) -> Option<Arc<Self>> {
        if config.polling.is_none() && config.external_dependents.is_empty() {
            return None;
        }
        let trackings = config
            .external_dependents
            .iter()
            .map(wasmop_core::dependent::DependentSpec::from)
            .filter_map(|spec| Some((spec.name, spec.external?)))
            .collect();
        Some(Arc::new(Self { plugin: config.name.clone(), trackings, entries: Mutex::new(HashMap::new()), records }))
    }

    fn entries(&self) -> std::sync::MutexGuard<'_, HashMap<ObjectKey, Entry>> {
        self.entries.lock().expect("never poisoned")
    }

    /// What is known of `key`'s external state.
    pub fn known(&self, key: &ObjectKey) -> Known {
        let entries = self.entries();
        match entries.get(key) {
            Some(Entry { failed: Some(reason), .. }) => Known::Failed(reason.clone()),
            Some(Entry { objects: Some(objects), .. }) => Known::Objects(objects.clone()),
            _ => Known::Unknown,
        }
    }

    /// Records a fetch of `key`; true when the primary should be reconciled: the state changed,
    /// or the fetch started or stopped failing.
    pub fn fetched(&self, key: &ObjectKey, result: Result<Vec<ExternalObject>, String>) -> bool {
        let mut entries = self.entries();
        let entry = entries.entry(key.clone()).or_default();
        match result {
            Ok(objects) => {
                let recovered = entry.failed.take().is_some();
                let changed = wasmop_core::external::changed(entry.objects.as_deref(), &objects);
                if changed && let Some(ids) = &mut entry.ids {
                    // IDs the fetch found (an object created before a crash, before its ID
                    // was recorded) are tracked from now on.
                    *ids = wasmop_core::external::track(ids, objects.iter().filter(|o| self.tracks(o)), []);
                }
                entry.objects = Some(objects);
                changed || recovered
            }
            Err(reason) => entry.failed.replace(reason).is_none(),
        }
    }

    /// Whether the plugin has external dependents.
    pub fn has_dependents(&self) -> bool {
        !self.trackings.is_empty()
    }

    /// Whether `object` belongs to an external dependent (and so has its ID tracked).
    pub fn tracks(&self, object: &ExternalObject) -> bool {
        self.trackings.contains_key(&object.dependent)
    }

    /// The host applied `object`: the state holds it, with its ID, until the next fetch.
    pub fn applied(&self, key: &ObjectKey, object: ExternalObject) {
        let mut entries = self.entries();
        let entry = entries.entry(key.clone()).or_default();
        if let Some(ids) = &mut entry.ids
            && let Some(id) = &object.id
        {
            ids.insert((object.dependent.clone(), object.key.clone()), id.clone());
        }
        let objects = entry.objects.get_or_insert_with(Vec::new);
        objects.retain(|o| o.dependent != object.dependent || o.key != object.key);
        objects.push(object);
    }

    /// The host deleted `object`.
    pub fn deleted(&self, key: &ObjectKey, object: &ExternalObject) {
        let mut entries = self.entries();
        let Some(entry) = entries.get_mut(key) else { return };
        if let Some(ids) = &mut entry.ids {
            ids.remove(&(object.dependent.clone(), object.key.clone()));
        }
        if let Some(objects) = &mut entry.objects {
            objects.retain(|o| o.dependent != object.dependent || o.key != object.key);
        }
    }

    /// Forgets a primary that is gone.
    pub fn forget(&self, key: &ObjectKey) {
        self.entries().remove(key);
    }

    /// Forgets every primary but `live` (those deleted since the last round).
    pub fn retain(&self, live: &std::collections::HashSet<ObjectKey>) {
        self.entries().retain(|key, _| live.contains(key));
    }

    /// The IDs tracked for `primary`, read from its tracking records the first time.
    pub async fn ids(&self, key: &ObjectKey, primary: &Object) -> Result<Ids, kube::Error> {
        if let Some(ids) = self.entries().get(key).and_then(|e| e.ids.clone()) {
            return Ok(ids);
        }
        let ids = self.records.read(&self.plugin, primary, &self.trackings).await?;
        let mut entries = self.entries();
        let entry = entries.entry(key.clone()).or_default();
        entry.recorded.get_or_insert_with(|| ids.clone());
        Ok(entry.ids.get_or_insert(ids).clone())
    }

    /// The IDs of `key` its tracking records do not hold yet: those applied, deleted or adopted
    /// by name (a fetch found them) since the records were last read or written.
    pub fn unrecorded(&self, key: &ObjectKey) -> Option<Ids> {
        let entries = self.entries();
        let entry = entries.get(key)?;
        let ids = entry.ids.as_ref()?;
        (entry.recorded.as_ref() != Some(ids)).then(|| ids.clone())
    }

    /// Writes `primary`'s tracking records when they do not hold its IDs as the host knows them
    /// ([`ExternalState::unrecorded`]).
    pub async fn persist(&self, key: &ObjectKey, primary: &Object) -> Result<(), TrackingError> {
        let Some(now) = self.unrecorded(key) else { return Ok(()) };
        self.records.write(&self.plugin, primary, &self.trackings, &now).await?;
        if let Some(entry) = self.entries().get_mut(key) {
            entry.recorded = Some(now);
        }
        Ok(())
    }
}

/// The plugin's `apply-external` and `delete-external` for one reconcile of one primary; each
/// call goes out only while this replica leads, and its result is kept in the state.
pub struct ExternalCalls {
    /// The plugin's state.
    pub state: Arc<ExternalState>,
    /// The version of the plugin the reconcile runs.
    pub module: Arc<crate::runtime::Module>,
    /// What the calls may read.
    pub view: Arc<dyn crate::runtime::CacheReader>,
    /// The primary's key.
    pub key: ObjectKey,
    /// The primary as JSON.
    pub primary: Arc<String>,
    /// The fence writes go through.
    pub fence: crate::fence::Fence,
}

/// A failed `apply-external` or `delete-external`.
#[derive(Debug, thiserror::Error)]
#[error("{what} of external object {dependent}/{key} failed: {message}")]
pub struct CallFailure {
    /// `apply` or `delete`.
    pub what: &'static str,
    /// The external dependent.
    pub dependent: String,
    /// The object's key.
    pub key: String,
    /// The plugin's words, or the trap.
    pub message: String,
    /// The plugin said retrying will not help.
    pub permanent: bool,
}

impl ExternalCalls {
    /// Runs `apply-external` for `desired` (its ID from the tracking record when the fetch
    /// found none) and keeps the result.
    pub async fn apply(
        &self,
        mut desired: ExternalObject,
        actual: Option<ExternalObject>,
    ) -> Result<ExternalObject, CallFailure> {
        if desired.id.is_none() {
            let tracked = self.state.entries().get(&self.key).and_then(|e| {
                e.ids.as_ref().and_then(|ids| ids.get(&(desired.dependent.clone(), desired.key.clone())).cloned())
            });
            desired.id = tracked;
        }
        let failure = |message: String, permanent: bool| CallFailure {
            what: "apply",
            dependent: desired.dependent.clone(),
            key: desired.key.clone(),
            message,
            permanent,
        };
        let (wanted, found) = (to_wit(&desired), actual.as_ref().map(to_wit));
        let call = self.module.apply_external(self.view.clone(), &self.primary, &wanted, found.as_ref());
        let applied = match self.fence.hold(call).await {
            Err(unanswered) => return Err(failure(unanswered.to_string(), false)),
            Ok(Err(trap)) => return Err(failure(trap.to_string(), false)),
            Ok(Ok(Err(error))) => return Err(plugin_error(error, failure)),
            Ok(Ok(Ok(applied))) => from_wit(applied),
        };
        // The plugin answers for this dependent and key, whatever it put in the record.
        let applied = ExternalObject { dependent: desired.dependent.clone(), key: desired.key.clone(), ..applied };
        tracing::info!(dependent = applied.dependent, key = applied.key, id = ?applied.id, "external object applied");
        self.state.applied(&self.key, applied.clone());
        Ok(applied)
    }

    /// Runs `delete-external` for `actual` and forgets it.
    pub async fn delete(&self, actual: &ExternalObject) -> Result<(), CallFailure> {
        let failure = |message: String, permanent: bool| CallFailure {
            what: "delete",
            dependent: actual.dependent.clone(),
            key: actual.key.clone(),
            message,
            permanent,
        };
        let gone = to_wit(actual);
        let call = self.module.delete_external(self.view.clone(), &self.primary, &gone);
        match self.fence.hold(call).await {
            Err(unanswered) => return Err(failure(unanswered.to_string(), false)),
            Ok(Err(trap)) => return Err(failure(trap.to_string(), false)),
            Ok(Ok(Err(error))) => return Err(plugin_error(error, failure)),
            Ok(Ok(Ok(()))) => {}
        }
        tracing::info!(dependent = actual.dependent, key = actual.key, id = ?actual.id, "external object deleted");
        self.state.deleted(&self.key, actual);
        Ok(())
    }
}

/// The plugin's own error as a failure: permanent and invalid ones are not retried.
fn plugin_error(error: wit::ReconcileError, failure: impl Fn(String, bool) -> CallFailure) -> CallFailure {
    match error {
        wit::ReconcileError::Transient(m) => failure(m, false),
        wit::ReconcileError::Permanent(m) | wit::ReconcileError::Invalid(m) => failure(m, true),
    }
}

/// A core external object as the WIT record.
pub fn to_wit(object: &ExternalObject) -> wit::ExternalObject {
    wit::ExternalObject {
        dependent: object.dependent.clone(),
        key: object.key.clone(),
        id: object.id.clone(),
        object: object.object.to_string(),
    }
}

/// A WIT external object as the core's; an object that is not JSON is `null`.
pub fn from_wit(object: wit::ExternalObject) -> ExternalObject {
    ExternalObject {
        dependent: object.dependent,
        key: object.key,
        id: object.id,
        object: serde_json::from_str(&object.object).unwrap_or(serde_json::Value::Null),
    }
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    fn state() -> Arc<ExternalState> {
        let mut config = crate::runtime::bindings::test_config("Record");
        config.polling = Some(wit::Polling { mode: wit::PollingMode::PerResource, period_ms: 1000 });
        config.external_dependents = vec![wit::ExternalDependent {
            name: "record".into(),
            depends_on: vec![],
            ready_when: None,
            reconcile_when: None,
            ready_when_empty: true,
            tracking: wit::Tracking::ConfigMap,
        }];
        ExternalState::new(&config, TrackingRecords::detached()).expect("polls")
    }

    fn record(value: &str) -> ExternalObject {
        ExternalObject {
            dependent: "record".into(),
            key: "www".into(),
            id: Some("r1".into()),
            object: json!({ "v": value }),
        }
    }

    /// A host killed while creating an external object finds it by name after its restart: the
    /// poller reads the (empty) tracking record, then the fetch adopts the ID, before the
    /// reconcile takes its IDs. The record must still be written with it.
    #[tokio::test]
    async fn an_id_adopted_by_name_is_recorded() {
        let state = state();
        let key = ObjectKey { namespace: Some("ns".into()), name: "a".into() };
        let primary: Object = serde_json::from_value(json!({"metadata": {"name": "a", "namespace": "ns"}})).unwrap();
        // The poller's fetch: the record, then the objects found by name.
        assert!(state.ids(&key, &primary).await.unwrap().is_empty());
        assert!(state.fetched(&key, Ok(vec![record("1")])));
        // The reconcile: the IDs it starts with already hold the adopted one.
        let ids = state.ids(&key, &primary).await.unwrap();
        assert_eq!(ids.get(&("record".to_string(), "www".to_string())), Some(&"r1".to_string()));
        let unrecorded = state.unrecorded(&key).expect("the adopted ID is not in the record yet");
        assert_eq!(unrecorded, ids);
        state.persist(&key, &primary).await.unwrap();
        assert_eq!(state.unrecorded(&key), None, "written once");
    }

    #[test]
    fn a_primary_is_reconciled_when_its_state_changes_or_its_fetch_fails_or_recovers() {
        let state = state();
        let key = ObjectKey { namespace: Some("ns".into()), name: "a".into() };
        assert_eq!(state.known(&key), Known::Unknown);
        assert!(state.fetched(&key, Ok(vec![record("1")])), "the first fetch");
        assert!(!state.fetched(&key, Ok(vec![record("1")])), "the same state");
        assert!(state.fetched(&key, Ok(vec![record("2")])), "changed out of band");
        assert!(state.fetched(&key, Err("down".into())));
        assert!(!state.fetched(&key, Err("still down".into())), "told once");
        assert_eq!(state.known(&key), Known::Failed("still down".into()));
        assert!(state.fetched(&key, Ok(vec![record("2")])), "recovered");
        state.applied(&key, record("3"));
        assert_eq!(state.known(&key), Known::Objects(vec![record("3")]));
        assert!(!state.fetched(&key, Ok(vec![record("3")])), "the host's own apply, fetched back");
        state.deleted(&key, &record("3"));
        assert_eq!(state.known(&key), Known::Objects(vec![]));
    }
}
