//! Does the cluster already hold what the plugin wants? The comparison JOSDK's SSA-based matcher
//! makes: the actual object is pruned to the fields the host's field manager owns (its `Apply`
//! entry in `metadata.managedFields`), and the result must equal the desired object. Fields the
//! API server defaulted are not owned and do not count; a field someone else took over is no
//! longer owned, so the objects differ and the host applies again. Pure.

use serde_json::{Map, Value};

/// Top-level fields the API server does not record in `fieldsV1`, or that a dependent's desired
/// state never sets.
const IGNORED: [&str; 3] = ["apiVersion", "kind", "status"];

/// Whether `actual` (with `metadata.managedFields`) already holds `desired` as applied by
/// `manager`, and `manager` owns no field `desired` lacks.
pub fn matches(desired: &Value, actual: &Value, manager: &str) -> bool {
    let Some(owned) = owned_fields(actual, manager) else { return false };
    let mut desired = desired.clone();
    let mut actual = prune(actual, owned);
    for object in [&mut desired, &mut actual] {
        if let Some(fields) = object.as_object_mut() {
            for field in IGNORED {
                fields.remove(field);
            }
            if let Some(metadata) = fields.get_mut("metadata").and_then(Value::as_object_mut) {
                metadata.remove("name");
                metadata.remove("namespace");
                if metadata.is_empty() {
                    fields.remove("metadata");
                }
            }
        }
    }
    same(&desired, &actual)
}

/// The `fieldsV1` of `manager`'s `Apply` entry.
fn owned_fields<'a>(actual: &'a Value, manager: &str) -> Option<&'a Value> {
    actual["metadata"]["managedFields"]
        .as_array()?
        .iter()
        .find(|entry| entry["manager"] == manager && entry["operation"] == "Apply")?
        .get("fieldsV1")
}

/// The children of a field-set node, without the node's own marker `.`.
fn children(owned: &Value) -> impl Iterator<Item = (&String, &Value)> {
    owned.as_object().into_iter().flatten().filter(|(key, _)| key.as_str() != ".")
}

/// `actual` reduced to the fields in the field set `owned`. A node without children owns the
/// whole value (a scalar, or an atomic map or list).
fn prune(actual: &Value, owned: &Value) -> Value {
    if children(owned).next().is_none() {
        return actual.clone();
    }
    match actual {
        Value::Object(fields) => {
            let mut pruned = Map::new();
            for (key, child) in children(owned) {
                if let Some(name) = key.strip_prefix("f:")
                    && let Some(value) = fields.get(name)
                {
                    pruned.insert(name.to_string(), prune(value, child));
                }
            }
            Value::Object(pruned)
        }
        Value::Array(items) => {
            let mut pruned = Vec::new();
            for (index, item) in items.iter().enumerate() {
                if let Some(child) = children(owned).find(|(key, _)| identifies(key, index, item)).map(|(_, c)| c) {
                    pruned.push(prune(item, child));
                }
            }
            Value::Array(pruned)
        }
        scalar => scalar.clone(),
    }
}

/// Whether the list-item key `key` (`k:{..}`, `v:..` or `i:n`) names `item` at `index`.
fn identifies(key: &str, index: usize, item: &Value) -> bool {
    if let Some(fields) = key.strip_prefix("k:") {
        let Ok(Value::Object(fields)) = serde_json::from_str::<Value>(fields) else { return false };
        fields.iter().all(|(name, value)| item.get(name).is_some_and(|v| same(v, value)))
    } else if let Some(value) = key.strip_prefix("v:") {
        serde_json::from_str::<Value>(value).is_ok_and(|v| same(&v, item))
    } else if let Some(position) = key.strip_prefix("i:") {
        position.parse() == Ok(index)
    } else {
        false
    }
}

/// Whether a value is "nothing" in a desired object: null, or an empty map.
fn absent(value: &Value) -> bool {
    value.is_null() || value.as_object().is_some_and(Map::is_empty)
}

