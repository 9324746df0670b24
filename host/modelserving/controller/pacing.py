"""How fast the controller writes, adapted to what the API server and the cluster show.

``concurrency.apiWrites`` is the most API writes in flight; ``WritePacer`` lets fewer through
when a measured signal says the cluster is falling behind, and more again when it keeps up:

- **The API server.** A write answered 429 (API Priority and Fairness turned it away) halves
  the limit, and every write waits out its ``Retry-After`` before it is sent again. Writes are
  judged in windows of as many writes as the limit: a window whose median latency is over
  ``latencyFactor`` times the lowest window median seen lately (and at least ``LATENCY_SLACK_S``
  above it) takes a quarter off the limit; a window within it adds one back.
- **The scheduler and the Nodes.** ``StartBacklog`` counts the Pods this controller created in
  the last ``startWindowSeconds`` that have not started (no Node yet, or not Running). While
  there are ``maxStarting`` of them, a pass waits before it begins another ServingGroup (never
  between the Pods of one: a gang is scheduled only whole). A Pod that has not started within
  the window stops counting, so Pods that cannot be scheduled (a full cluster waiting for an
  autoscaler) slow creation down to ``maxStarting`` per window, never stop it.

The limit and the backlog are exported as metrics; each change of the limit is logged with its
cause.
"""

from __future__ import annotations

import logging
import statistics
import threading
import time
from collections import deque
from collections.abc import Callable, Iterator, Mapping
from contextlib import contextmanager
from typing import Any

log = logging.getLogger(__name__)

LATENCY_SLACK_S = 0.02
"""A window is slow only when its median is also this much above the baseline: at a few
milliseconds per write, scheduling noise alone can double a median."""
BASELINE_WINDOWS = 20
"""The baseline is the lowest median of this many recent windows, so it follows a cluster whose
normal latency has changed."""
MAX_RETRY_AFTER_S = 10.0
"""The longest pause a 429's ``Retry-After`` can impose."""


