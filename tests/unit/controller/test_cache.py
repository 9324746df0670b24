"""The controller's cache of Pods and Services: events in resourceVersion order, lists merged
with what events brought, the controller's own writes seen at once."""

from __future__ import annotations

from dataclasses import replace
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from modelserving.api import labels
from modelserving.api.group import group_pod
from modelserving.api.place import PodPlace
from modelserving.chain import Chain
from modelserving.controller import cache as cache_
from modelserving.controller.cache import CHANGES_MAX, GONE_S, TOMBSTONE_S, ObjectCache
from modelserving.controller.kube import CONFIG_MAPS, MODEL_SERVINGS, POD_GROUPS, PODS
from modelserving.controller.reconciler import Reconciler
from modelserving.workload.gang import VolcanoApi
from modelserving.workload.observed import observe_pod
from tests.unit.controller.test_reconciler import (
    KEY,
    NS,
    READY_ONLY,
    FakeKube,
    config_map,
    model_serving,
    set_running,
    wasm_plugin,
)

pytest_plugins = ["tests.unit.controller.test_reconciler"]

Obj = dict[str, Any]
PLACE = PodPlace("llm-0", "server", "server-0", True)


def pod(name: str, version: int, owner: str = "llm", uid: str | None = None, **extra: Any) -> Obj:
    meta = {
        "name": name,
        "namespace": "ns",
        "uid": uid or f"uid-{name}",
        "resourceVersion": str(version),
        "labels": {labels.NAME_LABEL: owner},
        "managedFields": [{"manager": "kubelet"}],
    }
    return {"metadata": meta, **extra}


def names(cache: ObjectCache, owner: str = "llm") -> dict[str, str]:
    return {
        o["metadata"]["name"]: o["metadata"]["resourceVersion"]
        for o in cache.objects("pods", "ns", owner)
    }


def test_an_older_event_never_replaces_a_newer_state() -> None:
    cache = ObjectCache()
    cache.written("pods", pod("a", 12))  # the controller's own patch
    cache.event("pods", "MODIFIED", pod("a", 10))  # the watch's echo of an earlier state
    assert names(cache) == {"a": "12"}
    cache.event("pods", "MODIFIED", pod("a", 13))
    assert names(cache) == {"a": "13"}
    cache.event("pods", "DELETED", pod("a", 11))  # a stale deletion (another incarnation)
    assert names(cache) == {"a": "13"}
    cache.event("pods", "DELETED", pod("a", 14))
    assert names(cache) == {}


def test_objects_are_kept_without_managed_fields_by_their_model_serving() -> None:
    cache = ObjectCache()
    cache.event("pods", "ADDED", pod("a", 1))
    cache.event("pods", "ADDED", pod("b", 1, owner="other"))
    cache.event("pods", "ADDED", {"metadata": {"name": "foreign", "namespace": "ns"}})
    (a,) = cache.objects("pods", "ns", "llm")
    assert "managedFields" not in a["metadata"] and a["metadata"]["uid"] == "uid-a"
    assert names(cache, "other") == {"b": "1"}


def test_a_list_merges_with_what_events_brought_meanwhile() -> None:
    cache = ObjectCache()
    cache.event("pods", "ADDED", pod("gone", 5))  # deleted before the list was read
    cache.event("pods", "ADDED", pod("new", 25))  # created after it
    cache.event("pods", "MODIFIED", pod("kept", 22))  # changed after it
    assert not cache.primed("pods", "ns", "llm")
    listed = [pod("kept", 18), pod("other", 19)]
    got = cache.prime("pods", "ns", "llm", listed, "20")
    assert {o["metadata"]["name"]: o["metadata"]["resourceVersion"] for o in got} == {
        "new": "25",
        "kept": "22",
        "other": "19",
    }
    assert cache.primed("pods", "ns", "llm")
    cache.forget_all()  # the watch listed again
    assert not cache.primed("pods", "ns", "llm")


