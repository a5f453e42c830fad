"""The component glue: the only module that imports the bindings componentize-py generates for
the ``wasmop:plugin`` world (``wit_world``). It turns the SDK's values into the WIT records and
back, and gives componentize-py the classes it instantiates for the exported ``reconciler`` and
``admission`` interfaces (the ``operator`` world). Plugins do not import it; :func:`wasmop.export`
does, inside a component build.
"""

from __future__ import annotations

import json
from typing import Any

from componentize_py_types import Err
from wit_world import exports
from wit_world.imports import host as wit_host

try:
    from wit_world.imports import types as wit
except ImportError:  # the operator-http world, where wasi:http has a `types` interface too
    from wit_world.imports import wasmop_plugin_types as wit

from . import http
from .config import Config, Sharding
from .context import Context, HostError, Level
from .dependents import Check, Cleanup, Dependent, DependentState, Desired, Phase
from .errors import Error
from .external import External, ExternalDependent, Polling, Tracked, Tracking
from .grant import HttpGrant, Inbound, SecretKey
from .kinds import Kind
from .outcome import Event, EventType, Outcome
from .plugin import Plugin, failure
from .predicate import EventKind, Predicate
from .refs import PrimaryRef, SecondaryRef
from .watch import Mapper, Watch
from .webhook import AdmissionRequest, Operation, Verdict, Webhook
from .wire import millis

try:
    from . import wasi_http
except ImportError:  # a world without wasi:http: the plugin declares no http grant
    wasi_http = None


def _ungranted(request: http.Request) -> http.Response:
    raise http.HttpError(f"{request.method} {request.url}: the plugin declares no http grant, so it was built "
                         "without wasi:http; declare the origins it calls with Config.http")


def use_wasi_http() -> None:
    """Sends the HTTP client's requests through ``wasi:http``, or, in a component built without it,
    fails them saying the plugin declares no http grant."""
    http.use_transport(wasi_http.send if wasi_http is not None else _ungranted)


class WitHost:
    """The host imports of the running component."""

    def log(self, level: Level, message: str, fields: list[tuple[str, str]]) -> None:
        """``host.log``."""
        wit_host.log(wit.LogLevel[level.name], message, fields)

    def get(self, kind: Kind, namespace: str | None, name: str) -> str | None:
        """``host.get``."""
        try:
            return wit_host.get(kind_ref(kind), namespace, name)
        except Err as e:
            raise HostError(e.value) from None

    def list(self, kind: Kind, namespace: str | None, label_selector: str | None) -> list[str]:
        """``host.list``."""
        try:
            return wit_host.list(kind_ref(kind), namespace, label_selector)
        except Err as e:
            raise HostError(e.value) from None

    def secondaries(self, kind: Kind) -> list[str]:
        """``host.secondaries``."""
        try:
            return wit_host.secondaries(kind_ref(kind))
        except Err as e:
            raise HostError(e.value) from None


def _ms(seconds: Any) -> int | None:
    return None if seconds is None else millis(seconds)


def kind_ref(kind: Kind) -> wit.KindRef:
    """A :class:`Kind` as a ``kind-ref``."""
    return wit.KindRef(kind.group, kind.version, kind.kind, kind.plural_name, kind.is_namespaced)


def condition(check: Check | None) -> wit.Condition | None:
    """A :class:`Check` as a ``condition``."""
    if check is None:
        return None
    if check.what == "field-equals":
        return wit.Condition_FieldEquals(wit.FieldValue(*check.args))
    if check.what == "fields-equal":
        return wit.Condition_FieldsEqual(wit.FieldPair(*check.args))
    if check.what == "condition-true":
        return wit.Condition_ConditionTrue(check.args[0])
    return wit.Condition_Plugin(check.args[0])


_TERMS = {
    "generation-changed": wit.PredicateTerm_GenerationChanged,
    "labels-changed": wit.PredicateTerm_LabelsChanged,
    "annotations-changed": wit.PredicateTerm_AnnotationsChanged,
    "and": wit.PredicateTerm_And,
    "or": wit.PredicateTerm_Or,
    "not": wit.PredicateTerm_Not,
}


