"""Typed primaries: dataclasses decoded from camelCase JSON, with the path of what is wrong."""

from dataclasses import dataclass, field

import pytest

from wasmop import Config, Error, Kind, Outcome, Resource
from wasmop.testing import FakeHost
from wasmop.typed import DecodeError, decode, encode


@dataclass
class Spec:
    replicas: int
    image_name: str
    ports: list[int] = field(default_factory=list)
    note: str | None = None


@dataclass
class Status:
    ready_replicas: int | None = None


def test_a_resource_decodes_its_metadata_spec_and_status():
    page = decode({"metadata": {"name": "a", "generation": 2, "labels": {"x": "y"}},
                   "spec": {"replicas": 1, "imageName": "nginx", "ports": [80]},
                   "status": {"readyReplicas": 1}}, Resource[Spec, Status])
    assert (page.metadata.name, page.metadata.generation, page.metadata.labels) == ("a", 2, {"x": "y"})
    assert page.spec == Spec(1, "nginx", [80]) and page.status == Status(1)
    assert decode({"spec": {"replicas": 1, "imageName": "x"}}, Resource[Spec]).status is None


@pytest.mark.parametrize("spec, message", [
    ({"imageName": "x"}, "spec: missing field `replicas`"),
    ({"replicas": "1", "imageName": "x"}, "spec.replicas: expected an integer, got a string"),
    ({"replicas": 1, "imageName": "x", "ports": [80, True]}, "spec.ports[1]: expected an integer, got a boolean"),
])
def test_what_does_not_fit_is_named_by_its_path(spec, message):
    with pytest.raises(DecodeError, match=message.replace("[", r"\[").replace("]", r"\]")):
        decode({"spec": spec}, Resource[Spec])


def test_a_primary_that_does_not_decode_is_invalid():
    class Typed:
        config = Config("typed", Kind.namespaced("example.com", "v1", "Thing"))

        def reconcile(self, thing: Resource[Spec], ctx):
            return Outcome.done()

    run = FakeHost().reconcile(Typed, {"metadata": {"name": "a"}, "spec": {}})
    assert run.error == Error.invalid("spec: missing field `replicas`")


def test_dataclasses_encode_in_camel_case_without_none():
    assert encode(Status(ready_replicas=2)) == {"readyReplicas": 2}
    assert encode(Status()) == {}
