"""The context's reads and log, and how handler failures become errors."""

from dataclasses import dataclass

from wasmop import Config, Context, Error, Kind, Outcome, Phase
from wasmop.testing import FakeHost

CONFIG_MAP = Kind.namespaced("", "v1", "ConfigMap").plural("configmaps")


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
