"""Unit-test plugins natively, without a cluster or wasm: :class:`FakeHost` stands in for the
host's caches and runs a plugin's handlers through the code the component runs
(:class:`wasmop.plugin.Plugin`). :meth:`FakeHost.run_until_stable` runs the whole reconcile loop
of the built component by the host's own rules (:mod:`wasmop.stable`).

>>> from wasmop import Config, Kind, Outcome
>>> class Hello:
...     config = Config("hello", Kind.namespaced("example.com", "v1", "Hello"))
...     def reconcile(self, hello: dict, ctx) -> Outcome:
...         ctx.info("hello")
...         return Outcome.ready("said hello").status({"said": hello["spec"]["say"]})
>>> run = FakeHost().reconcile(Hello, {"metadata": {"name": "a"}, "spec": {"say": "hi"}})
>>> run.status, run.logs[0].message
({'said': 'hi'}, 'hello')
"""

from __future__ import annotations

import copy
import json
import os
from dataclasses import dataclass, field
from typing import Any

from .config import Config, Retry
from .context import Context, HostError, Level
from .dependents import Cleanup, DependentState, Desired, Phase
from .errors import Error
from .external import External, Tracked
from .kinds import Kind
from .outcome import Event, Outcome
from .plugin import Plugin
from .predicate import EventKind
from .refs import PrimaryRef, SecondaryRef
from .stable import Stable, settle
from .typed import encode
from .webhook import AdmissionRequest, Verdict, WebhookType


@dataclass
class Log:
    """A log line a handler wrote."""

    level: Level
    message: str
    fields: dict[str, str]


@dataclass
class Run:
    """One reconcile under the fake host: its outcome or its error, and its log."""

    outcome: Outcome | None
    error: Error | None
    logs: list[Log]
    #: The plugin's retry policy.
    retry: Retry = field(default_factory=Retry)

    @property
    def retry_after(self) -> float | None:
        """Seconds the host would wait before it runs this failed reconcile again, by the
        plugin's retry policy and the host's rule: the delay the error asked for
        (``Error.transient(msg, delay=...)``) capped at ``max_interval``, else the backoff of
        the next attempt (its nominal value, without jitter). None when the reconcile succeeded,
        failed for good, or no retry is left."""
        if self.error is None or self.error.kind != "transient" or self.retry.max_attempts <= 0:
            return None
        if self.error.delay is not None:
            return min(self.error.delay, self.retry.max_interval)
        return min(self.retry.initial_interval, self.retry.max_interval)

    @property
    def status(self) -> dict[str, Any] | None:
        """The status the outcome merges, or None."""
        return self.outcome.status_patch if self.outcome else None

    @property
    def events(self) -> list[Event]:
        """The events the outcome records."""
        return self.outcome.events if self.outcome else []

    @property
    def readiness(self) -> tuple[bool, str] | None:
        """``(ready, message)`` of the outcome, or None."""
        return self.outcome.readiness if self.outcome else None


def _matches(labels: dict[str, str], selector: str | None) -> bool:
    """Equality (``a=b``, ``a!=b``) and existence (``a``, ``!a``) terms of a label selector."""
    for term in filter(None, (t.strip() for t in (selector or "").split(","))):
        if "!=" in term:
            key, value = term.split("!=", 1)
            if labels.get(key.strip()) == value.strip():
                return False
        elif "=" in term:
            key, value = term.replace("==", "=").split("=", 1)
            if labels.get(key.strip()) != value.strip():
                return False
        elif term.startswith("!"):
            if term[1:] in labels:
                return False
        elif term not in labels:
            return False
    return True


#: Fields every object keeps, whatever its projection.
_ALWAYS = ("apiVersion", "kind", "metadata")

#: The label the host puts on a dependent's objects (``wasmop.dev/managed-by=<plugin>``).
_MANAGED_BY = "wasmop.dev/managed-by"


def project(obj: dict[str, Any], paths: list[str]) -> dict[str, Any]:
    """``obj`` as a cache with the projection ``paths`` keeps it, by the host's rule: its
    ``apiVersion``, ``kind`` and ``metadata`` whole and, of its other fields, only those the paths
    name (keys joined by dots: ``spec.replicas``). A path that names no field is skipped; one that
    runs into a value that is not an object keeps nothing of it. ``obj`` is not changed.

    >>> project({"metadata": {"name": "a"}, "spec": {"size": 1, "image": "x"}}, ["spec.size"])
    {'metadata': {'name': 'a'}, 'spec': {'size': 1}}
    """
    rest = copy.deepcopy(obj)
    kept = {key: rest.pop(key) for key in _ALWAYS if key in rest}
    for path in paths:
        _take(rest, kept, [key for key in path.split(".") if key])
    return kept