def test_a_deleted_object_counts_as_terminating_until_the_watch_says_more() -> None:
    cache = ObjectCache()
    cache.written("pods", pod("a", 3))
    cache.deleting("pods", "ns", "llm", "a", "uid-other")  # another incarnation: untouched
    assert "deletionTimestamp" not in cache.objects("pods", "ns", "llm")[0]["metadata"]
    cache.deleting("pods", "ns", "llm", "a", "uid-a")
    (a,) = cache.objects("pods", "ns", "llm")
    assert a["metadata"]["deletionTimestamp"]
    cache.event("pods", "DELETED", pod("a", 4))
    assert names(cache) == {}


def test_drop_forgets_a_model_serving() -> None:
    cache = ObjectCache()
    cache.prime("pods", "ns", "llm", [pod("a", 1)], "1")
    cache.drop("ns", "llm")
    assert cache.objects("pods", "ns", "llm") == [] and not cache.primed("pods", "ns", "llm")


def test_a_pass_reads_the_cache_once_it_is_primed_and_sees_its_own_writes(
    kube: FakeKube, rec: Reconciler
) -> None:
    now = [100.0]
    rec.cache = ObjectCache(clock=lambda: now[0])
    kube.put(MODEL_SERVINGS, model_serving(replicas=2, workers=1))
    rec.reconcile(KEY)
    assert kube.lists == 2  # Pods and Services, once
    made = kube.count("create", PODS)
    rec.reconcile(KEY)
    assert kube.lists == 2 and kube.count("create", PODS) == made == 4  # its creates, seen
    kube.remove(PODS, "sample-1-server-0-1")
    rec.cache.event(
        "pods",
        "DELETED",
        {
            "metadata": {
                "name": "sample-1-server-0-1",
                "namespace": NS,
                "labels": {labels.NAME_LABEL: "sample"},
            }
        },
    )
    rec.reconcile(KEY)
    assert kube.count("create", PODS) == 4  # its name rests a moment
    now[0] += GONE_S
    rec.reconcile(KEY)
    assert kube.count("create", PODS) == 5 and kube.lists == 2


def with_replicas(kube: FakeKube, n: int) -> None:
    def change(ms: Obj) -> None:
        ms["spec"]["replicas"] = n
        ms["metadata"]["generation"] = 2

    kube.edit(MODEL_SERVINGS, "sample", change)


def test_with_a_cache_a_deleted_pod_is_terminating_for_the_next_pass(
    kube: FakeKube, rec: Reconciler
) -> None:
    rec.cache = ObjectCache()
    kube.put(MODEL_SERVINGS, model_serving(replicas=2, workers=1))
    rec.reconcile(KEY)
    with_replicas(kube, 1)
    rec.reconcile(KEY)  # scale down: deletes ServingGroup sample-1
    deleted = kube.count("delete", PODS)
    assert deleted == 2
    # the watch has not said anything yet: the next pass must not delete (or create) again
    rec.reconcile(KEY)
    assert kube.count("delete", PODS) == deleted and kube.count("create", PODS) == 4


