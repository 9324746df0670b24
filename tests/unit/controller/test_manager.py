"""Stopping the controller's HTTP servers releases their listening sockets; which watch events
wait for a failed ModelServing's backoff."""

from __future__ import annotations

import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import pytest
from kubernetes import client

from modelserving.api.labels import NAME_LABEL
from modelserving.api.operator import OperatorConfig
from modelserving.controller.manager import (
    DECIDE_SHARE,
    EVENT_BATCH_S,
    M_ARENA_MAX,
    MALLOC_ARENAS,
    PASS_SHARE,
    Controller,
    Health,
    limit_malloc_arenas,
)
from modelserving.controller.queue import WorkQueue
from modelserving.controller.watch import Watch
from modelserving.plugins.exports import set_default_sandbox
from modelserving.workload.observed import NODE_DELETED


def test_stopping_the_health_server_closes_its_socket() -> None:
    leading = threading.Event()
    server = Health(leading).serve(0, "127.0.0.1")
    assert server.socket.fileno() != -1
    Controller._close([server])
    assert server.socket.fileno() == -1


class _Clock:
    def __init__(self) -> None:
        self.now = 100.0

    def __call__(self) -> float:
        return self.now


def _pending(queue: WorkQueue[tuple[str, str]]) -> list[tuple[str, str]]:
    keys = []
    while (key := queue.get(timeout=0)) is not None:
        keys.append(key)
        queue.done(key)
    return keys


@contextmanager
def controller(tmp_path: Path, **settings: Any) -> Iterator[Controller]:
    """A controller without its HTTP servers, its sandbox's cache under ``tmp_path``, and
    ``settings`` (camelCase) on top; its write pool stopped and the default sandbox reset after."""
    config = OperatorConfig.model_validate({"sandbox": {"cacheDir": str(tmp_path)}, **settings})
    ctl = Controller(config, client.ApiClient(), serve_http=False)
    try:
        yield ctl
    finally:
        ctl.writes.shutdown()
        set_default_sandbox(None)


def test_status_and_pod_events_wait_for_the_backoff_but_spec_changes_do_not(
    tmp_path: Path,
) -> None:
    with controller(tmp_path) as ctl:
        clock = _Clock()
        ctl.queue = WorkQueue(clock=clock)
        key = ("ns", "llm")
        ms: dict[str, Any] = {"metadata": {"namespace": "ns", "name": "llm", "generation": 1}}
        ctl.model_serving_event("ADDED", ms)
        assert _pending(ctl.queue) == [key]
        assert ctl.queue.add_rate_limited(key) == 0.5  # the pass failed: "retry in 0.5s"
        ctl.model_serving_event("MODIFIED", {**ms, "status": {"replicas": 1}})  # our status write
        ctl.enqueue(key)  # a Pod event
        assert _pending(ctl.queue) == []
        clock.now += 0.5
        assert _pending(ctl.queue) == [key]  # the retry, when it is due
        assert ctl.queue.add_rate_limited(key) == 1.0
        changed = {"metadata": {**ms["metadata"], "generation": 2}}
        ctl.model_serving_event("MODIFIED", changed)  # the user fixed the spec: now, backoff reset
        assert _pending(ctl.queue) == [key]
        assert ctl.queue.failures(key) == 0
        ctl.queue.add_rate_limited(key)
        ctl.model_serving_event("DELETED", changed)
        assert _pending(ctl.queue) == [key]


def test_the_watch_tells_a_running_pass_that_its_model_serving_is_deleted(tmp_path: Path) -> None:
    with controller(tmp_path) as ctl:
        key = ("ns", "llm")
        meta = {"namespace": "ns", "name": "llm", "generation": 1}
        ctl.model_serving_event("ADDED", {"metadata": meta})
        assert not ctl.reconciler.stopping(key)
        ctl.model_serving_event("MODIFIED", {"metadata": {**meta, "deletionTimestamp": "now"}})
        assert ctl.reconciler.stopping(key)
        ctl.model_serving_event("DELETED", {"metadata": meta})
        assert ctl.reconciler.stopping(key)
        ctl.model_serving_event("ADDED", {"metadata": meta})  # made again under the same name
        assert not ctl.reconciler.stopping(key)


