//! Webhook fixtures for `wasmop test` ([`crate::webhook::fixture`]'s format): each review is
//! answered as the host's webhook endpoint answers it ([`crate::webhook::call`]: the same call,
//! deadline, failure policy and caps), its reads answered from the fixture's `objects`, and the
//! answer compared with the one expected.

use std::sync::Arc;

use futures::future::{BoxFuture, FutureExt};
use serde_json::{Value, json};

use super::Shown;
use crate::runtime::bindings::wasmop::plugin::types;
use crate::runtime::{CacheReader, GetResult, ListResult, Module};
use crate::webhook::call::{self, Path, Plugin};
use crate::webhook::fixture::{self, Expected, Fixture};

/// A webhook fixture answered.
#[derive(Debug)]
pub struct Answered {
    /// The file name, without `.yaml`.
    pub name: String,
    /// What it shows.
    pub description: String,
    /// The answer, as shown: allowed, message, field, warnings, patch, or the converted objects.
    pub answer: Value,
    /// Whether it expects anything.
    expects: bool,
    /// The unmet expectations.
    pub failures: Vec<String>,
}

impl Answered {
    /// Shows it as a fixture whose one pass is the answer.
    pub fn shown(&self) -> Shown<'_> {
        Shown {
            fixture: &self.name,
            description: &self.description,
            passes: Vec::new(),
            answer: Some(&self.answer),
            result: self.expects.then_some(if self.failures.is_empty() { "ok" } else { "FAILED" }),
            failures: &self.failures,
            end: None,
        }
    }
}

/// The fixture's objects as a webhook call's reads find them.
struct Objects(Vec<Value>);

impl Objects {
    fn matching<'a>(&'a self, kind: &'a types::KindRef, namespace: Option<&'a str>) -> impl Iterator<Item = &'a Value> {
        let api_version =
            if kind.group.is_empty() { kind.version.clone() } else { format!("{}/{}", kind.group, kind.version) };
        self.0.iter().filter(move |o| {
            o["kind"] == kind.kind.as_str()
                && o["apiVersion"] == api_version.as_str()
                && namespace.is_none_or(|ns| o["metadata"]["namespace"] == ns)
        })
    }
}

impl CacheReader for Objects {
    fn get<'a>(
        &'a self,
        kind: &'a types::KindRef,
        namespace: Option<&'a str>,
        name: &'a str,
    ) -> BoxFuture<'a, GetResult> {
        let found = self.matching(kind, namespace).find(|o| o["metadata"]["name"] == name).map(Value::to_string);
        futures::future::ready(Ok(found)).boxed()
    }

    fn list<'a>(
        &'a self,
        kind: &'a types::KindRef,
        namespace: Option<&'a str>,
        _selector: Option<&'a str>,
    ) -> BoxFuture<'a, ListResult> {
        futures::future::ready(Ok(self.matching(kind, namespace).map(Value::to_string).collect())).boxed()
    }

    fn secondaries<'a>(&'a self, kind: &'a types::KindRef) -> BoxFuture<'a, ListResult> {
        let refused = format!("a webhook call has no primary being reconciled (asked for {})", kind.kind);
        futures::future::ready(Err(refused)).boxed()
    }
}

/// Answers the webhook fixture in `text` (named `name`) with `module` on `runtime`.
pub fn answer(module: &Module, runtime: &tokio::runtime::Runtime, name: &str, text: &str) -> Result<Answered, String> {
    let fixture: Fixture = serde_saphyr::from_str(text).map_err(|e| format!("not a webhook fixture: {e}"))?;
    let Fixture { description, review, objects, expect } = fixture;
    let plugin = Plugin { name: &module.config().name, module, cache: Arc::new(Objects(objects)) };
    let path = review.webhook.path();
    let body = fixture::body(module, &review)?;
    let answered = runtime.block_on(async {
        match path {
            Path::Convert => call::convert(&plugin, &body).await,
            Path::Validate | Path::Mutate => call::admit(&plugin, path, &body).await,
        }
    });
    let answered = answered.map_err(|e| e.to_string())?;
    let response: Value = serde_json::from_str(&answered).map_err(|e| e.to_string())?;
    let answer = fixture::shown(&response["response"], path);
    let failures = expect.as_ref().map(|expected| unmet(expected, &answer, review.object.as_ref())).unwrap_or_default();
    Ok(Answered { name: name.into(), description, answer, expects: expect.is_some(), failures })
}