def _take(source: dict[str, Any], target: dict[str, Any], keys: list[str]) -> None:
    """Moves the field at ``keys`` from ``source`` to the same place in ``target``."""
    if not keys:
        return
    key, rest = keys[0], keys[1:]
    if not rest:
        if key in source:
            value = source.pop(key)
            if isinstance(value, dict) and isinstance(target.get(key), dict):
                target[key].update(value)  # parts of it were kept for narrower paths
            else:
                target[key] = value
        return
    inner = source.get(key)
    if not isinstance(inner, dict):
        return
    kept = target.setdefault(key, {})
    if isinstance(kept, dict):
        _take(inner, kept, rest)


@dataclass
class _Cache:
    """One of the host's watches for a plugin: what it caches and what of each object it keeps
    (its projection; None: all of it)."""

    kind: Kind
    selector: str | None
    namespace: str | None
    projection: list[str] | None

    def holds(self, kind: Kind, obj: dict[str, Any]) -> bool:
        meta = obj.get("metadata") or {}
        return (self.kind.same_type(kind) and _matches(meta.get("labels") or {}, self.selector)
                and self.namespace in (None, meta.get("namespace")))


def _caches(config: Config) -> list[_Cache]:
    """The host's caches of the plugin ``config`` describes, in the order the host reads them:
    the primary's, each declared watch's, each dependent's (whole objects)."""
    managed = f"{_MANAGED_BY}={config.name}"
    return ([_Cache(config.primary, config.label_selector_, None, config.projection)]
            + [_Cache(w.kind, w.label_selector_, w.namespace_, w.projection) for w in config.watches]
            + [_Cache(d.kind, None if d.read_only_ else managed, d.namespace, None) for d in config.dependents])


def _shaped(caches: list[_Cache], kind: Kind, obj: dict[str, Any]) -> dict[str, Any]:
    """``obj`` of ``kind`` as the plugin reads it from the host's caches: cut to the projection
    of the first cache that holds it (else of the first of its kind). The host's cache of
    primaries keeps their ``status`` too, which the plugin reads only if its projection names
    it."""
    cache = next((c for c in caches if c.holds(kind, obj)), None) or \
        next((c for c in caches if c.kind.same_type(kind)), None)
    return obj if cache is None or cache.projection is None else project(obj, cache.projection)


@dataclass
class _Reads:
    """The host protocol over a :class:`FakeHost` for one plugin: reads come cut to its caches'
    projections, as the host's caches keep them."""

    host: FakeHost
    caches: list[_Cache]

    def log(self, level: Level, message: str, fields: list[tuple[str, str]]) -> None:
        self.host.log(level, message, fields)

    def _cut(self, kind: Kind, obj: dict[str, Any]) -> str:
        return json.dumps(_shaped(self.caches, kind, obj))

    def get(self, kind: Kind, namespace: str | None, name: str) -> str | None:
        found = self.host._found(kind, namespace, name)
        return None if found is None else self._cut(kind, found)

    def list(self, kind: Kind, namespace: str | None, label_selector: str | None) -> list[str]:
        return [self._cut(kind, o) for o in self.host._listed(kind, namespace, label_selector)]

    def secondaries(self, kind: Kind) -> list[str]:
        return [self._cut(kind, o) for o in self.host._owned(kind)]


