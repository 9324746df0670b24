"""Fields of the Pod the operator protects from plugins (``patchPolicy.protectedFields``).

Named protections, on by default: the template's ``runtimeClassName``; a ``priorityClassName``
of ``system-*`` (neither changed away from nor set to one); tolerations of the control-plane
taints. Any other entry is a JSON Pointer to one field that must keep the template's value,
presence included. ``Protections.check`` raises ``PatchRejected`` naming the entry that protects
the field; ``modelserving.chain.policy.PatchValidator`` calls it for every patch.
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from typing import Any

from modelserving.api.errors import PatchRejected
from modelserving.api.policy import (
    CONTROL_PLANE_TAINTS,
    CONTROL_PLANE_TOLERATIONS,
    EXISTING_RUNTIME_CLASS,
    SYSTEM_PRIORITY_CLASS,
)
from modelserving.chain.jsonpatch import array_index
from modelserving.chain.shapes import as_map

_ABSENT = object()


class Protections:
    """``protectedFields`` compiled once: the named protections and the pointers' tokens."""

    def __init__(self, entries: Sequence[str]) -> None:
        self._named = frozenset(e for e in entries if not e.startswith("/"))
        self._pointers = tuple(
            (e, tuple(t.replace("~1", "/").replace("~0", "~") for t in e[1:].split("/")))
            for e in entries
            if e.startswith("/")
        )
        self._fields: tuple[tuple[str, ...], ...] = tuple(
            _NAMED_FIELDS[n] for n in sorted(self._named) if n in _NAMED_FIELDS
        )
        self._fields += tuple(tokens for _, tokens in self._pointers)

    def reaches(self, tokens: Sequence[str]) -> bool:
        """Whether an operation at ``tokens`` (a split path) may change a protected field: it is
        on the way to one, or inside one, or at an index of a list on the way (an ``add`` or
        ``remove`` there moves the items after it). The patch policy runs ``check`` only for a
        patch with such an operation."""
        return any(_may_reach(tokens, field) for field in self._fields)

    def check(self, before: Mapping[str, Any], after: Mapping[str, Any]) -> None:
        """Raise PatchRejected when ``after`` changes a protected field of ``before``."""
        spec_b, spec_a = before.get("spec"), after.get("spec")
        if spec_b is not spec_a and self._named:  # the named protections are in the spec
            self._check_named(
                spec_b if type(spec_b) is dict else as_map(spec_b),
                spec_a if type(spec_a) is dict else as_map(spec_a),
            )
        for entry, tokens in self._pointers:
            old, new = _values_at(before, after, tokens)
            if not _same(old, new):
                raise PatchRejected(
                    entry,
                    f"plugins may not change this field ({_hint(entry)})",
                )

    def _check_named(self, spec_b: Mapping[str, Any], spec_a: Mapping[str, Any]) -> None:
        if EXISTING_RUNTIME_CLASS in self._named:
            old = spec_b.get("runtimeClassName")
            if old is not None and not _same(old, spec_a.get("runtimeClassName")):
                raise PatchRejected(
                    "/spec/runtimeClassName",
                    f"the template's runtimeClassName {old!r} may not be changed or removed "
                    f"({_hint(EXISTING_RUNTIME_CLASS)})",
                )
        if SYSTEM_PRIORITY_CLASS in self._named:
            old, new = spec_b.get("priorityClassName"), spec_a.get("priorityClassName")
            if old is not new and (_system(old) or _system(new)) and not _same(old, new):
                what = (
                    f"the template's priorityClassName {old!r} may not be changed or removed"
                    if _system(old)
                    else f"priorityClassName {new!r} is reserved for system components"
                )
                raise PatchRejected(
                    "/spec/priorityClassName", f"{what} ({_hint(SYSTEM_PRIORITY_CLASS)})"
                )
        if CONTROL_PLANE_TOLERATIONS in self._named:
            old, new = spec_b.get("tolerations"), spec_a.get("tolerations")
            if old is not new and _control_plane(new) != (_control_plane(old) if old else []):
                raise PatchRejected(
                    "/spec/tolerations",
                    "tolerations of the control-plane taints "
                    f"({', '.join(CONTROL_PLANE_TAINTS)}, or of every taint) may not be added, "
                    f"changed or removed ({_hint(CONTROL_PLANE_TOLERATIONS)})",
                )


_NAMED_FIELDS = {
    EXISTING_RUNTIME_CLASS: ("spec", "runtimeClassName"),
    SYSTEM_PRIORITY_CLASS: ("spec", "priorityClassName"),
    CONTROL_PLANE_TOLERATIONS: ("spec", "tolerations"),
}
"""The field each named protection reads."""


def _may_reach(op: Sequence[str], field: Sequence[str]) -> bool:
    """Whether an operation at ``op`` may change the value at ``field`` (both split paths)."""
    for mine, theirs in zip(op, field, strict=False):
        if mine != theirs:
            # another member: untouched, unless both name list items ('-' appends, but an index
            # of another form may name the same item: judged as reaching it)
            return (mine == "-" or array_index(mine) is not None) and (
                theirs == "-" or array_index(theirs) is not None
            )
    return True  # one is on the way to the other


def _hint(entry: str) -> str:
    return f"patchPolicy.protectedFields lists {entry}; take it out to allow this"


def _system(name: Any) -> bool:
    return isinstance(name, str) and name.startswith("system-")


def _control_plane(tolerations: Any) -> list[str]:
    """The tolerations that let a Pod onto control-plane nodes, in a comparable form: those of
    the control-plane taints, and those of every taint (no key, operator Exists)."""
    found = []
    for toleration in tolerations if isinstance(tolerations, list) else ():
        if type(toleration) is not dict and not isinstance(toleration, Mapping):
            continue
        key = toleration.get("key")
        if key in CONTROL_PLANE_TAINTS or (not key and toleration.get("operator") == "Exists"):
            found.append(json.dumps(toleration, sort_keys=True, default=str))
    return sorted(found)


def _values_at(before: Any, after: Any, tokens: Sequence[str]) -> tuple[Any, Any]:
    """The values at ``tokens`` in both documents (``_ABSENT`` where there is none); the same
    object on both sides stops the walk early (the patched Pod is built copy-on-write)."""
    for token in tokens:
        if before is after:
            return _ABSENT, _ABSENT
        before, after = _child(before, token), _child(after, token)
    return before, after


def _child(node: Any, token: str) -> Any:
    if isinstance(node, Mapping):
        return node.get(token, _ABSENT)
    index = array_index(token) if isinstance(node, list) else None
    if index is not None:
        return node[index] if index < len(node) else _ABSENT
    return _ABSENT


def _same(a: Any, b: Any) -> bool:
    """JSON equality for the values of protected fields: the same object, or the same JSON text
    (so true is not 1; a number written 1.0 where it was 1 counts as a change)."""
    if a is b:
        return True
    if a is _ABSENT or b is _ABSENT:
        return False
    if type(a) is str and type(b) is str:
        return a == b
    return json.dumps(a, sort_keys=True, default=str) == json.dumps(b, sort_keys=True, default=str)
