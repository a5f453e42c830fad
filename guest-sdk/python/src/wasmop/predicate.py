"""Which watch events reconcile: :class:`Predicate` and :class:`EventKind`."""

from __future__ import annotations

import enum
from dataclasses import dataclass


class EventKind(enum.Enum):
    """A watch event, as a plugin predicate's ``filter`` sees it."""

    #: First seen: created, or listed at start.
    CREATE = "create"
    #: A new version.
    UPDATE = "update"
    #: Marked for deletion, or deleted.
    DELETE = "delete"
    #: Anything else: a resync, a timer, an inbound event.
    GENERIC = "generic"


@dataclass(frozen=True)
class Predicate:
    """A condition on watch events (controller-runtime's predicates), combined with
    :meth:`and_`, :meth:`or_` and :meth:`not_`, or with ``&``, ``|`` and ``~``.

    On :meth:`Config.predicate <wasmop.Config.predicate>` it replaces the primary's update
    filtering (generation-aware, label and annotation changes); the create, update and delete
    filters still apply. On :meth:`Watch.predicate <wasmop.Watch.predicate>` only the secondary
    changes it holds for map to primaries. :meth:`plugin` terms ask the plugin's ``filter``.

    >>> p = Predicate.generation_changed() | (Predicate.labels_changed() & Predicate.plugin("mine"))
    >>> p.terms
    ('generation-changed', 'labels-changed', ('plugin', 'mine'), 'and', 'or')
    """

    #: The terms in postfix order: strings for the fixed terms and operators, ``("plugin", name)``.
    terms: tuple

    @classmethod
    def plugin(cls, name: str) -> Predicate:
        """The plugin's ``filter(name, event, object, old)`` decides."""
        return cls((("plugin", name),))

    @classmethod
    def generation_changed(cls) -> Predicate:
        """Not an update, or the generation (or finalizers) changed."""
        return cls(("generation-changed",))

    @classmethod
    def labels_changed(cls) -> Predicate:
        """Not an update, or the labels changed."""
        return cls(("labels-changed",))

    @classmethod
    def annotations_changed(cls) -> Predicate:
        """Not an update, or the annotations changed."""
        return cls(("annotations-changed",))

    def and_(self, other: Predicate) -> Predicate:
        """Both hold."""
        return Predicate(self.terms + other.terms + ("and",))

    def or_(self, other: Predicate) -> Predicate:
        """Either holds."""
        return Predicate(self.terms + other.terms + ("or",))

    def not_(self) -> Predicate:
        """It does not hold."""
        return Predicate(self.terms + ("not",))

    __and__ = and_
    __or__ = or_
    __invert__ = not_

    def plugin_names(self) -> list[str]:
        """The names of its plugin terms, for the plugin's ``filter`` to know."""
        return [term[1] for term in self.terms if isinstance(term, tuple)]
