//! Projections: the parts of an object a plugin reads, declared per watch (and for the
//! primary), so that caches keep only those (JOSDK's "Optimizing Caches"). An object keeps its
//! `apiVersion`, `kind` and `metadata` whole; of its other fields, only the declared paths stay.
//! A path names a field by its keys from the object's top, joined by dots: `spec.replicas`,
//! `data`, `status.conditions`. An empty projection keeps the metadata alone: such a watch is
//! served by the API server's metadata-only watch.

use serde_json::{Map, Value};

/// Fields an object always keeps, whatever the projection.
const ALWAYS: [&str; 3] = ["apiVersion", "kind", "metadata"];

/// Keeps in `object` (a whole object, or only its fields besides `apiVersion`, `kind` and
/// `metadata`) the fields `paths` name and those every object keeps. A path that names no field
/// of this object is skipped; one that runs into a non-object value keeps nothing of it.
pub fn project<P: AsRef<str>>(object: &mut Value, paths: &[P]) {
    let Value::Object(fields) = object else { return };
    let mut kept = Map::new();
    for always in ALWAYS {
        if let Some(value) = fields.remove(always) {
            kept.insert(always.to_string(), value);
        }
    }
    for path in paths {
        let keys: Vec<&str> = path.as_ref().split('.').filter(|k| !k.is_empty()).collect();
        take(fields, &mut kept, &keys);
    }
    *fields = kept;
}

/// Moves the field at `keys` from `from` to the same place in `to`.
fn take(from: &mut Map<String, Value>, to: &mut Map<String, Value>, keys: &[&str]) {
    let Some((key, rest)) = keys.split_first() else { return };
    let key = *key;
    if rest.is_empty() {
        match (from.remove(key), to.get_mut(key)) {
            (None, _) => {}
            // Parts of it were kept for narrower paths: the rest joins them.
            (Some(Value::Object(remaining)), Some(Value::Object(kept))) => kept.extend(remaining),
            (Some(value), _) => drop(to.insert(key.to_string(), value)),
        }
        return;
    }
    let Some(Value::Object(inner)) = from.get_mut(key) else { return };
    let Value::Object(target) = to.entry(key.to_string()).or_insert_with(|| Value::Object(Map::new())) else {
        return; // the whole field is kept already
    };
    take(inner, target, rest);
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    fn deployment() -> Value {
        json!({
            "apiVersion": "apps/v1", "kind": "Deployment",
            "metadata": { "name": "web", "labels": { "app": "web" } },
            "spec": { "replicas": 3, "template": { "spec": { "containers": [{ "name": "nginx" }] } } },
            "status": { "readyReplicas": 2, "conditions": [{ "type": "Available" }] },
        })
    }

    #[test]
    fn only_the_named_paths_and_the_metadata_stay() {
        let mut object = deployment();
        project(&mut object, &["spec.replicas", "status.readyReplicas"]);
        assert_eq!(
            object,
            json!({
                "apiVersion": "apps/v1", "kind": "Deployment",
                "metadata": { "name": "web", "labels": { "app": "web" } },
                "spec": { "replicas": 3 },
                "status": { "readyReplicas": 2 },
            })
        );
    }

    #[test]
    fn an_empty_projection_keeps_the_metadata_alone() {
        let mut object = deployment();
        project::<&str>(&mut object, &[]);
        assert_eq!(object.as_object().unwrap().keys().collect::<Vec<_>>(), ["apiVersion", "kind", "metadata"]);
    }

    #[test]
    fn a_whole_field_and_a_path_within_it_keep_the_whole_field() {
        for paths in [["status", "status.readyReplicas"], ["status.readyReplicas", "status"]] {
            let mut object = deployment();
            project(&mut object, &paths);
            assert_eq!(object["status"], deployment()["status"], "{paths:?}");
        }
    }

    #[test]
    fn missing_paths_and_paths_through_values_keep_nothing_of_them() {
        let mut object = deployment();
        project(&mut object, &["spec.replicas.count", "spec.missing", "nothing", ""]);
        assert_eq!(object.get("spec"), Some(&json!({})), "spec is an object on the way, so it stays (empty)");
        assert!(object.get("status").is_none());
    }
}
