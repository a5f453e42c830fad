"""Objects outside the cluster: :class:`ExternalDependent` declares them, :class:`External` is
one of them, :class:`Tracked` the IDs the host keeps, :class:`Polling` how often it looks."""

from __future__ import annotations

import datetime
import enum
from dataclasses import dataclass, field
from typing import Any, TypeVar

from .dependents import Check
from .typed import DecodeError, decode, encode

T = TypeVar("T")


@dataclass
class External:
    """An object outside the cluster, as ``fetch`` found it or ``desired`` wants it."""

    #: The external dependent it belongs to.
    dependent: str
    #: Identifies it among the dependent's objects of one primary (e.g. a record's name).
    key: str
    #: The object as a dict (or a dataclass, encoded in camelCase).
    object: Any
    #: The ID the external system gave it, once known.
    id: str | None = None

    def __post_init__(self) -> None:
        self.object = encode(self.object)

    def object_as(self, type_: type[T]) -> T:
        """The object decoded as ``type_``; raises ValueError naming the object."""
        try:
            return decode(self.object, type_)
        except DecodeError as e:
            raise ValueError(f"external object {self.dependent}/{self.key} does not decode: {e}") from None


@dataclass
class Tracked:
    """The IDs the host tracks for a primary's external objects: ``(dependent, key, id)``."""

    ids: list[tuple[str, str, str]] = field(default_factory=list)

    def id(self, dependent: str, key: str) -> str | None:
        """The ID of object ``key`` of ``dependent``, if tracked."""
        return next((i for d, k, i in self.ids if (d, k) == (dependent, key)), None)

    def of(self, dependent: str) -> list[tuple[str, str]]:
        """``(key, id)`` of every tracked object of ``dependent``."""
        return [(k, i) for d, k, i in self.ids if d == dependent]


class Tracking(enum.Enum):
    """Where the host keeps the IDs of an external dependent's objects."""

    CONFIG_MAP = "config-map"
    SECRET = "secret"


@dataclass
class ExternalDependent:
    """Objects outside the cluster the reconciles keep in shape: ``desired`` returns them
    (:meth:`Desired.external <wasmop.Desired.external>`), ``fetch`` finds them, and
    ``apply_external`` and ``delete_external`` change them, in the dependents' order."""

    name: str
    depends_on_names: list[str] = field(default_factory=list)
    ready_check: Check | None = None
    reconcile_check: Check | None = None
    ready_when_empty: bool = True
    tracking: Tracking = Tracking.CONFIG_MAP

    def depends_on(self, name: str) -> ExternalDependent:
        """Reconciled only once dependent ``name`` is ready."""
        self.depends_on_names.append(name)
        return self

    def ready_when(self, check: Check) -> ExternalDependent:
        """Its objects count as ready when ``check`` holds on them."""
        self.ready_check = check
        return self

    def reconcile_when(self, check: Check) -> ExternalDependent:
        """Evaluated on the primary: when false, its objects are deleted."""
        self.reconcile_check = check
        return self

    def tracked_in(self, tracking: Tracking) -> ExternalDependent:
        """Keep the IDs in a ConfigMap (default) or a Secret."""
        self.tracking = tracking
        return self


@dataclass(frozen=True)
class Polling:
    """How the host polls external state: per primary (``fetch``) or for all at once
    (``fetch_all``), every ``period`` seconds (or timedelta)."""

    is_global: bool
    period: float | datetime.timedelta

    @classmethod
    def per_resource(cls, period: float | datetime.timedelta) -> Polling:
        """Call ``fetch`` for each primary every ``period``."""
        return cls(False, period)

    @classmethod
    def global_(cls, period: float | datetime.timedelta) -> Polling:
        """Call ``fetch_all`` every ``period``."""
        return cls(True, period)
