"""Every setting the Python API offers reaches ``describe`` (the WIT ``plugin-config``)."""

import dataclasses
import json

import pytest

from wasmop import (AdmissionRequest, Check, Cleanup, Config, Dependent, Error, Event, ExternalDependent, FailurePolicy, Filters,
                    HttpGrant, Inbound, Kind, Operation, Origin, Outcome, Polling, Predicate, RateLimit, Retry,
                    SecretKey, Sharding, Tracking, Verdict, Watch, Webhook)
from wasmop.plugin import Plugin
from wasmop.testing import FakeHost

CONFIG_MAP = Kind.namespaced("", "v1", "ConfigMap").plural("configmaps")


class Everything:
    config = (
        Config("everything", Kind.cluster("example.com", "v2", "Policy").plural("policies"))
        .label_selector("app=web").field_selector("metadata.name!=skip")
        .filters(Filters(on_create=False, on_annotation_change=True, on_label_change=True))
        .generation_aware(False)
        .retry(Retry(max_attempts=3, initial_interval=0.25, multiplier=2, max_interval=10, jitter=0.25))
        .max_reconcile_interval(0).rate_limit(RateLimit(2, 3.5)).max_concurrent_reconciles(4)
        .watch(Watch(CONFIG_MAP).namespace("shared").label_selector("a").field_selector("b").cluster("edge")
               .mapped_by_plugin().project(["data"]).predicate(Predicate.plugin("p")))
        .resync_period(90).finalizer("example.com/cleanup")
        .dependent(Dependent("cm", CONFIG_MAP).read_only().depends_on("x").ready_when(Check.condition_true("A"))
                   .reconcile_when(Check.field_equals("spec.on", True)).owned_by_annotations().in_namespace("n")
                   .not_ready_when_empty().adopt())
        .own_conditions().project(["spec"])
        .predicate(Predicate.generation_changed() | ~Predicate.annotations_changed())
        .http(HttpGrant().origin(Origin.parse("https://api.example.com:8443/v1")
                                 .secret_header("authorization", SecretKey("tok", "t").in_namespace("s"), "Bearer "))
              .connect_timeout(1).timeout(2.5).max_response_bytes(1024).max_concurrent(3))
        .polling(Polling.global_(30)).inbound(Inbound(SecretKey("in", "token")).caching())
        .external_dependent(ExternalDependent("records").depends_on("cm").ready_when(Check.plugin("r"))
                            .reconcile_when(Check.fields_equal("a", "b")).tracked_in(Tracking.SECRET))
        .sharding(Sharding.NONE)
        .webhook(Webhook.validating())
    )

    def reconcile(self, primary, ctx):
        return Outcome.done()

    def cleanup(self, primary, ctx):
        return Cleanup.done()

    def validate(self, request, ctx):
        return Verdict.allow()


def test_every_field_of_plugin_config_is_set(component):
    wit = component.wit
    described = component.plugin_config(Everything.config, Plugin(Everything).cleans)
    for f in dataclasses.fields(wit.PluginConfig):
        assert getattr(described, f.name) not in (None, []), f.name
    assert described.retry == wit.RetryPolicy(3, 250, 2.0, 10_000, 0.25)
    assert described.rate_limit == wit.RateLimit(2, 3500)
    assert described.max_reconcile_interval_ms == 0 and described.resync_period_ms == 90_000
    assert described.filters == wit.EventFilters(False, True, True, True, True)
    assert described.finalizer == wit.Finalizer_Named("example.com/cleanup")
    assert described.cleanup and not described.conditions and not described.generation_aware
    assert described.primary == wit.KindRef("example.com", "v2", "Policy", "policies", False)
    (w,) = described.watches
    assert (w.namespace, w.label_selector, w.field_selector, w.cluster) == ("shared", "a", "b", "edge")
    assert w.mapper == wit.Mapper_Plugin() and w.projection == ["data"]
    assert w.predicate == [wit.PredicateTerm_Plugin("p")]
    assert described.predicate == [wit.PredicateTerm_GenerationChanged(), wit.PredicateTerm_AnnotationsChanged(),
                                   wit.PredicateTerm_Not(), wit.PredicateTerm_Or()]
    (d,) = described.dependents
    assert d == wit.Dependent("cm", wit.KindRef("", "v1", "ConfigMap", "configmaps", True), True, ["x"],
                              wit.Condition_ConditionTrue("A"), wit.Condition_FieldEquals(wit.FieldValue("spec.on", "true")),
                              wit.Ownership.ANNOTATIONS, False, "n", True)
    (origin,) = described.http.origins
    assert (origin.scheme, origin.host, origin.port) == ("https", "api.example.com", 8443)
    assert origin.secret_headers == [wit.SecretHeader("authorization", wit.SecretKey("tok", "s", "t"), "Bearer ")]
    assert (described.http.connect_timeout_ms, described.http.timeout_ms) == (1000, 2500)
    assert (described.http.max_response_bytes, described.http.max_concurrent) == (1024, 3)
    assert described.polling == wit.Polling(wit.PollingMode.GLOBAL, 30_000)
    assert described.inbound == wit.Inbound(wit.SecretKey("in", None, "token"), True)
    assert described.external_dependents == [wit.ExternalDependent(
        "records", ["cm"], wit.Condition_Plugin("r"), wit.Condition_FieldsEqual(wit.FieldPair("a", "b")), True,
        wit.Tracking.SECRET)]
    assert described.sharding == wit.Sharding.NONE


