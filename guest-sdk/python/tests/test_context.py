"""The context's reads and log, and how handler failures become errors."""

from dataclasses import dataclass

from wasmop import Config, Context, Error, Kind, Outcome, Phase, Watch
from wasmop.testing import FakeHost

CONFIG_MAP = Kind.namespaced("", "v1", "ConfigMap").plural("configmaps")
SECRET = Kind.namespaced("", "v1", "Secret")


@dataclass
class ConfigMapData:
    data: dict[str, str]


class Reader:
    config = Config("reader", Kind.namespaced("example.com", "v1", "Reader"))

    def reconcile(self, reader: dict, ctx: Context) -> Outcome:
        namespace = reader["metadata"]["namespace"]
        found = ctx.get(CONFIG_MAP, namespace, "settings", into=ConfigMapData)
        listed = ctx.list(CONFIG_MAP, namespace, "app=web")
        owned = ctx.secondaries(CONFIG_MAP)
        ctx.info("read", found=found is not None)
        ready = ctx.dependent("cm") is not None and ctx.dependent("cm").is_ready()
        return Outcome.done().status({"data": found and found.data, "listed": len(listed), "owned": len(owned),
                                      "ready": ready, "attempt": ctx.attempt})


def primary():
    return {"metadata": {"name": "r", "namespace": "ns"}}


def config_map(name, labels=None):
    return {"metadata": {"name": name, "namespace": "ns", "labels": labels or {}}, "data": {"k": "v"}}


def test_reads_come_from_the_host_caches():
    host = (FakeHost().with_object(CONFIG_MAP, config_map("settings"))
            .with_object(CONFIG_MAP, config_map("web", {"app": "web"}))
            .with_secondary(CONFIG_MAP, config_map("owned"))
            .with_dependent_state("cm", Phase.READY, [{}]))
    run = host.reconcile(Reader, primary())
    assert run.status == {"data": {"k": "v"}, "listed": 1, "owned": 1, "ready": True, "attempt": 0}
    assert run.logs[0].fields == {"found": "True"}


def test_a_refused_read_is_transient_and_a_bug_is_transient_naming_the_line():
    run = FakeHost().refusing(CONFIG_MAP).reconcile(Reader, primary())
    assert run.error.kind == "transient" and "not watched" in run.error.message
    run = FakeHost().reconcile(Reader, {"metadata": {}})
    assert run.error.kind == "transient" and run.error.message.startswith("KeyError: 'namespace' (at test_context.py:")


def test_a_handler_raises_errors_as_they_are():
    class Refuser:
        config = Config("refuser", Kind.namespaced("example.com", "v1", "Refuser"))

        def reconcile(self, primary, ctx):
            raise Error.permanent("no")

    assert FakeHost().reconcile(Refuser, primary()).error == Error.permanent("no")


class Projected:
    """Reads its own spec (and status, if given it), a projected ConfigMap and a metadata-only
    Secret, and reports what each held."""

    config = (Config("projected", Kind.namespaced("example.com", "v1", "Thing"))
              .project(["spec.wanted"])
              .watch(Watch(CONFIG_MAP).project(["data.kept"]))
              .watch(Watch(SECRET).metadata_only()))

    def reconcile(self, thing: dict, ctx: Context) -> Outcome:
        config_map = ctx.get(CONFIG_MAP, "ns", "cm") or {}
        listed = ctx.list(CONFIG_MAP, "ns")
        secret = ctx.get(SECRET, "ns", "s") or {}
        return Outcome.done().status({
            "spec": thing.get("spec"), "status": thing.get("status"), "configMap": config_map.get("data"),
            "listed": [m.get("data") for m in listed], "owned": [m.get("data") for m in ctx.secondaries(CONFIG_MAP)],
            "secret": secret.get("data"), "secretLabels": secret["metadata"].get("labels"),
        })


def test_reads_see_objects_cut_to_the_projections_as_the_host_caches_keep_them():
    host = (FakeHost()
            .with_object(CONFIG_MAP, {"metadata": {"name": "cm", "namespace": "ns"},
                                      "data": {"kept": "1", "dropped": "2"}})
            .with_secondary(CONFIG_MAP, {"metadata": {"name": "own", "namespace": "ns"}, "data": {"kept": "3", "x": "4"}})
            .with_object(SECRET, {"metadata": {"name": "s", "namespace": "ns", "labels": {"a": "b"}},
                                  "data": {"password": "c2VjcmV0"}}))
    thing = {"apiVersion": "example.com/v1", "kind": "Thing", "metadata": {"name": "t", "namespace": "ns"},
             "spec": {"wanted": 1, "other": 2}, "status": {"phase": "Up"}}
    run = host.reconcile(Projected, thing)
    assert run.error is None
    assert run.status == {
        "spec": {"wanted": 1},
        # The host keeps the primary's status for its own writes; the plugin does not read it.
        "status": None,
        "configMap": {"kept": "1"},
        "listed": [{"kept": "1"}, {"kept": "3"}],
        "owned": [{"kept": "3"}],
        "secret": None,
        "secretLabels": {"a": "b"},
    }


def test_a_projection_keeps_the_type_the_metadata_and_the_named_paths_as_the_host():
    from wasmop.testing import project

    deployment = {
        "apiVersion": "apps/v1", "kind": "Deployment", "metadata": {"name": "web"},
        "spec": {"replicas": 3, "template": {"spec": {"containers": [{"name": "nginx"}]}}},
        "status": {"readyReplicas": 2, "conditions": [{"type": "Available"}]},
    }
    assert project(deployment, ["spec.replicas", "status.readyReplicas"]) == {
        "apiVersion": "apps/v1", "kind": "Deployment", "metadata": {"name": "web"},
        "spec": {"replicas": 3}, "status": {"readyReplicas": 2},
    }
    # A wider path after a narrower one keeps the rest too; a path into a missing field keeps
    # its parent's object, empty; one that runs into a non-object keeps nothing of it.
    assert project(deployment, ["spec.replicas", "spec", "status.missing", "spec.replicas.deeper"])["spec"] \
        == deployment["spec"]
    assert project(deployment, ["status.missing"])["status"] == {}
    assert project(deployment, ["status.readyReplicas.deeper"])["status"] == {}
    assert project(deployment, []) == {"apiVersion": "apps/v1", "kind": "Deployment", "metadata": {"name": "web"}}
    assert deployment["spec"]["template"], "the object given is not changed"
