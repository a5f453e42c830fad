"""Secondary kinds whose changes reconcile primaries: :class:`Watch` and its :class:`Mapper`."""

from __future__ import annotations

import enum
from dataclasses import dataclass, field

from .kinds import Kind
from .predicate import Predicate

#: The annotation naming a secondary's primary (the annotations mapper).
PRIMARY_NAME_ANNOTATION = "wasmop.dev/primary-name"
#: The annotation naming the namespace of a secondary's primary.
PRIMARY_NAMESPACE_ANNOTATION = "wasmop.dev/primary-namespace"


class Mapper(enum.Enum):
    """How a change of a watched secondary finds the primaries to reconcile."""

    #: The owner reference marked ``controller: true`` (the default).
    CONTROLLER_OWNER = "controller-owner"
    #: Every owner reference of the primary's kind.
    ANY_OWNER = "any-owner"
    #: The annotations :data:`PRIMARY_NAME_ANNOTATION` and :data:`PRIMARY_NAMESPACE_ANNOTATION`.
    ANNOTATIONS = "annotations"
    #: The plugin's ``map_secondary``.
    PLUGIN = "plugin"
    #: The primaries whose ``secondaries_of`` names the secondary.
    PRIMARY_REFERENCES = "primary-references"


@dataclass
class Watch:
    """A secondary kind the plugin depends on (controller-runtime's ``Watches``). The host
    watches and caches its objects; ``ctx.secondaries(kind)`` gives those of the primary being
    reconciled.

    >>> Watch(Kind.namespaced("", "v1", "Secret")).annotated().mapper
    <Mapper.ANNOTATIONS: 'annotations'>
    """

    kind: Kind
    namespace_: str | None = None
    label_selector_: str | None = None
    field_selector_: str | None = None
    cluster_: str | None = None
    mapper: Mapper = Mapper.CONTROLLER_OWNER
    #: Paths the plugin reads; ``[]`` is metadata only; None, whole objects.
    projection: list[str] | None = None
    predicate_: Predicate | None = None

    def namespace(self, namespace: str) -> Watch:
        """Only this namespace (default: where the host watches primaries)."""
        self.namespace_ = namespace
        return self

    def label_selector(self, selector: str) -> Watch:
        """Only objects matching this label selector (Kubernetes syntax)."""
        self.label_selector_ = selector
        return self

    def field_selector(self, selector: str) -> Watch:
        """Only objects matching this field selector (Kubernetes syntax)."""
        self.field_selector_ = selector
        return self

    def cluster(self, cluster: str) -> Watch:
        """Watch the cluster the host knows by this name (``wasmop run --cluster``)."""
        self.cluster_ = cluster
        return self

    def owned_by_controller(self) -> Watch:
        """Map by the controller owner reference (the default)."""
        self.mapper = Mapper.CONTROLLER_OWNER
        return self

    def owned_by_any(self) -> Watch:
        """Map by every owner reference of the primary's kind."""
        self.mapper = Mapper.ANY_OWNER
        return self

    def annotated(self) -> Watch:
        """Map by the primary-name and primary-namespace annotations."""
        self.mapper = Mapper.ANNOTATIONS
        return self

    def mapped_by_plugin(self) -> Watch:
        """Map with the plugin's ``map_secondary``."""
        self.mapper = Mapper.PLUGIN
        return self

    def referenced_by_primary(self) -> Watch:
        """Map to the primaries whose ``secondaries_of`` names the object."""
        self.mapper = Mapper.PRIMARY_REFERENCES
        return self

    def project(self, paths: list[str]) -> Watch:
        """Cache only these paths (and the metadata) of the objects."""
        self.projection = list(paths)
        return self

    def metadata_only(self) -> Watch:
        """Cache only the metadata of the objects."""
        self.projection = []
        return self

    def predicate(self, predicate: Predicate) -> Watch:
        """Only changes for which ``predicate`` holds map to primaries."""
        self.predicate_ = predicate
        return self