def test_defaults_match_the_rust_sdk(component):
    class Minimal:
        config = Config("minimal", Kind.namespaced("example.com", "v1", "Thing"))

        def reconcile(self, primary, ctx):
            return Outcome.done()

    described = component.plugin_config(Minimal.config, Plugin(Minimal).cleans)
    assert described.conditions and described.generation_aware and not described.cleanup
    assert described.filters == component.wit.EventFilters(True, True, True, False, False)
    assert described.finalizer == component.wit.Finalizer_Derived()
    assert described.watches == [] and described.projection is None and described.retry is None
    assert described.sharding is None, "the host's default"
    assert described.webhooks == [], "no webhooks"
    by_namespace = Config("ns", Kind.namespaced("", "v1", "ConfigMap")).sharding(Sharding.NAMESPACE)
    assert component.plugin_config(by_namespace, False).sharding == component.wit.Sharding.NAMESPACE
    core = component.plugin_config(Config("core", Kind.namespaced("", "v1", "ConfigMap")), False)
    assert not core.conditions


def test_outcomes_errors_and_cleanups_cross_into_the_records(component):
    wit = component.wit
    out = component.outcome(Outcome.not_ready("waiting").status({"a": 1}).reschedule_after(1.5)
                            .event(Event.warning("Slow", "Reconcile").note("n")).label("l", "v")
                            .remove_annotation("x"))
    assert out.readiness == wit.Readiness(False, "waiting") and json.loads(out.status) == {"a": 1}
    assert out.reschedule_after_ms == 1500 and out.labels == [("l", "v")] and out.annotations == [("x", None)]
    assert out.events == [wit.Event(wit.EventType.WARNING, "Slow", "Reconcile", "n")]
    err = component.reconcile_error(Error.invalid("bad"))
    assert err.value == wit.ReconcileError_Invalid("bad")
    assert component.from_reconcile_error(wit.ReconcileError_Transient("t")) == Error.transient("t")
    cleanup = component.cleanup_outcome(Cleanup.done().keep_finalizer().reschedule_after(30))
    assert cleanup == wit.CleanupOutcome(True, 30_000, [])


def test_a_transient_errors_delay_is_asked_of_the_host_before_the_error_returns(component, monkeypatch):
    asked = []
    monkeypatch.setattr(component.wit_host, "retry_after", asked.append)
    err = component.reconcile_error(Error.transient("rate limited", delay="1m30s"))
    assert err.value == component.wit.ReconcileError_Transient("rate limited")
    assert asked == [90_000]
    component.reconcile_error(Error.transient("down"))
    assert asked == [90_000], "no delay, no ask: the backoff applies"


class Gatekeeper:
    config = Config("gatekeeper", Kind.namespaced("example.com", "v1", "Gate")).webhook(
        Webhook.validating().kinds(CONFIG_MAP).operations(Operation.DELETE).failure_policy(FailurePolicy.IGNORE)
        .timeout(3))

    def reconcile(self, primary, ctx):
        return Outcome.done()

    def validate(self, request, ctx):
        return Verdict.deny(f"no {request.operation.value}").at("metadata.name")


