"""The whole reconcile loop of a built plugin, by the host's own rules: :func:`settle` runs the
component through ``wasmop test --output json`` (the loop of the host's rules crate, the one the
Rust SDK's ``FakeHost.run_until_stable`` runs) and returns the store as it ended (:class:`Stable`).

Each pass does what the host does for one reconcile: ``desired``, the capability checks, the
dependents' workflow (order, skips, deletes, readiness), ``reconcile`` with the dependents'
states, then the writes: labels and annotations, and the status with ``observedGeneration`` and
the host's conditions (``Ready``, ``Reconciling``, ``Degraded``). Passes repeat until one leaves the
store as it was. No cluster and no network: ``wasmop`` (on ``PATH``, or the file ``$WASMOP``
names) runs the component in its sandbox. The component is compiled on its first run and kept in
wasmop's module cache, so later runs of the same build take a fraction of a second.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import tempfile
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Sequence

from .external import External
from .kinds import Kind

__all__ = ["Stable", "settle", "wasmop_binary"]


def wasmop_binary() -> str:
    """The ``wasmop`` binary: the file ``$WASMOP`` names, else ``wasmop`` on ``PATH``; raises
    :class:`FileNotFoundError` naming both when there is none."""
    named = os.environ.get("WASMOP")
    if named:
        if not Path(named).is_file():
            raise FileNotFoundError(f"$WASMOP names {named}, which does not exist")
        return named
    found = shutil.which("wasmop")
    if found is None:
        raise FileNotFoundError("the whole loop runs the component through `wasmop test`: put wasmop on PATH or "
                                "name it in $WASMOP")
    return found


def _kind_of(ref: dict[str, Any]) -> Kind:
    """A kind as ``wasmop test`` prints it."""
    make = Kind.namespaced if ref.get("namespaced", True) else Kind.cluster
    kind = make(ref.get("group", ""), ref["version"], ref["kind"])
    return kind.plural(ref["plural"]) if ref.get("plural") else kind


def _kind_spec(kind: Kind) -> dict[str, str]:
    """A kind as a fixture names it."""
    return {"group": kind.group, "version": kind.version, "kind": kind.kind,
            "plural": kind.plural_name or f"{kind.kind.lower()}s"}


@dataclass
class Stable:
    """Where the loop ended: every pass as ``wasmop test`` shows it (its ``writes``, ``events``,
    ``requeueMs`` and ``error``), the primary, every object of the store and the external
    system's objects."""

    passes: list[dict[str, Any]]
    primary: dict[str, Any]
    stored: list[tuple[Kind, dict[str, Any]]]
    external: list[External]

    @property
    def last(self) -> dict[str, Any]:
        """The last pass."""
        return self.passes[-1]

    @property
    def error(self) -> tuple[str, str] | None:
        """How the last pass failed: ``(kind, message)``, kind ``transient``, ``permanent`` or
        ``invalid``; None when it did not."""
        error = self.last.get("error")
        return None if error is None else next(iter(error.items()))

    @property
    def status(self) -> dict[str, Any] | None:
        """The primary's ``.status`` as the store holds it."""
        return self.primary.get("status")

    def condition(self, type_: str) -> dict[str, Any] | None:
        """The primary's condition of type ``type_``, if any."""
        return next((c for c in (self.status or {}).get("conditions") or [] if c.get("type") == type_), None)

    def objects(self, kind: Kind) -> list[dict[str, Any]]:
        """The stored objects of ``kind``, sorted by namespace and name."""
        found = [o for k, o in self.stored if k.same_type(kind)]
        return sorted(found, key=lambda o: ((o["metadata"].get("namespace") or ""), o["metadata"].get("name") or ""))


def settle(component: str | os.PathLike[str], primary: dict[str, Any], objects: list[tuple[Kind, dict[str, Any]]],
           external: Sequence[External] = (), namespace: str = "default") -> Stable:
    """Runs the built plugin ``component`` (a ``.wasm`` file) on ``primary`` among ``objects``,
    the external system holding ``external``, until a pass changes nothing, as the host would;
    the primary and objects without a namespace are in ``namespace``. The external system plays
    the service: it keeps what the plugin applies (an object it creates gets the ID ``fake-N``,
    one given here ``existing-KEY``) and deletes what the plugin deletes. Raises
    :class:`RuntimeError` with wasmop's message when the component or the objects cannot be run
    (a plugin whose dependents are invalid, a loop that never settles)."""
    # A stored primary of an earlier run among the objects is replaced by this one.
    fixture = {"primary": primary, "objects": [{"kind": _kind_spec(k), "object": o} for k, o in objects],
               "external": {e.key: {"dependent": e.dependent, **e.object} for e in external}}
    with tempfile.TemporaryDirectory(prefix="wasmop-fake-") as scratch:
        path = Path(scratch, "fixture.yaml")
        path.write_text(json.dumps(fixture))
        ran = subprocess.run([wasmop_binary(), "test", "--output", "json", "--namespace", namespace,
                              os.fspath(component), str(path)], capture_output=True, text=True, check=False)
    if ran.returncode == 2 or not ran.stdout:
        raise RuntimeError(f"wasmop test {os.fspath(component)}: {ran.stderr.strip()}")
    [shown] = json.loads(ran.stdout)
    end = shown["end"]
    stored = [(_kind_of(o["kind"]), o["object"]) for o in end["objects"]]
    found = [External(e["dependent"], e["key"], e["object"], e.get("id")) for e in end["external"]]
    return Stable(shown.get("passes", []), end["primary"], stored, found)
