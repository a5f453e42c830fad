//! The JOSDK WebPage sample as a wasmop plugin: each WebPage (`sample.wasmop.dev/v1`) gets a
//! ConfigMap holding its HTML, an nginx Deployment serving it, a Service, and an Ingress while
//! `spec.exposed` is true. The host applies them, owned by the page, and tells the plugin where
//! they stand; the status names the ConfigMap and says whether the page is Ready (its dependents
//! are applied) and Available (nginx runs).
//!
//! The plugin also serves three webhooks for its WebPages: a validating one that refuses an
//! empty `spec.html`, a mutating one that sets `spec.exposed` to `false` when it is absent, and
//! the conversion between the CRD's two versions: `v1`, the one stored and reconciled, and
//! `v2` ([`v2`], converted by [`conversion`]), which moves the HTML into `spec.content.html` and says `spec.exposure:
//! Public|Private`. Its CRD (`crd.yaml`) is generated from the types (natively: see `crd`), with
//! a rule the API server checks itself: the HTML fits in a ConfigMap.
//!
//! `fixture-webpage-odd` (the `odd` feature) is a shadow candidate of this plugin: for WebPages
//! whose name ends in an odd digit, it desires one more key in the ConfigMap and a Service of
//! another name (`<page>-shadow`, the Ingress pointing at it); the rest is the same.
//! `fixture-webpage-escape` (the `escape` feature) is another: for those WebPages it desires its
//! ConfigMap in namespace `kube-system`, which the host refuses (`CapabilityDenied`).

pub mod conversion;
pub mod v1;
pub mod v2;

use serde::{Deserialize, Serialize};
use wasmop_guest::conditions::{self, Condition};
use wasmop_guest::k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;
use wasmop_guest::schemars::JsonSchema;
use wasmop_guest::serde_json::{Value, json};
use wasmop_guest::{
    Admission, Check, Cleaner, Cleanup, Config, Context, Converter, Defaulter, Dependent, Desired, Error, Event, Kind,
    Outcome, Phase, Reconciler, Validator, Verdict, Webhook,
};

use self::v1::WebPageSpec;

/// A WebPage as the plugin reads it (`v1`).
#[derive(Deserialize, Serialize)]
pub struct WebPage {
    metadata: ObjectMeta,
    spec: WebPageSpec,
    #[serde(skip_serializing_if = "Option::is_none")]
    status: Option<WebPageStatus>,
}

/// The conditions of a WebPage's status, as the plugin reads them.
#[derive(Deserialize, Serialize)]
struct WebPageStatus {
    #[serde(default)]
    conditions: Vec<Condition>,
}

/// What the plugin reports in a WebPage's status (every version's).
#[derive(Serialize, JsonSchema)]
#[schemars(crate = "wasmop_guest::schemars")]
#[serde(rename_all = "camelCase")]
pub struct Status {
    /// The ConfigMap holding the page's HTML.
    html_config_map: String,
    /// Whether nginx serves the page (its Deployment is ready).
    available: bool,
}

fn config_map() -> Kind {
    Kind::namespaced("", "v1", "ConfigMap").plural("configmaps")
}

fn deployment() -> Kind {
    Kind::namespaced("apps", "v1", "Deployment").plural("deployments")
}

fn service() -> Kind {
    Kind::namespaced("", "v1", "Service").plural("services")
}

fn ingress() -> Kind {
    Kind::namespaced("networking.k8s.io", "v1", "Ingress").plural("ingresses")
}

/// Reconciles WebPages.
struct WebPageReconciler;

impl Reconciler for WebPageReconciler {
    type Primary = WebPage;

    // ANCHOR: config
    fn config() -> Config {
        Config::new("webpage", Kind::namespaced("sample.wasmop.dev", "v1", "WebPage"))
            .dependent(Dependent::new("configmap", config_map()))
            .dependent(
                Dependent::new("deployment", deployment())
                    .depends_on("configmap")
                    .ready_when(Check::fields_equal("status.readyReplicas", "spec.replicas")),
            )
            .dependent(Dependent::new("service", service()).depends_on("configmap"))
            .dependent(
                Dependent::new("ingress", ingress())
                    .depends_on("service")
                    .reconcile_when(Check::field_equals("spec.exposed", true)),
            )
            .webhook(Webhook::validating())
            .webhook(Webhook::mutating())
            .webhook(Webhook::conversion())
    }
    // ANCHOR_END: config

