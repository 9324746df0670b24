"""What plugins gave the controller, kept by its bytes within a budget of bytes.

The patch validator keeps checked patches by their msgpack bytes, and the WebAssembly adapter
keeps decoded responses by theirs: most plugins give every Pod the same bytes. What a plugin
returns is its own choice, so what is kept of it is bounded by bytes, not by a count of entries
of any size: the newest are kept while their bytes come to at most the budget.
"""

from __future__ import annotations

import threading
from collections.abc import Hashable, Iterator
from typing import Generic, TypeVar

K = TypeVar("K", bound=Hashable)
V = TypeVar("V")


class ByteBudget(Generic[K, V]):
    """Values by key, each counted as the ``size`` it was kept with (the bytes it was found by);
    the oldest go first when a new one would pass ``budget``. Safe from several threads."""

    def __init__(self, budget: int) -> None:
        self.budget = budget
        self._kept: dict[K, tuple[int, V]] = {}
        self._bytes = 0
        self._lock = threading.Lock()

    def get(self, key: K) -> V | None:
        found = self._kept.get(key)
        return None if found is None else found[1]

    def keep(self, key: K, size: int, value: V) -> None:
        """Keep ``value`` under ``key`` (a key already kept keeps its first value)."""
        with self._lock:
            kept = self._kept
            if key in kept:
                return
            while kept and self._bytes + size > self.budget:
                oldest = next(iter(kept))
                self._bytes -= kept.pop(oldest)[0]
            kept[key] = (size, value)
            self._bytes += size

    @property
    def kept_bytes(self) -> int:
        return self._bytes

    def __len__(self) -> int:
        return len(self._kept)

    def __iter__(self) -> Iterator[K]:
        return iter(self._kept)

    def values(self) -> list[V]:
        return [value for _, value in self._kept.values()]

    def clear(self) -> None:
        with self._lock:
            self._kept.clear()
            self._bytes = 0
