"""The Python SDK for wasmop reconciler plugins: Kubernetes controllers that run as sandboxed
WebAssembly components in the wasmop host.

A plugin is a class with a :class:`Config` and a ``reconcile`` handler; the module ends by
exporting it::

    from dataclasses import dataclass
    from wasmop import Config, Context, Kind, Outcome, Resource, export

    @dataclass
    class Spec:
        name: str

    class Greeter:
        config = Config("greeting", Kind.namespaced("example.wasmop.dev", "v1", "Greeting"))

        def reconcile(self, greeting: Resource[Spec], ctx: Context) -> Outcome:
            return Outcome.ready("greeted").status({"message": f"Hello, {greeting.spec.name}!"})

    Reconciler = export(Greeter)

The plugin never talks to the API server: it reads the primary and the host's caches and returns
what it wants written; the host performs every write. ``wasmop.plugin`` lists the optional
handlers; ``wasmop.testing`` runs them natively under pytest, without a cluster or wasm.
"""

from __future__ import annotations

import importlib.util
import sys

from . import conditions
from .config import Config, Filters, RateLimit, Retry, Sharding
from .context import Context, Level
from .crd import Crd
from .diff import Change, changed, diff
from .duration import DurationError, format_duration, format_nanos, parse_duration, parse_nanos
from .dependents import Check, Cleanup, Dependent, DependentState, Desired, Phase
from .errors import Error
from .external import External, ExternalDependent, Polling, Tracked, Tracking
from .grant import HttpGrant, Inbound, Origin, SecretKey
from .kinds import Kind
from .outcome import Event, EventType, Outcome
from .plugin import Plugin
from .quantity import Quantity, QuantityError
from .predicate import EventKind, Predicate
from .refs import PrimaryRef, SecondaryRef
from .resource import ObjectMeta, Resource
from .watch import PRIMARY_NAME_ANNOTATION, PRIMARY_NAMESPACE_ANNOTATION, Mapper, Watch
from .webhook import AdmissionRequest, FailurePolicy, Operation, Verdict, Webhook, WebhookType

__all__ = [
    "PRIMARY_NAME_ANNOTATION", "PRIMARY_NAMESPACE_ANNOTATION", "AdmissionRequest", "Change", "Check", "Cleanup", "Config",
    "Context", "Crd", "Dependent", "DependentState", "Desired", "DurationError", "Error", "Event", "EventKind", "EventType", "External",
    "ExternalDependent", "FailurePolicy", "Filters", "HttpGrant", "Inbound", "Kind", "Level", "Mapper", "ObjectMeta",
    "Operation", "Origin", "Outcome", "Phase", "Polling", "Predicate", "PrimaryRef", "Quantity", "QuantityError", "RateLimit", "Resource", "Retry",
    "SecondaryRef", "SecretKey", "Sharding", "Tracked", "Tracking", "Verdict", "Watch", "Webhook", "WebhookType",
    "changed", "conditions", "diff", "export", "format_duration", "format_nanos", "parse_duration", "parse_nanos",
]


def export(cls: type) -> type:
    """Exports plugin class ``cls`` as the component's ``wasmop:plugin/reconciler`` and
    ``wasmop:plugin/admission`` (the ``operator`` world).

    End the plugin module with ``Reconciler = export(MyPlugin)``: componentize-py looks for
    classes named ``Reconciler`` and ``Admission`` (the exported interfaces) in the module it
    builds. Inside a component build the first is the glue driving ``cls``, returned, and the
    second is set on ``cls``'s module; natively, where there are no generated bindings (pytest),
    ``cls`` is checked and returned as it is.
    """
    if importlib.util.find_spec("wit_world") is None:
        Plugin(cls)  # the same checks the component makes, so tests catch a broken plugin class
        return cls
    from . import component

    component.use_wasi_http()
    sys.modules[cls.__module__].Admission = component.admission(cls)
    return component.reconciler(cls)