    // ANCHOR: crd
    // Native only: with the schema generator, the component would pass the 1 MiB a ConfigMap
    // holds, and the shadow-rollout examples deliver it in ConfigMaps. Its test checks crd.yaml.
    #[cfg(not(target_family = "wasm"))]
    fn crd() -> Option<wasmop_guest::Crd> {
        // v1 stays the version stored (the hub) while v2 is served beside it.
        let primary = Self::config().primary;
        let crd = wasmop_guest::Crd::of::<WebPageSpec, Status>(&primary).version::<v2::Spec, Status>("v2");
        Some(crd.short_name("wp").printer_column("Age", "date", ".metadata.creationTimestamp"))
    }
    // ANCHOR_END: crd

    // ANCHOR: validate
    fn desired(page: &WebPage, _ctx: &Context) -> Result<Vec<Desired>, Error> {
        let name = page.metadata.name.as_deref().ok_or_else(|| Error::invalid("the WebPage has no name"))?;
        // ANCHOR_END: validate
        let labels = json!({ "app.kubernetes.io/name": "webpage", "app.kubernetes.io/instance": name });
        let html = format!("{name}-html");
        let mut data = json!({ "index.html": page.spec.html });
        let mut service_name = name.to_string();
        if cfg!(feature = "odd") && name.ends_with(['1', '3', '5', '7', '9']) {
            data["candidate.html"] = json!(page.spec.html);
            service_name = format!("{name}-shadow");
        }
        let mut config_map =
            json!({ "apiVersion": "v1", "kind": "ConfigMap", "metadata": { "name": html }, "data": data });
        if cfg!(feature = "escape") && name.ends_with(['1', '3', '5', '7', '9']) {
            config_map["metadata"]["namespace"] = json!("kube-system");
        }
        Ok(vec![
            Desired::new("configmap", &config_map),
            Desired::new(
                "deployment",
                &json!({
                    "apiVersion": "apps/v1", "kind": "Deployment",
                    "metadata": { "name": name, "labels": labels },
                    "spec": {
                        "replicas": 1,
                        "selector": { "matchLabels": labels },
                        "template": {
                            "metadata": { "labels": labels },
                            "spec": {
                                "containers": [{
                                    "name": "nginx", "image": "nginx:1.27-alpine",
                                    "ports": [{ "name": "http", "containerPort": 80 }],
                                    "volumeMounts": [{ "name": "html", "mountPath": "/usr/share/nginx/html" }],
                                }],
                                "volumes": [{ "name": "html", "configMap": { "name": html } }],
                            },
                        },
                    },
                }),
            ),
            Desired::new(
                "service",
                &json!({
                    "apiVersion": "v1", "kind": "Service", "metadata": { "name": service_name, "labels": labels },
                    "spec": { "selector": labels, "ports": [{ "name": "http", "port": 80, "targetPort": "http" }] },
                }),
            ),
            Desired::new(
                "ingress",
                &json!({
                    "apiVersion": "networking.k8s.io/v1", "kind": "Ingress", "metadata": { "name": name, "labels": labels },
                    "spec": { "rules": [{ "http": { "paths": [{
                        "path": "/", "pathType": "Prefix",
                        "backend": { "service": { "name": service_name, "port": { "number": 80 } } },
                    }] } }] },
                }),
            ),
        ])
    }

    // ANCHOR: reconcile
    fn reconcile(page: WebPage, ctx: &Context) -> Result<Outcome, Error> {
        let name = page.metadata.name.unwrap_or_default();
        ctx.info(format!("reconciling a WebPage of {} bytes of html", page.spec.html.len()));
        let available = ctx.dependent("deployment").is_some_and(|d| d.is_ready());
        let status = Status { html_config_map: format!("{name}-html"), available };
        // The host keeps Ready, Reconciling and Degraded (with observedGeneration) from this.
        if ctx.dependents().iter().any(|d| d.phase == Phase::Skipped) {
            return Ok(Outcome::not_ready("some dependents wait for others").status(status));
        }
        let outcome = Outcome::ready("the WebPage's dependents are applied").status(status);
        let was_ready = page.status.is_some_and(|s| conditions::is_true(&s.conditions, "Ready"));
        Ok(if was_ready {
            outcome
        } else {
            outcome.event(Event::normal("Ready", "Reconcile").note("the WebPage is ready"))
        })
    }
    // ANCHOR_END: reconcile
}

