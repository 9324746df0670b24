"""The write pacer and the start backlog: what slows the controller's writes, and what does not."""

from __future__ import annotations

import threading
import time
from typing import Any

import pytest

from modelserving.api.operator import OperatorConfig
from modelserving.controller.kube import ApiError, Kube
from modelserving.controller.pacing import (
    LATENCY_SLACK_S,
    MAX_RETRY_AFTER_S,
    StartBacklog,
    WritePacer,
    retry_after_seconds,
)


class FakeClock:
    def __init__(self) -> None:
        self.now = 100.0

    def __call__(self) -> float:
        return self.now


def writes(pacer: WritePacer, clock: FakeClock, n: int, seconds: float) -> None:
    """``n`` writes, one after the other, each taking ``seconds`` on ``clock``."""
    for _ in range(n):
        with pacer.slot():
            clock.now += seconds


def window(pacer: WritePacer, clock: FakeClock, seconds: float) -> None:
    writes(pacer, clock, pacer.limit, seconds)


# --- the API server's latency -------------------------------------------------------------------


def test_a_slow_window_takes_a_quarter_off_and_healthy_ones_add_back_one_each() -> None:
    clock = FakeClock()
    changes: list[int] = []
    pacer = WritePacer(8, latency_factor=3.0, clock=clock, on_change=changes.append)
    window(pacer, clock, 0.005)  # the baseline
    assert pacer.limit == 8
    window(pacer, clock, 0.060)
    assert pacer.limit == 6
    window(pacer, clock, 0.060)  # still slow
    assert pacer.limit == 5
    for expected in (6, 7, 8, 8):
        window(pacer, clock, 0.005)
        assert pacer.limit == expected
    assert changes == [6, 5, 6, 7, 8]


def test_noise_within_the_factor_or_the_slack_changes_nothing() -> None:
    clock = FakeClock()
    pacer = WritePacer(4, latency_factor=3.0, clock=clock)
    window(pacer, clock, 0.010)
    window(pacer, clock, 0.029)  # under 3 x 10 ms
    assert pacer.limit == 4
    fast = WritePacer(4, latency_factor=3.0, clock=clock)
    window(fast, clock, 0.001)
    window(fast, clock, 0.001 + LATENCY_SLACK_S * 0.9)  # 19x slower, but by under the slack
    assert fast.limit == 4


def test_the_limit_never_falls_below_one() -> None:
    clock = FakeClock()
    pacer = WritePacer(2, clock=clock)
    window(pacer, clock, 0.001)
    for _ in range(5):
        window(pacer, clock, 1.0)
    assert pacer.limit == 1
    for _ in range(3):
        pacer.throttled(0)
    assert pacer.limit == 1


# --- 429 -----------------------------------------------------------------------------------------


def test_a_429_halves_the_limit_and_holds_every_write_for_its_retry_after() -> None:
    throttles: list[int] = []
    pacer = WritePacer(16, on_throttle=lambda: throttles.append(1))
    pacer.throttled(0.2)
    assert (pacer.limit, pacer.throttles, len(throttles)) == (8, 1, 1)
    began = time.monotonic()
    with pacer.slot():
        waited = time.monotonic() - began
    assert waited >= 0.15  # a lower bound only: the pause cannot end early


def test_a_retry_after_is_capped() -> None:
    clock = FakeClock()
    pacer = WritePacer(4, clock=clock)
    pacer.throttled(3600)
    clock.now += MAX_RETRY_AFTER_S + 0.001
    with pacer.slot():  # returns at once: the pause ended at the cap
        pass


def test_at_most_the_limit_is_in_flight() -> None:
    pacer = WritePacer(4)
    pacer.throttled(0)  # limit 2
    inside = threading.Semaphore(0)
    release = threading.Event()
    entered = []

    def write(i: int) -> None:
        with pacer.slot():
            entered.append(i)
            inside.release()
            release.wait(5)

    threads = [threading.Thread(target=write, args=(i,)) for i in range(3)]
    for t in threads:
        t.start()
    assert inside.acquire(timeout=5) and inside.acquire(timeout=5)
    assert not inside.acquire(timeout=0.3)  # the third waits for a slot
    assert len(entered) == 2
    release.set()
    for t in threads:
        t.join(5)
    assert len(entered) == 3


@pytest.mark.parametrize(
    ("headers", "seconds"),
    [
        ({"Retry-After": "3"}, 3.0),
        ({"retry-after": "0"}, 0.0),
        ({}, 1.0),
        ({"Retry-After": "soon"}, 1.0),
    ],
)
def test_retry_after_is_read_in_seconds(headers: dict[str, str], seconds: float) -> None:
    assert retry_after_seconds(headers) == seconds


# --- Kube sends a throttled write again ----------------------------------------------------------


class Answer:
    def __init__(self, status: int, body: bytes = b"{}", headers: dict[str, str] | None = None):
        self.status = status
        self._body = body
        self._headers = headers or {}

    def read(self) -> bytes:
        return self._body

    def getheaders(self) -> dict[str, str]:
        return self._headers


class FakeApi:
    """What Kube uses of the client's ApiClient: answers from a script, requests recorded."""

    def __init__(self, answers: list[Answer]) -> None:
        self.answers = answers
        self.sent: list[str] = []
        self.configuration = type("C", (), {"host": "https://api"})()
        self.rest_client = self

    def update_params_for_auth(self, *args: Any) -> None:
        pass

    def request(self, method: str, url: str, **kwargs: Any) -> Answer:
        self.sent.append(method)
        return self.answers.pop(0)


