//! Webhook calls recorded (`wasmop run --record DIR`): each review a recording plugin answers,
//! picked as its reconciles are (a selector on the object, sampling, or a refusal when failures
//! are recorded), is written beside its records as a webhook fixture ([`super::fixture`]) whose
//! expected answer is the one the plugin gave. `wasmop test PLUGIN DIR` answers them again with
//! another version of the plugin and names each answer that changed.

use std::sync::Arc;

use serde_json::Value;

use super::call::Path;
use super::fixture::{self, Expected, Fixture, Review, Webhook};
use crate::object::ObjectKey;
use crate::record::Records;

/// Records the review `body` and the plugin's `answer` (the review's JSON) in `records`, on a
/// task of its own. Bodies that are no review are not recorded (they got no answer).
pub fn record(records: &Arc<Records>, path: Path, body: &[u8], answer: &str) {
    let (Ok(sent), Ok(answered)) = (serde_json::from_slice::<Value>(body), serde_json::from_str::<Value>(answer))
    else {
        return;
    };
    let Some((object, fixture, refused)) = as_fixture(path, &sent["request"], &answered["response"]) else { return };
    let metadata = &object["metadata"];
    let key = ObjectKey {
        namespace: metadata["namespace"].as_str().map(str::to_string),
        name: metadata["name"].as_str().unwrap_or_default().to_string(),
    };
    let Ok(fixture) = serde_json::to_value(&fixture) else { return };
    let records = records.clone();
    let webhook = &path.prefix()[1..];
    tokio::spawn(async move { records.review((&object, &key), refused, webhook, fixture).await });
}

/// The fixture of the review `request` answered with `response`: the object it is about, the
/// fixture, and whether the answer refused (a denial, a failed call or conversion).
fn as_fixture(path: Path, request: &Value, response: &Value) -> Option<(Value, Fixture, bool)> {
    let shown = fixture::shown(response, path);
    let mut expect: Expected = serde_json::from_value(shown).ok()?;
    let (object, review, refused) = match path {
        Path::Convert => {
            let objects = request["objects"].as_array()?.clone();
            let review = Review {
                webhook: Webhook::Conversion,
                operation: String::new(),
                object: None,
                old_object: None,
                desired_api_version: request["desiredAPIVersion"].as_str().map(str::to_string),
                objects,
            };
            (review.objects.first()?.clone(), review, expect.converted.is_none())
        }
        Path::Validate | Path::Mutate => {
            let present = |v: &Value| (!v.is_null()).then(|| v.clone());
            let review = Review {
                webhook: Webhook::of(path),
                operation: request["operation"].as_str()?.to_string(),
                object: present(&request["object"]),
                old_object: present(&request["oldObject"]),
                objects: Vec::new(),
                desired_api_version: None,
            };
            // What the answer left out is expected absent: no warnings, no patch.
            expect.warnings.get_or_insert_with(Vec::new);
            if path == Path::Mutate {
                expect.patch.get_or_insert_with(|| Value::Array(Vec::new()));
            }
            let object = review.object.clone().or_else(|| review.old_object.clone())?;
            (object, review, expect.allowed != Some(true))
        }
    };
    let verb = match path {
        Path::Convert => "conversion",
        Path::Validate | Path::Mutate => review.operation.as_str(),
    };
    let description = format!("a recorded {} review ({verb}) and the plugin's answer", path.kind());
    Some((object, Fixture { description, review, objects: Vec::new(), expect: Some(expect) }, refused))
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    #[test]
    fn a_denial_becomes_a_fixture_expecting_it_and_counts_as_refused() {
        let page = json!({ "apiVersion": "sample.wasmop.dev/v1", "kind": "WebPage",
                           "metadata": { "name": "p", "namespace": "ns" }, "spec": { "html": "" } });
        let request = json!({ "operation": "CREATE", "object": page });
        let response = json!({ "allowed": false, "status": { "message": "spec.html: html must not be empty",
            "details": { "causes": [{ "field": "spec.html" }] } } });
        let (object, fixture, refused) = as_fixture(Path::Validate, &request, &response).unwrap();
        assert!(refused);
        assert_eq!(object, page);
        let expect = serde_json::to_value(fixture.expect.unwrap()).unwrap();
        assert_eq!(
            expect,
            json!({ "allowed": false, "message": "spec.html: html must not be empty", "field": "spec.html", "warnings": [] })
        );
        assert_eq!(fixture.review.operation, "CREATE");
        assert_eq!(fixture.review.old_object, None);
    }

    #[test]
    fn an_admitted_default_expects_its_patch_or_none_and_a_conversion_its_objects() {
        let request = json!({ "operation": "UPDATE", "object": { "metadata": { "name": "p" } }, "oldObject": { "metadata": { "name": "p" } } });
        let (_, fixture, refused) = as_fixture(Path::Mutate, &request, &json!({ "allowed": true })).unwrap();
        assert!(!refused);
        assert_eq!(fixture.expect.unwrap().patch, Some(json!([])), "no patch is expected to stay none");
        let request = json!({ "desiredAPIVersion": "g/v2", "objects": [{ "metadata": { "name": "p" } }] });
        let response =
            json!({ "convertedObjects": [{ "metadata": { "name": "p" }, "v": 2 }], "result": { "status": "Success" } });
        let (_, fixture, refused) = as_fixture(Path::Convert, &request, &response).unwrap();
        assert!(!refused);
        assert_eq!(fixture.review.desired_api_version.as_deref(), Some("g/v2"));
        assert_eq!(fixture.expect.unwrap().converted.unwrap().len(), 1);
    }
}