def predicate_terms(predicate: Predicate | None) -> list[Any] | None:
    """A :class:`Predicate` as its ``predicate-term`` list."""
    if predicate is None:
        return None
    return [wit.PredicateTerm_Plugin(t[1]) if isinstance(t, tuple) else _TERMS[t]() for t in predicate.terms]


_MAPPERS = {
    Mapper.CONTROLLER_OWNER: lambda: wit.Mapper_OwnerReferences(wit.Owners.CONTROLLER),
    Mapper.ANY_OWNER: lambda: wit.Mapper_OwnerReferences(wit.Owners.ANY),
    Mapper.ANNOTATIONS: wit.Mapper_Annotations,
    Mapper.PLUGIN: wit.Mapper_Plugin,
    Mapper.PRIMARY_REFERENCES: wit.Mapper_PrimaryReferences,
}


def watch(w: Watch) -> wit.Watch:
    """A :class:`Watch` as a ``watch``."""
    return wit.Watch(kind_ref(w.kind), w.namespace_, w.label_selector_, w.field_selector_, w.cluster_,
                     _MAPPERS[w.mapper](), w.projection, predicate_terms(w.predicate_))


def dependent(d: Dependent) -> wit.Dependent:
    """A :class:`Dependent` as a ``dependent``."""
    ownership = wit.Ownership.ANNOTATIONS if d.annotation_owned else wit.Ownership.OWNER_REFERENCE
    return wit.Dependent(d.name, kind_ref(d.kind), d.read_only_, list(d.depends_on_names),
                         condition(d.ready_check), condition(d.reconcile_check), ownership,
                         d.ready_when_empty, d.namespace, d.adopts)


def external_dependent(d: ExternalDependent) -> wit.ExternalDependent:
    """An :class:`ExternalDependent` as an ``external-dependent``."""
    tracking = wit.Tracking.SECRET if d.tracking is Tracking.SECRET else wit.Tracking.CONFIG_MAP
    return wit.ExternalDependent(d.name, list(d.depends_on_names), condition(d.ready_check),
                                 condition(d.reconcile_check), d.ready_when_empty, tracking)


def secret_key(s: SecretKey) -> wit.SecretKey:
    """A :class:`SecretKey` as a ``secret-key``."""
    return wit.SecretKey(s.name, s.namespace, s.key)


def http_grant(g: HttpGrant | None) -> wit.HttpGrant | None:
    """An :class:`HttpGrant` as an ``http-grant``."""
    if g is None:
        return None
    origins = [
        wit.HttpOrigin(o.scheme, o.host, o.port,
                       [wit.SecretHeader(h, secret_key(s), p) for h, s, p in o.secret_headers])
        for o in g.origins
    ]
    return wit.HttpGrant(origins, _ms(g.connect_timeout_seconds), _ms(g.timeout_seconds),
                         g.max_response_bytes_, g.max_concurrent_)


def polling(p: Polling | None) -> wit.Polling | None:
    """A :class:`Polling` as a ``polling``."""
    if p is None:
        return None
    return wit.Polling(wit.PollingMode.GLOBAL if p.is_global else wit.PollingMode.PER_RESOURCE, millis(p.period))


def inbound(i: Inbound | None) -> wit.Inbound | None:
    """An :class:`Inbound` as an ``inbound``."""
    return None if i is None else wit.Inbound(secret_key(i.token), i.caching_)


def sharding(s: Sharding | None) -> wit.Sharding | None:
    """A :class:`Sharding` as a ``sharding``."""
    if s is None:
        return None
    return {Sharding.UID: wit.Sharding.UID, Sharding.NAMESPACE: wit.Sharding.NAMESPACE,
            Sharding.NONE: wit.Sharding.NONE}[s]


