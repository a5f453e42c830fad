//! The host's writes to a plugin's primaries: status and metadata patches, guarded by the
//! resourceVersion the reconcile read (optimistic locking), and Kubernetes Events. A patch that
//! would change nothing is not sent.

use std::collections::BTreeMap;
use std::sync::Arc;

use kube::api::{Api, ApiResource, Patch, PatchParams};
use kube::runtime::events::{Event, EventType, Recorder, Reporter};
use kube::{Client, Resource, ResourceExt};
use serde_json::{Value, json};

use wasmop_core::status::Report;

use crate::fence::Unanswered;
use crate::metrics::{Metrics, Verb};
use crate::object::ObjectKey;
use crate::wire::{Object, Wire};

/// Errors of writing to the API server.
#[derive(Debug, thiserror::Error)]
pub enum WriteError {
    /// The plugin's status is not a JSON object.
    #[error("the plugin returned a status that is not a JSON object: {0}")]
    StatusNotAnObject(String),
    /// The object changed since the reconcile read it; the write was not made.
    #[error("{what} {key}: the object changed meanwhile (conflict); will retry")]
    Conflict {
        /// What was attempted.
        what: &'static str,
        /// The object.
        key: ObjectKey,
    },
    /// The patch was rejected or failed.
    #[error("{what} {key} failed: {}", crate::api_error::describe(source))]
    Failed {
        /// What was attempted.
        what: &'static str,
        /// The object.
        key: ObjectKey,
        /// The API error.
        #[source]
        source: Box<kube::Error>,
    },
    /// The API server did not answer in time ([`crate::fence::REQUEST_TIMEOUT`]); the run
    /// repeats soon.
    #[error("{what} {key}: no answer from the API server in time; will retry")]
    TimedOut {
        /// What was attempted.
        what: &'static str,
        /// The object.
        key: ObjectKey,
    },
    /// This replica does not hold the leader lease (or could not renew it in time): the write
    /// was not sent, or was abandoned at the fence's deadline; the run repeats once it leads
    /// again.
    #[error("{what} {key}: not the leader, the write was not made")]
    NotLeader {
        /// What was attempted.
        what: &'static str,
        /// The object.
        key: ObjectKey,
    },
}

impl WriteError {
    /// Whether the write failed because the API server could not be reached, or this replica
    /// may not write now: no fault of the plugin or the object.
    pub fn unreachable(&self) -> bool {
        match self {
            WriteError::Failed { source, .. } => crate::reachability::unreachable(source),
            WriteError::NotLeader { .. } | WriteError::TimedOut { .. } => true,
            _ => false,
        }
    }

    /// Whether sending the write again cannot help: the API server refuses what it carries
    /// ([`crate::api_error::persistence`]), or the plugin's status is not an object.
    pub fn permanent(&self) -> bool {
        match self {
            WriteError::Failed { source, .. } => {
                crate::api_error::persistence(source) == wasmop_core::refusal::Persistence::Permanent
            }
            WriteError::StatusNotAnObject(_) => true,
            _ => false,
        }
    }

    /// Whether the object no longer exists (404).
    pub fn gone(&self) -> bool {
        matches!(self, WriteError::Failed { source, .. } if matches!(&**source, kube::Error::Api(s) if s.code == 404))
    }
}

/// Changes to a primary's metadata; `None` values remove.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct MetadataChanges {
    /// Labels to set or remove.
    pub labels: Vec<(String, Option<String>)>,
    /// Annotations to set or remove.
    pub annotations: Vec<(String, Option<String>)>,
    /// The complete new list of finalizers, if it changes.
    pub finalizers: Option<Vec<String>>,
}

impl MetadataChanges {
    /// Whether nothing is asked for: no label, no annotation, no finalizers.
    pub fn is_empty(&self) -> bool {
        self.labels.is_empty() && self.annotations.is_empty() && self.finalizers.is_none()
    }

    /// The merge patch of the changes that `object` does not already reflect; `None` when
    /// there are none.
    pub fn patch_for(&self, object: &Object) -> Option<Value> {
        let changed = |current: &BTreeMap<String, String>, wanted: &[(String, Option<String>)]| {
            let changes: serde_json::Map<String, Value> = wanted
                .iter()
                .filter(|(k, v)| current.get(k) != v.as_ref())
                .map(|(k, v)| (k.clone(), v.as_ref().map_or(Value::Null, |v| json!(v))))
                .collect();
            (!changes.is_empty()).then_some(Value::Object(changes))
        };
        let mut metadata = serde_json::Map::new();
        if let Some(labels) = changed(object.labels(), &self.labels) {
            metadata.insert("labels".into(), labels);
        }
        if let Some(annotations) = changed(object.annotations(), &self.annotations) {
            metadata.insert("annotations".into(), annotations);
        }
        if let Some(finalizers) = &self.finalizers
            && finalizers.as_slice() != object.finalizers()
        {
            metadata.insert("finalizers".into(), json!(finalizers));
        }
        (!metadata.is_empty()).then(|| json!({ "metadata": metadata }))
    }
}

