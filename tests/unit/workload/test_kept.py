"""Answers remembered by an object's identity: the same object and equal inputs give the kept
answer; another object, or other inputs, work it out again; a full table starts again."""

from __future__ import annotations

import copy
from typing import Any

import pytest

from modelserving.api import parse_model_serving
from modelserving.workload import owned as owned_module
from modelserving.workload.kept import Kept
from modelserving.workload.podset import PodSet
from modelserving.workload.sync import sync
from tests.unit.conftest import manifest, role


def counting() -> tuple[Kept[int], list[object]]:
    calls: list[object] = []

    def compute(obj: dict[str, int], add: int) -> int:
        calls.append(obj)
        return obj["n"] + add

    return Kept(compute, limit=3), calls


def test_the_same_object_and_equal_inputs_give_the_kept_answer() -> None:
    kept, calls = counting()
    obj = {"n": 1}
    assert kept("a", obj, 10) == 11
    assert kept("a", obj, 10) == 11
    assert len(calls) == 1


def test_another_object_or_other_inputs_are_worked_out_again() -> None:
    kept, calls = counting()
    obj = {"n": 1}
    kept("a", obj, 10)
    assert kept("a", {"n": 1}, 10) == 11  # equal, not the same: asked again
    assert kept("a", {"n": 2}, 10) == 12
    again = {"n": 5}
    kept("a", again, 10)
    assert kept("a", again, 20) == 25
    assert len(calls) == 5


def test_each_key_keeps_its_own_answer_and_a_full_table_starts_again() -> None:
    kept, calls = counting()
    objs = [{"n": i} for i in range(4)]
    for i, obj in enumerate(objs[:3]):
        kept(i, obj, 0)
    assert [kept(i, obj, 0) for i, obj in enumerate(objs[:3])] == [0, 1, 2]
    assert len(calls) == 3
    kept(3, objs[3], 0)  # the fourth key: the table of three is full and starts again
    assert len(kept) == 1
    kept(0, objs[0], 0)
    assert len(calls) == 5


def _world() -> tuple[Any, list[dict[str, Any]], list[dict[str, Any]], list[dict[str, Any]]]:
    ms = parse_model_serving(manifest(name="llm", roles=[role(replicas=2, workers=1)]))
    ms.spec.replicas = 2
    pods: list[dict[str, Any]] = []
    services: list[dict[str, Any]] = []
    pod_groups: list[dict[str, Any]] = []
    for work in sync(ms, [], now=0.0, gang=True).creates:
        assert work.pod_group is not None
        pod_groups.append(copy.deepcopy(work.pod_group))
        for step in work.steps:
            if isinstance(step, dict):
                services.append(copy.deepcopy(step))
            else:
                pod = copy.deepcopy(step.pod)
                pod["metadata"]["uid"] = "u-" + pod["metadata"]["name"]
                pod["status"] = {
                    "phase": "Running",
                    "conditions": [{"type": "Ready", "status": "True"}],
                }
                pods.append(pod)
    return ms, pods, services, pod_groups


def test_a_pass_sees_a_replaced_service_or_pod_group_however_often_it_asked_before() -> None:
    """The pass's answers about Services and PodGroups are kept by identity: a replaced object
    (a new owner, a new spec) is looked at again, and an unchanged one decides as before."""
    ms, pods, services, pod_groups = _world()
    for _ in range(2):  # the second pass takes its answers from the table
        plan = sync(ms, pods, services, pod_groups, now=0.0, gang=True)
        assert plan.creates == [] and plan.delete_services == []
        assert plan.update_pod_groups == {}
    stolen = copy.deepcopy(services[0])
    stolen["metadata"]["ownerReferences"][0]["uid"] = "someone-else"
    plan = sync(ms, pods, [stolen, *services[1:]], pod_groups, now=0.0, gang=True)
    made = [s for w in plan.creates for s in w.steps]
    assert [s["metadata"]["name"] for s in made if isinstance(s, dict)] == [
        services[0]["metadata"]["name"]
    ]  # not its own any more: made again (and refused by the API, as in Kthena)
    edited = copy.deepcopy(pod_groups[1])
    edited["spec"]["minMember"] = 7
    plan = sync(ms, pods, services, [pod_groups[0], edited], now=0.0, gang=True)
    assert plan.update_pod_groups == {"llm-1": {"spec": {"minMember": 4}}}
    plan = sync(ms, pods, services, pod_groups, now=0.0, gang=True)
    assert plan.update_pod_groups == {}


def test_a_pod_group_is_compared_again_when_the_wanted_spec_changes() -> None:
    ms, pods, services, pod_groups = _world()
    assert sync(ms, pods, services, pod_groups, now=0.0, gang=True).update_pod_groups == {}
    queued = ms.model_copy(deep=True)
    queued.metadata.annotations = {"scheduling.volcano.sh/queue-name": "gpu"}
    plan = sync(queued, pods, services, pod_groups, now=0.0, gang=True)
    assert set(plan.update_pod_groups) == {"llm-0", "llm-1"}
    assert plan.update_pod_groups["llm-0"] == {"spec": {"queue": "gpu"}}
    assert sync(ms, pods, services, pod_groups, now=0.0, gang=True).update_pod_groups == {}


def test_the_owner_table_forgets_names_that_went() -> None:
    ms, pods, services, pod_groups = _world()
    uid = ms.metadata.uid or ""
    sync(ms, pods, services, pod_groups, now=0.0, gang=True)
    owned = owned_module._KEPT[("Service", uid)]
    assert set(owned.table) == {s["metadata"]["name"] for s in services}
    sync(ms, pods, services[:1], pod_groups, now=0.0, gang=True)
    assert set(owned.table) == {services[0]["metadata"]["name"]}
    assert set(owned.objects) == {services[0]["metadata"]["name"]}


def test_a_scan_that_fails_starts_the_record_again() -> None:
    """A Service without a name fails the pass; the next scan of good objects is a version
    whose changes are not known, so a kept index reads every ServingGroup again."""
    ms, pods, services, pod_groups = _world()
    uid = ms.metadata.uid or ""
    sync(ms, pods, services, pod_groups, now=0.0, gang=True)
    owned = owned_module._KEPT[("Service", uid)]
    before = owned.version
    with pytest.raises(KeyError):
        sync(ms, pods, [*services, {"metadata": {}}], pod_groups, now=0.0, gang=True)
    assert owned.table == {} and owned.objects == {}
    sync(ms, pods, services, pod_groups, now=0.0, gang=True)
    assert owned.changes_since(before) is None
    assert set(owned.objects) == {s["metadata"]["name"] for s in services}


def test_a_label_of_digits_int_refuses_is_no_servinggroup() -> None:
    """A Service labelled with a ServingGroup name ending in '²' (a digit to str.isdigit, not
    to int) belongs to no ServingGroup: it is deleted as an orphan, on the first pass and on a
    pass that finds it changed, and the pass does not fail."""
    ms, pods, services, pod_groups = _world()
    stray = copy.deepcopy(services[0])
    stray["metadata"]["name"] = "llm-stray"
    stray["metadata"]["labels"]["modelserving.volcano.sh/group-name"] = "llm-\u00b2"
    plan = sync(ms, pods, [*services, stray], pod_groups, now=0.0, gang=True)
    assert plan.delete_services == ["llm-stray"]
    kept = PodSet.of(ms.name, ms.metadata.uid or "", pods)
    sync(ms, kept, services, pod_groups, now=0.0, gang=True)
    plan = sync(ms, kept, [*services, stray], pod_groups, now=0.0, gang=True)
    assert plan.delete_services == ["llm-stray"]