def test_a_pod_is_kept_with_what_a_pass_reads() -> None:
    cache = ObjectCache()
    running = {"running": {"startedAt": "t0"}}
    status = {
        "phase": "Running",
        "podIP": "10.0.0.2",
        "hostIP": "10.0.0.1",
        "qosClass": "BestEffort",
        "startTime": "t0",
        "conditions": [
            {"type": "Ready", "status": "False", "lastTransitionTime": "t1", "lastProbeTime": None}
        ],
        "containerStatuses": [
            {"name": "c", "restartCount": 1, "state": running, "image": "x", "ready": False}
        ],
        "initContainerStatuses": [{"name": "i", "restartCount": 0, "imageID": "y"}],
    }
    body = pod("llm-0-server-0-0", 1, spec={"nodeName": "n1"}, status=status)
    layout = {
        labels.GROUP_NAME_LABEL: "llm-0",
        labels.ROLE_LABEL: "server",
        labels.ROLE_ID_LABEL: "server-0",
    }
    body["metadata"]["labels"].update(layout)
    body["metadata"].update(
        annotations={"k": "v"},
        creationTimestamp="t0",
        ownerReferences=[
            {"uid": "ms-uid", "controller": True, "kind": "ModelServing", "name": "llm"},
            {"uid": "other", "kind": "Thing", "name": "x"},
        ],
    )
    cache.event("pods", "ADDED", body)
    (kept,) = cache.objects("pods", "ns", "llm")
    assert kept["spec"] == {"nodeName": "n1"}
    assert kept["status"] == {
        "phase": "Running",
        "hostIP": "10.0.0.1",
        "podIP": "10.0.0.2",
        "conditions": [{"type": "Ready", "status": "False", "lastTransitionTime": "t1"}],
        "containerStatuses": [{"name": "c", "restartCount": 1, "state": running}],
        "initContainerStatuses": [{"name": "i", "restartCount": 0}],
    }
    assert kept["metadata"] == {
        "name": "llm-0-server-0-0",
        "namespace": "ns",
        "uid": "uid-llm-0-server-0-0",
        "resourceVersion": "1",
        "labels": {labels.NAME_LABEL: "llm", **layout},
        "annotations": {"k": "v"},
        "ownerReferences": [{"uid": "ms-uid", "controller": True}],
    }
    # what a pass decides on is the same from the kept Pod as from the whole one
    whole = observe_pod(body, "llm")
    assert whole is not None and whole.failed and whole.owners == ("ms-uid",)
    assert observe_pod(kept, "llm") == replace(whole, raw=kept)
    assert group_pod(kept, PLACE) == group_pod(body, PLACE)
    service = pod("s", 1, spec={"clusterIP": "None"})
    cache.event("services", "ADDED", service)
    assert cache.objects("services", "ns", "llm")[0]["spec"] == {"clusterIP": "None"}


def test_with_a_cache_on_pod_ready_hooks_get_the_whole_pod_from_the_api(
    kube: FakeKube, rec: Reconciler, monkeypatch: pytest.MonkeyPatch
) -> None:
    rec.cache = ObjectCache()
    kube.put(CONFIG_MAPS, config_map("ready", READY_ONLY))
    plugin = wasm_plugin("ready", "ready", READY_ONLY)
    kube.put(MODEL_SERVINGS, model_serving(replicas=1, workers=0, plugins=[plugin]))
    rec.reconcile(KEY)
    (name,) = kube.all(PODS)
    set_running(kube, name)
    rec.cache.event("pods", "MODIFIED", kube.all(PODS)[name])
    assert "containers" not in rec.cache.objects("pods", NS, "sample")[0]["spec"]
    seen: list[Obj] = []
    original = Chain.on_pod_ready

    def spy(self: Chain, desired: Any, pod: Obj, ms: Any) -> Any:
        seen.append(pod)
        return original(self, desired, pod, ms)

    monkeypatch.setattr(Chain, "on_pod_ready", spy)
    rec.reconcile(KEY)
    assert [p["spec"]["containers"][0]["name"] for p in seen] == ["entry"]
    rec.reconcile(KEY)  # claimed: not called again
    assert len(seen) == 1


def test_a_deleted_name_rests_before_it_is_made_again() -> None:
    now = [100.0]
    cache = ObjectCache(clock=lambda: now[0])
    cache.event("pods", "ADDED", pod("a", 1))
    cache.event("pods", "DELETED", pod("a", 2))
    assert cache.recently_gone("pods", "ns", "llm") == {"a"}
    now[0] += GONE_S
    assert cache.recently_gone("pods", "ns", "llm") == set()


