"""The Greeting plugin, natively: no cluster, no wasm."""
from app import Greeter

from wasmop import Error
from wasmop.testing import FakeHost


def greeting(spec):
    return {"metadata": {"name": "hello", "namespace": "default", "generation": 1}, "spec": spec}


def test_greets_the_name_and_is_ready():
    run = FakeHost().reconcile(Greeter, greeting({"name": "world"}))
    assert run.status == {"message": "Hello, world!"}
    assert run.readiness == (True, "greeted")


def test_a_greeting_without_a_name_is_invalid():
    assert FakeHost().reconcile(Greeter, greeting({})).error == Error.invalid("spec: missing field `name`")


def test_the_host_caches_only_the_spec():
    assert Greeter.config.projection == ["spec"] and Greeter.config.name == "greeting"
