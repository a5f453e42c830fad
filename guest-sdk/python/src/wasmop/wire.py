"""Units and encodings shared by the records that cross into the host."""

from __future__ import annotations

import datetime

U64_MAX = 2**64 - 1


def millis(duration: float | int | datetime.timedelta) -> int:
    """A duration in whole milliseconds, saturating at the WIT ``u64`` bounds."""
    seconds = duration.total_seconds() if isinstance(duration, datetime.timedelta) else duration
    if seconds < 0:
        raise ValueError(f"a duration cannot be negative, got {duration!r}")
    return min(round(seconds * 1000), U64_MAX)