def test_an_answer_that_comes_after_the_watch_saw_the_object_deleted_is_not_kept() -> None:
    """The API's answer to the controller's create can reach the cache after the watch has
    reported that object deleted (a node agent deleted it at once): it never comes back."""
    now = [100.0]
    cache = ObjectCache(clock=lambda: now[0])
    cache.event("pods", "ADDED", pod("a", 5))
    cache.event("pods", "DELETED", pod("a", 7))
    cache.written("pods", pod("a", 5))  # the create's answer, late
    assert names(cache) == {}
    cache.event("pods", "MODIFIED", pod("a", 6))  # nor does any other copy of it
    assert names(cache) == {}
    cache.written("pods", pod("a", 9, uid="uid-a-2"))  # the name made again: a new object
    assert names(cache) == {"a": "9"}


def test_a_list_read_before_a_deletion_does_not_bring_the_object_back() -> None:
    cache = ObjectCache()
    cache.event("pods", "ADDED", pod("a", 3))
    cache.event("pods", "ADDED", pod("b", 4))
    cache.event("pods", "DELETED", pod("a", 8))  # after the list below was read
    got = cache.prime("pods", "ns", "llm", [pod("a", 3), pod("b", 4)], "5")
    assert [o["metadata"]["name"] for o in got] == ["b"]
    assert names(cache) == {"b": "4"}


def test_deleted_objects_are_remembered_for_a_while_only() -> None:
    now = [100.0]
    cache = ObjectCache(clock=lambda: now[0])
    for i in range(50):
        cache.event("pods", "DELETED", pod(f"p{i}", i + 1))
    assert len(cache._deleted) == 50
    now[0] += TOMBSTONE_S + 1
    cache.event("pods", "DELETED", pod("last", 99))
    assert list(cache._deleted) == ["uid-last"]
    cache.written("pods", pod("p0", 1))  # long gone: taken as it is
    assert "p0" in names(cache)


def test_a_pod_deleted_before_its_create_was_answered_is_made_again(
    kube: FakeKube, rec: Reconciler
) -> None:
    """A node agent deletes a Pod the moment it is created, and the watch reports that before
    the create's answer is written to the cache: the next pass sees the Pod missing and makes
    it again (it used to stay in the cache, and its ServingGroup waited for it forever)."""
    rec.cache = ObjectCache()
    kube.put(MODEL_SERVINGS, model_serving(replicas=1, workers=1))
    create = kube.create
    victim = "sample-0-server-0-1"

    def create_then_lose(
        res: Any, namespace: str, body: Obj, field_manager: Any = None, **how: Any
    ) -> Any:
        made = create(res, namespace, body, field_manager, **how)
        if made is not None and res is PODS and made["metadata"]["name"] == victim:
            kube.remove(PODS, victim)
            assert rec.cache is not None
            rec.cache.event("pods", "DELETED", {**made, "metadata": {**made["metadata"]}})
        return made

    kube.create = create_then_lose  # type: ignore[method-assign]
    rec.reconcile(KEY)
    assert victim not in kube.all(PODS)
    kube.create = create  # type: ignore[method-assign]
    assert victim not in names(rec.cache, "sample")
    rec.cache._gone.clear()  # (its name has rested)
    entry = kube.all(PODS)["sample-0-server-0-0"]
    rec.reconcile(KEY)  # its role replica is recovered: the entry goes first
    rec.reconcile(KEY)  # the entry still going: the role replica waits for it, kept in memory
    assert kube.all(PODS) == {}
    assert rec.deleting[KEY][1] == {"sample-0/server-0"}
    rec.cache.event("pods", "DELETED", entry)  # the watch reports the entry gone
    rec.cache._gone.clear()
    rec.reconcile(KEY)
    assert sorted(kube.all(PODS)) == ["sample-0-server-0-0", victim]
    assert KEY not in rec.deleting


