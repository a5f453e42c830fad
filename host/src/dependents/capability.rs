//! What a plugin may write: objects of the kinds it declares as dependents, nothing else. Every
//! desired object is checked before the first write of a reconcile, so a refused one leaves the
//! cluster untouched.

use serde_json::Value;

/// Why the plugin may not write `object` under a dependent declared as `api_version`/`kind`;
/// `None` when it may. An object that leaves its type out gets the declared one.
pub(crate) fn refusal(api_version: &str, kind: &str, object: &Value) -> Option<String> {
    let given = |field: &str| object.get(field).and_then(Value::as_str);
    let (given_version, given_kind) = (given("apiVersion").unwrap_or(api_version), given("kind").unwrap_or(kind));
    if given_version == api_version && given_kind == kind {
        return None;
    }
    let name = object.pointer("/metadata/name").and_then(Value::as_str).unwrap_or("");
    Some(format!("{given_version}/{given_kind} {name:?} is not the declared {api_version}/{kind}"))
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    #[test]
    fn the_declared_kind_or_none_is_permitted() {
        let object = json!({ "apiVersion": "v1", "kind": "ConfigMap", "metadata": { "name": "a" } });
        assert_eq!(refusal("v1", "ConfigMap", &object), None);
        assert_eq!(refusal("v1", "ConfigMap", &json!({ "metadata": { "name": "a" } })), None);
    }

    #[test]
    fn another_kind_or_version_is_refused_by_name() {
        let secret = json!({ "apiVersion": "v1", "kind": "Secret", "metadata": { "name": "x-rogue" } });
        assert_eq!(
            refusal("v1", "ConfigMap", &secret).as_deref(),
            Some("v1/Secret \"x-rogue\" is not the declared v1/ConfigMap")
        );
        let other_version = json!({ "apiVersion": "apps/v1beta1", "kind": "Deployment" });
        assert!(refusal("apps/v1", "Deployment", &other_version).is_some());
        let only_kind = json!({ "kind": "Secret" });
        assert!(refusal("v1", "ConfigMap", &only_kind).is_some());
    }
}
