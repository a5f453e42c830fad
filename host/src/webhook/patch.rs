//! The JSON patch a defaulting webhook answers with: the difference between the object the API
//! server sent and the one the plugin returned, computed by the `json-patch` crate (RFC 6902,
//! the one kube itself uses for admission patches and whose `Patch` type its `AdmissionResponse`
//! takes; maintained alongside kube-rs).

use serde_json::Value;

/// The largest object a plugin may return from `default`: the API server stores no larger one.
pub const MAX_OBJECT: usize = 3 * 1024 * 1024;

/// Why the plugin's object cannot become a patch.
#[derive(Debug, thiserror::Error)]
pub enum PatchError {
    /// Larger than [`MAX_OBJECT`].
    #[error("default returned an object of {0} bytes, more than {MAX_OBJECT}")]
    TooLarge(usize),
    /// Not a JSON object.
    #[error("default returned no JSON object: {0}")]
    NotAnObject(String),
}

/// The patch that makes `sent` the plugin's `defaulted` object (JSON); empty when it is the
/// same.
pub fn between(sent: &Value, defaulted: &str) -> Result<json_patch::Patch, PatchError> {
    if defaulted.len() > MAX_OBJECT {
        return Err(PatchError::TooLarge(defaulted.len()));
    }
    let defaulted: Value = serde_json::from_str(defaulted).map_err(|e| PatchError::NotAnObject(e.to_string()))?;
    if !defaulted.is_object() {
        return Err(PatchError::NotAnObject("not an object".into()));
    }
    Ok(json_patch::diff(sent, &defaulted))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_patch_adds_what_the_plugin_defaulted_and_applies_to_what_was_sent() {
        let sent = serde_json::json!({ "kind": "WebPage", "spec": { "html": "<p>" } });
        let defaulted = r#"{ "kind": "WebPage", "spec": { "html": "<p>", "exposed": false } }"#;
        let patch = between(&sent, defaulted).unwrap();
        let ops = serde_json::to_value(&patch).unwrap();
        assert_eq!(ops, serde_json::json!([{ "op": "add", "path": "/spec/exposed", "value": false }]));
        let mut applied = sent.clone();
        json_patch::patch(&mut applied, &patch.0).unwrap();
        assert_eq!(applied, serde_json::from_str::<Value>(defaulted).unwrap());
        assert!(between(&sent, &sent.to_string()).unwrap().0.is_empty());
    }

    #[test]
    fn what_is_not_an_object_is_refused() {
        let sent = serde_json::json!({});
        assert!(matches!(between(&sent, "[1]"), Err(PatchError::NotAnObject(_))));
        assert!(matches!(between(&sent, "{"), Err(PatchError::NotAnObject(_))));
        let huge = format!("{{\"a\":\"{}\"}}", "x".repeat(MAX_OBJECT));
        assert!(matches!(between(&sent, &huge), Err(PatchError::TooLarge(_))));
    }
}