impl Cleaner for WebPageReconciler {
    fn cleanup(page: WebPage, _ctx: &Context) -> Result<Cleanup, Error> {
        let name = page.metadata.name.unwrap_or_default();
        let note = format!("WebPage {name} deleted; the garbage collector removes its dependents");
        Ok(Cleanup::done().event(Event::normal("CleanedUp", "Cleanup").note(note)))
    }
}

// ANCHOR: webhooks
impl Validator for WebPageReconciler {
    fn validate(request: &Admission<WebPage>, _ctx: &Context) -> Verdict {
        match &request.object {
            Some(page) if page.spec.html.is_empty() => Verdict::deny("html must not be empty").at("spec.html"),
            _ => Verdict::allow(),
        }
    }
}

impl Defaulter for WebPageReconciler {
    fn default(page: &mut WebPage, _ctx: &Context) -> Result<(), String> {
        page.spec.exposed.get_or_insert(false);
        Ok(())
    }
}
// ANCHOR_END: webhooks

// ANCHOR: convert
impl Converter for WebPageReconciler {
    fn convert(mut page: Value, to: &str, _ctx: &Context) -> Result<Value, String> {
        let spec = page.get_mut("spec").map(Value::take).ok_or("the WebPage has no spec")?;
        page["spec"] = match to {
            "sample.wasmop.dev/v2" => conversion::to_v2(spec)?,
            "sample.wasmop.dev/v1" => conversion::to_v1(spec)?,
            other => return Err(format!("WebPage has no version {other}")),
        };
        Ok(page)
    }
}
// ANCHOR_END: convert

wasmop_guest::export!(WebPageReconciler);

#[cfg(test)]
mod tests {
    use wasmop_guest::testing::{FakeHost, Run};
    use wasmop_guest::{Admission, Error, EventType};

    use super::*;

    fn page(generation: i64, status: Value) -> Value {
        json!({
            "apiVersion": "sample.wasmop.dev/v1",
            "kind": "WebPage",
            "metadata": { "name": "hello", "namespace": "default", "generation": generation },
            "spec": { "html": "<h1>Hello</h1>" },
            "status": status,
        })
    }

    fn applied_host(deployment: Phase) -> FakeHost {
        FakeHost::new()
            .with_dependent_state("configmap", Phase::Ready, &[json!({})])
            .with_dependent_state("deployment", deployment, &[json!({})])
            .with_dependent_state("service", Phase::Ready, &[json!({})])
            .with_dependent_state("ingress", Phase::Deleted, &[] as &[Value])
    }

    /// The desired objects, by dependent name, as the host would receive them.
    fn desired_by_dependent(page: &Value) -> std::collections::BTreeMap<String, Value> {
        let desired = FakeHost::new().desired::<WebPageReconciler>(page).expect("desired objects");
        desired.into_iter().map(|d| (d.dependent, d.object)).collect()
    }

    fn reconcile(host: &FakeHost, page: &Value) -> Run {
        host.reconcile::<WebPageReconciler>(page)
    }

    #[test]
    fn desires_a_config_map_deployment_service_and_ingress() {
        let desired = desired_by_dependent(&page(1, Value::Null));
        assert_eq!(desired.keys().collect::<Vec<_>>(), ["configmap", "deployment", "ingress", "service"]);
        assert_eq!(desired["configmap"]["metadata"]["name"], "hello-html");
        assert_eq!(desired["configmap"]["data"]["index.html"], "<h1>Hello</h1>");
        let pod = &desired["deployment"]["spec"]["template"]["spec"];
        assert_eq!(pod["volumes"][0]["configMap"]["name"], "hello-html");
        assert_eq!(desired["ingress"]["spec"]["rules"][0]["http"]["paths"][0]["backend"]["service"]["name"], "hello");
    }

    #[test]
    fn the_workflow_orders_and_conditions_the_dependents() {
        let config = WebPageReconciler::config();
        let by_name = |name: &str| config.dependents.iter().find(|d| d.name == name).expect("declared");
        assert_eq!(by_name("deployment").depends_on, ["configmap"]);
        assert_eq!(by_name("service").depends_on, ["configmap"]);
        assert_eq!(by_name("ingress").reconcile_when, Some(Check::field_equals("spec.exposed", true)));
        assert!(by_name("deployment").ready_when.is_some());
    }

