//! NamespaceQuota (`sample.wasmop.dev/v1`): keeps a ResourceQuota and a LimitRange in its
//! namespace and reports the quota's usage, which the API server's quota controller writes into
//! the ResourceQuota's status. A status-only change of a dependent reconciles its primary, so the
//! usage follows the namespace.

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};
use wasmop_guest::schemars::JsonSchema;
use wasmop_guest::{
    Config, Context, Crd, Dependent, Desired, Error, Kind, Outcome, Reconciler, Resource, serde_json::json,
};

/// What a NamespaceQuota asks for.
#[derive(Deserialize, JsonSchema)]
#[schemars(crate = "wasmop_guest::schemars")]
#[serde(rename_all = "camelCase")]
pub struct Spec {
    /// The quota's hard limits, e.g. `configmaps: "10"`.
    hard: BTreeMap<String, String>,
    /// Default limits of each container; no LimitRange without them.
    default_limits: Option<BTreeMap<String, String>>,
}

/// What the plugin reports.
#[derive(Serialize, Deserialize, JsonSchema)]
#[schemars(crate = "wasmop_guest::schemars")]
pub struct Status {
    /// The quota's usage, as the quota controller counted it.
    used: BTreeMap<String, String>,
}

/// The plugin.
pub struct NamespaceQuotaReconciler;

impl Reconciler for NamespaceQuotaReconciler {
    type Primary = Resource<Spec>;

    // ANCHOR: config
    fn config() -> Config {
        Config::new("quota", Kind::namespaced("sample.wasmop.dev", "v1", "NamespaceQuota"))
            .dependent(Dependent::new("quota", Kind::namespaced("", "v1", "ResourceQuota")))
            .dependent(Dependent::new("limits", Kind::namespaced("", "v1", "LimitRange")))
    }
    // ANCHOR_END: config

    fn crd() -> Option<Crd> {
        Some(Crd::of::<Spec, Status>(&Self::config().primary))
    }

    fn desired(object: &Self::Primary, _ctx: &Context) -> Result<Vec<Desired>, Error> {
        let name = object.metadata.name.clone().unwrap_or_default();
        let quota = json!({ "apiVersion": "v1", "kind": "ResourceQuota", "metadata": { "name": name },
                            "spec": { "hard": object.spec.hard } });
        let limits = object.spec.default_limits.as_ref().map(|default| {
            json!({ "apiVersion": "v1", "kind": "LimitRange", "metadata": { "name": name },
                    "spec": { "limits": [{ "type": "Container", "default": default }] } })
        });
        Ok([Some(Desired::new("quota", &quota)), limits.map(|l| Desired::new("limits", &l))]
            .into_iter()
            .flatten()
            .collect())
    }

    // ANCHOR: reconcile
    fn reconcile(_object: Self::Primary, ctx: &Context) -> Result<Outcome, Error> {
        // The ResourceQuota as the cluster holds it, status and all.
        let quota = ctx.dependent("quota").and_then(|d| d.objects.first());
        match quota.and_then(|q| wasmop_guest::serde_json::from_value::<Status>(q["status"].clone()).ok()) {
            Some(status) => Ok(Outcome::ready("the quota is enforced").status(status)),
            None => Ok(Outcome::not_ready("waiting for the quota controller to count the namespace")),
        }
    }
    // ANCHOR_END: reconcile
}

wasmop_guest::export!(NamespaceQuotaReconciler);

#[cfg(test)]
mod tests {
    use wasmop_guest::Phase;
    use wasmop_guest::serde_json::{Value, json};
    use wasmop_guest::testing::FakeHost;

    use super::*;

    fn quota(limits: Value) -> Value {
        json!({ "metadata": { "name": "team", "namespace": "a", "generation": 1 },
                "spec": { "hard": { "configmaps": "10" }, "defaultLimits": limits } })
    }

    #[test]
    fn crd_yaml_is_the_crd_the_types_generate() {
        let checked_in: Value = serde_saphyr::from_str(include_str!("../crd.yaml")).expect("crd.yaml is YAML");
        let generated = NamespaceQuotaReconciler::crd().expect("a CRD").to_value();
        assert!(checked_in == generated, "regenerate crd.yaml: wasmop crd --plugin plugins/dist/quota.wasm");
    }

    #[test]
    fn keeps_a_quota_and_a_limit_range_only_with_default_limits() {
        let desired = FakeHost::new().desired::<NamespaceQuotaReconciler>(&quota(json!({ "cpu": "1" }))).unwrap();
        assert_eq!(desired.len(), 2);
        let desired = FakeHost::new().desired::<NamespaceQuotaReconciler>(&quota(Value::Null)).unwrap();
        assert_eq!(desired.len(), 1, "no LimitRange without default limits");
    }

    #[test]
    fn reports_the_usage_the_quota_controller_counted() {
        let counted = json!({ "metadata": { "name": "team" }, "status": { "used": { "configmaps": "3" } } });
        let run = FakeHost::new()
            .with_dependent_state("quota", Phase::Ready, &[counted])
            .reconcile::<NamespaceQuotaReconciler>(&quota(Value::Null));
        assert_eq!(run.status(), Some(&json!({ "used": { "configmaps": "3" } })));
        let uncounted = json!({ "metadata": { "name": "team" } });
        let run = FakeHost::new()
            .with_dependent_state("quota", Phase::Ready, &[uncounted])
            .reconcile::<NamespaceQuotaReconciler>(&quota(Value::Null));
        assert_eq!(run.status(), None, "not ready until counted");
    }

    #[test]
    // ANCHOR: test
    fn follows_the_quota_controller_s_count() {
        let mut host = FakeHost::new();
        let first = host.run_until_stable::<NamespaceQuotaReconciler>(&quota(Value::Null));
        assert_eq!(first.condition("Ready").map(|c| &c["status"]), Some(&json!("False")));
        // The quota controller counts the namespace: a status-only change of the dependent.
        let quotas = Kind::namespaced("", "v1", "ResourceQuota");
        host.set_status(&quotas, Some("a"), "team", &json!({ "used": { "configmaps": "4" } }));
        let stable = host.run_until_stable::<NamespaceQuotaReconciler>(&quota(Value::Null));
        assert_eq!(stable.status()["used"], json!({ "configmaps": "4" }));
        assert_eq!(stable.condition("Ready").map(|c| &c["status"]), Some(&json!("True")));
    }
    // ANCHOR_END: test
}
