"""wasmop.testing.FakeHost.run_until_stable: the whole loop of a built component by the host's
rules, through `wasmop test` (the Rust build of the conformance plugin: the loop does not care
which language a component was written in)."""

from pathlib import Path

import pytest

from wasmop import External, Kind
from wasmop.testing import FakeHost

COMPONENT = Path(__file__).resolve().parents[3] / "plugins" / "dist" / "fixture-conform.wasm"
CONFIG_MAP = Kind.namespaced("", "v1", "ConfigMap").plural("configmaps")


def scenario(external):
    return {"metadata": {"name": "ext", "namespace": "default", "generation": 1}, "spec": {"external": external}}


def test_an_external_object_is_created_tracked_and_kept_in_the_fake_host():
    host = FakeHost()
    stable = host.run_until_stable(COMPONENT, scenario({"www": "v1"}))
    [record] = stable.external
    assert (record.dependent, record.key, record.id, record.object["value"]) == ("records", "www", "fake-1", "v1")
    tracking = [c for c in stable.objects(CONFIG_MAP) if c["metadata"]["name"] == "ext-conform-ext"]
    assert '"www"' in tracking[0]["data"]["records"], "the ID is tracked in a ConfigMap owned by the primary"
    assert stable.condition("Ready")["status"] == "True"
    assert host.external == stable.external, "the fake host keeps the external system"

    # A later run continues from there: a record no longer desired is deleted.
    stable = host.run_until_stable(COMPONENT, {**stable.primary, "spec": {"external": {}}})
    assert stable.external == [] and host.external == []


def test_an_external_object_changed_by_hand_is_applied_in_place():
    host = FakeHost()
    host.external.append(External("records", "www", {"value": "changed by hand"}))
    stable = host.run_until_stable(COMPONENT, scenario({"www": "v1"}))
    [record] = stable.external
    assert (record.id, record.object["value"]) == ("existing-www", "v1")


def test_a_component_that_is_missing_is_named():
    with pytest.raises(RuntimeError, match="absent.wasm"):
        FakeHost().run_until_stable(COMPONENT.with_name("absent.wasm"), scenario({}))
