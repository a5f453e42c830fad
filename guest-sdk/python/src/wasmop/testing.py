"""Unit-test plugins natively, without a cluster or wasm: :class:`FakeHost` stands in for the
host's caches and runs a plugin's handlers through the code the component runs
(:class:`wasmop.plugin.Plugin`).

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

import json
from dataclasses import dataclass, field
from typing import Any

from .context import Context, HostError, Level
from .dependents import Cleanup, DependentState, Desired, Phase
from .errors import Error
from .external import External, Tracked
from .kinds import Kind
from .outcome import Event, Outcome
from .plugin import Plugin
from .predicate import EventKind
from .refs import PrimaryRef, SecondaryRef
from .typed import encode


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

    # The Host protocol.

    def log(self, level: Level, message: str, fields: list[tuple[str, str]]) -> None:
        """Records the line in :attr:`logs`."""
        self.logs.append(Log(level, message, dict(fields)))

    def _check(self, kind: Kind) -> None:
        if any(kind.same_type(k) for k in self.unwatched):
            raise HostError(f"{kind} is not watched by the plugin")

    def get(self, kind: Kind, namespace: str | None, name: str) -> str | None:
        """The cached object, as JSON text."""
        self._check(kind)
        for k, o in self.objects:
            meta = o.get("metadata", {})
            if k.same_type(kind) and meta.get("name") == name and meta.get("namespace") == namespace:
                return json.dumps(o)
        return None

    def list(self, kind: Kind, namespace: str | None, label_selector: str | None) -> list[str]:
        """The cached objects, as JSON text."""
        self._check(kind)
        return [json.dumps(o) for k, o in self.objects
                if k.same_type(kind) and namespace in (None, o.get("metadata", {}).get("namespace"))
                and _matches(o.get("metadata", {}).get("labels") or {}, label_selector)]

    def secondaries(self, kind: Kind) -> list[str]:
        """The secondaries given with :meth:`with_secondary`, as JSON text."""
        self._check(kind)
        return [json.dumps(o) for k, o in self.secondary_objects if k.same_type(kind)]

    # Running handlers.

    def context(self) -> Context:
        """A context on this host, with its dependent states, attempt and inbound payload."""
        return Context(self, self.attempt, self.last_attempt, self.states, self.external, self.inbound)

    def reconcile(self, cls: type, primary: Any) -> Run:
        """Runs ``reconcile`` on ``primary``; the run has its outcome or its error."""
        start = len(self.logs)
        try:
            outcome, error = Plugin(cls).reconcile(json.dumps(encode(primary)), self.context()), None
        except Error as e:
            outcome, error = None, e
        return Run(outcome, error, self.logs[start:])

    def desired(self, cls: type, primary: Any) -> list[Desired]:
        """Runs ``desired`` on ``primary``; raises its :class:`Error`."""
        return Plugin(cls).desired(json.dumps(encode(primary)), self.context())

    def desired_by_dependent(self, cls: type, primary: Any) -> dict[str, list[dict[str, Any]]]:
        """The desired objects by dependent name, as the host receives them."""
        by_dependent: dict[str, list[dict[str, Any]]] = {}
        for d in self.desired(cls, primary):
            by_dependent.setdefault(d.dependent, []).append(d.object)
        return by_dependent

    def cleanup(self, cls: type, primary: Any) -> Cleanup:
        """Runs ``cleanup`` on ``primary``; raises its :class:`Error`."""
        return Plugin(cls).cleanup(json.dumps(encode(primary)), self.context())

    def error_status(self, cls: type, primary: Any, error: Error) -> dict[str, Any] | None:
        """Runs ``error_status`` on ``primary`` after ``error``."""
        return Plugin(cls).error_status(json.dumps(encode(primary)), error, self.context())

    def check(self, cls: type, name: str, primary: Any, dependent: Any = None) -> bool:
        """Runs ``check``."""
        other = None if dependent is None else json.dumps(encode(dependent))
        return Plugin(cls).check(name, json.dumps(encode(primary)), other, self.context())

    def filter(self, cls: type, name: str, event: EventKind, obj: Any, old: Any = None) -> bool:
        """Runs ``filter``."""
        before = None if old is None else json.dumps(encode(old))
        return Plugin(cls).filter(name, event, json.dumps(encode(obj)), before)

    def map_secondary(self, cls: type, secondary: Any, previous: Any = None) -> list[PrimaryRef]:
        """Runs ``map_secondary``; raises its :class:`Error`."""
        before = None if previous is None else json.dumps(encode(previous))
        return Plugin(cls).map_secondary(json.dumps(encode(secondary)), before, self.context())

    def secondaries_of(self, cls: type, primary: Any) -> list[SecondaryRef]:
        """Runs ``secondaries_of``."""
        return Plugin(cls).secondaries_of(json.dumps(encode(primary)), self.context())

    def fetch(self, cls: type, primary: Any, tracked: Tracked | None = None) -> list[External]:
        """Runs ``fetch``."""
        return Plugin(cls).fetch(json.dumps(encode(primary)), tracked or Tracked(), self.context())

    def map_inbound(self, cls: type, payload: Any) -> list[PrimaryRef]:
        """Runs ``map_inbound``."""
        return Plugin(cls).map_inbound(json.dumps(encode(payload)), self.context())
