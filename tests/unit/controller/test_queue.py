"""WorkQueue: coalescing, one worker per key, delayed and rate-limited adds, timeouts, shutdown."""

from __future__ import annotations

import threading

import pytest

from modelserving.controller.queue import WorkQueue


class Clock:
    """A fake monotonic clock the test moves by hand."""

    def __init__(self, now: float = 100.0) -> None:
        self.now = now

    def __call__(self) -> float:
        return self.now

    def advance(self, seconds: float) -> None:
        self.now += seconds


@pytest.fixture
def clock() -> Clock:
    return Clock()


@pytest.fixture
def queue(clock: Clock) -> WorkQueue[str]:
    return WorkQueue(base_delay=0.5, max_delay=8.0, clock=clock)


def drain(queue: WorkQueue[str]) -> list[str]:
    """Every key ready now (each marked done right away), in order."""
    out = []
    while (key := queue.get(timeout=0)) is not None:
        out.append(key)
        queue.done(key)
    return out


# --- coalescing and processing ---------------------------------------------------------------


def test_adding_a_key_twice_hands_it_out_once(queue: WorkQueue[str]) -> None:
    queue.add("a")
    queue.add("a")
    assert len(queue) == 1
    assert queue.get(timeout=0) == "a"
    assert queue.get(timeout=0) is None


def test_keys_come_out_in_the_order_they_were_added(queue: WorkQueue[str]) -> None:
    for key in ("b", "a", "c", "a"):
        queue.add(key)
    assert drain(queue) == ["b", "a", "c"]


def test_a_key_being_processed_is_not_handed_to_a_second_worker(queue: WorkQueue[str]) -> None:
    queue.add("a")
    assert queue.get(timeout=0) == "a"
    queue.add("a")  # an event while a worker holds the key
    queue.add("a")  # coalesces with the one above
    assert queue.get(timeout=0) is None
    queue.done("a")
    assert queue.get(timeout=0) == "a"
    queue.done("a")
    assert queue.get(timeout=0) is None


def test_done_without_a_new_add_does_not_requeue(queue: WorkQueue[str]) -> None:
    queue.add("a")
    assert queue.get(timeout=0) == "a"
    queue.done("a")
    assert len(queue) == 0
    assert queue.get(timeout=0) is None


def test_other_keys_are_served_while_one_is_processed(queue: WorkQueue[str]) -> None:
    queue.add("a")
    queue.add("b")
    assert queue.get(timeout=0) == "a"
    queue.add("a")
    assert queue.get(timeout=0) == "b"
    assert queue.get(timeout=0) is None
    queue.done("a")
    assert queue.get(timeout=0) == "a"


# --- delayed adds ----------------------------------------------------------------------------


def test_add_after_waits_for_its_delay(queue: WorkQueue[str], clock: Clock) -> None:
    queue.add_after("a", 5.0)
    assert len(queue) == 1
    assert queue.get(timeout=0) is None
    clock.advance(4.9)
    assert queue.get(timeout=0) is None
    clock.advance(0.1)
    assert queue.get(timeout=0) == "a"
    assert len(queue) == 0


def test_delayed_keys_come_out_by_due_time_not_by_add_order(
    queue: WorkQueue[str], clock: Clock
) -> None:
    queue.add_after("late", 3.0)
    queue.add_after("early", 1.0)
    queue.add_after("middle", 2.0)
    queue.add_after("tie", 2.0)  # same due time: the one added first goes first
    clock.advance(10.0)
    assert drain(queue) == ["early", "middle", "tie", "late"]


def test_add_after_without_delay_is_an_add(queue: WorkQueue[str]) -> None:
    queue.add_after("a", 0)
    queue.add_after("b", -1.0)
    assert drain(queue) == ["a", "b"]


def test_a_due_key_already_queued_coalesces(queue: WorkQueue[str], clock: Clock) -> None:
    queue.add("a")
    queue.add_after("a", 1.0)
    clock.advance(1.0)
    assert drain(queue) == ["a"]


def test_a_due_key_being_processed_waits_for_done(queue: WorkQueue[str], clock: Clock) -> None:
    queue.add("a")
    assert queue.get(timeout=0) == "a"
    queue.add_after("a", 1.0)
    clock.advance(1.0)
    assert queue.get(timeout=0) is None  # promoted, but a worker still holds it
    queue.done("a")
    assert queue.get(timeout=0) == "a"


def test_len_counts_queued_and_delayed_keys(queue: WorkQueue[str], clock: Clock) -> None:
    queue.add("a")
    queue.add("b")
    queue.add_after("c", 1.0)
    queue.add_after("d", 2.0)
    assert len(queue) == 4
    assert queue.get(timeout=0) == "a"
    assert len(queue) == 3  # a key being processed is not counted
    clock.advance(1.0)
    assert queue.get(timeout=0) == "b"
    assert len(queue) == 2  # c moved from delayed to queued
    queue.done("a")
    queue.done("b")
    assert drain(queue) == ["c"]
    assert len(queue) == 1
    clock.advance(1.0)
    assert drain(queue) == ["d"]
    assert len(queue) == 0


