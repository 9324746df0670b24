"""A pass reads its ModelServing as the watch and its own status writes last showed it
(``LatestObjects``), and the watch's echo of the controller's own status write queues no pass."""

from __future__ import annotations

import copy
from pathlib import Path
from typing import Any

import pytest

from modelserving.controller.cache import FRESH_S, LatestObjects
from modelserving.controller.kube import MODEL_SERVINGS, PODS
from modelserving.controller.queue import WorkQueue
from modelserving.controller.reconciler import Reconciler
from tests.unit.controller.test_manager import _Clock, _pending, controller
from tests.unit.controller.test_reconciler import KEY, NS, FakeKube, model_serving

pytest_plugins = ["tests.unit.controller.test_reconciler"]

Obj = dict[str, Any]


def ms(version: int, uid: str = "u1", **spec: Any) -> Obj:
    meta = {"namespace": NS, "name": "sample", "uid": uid, "resourceVersion": str(version)}
    return {"metadata": meta, "spec": spec}


class Clock:
    def __init__(self) -> None:
        self.now = 1000.0

    def __call__(self) -> float:
        return self.now


def test_the_newest_copy_is_kept_and_an_echo_or_older_state_is_not_new() -> None:
    latest = LatestObjects(clock=Clock())
    assert latest.offer(ms(5, replicas=1))
    assert latest.offer(ms(7, replicas=2))
    assert not latest.offer(ms(6, replicas=9))  # the watch's echo of an earlier state
    assert not latest.offer(ms(7, replicas=2))  # the echo of what is kept
    assert latest.get(NS, "sample") == ms(7, replicas=2)
    assert latest.offer(ms(9, uid="u2"))  # made again under the name: another object
    assert latest.get(NS, "sample") == ms(9, uid="u2")
    unversioned = {"metadata": {"namespace": NS, "name": "sample", "uid": "u2"}}
    assert latest.offer(unversioned) and latest.offer(unversioned)  # no order known: new
    latest.gone(NS, "sample")
    assert latest.get(NS, "sample") is None


def test_a_gone_object_is_not_brought_back_by_a_late_answer() -> None:
    """The answer to a status write can be offered after the watch told its ModelServing
    deleted, and after the events of one made again under the name."""
    latest = LatestObjects(clock=Clock())
    latest.offer(ms(10))
    latest.gone(NS, "sample", "u1")  # the watch: DELETED
    assert not latest.offer(ms(11))  # the late answer about u1
    assert latest.get(NS, "sample") is None
    assert latest.offer(ms(13, uid="u2"))  # made again
    assert not latest.offer(ms(12))  # older than what is kept, whatever its UID
    assert latest.get(NS, "sample") == ms(13, uid="u2")
    latest.gone(NS, "sample", "u1")  # a DELETED of the old object, late: the new one stays
    assert latest.get(NS, "sample") == ms(13, uid="u2")
    latest.gone(NS, "sample")  # not found: whatever is kept is gone
    assert latest.get(NS, "sample") is None
    assert not latest.offer(ms(14, uid="u2"))


def test_a_copy_nothing_confirmed_for_a_while_is_not_read() -> None:
    clock = Clock()
    latest = LatestObjects(clock=clock)
    latest.offer(ms(5))
    clock.now += FRESH_S
    assert latest.get(NS, "sample") == ms(5)
    latest.offer(ms(5))  # the watch showed it again: confirmed
    clock.now += FRESH_S
    assert latest.get(NS, "sample") == ms(5)
    clock.now += 0.001
    assert latest.get(NS, "sample") is None


@pytest.fixture
def clock(kube: FakeKube, rec: Reconciler) -> Clock:
    """The clock of the reconciler's kept copies; a ModelServing of one replica stored."""
    now = Clock()
    rec.model_servings = LatestObjects(clock=now)
    kube.put(MODEL_SERVINGS, model_serving(replicas=1))
    return now


def kept(rec: Reconciler) -> LatestObjects:
    assert rec.model_servings is not None
    return rec.model_servings


def _counted_gets(kube: FakeKube, monkeypatch: pytest.MonkeyPatch) -> list[str]:
    """The names of the ModelServings ``kube`` is asked for from now on."""
    asked: list[str] = []
    get = kube.get

    def counted(res: Any, namespace: str | None, name: str) -> Obj | None:
        if res is MODEL_SERVINGS:
            asked.append(name)
        return get(res, namespace, name)

    monkeypatch.setattr(kube, "get", counted)
    return asked


