"""What a successful reconcile asks of the host: :class:`Outcome` and :class:`Event`."""

from __future__ import annotations

import datetime
import enum
from dataclasses import dataclass, field
from typing import Any

from .typed import encode


class EventType(enum.Enum):
    """The type of a Kubernetes Event."""

    NORMAL = "normal"
    WARNING = "warning"


@dataclass
class Event:
    """A Kubernetes Event to record on the primary.

    >>> Event.normal("Ready", "Reconcile").note("the WebPage is ready").reason
    'Ready'
    """

    event_type: EventType
    #: Short CamelCase reason, e.g. ``Reconciled``.
    reason: str
    #: What was done, e.g. ``Reconcile``.
    action: str
    #: Human readable detail.
    note_text: str | None = None

    @classmethod
    def normal(cls, reason: str, action: str) -> Event:
        """A Normal event."""
        return cls(EventType.NORMAL, reason, action)

    @classmethod
    def warning(cls, reason: str, action: str) -> Event:
        """A Warning event."""
        return cls(EventType.WARNING, reason, action)

    def note(self, note: str) -> Event:
        """Adds the human readable detail."""
        self.note_text = note
        return self


@dataclass
class Outcome:
    """What the host should write after a successful reconcile: the status, events, labels and
    annotations of the primary, a reschedule, and whether the primary is ready.

    With :meth:`ready` or :meth:`not_ready` the host keeps the primary's ``Ready``,
    ``Reconciling`` and ``Degraded`` conditions (and ``observedGeneration``) when the plugin keeps
    conditions on (:meth:`Config.own_conditions <wasmop.Config.own_conditions>` turns that off).

    >>> Outcome.ready("greeted").status({"message": "Hello, world!"}).reschedule_after(60).readiness
    (True, 'greeted')
    """

    #: ``(ready, message)``, or None to leave the conditions alone.
    readiness: tuple[bool, str] | None = None
    #: The JSON object merged into ``.status``.
    status_patch: dict[str, Any] | None = None
    #: Seconds until the host reconciles again unless an event comes first.
    reschedule_seconds: float | None = None
    events: list[Event] = field(default_factory=list)
    #: ``(key, value)`` to set, ``(key, None)`` to remove.
    labels: list[tuple[str, str | None]] = field(default_factory=list)
    #: ``(key, value)`` to set, ``(key, None)`` to remove.
    annotations: list[tuple[str, str | None]] = field(default_factory=list)

    @classmethod
    def done(cls) -> Outcome:
        """Nothing to report: the conditions are left alone."""
        return cls()

    @classmethod
    def ready(cls, message: str) -> Outcome:
        """The primary is ready (``Ready`` True)."""
        return cls(readiness=(True, message))

    @classmethod
    def not_ready(cls, message: str) -> Outcome:
        """The primary is still progressing (``Ready`` False, ``Reconciling`` True)."""
        return cls(readiness=(False, message))

    def status(self, status: Any) -> Outcome:
        """Merges ``status`` (a dict, or a dataclass whose fields go out in camelCase and whose
        None fields are left out) into ``.status``. The host sets ``observedGeneration`` unless
        the status does, and writes nothing when the status already holds these values."""
        encoded = encode(status)
        if not isinstance(encoded, dict):
            raise TypeError(f"the status must be a JSON object, got {encoded!r}")
        self.status_patch = encoded
        return self

    def reschedule_after(self, delay: float | datetime.timedelta) -> Outcome:
        """Reconcile again after ``delay`` (seconds, or a timedelta) unless an event comes first."""
        if isinstance(delay, datetime.timedelta):
            delay = delay.total_seconds()
        self.reschedule_seconds = delay
        return self

    def event(self, event: Event) -> Outcome:
        """Records ``event`` on the primary."""
        self.events.append(event)
        return self

    def label(self, key: str, value: str) -> Outcome:
        """Sets a label of the primary."""
        self.labels.append((key, value))
        return self

    def remove_label(self, key: str) -> Outcome:
        """Removes a label of the primary."""
        self.labels.append((key, None))
        return self

    def annotation(self, key: str, value: str) -> Outcome:
        """Sets an annotation of the primary."""
        self.annotations.append((key, value))
        return self

    def remove_annotation(self, key: str) -> Outcome:
        """Removes an annotation of the primary."""
        self.annotations.append((key, None))
        return self
