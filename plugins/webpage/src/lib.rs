//! The JOSDK WebPage sample as a wasmop plugin: each WebPage (`sample.wasmop.dev/v1`) gets a
//! ConfigMap holding its HTML, an nginx Deployment serving it, a Service, and an Ingress while
//! `spec.exposed` is true. The host applies them, owned by the page, and tells the plugin where
//! they stand; the status names the ConfigMap and says whether the page is Ready (its dependents
//! are applied) and Available (nginx runs).

use serde::{Deserialize, Serialize};
use wasmop_guest::conditions::{self, Condition};
use wasmop_guest::k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;
use wasmop_guest::serde_json::json;
use wasmop_guest::{
    Check, Cleanup, Config, Context, Dependent, Desired, Error, Event, Kind, Outcome, Phase, Reconciler,
};

#[derive(Deserialize)]
struct WebPage {
    metadata: ObjectMeta,
    spec: WebPageSpec,
    status: Option<WebPageStatus>,
}

#[derive(Deserialize)]
struct WebPageSpec {
    html: String,
}

#[derive(Default, Deserialize, Serialize)]
#[serde(rename_all = "camelCase")]
struct WebPageStatus {
    observed_generation: Option<i64>,
    #[serde(default)]
    html_config_map: Option<String>,
    #[serde(default)]
    conditions: Vec<Condition>,
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
    }

    fn desired(page: &WebPage, _ctx: &Context) -> Result<Vec<Desired>, Error> {
        let name = page.metadata.name.as_deref().ok_or_else(|| Error::invalid("the WebPage has no name"))?;
        let labels = json!({ "app.kubernetes.io/name": "webpage", "app.kubernetes.io/instance": name });
        let html = format!("{name}-html");
        Ok(vec![
            Desired::new(
                "configmap",
                &json!({
                    "apiVersion": "v1", "kind": "ConfigMap", "metadata": { "name": html },
                    "data": { "index.html": page.spec.html },
                }),
            ),
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
                    "apiVersion": "v1", "kind": "Service", "metadata": { "name": name, "labels": labels },
                    "spec": { "selector": labels, "ports": [{ "name": "http", "port": 80, "targetPort": "http" }] },
                }),
            ),
            Desired::new(
                "ingress",
                &json!({
                    "apiVersion": "networking.k8s.io/v1", "kind": "Ingress", "metadata": { "name": name, "labels": labels },
                    "spec": { "rules": [{ "http": { "paths": [{
                        "path": "/", "pathType": "Prefix",
                        "backend": { "service": { "name": name, "port": { "number": 80 } } },
                    }] } }] },
                }),
            ),
        ])
    }

    fn reconcile(page: WebPage, ctx: &Context) -> Result<Outcome, Error> {
        let generation = page.metadata.generation;
        let name = page.metadata.name.clone().unwrap_or_default();
        ctx.info(format!("reconciling a WebPage of {} bytes of html", page.spec.html.len()));
        let applied =
            ctx.dependents().iter().all(|d| matches!(d.phase, Phase::Ready | Phase::NotReady | Phase::Deleted));
        let available = ctx.dependent("deployment").is_some_and(|d| d.is_ready());
        let mut status = page.status.unwrap_or_default();
        status.observed_generation = generation;
        status.html_config_map = Some(format!("{name}-html"));
        let ready = if applied {
            conditions::new("Ready", true, "Reconciled", "the WebPage's dependents are applied")
        } else {
            conditions::new("Ready", false, "DependentsPending", "some dependents wait for others")
        };
        let serving = if available {
            conditions::new("Available", true, "Serving", "nginx serves the page")
        } else {
            conditions::new("Available", false, "Deploying", "nginx is not ready yet")
        };
        let mut outcome = Outcome::done();
        if conditions::set(&mut status.conditions, Condition { observed_generation: generation, ..ready }) && applied {
            outcome = outcome.event(Event::normal("Ready", "Reconcile").note("the WebPage is ready"));
        }
        conditions::set(&mut status.conditions, Condition { observed_generation: generation, ..serving });
        Ok(outcome.status(status))
    }

    fn cleanup(page: WebPage, _ctx: &Context) -> Result<Cleanup, Error> {
        let name = page.metadata.name.unwrap_or_default();
        let note = format!("WebPage {name} deleted; the garbage collector removes its dependents");
        Ok(Cleanup::done().event(Event::normal("CleanedUp", "Cleanup").note(note)))
    }
}

wasmop_guest::export!(WebPageReconciler);

#[cfg(test)]
mod tests {
    use wasmop_guest::serde_json::Value;
    use wasmop_guest::testing::{FakeHost, Run};
    use wasmop_guest::{Error, EventType};

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
        let status: WebPageStatus = run.status_as();
        assert_eq!(status.observed_generation, Some(3));
        assert_eq!(status.html_config_map.as_deref(), Some("hello-html"));
        let ready = conditions::get(&status.conditions, "Ready").expect("a Ready condition");
        assert_eq!((ready.status.as_str(), ready.reason.as_str()), ("True", "Reconciled"));
        let available = conditions::get(&status.conditions, "Available").expect("an Available condition");
        assert_eq!((available.status.as_str(), available.reason.as_str()), ("False", "Deploying"));
        assert_eq!(run.events().len(), 1);
        assert_eq!(run.events()[0].event_type, EventType::Normal);
        assert!(run.logs()[0].message.contains("14 bytes"));
    }

    #[test]
    fn a_page_with_skipped_dependents_is_not_ready_and_a_running_deployment_is_available() {
        let skipped = FakeHost::new().with_dependent_state("service", Phase::Skipped, &[] as &[Value]);
        let status: WebPageStatus = reconcile(&skipped, &page(1, Value::Null)).status_as();
        let ready = conditions::get(&status.conditions, "Ready").expect("a Ready condition");
        assert_eq!((ready.status.as_str(), ready.reason.as_str()), ("False", "DependentsPending"));
        let status: WebPageStatus = reconcile(&applied_host(Phase::Ready), &page(1, Value::Null)).status_as();
        assert_eq!(conditions::get(&status.conditions, "Available").map(|c| c.status.as_str()), Some("True"));
    }

    #[test]
    fn already_ready_page_keeps_its_transition_time_and_gets_no_event() {
        let ready_since_2020 = json!({
            "observedGeneration": 1,
            "conditions": [{
                "type": "Ready", "status": "True", "reason": "Reconciled", "message": "",
                "lastTransitionTime": "2020-01-01T00:00:00Z", "observedGeneration": 1,
            }],
        });
        let run = reconcile(&applied_host(Phase::NotReady), &page(2, ready_since_2020));
        let status = run.status().expect("a status");
        assert_eq!(status["observedGeneration"], 2);
        assert_eq!(status["conditions"][0]["lastTransitionTime"], "2020-01-01T00:00:00Z");
        assert!(run.events().is_empty());
    }

    #[test]
    fn page_without_html_is_invalid() {
        let run = reconcile(&FakeHost::new(), &json!({ "metadata": { "name": "hello" }, "spec": {} }));
        assert!(
            matches!(run.error(), Error::Invalid(m) if m.contains("WebPage") && m.contains("html")),
            "{:?}",
            run.error()
        );
    }

    #[test]
    fn cleanup_records_an_event_and_releases_the_finalizer() {
        let cleanup = FakeHost::new().cleanup::<WebPageReconciler>(&page(1, Value::Null)).expect("cleanup");
        assert!(!cleanup.keeps_finalizer());
        assert_eq!(cleanup.events()[0].reason, "CleanedUp");
    }
}
