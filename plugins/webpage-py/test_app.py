"""The WebPage plugin, natively (no cluster, no wasm), and its built component through the whole
loop by the host's rules."""
from pathlib import Path

import pytest
from app import CONFIG_MAP, DEPLOYMENT, INGRESS, SERVICE, WebPageReconciler

from wasmop import AdmissionRequest, Check, Error, EventType, Phase
from wasmop.testing import FakeHost


def page(generation=1, status=None):
    return {
        "apiVersion": "sample.wasmop.dev/v1", "kind": "WebPage",
        "metadata": {"name": "hello", "namespace": "default", "generation": generation},
        "spec": {"html": "<h1>Hello</h1>"}, "status": status,
    }


def applied_host(deployment):
    return (FakeHost().with_dependent_state("configmap", Phase.READY, [{}])
            .with_dependent_state("deployment", deployment, [{}])
            .with_dependent_state("service", Phase.READY, [{}])
            .with_dependent_state("ingress", Phase.DELETED))


def test_desires_a_config_map_deployment_service_and_ingress():
    desired = {k: v[0] for k, v in FakeHost().desired_by_dependent(WebPageReconciler, page()).items()}
    assert sorted(desired) == ["configmap", "deployment", "ingress", "service"]
    assert desired["configmap"]["metadata"]["name"] == "hello-html"
    assert desired["configmap"]["data"]["index.html"] == "<h1>Hello</h1>"
    pod = desired["deployment"]["spec"]["template"]["spec"]
    assert pod["volumes"][0]["configMap"]["name"] == "hello-html"
    assert desired["ingress"]["spec"]["rules"][0]["http"]["paths"][0]["backend"]["service"]["name"] == "hello"


def test_the_workflow_orders_and_conditions_the_dependents():
    by_name = {d.name: d for d in WebPageReconciler.config.dependents}
    assert by_name["configmap"].kind == CONFIG_MAP
    assert by_name["deployment"].depends_on_names == ["configmap"]
    assert by_name["service"].depends_on_names == ["configmap"]
    assert by_name["ingress"].reconcile_check == Check.field_equals("spec.exposed", True)
    assert by_name["deployment"].ready_check is not None


def test_an_applied_page_is_ready_and_names_its_config_map():
    run = applied_host(Phase.NOT_READY).reconcile(WebPageReconciler, page(3))
    assert run.status == {"htmlConfigMap": "hello-html", "available": False}
    assert run.readiness == (True, "the WebPage's dependents are applied")
    assert [e.event_type for e in run.events] == [EventType.NORMAL]
    assert "14 bytes" in run.logs[0].message


def test_a_page_with_skipped_dependents_is_not_ready_and_a_running_deployment_is_available():
    run = FakeHost().with_dependent_state("service", Phase.SKIPPED).reconcile(WebPageReconciler, page())
    assert run.readiness == (False, "some dependents wait for others")
    assert applied_host(Phase.READY).reconcile(WebPageReconciler, page()).status["available"] is True


def test_an_already_ready_page_gets_no_event():
    ready = {"conditions": [{"type": "Ready", "status": "True", "reason": "Ready", "message": ""}]}
    assert applied_host(Phase.NOT_READY).reconcile(WebPageReconciler, page(2, ready)).events == []


def test_page_without_html_is_invalid():
    run = FakeHost().reconcile(WebPageReconciler, {"metadata": {"name": "hello"}, "spec": {}})
    assert run.error == Error.invalid("spec: missing field `html`")


def test_cleanup_records_an_event_and_releases_the_finalizer():
    cleanup = FakeHost().cleanup(WebPageReconciler, page())
    assert not cleanup.keeps_finalizer and cleanup.events[0].reason == "CleanedUp"


def test_an_empty_html_is_refused_at_its_field():
    empty = page()
    empty["spec"]["html"] = ""
    verdict = FakeHost().validate(WebPageReconciler, AdmissionRequest.create(empty))
    assert (verdict.allowed, verdict.message, verdict.field) == (False, "html must not be empty", "spec.html")
    assert FakeHost().validate(WebPageReconciler, AdmissionRequest.update(page(), empty)).allowed


def test_a_page_that_does_not_decode_is_refused_and_deletes_are_not_validated():
    odd = page()
    del odd["spec"]["html"]
    verdict = FakeHost().validate(WebPageReconciler, AdmissionRequest.create(odd))
    assert not verdict.allowed and "html" in verdict.message
    with pytest.raises(LookupError, match="declares no validating webhook for delete"):
        FakeHost().validate(WebPageReconciler, AdmissionRequest.delete(page()))


def test_exposed_defaults_to_false_and_the_rest_is_kept():
    sent = page()
    sent["spec"]["extra"] = "kept"
    stored = FakeHost().default_object(WebPageReconciler, AdmissionRequest.create(sent))
    assert stored["spec"] == {"html": "<h1>Hello</h1>", "exposed": False, "extra": "kept"}
    assert stored["metadata"] == sent["metadata"]
    sent["spec"]["exposed"] = True
    stored = FakeHost().default_object(WebPageReconciler, AdmissionRequest.create(sent))
    assert stored == sent, "a page that says whether it is exposed is stored as it is"


# The whole loop: the built component (plugins/dist/webpage-py.wasm, `make plugins`) under the
# host's own rules, as the Rust webpage's FakeHost test runs it.
COMPONENT = Path(__file__).parent.parent / "dist" / "webpage-py.wasm"


# ANCHOR: whole-loop
def test_the_whole_loop_applies_the_dependents_and_keeps_the_conditions():
    host = FakeHost()
    stable = host.run_until_stable(COMPONENT, page())
    # No Deployment controller here: the Deployment never gets readyReplicas, so the Service
    # (independent of it) is applied and the Ingress (spec.exposed unset) is not.
    assert [len(stable.objects(k)) for k in (CONFIG_MAP, DEPLOYMENT, SERVICE, INGRESS)] == [1, 1, 1, 0]
    assert stable.objects(CONFIG_MAP)[0]["data"] == {"index.html": "<h1>Hello</h1>"}
    ready = stable.condition("Ready")
    assert (ready["status"], ready["observedGeneration"]) == ("True", 1)
    assert stable.status["available"] is False and stable.status["observedGeneration"] == 1
    assert len(stable.passes) == 2, "a second reconcile writes nothing"
    # ANCHOR_END: whole-loop

    # A later run continues from the store: exposing the page adds its Ingress.
    exposed = {**stable.primary, "spec": {"html": "<h1>Hello</h1>", "exposed": True}}
    exposed["metadata"] = {**exposed["metadata"], "generation": 2}
    stable = host.run_until_stable(COMPONENT, exposed)
    assert [i["metadata"]["name"] for i in stable.objects(INGRESS)] == ["hello"]
    assert stable.condition("Ready")["observedGeneration"] == 2


def test_the_whole_loop_of_a_page_without_html_is_degraded_and_run_until_stable_says_so():
    invalid = {"metadata": {"name": "hello", "namespace": "default", "generation": 1}, "spec": {}}
    stable = FakeHost().run_until_settled(COMPONENT, invalid)
    assert stable.error == ("invalid", "spec: missing field `html`")
    assert stable.condition("Degraded")["status"] == "True"
    assert stable.condition("Ready")["reason"] == "InvalidResource"
    with pytest.raises(AssertionError, match="pass 1 failed"):
        FakeHost().run_until_stable(COMPONENT, invalid)
