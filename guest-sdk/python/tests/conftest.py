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


@pytest.fixture(scope="session")
def component(tmp_path_factory):
    """``wasmop.component`` over freshly generated bindings, with the ``wit`` types module."""
    tool = shutil.which("componentize-py") or str(Path(sys.executable).with_name("componentize-py"))
    if not os.path.exists(tool) or not WIT.is_dir():
        pytest.skip("needs componentize-py and the repository's wit/")
    out = tmp_path_factory.mktemp("bindings")
    subprocess.run([tool, "-d", str(WIT), "-w", "operator", "bindings", str(out)], check=True, capture_output=True)
    sys.path.insert(0, str(out))
    try:
        yield importlib.import_module("wasmop.component")
    finally:
        sys.path.remove(str(out))
