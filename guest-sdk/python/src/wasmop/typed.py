"""JSON objects as typed Python values and back: dataclasses whose snake_case fields match the
camelCase keys Kubernetes uses (``ready_replicas`` reads ``readyReplicas``).

:func:`decode` checks as it goes and says where a value does not fit; :func:`encode` turns
dataclasses (and enums) back into plain JSON values.
"""

from __future__ import annotations

import dataclasses
import functools
import enum
import types
import typing
from typing import Any, TypeVar, Union

T = TypeVar("T")


class DecodeError(ValueError):
    """A JSON value that does not fit the type; the message names the path, like
    ``spec: missing field `html```."""


def camel(name: str) -> str:
    """``ready_replicas`` → ``readyReplicas``."""
    head, *rest = name.split("_")
    return head + "".join(part[:1].upper() + part[1:] for part in rest)


def _at(path: str, message: str) -> DecodeError:
    return DecodeError(f"{path}: {message}" if path else message)


def _join(path: str, key: str) -> str:
    return f"{path}.{key}" if path else key


def _describe(tp: Any) -> str:
    names = {bool: "a boolean", int: "an integer", float: "a number", str: "a string",
             list: "a list", dict: "an object"}
    return names.get(typing.get_origin(tp) or tp, getattr(tp, "__name__", str(tp)))


def decode(value: Any, tp: Any, path: str = "") -> Any:
    """``value`` (parsed JSON) as ``tp``: a dataclass (generic ones too), ``list[X]``,
    ``dict[str, X]``, ``X | None``, an :class:`enum.Enum`, ``str``, ``int``, ``float``, ``bool``,
    ``dict``/``list``/``Any`` (taken as they are). A missing field takes its default, or None
    when its type allows it; unknown keys are ignored. Raises :class:`DecodeError`."""
    if tp is Any or tp is object:
        return value
    origin, args = typing.get_origin(tp), typing.get_args(tp)
    if origin is Union or origin is types.UnionType:
        if value is None and type(None) in args:
            return None
        options = [a for a in args if a is not type(None)]
        errors = []
        for option in options:
            try:
                return decode(value, option, path)
            except DecodeError as e:
                errors.append(str(e))
        raise DecodeError(errors[0] if len(errors) == 1 else "; ".join(errors))
    cls = origin or tp
    if dataclasses.is_dataclass(cls):
        return _decode_dataclass(value, cls, args, path)
    expected = _describe(tp)
    if cls in (list, typing.List):
        if not isinstance(value, list):
            raise _at(path, f"expected {expected}, got {_json_type(value)}")
        item = args[0] if args else Any
        return [decode(v, item, f"{path}[{i}]") for i, v in enumerate(value)]
    if cls in (dict, typing.Dict):
        if not isinstance(value, dict):
            raise _at(path, f"expected {expected}, got {_json_type(value)}")
        item = args[1] if len(args) == 2 else Any
        return {k: decode(v, item, _join(path, k)) for k, v in value.items()}
    if isinstance(cls, type) and issubclass(cls, enum.Enum):
        try:
            return cls(value)
        except ValueError:
            raise _at(path, f"{value!r} is not one of {[m.value for m in cls]}") from None
    if _fits(value, cls):
        return float(value) if cls is float else value
    raise _at(path, f"expected {expected}, got {_json_type(value)}")


def _fits(value: Any, cls: Any) -> bool:
    if cls is float:
        return isinstance(value, (int, float)) and not isinstance(value, bool)
    if cls is int:
        return isinstance(value, int) and not isinstance(value, bool)
    return isinstance(value, cls)


def _json_type(value: Any) -> str:
    if value is None:
        return "null"
    return _describe(type(value))


@functools.cache
def _hints(cls: type) -> dict[str, Any]:
    """The resolved annotations of ``cls``, once per class: resolving them is most of a decode's
    time, and a kept instance decodes the same types call after call."""
    return typing.get_type_hints(cls)


def _decode_dataclass(value: Any, cls: type, args: tuple, path: str) -> Any:
    if not isinstance(value, dict):
        raise _at(path, f"expected an object ({cls.__name__}), got {_json_type(value)}")
    hints = _hints(cls)
    bound = dict(zip(getattr(cls, "__parameters__", ()), args))
    values = {}
    for f in dataclasses.fields(cls):
        if not f.init:
            continue
        tp = hints[f.name]
        tp = bound.get(tp, tp) if isinstance(tp, TypeVar) else _substitute(tp, bound)
        key = f.name if f.name in value else camel(f.name)
        if key in value:
            values[f.name] = decode(value[key], tp, _join(path, key))
        elif f.default is dataclasses.MISSING and f.default_factory is dataclasses.MISSING:
            if not _optional(tp):
                raise _at(path, f"missing field `{camel(f.name)}`")
            values[f.name] = None
    return cls(**values)


def _substitute(tp: Any, bound: dict) -> Any:
    """``tp`` with the type variables of a generic dataclass replaced by their arguments."""
    if not bound or not getattr(tp, "__parameters__", ()):
        return tp
    return tp[tuple(bound.get(p, Any) for p in tp.__parameters__)]


def _optional(tp: Any) -> bool:
    return tp is Any or type(None) in typing.get_args(tp)


def encode(value: Any) -> Any:
    """``value`` as plain JSON values: dataclass fields become camelCase keys (None fields are
    left out, so a status patch never clears what it does not name), enums their values."""
    if dataclasses.is_dataclass(value) and not isinstance(value, type):
        return {camel(f.name): encode(getattr(value, f.name)) for f in dataclasses.fields(value)
                if getattr(value, f.name) is not None}
    if isinstance(value, enum.Enum):
        return value.value
    if isinstance(value, dict):
        return {k: encode(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [encode(v) for v in value]
    return value