@dataclass
class FakeHost:
    """The host's caches, in memory. Give it objects (:meth:`with_object`), secondaries
    (:meth:`with_secondary`) and dependent states (:meth:`with_dependent_state`), then run a
    plugin class's handlers on a primary given as a dict."""

    objects: list[tuple[Kind, dict[str, Any]]] = field(default_factory=list)
    secondary_objects: list[tuple[Kind, dict[str, Any]]] = field(default_factory=list)
    states: list[DependentState] = field(default_factory=list)
    external: list[External] = field(default_factory=list)
    #: Kinds the fake refuses to read, as the host refuses kinds that are not watched.
    unwatched: list[Kind] = field(default_factory=list)
    logs: list[Log] = field(default_factory=list)
    attempt: int = 0
    last_attempt: bool = False
    inbound: Any = None

    def with_object(self, kind: Kind, obj: Any) -> FakeHost:
        """Caches ``obj`` of ``kind`` for ``ctx.get`` and ``ctx.list``."""
        self.objects.append((kind, encode(obj)))
        return self

    def with_secondary(self, kind: Kind, obj: Any) -> FakeHost:
        """Caches ``obj`` as a secondary of the primary (``ctx.secondaries``) and as an object."""
        self.secondary_objects.append((kind, encode(obj)))
        return self.with_object(kind, obj)

    def with_dependent_state(self, name: str, phase: Phase, objects: list[Any] = ()) -> FakeHost:
        """Dependent ``name`` stands at ``phase`` with ``objects`` when ``reconcile`` runs."""
        self.states.append(DependentState(name, phase, [encode(o) for o in objects]))
        return self

    def refusing(self, kind: Kind) -> FakeHost:
        """Reads of ``kind`` fail, as for a kind the plugin does not watch."""
        self.unwatched.append(kind)
        return self

    # The whole loop.

    def run_until_stable(self, component: str | os.PathLike[str], primary: Any, namespace: str = "default") -> Stable:
        """Runs the built plugin ``component`` (its ``.wasm``) on ``primary`` among this host's
        objects and external objects (:attr:`external`, what ``fetch`` would find), as the host
        would, over and over until a pass changes nothing (see :mod:`wasmop.stable`: the host's own
        rules, through ``wasmop test``). The store and the external system as they ended replace
        this host's objects and external objects, so a later call (after a spec change, say) continues from
        there. Raises :class:`AssertionError` when a pass fails (to test a failure, use
        :meth:`run_until_settled`), :class:`RuntimeError` when the loop cannot run.

        Build the component first: the loop runs what was built, not the source beside it.
        """
        stable = self.run_until_settled(component, primary, namespace)
        failed = next(((i, p["error"]) for i, p in enumerate(stable.passes, 1) if "error" in p), None)
        if failed is not None:
            raise AssertionError(f"run_until_stable: pass {failed[0]} failed: {failed[1]}; use run_until_settled "
                                 "to test a failing reconcile")
        return stable

    def run_until_settled(self, component: str | os.PathLike[str], primary: Any, namespace: str = "default") -> Stable:
        """:meth:`run_until_stable`, but a pass that fails is no test failure: the host writes its
        failure conditions (and the plugin's ``error_status``) as it would, and the passes go on
        until one changes nothing."""
        stable = settle(component, encode(primary), self.objects, self.external, namespace)
        self.objects = list(stable.stored)
        self.external = list(stable.external)
        return stable

    # The Host protocol.

    def log(self, level: Level, message: str, fields: list[tuple[str, str]]) -> None:
        """Records the line in :attr:`logs`."""
        self.logs.append(Log(level, message, dict(fields)))

    def _check(self, kind: Kind) -> None:
        if any(kind.same_type(k) for k in self.unwatched):
            raise HostError(f"{kind} is not watched by the plugin")

    def get(self, kind: Kind, namespace: str | None, name: str) -> str | None:
        """The cached object, as JSON text."""
        found = self._found(kind, namespace, name)
        return None if found is None else json.dumps(found)

    def list(self, kind: Kind, namespace: str | None, label_selector: str | None) -> list[str]:
        """The cached objects, as JSON text."""
        return [json.dumps(o) for o in self._listed(kind, namespace, label_selector)]

    def secondaries(self, kind: Kind) -> list[str]:
        """The secondaries given with :meth:`with_secondary`, as JSON text."""
        return [json.dumps(o) for o in self._owned(kind)]

    def _found(self, kind: Kind, namespace: str | None, name: str) -> dict[str, Any] | None:
        self._check(kind)
        for k, o in self.objects:
            meta = o.get("metadata", {})
            if k.same_type(kind) and meta.get("name") == name and meta.get("namespace") == namespace:
                return o
        return None

    def _listed(self, kind: Kind, namespace: str | None, label_selector: str | None) -> list[dict[str, Any]]:
        self._check(kind)
        return [o for k, o in self.objects
                if k.same_type(kind) and namespace in (None, o.get("metadata", {}).get("namespace"))
                and _matches(o.get("metadata", {}).get("labels") or {}, label_selector)]

    def _owned(self, kind: Kind) -> list[dict[str, Any]]:
        self._check(kind)
        return [o for k, o in self.secondary_objects if k.same_type(kind)]

    # Running handlers.

    def context(self, cls: type | None = None) -> Context:
        """A context on this host, with its dependent states, attempt and inbound payload; for
        the plugin class ``cls``, its reads see objects cut to the plugin's projections, as the
        host's caches keep them."""
        return self._context(None if cls is None else _caches(Plugin(cls).config))

    def _context(self, caches: list[_Cache] | None) -> Context:
        """A context whose reads go through ``caches`` (a plugin's), or straight to this host."""
        host = self if caches is None else _Reads(self, caches)
        return Context(host, self.attempt, self.last_attempt, self.states, self.external, self.inbound)

    @staticmethod
    def _primary(config: Config, caches: list[_Cache], primary: Any) -> str:
        """``primary`` as the host gives the handlers of the plugin of ``config`` (whose caches
        are ``caches``), as JSON text: cut to its projection of it, if it declares one (the
        host's cache keeps the status too, for its own writes; the plugin gets it only if the
        projection names it)."""
        obj = encode(primary)
        if config.projection is not None and isinstance(obj, dict):
            obj = _shaped(caches, config.primary, obj)
        return json.dumps(obj)

    def _handler(self, cls: type, primary: Any) -> tuple[Plugin, str, Context]:
        """The plugin of ``cls``, ``primary`` as the host gives it, and a context for it; the
        plugin's caches are worked out once for both."""
        plugin = Plugin(cls)
        caches = _caches(plugin.config)
        return plugin, self._primary(plugin.config, caches, primary), self._context(caches)

    def reconcile(self, cls: type, primary: Any) -> Run:
        """Runs ``reconcile`` on ``primary``; the run has its outcome or its error."""
        start = len(self.logs)
        plugin, given, ctx = self._handler(cls, primary)
        try:
            outcome, error = plugin.reconcile(given, ctx), None
        except Error as e:
            outcome, error = None, e
        return Run(outcome, error, self.logs[start:], plugin.config.retry_ or Retry())

    def desired(self, cls: type, primary: Any) -> list[Desired]:
        """Runs ``desired`` on ``primary``; raises its :class:`Error`."""
        plugin, given, ctx = self._handler(cls, primary)
        return plugin.desired(given, ctx)

    def desired_by_dependent(self, cls: type, primary: Any) -> dict[str, list[dict[str, Any]]]:
        """The desired objects by dependent name, as the host receives them."""
        by_dependent: dict[str, list[dict[str, Any]]] = {}
        for d in self.desired(cls, primary):
            by_dependent.setdefault(d.dependent, []).append(d.object)
        return by_dependent

    def cleanup(self, cls: type, primary: Any) -> Cleanup:
        """Runs ``cleanup`` on ``primary``; raises its :class:`Error`."""
        plugin, given, ctx = self._handler(cls, primary)
        return plugin.cleanup(given, ctx)

    def error_status(self, cls: type, primary: Any, error: Error) -> dict[str, Any] | None:
        """Runs ``error_status`` on ``primary`` after ``error``."""
        plugin, given, ctx = self._handler(cls, primary)
        return plugin.error_status(given, error, ctx)

    def check(self, cls: type, name: str, primary: Any, dependent: Any = None) -> bool:
        """Runs ``check``."""
        other = None if dependent is None else json.dumps(encode(dependent))
        plugin, given, ctx = self._handler(cls, primary)
        return plugin.check(name, given, other, ctx)

    def filter(self, cls: type, name: str, event: EventKind, obj: Any, old: Any = None) -> bool:
        """Runs ``filter``."""
        before = None if old is None else json.dumps(encode(old))
        return Plugin(cls).filter(name, event, json.dumps(encode(obj)), before)

    def map_secondary(self, cls: type, secondary: Any, previous: Any = None) -> list[PrimaryRef]:
        """Runs ``map_secondary``; raises its :class:`Error`."""
        before = None if previous is None else json.dumps(encode(previous))
        plugin = Plugin(cls)
        return plugin.map_secondary(json.dumps(encode(secondary)), before, self._context(_caches(plugin.config)))

    def secondaries_of(self, cls: type, primary: Any) -> list[SecondaryRef]:
        """Runs ``secondaries_of``."""
        plugin, given, ctx = self._handler(cls, primary)
        return plugin.secondaries_of(given, ctx)

    def fetch(self, cls: type, primary: Any, tracked: Tracked | None = None) -> list[External]:
        """Runs ``fetch``."""
        plugin, given, ctx = self._handler(cls, primary)
        return plugin.fetch(given, tracked or Tracked(), ctx)

    def map_inbound(self, cls: type, payload: Any) -> list[PrimaryRef]:
        """Runs ``map_inbound``."""
        plugin = Plugin(cls)
        return plugin.map_inbound(json.dumps(encode(payload)), self._context(_caches(plugin.config)))

    def validate(self, cls: type, request: AdmissionRequest) -> Verdict:
        """Runs ``validate`` for ``request`` (its objects dicts, or what ``encode`` takes), as the
        host does for the plugin's validating webhook; raises ``LookupError`` when the plugin
        declares no validating webhook for the request's kind and operation (the API server would
        not call it)."""
        plugin = _served(cls, WebhookType.VALIDATING, request)
        return plugin.validate(_as_text(request), self._context(_caches(plugin.config)))

    def default_object(self, cls: type, request: AdmissionRequest) -> dict[str, Any]:
        """Runs ``default`` (``default_other`` for another kind) for ``request``, as the host
        does for the plugin's mutating webhook, and returns the object as the API server would
        store it; raises the plugin's refusal as an :class:`Error`, and ``LookupError`` when the
        plugin declares no mutating webhook for the request (as :meth:`validate` does).

        >>> from wasmop import AdmissionRequest, Config, Kind, Outcome, Webhook
        >>> class Pages:
        ...     config = Config("page", Kind.namespaced("example.com", "v1", "Page")).webhook(Webhook.mutating())
        ...     def reconcile(self, page: dict, ctx) -> Outcome:
        ...         return Outcome.done()
        ...     def default(self, page: dict, ctx) -> None:
        ...         page["spec"].setdefault("exposed", False)
        >>> page = {"apiVersion": "example.com/v1", "kind": "Page", "metadata": {"name": "a"}, "spec": {"html": "hi"}}
        >>> FakeHost().default_object(Pages, AdmissionRequest.create(page))["spec"]
        {'html': 'hi', 'exposed': False}
        """
        plugin = _served(cls, WebhookType.MUTATING, request)
        return json.loads(plugin.default(_as_text(request), self._context(_caches(plugin.config))))

    def convert(self, cls: type, objects: list[Any], desired_api_version: str) -> list[dict[str, Any]]:
        """Runs ``convert`` for ``objects``, as the host does for the conversion webhook of the
        primary's CRD, and returns them in ``desired_api_version``; raises the plugin's failure
        as an :class:`Error`, and ``LookupError`` when the plugin declares no conversion webhook."""
        plugin = Plugin(cls)
        if not any(w.webhook_type is WebhookType.CONVERSION for w in plugin.config.webhooks):
            raise LookupError(f"plugin {plugin.config.name} declares no conversion webhook")
        texts = [json.dumps(encode(obj)) for obj in objects]
        return [json.loads(t) for t in plugin.convert(texts, desired_api_version, self._context(_caches(plugin.config)))]


def _served(cls: type, webhook_type: WebhookType, request: AdmissionRequest) -> Plugin:
    """The plugin ``cls``, when it declares a webhook of ``webhook_type`` that the API server
    would call for ``request``; else ``LookupError``."""
    plugin = Plugin(cls)
    config = plugin.config
    if not any(w.webhook_type is webhook_type and w.serves(config.primary, request.kind, request.operation)
               for w in config.webhooks):
        raise LookupError(f"plugin {config.name} declares no {webhook_type.value} webhook for "
                          f"{request.operation.value} of {request.kind}: the API server would not call it")
    return plugin


def _as_text(request: AdmissionRequest) -> AdmissionRequest:
    """``request`` with its objects as JSON text, as the host sends them."""
    text = {name: None if obj is None else json.dumps(encode(obj))
            for name, obj in (("object", request.object), ("old_object", request.old_object))}
    return AdmissionRequest(request.uid, request.kind, request.operation, request.namespace, request.name,
                            text["object"], text["old_object"], request.username, list(request.groups),
                            request.dry_run)
