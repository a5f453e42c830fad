"""Admission and conversion webhooks the plugin serves through the host: :class:`Webhook`
(declared in the :class:`~wasmop.Config`), what the plugin's ``validate`` is given
(:class:`AdmissionRequest`) and what it answers (:class:`Verdict`). ``default`` is given the
object itself and ``convert`` the objects as dicts (see :mod:`wasmop.plugin`).

>>> page = {"apiVersion": "example.com/v1", "kind": "Page", "metadata": {"name": "a"}, "spec": {"html": ""}}
>>> request = AdmissionRequest.create(page)
>>> request.operation, request.kind.kind
(<Operation.CREATE: 'create'>, 'Page')
>>> Verdict.deny("html must not be empty").at("spec.html").field
'spec.html'
"""

from __future__ import annotations

import datetime
import enum
from dataclasses import dataclass, field, replace
from typing import Any

from .kinds import Kind


class Operation(enum.Enum):
    """What an admission request does to its object."""

    CREATE = "create"
    UPDATE = "update"
    DELETE = "delete"
    CONNECT = "connect"


class FailurePolicy(enum.Enum):
    """What the API server does when a call of the webhook fails (the plugin raises, or runs out
    of time): ``FAIL`` refuses the request (the default), ``IGNORE`` admits it."""

    FAIL = "fail"
    IGNORE = "ignore"


class WebhookType(enum.Enum):
    """Which of the plugin's handlers a webhook calls."""

    #: ``validate``: admits or denies.
    VALIDATING = "validating"
    #: ``default``: fills in the object's defaults; the host answers with the patch.
    MUTATING = "mutating"
    #: ``convert``: objects between the versions of the primary's CRD.
    CONVERSION = "conversion"


#: The operations of a webhook that declares none.
DEFAULT_OPERATIONS = (Operation.CREATE, Operation.UPDATE)


@dataclass(frozen=True)
class Webhook:
    """A webhook the host serves for the plugin, with kubebuilder's defaults: the primary kind,
    creates and updates, :attr:`FailurePolicy.FAIL` and a timeout of 10 seconds.

    >>> Webhook.validating().failure_policy(FailurePolicy.IGNORE).timeout(5).timeout_seconds
    5
    """

    webhook_type: WebhookType
    kinds_: tuple[Kind, ...] = ()
    operations_: tuple[Operation, ...] = ()
    failure_policy_: FailurePolicy = FailurePolicy.FAIL
    timeout_seconds: float | datetime.timedelta | None = None

    @classmethod
    def validating(cls) -> Webhook:
        """A validating webhook: the plugin's ``validate(request, ctx) -> Verdict`` admits or
        denies each create and update (by default) of the primary."""
        return cls(WebhookType.VALIDATING)

    @classmethod
    def mutating(cls) -> Webhook:
        """A mutating webhook: the plugin's ``default(obj, ctx)`` fills in the defaults of each
        primary created or updated (changing ``obj`` in place), and the host answers with the
        patch. ``default_other(obj, ctx)`` does it for the other kinds the webhook names."""
        return cls(WebhookType.MUTATING)

    @classmethod
    def conversion(cls) -> Webhook:
        """The conversion webhook of the primary's CustomResourceDefinition: the plugin's
        ``convert(obj, desired_api_version, ctx) -> dict`` turns an object of one version into
        another. Only for a custom resource primary."""
        return cls(WebhookType.CONVERSION)

    def kinds(self, *kinds: Kind) -> Webhook:
        """Calls the webhook for these kinds instead of the primary (a validating or mutating
        webhook only); name the primary too to keep it."""
        return replace(self, kinds_=tuple(kinds))

    def operations(self, *operations: Operation) -> Webhook:
        """Calls the webhook for these operations instead of creates and updates. A mutating
        webhook takes creates and updates only."""
        return replace(self, operations_=tuple(operations))

    def failure_policy(self, policy: FailurePolicy) -> Webhook:
        """What the API server does when a call fails (default: refuse the request)."""
        return replace(self, failure_policy_=policy)

    def timeout(self, seconds: float | datetime.timedelta) -> Webhook:
        """How long the API server waits for an answer: 1 to 30 seconds (default 10)."""
        return replace(self, timeout_seconds=seconds)

    def serves(self, primary: Kind, kind: Kind, operation: Operation) -> bool:
        """Whether the host calls this webhook for a request of ``kind`` doing ``operation``
        (the host's rule: its kinds, else the primary; its operations, else create and update)."""
        kinds = self.kinds_ or (primary,)
        return operation in (self.operations_ or DEFAULT_OPERATIONS) and any(k.same_type(kind) for k in kinds)


@dataclass
class AdmissionRequest:
    """One object's admission, as the API server asks for it. ``object`` and ``old_object`` are
    the plugin's primary type for the primary (as ``reconcile`` gets it), dicts for other kinds.

    In tests, :meth:`create`, :meth:`update` and :meth:`delete` make one from the objects."""

    uid: str
    kind: Kind
    operation: Operation
    namespace: str | None
    name: str
    #: The object as it would be stored; None for a delete.
    object: Any = None
    #: The object as it is stored, for an update and a delete.
    old_object: Any = None
    username: str = "test"
    groups: list[str] = field(default_factory=list)
    #: The request changes nothing (``kubectl apply --dry-run=server``): have no side effects.
    dry_run: bool = False

    @classmethod
    def _about(cls, operation: Operation, obj: dict[str, Any]) -> AdmissionRequest:
        api_version, kind = obj.get("apiVersion"), obj.get("kind")
        if not api_version or not kind:
            raise ValueError(f"an admission request's object has an apiVersion and a kind: {obj!r}")
        group, _, version = api_version.rpartition("/")
        metadata = obj.get("metadata") or {}
        namespace = metadata.get("namespace")
        kind_ref = Kind.namespaced(group, version, kind) if namespace else Kind.cluster(group, version, kind)
        return cls("test-uid", kind_ref, operation, namespace, metadata.get("name", ""))

    @classmethod
    def create(cls, obj: dict[str, Any]) -> AdmissionRequest:
        """The creation of ``obj`` (a dict with ``apiVersion``, ``kind`` and ``metadata``)."""
        return replace(cls._about(Operation.CREATE, obj), object=obj)

    @classmethod
    def update(cls, obj: dict[str, Any], old: dict[str, Any]) -> AdmissionRequest:
        """The update of ``old`` to ``obj``."""
        return replace(cls._about(Operation.UPDATE, obj), object=obj, old_object=old)

    @classmethod
    def delete(cls, old: dict[str, Any]) -> AdmissionRequest:
        """The deletion of ``old``."""
        return replace(cls._about(Operation.DELETE, old), old_object=old)


@dataclass(frozen=True)
class Verdict:
    """A validating webhook's answer: admit or deny, with a message, the field at fault and
    warnings."""

    allowed: bool
    message: str | None = None
    field: str | None = None
    warnings: tuple[str, ...] = ()

    @classmethod
    def allow(cls) -> Verdict:
        """Admits the request."""
        return cls(True)

    @classmethod
    def deny(cls, message: str) -> Verdict:
        """Denies the request with ``message``, in the user's words: ``kubectl`` shows it."""
        return cls(False, message)

    def at(self, field_path: str) -> Verdict:
        """Names the field a denial is about (``spec.html``)."""
        return replace(self, field=field_path)

    def warn(self, warning: str) -> Verdict:
        """Adds a warning for the client, returned whether the request is admitted or not."""
        return replace(self, warnings=(*self.warnings, warning))
