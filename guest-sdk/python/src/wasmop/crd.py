"""CustomResourceDefinitions from dataclasses: :class:`Crd`, and the checks the API server runs
itself, declared beside the fields with ``typing.Annotated``.

A field's type says its schema (``str``, ``int``, ``float``, ``bool``, ``list[X]``,
``set[X]`` (a list of distinct items), ``dict[str, X]``, ``X | None`` or ``Optional[X]``, an
:class:`enum.Enum` of strings, ``Literal["a", "b"]``, a dataclass, ``Any``); what it
carries in ``Annotated[...]`` adds to it: :class:`MinLength`, :class:`MaxLength`,
:class:`Pattern`, :class:`Minimum`, :class:`Maximum`, :class:`MinItems`, :class:`MaxItems`,
:class:`Rule` (a CEL rule: ``x-kubernetes-validations``) and :class:`Description`. A dataclass's
own rules are given with :func:`rules`, its description by its docstring. Field names are
written in camelCase, as :mod:`wasmop.typed` reads them; a field without a default, and not
``X | None``, is required. The schemas follow the rules of the Rust SDK's ``Crd``: the same types
give the same structural schema.

>>> from dataclasses import dataclass
>>> from typing import Annotated
>>> @dataclass
... class Spec:
...     html: Annotated[str, MinLength(1), Rule("size(self) <= 1048576", "the HTML must fit in a ConfigMap")]
...     replicas: int | None = None
>>> spec = schema_of(Spec)
>>> spec["properties"]["html"]["minLength"], spec["required"]
(1, ['html'])
>>> spec["properties"]["html"]["x-kubernetes-validations"][0]["rule"]
'size(self) <= 1048576'
>>> spec["properties"]["replicas"]
{'type': 'integer', 'nullable': True}

The CRD of a kind, with a second version whose spec has its own type, the second the hub (the
version stored):

>>> from wasmop import Kind
>>> @dataclass
... class SpecV2:
...     content: Spec
>>> crd = Crd(Kind.namespaced("example.com", "v1", "Page"), Spec).version("v2", SpecV2).hub("v2").to_dict()
>>> [(v["name"], v["served"], v["storage"]) for v in crd["spec"]["versions"]]
[('v1', True, False), ('v2', True, True)]

Return it from the plugin's ``crd`` handler (``crd(self) -> dict``: ``Crd(...).to_dict()``);
``wasmop crd --plugin x.wasm`` prints it as YAML.
"""

import dataclasses
import enum
import inspect
import types
import typing
from dataclasses import dataclass
from typing import Any, Callable, Union

from .kinds import Kind
from .typed import camel

__all__ = [
    "Crd", "Description", "MaxItems", "MaxLength", "Maximum", "MinItems", "MinLength", "Minimum", "Pattern", "Rule",
    "rules", "schema_of",
]


@dataclass(frozen=True)
class MinLength:
    """``minLength``: the fewest characters a string may have."""

    value: int

    def apply(self, schema: dict[str, Any]) -> None:
        """Adds the check to ``schema``."""
        schema["minLength"] = self.value


@dataclass(frozen=True)
class MaxLength:
    """``maxLength``: the most characters a string may have."""

    value: int

    def apply(self, schema: dict[str, Any]) -> None:
        """Adds the check to ``schema``."""
        schema["maxLength"] = self.value


@dataclass(frozen=True)
class Pattern:
    """``pattern``: a regular expression a string must match."""

    regex: str

    def apply(self, schema: dict[str, Any]) -> None:
        """Adds the check to ``schema``."""
        schema["pattern"] = self.regex


@dataclass(frozen=True)
class Minimum:
    """``minimum``: the smallest a number may be."""

    value: int | float

    def apply(self, schema: dict[str, Any]) -> None:
        """Adds the check to ``schema``."""
        schema["minimum"] = self.value


@dataclass(frozen=True)
class Maximum:
    """``maximum``: the largest a number may be."""

    value: int | float

    def apply(self, schema: dict[str, Any]) -> None:
        """Adds the check to ``schema``."""
        schema["maximum"] = self.value


@dataclass(frozen=True)
class MinItems:
    """``minItems``: the fewest items a list may have."""

    value: int

    def apply(self, schema: dict[str, Any]) -> None:
        """Adds the check to ``schema``."""
        schema["minItems"] = self.value


@dataclass(frozen=True)
class MaxItems:
    """``maxItems``: the most items a list may have."""

    value: int

    def apply(self, schema: dict[str, Any]) -> None:
        """Adds the check to ``schema``."""
        schema["maxItems"] = self.value


@dataclass(frozen=True)
class Rule:
    """A CEL rule the API server checks (``x-kubernetes-validations``): ``self`` is the field's
    value (the object's, for a dataclass's own rules, see :func:`rules`); ``message`` is what a
    refusal says."""

    rule: str
    message: "str | None" = None

    def apply(self, schema: dict[str, Any]) -> None:
        """Adds the rule to ``schema``."""
        entry = {"rule": self.rule}
        if self.message is not None:
            entry["message"] = self.message
        schema.setdefault("x-kubernetes-validations", []).append(entry)