THROTTLED = Answer(429, b'{"message": "too many requests"}', {"Retry-After": "0"})


def test_a_write_answered_429_is_sent_again_after_the_pause() -> None:
    api = FakeApi([THROTTLED, Answer(201, b'{"kind": "Pod"}')])
    pacer = WritePacer(16)
    assert Kube(api, pacer).request("POST", "/api/v1/namespaces/a/pods", {}) == {"kind": "Pod"}
    assert api.sent == ["POST", "POST"]
    assert (pacer.throttles, pacer.limit) == (1, 8)


def test_throttled_retries_end() -> None:
    api = FakeApi([THROTTLED] * 10)
    with pytest.raises(ApiError) as failed:
        Kube(api, WritePacer(16)).request("DELETE", "/api/v1/namespaces/a/pods/p")
    assert failed.value.status == 429
    assert len(api.sent) == 6  # the first and five more


def test_reads_and_unpaced_writes_are_not_retried() -> None:
    for kube in (Kube(FakeApi([THROTTLED]), WritePacer(4)), Kube(FakeApi([THROTTLED]))):
        method = "GET" if kube.pacer is not None else "POST"
        with pytest.raises(ApiError):
            kube.request(method, "/api/v1/pods")


# --- the start backlog ---------------------------------------------------------------------------


def pod(uid: str, node: str = "", phase: str = "Pending") -> dict[str, Any]:
    return {"metadata": {"uid": uid}, "spec": {"nodeName": node}, "status": {"phase": phase}}


def test_a_pod_counts_until_it_runs_or_goes() -> None:
    backlog = StartBacklog(10)
    for uid in "abcd":
        backlog.created(pod(uid))
    assert backlog.count() == 4
    backlog.observed("MODIFIED", pod("a", node="n1"))  # scheduled, not running yet
    assert backlog.count() == 4
    backlog.observed("MODIFIED", pod("a", node="n1", phase="Running"))
    backlog.observed("DELETED", pod("b"))
    backlog.observed("MODIFIED", pod("x", node="n1", phase="Running"))  # not ours: ignored
    assert backlog.count() == 2


def test_a_pod_stops_counting_after_the_window() -> None:
    clock = FakeClock()
    backlog = StartBacklog(10, window_s=30, clock=clock)
    backlog.created(pod("old"))
    clock.now += 20
    backlog.created(pod("new"))
    clock.now += 11
    assert backlog.count() == 1
    clock.now += 20
    assert backlog.count() == 0


def test_waiting_for_room_ends_when_a_pod_starts() -> None:
    backlog = StartBacklog(2)
    backlog.created(pod("a"))
    backlog.created(pod("b"))
    timer = threading.Timer(0.2, backlog.observed, ("MODIFIED", pod("a", "n", "Running")))
    timer.start()
    waited = backlog.wait_for_room(lambda: False)
    timer.join()
    assert waited >= 0.15 and backlog.count() == 1


def test_waiting_for_room_ends_when_the_pass_stops_and_never_starts_when_off() -> None:
    full = StartBacklog(1)
    full.created(pod("a"))
    stop = threading.Event()
    threading.Timer(0.2, stop.set).start()
    assert full.wait_for_room(stop.is_set) >= 0.15
    off = StartBacklog(0)
    for uid in "abc":
        off.created(pod(uid))
    assert off.wait_for_room(lambda: False) == 0.0


# --- the operator settings ------------------------------------------------------------------------


def test_the_settings_and_their_defaults() -> None:
    concurrency = OperatorConfig().concurrency
    assert (concurrency.adaptive_writes, concurrency.write_latency_factor) == (True, 3.0)
    assert (concurrency.max_starting_pods, concurrency.start_window_seconds) == (1024, 30)
    parsed = OperatorConfig.model_validate(
        {"concurrency": {"adaptiveWrites": False, "maxStartingPods": 0}}
    )
    assert not parsed.concurrency.adaptive_writes
    with pytest.raises(ValueError, match="writeLatencyFactor"):
        OperatorConfig.model_validate({"concurrency": {"writeLatencyFactor": 1.0}})


def test_a_finished_write_wakes_only_as_many_waiters_as_there_are_free_slots() -> None:
    """Ten writers behind one slot: each finished write wakes one of them, not all that wait
    (waking every waiter for every write was 6 % of the controller's CPU at 10,000 Pods)."""
    pacer = WritePacer(1)  # a ceiling of one: the limit stays 1
    woken = []
    plain_wait = pacer._cond.wait

    def counted_wait(timeout: float | None = None) -> bool:
        got = plain_wait(timeout)
        woken.append(got)
        return got

    pacer._cond.wait = counted_wait  # type: ignore[method-assign]
    gate = threading.Event()
    done = []

    def write(i: int) -> None:
        with pacer.slot():
            gate.wait(5)
            time.sleep(0.02)  # a write takes a while: the others are back waiting by its end
            done.append(i)

    threads = [threading.Thread(target=write, args=(i,)) for i in range(10)]
    for t in threads:
        t.start()
    time.sleep(0.3)  # one holds the slot, nine wait
    gate.set()
    for t in threads:
        t.join(10)
    assert sorted(done) == list(range(10))
    # one wake per waiter (waking all of them at each write would be 9 + 8 + ... + 1 = 45)
    assert len(woken) < 18
