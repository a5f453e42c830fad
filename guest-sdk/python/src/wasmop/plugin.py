"""A plugin class as the host drives it: :class:`Plugin` decodes what the host sends, calls the
class's handlers, and checks what they return. Shared by the component glue
(``wasmop.component``) and ``wasmop.testing``, so tests run the code the host runs.

A plugin is a class with a ``config`` attribute (a :class:`~wasmop.Config`) and a ``reconcile``
method; every other handler is optional, with the Rust SDK's defaults:

=============================================  ==================================================
``reconcile(primary, ctx) -> Outcome``         required
``desired(primary, ctx) -> list[Desired]``     none; called before ``reconcile`` with dependents
``cleanup(primary, ctx) -> Cleanup``           defining it gives the primaries a finalizer
``error_status(primary, error, ctx) -> dict``  None: the status is left alone
``check(name, primary, dependent, ctx)``       False (``Check.plugin``)
``filter(name, event, object, old)``           True (``Predicate.plugin``)
``map_secondary(secondary, previous, ctx)``    an error (``Watch.mapped_by_plugin``)
``secondaries_of(primary, ctx)``               none (``Watch.referenced_by_primary``)
``fetch(primary, tracked, ctx)``               an error (``Polling.per_resource``)
``fetch_all(ctx)``                             an error (``Polling.global_``)
``apply_external(primary, desired, actual,     an error (``ExternalDependent``)
ctx)`` / ``delete_external(primary, actual,
ctx)``
``map_inbound(payload, ctx)``                  an error (``Inbound``)
``crd() -> dict``                              None: the CRD is written by hand
``validate(request, ctx) -> Verdict``          required by a ``Webhook.validating()``
``default(obj, ctx)``                          required by a ``Webhook.mutating()``: fills in the
                                               primary's defaults in place
``default_other(obj, ctx)``                    a denial: the same for the other kinds the
                                               mutating webhook names (``obj`` a dict)
``convert(obj, desired_api_version, ctx)``     required by a ``Webhook.conversion()``: returns
                                               ``obj`` (a dict) in the other version of the CRD
=============================================  ==================================================

The primary arrives as the type annotated on ``reconcile``'s first parameter: a dataclass such
as ``Resource[Spec]``, or a dict when it has none. One that does not decode fails the call as
invalid, naming the field at fault.

``default`` and ``default_other`` deny the request by raising :class:`~wasmop.Error` (its message
is the denial's); any other exception fails the call, and the webhook's failure policy decides.
``convert`` fails the conversion with the message of whatever it raises.
"""

from __future__ import annotations

import inspect
import json
import traceback
import typing
from typing import Any, Callable

from .config import Config
from .context import Context
from .dependents import Cleanup, Desired
from .errors import Error
from .external import External, Tracked
from .outcome import Outcome
from .predicate import EventKind
from .refs import PrimaryRef, SecondaryRef
from .typed import DecodeError, decode, encode
from .webhook import AdmissionRequest, Verdict, WebhookType

#: The handler each type of webhook calls.
_HANDLERS = {WebhookType.VALIDATING: "validate(self, request, ctx)", WebhookType.MUTATING: "default(self, obj, ctx)",
             WebhookType.CONVERSION: "convert(self, obj, desired_api_version, ctx)"}


def failure(exception: BaseException) -> Error:
    """``exception`` as an :class:`Error`; an unexpected one is transient and names the line of
    the plugin that raised it."""
    if isinstance(exception, Error):
        return exception
    frames = traceback.extract_tb(exception.__traceback__)
    where = f" (at {frames[-1].filename.rsplit('/', 1)[-1]}:{frames[-1].lineno})" if frames else ""
    return Error.transient(f"{type(exception).__name__}: {exception}{where}")


def _primary_type(cls: type) -> Any:
    """The type annotated on the first parameter of ``cls.reconcile``, or None for a dict."""
    parameters = list(inspect.signature(cls.reconcile).parameters)
    if len(parameters) < 2:
        raise TypeError(f"{cls.__name__}.reconcile must take (self, primary, ctx)")
    hint = typing.get_type_hints(cls.reconcile).get(parameters[1])
    return None if hint in (None, dict, Any) or typing.get_origin(hint) is dict else hint


