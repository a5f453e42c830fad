"""wasmop.crd: the schemas of dataclasses with the checks the API server runs itself, and CRDs of
several versions."""

from __future__ import annotations

import enum
from dataclasses import dataclass, field
from typing import Annotated, Any, Literal, Optional

import pytest

from wasmop import Kind
from wasmop.crd import (
    Crd, Description, MaxItems, MaxLength, Maximum, MinItems, MinLength, Minimum, Pattern, Rule, rules, schema_of,
)


class Mode(enum.Enum):
    FAST = "Fast"
    SAFE = "Safe"


@dataclass
class Backend:
    host: Annotated[str, Description("The host.")]
    port: int | None = None


# ANCHOR: spec
@rules(Rule("self.minReplicas <= self.maxReplicas", "minReplicas must not exceed maxReplicas"))
@dataclass
class Spec:
    name: Annotated[str, MinLength(1), MaxLength(63), Pattern("^[a-z][a-z0-9-]*$")]
    min_replicas: Annotated[int, Minimum(0)]
    max_replicas: Annotated[int, Maximum(10)]
    mode: Mode
    backend: Backend
    tags: Annotated[list[str], MinItems(1), MaxItems(5)]
    labels: dict[str, str] = field(default_factory=dict)
    zone: Annotated[str | None, Rule("self == oldSelf", "immutable")] = None
    extra: Any = None
# ANCHOR_END: spec


@dataclass
class Status:
    message: str


@dataclass
class SpecV2:
    backends: list[Backend]


def test_fields_keep_their_shapes_and_checks() -> None:
    spec = schema_of(Spec)
    properties = spec["properties"]
    assert spec["required"] == ["name", "minReplicas", "maxReplicas", "mode", "backend", "tags"]
    assert properties["name"] == {"type": "string", "minLength": 1, "maxLength": 63, "pattern": "^[a-z][a-z0-9-]*$"}
    assert properties["minReplicas"] == {"type": "integer", "minimum": 0}
    assert properties["maxReplicas"] == {"type": "integer", "maximum": 10}
    assert properties["mode"] == {"type": "string", "enum": ["Fast", "Safe"]}
    assert properties["backend"]["properties"]["host"] == {"type": "string", "description": "The host."}
    assert properties["backend"]["properties"]["port"] == {"type": "integer", "nullable": True}
    assert properties["tags"] == {"type": "array", "items": {"type": "string"}, "minItems": 1, "maxItems": 5}
    assert properties["labels"] == {"type": "object", "additionalProperties": {"type": "string"}}
    assert properties["zone"] == {
        "type": "string", "nullable": True, "x-kubernetes-validations": [{"rule": "self == oldSelf", "message": "immutable"}],
    }
    assert properties["extra"] == {"x-kubernetes-preserve-unknown-fields": True}
    assert spec["x-kubernetes-validations"] == [
        {"rule": "self.minReplicas <= self.maxReplicas", "message": "minReplicas must not exceed maxReplicas"},
    ]


def test_a_union_of_several_types_is_refused() -> None:
    with pytest.raises(TypeError, match="a union of several types"):
        schema_of(int | str)


def test_versions_are_served_and_the_hub_stored_with_the_host_s_status_fields() -> None:
    crd = (Crd(Kind.namespaced("example.com", "v1", "Thing"), Spec, Status).version("v2", SpecV2).hub("v2")
           .short_name("th").printer_column("Age", "date", ".metadata.creationTimestamp").to_dict())
    assert crd["metadata"]["name"] == "things.example.com"
    assert crd["spec"]["names"]["shortNames"] == ["th"]
    versions = crd["spec"]["versions"]
    assert [(v["name"], v["served"], v["storage"]) for v in versions] == [("v1", True, False), ("v2", True, True)]
    v1, v2 = (v["schema"]["openAPIV3Schema"] for v in versions)
    assert v1["properties"]["spec"]["properties"]["name"]["minLength"] == 1
    assert v2["properties"]["spec"]["properties"]["backends"]["items"]["required"] == ["host"]
    status = v1["properties"]["status"]
    assert "required" not in status, "a failed reconcile writes no plugin fields"
    assert list(status["properties"]) == ["observedGeneration", "conditions", "message"]
    assert v2["properties"]["status"]["properties"]["conditions"]["x-kubernetes-list-map-keys"] == ["type"]
    assert [c["name"] for c in versions[1]["additionalPrinterColumns"]] == ["Ready", "Age"]


def test_a_hub_that_is_no_version_and_a_version_twice_are_refused() -> None:
    crd = Crd(Kind.namespaced("example.com", "v1", "Thing"), Spec)
    with pytest.raises(ValueError, match="Thing has no version v9"):
        crd.hub("v9")
    with pytest.raises(ValueError, match="Thing already has a version v1"):
        crd.version("v1", SpecV2)


def test_literals_enums_sets_and_docstrings_as_the_rust_sdk_has_them() -> None:
    @dataclass
    class Choices:
        """What may be chosen.

        Each field one way."""

        tier: Literal["gold", "silver"]
        size: Literal[1, 2, 4]
        maybe: Literal["on", "off"] | None = None
        or_none: Literal["a", None] = None
        mode: Optional[Mode] = None
        tags: set[str] = field(default_factory=set)

    schema = schema_of(Choices)
    assert schema["description"] == "What may be chosen.\n\nEach field one way."
    assert schema["required"] == ["tier", "size"]
    properties = schema["properties"]
    assert properties["tier"] == {"type": "string", "enum": ["gold", "silver"]}
    assert properties["size"] == {"type": "integer", "enum": [1, 2, 4]}
    assert properties["maybe"] == {"type": "string", "enum": ["on", "off"], "nullable": True}
    assert properties["orNone"] == {"type": "string", "enum": ["a"], "nullable": True}
    assert properties["mode"] == {"type": "string", "enum": ["Fast", "Safe"], "nullable": True}
    assert properties["tags"] == {"type": "array", "items": {"type": "string"}, "x-kubernetes-list-type": "set"}
    assert "description" not in schema_of(Backend), "a dataclass without a docstring has no description"


def test_a_literal_of_mixed_types_is_refused() -> None:
    with pytest.raises(TypeError, match="not all strings"):
        schema_of(Literal["a", 1])


def test_categories_are_listed_in_the_names() -> None:
    crd = Crd(Kind.namespaced("example.com", "v1", "Thing"), Spec).category("all").to_dict()
    assert crd["spec"]["names"]["categories"] == ["all"]
