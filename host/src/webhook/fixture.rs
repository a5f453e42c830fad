//! The webhook fixture: an admission or conversion review as the API server sends it, and the
//! answer expected. `wasmop test` answers fixtures ([`crate::harness::reviews`]) and `wasmop run
//! --record` writes one per recorded webhook call ([`super::recorded`]):
//!
//! ```yaml
//! description: an empty html is refused at the field
//! review:
//!   webhook: validating        # validating (default), mutating or conversion
//!   operation: CREATE          # CREATE (default), UPDATE, DELETE or CONNECT
//!   object: { apiVersion: sample.wasmop.dev/v1, kind: WebPage, metadata: { name: p }, spec: { html: "" } }
//!   oldObject: ...             # for UPDATE and DELETE
//! objects: []                  # what the webhook's reads find (the plugin's caches)
//! expect:
//!   allowed: false
//!   message: html must not be empty   # a part of the answer's message
//!   field: spec.html
//! ```
//!
//! A mutating fixture expects `patch` (the JSON patch, RFC 6902) or `object` (the object with
//! the patch applied); a conversion fixture sends `objects` to `desiredAPIVersion` and expects
//! `converted` (the objects) or `message` (a failed conversion).

use serde::{Deserialize, Serialize};
use serde_json::{Value, json};

use super::call::Path;
use crate::runtime::Module;

/// A webhook fixture.
#[derive(Debug, Serialize, Deserialize)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
pub struct Fixture {
    /// What it shows.
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub description: String,
    /// The review sent.
    pub review: Review,
    /// The objects the webhook's reads find.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub objects: Vec<Value>,
    /// The answer expected; none: the answer is shown, nothing checked.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub expect: Option<Expected>,
}

/// The webhook a fixture's review goes to.
#[derive(Debug, Default, Clone, Copy, Serialize, Deserialize, PartialEq, Eq)]
#[serde(rename_all = "camelCase")]
pub enum Webhook {
    /// `validate`.
    #[default]
    Validating,
    /// `default`.
    Mutating,
    /// `convert`.
    Conversion,
}

/// The review a fixture sends.
#[derive(Debug, Serialize, Deserialize)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
pub struct Review {
    /// Which webhook.
    #[serde(default)]
    pub webhook: Webhook,
    /// The admission's operation.
    #[serde(default = "create")]
    pub operation: String,
    /// The object admitted (absent for a DELETE).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub object: Option<Value>,
    /// The object before (UPDATE, DELETE).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub old_object: Option<Value>,
    /// The objects to convert.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub objects: Vec<Value>,
    /// The version to convert them to (`group/version`).
    #[serde(rename = "desiredAPIVersion")]
    #[serde(skip_serializing_if = "Option::is_none")]
    pub desired_api_version: Option<String>,
}

fn create() -> String {
    "CREATE".into()
}

/// The answer a fixture expects; what it leaves out is not checked.
#[derive(Debug, Serialize, Deserialize)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
pub struct Expected {
    /// Admitted or not.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub allowed: Option<bool>,
    /// A part of the answer's message (a denial's, a failure's).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub message: Option<String>,
    /// The field a denial names.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub field: Option<String>,
    /// The warnings, in order.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub warnings: Option<Vec<String>>,
    /// The JSON patch of a mutating webhook (`[]`: none).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub patch: Option<Value>,
    /// The object a mutating webhook's patch makes of the one sent.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub object: Option<Value>,
    /// The objects a conversion returns.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub converted: Option<Vec<Value>>,
}

/// Whether the YAML `text` is a webhook fixture: it has a `review`.
pub fn is_fixture(text: &str) -> bool {
    serde_saphyr::from_str::<Value>(text).is_ok_and(|fixture| fixture.get("review").is_some())
}

impl Webhook {
    /// The endpoint's path of the webhook.
    pub fn path(self) -> Path {
        match self {
            Webhook::Validating => Path::Validate,
            Webhook::Mutating => Path::Mutate,
            Webhook::Conversion => Path::Convert,
        }
    }

    /// The webhook of the endpoint's `path`.
    pub fn of(path: Path) -> Self {
        match path {
            Path::Validate => Webhook::Validating,
            Path::Mutate => Webhook::Mutating,
            Path::Convert => Webhook::Conversion,
        }
    }
}

/// The review the API server would send for `review`, to `module`'s webhook.
pub fn body(module: &Module, review: &Review) -> Result<Vec<u8>, String> {
    match review.webhook {
        Webhook::Conversion => conversion_review(review),
        Webhook::Validating | Webhook::Mutating => admission_review(module, review),
    }
}

