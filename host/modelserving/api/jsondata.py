"""JSON-shaped data (dicts with string keys, lists, strings, numbers, booleans, null): a fast
deep copy, used on every generated Pod, a shape check for data from plugins, and the range check
of integers that plugin requests carry, and how messages name a value's kind."""

from __future__ import annotations

import math
import pickle
from dataclasses import dataclass
from typing import Any

MAX_DEPTH = 64
"""Deepest nesting accepted in plugin output; real Pods stay well under 20 levels."""


def json_copy(value: Any) -> Any:
    """A deep copy of JSON data: new dicts and lists, equal scalars (immutable, so whether they
    are the same objects does not matter).

    Done as a pickle round trip of our own bytes, which runs in C: about 2.4 times as fast as a
    recursive copy for a 10 KB Pod (measured 47 us against 112 us), and it runs on every Pod the
    controller builds. Data pickle cannot carry gets the recursive copy, which keeps such values
    as they are.
    """
    kind = type(value)
    if kind is dict:
        if all(type(v) in _SCALARS for v in value.values()):  # flat (an env var, a mount)
            return dict(value)
    elif kind is list:
        if all(type(v) in _SCALARS for v in value):
            return list(value)
    elif not isinstance(value, dict | list):
        return value
    try:
        return pickle.loads(pickle.dumps(value, protocol=pickle.HIGHEST_PROTOCOL))
    except (pickle.PicklingError, TypeError, AttributeError, ValueError):
        return _copy(value)


_SCALARS = frozenset({str, int, bool, float, type(None)})
"""The immutable JSON types: a map or list holding only these is copied by a shallow copy."""


class NotPlain(Exception):
    """Raised by ``plain_copy``: the value is not plain JSON within the depth."""


def plain_copy(value: Any, depth_left: int) -> Any:
    """A deep copy of ``value`` when it is plain JSON nested at most ``depth_left`` deep (what
    ``find_json_problem`` accepts); NotPlain when it is not. One walk for the check and the copy:
    for the small values of a patch operation, faster than the check and then ``json_copy``.
    The recursion is bounded by ``depth_left``."""
    kind = type(value)
    if kind is str or kind is int or kind is bool or value is None:
        return value
    if kind is float:
        if math.isfinite(value):
            return value
        raise NotPlain
    if depth_left <= 0:
        raise NotPlain
    if kind is dict:
        out: dict[str, Any] = {}
        for key, child in value.items():
            if type(key) is not str:
                raise NotPlain
            ckind = type(child)
            if ckind is str or ckind is int or ckind is bool or child is None:
                out[key] = child
            else:
                out[key] = plain_copy(child, depth_left - 1)
        return out
    if kind is list:
        return [
            child
            if (type(child) is str or type(child) is int or type(child) is bool or child is None)
            else plain_copy(child, depth_left - 1)
            for child in value
        ]
    raise NotPlain


def _copy(value: Any) -> Any:
    if isinstance(value, dict):
        return {k: _copy(v) for k, v in value.items()}
    if isinstance(value, list):
        return [_copy(v) for v in value]
    return value


@dataclass(frozen=True)
class JsonProblem:
    """Where plain JSON stops: ``path`` from the root, ``kind`` of problem, the ``offender``.

    ``kind`` is ``depth`` (nested too deep), ``key`` (a non-string map key), ``float`` (NaN or
    infinity) or ``type`` (a value of a type JSON does not have).
    """

    path: tuple[str | int, ...]
    kind: str
    offender: Any


def _plain(value: Any, depth_left: int) -> bool:
    """Whether ``value`` is plain JSON nested at most ``depth_left`` deep (the fast check; the
    recursion is bounded by ``depth_left``, at most a few hundred)."""
    kind = type(value)
    if kind is str or kind is int or kind is bool or value is None:
        return True
    if kind is float:
        return math.isfinite(value)
    if depth_left <= 0:
        return False
    if kind is dict:
        for key, child in value.items():
            if type(key) is not str:
                return False
            ckind = type(child)
            scalar = ckind is str or ckind is int or ckind is bool or child is None
            if not scalar and not _plain(child, depth_left - 1):
                return False
        return True
    if kind is list:
        for child in value:
            ckind = type(child)
            scalar = ckind is str or ckind is int or ckind is bool or child is None
            if not scalar and not _plain(child, depth_left - 1):
                return False
        return True
    return False