class Plugin:
    """Drives one plugin class: an instance of it, its config, and its primary's type."""

    def __init__(self, cls: type):
        config = getattr(cls, "config", None)
        if not isinstance(config, Config):
            raise TypeError(f"{cls.__name__}.config must be a wasmop.Config, got {config!r}")
        if not callable(getattr(cls, "reconcile", None)):
            raise TypeError(f"{cls.__name__} must define reconcile(self, primary, ctx)")
        self.config = config
        self.instance = cls()
        self.primary_type = _primary_type(cls)
        #: Whether the class defines ``cleanup``: then the host gives its primaries a finalizer.
        self.cleans = callable(getattr(cls, "cleanup", None))
        self._check_webhooks(cls)

    def _check_webhooks(self, cls: type) -> None:
        """Refuses webhooks the class cannot serve, as the host refuses the component."""
        types = [w.webhook_type for w in self.config.webhooks]
        for webhook_type in set(types):
            if types.count(webhook_type) > 1:
                raise TypeError(f"plugin {self.config.name} declares two {webhook_type.value} webhooks: one per type")
        for webhook_type in types:
            handler = _HANDLERS[webhook_type]
            if not callable(getattr(cls, handler.split("(")[0], None)):
                raise TypeError(f"plugin {self.config.name} declares a {webhook_type.value} webhook but does not "
                                f"implement {handler}")

    def _handler(self, name: str) -> Callable[..., Any] | None:
        return getattr(self.instance, name, None)

    def _missing(self, handler: str, because: str) -> Error:
        return Error.permanent(f"plugin {self.config.name} {because} but does not implement {handler}")

    def primary(self, text: str) -> Any:
        """The primary's JSON text as the plugin's primary type; an invalid :class:`Error`."""
        try:
            value = json.loads(text)
            return value if self.primary_type is None else decode(value, self.primary_type)
        except (ValueError, DecodeError) as e:
            raise Error.invalid(str(e)) from None

    def _call(self, name: str, *args: Any) -> Any:
        try:
            return getattr(self.instance, name)(*args)
        except Exception as e:  # noqa: BLE001 - every failure of a handler is a failed reconcile
            raise failure(e) from e

    def reconcile(self, text: str, ctx: Context) -> Outcome:
        """``reconcile`` on the primary's JSON text."""
        outcome = self._call("reconcile", self.primary(text), ctx)
        if not isinstance(outcome, Outcome):
            raise Error.permanent(f"reconcile must return an Outcome, got {outcome!r}")
        return outcome

    def desired(self, text: str, ctx: Context) -> list[Desired]:
        """``desired`` on the primary's JSON text; none when the plugin has no ``desired``."""
        if self._handler("desired") is None:
            return []
        desired = list(self._call("desired", self.primary(text), ctx) or ())
        wrong = [d for d in desired if not isinstance(d, Desired)]
        if wrong:
            raise Error.permanent(f"desired must return Desired objects, got {wrong[0]!r}")
        return desired

    def cleanup(self, text: str, ctx: Context) -> Cleanup:
        """``cleanup`` on the primary's JSON text; releases when the plugin has none."""
        if not self.cleans:
            return Cleanup.done()
        cleanup = self._call("cleanup", self.primary(text), ctx)
        if not isinstance(cleanup, Cleanup):
            raise Error.permanent(f"cleanup must return a Cleanup, got {cleanup!r}")
        return cleanup

    def error_status(self, text: str, error: Error, ctx: Context) -> dict[str, Any] | None:
        """``error_status`` after ``error``: a JSON object, or None (no handler, a primary that
        does not decode, or something that is not an object, which is logged)."""
        if self._handler("error_status") is None:
            return None
        try:
            status = encode(self._call("error_status", self.primary(text), error, ctx))
        except Error as e:
            ctx.error(f"error_status failed: {e}; the status is left alone")
            return None
        if status is not None and not isinstance(status, dict):
            ctx.error(f"error_status must return a JSON object, got {status!r}; the status is left alone")
            return None
        return status

    def check(self, name: str, primary: str, dependent: str | None, ctx: Context) -> bool:
        """``check``: False when there is none, or the primary or the dependent does not decode."""
        if self._handler("check") is None:
            return False
        try:
            decoded = self.primary(primary)
            other = None if dependent is None else json.loads(dependent)
        except (Error, ValueError):
            return False
        return bool(self._call("check", name, decoded, other, ctx))

    def filter(self, name: str, event: EventKind, obj: str, old: str | None) -> bool:
        """``filter``: True when there is none; an object that is not JSON does not pass."""
        if self._handler("filter") is None:
            return True
        try:
            new_object = json.loads(obj)
            old_object = None if old is None else json.loads(old)
        except ValueError:
            return False
        return bool(self._call("filter", name, event, new_object, old_object))

    def map_secondary(self, secondary: str, previous: str | None, ctx: Context) -> list[PrimaryRef]:
        """``map_secondary`` on JSON text."""
        if self._handler("map_secondary") is None:
            raise self._missing("map_secondary", "declares a watch with the plugin mapper")
        try:
            objects = (json.loads(secondary), None if previous is None else json.loads(previous))
        except ValueError as e:
            raise Error.invalid(f"the secondary is not JSON: {e}") from None
        return list(self._call("map_secondary", *objects, ctx))

    def secondaries_of(self, text: str, ctx: Context) -> list[SecondaryRef]:
        """``secondaries_of`` on the primary's JSON text; none when the plugin has none."""
        if self._handler("secondaries_of") is None:
            return []
        return list(self._call("secondaries_of", self.primary(text), ctx))

    def fetch(self, text: str, tracked: Tracked, ctx: Context) -> list[External]:
        """``fetch`` on the primary's JSON text."""
        if self._handler("fetch") is None:
            raise self._missing("fetch", "polls per resource")
        return list(self._call("fetch", self.primary(text), tracked, ctx))

    def fetch_all(self, ctx: Context) -> list[tuple[PrimaryRef, list[External]]]:
        """``fetch_all``."""
        if self._handler("fetch_all") is None:
            raise self._missing("fetch_all", "polls globally")
        return [(ref, list(objects)) for ref, objects in self._call("fetch_all", ctx)]

    def apply_external(self, text: str, desired: External, actual: External | None, ctx: Context) -> External:
        """``apply_external`` on the primary's JSON text."""
        if self._handler("apply_external") is None:
            raise self._missing("apply_external", "declares external dependents")
        return self._call("apply_external", self.primary(text), desired, actual, ctx)

    def delete_external(self, text: str, actual: External, ctx: Context) -> None:
        """``delete_external`` on the primary's JSON text."""
        if self._handler("delete_external") is None:
            raise self._missing("delete_external", "declares external dependents")
        self._call("delete_external", self.primary(text), actual, ctx)

    def map_inbound(self, payload: str, ctx: Context) -> list[PrimaryRef]:
        """``map_inbound`` on the payload's JSON text."""
        if self._handler("map_inbound") is None:
            raise self._missing("map_inbound", "accepts inbound events")
        try:
            decoded = json.loads(payload)
        except ValueError as e:
            raise Error.invalid(f"the payload is not JSON: {e}") from None
        return list(self._call("map_inbound", decoded, ctx))

    def validate(self, request: AdmissionRequest, ctx: Context) -> Verdict:
        """``validate`` on a request whose objects are JSON text: decoded as the primary type for
        the primary's kind (a primary that does not decode is denied, naming the field at fault),
        as dicts for other kinds. An exception in the handler fails the call: the webhook's
        failure policy decides."""
        is_primary = (request.kind.group, request.kind.kind) == (self.config.primary.group, self.config.primary.kind)
        try:
            objects = [None if text is None else json.loads(text) for text in (request.object, request.old_object)]
            if is_primary and self.primary_type is not None:
                objects = [None if o is None else decode(o, self.primary_type) for o in objects]
        except (ValueError, DecodeError) as e:
            return Verdict.deny(str(e))
        typed = AdmissionRequest(request.uid, request.kind, request.operation, request.namespace, request.name,
                                 objects[0], objects[1], request.username, list(request.groups), request.dry_run)
        verdict = self.instance.validate(typed, ctx)
        if not isinstance(verdict, Verdict):
            raise TypeError(f"validate must return a Verdict, got {verdict!r}")
        return verdict

    def _is_primary(self, kind: Any) -> bool:
        return (kind.group, kind.kind) == (self.config.primary.group, self.config.primary.kind)

    def default(self, request: AdmissionRequest, ctx: Context) -> str:
        """``default`` (``default_other`` for another kind) on a request whose objects are JSON
        text: the object as it should be stored, as JSON text. Only what the handler changed in
        the typed primary is changed in the object sent, so fields its type does not know are
        kept. Raises :class:`Error` to deny (the handler's, or a primary that does not decode);
        anything else the handler raises fails the call."""
        if request.object is None:
            raise Error.invalid(f"a {request.operation.value} request has no object to default")
        try:
            sent = json.loads(request.object)
        except ValueError as e:
            raise Error.invalid(f"the object is not JSON: {e}") from None
        if not self._is_primary(request.kind):
            if self._handler("default_other") is None:
                raise Error.permanent(f"plugin {self.config.name} does not implement default_other")
            self.instance.default_other(sent, ctx)
            return json.dumps(sent)
        if self.primary_type is None:
            self.instance.default(sent, ctx)
            return json.dumps(sent)
        try:
            typed = decode(sent, self.primary_type)
        except DecodeError as e:
            raise Error.invalid(str(e)) from None
        before = encode(typed)
        self.instance.default(typed, ctx)
        apply_changes(sent, before, encode(typed))
        return json.dumps(sent)

    def convert(self, objects: list[str], desired_api_version: str, ctx: Context) -> list[str]:
        """``convert`` on each object (JSON text) not already of ``desired_api_version``, in
        order; each converted one gets it as its ``apiVersion``. Raises :class:`Error` naming
        what failed."""
        converted = []
        for text in objects:
            try:
                obj = json.loads(text)
            except ValueError as e:
                raise Error.invalid(f"an object to convert is not JSON: {e}") from None
            if obj.get("apiVersion") != desired_api_version:
                try:
                    obj = self.instance.convert(obj, desired_api_version, ctx)
                except Exception as e:  # noqa: BLE001 - every failure fails the conversion, saying why
                    raise Error.permanent(e.message if isinstance(e, Error) else f"{type(e).__name__}: {e}") from None
                if not isinstance(obj, dict):
                    raise Error.permanent(f"the conversion to {desired_api_version} did not give an object: {obj!r}")
                obj["apiVersion"] = desired_api_version
            converted.append(json.dumps(obj))
        return converted

    def crd(self) -> dict[str, Any] | None:
        """The plugin's CRD as a dict, or None."""
        return self._call("crd") if self._handler("crd") is not None else None


def apply_changes(target: Any, before: Any, after: Any) -> None:
    """Makes in ``target`` (a dict) the changes that turn ``before`` into ``after``, as a JSON
    merge patch from one to the other would: changed values are set, fields that went are
    removed, and what did not change, or what ``before`` never had, is left as ``target`` has it.

    >>> sent = {"spec": {"html": "x", "unknown": 1}}
    >>> apply_changes(sent, {"spec": {"html": "x"}}, {"spec": {"html": "x", "exposed": False}})
    >>> sent
    {'spec': {'html': 'x', 'unknown': 1, 'exposed': False}}
    """
    for key, now in after.items():
        was = before.get(key, _ABSENT)
        if was == now:
            continue
        if isinstance(was, dict) and isinstance(now, dict) and isinstance(target.get(key), dict):
            apply_changes(target[key], was, now)
        else:
            target[key] = now
    for key in before.keys() - after.keys():
        target.pop(key, None)


_ABSENT = object()
