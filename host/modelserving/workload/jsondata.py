"""A fast deep copy for JSON-shaped data (dicts, lists, scalars), used on every generated Pod."""

from __future__ import annotations

from typing import Any


def json_copy(value: Any) -> Any:
    """Deep-copy dicts and lists; scalars are immutable and shared."""
    if isinstance(value, dict):
        return {k: json_copy(v) for k, v in value.items()}
    if isinstance(value, list):
        return [json_copy(v) for v in value]
    return value
