"""Answers about API objects, remembered by the object's identity from one pass to the next.

The controller's cache replaces an object on every change and never edits one in place, so an
answer worked out from an object holds for as long as the object is the same (``is``) and the
other inputs of the answer are equal. A pass over a ModelServing of 1,250 ServingGroups asks
such questions of every Service and PodGroup (whose controller it is, which ServingGroup it
belongs to, how its spec differs from the wanted one) after each Pod event; with this table it
works them out only for the objects that changed. ``observe_pod`` does the same for Pods.

A caller that hands in an object and then changes it in place gets a stale answer: objects
given to ``sync`` are read-only.
"""

from __future__ import annotations

from collections.abc import Callable, Hashable
from typing import Any, Generic, TypeVar

T = TypeVar("T")

KEPT_MAX = 65536
"""Answers one table keeps; a full table starts again empty (the next pass works out each
answer once more)."""


class Kept(Generic[T]):
    """``compute(obj, *inputs)``, remembered under ``key`` (one slot per object name) for as
    long as the object is the same and ``inputs`` are equal. Safe from several threads: a
    race only works an answer out twice."""

    def __init__(self, compute: Callable[..., T], limit: int = KEPT_MAX) -> None:
        self._compute = compute
        self._limit = limit
        self._table: dict[Hashable, tuple[object, tuple[Any, ...], T]] = {}

    def __call__(self, key: Hashable, obj: object, *inputs: Any) -> T:
        seen = self._table.get(key)
        # a tuple comparison tries identity first: an input that is the same object is not
        # compared by value
        if seen is not None and seen[0] is obj and seen[1] == inputs:
            return seen[2]
        answer = self._compute(obj, *inputs)
        if len(self._table) >= self._limit:
            self._table.clear()
        self._table[key] = (obj, inputs, answer)
        return answer

    def __len__(self) -> int:
        return len(self._table)

    def clear(self) -> None:
        self._table.clear()