def test_a_pass_reads_the_fresh_copy_and_its_own_status_write(
    kube: FakeKube, rec: Reconciler, clock: Clock, monkeypatch: pytest.MonkeyPatch
) -> None:
    asked = _counted_gets(kube, monkeypatch)
    rec.reconcile(KEY)
    assert asked == ["sample"]  # nothing kept yet: read from the API
    rec.reconcile(KEY)  # the Pods exist now: new counts, written
    assert asked == ["sample"]  # the answer to its status write, kept
    assert kube.count("patch", MODEL_SERVINGS, "status") == 2
    rec.reconcile(KEY)
    assert asked == ["sample"]
    assert kube.count("patch", MODEL_SERVINGS, "status") == 2  # that status is already there
    stored = kube.stored(MODEL_SERVINGS, "sample")
    assert stored is not None
    scaled = copy.deepcopy(stored)
    scaled["spec"]["replicas"] = 2
    scaled["metadata"]["resourceVersion"] = str(int(stored["metadata"]["resourceVersion"]) + 1)
    kept(rec).offer(scaled)  # the watch shows a new spec
    made = kube.count("create", PODS)
    before = copy.deepcopy(scaled)
    rec.reconcile(KEY)
    assert scaled == before  # shared with the watch: a pass changes nothing in it
    assert asked == ["sample"]
    assert kube.count("create", PODS) > made  # acted on the watch's copy
    clock.now += FRESH_S + 1
    rec.reconcile(KEY)
    assert asked == ["sample", "sample"]  # too old: read again


def test_a_model_serving_gone_under_its_status_write_is_read_again(
    kube: FakeKube, rec: Reconciler, clock: Clock, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A deletion the watch never told (it listed again): the status write's 404 drops the kept
    copy, and the next pass finds the ModelServing gone."""
    rec.reconcile(KEY)
    stored = kube.stored(MODEL_SERVINGS, "sample")
    assert stored is not None
    moved = copy.deepcopy(stored)
    moved["spec"]["replicas"] = 2  # a new status to write
    moved["metadata"]["resourceVersion"] = str(int(stored["metadata"]["resourceVersion"]) + 1)
    kept(rec).offer(moved)
    kube.remove(MODEL_SERVINGS, "sample")
    for name in list(kube.all(PODS)):
        kube.remove(PODS, name)
    asked = _counted_gets(kube, monkeypatch)
    rec.reconcile(KEY)  # writes Pods for the copy, then its status write is refused: 404
    assert kept(rec).get(NS, "sample") is None
    made = kube.count("create", PODS)
    rec.reconcile(KEY)
    assert asked == ["sample"]
    assert kube.count("create", PODS) == made  # found gone: nothing more


def test_without_kept_copies_every_pass_reads_the_api(
    kube: FakeKube, rec: Reconciler, monkeypatch: pytest.MonkeyPatch
) -> None:
    kube.put(MODEL_SERVINGS, model_serving(replicas=1))
    asked = _counted_gets(kube, monkeypatch)
    rec.reconcile(KEY)
    rec.reconcile(KEY)
    assert asked == ["sample", "sample"]


def test_the_echo_of_our_own_status_write_queues_no_pass(tmp_path: Path) -> None:
    with controller(tmp_path) as ctl:
        clock = _Clock()
        ctl.queue = WorkQueue(clock=clock)
        key = ("ns", "llm")
        meta = {"namespace": "ns", "name": "llm", "uid": "u", "generation": 1}
        ctl.model_serving_event("ADDED", {"metadata": {**meta, "resourceVersion": "10"}})
        assert _pending(ctl.queue) == [key]
        written = {"metadata": {**meta, "resourceVersion": "11"}, "status": {"replicas": 1}}
        ctl.model_servings.offer(written)  # the answer to the pass's status write
        ctl.model_serving_event("MODIFIED", written)  # its echo
        clock.now += 10
        assert _pending(ctl.queue) == []
        other = {"metadata": {**meta, "resourceVersion": "12"}, "status": {"replicas": 0}}
        ctl.model_serving_event("MODIFIED", other)  # someone else wrote the status
        clock.now += 10
        assert _pending(ctl.queue) == [key]
        assert ctl.model_servings.get("ns", "llm") == other
        assert ctl.reconciler.model_servings is ctl.model_servings
        ctl.model_serving_event("DELETED", other)
        assert ctl.model_servings.get("ns", "llm") is None


def test_what_a_pass_reads_from_the_api_is_kept(
    kube: FakeKube, rec: Reconciler, clock: Clock, monkeypatch: pytest.MonkeyPatch
) -> None:
    for _ in range(3):
        rec.reconcile(KEY)  # settled: the status written, nothing more to write
    asked = _counted_gets(kube, monkeypatch)
    writes = kube.count("patch", MODEL_SERVINGS, "status")
    clock.now += FRESH_S + 1
    rec.reconcile(KEY)
    assert asked == ["sample"] and kube.count("patch", MODEL_SERVINGS, "status") == writes
    assert kept(rec).get(NS, "sample") == kube.stored(MODEL_SERVINGS, "sample")
    stored = kube.stored(MODEL_SERVINGS, "sample")
    kube.remove(MODEL_SERVINGS, "sample")
    clock.now += FRESH_S + 1
    rec.reconcile(KEY)  # not found: gone, and so is any copy of it offered later
    assert asked == ["sample", "sample"]
    assert stored is not None and not kept(rec).offer(stored)