class WritePacer:
    """The API writes allowed in flight, between 1 and ``ceiling``; thread-safe.

    ``slot()`` wraps one write: it waits for a free slot (and for any pause a 429 imposed), and
    measures the write. ``throttled`` reports a 429."""

    def __init__(
        self,
        ceiling: int,
        latency_factor: float = 3.0,
        clock: Callable[[], float] = time.monotonic,
        on_change: Callable[[int], None] | None = None,
        on_throttle: Callable[[], None] | None = None,
    ) -> None:
        self.ceiling = ceiling
        self.latency_factor = latency_factor
        self._clock = clock
        self._on_change = on_change
        self._on_throttle = on_throttle
        self._cond = threading.Condition()
        self._limit = ceiling
        self._in_flight = 0
        self._paused_until = 0.0
        self._window: list[float] = []
        self._medians: deque[float] = deque(maxlen=BASELINE_WINDOWS)
        self.throttles = 0
        """429 answers seen so far."""

    @property
    def limit(self) -> int:
        return self._limit

    @contextmanager
    def slot(self) -> Iterator[None]:
        """Hold one of the limit's slots for one write, and time it."""
        with self._cond:
            while True:
                wait = self._paused_until - self._clock()
                if wait <= 0 and self._in_flight < self._limit:
                    break
                self._cond.wait(timeout=wait if wait > 0 else None)
            self._in_flight += 1
        started = self._clock()
        try:
            yield
        finally:
            elapsed = self._clock() - started
            with self._cond:
                self._in_flight -= 1
                self._measured(elapsed)
                # wake as many waiters as there are free slots, not all of them: with many
                # writers waiting, waking each one for every finished write was 6 % of the
                # controller's CPU in a 10,000-Pod rolling update
                self._cond.notify(max(1, self._limit - self._in_flight))

    def throttled(self, retry_after_s: float) -> None:
        """A write was answered 429: halve the limit and pause every write."""
        with self._cond:
            self.throttles += 1
            pause = min(max(retry_after_s, 0.0), MAX_RETRY_AFTER_S)
            self._paused_until = max(self._paused_until, self._clock() + pause)
            self._set(
                max(1, self._limit // 2), f"the API server answered 429 (retry after {pause:g} s)"
            )
            self._window.clear()
            self._cond.notify_all()
        if self._on_throttle is not None:
            self._on_throttle()

    def _measured(self, elapsed: float) -> None:
        self._window.append(elapsed)
        if len(self._window) < self._limit:
            return
        median = statistics.median(self._window)
        self._window.clear()
        baseline = min(self._medians, default=median)
        self._medians.append(median)
        if median > self.latency_factor * baseline and median - baseline > LATENCY_SLACK_S:
            self._set(
                max(1, self._limit - max(1, self._limit // 4)),
                f"writes slowed to {median * 1000:.0f} ms (median; {baseline * 1000:.0f} ms "
                "at best lately)",
            )
        elif self._limit < self.ceiling:
            self._set(self._limit + 1, "writes keep their pace")

    def _set(self, limit: int, cause: str) -> None:
        if limit == self._limit:
            return
        level = logging.INFO if limit < self._limit else logging.DEBUG
        log.log(level, "API writes in flight: %d (was %d): %s", limit, self._limit, cause)
        self._limit = limit
        if self._on_change is not None:
            self._on_change(limit)


class StartBacklog:
    """Pods this controller created in the last ``window_s`` seconds that have not started
    (no Node, or not Running yet); thread-safe. Fed by the controller's creates and by the
    Pods' watch."""

    def __init__(
        self,
        max_starting: int,
        window_s: float = 30.0,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self.max_starting = max_starting
        self.window_s = window_s
        self._clock = clock
        self._cond = threading.Condition()
        self._starting: dict[str, float] = {}
        """When each Pod not yet started was created, by UID (in creation order)."""

    def created(self, pod: Mapping[str, Any]) -> None:
        """The controller created ``pod`` (the API's answer)."""
        uid = (pod.get("metadata") or {}).get("uid")
        if uid and not _started(pod):
            with self._cond:
                self._starting[str(uid)] = self._clock()

    def observed(self, event_type: str | None, pod: Mapping[str, Any]) -> None:
        """A watch event of a Pod: one that started or went stops counting."""
        uid = (pod.get("metadata") or {}).get("uid")
        if not uid or (event_type != "DELETED" and not _started(pod)):
            return
        with self._cond:
            if self._starting.pop(str(uid), None) is not None:
                self._cond.notify_all()

    def count(self) -> int:
        with self._cond:
            self._expire()
            return len(self._starting)

    def wait_for_room(self, stop: Callable[[], bool], poll_s: float = 0.25) -> float:
        """Wait while ``max_starting`` Pods are starting (0: never); the seconds waited. Checks
        ``stop`` (the ModelServing went) at least every ``poll_s``."""
        if self.max_starting <= 0:
            return 0.0
        began = self._clock()
        with self._cond:
            while not stop():
                self._expire()
                if len(self._starting) < self.max_starting:
                    break
                self._cond.wait(timeout=poll_s)
        return self._clock() - began

    def _expire(self) -> None:
        cutoff = self._clock() - self.window_s
        stale = []
        for uid, created in self._starting.items():  # oldest first
            if created >= cutoff:
                break
            stale.append(uid)
        for uid in stale:
            del self._starting[uid]


def _started(pod: Mapping[str, Any]) -> bool:
    spec = pod.get("spec") or {}
    status = pod.get("status") or {}
    return bool(spec.get("nodeName")) and status.get("phase") in ("Running", "Succeeded", "Failed")


def retry_after_seconds(headers: Mapping[str, str] | None, default: float = 1.0) -> float:
    """A 429's ``Retry-After`` in seconds (delta-seconds only, as the API server sends it)."""
    text = (headers or {}).get("Retry-After") or (headers or {}).get("retry-after") or ""
    try:
        return max(0.0, float(text))
    except ValueError:
        return default