@dataclass(frozen=True)
class Description:
    """The field's ``description`` (``kubectl explain`` shows it)."""

    text: str

    def apply(self, schema: dict[str, Any]) -> None:
        """Adds the description to ``schema``."""
        schema["description"] = self.text


_Check = Union[MinLength, MaxLength, Pattern, Minimum, Maximum, MinItems, MaxItems, Rule, Description]


def rules(*declared: Rule) -> Callable[[type], type]:
    """A class decorator giving a dataclass CEL rules about its fields together.

    >>> @rules(Rule("self.low <= self.high", "low must not exceed high"))
    ... @dataclass
    ... class Range:
    ...     low: int
    ...     high: int
    >>> schema_of(Range)["x-kubernetes-validations"]
    [{'rule': 'self.low <= self.high', 'message': 'low must not exceed high'}]
    """

    def decorate(cls: type) -> type:
        cls.__wasmop_rules__ = tuple(declared)  # type: ignore[attr-defined]
        return cls

    return decorate


def schema_of(tp: Any) -> dict[str, Any]:
    """The Kubernetes structural schema of ``tp``, with the checks its ``Annotated`` fields
    declare. Raises :class:`TypeError` for a type it cannot describe."""
    return _schema(tp, "")


def _schema(tp: Any, path: str) -> dict[str, Any]:
    checks: list[_Check] = []
    if typing.get_origin(tp) is typing.Annotated:
        tp, *metadata = typing.get_args(tp)
        checks = [m for m in metadata if hasattr(m, "apply")]
    nullable = False
    origin, args = typing.get_origin(tp), typing.get_args(tp)
    if origin is Union or origin is types.UnionType:
        options = [a for a in args if a is not type(None)]
        if len(options) != 1:
            raise TypeError(f"{path or 'the type'}: a union of several types has no structural schema")
        nullable = len(options) < len(args)
        return _with(_schema(options[0], path), checks, nullable)
    if origin is typing.Literal and None in args:
        return _with(_choice([a for a in args if a is not None], path), checks, True)
    return _with(_plain(tp, origin, args, path), checks, nullable)


def _with(schema: dict[str, Any], checks: list[_Check], nullable: bool) -> dict[str, Any]:
    for check in checks:
        check.apply(schema)
    if nullable:
        schema["nullable"] = True
    return schema


def _plain(tp: Any, origin: Any, args: tuple[Any, ...], path: str) -> dict[str, Any]:
    if tp is Any or tp is object:
        return {"x-kubernetes-preserve-unknown-fields": True}
    scalars = {str: "string", bool: "boolean", int: "integer", float: "number"}
    if tp in scalars:
        return {"type": scalars[tp]}
    cls = origin or tp
    if dataclasses.is_dataclass(cls):
        return _object(cls, path)
    if cls in (list, typing.List):
        return {"type": "array", "items": _schema(args[0] if args else Any, f"{path}[]")}
    if cls in (dict, typing.Dict):
        values = args[1] if len(args) == 2 else Any
        return {"type": "object", "additionalProperties": _schema(values, f"{path}.*")}
    if cls in (set, frozenset, typing.Set, typing.FrozenSet):
        items = _schema(args[0] if args else Any, f"{path}[]")
        return {"type": "array", "items": items, "x-kubernetes-list-type": "set"}
    if isinstance(cls, type) and issubclass(cls, enum.Enum):
        return _choice([member.value for member in cls], path)
    if cls is typing.Literal:
        return _choice(list(args), path)
    raise TypeError(f"{path or 'the type'}: {tp!r} has no structural schema")


def _choice(values: list[Any], path: str) -> dict[str, Any]:
    """The schema of one of ``values`` (an enum's or a ``Literal``'s), all of one JSON type."""
    types_ = {"string" if isinstance(v, str) else "boolean" if isinstance(v, bool)
              else "integer" if isinstance(v, int) else "number" if isinstance(v, float) else None for v in values}
    if len(types_) != 1 or None in types_:
        raise TypeError(f"{path or 'the type'}: the values {values!r} are not all strings, integers, numbers "
                        "or booleans of one type")
    return {"type": types_.pop(), "enum": values}


def _object(cls: type, path: str) -> dict[str, Any]:
    hints = typing.get_type_hints(cls, include_extras=True)
    properties: dict[str, Any] = {}
    required: list[str] = []
    for field in dataclasses.fields(cls):
        name = camel(field.name)
        schema = _schema(hints[field.name], f"{path}.{name}" if path else name)
        properties[name] = schema
        has_default = field.default is not dataclasses.MISSING or field.default_factory is not dataclasses.MISSING
        if not has_default and not schema.get("nullable"):
            required.append(name)
    schema: dict[str, Any] = {"type": "object", "properties": properties}
    doc = _own_doc(cls)
    if doc:
        schema = {"description": doc, **schema}
    if required:
        schema["required"] = required
    for rule in getattr(cls, "__wasmop_rules__", ()):
        rule.apply(schema)
    return schema