    #[test]
    fn an_applied_page_is_ready_and_names_its_config_map() {
        let run = reconcile(&applied_host(Phase::NotReady), &page(3, Value::Null));
        assert_eq!(run.status(), Some(&json!({ "htmlConfigMap": "hello-html", "available": false })));
        assert_eq!(run.outcome().readiness(), Some((true, "the WebPage's dependents are applied")));
        assert_eq!(run.events().len(), 1);
        assert_eq!(run.events()[0].event_type, EventType::Normal);
        assert!(run.logs()[0].message.contains("14 bytes"));
    }

    #[test]
    fn a_page_with_skipped_dependents_is_not_ready_and_a_running_deployment_is_available() {
        let skipped = FakeHost::new().with_dependent_state("service", Phase::Skipped, &[] as &[Value]);
        let run = reconcile(&skipped, &page(1, Value::Null));
        assert_eq!(run.outcome().readiness(), Some((false, "some dependents wait for others")));
        let run = reconcile(&applied_host(Phase::Ready), &page(1, Value::Null));
        assert_eq!(run.status().map(|s| &s["available"]), Some(&json!(true)));
    }

    #[test]
    fn an_already_ready_page_gets_no_event() {
        let ready = json!({ "conditions": [{ "type": "Ready", "status": "True", "reason": "Ready", "message": "" }] });
        let run = reconcile(&applied_host(Phase::NotReady), &page(2, ready));
        assert!(run.events().is_empty());
    }

    #[test]
    fn the_whole_loop_applies_the_dependents_and_keeps_the_conditions() {
        let mut host = FakeHost::new();
        let stable = host.run_until_stable::<WebPageReconciler>(&page(1, Value::Null));
        // No Deployment controller here: the Deployment never gets readyReplicas, so the
        // Service (independent of it) is applied and the Ingress (spec.exposed unset) is not.
        assert_eq!(stable.objects(&config_map()).len(), 1);
        assert_eq!(stable.objects(&deployment()).len(), 1);
        assert_eq!(stable.objects(&service()).len(), 1);
        assert!(stable.objects(&ingress()).is_empty());
        let ready = stable.condition("Ready").expect("the host keeps Ready");
        assert_eq!((&ready["status"], &ready["observedGeneration"]), (&json!("True"), &json!(1)));
        assert_eq!(stable.status()["available"], false);
        assert_eq!(stable.passes(), 2);
    }

    #[test]
    fn page_without_html_is_invalid() {
        let run = reconcile(&FakeHost::new(), &json!({ "metadata": { "name": "hello" }, "spec": {} }));
        assert!(matches!(run.error(), Error::Invalid(m) if m == "spec: missing field `html`"), "{:?}", run.error());
    }

    #[test]
    fn an_empty_html_is_refused_at_its_field() {
        let mut empty = page(1, Value::Null);
        empty["spec"]["html"] = json!("");
        let verdict = FakeHost::new().validate::<WebPageReconciler>(&Admission::create(&empty)).unwrap();
        assert!(!verdict.is_allowed());
        assert_eq!((verdict.message(), verdict.field()), (Some("html must not be empty"), Some("spec.html")));
        let updated = Admission::update(&empty, &page(1, Value::Null));
        assert!(!FakeHost::new().validate::<WebPageReconciler>(&updated).unwrap().is_allowed());
        let verdict = FakeHost::new().validate::<WebPageReconciler>(&Admission::create(&page(1, Value::Null)));
        assert!(verdict.unwrap().is_allowed());
    }

    #[test]
    fn a_page_that_is_not_a_web_page_is_refused_at_the_field_at_fault() {
        let mut odd = page(1, Value::Null);
        odd["spec"]["html"] = json!(42);
        let verdict = FakeHost::new().validate::<WebPageReconciler>(&Admission::create(&odd)).unwrap();
        assert_eq!(verdict.field(), Some("spec.html"));
        assert!(verdict.message().is_some_and(|m| m.contains("expected a string")), "{verdict:?}");
    }

    #[test]
    fn exposed_defaults_to_false_and_the_rest_is_kept() {
        let mut sent = page(1, Value::Null);
        sent["spec"]["extra"] = json!("kept");
        let stored = FakeHost::new().default_object::<WebPageReconciler>(&Admission::create(&sent)).unwrap();
        assert_eq!(stored["spec"], json!({ "html": "<h1>Hello</h1>", "exposed": false, "extra": "kept" }));
        assert_eq!(stored["metadata"], sent["metadata"]);
        sent["spec"]["exposed"] = json!(true);
        let stored = FakeHost::new().default_object::<WebPageReconciler>(&Admission::create(&sent)).unwrap();
        assert_eq!(stored, sent, "a page that says whether it is exposed is stored as it is");
    }

