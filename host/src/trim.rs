//! What the host drops from an object before it enters a cache, as controller-runtime's
//! `TransformStripManagedFields` does: managed fields other than wasmop's own server-side apply
//! entries (the dependents' matching reads those), and kubectl's `last-applied-configuration`
//! annotation, a second copy of the whole object. Plugins never see either. Objects the host
//! decodes itself ([`crate::wire::Wire`]) are trimmed as they are decoded.

use kube::Resource;

/// kubectl's copy of an object as it was last applied client-side.
pub const LAST_APPLIED: &str = "kubectl.kubernetes.io/last-applied-configuration";

/// Whether a managedFields entry of `manager` made by `operation` stays: wasmop's own server-side
/// apply entries only.
pub fn keeps_entry(manager: Option<&str>, operation: Option<&str>) -> bool {
    manager.is_some_and(keeps_manager) && operation.is_some_and(keeps_operation)
}

/// Whether entries of `manager` may stay: wasmop's own field managers.
pub fn keeps_manager(manager: &str) -> bool {
    manager.starts_with("wasmop-")
}

/// Whether entries made by `operation` may stay: server-side applies.
pub fn keeps_operation(operation: &str) -> bool {
    operation == "Apply"
}

/// Drops from `object` what no plugin and no rule of the host reads.
pub fn trim(object: &mut impl Resource) {
    let meta = object.meta_mut();
    if let Some(fields) = &mut meta.managed_fields {
        fields.retain(|f| keeps_entry(f.manager.as_deref(), f.operation.as_deref()));
        if fields.is_empty() {
            meta.managed_fields = None;
        }
    }
    if let Some(annotations) = &mut meta.annotations {
        annotations.remove(LAST_APPLIED);
        if annotations.is_empty() {
            meta.annotations = None;
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::wire::Object;

    #[test]
    fn only_wasmop_s_apply_entries_and_other_annotations_stay() {
        let mut object: Object = serde_json::from_value(serde_json::json!({
            "apiVersion": "v1", "kind": "ConfigMap",
            "metadata": {
                "name": "a",
                "annotations": { LAST_APPLIED: "{\"kind\":\"ConfigMap\"}", "team": "web" },
                "managedFields": [
                    { "manager": "kubectl-client-side-apply", "operation": "Update" },
                    { "manager": "wasmop-webpage", "operation": "Apply" },
                    { "manager": "wasmop-webpage", "operation": "Update" },
                    { "manager": "helm", "operation": "Apply" },
                ],
            },
        }))
        .unwrap();
        trim(&mut object);
        let fields = object.metadata.managed_fields.as_deref().unwrap();
        assert_eq!(fields.len(), 1);
        assert_eq!(
            (fields[0].manager.as_deref(), fields[0].operation.as_deref()),
            (Some("wasmop-webpage"), Some("Apply"))
        );
        assert_eq!(
            object.metadata.annotations.unwrap().into_iter().collect::<Vec<_>>(),
            [("team".into(), "web".into())]
        );
    }

    #[test]
    fn nothing_left_means_no_field_at_all() {
        let mut object: Object = serde_json::from_value(serde_json::json!({
            "apiVersion": "v1", "kind": "ConfigMap",
            "metadata": {
                "name": "a",
                "annotations": { LAST_APPLIED: "{}" },
                "managedFields": [{ "manager": "kubectl-client-side-apply", "operation": "Update" }],
            },
        }))
        .unwrap();
        trim(&mut object);
        assert_eq!((object.metadata.annotations, object.metadata.managed_fields), (None, None));
    }
}