# --- rate limiting ---------------------------------------------------------------------------


def test_rate_limited_delays_double_up_to_the_maximum(queue: WorkQueue[str]) -> None:
    delays = [queue.add_rate_limited("a") for _ in range(7)]
    assert delays == [0.5, 1.0, 2.0, 4.0, 8.0, 8.0, 8.0]
    assert queue.failures("a") == 7


def test_rate_limits_are_per_key(queue: WorkQueue[str]) -> None:
    queue.add_rate_limited("a")
    queue.add_rate_limited("a")
    assert queue.add_rate_limited("b") == 0.5
    assert queue.failures("a") == 2
    assert queue.failures("b") == 1


def test_forget_resets_the_backoff(queue: WorkQueue[str]) -> None:
    for _ in range(4):
        queue.add_rate_limited("a")
    queue.forget("a")
    assert queue.failures("a") == 0
    assert queue.add_rate_limited("a") == 0.5
    queue.forget("never-seen")  # harmless


def test_a_rate_limited_key_is_queued_after_its_delay(queue: WorkQueue[str], clock: Clock) -> None:
    queue.add_rate_limited("a")  # 0.5 s
    assert queue.add_rate_limited("b") == 0.5
    assert queue.add_rate_limited("b") == 1.0
    clock.advance(0.5)
    assert drain(queue) == ["a", "b"]  # b's first entry is due as well
    clock.advance(0.5)
    assert drain(queue) == ["b"]


def test_rate_limiting_stays_at_the_maximum_after_very_many_failures(
    queue: WorkQueue[str],
) -> None:
    """2.0**1024 overflows a float: the exponent must be bounded before the cap applies
    (an OverflowError here would escape the manager worker's except handler)."""
    for _ in range(1100):
        assert queue.add_rate_limited("a") <= 8.0
    assert queue.add_rate_limited("a") == 8.0


# --- blocking, timeouts, shutdown -----------------------------------------------------------


def test_get_returns_none_when_the_timeout_passes() -> None:
    queue: WorkQueue[str] = WorkQueue()  # the real clock: the timeout is measured with it
    assert queue.get(timeout=0.02) is None
    assert queue.get(timeout=0) is None


def test_get_with_a_timeout_returns_a_key_that_arrives_in_time() -> None:
    queue: WorkQueue[str] = WorkQueue()
    timer = threading.Timer(0.01, queue.add, args=("a",))
    timer.start()
    try:
        assert queue.get(timeout=5.0) == "a"
    finally:
        timer.join()


def test_a_blocked_get_wakes_up_for_a_short_delayed_add() -> None:
    queue: WorkQueue[str] = WorkQueue()
    queue.add_after("a", 0.02)
    assert queue.get(timeout=5.0) == "a"


def test_shutdown_unblocks_a_waiting_get() -> None:
    queue: WorkQueue[str] = WorkQueue()
    started = threading.Event()
    got: list[str | None] = []

    def worker() -> None:
        started.set()
        got.append(queue.get())

    thread = threading.Thread(target=worker, daemon=True)
    thread.start()
    assert started.wait(5.0)
    queue.shutdown()
    thread.join(5.0)
    assert not thread.is_alive()
    assert got == [None]


def test_after_shutdown_adds_are_ignored_and_queued_keys_drain(queue: WorkQueue[str]) -> None:
    queue.add("a")
    queue.shutdown()
    queue.add("b")
    queue.add_after("c", 1.0)
    assert len(queue) == 1
    assert queue.get() == "a"  # no timeout: returns at once, then None once empty
    assert queue.get() is None


# --- events during a backoff -----------------------------------------------------------------


def test_events_wait_for_a_failed_keys_retry(queue: WorkQueue[str], clock: Clock) -> None:
    assert queue.add_rate_limited("a") == 0.5
    assert queue.add_rate_limited("a") == 1.0  # the log says "retry in 1.0s"
    queue.add("a", respect_backoff=True)  # a Pod event of a, right away
    assert drain(queue) == []
    clock.advance(0.5)
    queue.add("a", respect_backoff=True)
    assert drain(queue) == ["a"]  # the first (0.5 s) entry is due; the backoff still holds
    queue.done("a")
    queue.add("a", respect_backoff=True)
    assert drain(queue) == []
    clock.advance(0.5)
    assert drain(queue) == ["a"]  # the retry, on time
    queue.done("a")
    queue.add("a", respect_backoff=True)  # after the retry is due, events queue again
    assert drain(queue) == ["a"]


