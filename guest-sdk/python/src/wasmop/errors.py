"""Failed reconciles: :class:`Error` and how the host treats each kind of it."""

from __future__ import annotations

import datetime

from .duration import parse_nanos

#: The kinds of :class:`Error`, as the WIT ``reconcile-error`` variant names them.
KINDS = ("transient", "permanent", "invalid")


class Error(Exception):
    """A failed reconcile, raised by a plugin's handler.

    - :meth:`Error.transient`: may succeed later; the host retries with backoff, or after the
      ``delay`` it carries (kopf's ``TemporaryError(delay=)``).
    - :meth:`Error.permanent`: retrying will not help; no retry until the object changes.
    - :meth:`Error.invalid`: the primary itself is invalid (e.g. it does not decode); not retried.

    Any other exception a handler raises counts as transient, its message naming the exception
    type, so a plugin that hits a bug or a flaky dependency is retried the way kopf retries
    handlers.

    >>> raise Error.invalid("the WebPage has no name")
    Traceback (most recent call last):
    wasmop.errors.Error: invalid: the WebPage has no name
    """

    def __init__(self, kind: str, message: str, delay: float | datetime.timedelta | str | None = None):
        if kind not in KINDS:
            raise ValueError(f"an Error is one of {', '.join(KINDS)}, not {kind!r}")
        if delay is not None and kind != "transient":
            raise ValueError(f"only a transient Error is retried, so only it takes a delay, not a {kind} one")
        super().__init__(f"{kind}: {message}")
        self.kind = kind
        self.message = message
        #: Seconds before the retry, in place of the retry policy's backoff; None: the backoff.
        self.delay = _seconds(delay)

    @classmethod
    def transient(cls, message: str, delay: float | datetime.timedelta | str | None = None) -> Error:
        """Something that may succeed later: retried with backoff, or after ``delay`` (seconds,
        a :class:`datetime.timedelta` or a Go duration such as ``"30s"``) in its place, e.g. a
        rate-limited API's ``Retry-After``. The retry policy still bounds the delay: it is
        capped at ``Retry.max_interval`` and the retry counts toward ``Retry.max_attempts``.

        >>> Error.transient("the DNS API is rate limited", delay="1m30s").delay
        90.0
        """
        return cls("transient", message, delay)

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
        return isinstance(other, Error) and (self.kind, self.message, self.delay) == (
            other.kind, other.message, other.delay)

    def __hash__(self) -> int:
        return hash((self.kind, self.message, self.delay))

    def __repr__(self) -> str:
        delay = "" if self.delay is None else f", delay={self.delay!r}"
        return f"Error.{self.kind}({self.message!r}{delay})"


def _seconds(delay: float | datetime.timedelta | str | None) -> float | None:
    """``delay`` in seconds: a number of them, a timedelta, or a Go duration (``"1m30s"``)."""
    if delay is None:
        return None
    if isinstance(delay, str):
        return parse_nanos(delay) / 1e9
    seconds = delay.total_seconds() if isinstance(delay, datetime.timedelta) else float(delay)
    if seconds < 0:
        raise ValueError(f"a retry delay cannot be negative, got {delay!r}")
    return seconds
