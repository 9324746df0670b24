"""JSON-shaped data (dicts with string keys, lists, strings, numbers, booleans, null): a fast
deep copy, used on every generated Pod, and a shape check for data from plugins."""

from __future__ import annotations

import math
from typing import Any

MAX_DEPTH = 64
"""Deepest nesting accepted in plugin output; real Pods stay well under 20 levels."""


def json_copy(value: Any) -> Any:
    """Deep-copy dicts and lists; scalars are immutable and shared."""
    if isinstance(value, dict):
        return {k: json_copy(v) for k, v in value.items()}
    if isinstance(value, list):
        return [json_copy(v) for v in value]
    return value


def json_problem(value: Any, max_depth: int = MAX_DEPTH) -> str | None:
    """Why ``value`` is not plain JSON nested at most ``max_depth`` deep, or None when it is.

    Iterative, so hostile depth cannot exhaust the interpreter's stack.
    """
    stack: list[tuple[Any, int, str]] = [(value, 0, "")]
    while stack:
        item, depth, where = stack.pop()
        kind = type(item)
        if kind is str or kind is int or kind is bool or item is None:
            continue
        if kind is float:
            if not math.isfinite(item):
                return f"holds {item} at '{where}', which JSON cannot express"
            continue
        if depth >= max_depth:
            return f"is nested more than {max_depth} levels deep (at '{where}')"
        if kind is dict:
            for key, child in item.items():
                if type(key) is not str:
                    return f"has a non-string key {key!r} at '{where}'"
                stack.append((child, depth + 1, f"{where}/{key}"))
        elif kind is list:
            stack.extend((child, depth + 1, f"{where}/{i}") for i, child in enumerate(item))
        else:
            return f"holds a {kind.__name__} at '{where}', which is not JSON"
    return None