def plugin_config(c: Config, cleanup: bool) -> wit.PluginConfig:
    """A :class:`Config` as the ``plugin-config`` ``describe`` returns."""
    f = c.filters_
    retry = c.retry_ and wit.RetryPolicy(c.retry_.max_attempts, millis(c.retry_.initial_interval),
                                         float(c.retry_.multiplier), millis(c.retry_.max_interval),
                                         float(c.retry_.jitter))
    rate_limit = c.rate_limit_ and wit.RateLimit(c.rate_limit_.max_reconciles, millis(c.rate_limit_.period))
    if c.finalizer_disabled:
        finalizer = wit.Finalizer_Disabled()
    elif c.finalizer_name is not None:
        finalizer = wit.Finalizer_Named(c.finalizer_name)
    else:
        finalizer = wit.Finalizer_Derived()
    return wit.PluginConfig(
        name=c.name,
        primary=kind_ref(c.primary),
        label_selector=c.label_selector_,
        field_selector=c.field_selector_,
        filters=wit.EventFilters(f.on_create, f.on_update, f.on_delete, f.on_annotation_change, f.on_label_change),
        generation_aware=c.generation_aware_,
        retry=retry,
        max_reconcile_interval_ms=_ms(c.max_reconcile_interval_),
        rate_limit=rate_limit,
        max_concurrent_reconciles=c.max_concurrent_reconciles_,
        watches=[watch(w) for w in c.watches],
        resync_period_ms=_ms(c.resync_period_),
        finalizer=finalizer,
        cleanup=cleanup,
        dependents=[dependent(d) for d in c.dependents],
        conditions=bool(c.conditions),
        projection=c.projection,
        predicate=predicate_terms(c.predicate_),
        http=http_grant(c.http_),
        polling=polling(c.polling_),
        inbound=inbound(c.inbound_),
        external_dependents=[external_dependent(d) for d in c.external_dependents],
        sharding=sharding(c.sharding_),
        webhooks=[webhook(w) for w in c.webhooks],
    )


def webhook(w: Webhook) -> wit.Webhook:
    """A :class:`Webhook` as a ``webhook``."""
    return wit.Webhook(
        webhook_type=wit.WebhookType[w.webhook_type.name],
        kinds=[kind_ref(k) for k in w.kinds_],
        operations=[wit.Operation[o.name] for o in w.operations_],
        failure_policy=wit.FailurePolicy[w.failure_policy_.name],
        timeout_ms=_ms(w.timeout_seconds),
    )


def admission_request(request: wit.AdmissionRequest) -> AdmissionRequest:
    """An ``admission-request`` as an :class:`AdmissionRequest`, its objects JSON text."""
    k = request.kind
    kind = Kind(k.group, k.version, k.kind, k.plural, not k.namespaced)
    return AdmissionRequest(request.uid, kind, Operation[request.operation.name], request.namespace, request.name,
                            request.object, request.old_object, request.username, list(request.groups),
                            request.dry_run)


def verdict(v: Verdict) -> wit.Verdict:
    """A :class:`Verdict` as a ``verdict``."""
    return wit.Verdict(v.allowed, v.message, v.field, list(v.warnings))


def event(e: Event) -> wit.Event:
    """An :class:`Event` as an ``event``."""
    kind = wit.EventType.WARNING if e.event_type is EventType.WARNING else wit.EventType.NORMAL
    return wit.Event(kind, e.reason, e.action, e.note_text)


def outcome(o: Outcome) -> wit.Outcome:
    """An :class:`Outcome` as an ``outcome``."""
    readiness = o.readiness and wit.Readiness(*o.readiness)
    status = None if o.status_patch is None else json.dumps(o.status_patch)
    return wit.Outcome(readiness, status, list(o.labels), list(o.annotations), _ms(o.reschedule_seconds),
                       [event(e) for e in o.events])


def cleanup_outcome(c: Cleanup) -> wit.CleanupOutcome:
    """A :class:`Cleanup` as a ``cleanup-outcome``."""
    return wit.CleanupOutcome(c.keeps_finalizer, _ms(c.reschedule_seconds), [event(e) for e in c.events])


