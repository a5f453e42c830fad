//! In what order a (re-)list's primaries are reconciled. Every listed primary is reconciled once,
//! as in JOSDK and controller-runtime; those the list shows with work waiting go first, as live
//! changes do, and the rest, which look settled, at background priority. A host that restarts
//! with 10,000 settled objects and one changed while it was down reconciles the changed one
//! first instead of behind thousands that need nothing.

use kube::api::DynamicObject;

use crate::scheduler::Priority;

/// The priority of a listed primary: [`Priority::Live`] when it has work waiting by the host's
/// own records (it is being deleted, it lacks the plugin's `finalizer`, or its status has not
/// observed its generation), [`Priority::Background`] otherwise.
pub(super) fn priority(object: &DynamicObject, finalizer: Option<&str>) -> Priority {
    let meta = &object.metadata;
    let deleting = meta.deletion_timestamp.is_some();
    let unmarked = finalizer.is_some_and(|f| !meta.finalizers.iter().flatten().any(|g| g == f));
    let observed = object.data.pointer("/status/observedGeneration").and_then(serde_json::Value::as_i64);
    let unobserved = meta.generation.is_some() && observed != meta.generation;
    if deleting || unmarked || unobserved { Priority::Live } else { Priority::Background }
}

#[cfg(test)]
mod tests {
    use kube::api::{ApiResource, GroupVersionKind};
    use serde_json::json;

    use super::*;

    fn object(generation: Option<i64>, status: serde_json::Value, finalizers: &[&str]) -> DynamicObject {
        let resource = ApiResource::from_gvk(&GroupVersionKind::gvk("g", "v1", "K"));
        let mut o = DynamicObject::new("a", &resource).within("ns").data(json!({ "spec": {}, "status": status }));
        o.metadata.generation = generation;
        o.metadata.finalizers = Some(finalizers.iter().map(|f| f.to_string()).collect());
        o
    }

    #[test]
    fn a_primary_whose_status_observed_its_generation_is_settled() {
        let settled = object(Some(3), json!({ "observedGeneration": 3 }), &["f"]);
        assert_eq!(priority(&settled, Some("f")), Priority::Background);
        assert_eq!(priority(&settled, None), Priority::Background);
        // Kinds without generations have nothing to observe.
        assert_eq!(priority(&object(None, json!({}), &[]), None), Priority::Background);
    }

    #[test]
    fn a_changed_unreconciled_unmarked_or_deleting_primary_goes_first() {
        assert_eq!(priority(&object(Some(4), json!({ "observedGeneration": 3 }), &["f"]), Some("f")), Priority::Live);
        assert_eq!(priority(&object(Some(1), json!(null), &["f"]), Some("f")), Priority::Live);
        assert_eq!(priority(&object(Some(3), json!({ "observedGeneration": 3 }), &[]), Some("f")), Priority::Live);
        let mut deleting = object(Some(3), json!({ "observedGeneration": 3 }), &["f"]);
        deleting.metadata.deletion_timestamp = Some(k8s_openapi::apimachinery::pkg::apis::meta::v1::Time(
            "2026-11-25T09:00:00Z".parse().expect("a timestamp"),
        ));
        assert_eq!(priority(&deleting, Some("f")), Priority::Live);
    }
}