def test_a_pass_works_only_on_the_pods_that_changed(kube: FakeKube, rec: Reconciler) -> None:
    """With the cache, a ModelServing's Pods are kept grouped between passes: an event about
    one Pod makes its ServingGroup anew and leaves the others as they were."""
    rec.cache = ObjectCache()
    kube.put(MODEL_SERVINGS, model_serving(replicas=3, workers=1))
    rec.reconcile(KEY)  # creates the Pods
    rec.reconcile(KEY)  # sees them
    kept = rec.pod_sets[KEY]
    before = dict(kept.groups)
    assert sorted(before) == [0, 1, 2]
    rec.reconcile(KEY)
    assert all(kept.groups[i] is group for i, group in before.items())
    name = "sample-1-server-0-0"
    set_running(kube, name)
    rec.cache.event("pods", "MODIFIED", kube.all(PODS)[name])
    rec.reconcile(KEY)
    assert rec.pod_sets[KEY] is kept and kept.observed[name].ready
    assert kept.groups[1] is not before[1]
    assert kept.groups[0] is before[0] and kept.groups[2] is before[2]
    rec.forget(KEY)
    assert KEY not in rec.pod_sets


def test_a_pod_whose_name_label_moves_leaves_its_old_model_serving() -> None:
    cache = ObjectCache()
    cache.prime("pods", "ns", "llm", [pod("a", 1), pod("b", 1)], "1")
    assert cache.event("pods", "MODIFIED", pod("a", 2, owner="other")) == ("pods", "ns", "llm")
    assert names(cache) == {"b": "1"}
    assert names(cache, "other") == {"a": "2"}
    assert cache.recently_gone("pods", "ns", "llm") == set()  # moved, not deleted
    assert cache.event("pods", "MODIFIED", pod("a", 3, owner="other")) is None  # stays


def test_a_pod_whose_name_label_goes_leaves_its_model_serving() -> None:
    """The label-selected watch says DELETED, with the labels the Pod has now (none of ours)."""
    cache = ObjectCache()
    cache.prime("pods", "ns", "llm", [pod("a", 1), pod("b", 1)], "1")
    unlabelled = pod("a", 2)
    unlabelled["metadata"]["labels"] = {}
    assert cache.event("pods", "DELETED", unlabelled) == ("pods", "ns", "llm")
    assert names(cache) == {"b": "1"}
    assert cache.recently_gone("pods", "ns", "llm") == {"a"}
    assert cache.event("pods", "DELETED", unlabelled) is None  # nothing left to leave


def test_an_older_event_does_not_move_a_pod_back() -> None:
    cache = ObjectCache()
    cache.event("pods", "MODIFIED", pod("a", 5, owner="other"))
    assert cache.event("pods", "MODIFIED", pod("a", 4)) is None  # the echo of an older label
    assert names(cache) == {}
    assert names(cache, "other") == {"a": "5"}


def test_a_list_of_the_new_owner_takes_a_moved_pod_from_the_old() -> None:
    cache = ObjectCache()
    cache.prime("pods", "ns", "llm", [pod("a", 1)], "1")
    cache.prime("pods", "ns", "other", [pod("a", 3, owner="other")], "3")  # event missed
    assert names(cache) == {}
    assert names(cache, "other") == {"a": "3"}
    cache.prime("pods", "ns", "llm", [pod("a", 1)], "1")  # a list older than the move
    assert names(cache) == {}
    cache.drop("ns", "other")
    assert cache.event("pods", "MODIFIED", pod("a", 4)) is None  # nothing left under "other"
    assert names(cache) == {"a": "4"}