/// The status merge patch for the plugin's `status` and the host's conditions after `report`
/// on `object` (`wasmop_core::status::patch`); `None` when the status already holds it all.
pub fn status_patch(
    object: &Object,
    status: Option<Value>,
    report: Option<&Report<'_>>,
) -> Result<Option<Value>, WriteError> {
    use k8s_openapi::jiff::{Timestamp, Unit};
    let now = Timestamp::now().round(Unit::Second).unwrap_or_else(|_| Timestamp::now());
    let current = object.data.value("status");
    wasmop_core::status::patch(current.as_ref(), status, object.metadata.generation, report, &now.to_string())
        .map_err(WriteError::StatusNotAnObject)
}

/// Writes on behalf of one plugin, as field manager `wasmop-<plugin>`.
#[derive(Clone)]
pub struct Writer {
    client: Client,
    resource: ApiResource,
    recorder: Recorder,
    params: PatchParams,
    plugin: String,
    metrics: Arc<Metrics>,
    fence: crate::fence::Fence,
}

/// Maximum length of an Event note accepted by the API server.
const MAX_NOTE: usize = 1024;

impl Writer {
    /// A writer for objects of `resource`, owned by `plugin`, counting its writes in `metrics`.
    /// Objects are written with `client` (which may impersonate the plugin's ServiceAccount);
    /// Events, the host's own reports, are published with `events`.
    pub fn new(
        client: Client,
        events: Client,
        resource: ApiResource,
        plugin: &str,
        metrics: Arc<Metrics>,
        fence: crate::fence::Fence,
    ) -> Self {
        let manager = format!("wasmop-{plugin}");
        let instance = fence.identity().map(str::to_string);
        let recorder = Recorder::new(events, Reporter { controller: manager.clone(), instance });
        Self {
            client,
            resource,
            recorder,
            params: PatchParams { field_manager: Some(manager), ..PatchParams::default() },
            plugin: plugin.to_string(),
            metrics,
            fence,
        }
    }

    /// Merges `status` (JSON object text) into `object`'s status through the status
    /// subresource, unless it holds it already; fails with a conflict when the object changed
    /// since it was read. Returns the object as written.
    pub async fn patch_status(
        &self,
        object: &Object,
        status: Option<Value>,
        report: Option<&Report<'_>>,
    ) -> Result<Option<Object>, WriteError> {
        let Some(patch) = status_patch(object, status, report)? else { return Ok(None) };
        self.patch(object, "patching the status of", patch, Verb::PatchStatus).await.map(Some)
    }

    /// Changes `object`'s metadata unless it reflects the changes already; fails with a
    /// conflict when the object changed since it was read. Returns the object as written.
    pub async fn patch_metadata(
        &self,
        object: &Object,
        changes: &MetadataChanges,
    ) -> Result<Option<Object>, WriteError> {
        let Some(patch) = changes.patch_for(object) else { return Ok(None) };
        self.patch(object, "patching the metadata of", patch, Verb::PatchMetadata).await.map(Some)
    }

    async fn patch(
        &self,
        object: &Object,
        what: &'static str,
        mut patch: Value,
        verb: Verb,
    ) -> Result<Object, WriteError> {
        let key = crate::object::key_of(object).unwrap_or_else(|| ObjectKey { namespace: None, name: String::new() });
        patch["metadata"]["resourceVersion"] = json!(object.resource_version());
        let api = self.api(&key);
        let patch = Patch::Merge(&patch);
        let request = async {
            self.metrics.wrote(&self.plugin, &self.resource.kind, verb);
            if verb == Verb::PatchStatus {
                api.patch_status(&key.name, &self.params, &patch).await
            } else {
                api.patch(&key.name, &self.params, &patch).await
            }
        };
        let written = match self.fence.write(request).await {
            Ok(written) => written,
            Err(Unanswered::Fenced) => return Err(WriteError::NotLeader { what, key }),
            Err(Unanswered::TimedOut) => return Err(WriteError::TimedOut { what, key }),
        };
        written.map(Wire::into_inner).map_err(|source| match &source {
            kube::Error::Api(s) if s.code == 409 => {
                self.metrics.conflict(&self.plugin);
                WriteError::Conflict { what, key: key.clone() }
            }
            _ => WriteError::Failed { what, key: key.clone(), source: Box::new(source) },
        })
    }

