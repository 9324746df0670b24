"""A Pod's fields as the validator reads them: a map or a list as written, anything else (a
field of the wrong type, which the API server refuses) as an empty one. Shared by every module
of the chain that reads Pods."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

EMPTY: Mapping[str, Any] = {}
"""The empty map ``as_map`` gives for anything that is not one: shared, never changed."""


def as_map(value: Any) -> Mapping[str, Any]:
    """``value`` when it is a map (a dict first: the commonest, and the cheapest test), else
    ``EMPTY``."""
    if type(value) is dict:
        return value
    return value if value is not None and isinstance(value, Mapping) else EMPTY


def as_list(value: Any) -> list[Any]:
    """``value`` when it is a list, else an empty one."""
    return value if isinstance(value, list) else []
