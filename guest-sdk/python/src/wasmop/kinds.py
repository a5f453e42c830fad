"""Kubernetes resource types: :class:`Kind`."""

from __future__ import annotations

from dataclasses import dataclass, replace


@dataclass(frozen=True)
class Kind:
    """A Kubernetes resource type, as the host names it.

    Make one with :meth:`namespaced` or :meth:`cluster`. The plural (the resource's URL segment)
    defaults on the host side to the kind in lower case plus ``s``; give it with :meth:`plural`
    whenever that is wrong (``Ingress`` → ``ingresses``).

    >>> Kind.namespaced("apps", "v1", "Deployment").plural("deployments").api_version
    'apps/v1'
    """

    group: str
    version: str
    kind: str
    plural_name: str | None = None
    cluster_scoped: bool = False

    @classmethod
    def namespaced(cls, group: str, version: str, kind: str) -> Kind:
        """A kind whose objects live in a namespace; ``group`` is empty for the core group."""
        return cls(group, version, kind)

    @classmethod
    def cluster(cls, group: str, version: str, kind: str) -> Kind:
        """A cluster-scoped kind, e.g. ``Kind.cluster("", "v1", "Namespace")``."""
        return cls(group, version, kind, cluster_scoped=True)

    def plural(self, plural: str) -> Kind:
        """This kind with its plural resource name, e.g. ``configmaps``."""
        return replace(self, plural_name=plural)

    @property
    def is_namespaced(self) -> bool:
        """Whether objects of this kind live in a namespace."""
        return not self.cluster_scoped

    @property
    def api_version(self) -> str:
        """``group/version``, or ``version`` for the core group: an object's ``apiVersion``."""
        return f"{self.group}/{self.version}" if self.group else self.version

    def same_type(self, other: Kind) -> bool:
        """Whether both name the same group, version and kind (plural and scope aside)."""
        return (self.group, self.version, self.kind) == (other.group, other.version, other.kind)

    def __str__(self) -> str:
        return f"{self.api_version}/{self.kind}"