def desired_object(d: Desired) -> wit.DesiredObject:
    """A :class:`Desired` as a ``desired-object``."""
    return wit.DesiredObject(d.dependent, json.dumps(d.object), d.keep, d.key)


def external_object(x: External) -> wit.ExternalObject:
    """An :class:`External` as an ``external-object``."""
    return wit.ExternalObject(x.dependent, x.key, x.id, json.dumps(x.object))


def from_external_object(x: wit.ExternalObject) -> External:
    """An ``external-object`` as an :class:`External`."""
    return External(x.dependent, x.key, json.loads(x.object), x.id)


def object_ref(r: PrimaryRef) -> wit.ObjectRef:
    """A :class:`PrimaryRef` as an ``object-ref``."""
    return wit.ObjectRef(r.namespace, r.name)


def secondary_ref(r: SecondaryRef) -> wit.SecondaryRef:
    """A :class:`SecondaryRef` as a ``secondary-ref``."""
    return wit.SecondaryRef(kind_ref(r.kind), r.namespace, r.name)


_ERRORS = {
    "transient": wit.ReconcileError_Transient,
    "permanent": wit.ReconcileError_Permanent,
    "invalid": wit.ReconcileError_Invalid,
}


def reconcile_error(e: Error) -> Err:
    """An :class:`Error` as the ``Err(reconcile-error)`` an export raises; the delay of a
    transient one is asked of the host first (``host.retry-after``)."""
    if e.delay is not None:
        wit_host.retry_after(millis(e.delay))
    return Err(_ERRORS[e.kind](e.message))


def from_reconcile_error(e: Any) -> Error:
    """A ``reconcile-error`` as an :class:`Error`."""
    kind = next(k for k, cls in _ERRORS.items() if isinstance(e, cls))
    return Error(kind, e.value)


def _phase(phase: wit.DependentPhase) -> Phase:
    return Phase[phase.name]


def context(request: wit.ReconcileRequest) -> Context:
    """The :class:`Context` of a ``reconcile-request``, talking to the host imports."""
    dependents = [DependentState(s.name, _phase(s.phase), [json.loads(o) for o in s.objects])
                  for s in request.dependents]
    external = [from_external_object(x) for x in request.external]
    payload = None if request.inbound is None else json.loads(request.inbound)
    return Context(WitHost(), request.attempt, request.last_attempt, dependents, external, payload)


def _outside() -> Context:
    """A context for calls outside a reconcile: it reads the host's caches."""
    return Context(WitHost())


def _message(e: Exception) -> str:
    return failure(e).message


