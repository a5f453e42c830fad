"""Failed reconciles: :class:`Error` and how the host treats each kind of it."""

from __future__ import annotations

#: The kinds of :class:`Error`, as the WIT ``reconcile-error`` variant names them.
KINDS = ("transient", "permanent", "invalid")


class Error(Exception):
    """A failed reconcile, raised by a plugin's handler.

    - :meth:`Error.transient`: may succeed later; the host retries with backoff.
    - :meth:`Error.permanent`: retrying will not help; no retry until the object changes.
    - :meth:`Error.invalid`: the primary itself is invalid (e.g. it does not decode); not retried.

    Any other exception a handler raises counts as transient, its message naming the exception
    type, so a plugin that hits a bug or a flaky dependency is retried the way kopf retries
    handlers.

    >>> raise Error.invalid("the WebPage has no name")
    Traceback (most recent call last):
    wasmop.errors.Error: invalid: the WebPage has no name
    """

    def __init__(self, kind: str, message: str):
        if kind not in KINDS:
            raise ValueError(f"an Error is one of {', '.join(KINDS)}, not {kind!r}")
        super().__init__(f"{kind}: {message}")
        self.kind = kind
        self.message = message

    @classmethod
    def transient(cls, message: str) -> Error:
        """Something that may succeed later: retried with backoff."""
        return cls("transient", message)

    @classmethod
    def permanent(cls, message: str) -> Error:
        """Retrying will not help: no retry until the object changes."""
        return cls("permanent", message)

    @classmethod
    def invalid(cls, message: str) -> Error:
        """The primary itself is invalid: not retried."""
        return cls("invalid", message)

    @classmethod
    def of(cls, exception: BaseException) -> Error:
        """``exception`` as an :class:`Error`: itself, or a transient error naming its type."""
        if isinstance(exception, Error):
            return exception
        return cls.transient(f"{type(exception).__name__}: {exception}")

    def __eq__(self, other: object) -> bool:
        return isinstance(other, Error) and (self.kind, self.message) == (other.kind, other.message)

    def __hash__(self) -> int:
        return hash((self.kind, self.message))

    def __repr__(self) -> str:
        return f"Error.{self.kind}({self.message!r})"
