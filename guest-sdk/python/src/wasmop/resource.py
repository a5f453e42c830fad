"""Typed Kubernetes objects: :class:`Resource` with its :class:`ObjectMeta`."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Generic, TypeVar

SpecT = TypeVar("SpecT")
StatusT = TypeVar("StatusT")


@dataclass
class ObjectMeta:
    """The metadata of an object: the fields plugins read. Keys it does not name are dropped
    when decoding; take the primary as a dict to see everything."""

    name: str | None = None
    namespace: str | None = None
    uid: str | None = None
    generation: int | None = None
    resource_version: str | None = None
    creation_timestamp: str | None = None
    deletion_timestamp: str | None = None
    labels: dict[str, str] = field(default_factory=dict)
    annotations: dict[str, str] = field(default_factory=dict)
    finalizers: list[str] = field(default_factory=list)
    owner_references: list[dict[str, Any]] = field(default_factory=list)


@dataclass
class Resource(Generic[SpecT, StatusT]):
    """An object with a typed spec and status, for a custom resource whose spec (and status) the
    plugin declares as dataclasses: ``Resource[Spec]`` (status as a dict) or
    ``Resource[Spec, Status]``. Name it as the type of ``reconcile``'s primary parameter.

    >>> from dataclasses import dataclass
    >>> from wasmop.typed import decode
    >>> @dataclass
    ... class Spec:
    ...     name: str
    >>> decode({"metadata": {"name": "hi"}, "spec": {"name": "world"}}, Resource[Spec]).spec.name
    'world'
    """

    spec: SpecT
    metadata: ObjectMeta = field(default_factory=ObjectMeta)
    status: StatusT | None = None

    def __class_getitem__(cls, params: Any) -> Any:
        # `Resource[Spec]` means `Resource[Spec, dict]`: a status the plugin does not type.
        if not isinstance(params, tuple):
            params = (params, dict)
        return super().__class_getitem__(params)  # type: ignore[misc]
