//! The JOSDK WebPage sample as a wasmop plugin, status only: it marks each WebPage
//! (`sample.wasmop.dev/v1`) Ready and records the generation it saw.

use serde::{Deserialize, Serialize};
use wasmop_guest::conditions::{self, Condition};
use wasmop_guest::k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;
use wasmop_guest::{Config, Context, Error, Event, Kind, Outcome, Reconciler};

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
    conditions: Vec<Condition>,
}

/// Reconciles WebPages.
struct WebPageReconciler;

impl Reconciler for WebPageReconciler {
    type Primary = WebPage;

    fn config() -> Config {
        Config::new("webpage", Kind::namespaced("sample.wasmop.dev", "v1", "WebPage"))
    }

    fn reconcile(page: WebPage, ctx: &Context) -> Result<Outcome, Error> {
        let generation = page.metadata.generation;
        ctx.info(format!("reconciling a WebPage of {} bytes of html", page.spec.html.len()));
        let mut status = page.status.unwrap_or_default();
        status.observed_generation = generation;
        let ready = Condition {
            observed_generation: generation,
            ..conditions::new("Ready", true, "Reconciled", "the WebPage is reconciled")
        };
        let mut outcome = Outcome::done();
        if conditions::set(&mut status.conditions, ready) {
            outcome = outcome.event(Event::normal("Ready", "Reconcile").note("the WebPage is ready"));
        }
        Ok(outcome.status(status))
    }
}

wasmop_guest::export!(WebPageReconciler);

#[cfg(test)]
mod tests {
    use wasmop_guest::serde_json::{Value, json};
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

    fn reconcile(page: &Value) -> Run {
        FakeHost::new().reconcile::<WebPageReconciler>(page)
    }

    #[test]
    fn marks_a_new_page_ready() {
        let run = reconcile(&page(3, Value::Null));
        let status: WebPageStatus = run.status_as();
        assert_eq!(status.observed_generation, Some(3));
        let ready = conditions::get(&status.conditions, "Ready").expect("a Ready condition");
        assert_eq!((ready.status.as_str(), ready.reason.as_str()), ("True", "Reconciled"));
        assert_eq!(ready.observed_generation, Some(3));
        assert_eq!(run.events().len(), 1);
        assert_eq!(run.events()[0].event_type, EventType::Normal);
        assert!(run.logs()[0].message.contains("14 bytes"));
        assert_eq!(run.reschedule_after(), None);
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
        let run = reconcile(&page(2, ready_since_2020));
        let status = run.status().expect("a status");
        assert_eq!(status["observedGeneration"], 2);
        assert_eq!(status["conditions"][0]["lastTransitionTime"], "2020-01-01T00:00:00Z");
        assert_eq!(status["conditions"][0]["observedGeneration"], 2);
        assert!(run.events().is_empty());
    }

    #[test]
    fn page_without_html_is_invalid() {
        let run = reconcile(&json!({ "metadata": { "name": "hello" }, "spec": {} }));
        assert!(
            matches!(run.error(), Error::Invalid(m) if m.contains("WebPage") && m.contains("html")),
            "{:?}",
            run.error()
        );
    }

    #[test]
    fn config_watches_webpages() {
        let config = WebPageReconciler::config();
        assert_eq!(config.name, "webpage");
        assert_eq!(config.primary.to_string(), "sample.wasmop.dev/v1/WebPage");
        assert!(config.primary.namespaced && config.generation_aware);
    }
}