/// The AdmissionReview the API server would send for `review`, about `module`'s kind of its
/// object.
fn admission_review(module: &Module, review: &Review) -> Result<Vec<u8>, String> {
    let object = review.object.as_ref().or(review.old_object.as_ref()).ok_or("the review has no object")?;
    let api_version = object["apiVersion"].as_str().ok_or("the object has no apiVersion")?;
    let kind = object["kind"].as_str().ok_or("the object has no kind")?;
    let (group, version) = api_version.rsplit_once('/').unwrap_or(("", api_version));
    let declared = std::iter::once(&module.config().primary)
        .chain(module.webhooks().iter().flat_map(|w| w.kinds.iter()))
        .find(|k| k.group == group && k.kind == kind);
    let plural = declared.and_then(|k| k.plural.clone()).unwrap_or_else(|| format!("{}s", kind.to_lowercase()));
    let metadata = &object["metadata"];
    let request = json!({
        "uid": "wasmop-test",
        "kind": { "group": group, "version": version, "kind": kind },
        "resource": { "group": group, "version": version, "resource": plural },
        "name": metadata["name"].as_str().unwrap_or_default(),
        "namespace": metadata["namespace"],
        "operation": review.operation,
        "userInfo": { "username": "wasmop-test" },
        "object": review.object,
        "oldObject": review.old_object,
        "dryRun": false,
    });
    let review = json!({ "apiVersion": "admission.k8s.io/v1", "kind": "AdmissionReview", "request": request });
    serde_json::to_vec(&review).map_err(|e| e.to_string())
}

/// The ConversionReview the API server would send for `review`.
fn conversion_review(review: &Review) -> Result<Vec<u8>, String> {
    let desired = review.desired_api_version.as_deref().ok_or("a conversion review needs desiredAPIVersion")?;
    let request = json!({ "uid": "wasmop-test", "desiredAPIVersion": desired, "objects": review.objects });
    let review = json!({ "apiVersion": "apiextensions.k8s.io/v1", "kind": "ConversionReview", "request": request });
    serde_json::to_vec(&review).map_err(|e| e.to_string())
}

/// What a fixture shows of a review's response (`response`): the verdict, message, field,
/// warnings and patch, or the converted objects or the failure's message.
pub fn shown(response: &Value, path: Path) -> Value {
    if path == Path::Convert {
        let result = &response["result"];
        return match response["convertedObjects"].as_array().filter(|_| result["status"] == "Success") {
            Some(objects) => json!({ "converted": objects }),
            None => json!({ "message": result["message"] }),
        };
    }
    // An admission response's `status` (kube calls it `result`).
    let status = &response["status"];
    let mut answer = json!({ "allowed": response["allowed"].as_bool().unwrap_or(false) });
    if let Some(message) = status["message"].as_str().filter(|m| !m.is_empty()) {
        answer["message"] = json!(message);
    }
    if let Some(field) = status["details"]["causes"][0]["field"].as_str() {
        answer["field"] = json!(field);
    }
    if let Some(warnings) = response["warnings"].as_array() {
        answer["warnings"] = json!(warnings);
    }
    if let Some(patch) = patch_bytes(&response["patch"]) {
        answer["patch"] = serde_json::from_slice(&patch).unwrap_or(Value::Null);
    }
    answer
}

/// A response's patch: base64 text, as the API server writes `[]byte`, or the bytes as numbers,
/// as kube's `AdmissionResponse` serializes them (the API server reads both).
fn patch_bytes(patch: &Value) -> Option<Vec<u8>> {
    use base64::Engine as _;
    match patch {
        Value::String(text) => base64::engine::general_purpose::STANDARD.decode(text).ok(),
        Value::Array(bytes) => bytes.iter().map(|b| b.as_u64().and_then(|b| u8::try_from(b).ok())).collect(),
        _ => None,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_webhook_fixture_is_told_from_a_reconcile_fixture_by_its_review() {
        assert!(is_fixture("review: { object: { kind: A } }\nexpect: { allowed: true }"));
        assert!(!is_fixture("primary: { metadata: { name: p } }"));
        assert!(!is_fixture("not: [yaml"));
    }

    #[test]
    fn a_conversion_shows_its_objects_or_its_failure() {
        let success = json!({ "convertedObjects": [{ "a": 1 }], "result": { "status": "Success" } });
        assert_eq!(shown(&success, Path::Convert), json!({ "converted": [{ "a": 1 }] }));
        let failure = json!({ "result": { "status": "Failure", "message": "no v3" } });
        assert_eq!(shown(&failure, Path::Convert), json!({ "message": "no v3" }));
    }
}