    /// Records an Event on `object`; failures are logged, never fatal.
    pub async fn publish(&self, object: &Object, type_: EventType, reason: &str, action: &str, note: Option<String>) {
        let reference = object.object_ref(&self.resource);
        let event = Event {
            type_,
            reason: reason.to_string(),
            action: action.to_string(),
            note: note.map(|n| truncate(n, MAX_NOTE)),
            secondary: None,
        };
        let request = async {
            self.metrics.wrote(&self.plugin, "Event", Verb::Event);
            self.recorder.publish(&event, &reference).await
        };
        match self.fence.write(request).await {
            Ok(Ok(())) => {}
            Ok(Err(err)) => tracing::warn!(%err, reason, "cannot record event"),
            Err(err) => tracing::debug!(%err, reason, "event not recorded"),
        }
    }

    fn api(&self, key: &ObjectKey) -> Api<Wire> {
        match &key.namespace {
            Some(ns) => Api::namespaced_with(self.client.clone(), ns, &self.resource),
            None => Api::all_with(self.client.clone(), &self.resource),
        }
    }
}

fn truncate(mut text: String, max: usize) -> String {
    if text.len() > max {
        let mut cut = max - 3;
        while !text.is_char_boundary(cut) {
            cut -= 1;
        }
        text.truncate(cut);
        text.push_str("...");
    }
    text
}

#[cfg(test)]
mod tests {
    use kube::api::GroupVersionKind;

    use super::*;

    fn object(status: Value) -> Object {
        let resource = ApiResource::from_gvk(&GroupVersionKind::gvk("g", "v1", "K"));
        let mut o = Object::new("a", &resource).within("ns").data(json!({ "status": status }));
        o.metadata.generation = Some(3);
        o.metadata.labels = Some(BTreeMap::from([("keep".into(), "1".into()), ("drop".into(), "x".into())]));
        o.metadata.finalizers = Some(vec!["f".into()]);
        o
    }

    #[test]
    fn only_a_404_means_the_object_is_gone() {
        let failed = |code| WriteError::Failed {
            what: "patching the metadata of",
            key: ObjectKey { namespace: None, name: "a".into() },
            source: Box::new(kube::Error::Api(Box::new(kube::core::Status::failure("m", "R").with_code(code)))),
        };
        assert!(failed(404).gone());
        assert!(!failed(500).gone());
        assert!(!WriteError::Conflict { what: "x", key: ObjectKey { namespace: None, name: "a".into() } }.gone());
    }

    #[test]
    fn a_status_the_object_already_has_is_not_written() {
        let o = object(json!({ "observedGeneration": 3, "phase": "Ready", "other": 1 }));
        assert_eq!(status_patch(&o, Some(json!({"phase":"Ready"})), None).unwrap(), None);
        let patch = status_patch(&o, Some(json!({"phase":"Failed"})), None).unwrap().unwrap();
        assert_eq!(patch, json!({ "status": { "phase": "Failed", "observedGeneration": 3 } }));
        assert!(status_patch(&o, Some(json!([1])), None).is_err());
    }

    #[test]
    fn observed_generation_is_set_unless_the_plugin_sets_it() {
        let o = object(json!({}));
        let patch = status_patch(&o, Some(json!({"observedGeneration":1})), None).unwrap().unwrap();
        assert_eq!(patch["status"]["observedGeneration"], 1);
    }

    #[test]
    fn metadata_changes_patch_only_what_differs() {
        let o = object(json!({}));
        let none = MetadataChanges { labels: vec![("keep".into(), Some("1".into()))], ..MetadataChanges::default() };
        assert_eq!(none.patch_for(&o), None);
        let some = MetadataChanges {
            labels: vec![("keep".into(), Some("1".into())), ("drop".into(), None), ("new".into(), Some("y".into()))],
            annotations: vec![("absent".into(), None)],
            finalizers: Some(vec!["f".into(), "g".into()]),
        };
        assert_eq!(
            some.patch_for(&o),
            Some(json!({ "metadata": { "labels": { "drop": null, "new": "y" }, "finalizers": ["f", "g"] } }))
        );
    }

    #[test]
    fn long_notes_are_cut_on_a_char_boundary() {
        assert_eq!(truncate("short".into(), 10), "short");
        let cut = truncate("é".repeat(10), 8);
        assert!(cut.len() <= 8 && cut.ends_with("..."), "{cut}");
    }
}
