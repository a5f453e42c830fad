"""Durations in Go's ``time.ParseDuration`` syntax (``1h30m``, ``500ms``, ``1.5s``), the way
Kubernetes objects write them, and back in Go's ``Duration.String`` form (``1h30m0s``).

A duration is a sequence of decimal numbers, each with an optional fraction and a unit: ``ns``,
``us`` (or ``µs``), ``ms``, ``s``, ``m``, ``h``; ``0`` alone needs no unit. Durations here are delays
and intervals: a negative one is refused, and, as in Go, one beyond ``2**63 - 1`` nanoseconds is
too large. The same rules as the Rust SDK's ``wasmop_guest::duration``; both check themselves
against ``core/vectors/duration.json``.

>>> parse_duration("1h30m").total_seconds()
5400.0
>>> format_duration(parse_duration("90s"))
'1m30s'
"""

from __future__ import annotations

import datetime
import re

#: Nanoseconds per unit.
UNITS = {"ns": 1, "us": 1_000, "µs": 1_000, "μs": 1_000, "ms": 1_000_000, "s": 10**9, "m": 60 * 10**9, "h": 3600 * 10**9}
_MAX_NANOS = 2**63 - 1
_NUMBER = re.compile(r"([0-9]*)(?:\.([0-9]*))?")
_UNIT = re.compile(r"[^0-9.]*")


class DurationError(ValueError):
    """A text that is not a duration; the message names it and why
    (``5x is not a duration: unknown unit x``)."""

    def __init__(self, text: str, reason: str):
        super().__init__(f"{text} is not a duration: {reason}")
        self.text = text
        self.reason = reason


def parse_nanos(text: str) -> int:
    """``text`` in nanoseconds; raises :class:`DurationError`."""
    negative = text[:1] == "-"
    rest = text[1:] if text[:1] in ("-", "+") else text
    if rest == "0":
        return 0
    if rest == "":
        raise DurationError(text, "empty")
    total = 0
    while rest:
        number = _NUMBER.match(rest)
        whole, fraction = number.group(1), number.group(2) or ""
        if not whole and not fraction:
            raise DurationError(text, f"expected a number at {rest}")
        unit = _UNIT.match(rest, number.end()).group(0)
        if not unit:
            raise DurationError(text, "missing unit")
        if unit not in UNITS:
            raise DurationError(text, f"unknown unit {unit}")
        scale = UNITS[unit]
        fraction = fraction[:13]
        total += int(whole or "0") * scale + (int(fraction) * scale // 10 ** len(fraction) if fraction else 0)
        if total > _MAX_NANOS:
            raise DurationError(text, "too large")
        rest = rest[number.end() + len(unit):]
    if negative and total > 0:
        raise DurationError(text, "negative")
    return total


def parse_duration(text: str) -> datetime.timedelta:
    """``text`` as a :class:`datetime.timedelta` (to the microsecond); raises
    :class:`DurationError`. :func:`parse_nanos` keeps the nanoseconds."""
    return datetime.timedelta(microseconds=parse_nanos(text) // 1000)


def format_nanos(nanos: int) -> str:
    """``nanos`` nanoseconds as Go's ``Duration.String`` writes them: ``1h30m0s``, ``1.5s``."""
    if nanos == 0:
        return "0s"
    if nanos < 10**9:
        scale, unit = (1, "ns") if nanos < 1000 else (1000, "µs") if nanos < 10**6 else (10**6, "ms")
        return f"{_decimal(nanos, scale)}{unit}"
    hours, rest = divmod(nanos, 3600 * 10**9)
    minutes, rest = divmod(rest, 60 * 10**9)
    seconds = _decimal(rest, 10**9)
    if hours:
        return f"{hours}h{minutes}m{seconds}s"
    if minutes:
        return f"{minutes}m{seconds}s"
    return f"{seconds}s"


def format_duration(duration: datetime.timedelta) -> str:
    """``duration`` as Go's ``Duration.String`` writes it."""
    return format_nanos((duration // datetime.timedelta(microseconds=1)) * 1000)


def _decimal(value: int, scale: int) -> str:
    whole, fraction = divmod(value, scale)
    if not fraction:
        return str(whole)
    return f"{whole}.{fraction:0{len(str(scale)) - 1}d}".rstrip("0")
