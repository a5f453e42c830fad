"""What changed between two versions of an object (kopf's ``diff`` and ``on.field``): the added,
changed and removed fields, each with its path and its old and new value, and whether one field
changed. The same rules as the Rust SDK's ``wasmop_guest::diff``; both check themselves against
``core/vectors/diff.json``.

Objects are compared key by key, recursively; any other value (a list, a string, a number) is
compared whole, so a changed list is one change at the list's path. An absent field and a
``null`` one are the same, as in a merge patch.

>>> diff({"replicas": 1, "image": "a"}, {"replicas": 2, "image": "a"})
[Change(op='change', path=('replicas',), old=1, new=2)]
>>> changed({"spec": {"replicas": 1}}, {"spec": {"replicas": 2}}, "spec.replicas")
True
"""

from __future__ import annotations

from typing import Any, NamedTuple


class Change(NamedTuple):
    """One field that differs: ``op`` is ``"add"``, ``"change"`` or ``"remove"``, ``path`` the
    keys down to it (empty for the value itself), ``old`` and ``new`` its values (None for the
    side where it is absent), as kopf's diff items ``(op, field, old, new)``."""

    op: str
    path: tuple[str, ...]
    old: Any
    new: Any

    @property
    def dotted(self) -> str:
        """The path as dots between the keys (``spec.replicas``)."""
        return ".".join(self.path)


def diff(old: Any, new: Any) -> list[Change]:
    """The fields that differ between ``old`` and ``new``, in key order, depth first."""
    changes: list[Change] = []
    _walk((), old, new, changes)
    return changes


def changed(old: Any, new: Any, path: str) -> bool:
    """Whether the value at ``path`` (dots between keys; empty: the whole value) differs."""
    return _at(old, path) != _at(new, path)


def _at(value: Any, path: str) -> Any:
    for key in filter(None, path.split(".")):
        if not isinstance(value, dict):
            return None
        value = value.get(key)
    return value


def _walk(path: tuple[str, ...], old: Any, new: Any, changes: list[Change]) -> None:
    if old is None and new is None:
        return
    if isinstance(old, dict) and isinstance(new, dict):
        for key in sorted(set(old) | set(new)):
            _walk((*path, key), old.get(key), new.get(key), changes)
    elif old is None:
        changes.append(Change("add", path, None, new))
    elif new is None:
        changes.append(Change("remove", path, old, None))
    elif old != new or type(old) is not type(new):
        changes.append(Change("change", path, old, new))
