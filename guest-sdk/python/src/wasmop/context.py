"""What a handler can ask of the host: :class:`Context`, and the :class:`Host` it talks to."""

from __future__ import annotations

import enum
import json
from typing import Any, Protocol, TypeVar

from .dependents import DependentState
from .errors import Error
from .external import External
from .kinds import Kind
from .typed import DecodeError, decode

T = TypeVar("T")


class Level(enum.Enum):
    """The severity of a log line."""

    TRACE = "trace"
    DEBUG = "debug"
    INFO = "info"
    WARN = "warn"
    ERROR = "error"


class HostError(Exception):
    """The host refused a read (e.g. the kind is not watched)."""


class Host(Protocol):
    """The host imports, as JSON text: the component's (``wasmop.component``) or a fake
    (``wasmop.testing.FakeHost``). Reads raise :class:`HostError`."""

    def log(self, level: Level, message: str, fields: list[tuple[str, str]]) -> None: ...

    def get(self, kind: Kind, namespace: str | None, name: str) -> str | None: ...

    def list(self, kind: Kind, namespace: str | None, label_selector: str | None) -> list[str]: ...

    def secondaries(self, kind: Kind) -> list[str]: ...


class Context:
    """Given to every handler: the host's caches (:meth:`get`, :meth:`list`,
    :meth:`secondaries`), the dependents' states, the attempt, and a log that lands in the host's
    reconcile span.

    Reads return dicts, or instances of ``into`` (a dataclass) when given. A read the host
    refuses raises a transient :class:`Error`; an object that does not decode, a permanent one.
    """

    def __init__(self, host: Host, attempt: int = 0, last_attempt: bool = False,
                 dependents: list[DependentState] | None = None, external: list[External] | None = None,
                 inbound: Any = None):
        self._host = host
        #: 0 on the first attempt, incremented on each retry.
        self.attempt = attempt
        #: True when no retry will follow if this attempt fails.
        self.last_attempt = last_attempt
        self._dependents = list(dependents or ())
        self._external = list(external or ())
        #: The last inbound payload mapped to the primary (inbound caching), or None.
        self.inbound = inbound

    def dependent(self, name: str) -> DependentState | None:
        """The state of dependent ``name`` after the host reconciled it, or None."""
        return next((d for d in self._dependents if d.name == name), None)

    def dependents(self) -> list[DependentState]:
        """The state of every declared dependent (empty outside ``reconcile``)."""
        return list(self._dependents)

    def dependent_objects(self, name: str, into: type[T] | None = None) -> list[Any]:
        """The objects of dependent ``name``, as dicts or ``into``."""
        state = self.dependent(name)
        if state is None:
            raise Error.permanent(f"no dependent named {name!r} was reconciled")
        return state.objects_as(into) if into is not None else list(state.objects)

    def external(self, dependent: str) -> list[External]:
        """The external objects of ``dependent`` as polling last found them."""
        return [o for o in self._external if o.dependent == dependent]

    def log(self, level: Level, message: str, **fields: Any) -> None:
        """A structured log line; ``fields`` become its key-value pairs."""
        self._host.log(level, message, [(k, str(v)) for k, v in fields.items()])

    def trace(self, message: str, **fields: Any) -> None:
        """Logs at trace level."""
        self.log(Level.TRACE, message, **fields)

    def debug(self, message: str, **fields: Any) -> None:
        """Logs at debug level."""
        self.log(Level.DEBUG, message, **fields)

    def info(self, message: str, **fields: Any) -> None:
        """Logs at info level."""
        self.log(Level.INFO, message, **fields)

    def warn(self, message: str, **fields: Any) -> None:
        """Logs at warn level."""
        self.log(Level.WARN, message, **fields)

    def error(self, message: str, **fields: Any) -> None:
        """Logs at error level."""
        self.log(Level.ERROR, message, **fields)

    def get(self, kind: Kind, namespace: str | None, name: str, into: type[T] | None = None) -> Any:
        """The cached object ``namespace/name`` of a watched ``kind``, or None."""
        what = f"{kind} {namespace}/{name}" if namespace else f"{kind} {name}"
        try:
            text = self._host.get(kind, namespace, name)
        except HostError as e:
            raise Error.transient(f"cannot read {what}: {e}") from None
        return None if text is None else _decode(text, into, what)

    def list(self, kind: Kind, namespace: str | None = None, label_selector: str | None = None,
             into: type[T] | None = None) -> list[Any]:
        """The cached objects of a watched ``kind``, in ``namespace`` and matching
        ``label_selector`` when given."""
        what = f"{kind} objects" + (f" in {namespace}" if namespace else "")
        what += f" matching {label_selector!r}" if label_selector else ""
        try:
            texts = self._host.list(kind, namespace, label_selector)
        except HostError as e:
            raise Error.transient(f"cannot list {what}: {e}") from None
        return [_decode(text, into, what) for text in texts]

    def secondaries(self, kind: Kind, into: type[T] | None = None) -> list[Any]:
        """The cached objects of watched ``kind`` that belong to the primary being reconciled."""
        try:
            texts = self._host.secondaries(kind)
        except HostError as e:
            raise Error.transient(f"cannot read the {kind} secondaries: {e}") from None
        return [_decode(text, into, f"a {kind} secondary") for text in texts]


def _decode(text: str, into: type | None, what: str) -> Any:
    value = json.loads(text)
    if into is None:
        return value
    try:
        return decode(value, into)
    except DecodeError as e:
        raise Error.permanent(f"{what} does not decode as {into.__name__}: {e}") from None