def test_an_event_during_a_pass_that_fails_waits_for_its_retry(
    queue: WorkQueue[str], clock: Clock
) -> None:
    """An event of the ModelServing's own objects (a Pod it just created) arrives while its
    pass runs; the pass then fails and logs "retry in 0.5s": the key waits that long, not
    handed out again the moment the pass ends."""
    queue.add("a")
    assert queue.get(timeout=0) == "a"
    queue.add("a", respect_backoff=True)  # during the pass: no backoff yet
    assert queue.add_rate_limited("a") == 0.5  # the pass failed
    queue.done("a")
    assert drain(queue) == []
    clock.advance(0.5)
    assert drain(queue) == ["a"]  # the retry, on time
    assert drain(queue) == []


def test_a_batched_event_during_a_pass_that_fails_waits_for_its_retry(
    queue: WorkQueue[str], clock: Clock
) -> None:
    queue.add("a")
    assert queue.get(timeout=0) == "a"
    queue.add_batched("a", 0.1)  # its window ends within the backoff to come
    assert queue.add_rate_limited("a") == 0.5
    queue.done("a")
    clock.advance(0.1)
    assert drain(queue) == []
    clock.advance(0.4)
    assert drain(queue) == ["a"]


def test_a_change_during_a_pass_that_fails_runs_after_it(
    queue: WorkQueue[str], clock: Clock
) -> None:
    """A change the user made (a plain ``add``) while the pass ran runs right after it, failed
    or not: the new spec may be what fixes it."""
    queue.add("a")
    assert queue.get(timeout=0) == "a"
    queue.add("a", respect_backoff=True)
    queue.add("a")  # then a change, while already queued again
    queue.add_rate_limited("a")
    queue.done("a")
    assert drain(queue) == ["a"]
    queue.add_rate_limited("a")  # this pass failed too, with no change meanwhile
    assert drain(queue) == []


def test_a_change_or_a_success_ends_the_backoff(queue: WorkQueue[str], clock: Clock) -> None:
    queue.add_rate_limited("a")
    queue.add("a")  # a change the user made: now
    assert drain(queue) == ["a"]
    queue.done("a")
    queue.add_rate_limited("b")
    queue.forget("b")  # a pass succeeded
    queue.add("b", respect_backoff=True)
    assert drain(queue) == ["b"]
    queue.add("c", respect_backoff=True)  # never failed
    assert drain(queue) == ["c"]


# --- batching ----------------------------------------------------------------------------------


def test_a_burst_of_batched_adds_makes_one_key_after_the_window(
    queue: WorkQueue[str], clock: Clock
) -> None:
    for _ in range(500):
        queue.add_batched("a", 0.5)
        clock.advance(0.0009)
    assert len(queue) == 1  # one timer for the whole burst
    assert drain(queue) == []
    clock.advance(0.5)
    assert drain(queue) == ["a"]
    queue.add_batched("a", 0.5)  # a new burst starts a new window
    assert drain(queue) == []
    clock.advance(0.5)
    assert drain(queue) == ["a"]


def test_an_event_brings_a_longer_wait_forward_and_the_later_look_goes(
    queue: WorkQueue[str], clock: Clock
) -> None:
    """A rolling update waiting 5 s for a ServingGroup to turn Ready goes on at the end of the
    Ready events' window, not 5 s later; the 5-s look is not made as well."""
    queue.add_batched("a", 5.0)  # the pass asked to look again in 5 s
    clock.advance(1.0)
    queue.add_batched("a", 0.5)  # an event of its Pods
    queue.add_batched("a", 10.0)  # a later, longer wait changes nothing
    assert len(queue) == 1
    clock.advance(0.5)
    assert drain(queue) == ["a"]
    clock.advance(10.0)
    assert drain(queue) == []
    assert len(queue) == 0


def test_a_retry_is_not_lost_behind_a_batching_window(queue: WorkQueue[str], clock: Clock) -> None:
    queue.add_batched("a", 5.0)
    queue.add_after("a", 1.0)
    clock.advance(1.0)
    assert drain(queue) == ["a"]
    clock.advance(4.0)
    assert drain(queue) == ["a"]  # the window asked for before still comes


def test_a_batched_add_of_a_queued_key_changes_nothing(queue: WorkQueue[str], clock: Clock) -> None:
    queue.add("a")
    queue.add_batched("a", 0.5)
    assert drain(queue) == ["a"]
    clock.advance(1.0)
    assert drain(queue) == []


def test_a_batched_add_respects_the_backoff(queue: WorkQueue[str], clock: Clock) -> None:
    assert queue.add_rate_limited("a") == 0.5
    queue.add_batched("a", 0.1)
    clock.advance(0.1)
    assert drain(queue) == []  # the retry comes when due, not with the event
    clock.advance(0.4)
    assert drain(queue) == ["a"]