@settings(max_examples=300, deadline=None)
@given(data=st.data())
def test_changes_bring_a_reader_to_the_bucket_as_it_is(data: st.DataObject) -> None:
    """Random events (new, changed, older, deleted, moved to another ModelServing and back),
    the controller's own writes and deletes, lists merged in and ModelServings dropped: a
    reader that applies ``changes`` to its copy, and reads the bucket whole whenever they are
    not known, always holds the bucket as ``by_name`` shows it, object for object."""
    cache = ObjectCache()
    copy_: dict[str, Obj] = {}
    version = 1
    for _ in range(data.draw(st.integers(1, 40))):
        version += 1
        name = data.draw(st.sampled_from("abcde"))
        owner = data.draw(st.sampled_from(["llm", "llm", "other"]))
        uid = f"uid-{name}-{data.draw(st.integers(0, 2))}"  # incarnations of the name
        action = data.draw(
            st.sampled_from(["event", "event", "older", "deleted", "deleting", "prime", "drop"])
        )
        if action == "event":
            cache.event("pods", "MODIFIED", pod(name, version, owner=owner, uid=uid))
        elif action == "older":
            cache.event("pods", "MODIFIED", pod(name, version - 5, owner=owner, uid=uid))
        elif action == "deleted":
            cache.event("pods", "DELETED", pod(name, version, owner=owner, uid=uid))
        elif action == "deleting":
            cache.deleting("pods", "ns", owner, name, uid)
        elif action == "prime":
            listed = [
                pod(n, version, owner=owner, uid=f"uid-{n}-{version}")
                for n in data.draw(st.sets(st.sampled_from("abc")))
            ]
            cache.prime("pods", "ns", owner, listed, str(version))
        else:
            cache.drop("ns", owner)
        if data.draw(st.booleans()):
            changes = cache.changes("pods", "ns", "llm")
            if changes is None:
                copy_ = cache.by_name("pods", "ns", "llm")
            else:
                for changed, obj in changes.items():
                    if obj is None:
                        copy_.pop(changed, None)
                    else:
                        copy_[changed] = obj
            whole = cache.by_name("pods", "ns", "llm")
            assert copy_.keys() == whole.keys()
            assert all(copy_[n] is whole[n] for n in whole)


def test_changes_are_not_known_past_their_bound() -> None:
    cache = ObjectCache()
    cache.prime("pods", "ns", "llm", [], "1")
    assert cache.changes("pods", "ns", "llm") is None  # the first call: read it whole
    cache.event("pods", "ADDED", pod("a", 2))
    assert set(cache.changes("pods", "ns", "llm") or {}) == {"a"}
    assert cache.changes("pods", "ns", "llm") == {}
    for n in range(CHANGES_MAX + 1):
        cache.event("pods", "ADDED", pod(f"p{n}", 3 + n))
    assert cache.changes("pods", "ns", "llm") is None
    assert cache.changes("pods", "ns", "llm") == {}


def test_watched_pod_groups_are_read_from_the_cache(
    kube: FakeKube, rec: Reconciler, monkeypatch: pytest.MonkeyPatch
) -> None:
    """With Volcano and the PodGroups' watch running, a pass reads the PodGroups from the
    cache (one list to prime it), and the PodGroups it creates or patches go into it at once:
    a later pass neither lists them nor makes them again."""
    listed: list[str] = []
    list_at = kube.list_at

    def counting(res: Any, namespace: Any, selector: Any = None) -> Any:
        listed.append(res.plural)
        return list_at(res, namespace, selector)

    monkeypatch.setattr(kube, "list_at", counting)
    rec.cache = ObjectCache()
    rec.gang = lambda: VolcanoApi()
    rec.pod_groups_watched = lambda: True
    kube.put(MODEL_SERVINGS, model_serving(replicas=2, workers=1, schedulerName="volcano"))
    rec.reconcile(KEY)
    assert sorted(o["metadata"]["name"] for o in rec.cache.objects("podgroups", NS, "sample")) == [
        "sample-0",
        "sample-1",
    ]
    for _ in range(3):
        rec.reconcile(KEY)
    assert kube.count("create", POD_GROUPS) == 2
    assert listed.count("podgroups") == 1
    # scaled down and straight back up: the PodGroup deleted leaves the cache at once, so the
    # ServingGroup made again gets one before the watch has said anything
    kube.edit(MODEL_SERVINGS, "sample", lambda ms: ms["spec"].update(replicas=1))
    rec.reconcile(KEY)
    assert kube.count("delete", POD_GROUPS) == 1
    assert [o["metadata"]["name"] for o in rec.cache.objects("podgroups", NS, "sample")] == [
        "sample-0"
    ]
    kube.edit(MODEL_SERVINGS, "sample", lambda ms: ms["spec"].update(replicas=2))
    rec.reconcile(KEY)
    # the ServingGroup's Pods are still terminating as far as the cache knows: its PodGroup
    # waits to be made with its first Pods
    assert kube.count("create", POD_GROUPS) == 2
    for pod in rec.cache.objects("pods", NS, "sample"):
        if pod["metadata"]["name"].startswith("sample-1-"):
            rec.cache.event("pods", "DELETED", pod)
    rec.cache._gone.clear()  # (their names have rested)
    rec.reconcile(KEY)
    assert kube.count("create", POD_GROUPS) == 3
    assert kube.stored(POD_GROUPS, "sample-1") is not None
    assert "sample-1-server-0-0" in kube.all(PODS)
    # the PodGroups' watch not running: every pass lists them, as without a cache
    rec.pod_groups_watched = lambda: False
    rec.reconcile(KEY)
    assert kube.count("create", POD_GROUPS) == 3