/// The expectations `answer` does not meet, `sent` being the object the review carried.
fn unmet(expected: &Expected, answer: &Value, sent: Option<&Value>) -> Vec<String> {
    let mut failures = Vec::new();
    let mut check = |what: &str, want: Value, got: &Value| {
        if &want != got {
            failures.push(format!("{what}: expected {want}, got {got}"));
        }
    };
    if let Some(allowed) = expected.allowed {
        check("allowed", json!(allowed), &answer["allowed"]);
    }
    if let Some(field) = &expected.field {
        check("field", json!(field), &answer["field"]);
    }
    if let Some(warnings) = &expected.warnings {
        let got = if answer["warnings"].is_null() { json!([]) } else { answer["warnings"].clone() };
        check("warnings", json!(warnings), &got);
    }
    if let Some(converted) = &expected.converted {
        check("converted", json!(converted), &answer["converted"]);
    }
    let patch = if answer["patch"].is_null() { json!([]) } else { answer["patch"].clone() };
    if let Some(want) = &expected.patch {
        check("patch", want.clone(), &patch);
    }
    if let Some(want) = &expected.object {
        let mut object = sent.cloned().unwrap_or(Value::Null);
        let applied = serde_json::from_value::<json_patch::Patch>(patch)
            .map_err(|e| e.to_string())
            .and_then(|patch| json_patch::patch(&mut object, &patch).map_err(|e| e.to_string()));
        match applied {
            Ok(()) => check("object", want.clone(), &object),
            Err(err) => failures.push(format!("object: the answer's patch does not apply: {err}")),
        }
    }
    if let Some(message) = &expected.message {
        let got = answer["message"].as_str().unwrap_or_default();
        if !got.contains(message.as_str()) {
            failures.push(format!("message: expected one with {message:?}, got {got:?}"));
        }
    }
    failures
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_denial_shows_its_message_and_field_and_meets_what_it_was_expected_to() {
        let response = json!({
            "allowed": false, "warnings": ["w"],
            "status": { "message": "spec.html: html must not be empty",
                        "details": { "causes": [{ "field": "spec.html", "message": "html must not be empty" }] } },
        });
        let answer = fixture::shown(&response, Path::Validate);
        assert_eq!(
            answer,
            json!({ "allowed": false, "message": "spec.html: html must not be empty", "field": "spec.html", "warnings": ["w"] })
        );
        let expected: Expected =
            serde_saphyr::from_str("{ allowed: false, message: must not be empty, field: spec.html }").unwrap();
        assert_eq!(unmet(&expected, &answer, None), Vec::<String>::new());
        let wrong: Expected = serde_saphyr::from_str("{ allowed: true, field: spec.text, warnings: [] }").unwrap();
        let failures = unmet(&wrong, &answer, None);
        assert_eq!(failures.len(), 3, "{failures:?}");
        assert!(failures[0].starts_with("allowed: expected true, got false"), "{failures:?}");
    }

    #[test]
    fn a_patch_is_checked_as_it_is_or_as_the_object_it_makes() {
        use base64::Engine as _;
        let patch = json!([{ "op": "add", "path": "/spec/exposed", "value": false }]);
        let encoded = base64::engine::general_purpose::STANDARD.encode(patch.to_string());
        let answer = fixture::shown(&json!({ "allowed": true, "patch": encoded, "status": {} }), Path::Mutate);
        assert_eq!(answer["patch"], patch);
        let as_numbers =
            fixture::shown(&json!({ "allowed": true, "patch": patch.to_string().into_bytes() }), Path::Mutate);
        assert_eq!(as_numbers["patch"], patch, "as kube serializes it");
        let sent = json!({ "spec": { "html": "x" } });
        let expected: Expected = serde_saphyr::from_str("{ object: { spec: { html: x, exposed: false } } }").unwrap();
        assert!(unmet(&expected, &answer, Some(&sent)).is_empty());
        let other: Expected = serde_saphyr::from_str("{ object: { spec: { html: x, exposed: true } } }").unwrap();
        assert_eq!(unmet(&other, &answer, Some(&sent)).len(), 1);
        let none: Expected = serde_saphyr::from_str("{ patch: [] }").unwrap();
        assert_eq!(unmet(&none, &answer, Some(&sent)).len(), 1, "a patch was made");
    }
}
