"""Objects the reconciles keep in shape (JOSDK's dependent resources and workflows):
:class:`Dependent` declares a kind, :class:`Desired` is one object a reconcile wants,
:class:`DependentState` says where a dependent stands, :class:`Check` is a condition the host
evaluates, and :class:`Cleanup` is the answer of ``cleanup``."""

from __future__ import annotations

import datetime
import enum
import json
from dataclasses import dataclass, field
from typing import Any, TypeVar

from .errors import Error
from .kinds import Kind
from .outcome import Event
from .typed import DecodeError, decode, encode

T = TypeVar("T")


@dataclass(frozen=True)
class Check:
    """A condition the host evaluates on an object (JOSDK's workflow conditions): when a
    dependent counts as ready, or (on the primary) whether it is reconciled at all.

    >>> Check.field_equals("spec.exposed", True)
    Check(what='field-equals', args=('spec.exposed', 'true'))
    """

    #: The WIT ``condition`` case.
    what: str
    #: Its payload: paths, a JSON value, a condition type or a name.
    args: tuple[str, ...]

    @classmethod
    def field_equals(cls, path: str, value: Any) -> Check:
        """The value at ``path`` (dot-separated, ``[n]`` indexes lists) equals ``value``; a
        missing path equals None."""
        return cls("field-equals", (path, json.dumps(value, separators=(",", ":"))))

    @classmethod
    def fields_equal(cls, left: str, right: str) -> Check:
        """The values at both paths are equal (and present), e.g. ``status.readyReplicas`` and
        ``spec.replicas``."""
        return cls("fields-equal", (left, right))

    @classmethod
    def condition_true(cls, type_: str) -> Check:
        """``status.conditions`` has an entry of this type with status ``"True"``."""
        return cls("condition-true", (type_,))

    @classmethod
    def plugin(cls, name: str) -> Check:
        """The plugin's ``check(name, primary, dependent, ctx)`` decides."""
        return cls("plugin", (name,))


@dataclass
class Dependent:
    """A kind of object the plugin's reconciles want to exist. The host applies what
    ``desired`` returns for it with server-side apply, owned by the primary, watches the objects,
    and deletes those no longer desired.

    >>> deployment = Kind.namespaced("apps", "v1", "Deployment").plural("deployments")
    >>> Dependent("deployment", deployment).depends_on("configmap").depends_on_names
    ['configmap']
    """

    #: Unique within the plugin; labels every object and names it in ``depends_on``.
    name: str
    kind: Kind
    read_only_: bool = False
    depends_on_names: list[str] = field(default_factory=list)
    ready_check: Check | None = None
    reconcile_check: Check | None = None
    annotation_owned: bool = False
    ready_when_empty: bool = True
    adopts: bool = False
    namespace: str | None = None

    def depends_on(self, name: str) -> Dependent:
        """Reconciled only once dependent ``name`` is ready; skipped until then."""
        self.depends_on_names.append(name)
        return self

    def ready_when(self, check: Check) -> Dependent:
        """Its objects count as ready when ``check`` holds on them (default: once they exist)."""
        self.ready_check = check
        return self

    def reconcile_when(self, check: Check) -> Dependent:
        """Evaluated on the primary: when false, its objects are deleted and it is skipped (and
        everything depending on it)."""
        self.reconcile_check = check
        return self

    def owned_by_annotations(self) -> Dependent:
        """Tie the objects to the primary by annotations rather than an owner reference: for
        objects in other namespaces or cluster-scoped ones; the host deletes them itself."""
        self.annotation_owned = True
        return self

    def in_namespace(self, namespace: str) -> Dependent:
        """Its objects live in this one namespace (a dependent owned by annotations)."""
        self.namespace = namespace
        return self

    def not_ready_when_empty(self) -> Dependent:
        """Not ready while ``desired`` returns none of its objects."""
        self.ready_when_empty = False
        return self

    def adopt(self) -> Dependent:
        """Take over an existing object someone else manages (a forced apply)."""
        self.adopts = True
        return self

    def read_only(self) -> Dependent:
        """Observed, never written: ``desired`` only names the objects."""
        self.read_only_ = True
        return self


@dataclass
class Desired:
    """One object a reconcile wants, for dependent ``dependent``.

    The object is a dict (or a dataclass, encoded in camelCase) with ``apiVersion``, ``kind``,
    ``metadata.name`` (and ``namespace``, default the primary's) and the fields the plugin
    manages.
    """

    dependent: str
    object: Any
    #: Leave the object as the cluster holds it: neither applied nor pruned.
    keep: bool = False
    #: For an external dependent: the object's key among the dependent's objects.
    key: str | None = None

    def __post_init__(self) -> None:
        self.object = encode(self.object)

    @classmethod
    def external(cls, dependent: str, key: str, object: Any) -> Desired:
        """An object of external dependent ``dependent``, identified by ``key``."""
        return cls(dependent, object, key=key)

    @classmethod
    def unchanged(cls, dependent: str, name: str, namespace: str | None = None) -> Desired:
        """Keep the named object as the cluster holds it."""
        metadata = {"name": name} if namespace is None else {"name": name, "namespace": namespace}
        return cls(dependent, {"metadata": metadata}, keep=True)


class Phase(enum.Enum):
    """Where a dependent stands after the host reconciled it."""

    #: Applied (or observed) and its ready condition holds.
    READY = "Ready"
    #: Applied (or observed), but its ready condition does not hold yet.
    NOT_READY = "NotReady"
    #: Not reconciled: a dependency is not ready, or its reconcile condition is false.
    SKIPPED = "Skipped"
    #: Its reconcile condition is false: its objects were deleted.
    DELETED = "Deleted"


@dataclass
class DependentState:
    """A dependent's state, given to ``reconcile``: its phase and its objects as the cluster holds
    them after the host's writes."""

    name: str
    phase: Phase
    objects: list[dict[str, Any]] = field(default_factory=list)

    def is_ready(self) -> bool:
        """Whether its phase is :attr:`Phase.READY`."""
        return self.phase is Phase.READY

    def objects_as(self, type_: type[T]) -> list[T]:
        """Its objects decoded as ``type_`` (a dataclass); raises a permanent :class:`Error`
        naming the dependent when one does not decode."""
        try:
            return [decode(o, type_) for o in self.objects]
        except DecodeError as e:
            raise Error.permanent(f"an object of dependent {self.name} does not decode: {e}") from None


@dataclass
class Cleanup:
    """What the host should do after a successful ``cleanup``: by default it removes the
    finalizer, so the primary goes.

    >>> Cleanup.done().keep_finalizer().reschedule_after(30).keeps_finalizer
    True
    """

    keeps_finalizer: bool = False
    reschedule_seconds: float | None = None
    events: list[Event] = field(default_factory=list)

    @classmethod
    def done(cls) -> Cleanup:
        """Cleaned up: the host removes the finalizer."""
        return cls()

    def keep_finalizer(self) -> Cleanup:
        """Keep the finalizer (deletion waits); pair it with a reschedule or a watch."""
        self.keeps_finalizer = True
        return self

    def reschedule_after(self, delay: float | datetime.timedelta) -> Cleanup:
        """Run ``cleanup`` again after ``delay`` (seconds, or a timedelta)."""
        if isinstance(delay, datetime.timedelta):
            delay = delay.total_seconds()
        self.reschedule_seconds = delay
        return self

    def event(self, event: Event) -> Cleanup:
        """Records ``event`` on the primary."""
        self.events.append(event)
        return self
