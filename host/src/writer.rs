//! Every write the host makes for a plugin: status patches and Kubernetes Events.

use kube::api::{Api, ApiResource, DynamicObject, Patch, PatchParams};
use kube::runtime::events::{Event, EventType, Recorder, Reporter};
use kube::{Client, Resource};

use crate::object::ObjectKey;

/// Errors of writing to the API server.
#[derive(Debug, thiserror::Error)]
pub enum WriteError {
    /// The plugin's status is not a JSON object.
    #[error("the plugin returned a status that is not a JSON object: {0}")]
    StatusNotAnObject(String),
    /// The status patch was rejected or failed.
    #[error("patching the status of {key} failed: {source}")]
    StatusPatchFailed {
        /// The object.
        key: ObjectKey,
        /// The API error.
        #[source]
        source: kube::Error,
    },
}

/// Writes on behalf of one plugin, as field manager `wasmop-<plugin>`.
#[derive(Clone)]
pub struct Writer {
    client: Client,
    resource: ApiResource,
    recorder: Recorder,
    params: PatchParams,
}

/// Maximum length of an Event note accepted by the API server.
const MAX_NOTE: usize = 1024;

impl Writer {
    /// A writer for objects of `resource`, owned by `plugin`.
    pub fn new(client: Client, resource: ApiResource, plugin: &str) -> Self {
        let manager = format!("wasmop-{plugin}");
        let recorder = Recorder::new(client.clone(), Reporter { controller: manager.clone(), instance: None });
        Self {
            client,
            resource,
            recorder,
            params: PatchParams { field_manager: Some(manager), ..PatchParams::default() },
        }
    }

    /// Merges `status` (JSON object text) into the object's status through the status
    /// subresource.
    pub async fn patch_status(&self, key: &ObjectKey, status: &str) -> Result<(), WriteError> {
        let value: serde_json::Value =
            serde_json::from_str(status).map_err(|e| WriteError::StatusNotAnObject(e.to_string()))?;
        if !value.is_object() {
            return Err(WriteError::StatusNotAnObject(format!("got {}", kind_of(&value))));
        }
        let api = self.api(key);
        let patch = serde_json::json!({ "status": value });
        api.patch_status(&key.name, &self.params, &Patch::Merge(&patch))
            .await
            .map(drop)
            .map_err(|source| WriteError::StatusPatchFailed { key: key.clone(), source })
    }

    /// Records an Event on `object`; failures are logged, never fatal.
    pub async fn publish(
        &self,
        object: &DynamicObject,
        type_: EventType,
        reason: &str,
        action: &str,
        note: Option<String>,
    ) {
        let reference = object.object_ref(&self.resource);
        let event = Event {
            type_,
            reason: reason.to_string(),
            action: action.to_string(),
            note: note.map(|n| truncate(n, MAX_NOTE)),
            secondary: None,
        };
        if let Err(err) = self.recorder.publish(&event, &reference).await {
            tracing::warn!(%err, reason, "cannot record event");
        }
    }

    fn api(&self, key: &ObjectKey) -> Api<DynamicObject> {
        match &key.namespace {
            Some(ns) => Api::namespaced_with(self.client.clone(), ns, &self.resource),
            None => Api::all_with(self.client.clone(), &self.resource),
        }
    }
}

fn kind_of(value: &serde_json::Value) -> &'static str {
    match value {
        serde_json::Value::Null => "null",
        serde_json::Value::Bool(_) => "a boolean",
        serde_json::Value::Number(_) => "a number",
        serde_json::Value::String(_) => "a string",
        serde_json::Value::Array(_) => "an array",
        serde_json::Value::Object(_) => "an object",
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
    use super::truncate;

    #[test]
    fn long_notes_are_cut_on_a_char_boundary() {
        assert_eq!(truncate("short".into(), 10), "short");
        let cut = truncate("é".repeat(10), 8);
        assert!(cut.len() <= 8 && cut.ends_with("..."), "{cut}");
    }
}