class _Reconciler(exports.Reconciler):
    """The ``reconciler`` export for :attr:`plugin`."""

    plugin: Plugin

    def describe(self) -> wit.PluginConfig:
        return plugin_config(self.plugin.config, self.plugin.cleans)

    def desired(self, request: wit.ReconcileRequest) -> list[wit.DesiredObject]:
        try:
            return [desired_object(d) for d in self.plugin.desired(request.object, context(request))]
        except Exception as e:
            raise reconcile_error(failure(e)) from None

    def reconcile(self, request: wit.ReconcileRequest) -> wit.Outcome:
        try:
            return outcome(self.plugin.reconcile(request.object, context(request)))
        except Exception as e:
            raise reconcile_error(failure(e)) from None

    def cleanup(self, request: wit.ReconcileRequest) -> wit.CleanupOutcome:
        try:
            return cleanup_outcome(self.plugin.cleanup(request.object, context(request)))
        except Exception as e:
            raise reconcile_error(failure(e)) from None

    def check(self, name: str, primary: str, dependent: str | None) -> bool:
        return self.plugin.check(name, primary, dependent, _outside())

    def update_error_status(self, request: wit.ReconcileRequest, error: Any) -> str | None:
        ctx = Context(WitHost(), request.attempt, request.last_attempt)
        status = self.plugin.error_status(request.object, from_reconcile_error(error), ctx)
        return None if status is None else json.dumps(status)

    def map_secondary(self, secondary: str, previous: str | None) -> list[wit.ObjectRef]:
        try:
            return [object_ref(r) for r in self.plugin.map_secondary(secondary, previous, _outside())]
        except Exception as e:
            raise Err(_message(e)) from None

    def secondaries_of(self, primary: str) -> list[wit.SecondaryRef]:
        try:
            return [secondary_ref(r) for r in self.plugin.secondaries_of(primary, _outside())]
        except Exception as e:
            raise Err(_message(e)) from None

    def crd(self) -> str | None:
        crd = self.plugin.crd()
        return None if crd is None else json.dumps(crd)

    def fetch(self, primary: str, tracked: list[wit.TrackedId]) -> list[wit.ExternalObject]:
        ids = Tracked([(t.dependent, t.key, t.id) for t in tracked])
        try:
            return [external_object(x) for x in self.plugin.fetch(primary, ids, _outside())]
        except Exception as e:
            raise Err(_message(e)) from None

    def fetch_all(self) -> list[wit.PrimaryState]:
        try:
            states = self.plugin.fetch_all(_outside())
        except Exception as e:
            raise Err(_message(e)) from None
        return [wit.PrimaryState(object_ref(ref), [external_object(x) for x in objects]) for ref, objects in states]

    def apply_external(self, primary: str, desired: wit.ExternalObject,
                       actual: wit.ExternalObject | None) -> wit.ExternalObject:
        before = None if actual is None else from_external_object(actual)
        try:
            return external_object(
                self.plugin.apply_external(primary, from_external_object(desired), before, _outside()))
        except Exception as e:
            raise reconcile_error(failure(e)) from None

    def delete_external(self, primary: str, actual: wit.ExternalObject) -> None:
        try:
            self.plugin.delete_external(primary, from_external_object(actual), _outside())
        except Exception as e:
            raise reconcile_error(failure(e)) from None

    def map_inbound(self, payload: str) -> list[wit.ObjectRef]:
        try:
            return [object_ref(r) for r in self.plugin.map_inbound(payload, _outside())]
        except Exception as e:
            raise Err(_message(e)) from None

    def filter(self, name: str, event: wit.EventKind, object: str, old: str | None) -> bool:
        return self.plugin.filter(name, EventKind[event.name], object, old)


class _Admission(exports.Admission):
    """The ``admission`` export for :attr:`plugin`: ``validate``, ``default`` and ``convert``,
    each calling the plugin's handler of that name."""

    plugin: Plugin

    def validate(self, request: wit.AdmissionRequest) -> wit.Verdict:
        if not callable(getattr(self.plugin.instance, "validate", None)):
            return verdict(Verdict.deny(f"plugin {self.plugin.config.name} does not implement validate"))
        return verdict(self.plugin.validate(admission_request(request), _outside()))

    def default(self, request: wit.AdmissionRequest) -> str:
        if not callable(getattr(self.plugin.instance, "default", None)):
            raise Err(f"plugin {self.plugin.config.name} does not implement default")
        try:
            return self.plugin.default(admission_request(request), _outside())
        except Error as e:
            raise Err(e.message) from None

    def convert(self, objects: list[str], desired_api_version: str) -> list[str]:
        if not callable(getattr(self.plugin.instance, "convert", None)):
            raise Err(f"plugin {self.plugin.config.name} does not implement convert")
        try:
            return self.plugin.convert(objects, desired_api_version, _outside())
        except Error as e:
            raise Err(e.message) from None


def admission(cls: type) -> type:
    """The class componentize-py instantiates for the ``admission`` export, driving ``cls``."""
    return type("Admission", (_Admission,), {"plugin": Plugin(cls), "__doc__": cls.__doc__})


def reconciler(cls: type) -> type:
    """The class componentize-py instantiates for the ``reconciler`` export, driving ``cls``."""
    return type("Reconciler", (_Reconciler,), {"plugin": Plugin(cls), "__doc__": cls.__doc__})
