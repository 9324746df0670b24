"""Signals during a dev cluster start become an exception, then reach the previous handler."""

from __future__ import annotations

import os
import signal
import sys
import threading
import time
from collections.abc import Iterator
from types import FrameType
from typing import Any

import pytest

from modelserving.devcluster import cluster
from modelserving.devcluster.interrupts import Interrupted, SignalGuard


@pytest.fixture
def seen() -> Iterator[list[int]]:
    """Recording handlers for SIGTERM and SIGHUP (the test process must not die of them)."""
    received: list[int] = []

    def record(signum: int, _frame: FrameType | None) -> None:
        received.append(signum)

    previous = {s: signal.signal(s, record) for s in (signal.SIGTERM, signal.SIGHUP)}
    yield received
    for signum, handler in previous.items():
        signal.signal(signum, handler)


def _signalled_start(signum: int, steps: list[str]) -> None:
    """A start that receives ``signum`` while it waits."""
    with SignalGuard():
        steps.append("waiting")
        os.kill(os.getpid(), signum)
        time.sleep(5)  # interrupted: the handler raises as soon as the signal is in
        steps.append("not reached")


def test_a_signal_raises_where_the_start_is_then_reaches_the_previous_handler(
    seen: list[int],
) -> None:
    steps: list[str] = []
    with pytest.raises(Interrupted, match="interrupted by SIGTERM") as caught:
        _signalled_start(signal.SIGTERM, steps)
    assert caught.value.signum == signal.SIGTERM
    assert steps == ["waiting"]
    assert seen == [signal.SIGTERM]
    assert signal.getsignal(signal.SIGTERM).__name__ == "record"  # type: ignore[union-attr]


def _start_with_held_spawn(steps: list[str]) -> None:
    with SignalGuard() as guard:
        with guard.held():
            os.kill(os.getpid(), signal.SIGHUP)
            steps.append("recorded the process")
        steps.append("not reached")


def test_a_held_section_is_not_split(seen: list[int]) -> None:
    steps: list[str] = []
    with pytest.raises(Interrupted):
        _start_with_held_spawn(steps)
    assert steps == ["recorded the process"]
    assert seen == [signal.SIGHUP]


def _failed_start_signalled_during_cleanup(steps: list[str]) -> None:
    with SignalGuard() as guard:
        try:
            raise RuntimeError("timed out")
        except RuntimeError:
            guard.disarm()
            os.kill(os.getpid(), signal.SIGTERM)  # a second attempt to stop us, mid-cleanup
            steps.append("cleaned up")
            raise


def test_a_disarmed_guard_lets_the_cleanup_finish(seen: list[int]) -> None:
    steps: list[str] = []
    with pytest.raises(RuntimeError, match="timed out"):
        _failed_start_signalled_during_cleanup(steps)
    assert steps == ["cleaned up"]
    assert seen == [signal.SIGTERM]


def _start_cleaning_up_on_interrupt(steps: list[str]) -> None:
    with SignalGuard():
        try:
            _signalled_start(signal.SIGINT, steps)
        except Interrupted:
            steps.append("cleaned up")
            raise


def test_sigint_becomes_keyboard_interrupt_after_the_cleanup() -> None:
    # Python's own SIGINT handler, even when this run inherited SIGINT ignored (a background
    # job of a non-interactive shell does).
    previous = signal.signal(signal.SIGINT, signal.default_int_handler)
    try:
        steps: list[str] = []
        with pytest.raises(KeyboardInterrupt):
            _start_cleaning_up_on_interrupt(steps)
        assert steps == ["waiting", "cleaned up"]
        assert signal.getsignal(signal.SIGINT) is signal.default_int_handler
    finally:
        signal.signal(signal.SIGINT, previous)


def test_ignored_signals_stay_ignored(seen: list[int]) -> None:
    signal.signal(signal.SIGHUP, signal.SIG_IGN)  # as under nohup
    with SignalGuard():
        os.kill(os.getpid(), signal.SIGHUP)
    assert signal.getsignal(signal.SIGHUP) == signal.SIG_IGN
    assert seen == []


def test_outside_the_main_thread_the_guard_does_nothing(seen: list[int]) -> None:
    handlers = []

    def start() -> None:
        with SignalGuard():
            handlers.append(signal.getsignal(signal.SIGTERM))

    thread = threading.Thread(target=start)
    thread.start()
    thread.join()
    assert handlers == [signal.getsignal(signal.SIGTERM)]


class _DroppedSocket:
    """Receives the signal in its finalizer, where Python prints an exception and drops it."""

    def __del__(self) -> None:
        os.kill(os.getpid(), signal.SIGTERM)


def test_a_signal_whose_exception_a_finalizer_dropped_still_stops_the_wait(
    seen: list[int], monkeypatch: pytest.MonkeyPatch
) -> None:
    """Found in a full test run under load: SIGTERM landed in a socket's finalizer during the
    wait for kwok's Nodes, Python dropped the Interrupted raised there, and the start went on
    to its end. The wait loop raises it between its polls."""
    dropped: list[Any] = []
    monkeypatch.setattr(sys, "unraisablehook", lambda info: dropped.append(info.exc_type))
    polls: list[int] = []

    def poll() -> bool:
        polls.append(1)
        return False

    with SignalGuard() as guard:
        _DroppedSocket()  # collected at once: the signal arrives inside __del__
        assert guard.received == signal.SIGTERM and dropped == [Interrupted]
        with pytest.raises(Interrupted, match="interrupted by SIGTERM"):
            cluster._wait("2 Ready kwok Nodes", "kwok", poll, 60, [], guard.raise_if_due)
    assert polls == []
    assert seen == [signal.SIGTERM]