    #[test]
    fn crd_yaml_is_the_crd_the_types_generate() {
        let checked_in: Value = serde_saphyr::from_str(include_str!("../crd.yaml")).expect("crd.yaml is YAML");
        let generated = WebPageReconciler::crd().expect("a CRD").to_value();
        let yaml = serde_saphyr::to_string(&generated).expect("YAML");
        assert!(checked_in == generated, "crd.yaml differs from the types' CRD; below its header, it is:\n{yaml}");
    }

    #[test]
    fn the_crd_serves_v1_stored_and_v2_with_the_rules_the_api_server_checks() {
        let crd = WebPageReconciler::crd().expect("a CRD").to_value();
        let versions = crd["spec"]["versions"].as_array().unwrap();
        let shown: Vec<_> = versions.iter().map(|v| (&v["name"], &v["served"], &v["storage"])).collect();
        assert_eq!(shown, [(&json!("v1"), &json!(true), &json!(true)), (&json!("v2"), &json!(true), &json!(false))]);
        let spec = |i: usize| &versions[i]["schema"]["openAPIV3Schema"]["properties"]["spec"]["properties"];
        let rule = json!([{ "rule": "size(self) <= 1048576", "message": "the HTML must fit in a ConfigMap (1 MiB)" }]);
        assert_eq!(spec(0)["html"]["x-kubernetes-validations"], rule);
        assert_eq!(spec(1)["content"]["properties"]["html"]["x-kubernetes-validations"], rule);
        assert_eq!(spec(1)["exposure"]["enum"], json!(["Public", "Private"]));
    }

    #[test]
    fn a_page_converts_to_v2_and_back_unchanged() {
        let mut v1 = page(2, json!({ "htmlConfigMap": "hello-html", "available": true }));
        v1["spec"]["exposed"] = json!(true);
        let v2 =
            FakeHost::new().convert::<WebPageReconciler>(std::slice::from_ref(&v1), "sample.wasmop.dev/v2").unwrap();
        let v2 = &v2[0];
        assert_eq!(v2["apiVersion"], "sample.wasmop.dev/v2");
        assert_eq!(v2["spec"], json!({ "content": { "html": "<h1>Hello</h1>" }, "exposure": "Public" }));
        assert_eq!((&v2["metadata"], &v2["status"]), (&v1["metadata"], &v1["status"]));
        let back =
            FakeHost::new().convert::<WebPageReconciler>(std::slice::from_ref(v2), "sample.wasmop.dev/v1").unwrap();
        assert_eq!(back[0], v1);
        let unset = page(1, Value::Null);
        let v2 =
            FakeHost::new().convert::<WebPageReconciler>(std::slice::from_ref(&unset), "sample.wasmop.dev/v2").unwrap();
        assert_eq!(v2[0]["spec"], json!({ "content": { "html": "<h1>Hello</h1>" } }), "no exposure when unset");
        let back = FakeHost::new().convert::<WebPageReconciler>(&v2, "sample.wasmop.dev/v1").unwrap();
        assert_eq!(back[0], unset);
    }

    #[test]
    fn a_conversion_to_an_unknown_version_or_of_a_broken_page_fails() {
        let to_v3 = FakeHost::new().convert::<WebPageReconciler>(&[page(1, Value::Null)], "sample.wasmop.dev/v3");
        assert_eq!(to_v3.unwrap_err(), "WebPage has no version sample.wasmop.dev/v3");
        let broken = json!({ "apiVersion": "sample.wasmop.dev/v2", "kind": "WebPage", "spec": { "content": 1 } });
        let error = FakeHost::new().convert::<WebPageReconciler>(&[broken], "sample.wasmop.dev/v1").unwrap_err();
        assert!(error.starts_with("spec: "), "{error}");
    }

    #[test]
    fn cleanup_records_an_event_and_releases_the_finalizer() {
        let cleanup = FakeHost::new().cleanup::<WebPageReconciler>(&page(1, Value::Null)).expect("cleanup");
        assert!(!cleanup.keeps_finalizer());
        assert_eq!(cleanup.events()[0].reason, "CleanedUp");
    }
}