/// Equality of a desired value and the pruned actual one: numbers by value, desired fields that
/// are absent (null, empty maps) may be missing.
fn same(desired: &Value, actual: &Value) -> bool {
    match (desired, actual) {
        (Value::Number(a), Value::Number(b)) => a.as_f64() == b.as_f64(),
        (Value::Object(want), Value::Object(have)) => {
            want.iter().all(|(key, value)| match have.get(key) {
                Some(present) => same(value, present),
                None => absent(value),
            }) && have.keys().all(|key| want.get(key).is_some_and(|v| !v.is_null()))
        }
        (Value::Array(want), Value::Array(have)) => {
            want.len() == have.len() && want.iter().zip(have).all(|(w, h)| same(w, h))
        }
        _ => desired == actual,
    }
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    const MANAGER: &str = "wasmop-webpage";

    /// A Deployment as the API server returns it after `MANAGER` applied `desired()`: defaulted
    /// fields added, the field set as kube-apiserver records it.
    fn applied() -> Value {
        json!({
            "apiVersion": "apps/v1", "kind": "Deployment",
            "metadata": {
                "name": "site", "namespace": "web", "resourceVersion": "42", "generation": 1,
                "labels": { "app": "site", "wasmop.dev/managed-by": "webpage" },
                "ownerReferences": [{ "apiVersion": "sample.wasmop.dev/v1", "kind": "WebPage", "name": "site",
                                      "uid": "u-1", "controller": true, "blockOwnerDeletion": true }],
                "managedFields": [
                    { "manager": MANAGER, "operation": "Apply", "apiVersion": "apps/v1", "fieldsType": "FieldsV1",
                      "fieldsV1": {
                        "f:metadata": {
                            "f:labels": { "f:app": {}, "f:wasmop.dev/managed-by": {} },
                            "f:ownerReferences": { "k:{\"uid\":\"u-1\"}": {} }
                        },
                        "f:spec": {
                            "f:replicas": {},
                            "f:selector": {},
                            "f:template": {
                                "f:spec": {
                                    "f:containers": {
                                        "k:{\"name\":\"nginx\"}": {
                                            ".": {}, "f:image": {}, "f:name": {},
                                            "f:ports": { "k:{\"containerPort\":80,\"protocol\":\"TCP\"}": {
                                                ".": {}, "f:containerPort": {}, "f:name": {} } }
                                        }
                                    },
                                    "f:volumes": { "k:{\"name\":\"html\"}": { ".": {}, "f:configMap": { "f:name": {} }, "f:name": {} } }
                                }
                            }
                        }
                      } },
                    { "manager": "kube-controller-manager", "operation": "Update", "subresource": "status",
                      "fieldsV1": { "f:status": { "f:replicas": {} } } }
                ]
            },
            "spec": {
                "replicas": 1, "revisionHistoryLimit": 10, "progressDeadlineSeconds": 600,
                "selector": { "matchLabels": { "app": "site" } },
                "strategy": { "type": "RollingUpdate" },
                "template": { "spec": {
                    "containers": [{ "name": "nginx", "image": "nginx:1.27-alpine", "imagePullPolicy": "IfNotPresent",
                                     "ports": [{ "containerPort": 80, "name": "http", "protocol": "TCP" }] }],
                    "volumes": [{ "name": "html", "configMap": { "name": "site-html", "defaultMode": 420 } }],
                    "restartPolicy": "Always"
                } }
            },
            "status": { "replicas": 1 }
        })
    }

    fn desired() -> Value {
        json!({
            "apiVersion": "apps/v1", "kind": "Deployment",
            "metadata": {
                "name": "site", "namespace": "web",
                "labels": { "app": "site", "wasmop.dev/managed-by": "webpage" },
                "ownerReferences": [{ "apiVersion": "sample.wasmop.dev/v1", "kind": "WebPage", "name": "site",
                                      "uid": "u-1", "controller": true, "blockOwnerDeletion": true }]
            },
            "spec": {
                "replicas": 1.0,
                "selector": { "matchLabels": { "app": "site" } },
                "template": { "spec": {
                    "containers": [{ "name": "nginx", "image": "nginx:1.27-alpine",
                                     "ports": [{ "containerPort": 80, "name": "http" }] }],
                    "volumes": [{ "name": "html", "configMap": { "name": "site-html" } }]
                } }
            }
        })
    }

    #[test]
    fn an_applied_object_with_server_defaults_matches() {
        assert!(matches(&desired(), &applied(), MANAGER));
    }

    #[test]
    fn a_changed_desired_value_does_not_match() {
        let mut image = desired();
        image["spec"]["template"]["spec"]["containers"][0]["image"] = json!("nginx:1.28");
        assert!(!matches(&image, &applied(), MANAGER));
        let mut replicas = desired();
        replicas["spec"]["replicas"] = json!(2);
        assert!(!matches(&replicas, &applied(), MANAGER));
    }

    #[test]
    fn a_field_taken_over_by_someone_else_does_not_match() {
        let mut edited = applied();
        edited["spec"]["replicas"] = json!(3);
        let fields = &mut edited["metadata"]["managedFields"][0]["fieldsV1"]["f:spec"];
        fields.as_object_mut().unwrap().remove("f:replicas");
        assert!(!matches(&desired(), &edited, MANAGER));
    }

    #[test]
    fn a_dropped_field_the_manager_owns_does_not_match() {
        let mut fewer = desired();
        fewer["metadata"]["labels"].as_object_mut().unwrap().remove("app");
        assert!(!matches(&fewer, &applied(), MANAGER));
        let mut one_port_less = desired();
        one_port_less["spec"]["template"]["spec"]["containers"][0]["ports"] = json!([]);
        assert!(!matches(&one_port_less, &applied(), MANAGER));
    }

    #[test]
    fn an_added_field_does_not_match() {
        let mut more = desired();
        more["spec"]["minReadySeconds"] = json!(5);
        assert!(!matches(&more, &applied(), MANAGER));
    }

    #[test]
    fn without_an_apply_entry_of_the_manager_nothing_matches() {
        assert!(!matches(&desired(), &applied(), "someone-else"));
        let mut unmanaged = applied();
        unmanaged["metadata"].as_object_mut().unwrap().remove("managedFields");
        assert!(!matches(&desired(), &unmanaged, MANAGER));
    }

    #[test]
    fn set_and_index_items_are_found() {
        let actual = json!({
            "metadata": { "managedFields": [{ "manager": "m", "operation": "Apply",
                "fieldsV1": { "f:spec": { "f:args": {}, "f:finalizers": { "v:\"a\"": {} }, "f:items": { "i:0": { "f:x": {} } } } } }] },
            "spec": { "args": ["-v"], "finalizers": ["a", "b"], "items": [{ "x": 1, "y": 2 }] }
        });
        let desired = json!({ "spec": { "args": ["-v"], "finalizers": ["a"], "items": [{ "x": 1 }] } });
        assert!(matches(&desired, &actual, "m"));
        let other_args = json!({ "spec": { "args": ["-q"], "finalizers": ["a"], "items": [{ "x": 1 }] } });
        assert!(!matches(&other_args, &actual, "m"), "an atomic list compares whole");
    }
}
