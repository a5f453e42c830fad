//! `ConversionReview` v1 in and out (kube's `conversion` types): the objects the API server
//! sends, and the plugin's converted ones or its failure as the response. Conversion has no
//! failure policy: a failed conversion fails the API server's request, with the message naming
//! the plugin.

use kube::core::Status;
use kube::core::conversion::{ConversionRequest, ConversionResponse, ConversionReview};
use serde_json::Value;

use super::bounded;

/// Why a body is not a conversion review this host answers.
#[derive(Debug, thiserror::Error)]
pub enum ConversionError {
    /// The body is not a `ConversionReview`.
    #[error("the body is not a ConversionReview: {0}")]
    NotAReview(#[source] serde_json::Error),
    /// Another version than `apiextensions.k8s.io/v1`.
    #[error("ConversionReview {0:?} is not served; only apiextensions.k8s.io/v1 is")]
    Version(String),
    /// The review holds no request.
    #[error("the ConversionReview holds no request")]
    NoRequest,
}

/// The request of the review in `body`.
pub fn parse(body: &[u8]) -> Result<ConversionRequest, ConversionError> {
    let review: ConversionReview = serde_json::from_slice(body).map_err(ConversionError::NotAReview)?;
    if review.types.api_version != "apiextensions.k8s.io/v1" {
        return Err(ConversionError::Version(review.types.api_version));
    }
    ConversionRequest::from_review(review).map_err(|_| ConversionError::NoRequest)
}

/// The request's objects as JSON, for the plugin.
pub fn objects(request: &ConversionRequest) -> Vec<String> {
    request.objects.iter().map(Value::to_string).collect()
}

/// The response carrying the plugin's `converted` objects (JSON), checked: one per object sent,
/// in order, each of the desired version.
pub fn converted(plugin: &str, request: ConversionRequest, converted: &[String]) -> ConversionReview {
    match check(request.objects.len(), &request.desired_api_version, converted) {
        Ok(objects) => ConversionResponse::for_request(request).success(objects).into_review(),
        Err(why) => failed(plugin, request, &why),
    }
}

fn check(sent: usize, desired: &str, converted: &[String]) -> Result<Vec<Value>, String> {
    if converted.len() != sent {
        return Err(format!("convert returned {} objects for {sent}", converted.len()));
    }
    let mut objects = Vec::with_capacity(sent);
    for (i, object) in converted.iter().enumerate() {
        let object: Value =
            serde_json::from_str(object).map_err(|e| format!("convert returned object {i} as no JSON: {e}"))?;
        let version = object.get("apiVersion").and_then(Value::as_str).unwrap_or_default();
        if version != desired {
            return Err(format!("convert returned object {i} as {version:?}, not {desired:?}"));
        }
        objects.push(object);
    }
    Ok(objects)
}

/// The response failing the conversion of `request`: `plugin` said or did `why`.
pub fn failed(plugin: &str, request: ConversionRequest, why: &str) -> ConversionReview {
    let message =
        bounded::text(&format!("conversion webhook of plugin {plugin:?} failed: {why}"), bounded::MAX_MESSAGE);
    ConversionResponse::for_request(request).failure(Status::failure(&message, "InternalError")).into_review()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn review() -> Vec<u8> {
        serde_json::json!({
            "apiVersion": "apiextensions.k8s.io/v1", "kind": "ConversionReview",
            "request": { "uid": "u-1", "desiredAPIVersion": "example.wasmop.dev/v2",
                "objects": [{ "apiVersion": "example.wasmop.dev/v1", "kind": "WebPage", "metadata": { "name": "a" } }] }
        })
        .to_string()
        .into_bytes()
    }

    #[test]
    fn converted_objects_are_answered_in_order() {
        let request = parse(&review()).unwrap();
        assert_eq!(objects(&request).len(), 1);
        let object = r#"{"apiVersion":"example.wasmop.dev/v2","kind":"WebPage","metadata":{"name":"a"}}"#;
        let answer = serde_json::to_value(converted("webpage", request, &[object.to_string()])).unwrap();
        assert_eq!(answer["response"]["uid"], "u-1");
        assert_eq!(answer["response"]["result"]["status"], "Success");
        assert_eq!(answer["response"]["convertedObjects"][0]["apiVersion"], "example.wasmop.dev/v2");
    }

    #[test]
    fn a_wrong_answer_fails_the_conversion_naming_the_plugin() {
        let request = parse(&review()).unwrap();
        let answer = serde_json::to_value(converted("webpage", request, &[])).unwrap();
        assert_eq!(answer["response"]["result"]["status"], "Failure");
        let message = answer["response"]["result"]["message"].as_str().unwrap();
        assert_eq!(message, "conversion webhook of plugin \"webpage\" failed: convert returned 0 objects for 1");
        let request = parse(&review()).unwrap();
        let stale = r#"{"apiVersion":"example.wasmop.dev/v1"}"#.to_string();
        let answer = serde_json::to_value(converted("webpage", request, &[stale])).unwrap();
        assert!(answer["response"]["result"]["message"].as_str().unwrap().contains("not \"example.wasmop.dev/v2\""));
    }
}
