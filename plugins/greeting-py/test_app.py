"""The Greeting plugin, natively: no cluster, no wasm."""
from pathlib import Path

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


# The whole loop: the built component (plugins/dist/greeting-py.wasm, `make plugins`) under the
# host's own rules, as the Rust greeting's FakeHost test runs it.
COMPONENT = Path(__file__).parent.parent / "dist" / "greeting-py.wasm"


def test_the_whole_loop_greets_and_is_ready_for_the_current_generation():
    stable = FakeHost().run_until_stable(COMPONENT, {**greeting({"name": "Ada"}), "metadata": {
        "name": "hi", "namespace": "default", "generation": 2}})
    assert stable.status["message"] == "Hello, Ada!"
    assert stable.status["observedGeneration"] == 2
    ready = stable.condition("Ready")
    assert (ready["status"], ready["message"], ready["observedGeneration"]) == ("True", "greeted", 2)
    assert stable.condition("Degraded")["status"] == "False"
    assert len(stable.passes) == 2, "a second reconcile writes nothing"


def test_the_whole_loop_of_a_greeting_without_a_name_is_invalid_and_degraded():
    stable = FakeHost().run_until_settled(COMPONENT, greeting({}))
    assert stable.error == ("invalid", "spec: missing field `name`")
    assert stable.condition("Degraded")["status"] == "True"
    assert stable.condition("Ready")["reason"] == "InvalidResource"
