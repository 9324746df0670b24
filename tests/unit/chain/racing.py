"""Threads that run at once, the interpreter switching between them as often as it can."""

from __future__ import annotations

import sys
import threading
from collections.abc import Callable, Sequence


def race(targets: Sequence[Callable[[], None]]) -> None:
    """Run each of ``targets`` on a thread of its own, with a switch interval of a microsecond
    (the default is restored after), and wait for all of them."""
    interval = sys.getswitchinterval()
    sys.setswitchinterval(1e-6)
    try:
        threads = [threading.Thread(target=target) for target in targets]
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join()
    finally:
        sys.setswitchinterval(interval)
