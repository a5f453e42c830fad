"""The Python dev runtime: one component, built once per SDK version, that runs a plugin's
source read at run time instead of the source sealed into it at build time.

``wasmop run --dev-source DIR`` gives this component (and no other) the plugin's directory, read-only, at
:data:`SOURCE`. Each new instance reads ``app.py`` from there on its first call, runs it as the
module ``app`` and forwards every export to what ``app`` exports (``Reconciler = export(...)``),
so a saved edit takes effect with the next instance, without a componentize build. Anywhere
else (``wasmop run``, a ReconcilerPlugin, OCI) there is no such directory, and every call fails.

Only what this component holds can be imported: the standard library modules imported below
(and those they import), the SDK, and modules beside ``app.py``; third-party packages cannot.
"""

import base64  # noqa: F401 - kept in the runtime for plugins to import
import collections  # noqa: F401
import copy  # noqa: F401
import dataclasses  # noqa: F401
import datetime  # noqa: F401
import enum  # noqa: F401
import functools  # noqa: F401
import hashlib  # noqa: F401
import itertools  # noqa: F401
import json  # noqa: F401
import math  # noqa: F401
import re  # noqa: F401
import string  # noqa: F401
import sys
import textwrap  # noqa: F401
import types
import typing  # noqa: F401
import urllib.parse  # noqa: F401

import wasmop  # noqa: F401
from wasmop import component  # noqa: F401 - the glue the plugin's export() builds on
from wit_world import exports

#: Where ``wasmop run --dev-source`` mounts the plugin's directory.
SOURCE = "/plugin"

_loaded: list = []


def _app() -> tuple:
    """The plugin's ``Reconciler`` and ``Admission`` instances, its source read on first use."""
    if not _loaded:
        path = f"{SOURCE}/app.py"
        try:
            with open(path, encoding="utf-8") as f:
                text = f.read()
        except OSError as e:
            raise RuntimeError(f"the wasmop dev runtime runs only under `wasmop run --dev-source`: cannot read {path}: {e}") from None
        module = types.ModuleType("app")
        module.__file__ = path
        sys.modules["app"] = module
        if SOURCE not in sys.path:
            sys.path.insert(0, SOURCE)
        exec(compile(text, path, "exec"), module.__dict__)  # noqa: S102 - running the plugin is the point
        _loaded.extend([module.Reconciler(), module.Admission()])
    return _loaded[0], _loaded[1]


def _forwarding(name: str, index: int, interface: type) -> type:
    """A class for ``interface`` whose every method calls the same method of the plugin's."""

    def forward(method: str):
        return lambda self, *args: getattr(_app()[index], method)(*args)

    methods = [m for m in dir(interface) if not m.startswith("_")]
    return type(name, (interface,), {m: forward(m) for m in methods})


Reconciler = _forwarding("Reconciler", 0, exports.Reconciler)
Admission = _forwarding("Admission", 1, exports.Admission)
