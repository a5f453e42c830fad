"""Fixtures: the bindings componentize-py generates for the repository's WIT world, so the
component glue's conversions are tested against the real records, natively."""

import importlib
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

WIT = Path(__file__).resolve().parents[3] / "wit"


def _bindings(tmp_path_factory, world: str) -> Path:
    """The bindings componentize-py generates for ``world``, in a directory of their own."""
    tool = shutil.which("componentize-py") or str(Path(sys.executable).with_name("componentize-py"))
    if not os.path.exists(tool) or not WIT.is_dir():
        pytest.skip("needs componentize-py and the repository's wit/")
    out = tmp_path_factory.mktemp(f"bindings-{world}")
    subprocess.run([tool, "-d", str(WIT), "-w", world, "bindings", str(out)], check=True, capture_output=True)
    return out


@pytest.fixture(scope="session")
def component(tmp_path_factory):
    """``wasmop.component`` over freshly generated bindings, with the ``wit`` types module."""
    out = _bindings(tmp_path_factory, "operator")
    sys.path.insert(0, str(out))
    try:
        yield importlib.import_module("wasmop.component")
    finally:
        sys.path.remove(str(out))


@pytest.fixture(scope="module")
def wasi_http(tmp_path_factory):
    """``wasmop.wasi_http`` over the bindings of the ``operator-http`` world, imported apart from
    the ``operator`` world's (the modules of both are named ``wit_world``)."""
    out = _bindings(tmp_path_factory, "operator-http")
    generated = ("wit_world", "componentize_py_types", "wasmop.wasi_http", "wasmop.component")
    saved = {name: module for name, module in sys.modules.items() if name.startswith(generated)}
    for name in saved:
        del sys.modules[name]
    sys.path.insert(0, str(out))
    try:
        yield importlib.import_module("wasmop.wasi_http")
    finally:
        sys.path.remove(str(out))
        for name in [n for n in sys.modules if n.startswith(generated)]:
            del sys.modules[name]
        sys.modules.update(saved)
