//! `AdmissionReview` v1 in and out (kube's `admission` types): the API server's request as the
//! plugin's `admission-request`, and the plugin's verdict, patch or failure as the response.
//!
//! A denial with a field is answered as the API server's own validation answers (`422 Invalid`,
//! the field and message as a `FieldValueInvalid` cause, the field in front of the message:
//! `spec.html: html must not be empty`); one without a field as `403 Forbidden`.

use kube::core::admission::{self, AdmissionResponse, AdmissionReview};
use kube::core::response::{StatusCause, StatusDetails, StatusSummary};
use kube::core::{DynamicObject, Status};

use super::bounded;
use super::policy::Failed;
use crate::runtime::bindings::wasmop::plugin::types::{AdmissionRequest, KindRef, Operation, Verdict};

/// The request of an admission review, with its objects as kube decodes them.
pub type Request = admission::AdmissionRequest<DynamicObject>;

/// Why a body is not an admission review this host answers.
#[derive(Debug, thiserror::Error)]
pub enum ReviewError {
    /// The body is not an `AdmissionReview`.
    #[error("the body is not an AdmissionReview: {0}")]
    NotAReview(#[source] serde_json::Error),
    /// Another version than `admission.k8s.io/v1`.
    #[error("AdmissionReview {0:?} is not served; only admission.k8s.io/v1 is")]
    Version(String),
    /// The review holds no request.
    #[error("the AdmissionReview holds no request")]
    NoRequest,
}

/// The request of the review in `body`.
pub fn parse(body: &[u8]) -> Result<Request, ReviewError> {
    let review: AdmissionReview<DynamicObject> = serde_json::from_slice(body).map_err(ReviewError::NotAReview)?;
    if review.types.api_version != admission::META_API_VERSION_V1 {
        return Err(ReviewError::Version(review.types.api_version));
    }
    review.try_into().map_err(|_| ReviewError::NoRequest)
}

/// The kind a request is about, as the plugin names kinds.
pub fn kind(request: &Request) -> KindRef {
    KindRef {
        group: request.kind.group.clone(),
        version: request.kind.version.clone(),
        kind: request.kind.kind.clone(),
        plural: Some(request.resource.resource.clone()),
        namespaced: request.namespace.is_some(),
    }
}

/// The plugin's operation of a request's.
pub fn operation(operation: &admission::Operation) -> Operation {
    match operation {
        admission::Operation::Create => Operation::Create,
        admission::Operation::Update => Operation::Update,
        admission::Operation::Delete => Operation::Delete,
        admission::Operation::Connect => Operation::Connect,
    }
}

/// `request` as the plugin's `admission-request`: its objects as JSON.
pub fn to_plugin(request: &Request) -> Result<AdmissionRequest, serde_json::Error> {
    let json = |object: &Option<DynamicObject>| object.as_ref().map(serde_json::to_string).transpose();
    Ok(AdmissionRequest {
        uid: request.uid.clone(),
        kind: kind(request),
        operation: operation(&request.operation),
        namespace: request.namespace.clone(),
        name: request.name.clone(),
        object: json(&request.object)?,
        old_object: json(&request.old_object)?,
        username: request.user_info.username.clone().unwrap_or_default(),
        groups: request.user_info.groups.clone().unwrap_or_default(),
        dry_run: request.dry_run,
    })
}

/// The response carrying the plugin's `verdict`, its text capped ([`bounded`]).
pub fn verdict(request: &Request, verdict: &Verdict) -> AdmissionResponse {
    let mut response = AdmissionResponse::from(request);
    let warnings = bounded::warnings(&verdict.warnings);
    response.warnings = (!warnings.is_empty()).then_some(warnings);
    if verdict.allowed {
        return response;
    }
    let message = verdict.message.as_deref().map(|m| bounded::text(m, bounded::MAX_MESSAGE));
    let message = message.unwrap_or_else(|| "denied by the plugin".to_string());
    let field = verdict.field.as_deref().filter(|f| !f.is_empty()).map(|f| bounded::text(f, bounded::MAX_FIELD));
    response.allowed = false;
    response.result = match field {
        Some(field) => invalid(request, &field, &message),
        None => Status::failure(&message, "Forbidden").with_code(403),
    };
    response
}

/// The API server's answer to an invalid field: `422 Invalid`, the field as a cause.
fn invalid(request: &Request, field: &str, message: &str) -> Status {
    Status {
        status: Some(StatusSummary::Failure),
        code: 422,
        message: format!("{field}: {message}"),
        metadata: None,
        reason: "Invalid".into(),
        details: Some(StatusDetails {
            name: request.name.clone(),
            group: request.kind.group.clone(),
            kind: request.kind.kind.clone(),
            uid: String::new(),
            causes: vec![StatusCause {
                reason: "FieldValueInvalid".into(),
                message: message.to_string(),
                field: field.to_string(),
            }],
            retry_after_seconds: 0,
        }),
    }
}

/// The response denying `request` with the plugin's error `message` (its `default` refused).
pub fn refused(request: &Request, message: &str) -> AdmissionResponse {
    let mut response = AdmissionResponse::from(request);
    response.allowed = false;
    response.result = Status::failure(&bounded::text(message, bounded::MAX_MESSAGE), "Forbidden").with_code(403);
    response
}

/// The response to `request` of a call that failed, as the failure policy says.
pub fn failed(request: &Request, failed: Failed) -> AdmissionResponse {
    let mut response = AdmissionResponse::from(request);
    match failed {
        Failed::Denied(message) => {
            response.allowed = false;
            response.result = Status::failure(&message, "InternalError").with_code(500);
        }
        Failed::Admitted(warning) => response.warnings = Some(vec![warning]),
    }
    response
}

#[cfg(test)]
mod tests {
    use super::*;

