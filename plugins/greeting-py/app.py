"""A status-only plugin: greets spec.name in status.message; the host keeps Ready."""
from dataclasses import dataclass

from wasmop import Config, Context, Kind, Outcome, Resource, export


@dataclass
class Spec:
    name: str  # whom to greet


class Greeter:
    # The host caches only what the plugin reads: the spec (and the status it keeps).
    config = Config("greeting", Kind.namespaced("example.wasmop.dev", "v1", "Greeting")).project(["spec"])

    def reconcile(self, greeting: Resource[Spec], ctx: Context) -> Outcome:
        return Outcome.ready("greeted").status({"message": f"Hello, {greeting.spec.name}!"})


Reconciler = export(Greeter)