def _own_doc(cls: type) -> str | None:
    """The docstring ``cls`` was written with, as one paragraph per blank line (None when it has
    none: a dataclass's ``__doc__`` is its signature then)."""
    doc = cls.__dict__.get("__doc__")
    if not doc or doc.startswith(f"{cls.__name__}("):
        return None
    return inspect.cleandoc(doc)


def _conditions() -> dict[str, Any]:
    def string(description: str) -> dict[str, Any]:
        return {"type": "string", "description": description}

    return {
        "type": "array",
        "description": "The conditions: the host's (Ready, Degraded) and any other controller's.",
        "x-kubernetes-list-type": "map",
        "x-kubernetes-list-map-keys": ["type"],
        "items": {
            "type": "object",
            "required": ["type", "status"],
            "properties": {
                "type": string("The condition's type, e.g. Ready."),
                "status": {"type": "string", "enum": ["True", "False", "Unknown"]},
                "reason": string("Why, in CamelCase."), "message": string("Why, for a person."),
                "lastTransitionTime": {"type": "string", "format": "date-time"},
                "observedGeneration": {"type": "integer", "format": "int64"},
            },
        },
    }


def _status(tp: Any) -> dict[str, Any]:
    """The status schema of ``tp`` (None: the host's fields only), none of its fields required:
    the host writes a status without the plugin's fields when a reconcile fails."""
    status = {"type": "object", "properties": {}} if tp is None else schema_of(tp)
    status.pop("required", None)
    host = {
        "observedGeneration": {"type": "integer", "format": "int64",
                               "description": "The metadata.generation the host last reconciled (written by the host)."},
        "conditions": _conditions(),
    }
    status["properties"] = {**host, **status.get("properties", {})}
    return status


class Crd:
    """The CustomResourceDefinition (``apiextensions.k8s.io/v1``) of a primary kind, from the
    dataclasses of its spec and status, with the status subresource and a ``Ready`` printer
    column; each :meth:`version` has its own types, every one is served and the :meth:`hub`
    (the first, unless named) is stored."""

    def __init__(self, kind: Kind, spec: Any, status: Any = None) -> None:
        self.kind = kind
        self._versions: list[tuple[str, dict[str, Any], dict[str, Any]]] = []
        self._hub = kind.version
        self._columns: list[dict[str, str]] = [
            {"name": "Ready", "type": "string", "jsonPath": '.status.conditions[?(@.type=="Ready")].status'},
        ]
        self._short_names: list[str] = []
        self._categories: list[str] = []
        self.version(kind.version, spec, status)

    def version(self, name: str, spec: Any, status: Any = None) -> "Crd":
        """Adds the version ``name`` of the kind, whose spec is ``spec`` and status ``status``."""
        if any(version == name for version, _, _ in self._versions):
            raise ValueError(f"{self.kind.kind} already has a version {name}")
        self._versions.append((name, schema_of(spec), _status(status)))
        return self

    def hub(self, name: str) -> "Crd":
        """Makes the version ``name`` the hub: the one the API server stores."""
        if not any(version == name for version, _, _ in self._versions):
            raise ValueError(f"{self.kind.kind} has no version {name}")
        self._hub = name
        return self

    def printer_column(self, name: str, type_: str, json_path: str) -> "Crd":
        """Adds a printer column to every version (``kubectl get`` shows it)."""
        self._columns.append({"name": name, "type": type_, "jsonPath": json_path})
        return self

    def short_name(self, name: str) -> "Crd":
        """Adds a short name (``kubectl get hi``)."""
        self._short_names.append(name)
        return self

    def category(self, name: str) -> "Crd":
        """Adds a category (``kubectl get all`` lists the kinds of category ``all``)."""
        self._categories.append(name)
        return self

    def to_dict(self) -> dict[str, Any]:
        """The CustomResourceDefinition as a dict, for the plugin's ``crd`` handler."""
        kind = self.kind
        singular = kind.kind.lower()
        plural = kind.plural_name or f"{singular}s"
        names: dict[str, Any] = {"kind": kind.kind, "listKind": f"{kind.kind}List", "plural": plural,
                                 "singular": singular}
        if self._short_names:
            names["shortNames"] = list(self._short_names)
        if self._categories:
            names["categories"] = list(self._categories)
        versions = [
            {
                "name": name, "served": True, "storage": name == self._hub,
                "subresources": {"status": {}}, "additionalPrinterColumns": list(self._columns),
                "schema": {"openAPIV3Schema": {"type": "object", "required": ["spec"],
                                               "properties": {"spec": spec, "status": status}}},
            }
            for name, spec, status in self._versions
        ]
        return {
            "apiVersion": "apiextensions.k8s.io/v1",
            "kind": "CustomResourceDefinition",
            "metadata": {"name": f"{plural}.{kind.group}"},
            "spec": {"group": kind.group, "names": names, "scope": "Namespaced" if kind.is_namespaced else "Cluster",
                     "versions": versions},
        }
