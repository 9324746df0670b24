"""The cyclic garbage collector's thresholds while a big job runs: the controller, a render.

Both allocate many short-lived objects, nearly none in cycles (reference counting frees them),
and every collection that reaches the older generations walks the whole heap, which grows with
the Pods held. ``tuned()`` sets ``GC_THRESHOLDS`` while any such job of the process runs and
puts back the thresholds found before the first one once the last one ends.
"""

from __future__ import annotations

import contextlib
import gc
import threading
from collections.abc import Iterator
from typing import Any

GC_THRESHOLDS = (50_000, 20, 10)
"""The thresholds while a job runs (Python's default: 700, 10, 10). ``python -m
modelserving.bench.passes`` prints a pass with both: over a settled 10,000-Pod ModelServing,
33.0 us of CPU per Pod with the default and 18.2 us with these (docs/performance.md)."""

_lock = threading.Lock()
_state: list[Any] = [0, None]
"""Jobs running in this process, and the thresholds before the first of them."""


@contextlib.contextmanager
def tuned() -> Iterator[None]:
    """``GC_THRESHOLDS`` while this (and any other) job of the process runs."""
    with _lock:
        if _state[0] == 0:
            _state[1] = gc.get_threshold()
            gc.set_threshold(*GC_THRESHOLDS)
        _state[0] += 1
    try:
        yield
    finally:
        with _lock:
            _state[0] -= 1
            if _state[0] == 0:
                gc.set_threshold(*_state[1])