    fn review(object: serde_json::Value) -> Vec<u8> {
        serde_json::json!({
            "apiVersion": "admission.k8s.io/v1", "kind": "AdmissionReview",
            "request": {
                "uid": "705ab4f5-6393-11e8-b7cc-42010a800002",
                "kind": { "group": "example.wasmop.dev", "version": "v1", "kind": "WebPage" },
                "resource": { "group": "example.wasmop.dev", "version": "v1", "resource": "webpages" },
                "name": "home", "namespace": "site", "operation": "CREATE",
                "userInfo": { "username": "admin", "groups": ["system:masters"] },
                "object": object, "dryRun": false
            }
        })
        .to_string()
        .into_bytes()
    }

    fn page() -> serde_json::Value {
        serde_json::json!({ "apiVersion": "example.wasmop.dev/v1", "kind": "WebPage",
            "metadata": { "name": "home", "namespace": "site" }, "spec": { "html": "" } })
    }

    #[test]
    fn a_review_becomes_the_plugins_request() {
        let request = parse(&review(page())).unwrap();
        let plugin = to_plugin(&request).unwrap();
        assert_eq!(plugin.uid, "705ab4f5-6393-11e8-b7cc-42010a800002");
        assert_eq!((plugin.kind.kind.as_str(), plugin.kind.plural.as_deref()), ("WebPage", Some("webpages")));
        assert!(plugin.kind.namespaced && plugin.operation == Operation::Create && !plugin.dry_run);
        assert_eq!((plugin.username.as_str(), plugin.groups.clone()), ("admin", vec!["system:masters".to_string()]));
        let object: serde_json::Value = serde_json::from_str(plugin.object.as_deref().unwrap()).unwrap();
        assert_eq!(object, page());
        assert!(plugin.old_object.is_none());
    }

    #[test]
    fn other_versions_and_other_bodies_are_refused() {
        let old = String::from_utf8(review(page())).unwrap().replace("admission.k8s.io/v1", "admission.k8s.io/v1beta1");
        assert!(matches!(parse(old.as_bytes()), Err(ReviewError::Version(_))));
        assert!(matches!(parse(b"{}"), Err(ReviewError::NotAReview(_))));
        let empty = br#"{"apiVersion":"admission.k8s.io/v1","kind":"AdmissionReview"}"#;
        assert!(matches!(parse(empty), Err(ReviewError::NoRequest)));
    }

    #[test]
    fn a_denial_with_a_field_names_it_as_the_api_servers_validation_does() {
        let request = parse(&review(page())).unwrap();
        let denied = Verdict {
            allowed: false,
            message: Some("html must not be empty".into()),
            field: Some("spec.html".into()),
            warnings: vec!["think twice".into()],
        };
        let answer = serde_json::to_value(verdict(&request, &denied).into_review()).unwrap();
        let response = &answer["response"];
        assert_eq!(response["uid"], "705ab4f5-6393-11e8-b7cc-42010a800002");
        assert_eq!(response["allowed"], false);
        assert_eq!(response["status"]["code"], 422);
        assert_eq!(response["status"]["message"], "spec.html: html must not be empty");
        let cause = serde_json::json!({ "reason": "FieldValueInvalid", "message": "html must not be empty", "field": "spec.html" });
        assert_eq!(response["status"]["details"]["causes"][0], cause);
        assert_eq!(response["warnings"][0], "think twice");
        assert_eq!(answer["apiVersion"], "admission.k8s.io/v1");
        assert_eq!(answer["kind"], "AdmissionReview");
    }

    #[test]
    fn an_admission_has_no_status_to_speak_of_and_a_failure_follows_the_policy() {
        let request = parse(&review(page())).unwrap();
        let allowed = Verdict { allowed: true, message: None, field: None, warnings: Vec::new() };
        let response = verdict(&request, &allowed);
        assert!(response.allowed && response.warnings.is_none());
        let denied = failed(&request, Failed::Denied("webhook of plugin \"x\" failed: trap".into()));
        assert!(!denied.allowed && denied.result.code == 500 && denied.result.message.contains("plugin \"x\""));
        let admitted = failed(&request, Failed::Admitted("ignored".into()));
        assert!(admitted.allowed && admitted.warnings == Some(vec!["ignored".into()]));
        let no_field = Verdict { allowed: false, message: Some("no".into()), field: None, warnings: Vec::new() };
        assert_eq!(verdict(&request, &no_field).result.code, 403);
    }
}