def test_events_of_a_model_serving_with_long_passes_gather_longer(tmp_path: Path) -> None:
    with controller(tmp_path) as ctl:
        clock = _Clock()
        ctl.queue = WorkQueue(clock=clock)
        pod = {"metadata": {"namespace": "ns", "name": "p", "labels": {NAME_LABEL: "big"}}}
        ctl.owned_event("pods", "MODIFIED", pod)
        clock.now += EVENT_BATCH_S
        assert _pending(ctl.queue) == [("ns", "big")]
        ctl._pass_seconds[("ns", "big")] = 1.5  # a pass over 10,000 Pods
        ctl.owned_event("pods", "MODIFIED", pod)
        clock.now += 2.9
        assert _pending(ctl.queue) == []
        clock.now += 0.1
        assert _pending(ctl.queue) == [("ns", "big")]  # 2 x the last pass: 3 s


def test_events_of_a_model_serving_whose_decision_is_long_gather_for_its_share(
    tmp_path: Path,
) -> None:
    """A pass of a big ModelServing that decided for 0.2 s of CPU (and spent little else) makes
    its next events gather for DECIDE_SHARE x 0.2 s: 4 s."""
    with controller(tmp_path) as ctl:
        clock = _Clock()
        ctl.queue = WorkQueue(clock=clock)
        key = ("ns", "big")
        pod = {"metadata": {"namespace": "ns", "name": "p", "labels": {NAME_LABEL: "big"}}}
        ctl._pass_seconds[key] = 0.25
        ctl.reconciler.decide_seconds[key] = 0.2
        ctl.owned_event("pods", "MODIFIED", pod)
        clock.now += DECIDE_SHARE * 0.2 - 0.1
        assert _pending(ctl.queue) == []
        clock.now += 0.1
        assert _pending(ctl.queue) == [key]
        ctl.reconciler.forget(key)  # a small decision again: the least window
        ctl.owned_event("pods", "MODIFIED", pod)
        clock.now += max(EVENT_BATCH_S, PASS_SHARE * 0.25)
        assert _pending(ctl.queue) == [key]


