"""The sandbox's worker processes go first when their container runs out of memory."""

from __future__ import annotations

import contextlib


def first_to_go() -> None:
    """Ask the kernel to kill this process first when memory runs out (``oom_score_adj`` 1000).
    The compile and Extism workers share the controller's container, and their caps together
    (``compileMemoryMiB`` per compile worker) can pass the container's limit: a killed worker
    fails one compile or call, a killed controller everything. Raising one's own score needs no
    privilege; where it cannot be written (not Linux), nothing changes."""
    with contextlib.suppress(OSError), open("/proc/self/oom_score_adj", "w") as adj:
        adj.write("1000")