def test_a_validating_webhook_reaches_describe_and_validate_its_verdict(component):
    [webhook] = component.plugin_config(Gatekeeper.config, False).webhooks
    wit = component.wit
    assert (webhook.webhook_type, webhook.operations, webhook.failure_policy) == (
        wit.WebhookType.VALIDATING, [wit.Operation.DELETE], wit.FailurePolicy.IGNORE)
    assert (webhook.kinds[0].kind, webhook.timeout_ms) == ("ConfigMap", 3000)
    cm = {"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "c", "namespace": "ns"}}
    request = wit.AdmissionRequest("u", component.kind_ref(CONFIG_MAP), wit.Operation.DELETE, "ns", "c", None,
                                   json.dumps(cm), "alice", [], False)
    admission = component.admission_request(request)
    assert (admission.kind.kind, admission.operation) == ("ConfigMap", Operation.DELETE)
    verdict = Plugin(Gatekeeper).validate(admission, None)
    assert component.verdict(verdict) == wit.Verdict(False, "no delete", "metadata.name", [])


def test_a_webhook_without_its_handler_is_refused():
    class Hookless:
        config = Config("hookless", Kind.namespaced("example.com", "v1", "Gate")).webhook(Webhook.validating())

        def reconcile(self, primary, ctx):
            return Outcome.done()

    with pytest.raises(TypeError, match="declares a validating webhook but does not implement validate"):
        Plugin(Hookless)


class Pages:
    """Defaults and converts Pages: v1 has ``spec.content``, v2 calls it ``spec.html``."""

    config = (Config("pages", Kind.namespaced("example.com", "v2", "Page"))
              .webhook(Webhook.mutating().failure_policy(FailurePolicy.IGNORE))
              .webhook(Webhook.conversion()))

    def reconcile(self, primary, ctx):
        return Outcome.done()

    def default(self, page, ctx):
        if page["spec"].get("html") == "":
            raise Error.invalid("html must not be empty")
        page["spec"].setdefault("exposed", False)

    def convert(self, page, desired_api_version, ctx):
        if page["spec"].get("broken"):
            raise KeyError("broken")
        into, out = ("html", "content") if desired_api_version == "example.com/v2" else ("content", "html")
        page["spec"][into] = page["spec"].pop(out)
        return page


def page_of(version, spec):
    return {"apiVersion": f"example.com/{version}", "kind": "Page", "metadata": {"name": "a", "namespace": "ns"},
            "spec": spec}


def test_mutating_and_conversion_webhooks_reach_describe_and_default_and_convert_answer(component):
    wit = component.wit
    mutating, conversion = component.plugin_config(Pages.config, False).webhooks
    assert (mutating.webhook_type, mutating.failure_policy) == (wit.WebhookType.MUTATING, wit.FailurePolicy.IGNORE)
    assert conversion.webhook_type == wit.WebhookType.CONVERSION
    exported = component.admission(Pages)()
    kind = component.kind_ref(Pages.config.primary)
    request = wit.AdmissionRequest("u", kind, wit.Operation.CREATE, "ns", "a", json.dumps(page_of("v2", {"html": "x"})),
                                   None, "alice", [], False)
    assert json.loads(exported.default(request))["spec"] == {"html": "x", "exposed": False}
    empty = dataclasses.replace(request, object=json.dumps(page_of("v2", {"html": ""})))
    with pytest.raises(component.Err) as refused:
        exported.default(empty)
    assert refused.value.value == "html must not be empty"
    converted = exported.convert([json.dumps(page_of("v1", {"content": "x"})), json.dumps(page_of("v2", {"html": "y"}))],
                                 "example.com/v2")
    assert [json.loads(c) for c in converted] == [page_of("v2", {"html": "x"}), page_of("v2", {"html": "y"})]
    with pytest.raises(component.Err) as failed:
        exported.convert([json.dumps(page_of("v1", {"broken": True}))], "example.com/v2")
    assert failed.value.value == "KeyError: 'broken'"


def test_the_fake_host_defaults_and_converts_as_the_component_does():
    host = FakeHost()
    stored = host.default_object(Pages, AdmissionRequest.create(page_of("v2", {"html": "x", "exposed": True})))
    assert stored["spec"] == {"html": "x", "exposed": True}
    with pytest.raises(Error, match="html must not be empty"):
        host.default_object(Pages, AdmissionRequest.create(page_of("v2", {"html": ""})))
    with pytest.raises(LookupError, match="declares no mutating webhook for delete"):
        host.default_object(Pages, AdmissionRequest.delete(page_of("v2", {})))
    assert host.convert(Pages, [page_of("v2", {"html": "x"})], "example.com/v1") == [page_of("v1", {"content": "x"})]
    with pytest.raises(LookupError, match="declares no conversion webhook"):
        host.convert(Gatekeeper, [page_of("v1", {})], "example.com/v2")


@dataclasses.dataclass
class Spec:
    html: str
    replicas: int | None = None


@dataclasses.dataclass
class Typed:
    spec: Spec


class TypedPages:
    config = Config("typed", Kind.namespaced("example.com", "v1", "Page")).webhook(Webhook.mutating())

    def reconcile(self, page: Typed, ctx):
        return Outcome.done()

    def default(self, page: Typed, ctx):
        page.spec.replicas = page.spec.replicas or 1


def test_a_typed_default_changes_only_what_it_changed_and_keeps_unknown_fields():
    sent = page_of("v1", {"html": "x", "unknown": [1]})
    stored = FakeHost().default_object(TypedPages, AdmissionRequest.create(sent))
    assert stored == page_of("v1", {"html": "x", "unknown": [1], "replicas": 1})
    odd = page_of("v1", {"html": 42})
    with pytest.raises(Error, match="spec.html: expected a string"):
        FakeHost().default_object(TypedPages, AdmissionRequest.create(odd))


@pytest.mark.parametrize("webhook,handler", [(Webhook.mutating(), "default"), (Webhook.conversion(), "convert")])
def test_a_mutating_or_conversion_webhook_without_its_handler_is_refused(webhook, handler):
    class Hookless:
        config = Config("hookless", Kind.namespaced("example.com", "v1", "Gate")).webhook(webhook)

        def reconcile(self, primary, ctx):
            return Outcome.done()

    with pytest.raises(TypeError, match=f"declares a {webhook.webhook_type.value} webhook but does not implement "
                                        f"{handler}"):
        Plugin(Hookless)