def test_pods_and_services_are_watched_in_each_watched_namespace_and_every_node(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(Watch, "start", lambda self: self)  # no threads
    for namespaces, expected in (([], [None]), (["a", "b"], ["a", "b"])):
        with controller(tmp_path, watchNamespaces=namespaces) as ctl:
            watches = ctl._watches()
            owned = [w for w in watches if w.res.plural != "nodes"]
            assert sorted((w.res.plural, w.namespace or "") for w in owned) == sorted(
                (plural, ns or "") for plural in ("pods", "services") for ns in expected
            )
            assert {w.selector for w in owned} == {NAME_LABEL}
            (nodes,) = (w for w in watches if w.res.plural == "nodes")
            assert nodes.namespace is None and nodes.selector == ""  # every Node
            assert nodes.handler == ctl.node_event and nodes.listed == ctl._nodes_listed
            ctl.watches = watches
            for watch in watches:
                watch.events = 2
            assert ctl.watch_events == 2 * len(owned)  # the Nodes' heartbeats are not counted


def test_pod_groups_are_watched_from_the_first_pass_that_asks_while_watching(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(Watch, "start", lambda self: self)  # no threads
    with controller(tmp_path, watchNamespaces=["a", "b"]) as ctl:
        assert ctl.reconciler.pod_groups_watched == ctl.watch_pod_groups
        assert not ctl.watch_pod_groups()  # not running: nothing started, passes list them
        assert ctl.watches == []
        ctl._watching = True
        assert ctl.watch_pod_groups() and ctl.watch_pod_groups()
        assert sorted((w.res.plural, w.namespace) for w in ctl.watches) == [
            ("podgroups", "a"),
            ("podgroups", "b"),
        ]
        assert {w.selector for w in ctl.watches} == {NAME_LABEL}


def test_a_node_missing_from_a_list_after_a_gone_watch_is_taken_as_deleted(
    tmp_path: Path,
) -> None:
    """A Node deleted while the Node watch was gone sent no event: once the Nodes are listed
    again, it is taken as deleted and every ModelServing gets a pass; a list that misses none
    queues nothing."""
    with controller(tmp_path) as ctl:
        queued: list[Any] = []
        ctl.known = {("a", "x"), ("b", "y")}
        ctl.enqueue = lambda key, change=False: queued.append(key)  # type: ignore[method-assign]
        for name in ("n1", "n2"):
            ctl.node_event("ADDED", {"metadata": {"name": name}})
        ctl._nodes_listed([{"metadata": {"name": "n1"}}, {"metadata": {"name": "n2"}}])
        assert queued == []
        ctl._nodes_listed([{"metadata": {"name": "n1"}}])
        assert sorted(queued) == [("a", "x"), ("b", "y")]
        assert ctl.reconciler.lost_nodes() == {"n2": NODE_DELETED}


def test_writes_are_paced_and_the_pod_watch_feeds_the_start_backlog(tmp_path: Path) -> None:
    with controller(tmp_path) as ctl:
        assert ctl.kube.pacer is ctl.pacer is not None
        assert ctl.reconciler.backlog is ctl.backlog is not None
        meta = {"namespace": "ns", "name": "p", "uid": "u1", "labels": {NAME_LABEL: "llm"}}
        ctl.backlog.created({"metadata": meta, "spec": {}, "status": {"phase": "Pending"}})
        assert b"modelserving_pods_starting 1.0" in ctl.metrics.render()
        running = {"metadata": meta, "spec": {"nodeName": "n"}, "status": {"phase": "Running"}}
        ctl.owned_event("services", "MODIFIED", running)  # not a Pod: not counted
        assert ctl.backlog.count() == 1
        ctl.owned_event("pods", "MODIFIED", running)
        assert ctl.backlog.count() == 0
        ctl.pacer.throttled(0)
        rendered = ctl.metrics.render()
        assert b"modelserving_api_writes_limit 2.0" in rendered  # a 429 halves the 4 writes
        assert b"modelserving_api_throttled_total 1.0" in rendered


def test_fixed_writes_when_adaptive_writes_is_off(tmp_path: Path) -> None:
    with controller(tmp_path, concurrency={"adaptiveWrites": False}) as ctl:
        assert ctl.kube.pacer is None and ctl.reconciler.backlog is None


def test_a_pass_that_waits_for_the_api_server_does_not_widen_the_event_window(
    tmp_path: Path,
) -> None:
    """The window is twice a pass's CPU time: a pass that spends a second waiting (for its
    writes) leaves the next events gathering for 0.5 s, not 2 s."""
    with controller(tmp_path) as ctl:
        ctl.reconciler.reconcile = lambda key: time.sleep(1.0)  # type: ignore[method-assign]
        ctl.queue.add(("ns", "big"))
        worker = threading.Thread(target=ctl._work)
        worker.start()
        while not ctl.passes[("ns", "big")]:
            time.sleep(0.05)
        ctl.queue.shutdown()
        worker.join(5)
        assert ctl._pass_seconds[("ns", "big")] < EVENT_BATCH_S / PASS_SHARE


def test_malloc_arenas_are_limited_unless_the_operator_chose(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    calls: list[tuple[int, int]] = []

    class Libc:
        def __init__(self, _name: Any) -> None:
            self.mallopt = self

        def __call__(self, param: int, value: int) -> int:
            calls.append((param, value))
            return 1

    monkeypatch.delenv("MALLOC_ARENA_MAX", raising=False)
    monkeypatch.setattr("modelserving.controller.manager.ctypes.CDLL", Libc)
    assert limit_malloc_arenas() is True
    assert calls == [(M_ARENA_MAX, MALLOC_ARENAS)] == [(-8, 2)]
    monkeypatch.setenv("MALLOC_ARENA_MAX", "4")
    assert limit_malloc_arenas() is False and len(calls) == 1


def test_without_mallopt_the_arenas_are_left_alone(monkeypatch: pytest.MonkeyPatch) -> None:
    def no_libc(_name: Any) -> Any:
        raise OSError("no C library")

    monkeypatch.delenv("MALLOC_ARENA_MAX", raising=False)
    monkeypatch.setattr("modelserving.controller.manager.ctypes.CDLL", no_libc)
    assert limit_malloc_arenas() is False


def test_a_pass_that_asks_to_look_again_waits_for_its_window(tmp_path: Path) -> None:
    """A pass asking to be looked at again in 1 s, for a ModelServing whose passes repeat
    0.2 s of CPU, comes back after DECIDE_SHARE x 0.2 s (4 s), gathered with the events
    meanwhile; for a small one, an event meanwhile brings the look forward to the end of the
    event's own window (EVENT_BATCH_S), as a rolling update waiting for Pods to turn Ready
    goes on once they are."""
    for decided, due in ((0.2, DECIDE_SHARE * 0.2), (0.0, EVENT_BATCH_S)):
        with controller(tmp_path) as ctl:
            clock = _Clock()
            ctl.queue = WorkQueue(clock=clock)
            key = ("ns", "big")

            def reconcile(k: tuple[str, str], decided: float = decided) -> float:
                ctl.reconciler.decide_seconds[k] = decided
                return 1.0

            ctl.reconciler.reconcile = reconcile  # type: ignore[method-assign,assignment]
            ctl.queue.add(key)
            worker = threading.Thread(target=ctl._work, daemon=True)
            worker.start()
            try:
                _look_again(ctl, clock, key, due)
            finally:
                ctl.queue.shutdown()
                worker.join(5)


def _look_again(ctl: Controller, clock: _Clock, key: tuple[str, str], due: float) -> None:
    """The first pass has run; the second comes ``due`` seconds later, not before."""
    while not ctl.passes[key]:
        time.sleep(0.01)
    pod = {"metadata": {"namespace": "ns", "name": "p", "labels": {NAME_LABEL: "big"}}}
    ctl.owned_event("pods", "MODIFIED", pod)

    def advance(seconds: float) -> None:
        clock.now += seconds
        with ctl.queue._cond:  # the worker waits in real time: wake it to look
            ctl.queue._cond.notify_all()
        time.sleep(0.1)

    advance(due - 0.1)
    assert ctl.passes[key] == 1
    advance(0.1)
    for _ in range(100):
        if ctl.passes[key] == 2:
            break
        time.sleep(0.01)
    assert ctl.passes[key] == 2


def test_a_pod_relabelled_away_queues_the_model_serving_it_left(tmp_path: Path) -> None:
    with controller(tmp_path) as ctl:
        clock = _Clock()
        ctl.queue = WorkQueue(clock=clock)
        meta = {"namespace": "ns", "name": "p", "resourceVersion": "1"}
        ctl.owned_event("pods", "MODIFIED", {"metadata": {**meta, "labels": {NAME_LABEL: "a"}}})
        clock.now += EVENT_BATCH_S
        assert _pending(ctl.queue) == [("ns", "a")]
        moved = {**meta, "resourceVersion": "2", "labels": {NAME_LABEL: "b"}}
        ctl.owned_event("pods", "MODIFIED", {"metadata": moved})
        clock.now += EVENT_BATCH_S
        assert sorted(_pending(ctl.queue)) == [("ns", "a"), ("ns", "b")]
        assert ctl.cache.by_name("pods", "ns", "a") == {}


def test_a_resync_queues_every_model_serving_and_keeps_the_cache(tmp_path: Path) -> None:
    """A resync looks again from the cache, as an informer's does: no list of every Pod (that
    was O(Pods) per resync, so O(Pods^2) over a long rolling update of a big ModelServing)."""
    with controller(tmp_path, resyncSeconds=1) as ctl:
        clock = _Clock()
        ctl.queue = WorkQueue(clock=clock)
        ctl.model_serving_event("ADDED", {"metadata": {"namespace": "ns", "name": "llm"}})
        meta = {"namespace": "ns", "name": "p", "uid": "u1", "resourceVersion": "5"}
        pod = {"metadata": {**meta, "labels": {NAME_LABEL: "llm"}}}
        ctl.cache.prime("pods", "ns", "llm", [pod], "5")
        assert _pending(ctl.queue) == [("ns", "llm")]
        stop = threading.Event()
        resync = threading.Thread(target=ctl._resync, args=(stop,), daemon=True)
        resync.start()
        deadline = time.monotonic() + 10
        queued: list[tuple[str, str]] = []
        while not queued and time.monotonic() < deadline:
            time.sleep(0.05)
            queued = _pending(ctl.queue)
        stop.set()
        resync.join(5)
        assert queued == [("ns", "llm")]
        assert ctl.cache.primed("pods", "ns", "llm")
        assert set(ctl.cache.by_name("pods", "ns", "llm")) == {"p"}
