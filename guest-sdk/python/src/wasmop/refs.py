"""Objects named by a mapper: :class:`PrimaryRef` and :class:`SecondaryRef`."""

from __future__ import annotations

from dataclasses import dataclass

from .kinds import Kind


@dataclass(frozen=True)
class PrimaryRef:
    """A primary to reconcile, named by ``map_secondary`` or ``map_inbound``. Without a
    namespace it names a primary in the secondary's namespace when the primary kind is
    namespaced."""

    name: str
    namespace: str | None = None

    @classmethod
    def namespaced(cls, namespace: str, name: str) -> PrimaryRef:
        """The primary ``namespace/name``."""
        return cls(name, namespace)

    @classmethod
    def cluster_scoped(cls, name: str) -> PrimaryRef:
        """A cluster-scoped primary (or one in the secondary's namespace)."""
        return cls(name)


@dataclass(frozen=True)
class SecondaryRef:
    """A secondary a primary uses, named by ``secondaries_of``; ``kind`` must be watched."""

    kind: Kind
    namespace: str | None
    name: str