def find_json_problem(value: Any, max_depth: int = MAX_DEPTH) -> JsonProblem | None:
    """The first place, in document order, where ``value`` is not plain JSON nested at most
    ``max_depth`` deep; None when there is none.

    A fast recursive check first (bounded by ``max_depth``); only when it fails does an
    iterative walk find where, so hostile depth cannot exhaust the interpreter's stack.
    """
    if max_depth <= 500 and _plain(value, max_depth):
        return None
    stack: list[tuple[Any, tuple[str | int, ...]]] = [(value, ())]
    while stack:
        item, path = stack.pop()
        kind = type(item)
        if kind is str or kind is int or kind is bool or item is None:
            continue
        if kind is float:
            if not math.isfinite(item):
                return JsonProblem(path, "float", item)
            continue
        if len(path) >= max_depth and (kind is dict or kind is list):
            return JsonProblem(path, "depth", item)
        if kind is dict:
            children: list[tuple[Any, tuple[str | int, ...]]] = []
            for key, child in item.items():
                if type(key) is not str:
                    return JsonProblem(path, "key", key)
                ckind = type(child)
                if not (ckind is str or ckind is int or ckind is bool or child is None):
                    children.append((child, (*path, key)))
            stack.extend(reversed(children))
        elif kind is list:
            for i in range(len(item) - 1, -1, -1):
                child = item[i]
                ckind = type(child)
                if not (ckind is str or ckind is int or ckind is bool or child is None):
                    stack.append((child, (*path, i)))
        else:
            return JsonProblem(path, "type", item)
    return None


def json_problem(value: Any, max_depth: int = MAX_DEPTH) -> str | None:
    """``find_json_problem`` as a sentence (used in patch rejections), or None."""
    found = find_json_problem(value, max_depth)
    if found is None:
        return None
    where = "".join(f"/{p}" for p in found.path)
    if found.kind == "depth":
        return f"is nested more than {max_depth} levels deep (at '{where}')"
    if found.kind == "key":
        return f"has a non-string key {found.offender!r} at '{where}'"
    if found.kind == "float":
        return f"holds {found.offender} at '{where}', which JSON cannot express"
    return f"holds a {type(found.offender).__name__} at '{where}', which is not JSON"


INT_MIN = -(2**63)
INT_MAX = 2**64 - 1
"""The integers a plugin request can carry (msgpack's int64 and uint64): -2^63 to 2^64-1."""


def _all_in_range(value: Any) -> bool:
    stack = [value]
    while stack:
        item = stack.pop()
        kind = type(item)
        if kind is int:
            if item < INT_MIN or item > INT_MAX:
                return False
        elif kind is dict:
            stack.extend(item.values())
        elif kind is list:
            stack.extend(item)
    return True


_Link = tuple[Any, str | int] | None
"""A path as a linked list: (the parent's link, the key), None at the root."""


def find_wide_int(value: Any) -> tuple[tuple[str | int, ...], int] | None:
    """The first integer of ``value`` (in document order) outside ``INT_MIN``..``INT_MAX``, with
    its path from the root; None when there is none. Booleans do not count; any depth (no
    recursion, and each path is built only for the integer found)."""
    if _all_in_range(value):
        return None
    stack: list[tuple[Any, _Link]] = [(value, None)]
    while stack:
        item, link = stack.pop()
        kind = type(item)
        if kind is int:
            if item < INT_MIN or item > INT_MAX:
                path: list[str | int] = []
                while link is not None:
                    link, key = link
                    path.append(key)
                return tuple(reversed(path)), item
        elif kind is dict:
            stack.extend((child, (link, key)) for key, child in reversed(item.items()))
        elif kind is list:
            stack.extend((item[i], (link, i)) for i in range(len(item) - 1, -1, -1))
    return None


def wide_int_reason(value: int) -> str:
    """Why ``value`` (outside ``INT_MIN``..``INT_MAX``) is refused, naming it when it is short
    enough to read."""
    bits = value.bit_length()
    what = f"integer {value}" if bits <= 256 else f"an integer of {bits} bits"
    return f"{what} is outside the 64-bit range ({INT_MIN} to {INT_MAX})"


def describe(value: Any) -> str:
    """What a JSON value is, as messages say it: "null", "a boolean", "a number", "a string",
    "a list", "a map" (or "a <type>" for anything else)."""
    if value is None:
        return "null"
    if isinstance(value, bool):
        return "a boolean"
    if isinstance(value, int | float):
        return "a number"
    if isinstance(value, str):
        return "a string"
    if isinstance(value, list | tuple):
        return "a list"
    if isinstance(value, dict):
        return "a map"
    return f"a {type(value).__name__}"
