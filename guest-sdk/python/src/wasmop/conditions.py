"""Kubernetes conditions (``status.conditions``), for reading the ones the host keeps
(``Ready``, ``Reconciling``, ``Degraded``) and for plugins that keep their own
(:meth:`Config.own_conditions <wasmop.Config.own_conditions>`)."""

from __future__ import annotations

import datetime
from collections.abc import Iterable
from dataclasses import dataclass
from typing import Any


@dataclass
class Condition:
    """One condition; decodes from the lenient shapes other controllers write."""

    type: str
    status: str = "Unknown"
    reason: str = ""
    message: str = ""
    last_transition_time: str | None = None
    observed_generation: int | None = None


def _field(condition: Condition | dict[str, Any], name: str) -> Any:
    return condition.get(name) if isinstance(condition, dict) else getattr(condition, name)


def get(conditions: Iterable[Condition | dict[str, Any]] | None, type_: str) -> Any:
    """The condition of type ``type_`` (a :class:`Condition` or a dict, as given), or None."""
    return next((c for c in conditions or () if _field(c, "type") == type_), None)


def is_true(conditions: Iterable[Condition | dict[str, Any]] | None, type_: str) -> bool:
    """Whether the condition of type ``type_`` has status ``"True"``.

    >>> is_true([{"type": "Ready", "status": "True"}], "Ready")
    True
    """
    condition = get(conditions, type_)
    return condition is not None and _field(condition, "status") == "True"


def now() -> str:
    """The current time as Kubernetes writes it (RFC 3339, whole seconds, UTC)."""
    return datetime.datetime.now(datetime.timezone.utc).strftime("%Y-%m-%dT%H:%M:%SZ")


def new(type_: str, status: bool | str, reason: str, message: str) -> Condition:
    """A condition that transitions now; ``status`` True/False or ``"Unknown"``."""
    text = status if isinstance(status, str) else ("True" if status else "False")
    return Condition(type_, text, reason, message, last_transition_time=now())


def set_condition(conditions: list[Condition], condition: Condition) -> bool:
    """Puts ``condition`` in ``conditions``, keeping the transition time of one of the same type
    and status; returns whether the status transitioned (or the type is new)."""
    for i, existing in enumerate(conditions):
        if existing.type == condition.type:
            transition = existing.status != condition.status
            if not transition and existing.last_transition_time:
                condition.last_transition_time = existing.last_transition_time
            conditions[i] = condition
            return transition
    conditions.append(condition)
    return True