def test_an_object_the_controller_deleted_leaves_at_once_and_does_not_come_back() -> None:
    cache = ObjectCache()
    cache.prime("podgroups", "ns", "llm", [pod("a", 1), pod("b", 1)], "1")
    assert cache.changes("podgroups", "ns", "llm") is None
    cache.deleted("podgroups", "ns", "llm", "a")
    cache.deleted("podgroups", "ns", "llm", "nothing")  # not held: nothing happens
    assert [o["metadata"]["name"] for o in cache.objects("podgroups", "ns", "llm")] == ["b"]
    assert cache.changes("podgroups", "ns", "llm") == {"a": None}
    cache.event("podgroups", "MODIFIED", pod("a", 2))  # a late event of the deleted one
    assert [o["metadata"]["name"] for o in cache.objects("podgroups", "ns", "llm")] == ["b"]
    cache.event("podgroups", "ADDED", pod("a", 3, uid="uid-a-new"))  # made again
    assert len(cache.objects("podgroups", "ns", "llm")) == 2


def test_a_pod_deleted_by_someone_else_is_kept_for_the_next_pass() -> None:
    """Kthena recovers a Pod deleted by someone else (``handleDeletedPod``): the cache keeps
    such a deletion until a pass handles it, and not one the controller made itself."""
    cache = ObjectCache()
    cache.prime("pods", "ns", "llm", [pod("a", 1), pod("b", 1), pod("c", 1)], "1")
    cache.will_delete("uid-a")  # the controller deletes a
    cache.event("pods", "DELETED", pod("a", 2))
    cache.event("pods", "DELETED", pod("b", 2))  # someone else deletes b
    cache.event("pods", "DELETED", pod("b", 2))  # (the same event again: kept once)
    cache.will_delete("uid-c")
    cache.not_deleting("uid-c")  # the controller's delete failed; then someone else's
    cache.event("pods", "DELETED", pod("c", 2))
    cache.event("services", "DELETED", pod("s", 2))  # a Service is just made again
    found = cache.deleted_by_others("pods", "ns", "llm")
    assert [p["metadata"]["name"] for p in found] == ["b", "c"]
    assert "managedFields" not in found[0]["metadata"]
    cache.handled("pods", "ns", "llm", ["uid-b"])
    assert [p["metadata"]["name"] for p in cache.deleted_by_others("pods", "ns", "llm")] == ["c"]
    cache.drop("ns", "llm")
    assert cache.deleted_by_others("pods", "ns", "llm") == []


