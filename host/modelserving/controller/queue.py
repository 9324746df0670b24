"""A work queue of ModelServing keys, with the guarantees of client-go's workqueue.

Watch handlers ``add`` keys; reconcile workers ``get`` one, work on it and call ``done``.
- A key is queued at most once however many events arrive (events coalesce).
- A key is never handed to two workers at once; an ``add`` while it is being worked on queues it
  again for after ``done``.
- ``add_after`` queues a key later;
  ``add_rate_limited`` backs off exponentially per key (failures), ``forget`` resets that.
- ``add(key, respect_backoff=True)`` leaves a key that is backing off alone until its retry is
  due, so the delay a failure logs is the delay it gets, also for an event that arrived while
  the failing pass ran (client-go's queue would hand the key out again as that pass ends); a
  plain ``add`` (a change the user made) queues it now, or right after the pass.
- ``add_batched(key, window)`` (events about a ModelServing's own Pods and Services, or its
  status) queues it ``window`` seconds after the first event of a burst, also respecting the
  backoff: while 800 Pods turn Ready, their thousands of events make one pass per window
  instead of one pass after another, each reading all 800. A pass that asks to look again
  later (grace periods, waiting on terminating objects, a rolling update waiting for Pods to
  turn Ready) is queued the same way. A key waits for the earliest of its windows: an event
  during a longer wait brings the pass forward to the end of the event's own window (a
  rolling update goes on as soon as the Pods it waits for are Ready), and the later look is
  then dropped (the pass asks again if it still needs one).
"""

from __future__ import annotations

import heapq
import threading
import time
from collections import deque
from collections.abc import Callable, Hashable
from typing import Generic, TypeVar

K = TypeVar("K", bound=Hashable)


class WorkQueue(Generic[K]):
    """Thread-safe; ``get`` blocks until a key is ready or the queue is shut down."""

    def __init__(
        self,
        base_delay: float = 0.5,
        max_delay: float = 60.0,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self._cond = threading.Condition()
        self._queue: deque[K] = deque()
        self._dirty: set[K] = set()
        self._processing: set[K] = set()
        self._delayed: list[tuple[float, int, K]] = []
        self._batched: dict[K, int] = {}
        """Keys waiting for the end of their batching window: the seq of its entry in
        ``_delayed``."""
        self._replaced: set[int] = set()
        """Seqs of batching windows an earlier window of the same key replaced."""
        self._due: dict[int, float] = {}
        """When each batching window in ``_batched`` ends, by seq."""
        self._backing_off: dict[K, float] = {}
        """Keys whose rate-limited retry is pending, and when it is due."""
        self._urgent: set[K] = set()
        """Keys a plain ``add`` (a change the user made) queued since they were last handed
        out: they run after a pass that fails, backoff or not."""
        self._seq = 0
        self._failures: dict[K, int] = {}
        self._base = base_delay
        self._max = max_delay
        self._clock = clock
        self._shutdown = False

    def __len__(self) -> int:
        with self._cond:
            return len(self._queue) + len(self._delayed) - len(self._replaced)

    def add(self, key: K, respect_backoff: bool = False) -> None:
        """Queue ``key`` now; with ``respect_backoff``, not while its retry after a failure is
        pending (that retry comes when it is due), nor after a pass running now that fails
        (``done``)."""
        with self._cond:
            if self._shutdown:
                return
            if not respect_backoff:
                self._urgent.add(key)
            if key in self._dirty:
                return
            due = self._backing_off.get(key)
            if respect_backoff and due is not None and due > self._clock():
                return
            self._dirty.add(key)
            if key not in self._processing:
                self._queue.append(key)
                self._cond.notify()

    def add_after(self, key: K, delay: float) -> None:
        if delay <= 0:
            self.add(key)
            return
        with self._cond:
            if self._shutdown:
                return
            self._seq += 1
            heapq.heappush(self._delayed, (self._clock() + delay, self._seq, key))
            self._cond.notify()

    def add_batched(self, key: K, window: float) -> None:
        """Queue ``key`` ``window`` seconds from now, unless it is queued or waiting already
        (or backing off: its retry comes when due); the events of the window make one pass."""
        with self._cond:
            if self._shutdown or key in self._dirty:
                return
            now = self._clock()
            due = self._backing_off.get(key)
            if due is not None and due > now:
                return
            waiting = self._batched.get(key)
            if waiting is not None:
                if self._due[waiting] <= now + window:
                    return
                self._replaced.add(waiting)
                del self._due[waiting]
            self._seq += 1
            self._batched[key] = self._seq
            self._due[self._seq] = now + window
            heapq.heappush(self._delayed, (now + window, self._seq, key))
            self._cond.notify()

    def add_rate_limited(self, key: K) -> float:
        """Queue ``key`` after its next backoff delay (base x 2^failures, capped); the delay."""
        with self._cond:
            failures = self._failures.get(key, 0)
            self._failures[key] = failures + 1
            delay: float = min(self._base * 2.0 ** min(failures, 64), self._max)
            self._backing_off[key] = self._clock() + delay
        self.add_after(key, delay)
        return delay

    def forget(self, key: K) -> None:
        with self._cond:
            self._failures.pop(key, None)
            self._backing_off.pop(key, None)

    def failures(self, key: K) -> int:
        with self._cond:
            return self._failures.get(key, 0)

    def _promote_due(self) -> float | None:
        """Move due delayed keys into the queue; seconds until the next one (None: none)."""
        now = self._clock()
        while self._delayed and self._delayed[0][0] <= now:
            due, seq, key = heapq.heappop(self._delayed)
            if seq in self._replaced:
                self._replaced.discard(seq)
                continue
            if self._batched.get(key) == seq:
                del self._batched[key]
                del self._due[seq]
                if self._backing_off.get(key, now) > now:
                    continue  # a pass failed since the event: its retry comes when due
            if self._backing_off.get(key, due + 1) <= due:
                del self._backing_off[key]
            if key not in self._dirty:
                self._dirty.add(key)
                if key not in self._processing:
                    self._queue.append(key)
        return self._delayed[0][0] - now if self._delayed else None

    def get(self, timeout: float | None = None) -> K | None:
        """The next key to work on (now marked as processing), or None on shutdown/timeout."""
        deadline = None if timeout is None else self._clock() + timeout
        with self._cond:
            while True:
                wait = self._promote_due()
                if self._queue:
                    key = self._queue.popleft()
                    self._dirty.discard(key)
                    self._urgent.discard(key)
                    self._processing.add(key)
                    return key
                if self._shutdown:
                    return None
                if deadline is not None:
                    left = deadline - self._clock()
                    if left <= 0:
                        return None
                    wait = left if wait is None else min(wait, left)
                self._cond.wait(wait)

    def done(self, key: K) -> None:
        """The pass of ``key`` ended. A key queued again meanwhile is handed out again now;
        when the pass failed (its retry is pending), only if a plain ``add`` queued it: an
        event's ``add`` waits for the retry, which comes when due."""
        with self._cond:
            self._processing.discard(key)
            if key not in self._dirty:
                return
            if key not in self._urgent and self._backing_off.get(key, 0.0) > self._clock():
                self._dirty.discard(key)
                return
            self._queue.append(key)
            self._cond.notify()

    def shutdown(self) -> None:
        with self._cond:
            self._shutdown = True
            self._cond.notify_all()