def test_the_controllers_own_deletion_stays_its_own_however_long_the_pod_takes_to_go(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """A mark is kept until its Pod goes, whatever the time (a grace period of minutes, a
    finalizer); only the number of marks is bounded, the oldest going first."""
    clock = [0.0]
    cache = ObjectCache(clock=lambda: clock[0])
    cache.prime("pods", "ns", "llm", [pod(n, 1) for n in "abcd"], "1")
    cache.will_delete("uid-a")
    clock[0] = 10 * TOMBSTONE_S
    cache.will_delete("uid-b")  # a later deletion does not age the first one out
    clock[0] = 20 * TOMBSTONE_S
    cache.event("pods", "DELETED", pod("a", 2))
    assert cache.deleted_by_others("pods", "ns", "llm") == []
    monkeypatch.setattr(cache_, "OURS_MAX", 2)
    cache.will_delete("uid-c")
    cache.will_delete("uid-d")  # three marks: b's, the oldest, goes
    for name in "bcd":
        cache.event("pods", "DELETED", pod(name, 2))
    assert [p["metadata"]["name"] for p in cache.deleted_by_others("pods", "ns", "llm")] == ["b"]


def test_a_deletion_reported_after_the_pass_read_the_pods_is_left_for_the_next_pass(
    kube: FakeKube, rec: Reconciler
) -> None:
    """The watch reports the worker deleted between the pass's read of the Pods (it is still
    there) and its read of the deletions: that pass does not act on it and does not count it
    handled; the next pass recovers its role replica."""
    rec.cache = ObjectCache()
    kube.put(MODEL_SERVINGS, model_serving(replicas=1, workers=1))
    rec.reconcile(KEY)
    cache = rec.cache
    worker = kube.all(PODS)["sample-0-server-0-1"]
    kube.remove(PODS, "sample-0-server-0-1")
    read = cache.deleted_by_others

    def late(plural: str, namespace: str, owner: str) -> list[dict[str, Any]]:
        if cache.by_name("pods", NS, "sample").get("sample-0-server-0-1") is not None:
            cache.event("pods", "DELETED", worker)
        return read(plural, namespace, owner)

    rec.cache.deleted_by_others = late  # type: ignore[method-assign]
    writes = len(kube.writes)
    after = rec.reconcile(KEY)
    assert [w for w in kube.writes[writes:] if w[0] == "delete"] == []
    assert after is not None and after <= 1.0
    assert [p["metadata"]["name"] for p in read("pods", NS, "sample")] == ["sample-0-server-0-1"]
    rec.cache._gone.clear()  # (its name has rested)
    rec.reconcile(KEY)
    assert [w[:3] for w in kube.writes[writes:] if w[0] == "delete"] == [
        ("delete", "pods", "sample-0-server-0-0"),
        ("delete", "services", "sample-0-server-0-0"),
    ]
    assert read("pods", NS, "sample") == []


def test_a_pod_deleted_by_someone_else_recreates_its_role_replica(
    kube: FakeKube, rec: Reconciler
) -> None:
    """As Kthena's RoleRecreate: the worker is deleted by someone else, so the entry goes too
    and the role replica is made again; the controller's own deletion of the entry is not
    recovered again."""
    rec.cache = ObjectCache()
    kube.put(MODEL_SERVINGS, model_serving(replicas=1, workers=1))
    rec.reconcile(KEY)
    entry, worker = (kube.all(PODS)[f"sample-0-server-0-{n}"] for n in (0, 1))
    kube.remove(PODS, "sample-0-server-0-1")
    rec.cache.event("pods", "DELETED", worker)
    rec.cache._gone.clear()  # (its name has rested)
    deletes = len(kube.writes)
    rec.reconcile(KEY)
    assert [w[:3] for w in kube.writes[deletes:] if w[0] == "delete"] == [
        ("delete", "pods", "sample-0-server-0-0"),
        ("delete", "services", "sample-0-server-0-0"),
    ]
    assert rec.cache.deleted_by_others("pods", NS, "sample") == []  # handled
    rec.cache.event("pods", "DELETED", entry)  # the watch reports the controller's deletion
    assert rec.cache.deleted_by_others("pods", NS, "sample") == []
    rec.cache._gone.clear()
    rec.reconcile(KEY)
    assert sorted(kube.all(PODS)) == ["sample-0-server-0-0", "sample-0-server-0-1"]
    assert kube.count("delete", PODS) == 1
