"""A PodSet kept from pass to pass decides exactly as Pods read afresh, on random histories."""

from __future__ import annotations

import copy
import dataclasses
import itertools
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from modelserving.api import ModelServing, parse_model_serving
from modelserving.api.modelserving import ModelServingStatus
from modelserving.workload import groupindex
from modelserving.workload import sync as sync_module
from modelserving.workload.observed import (
    DELETION_COST_ANNOTATION,
    NODE_DELETED,
    NODE_NOT_READY,
    READY_HOOKS_ANNOTATION,
)
from modelserving.workload.owned import OwnedSet
from modelserving.workload.plan import DesiredPod
from modelserving.workload.podset import LAYOUT_SHAPES, Group, PodSet
from modelserving.workload.revision import revision
from modelserving.workload.sync import SyncPlan, sync
from tests.unit.conftest import manifest, role

_uids = itertools.count(1)
CHANGES = (
    "not ready",
    "ready",
    "failed",
    "restarted",
    "terminating",
    "gone",
    "same content",
    "node",
    "ready hooks done",
    "foreign",
    "outside the layout",
    "relabel revision",
    "deletion cost",
)


def ms_of(data: st.DataObject, image: str) -> ModelServing:
    rolling = data.draw(st.sampled_from(["ServingGroupRollingUpdate", "RoleRollingUpdate"]))
    roles = [
        role(
            "prefill", replicas=data.draw(st.integers(1, 2)), workers=data.draw(st.integers(0, 2))
        ),
        role("decode", replicas=data.draw(st.integers(1, 2)), workers=0),
    ]
    for r in roles:
        r["entryTemplate"]["spec"]["containers"][0]["image"] = image
    strategy: dict[str, Any] = {"type": rolling}
    policies = ["RoleRecreate", "None"]  # RoleRollingUpdate cannot recreate whole groups
    if rolling == "ServingGroupRollingUpdate":
        policies.append("ServingGroupRecreate")
    if rolling == "RoleRollingUpdate":
        roles[0]["partition"] = data.draw(st.integers(0, 1))
    else:
        strategy["rollingUpdateConfiguration"] = {
            "maxUnavailable": data.draw(st.sampled_from([1, 2])),
            "partition": data.draw(st.integers(0, 1)),
        }
    doc = manifest(
        roles=roles,
        replicas=data.draw(st.integers(1, 4)),
        recoveryPolicy=data.draw(st.sampled_from(policies)),
        rolloutStrategy=strategy,
    )
    return parse_model_serving(doc)


def made(desired: DesiredPod) -> dict[str, Any]:
    pod = copy.deepcopy(desired.pod)
    pod["metadata"].update(uid=f"pod-{next(_uids)}", resourceVersion="1")
    pod["spec"]["nodeName"] = "node-a"
    pod["status"] = {
        "phase": "Running",
        "conditions": [{"type": "Ready", "status": "True"}],
        "containerStatuses": [{"name": "entry", "restartCount": 0}],
    }
    return pod


def changed(pod: dict[str, Any], change: str, n: int) -> dict[str, Any] | None:
    """A new object: ``pod`` after ``change`` (None: deleted)."""
    pod = copy.deepcopy(pod)
    meta, status = pod["metadata"], pod["status"]
    if change == "gone":
        return None
    if change == "not ready":
        status["conditions"][0]["status"] = "False"
    elif change == "ready":
        status["conditions"][0]["status"] = "True"
    elif change == "failed":
        status["phase"] = "Failed"
    elif change == "restarted":
        status["containerStatuses"][0]["restartCount"] = 1
    elif change == "terminating":
        meta["deletionTimestamp"] = "1970-01-01T00:16:00Z"
    elif change == "node":
        pod["spec"]["nodeName"] = f"node-{'abc'[n % 3]}"
    elif change == "ready hooks done":
        meta.setdefault("annotations", {})[READY_HOOKS_ANNOTATION] = "[]"
    elif change == "foreign":
        meta["ownerReferences"] = [dict(meta["ownerReferences"][0], uid="someone-else")]
    elif change == "outside the layout":
        meta["labels"]["modelserving.volcano.sh/role-id"] = "nowhere"
    elif change == "relabel revision":
        meta["labels"]["modelserving.volcano.sh/revision"] = f"old-{n % 2}"
    elif change == "deletion cost":  # a role's scale-down picks by it
        meta.setdefault("annotations", {})[DELETION_COST_ANNOTATION] = str(n % 3 - 1)
    return pod


def summary(plan: SyncPlan) -> Any:
    def step(s: DesiredPod | dict[str, Any]) -> str:
        return s.name if isinstance(s, DesiredPod) else str(s["metadata"]["name"])

    creates = [(c.name, c.pod_group is not None, [step(s) for s in c.steps]) for c in plan.creates]
    return (
        creates,
        plan.delete_pods,
        plan.delete_services,
        plan.delete_pod_groups,
        plan.update_pod_groups,
        plan.groups,
        plan.requeue_after,
        plan.notes,
        plan.status,
        [d.name for d in plan.ready_hooks],
    )


@settings(max_examples=120, deadline=None)
@given(data=st.data())
def test_a_kept_pod_set_decides_as_pods_read_afresh(data: st.DataObject) -> None:
    """Random histories of passes, Pod changes (status, deletion, Node, ownership, labels, an
    unchanged copy), lost Nodes, names gone a moment ago and new specs: after every step the
    plan from the kept PodSet (and its kept GroupIndex) equals the plan from a list of the same
    Pods, the plan from a PodSet and OwnedSets given only the changes, the plan from the objects
    in the reverse order, and the plan of a pass that visits every ServingGroup in every
    step."""
    ms = ms_of(data, "nginx:1")
    pods: dict[str, dict[str, Any]] = {}
    services: dict[str, dict[str, Any]] = {}
    pod_groups: dict[str, dict[str, Any]] = {}
    kept = PodSet(ms.name, ms.metadata.uid or "")
    applied = PodSet(ms.name, ms.metadata.uid or "")  # given only the changes, as the cache's
    seen: dict[str, dict[str, Any]] = {}
    # the Services and PodGroups too, given only their changes as the controller gives them
    owned = {
        "services": OwnedSet(ms.metadata.uid or ""),
        "pod groups": OwnedSet(ms.metadata.uid or ""),
    }
    owned_seen: dict[str, dict[str, dict[str, Any]]] = {"services": {}, "pod groups": {}}
    history: dict[str, Any] = {}
    departed: set[str] = set()  # Pods gone: their names may be gone a moment ago
    for n in range(data.draw(st.integers(3, 14))):
        action = data.draw(st.sampled_from(["pass", "pass", "change", "change", "spec", "objects"]))
        lost: dict[str, str] = {}
        gone: set[str] = set()
        if action == "change" and pods:
            for name in data.draw(st.lists(st.sampled_from(sorted(pods)), unique=True, max_size=3)):
                after = changed(pods[name], data.draw(st.sampled_from(CHANGES)), n)
                if after is None:
                    del pods[name]
                    departed.add(name)
                else:
                    pods[name] = after
            if data.draw(st.booleans()):
                lost = {"node-b": data.draw(st.sampled_from([NODE_DELETED, NODE_NOT_READY]))}
            if data.draw(st.booleans()):
                known = sorted(pods.keys() | departed) or ["x"]
                gone = set(data.draw(st.lists(st.sampled_from(known), max_size=2)))
        elif action == "objects" and (services or pod_groups):
            # Services and PodGroups replaced, relabelled, changed or gone, as Volcano and users do
            kinds = [k for k in (services, pod_groups) if k]
            table = data.draw(st.sampled_from(kinds))
            name = data.draw(st.sampled_from(sorted(table)))
            what = data.draw(
                st.sampled_from(["copy", "relabel", "spec", "gone", "terminating", "stray"])
            )
            obj = copy.deepcopy(table[name])
            meta = obj["metadata"]
            if what == "gone":
                del table[name]
            elif what == "stray":  # one of a ServingGroup that does not exist
                group = f"sample-{5 + n % 3}"
                meta["name"] = group if table is pod_groups else f"{group}-{name}"
                meta.setdefault("labels", {})["modelserving.volcano.sh/group-name"] = group
                table[meta["name"]] = obj
            else:
                if what == "relabel":
                    meta.setdefault("labels", {})["modelserving.volcano.sh/group-name"] = (
                        f"sample-{n % 3}"
                    )
                elif what == "spec":
                    obj.setdefault("spec", {})["minMember"] = 99
                elif what == "terminating":
                    meta["deletionTimestamp"] = "1970-01-01T00:16:00Z"
                table[name] = obj
        elif action == "spec":
            history[revision(ms)] = [r.to_api() for r in ms.spec.template.roles]
            status = ms.status
            ms = ms_of(data, data.draw(st.sampled_from(["nginx:1", "nginx:2"])))
            ms.status = status

        inputs: dict[str, Any] = {
            "now": 1000.0 + n,
            "gang": True,
            "history": history,
            "lost_nodes": lost,
            "recently_gone": gone,
        }
        kept.refresh(dict(pods))
        if applied.whole:
            names = seen.keys() | pods.keys()
            applied.apply({n: pods.get(n) for n in names if seen.get(n) is not pods.get(n)})
        else:
            applied.refresh(dict(pods))
        seen = dict(pods)
        for kind, table in (("services", services), ("pod groups", pod_groups)):
            record, before = owned[kind], owned_seen[kind]
            if record.whole:
                names = before.keys() | table.keys()
                record.apply({n: table.get(n) for n in names if before.get(n) is not table.get(n)})
            else:
                record.refresh(list(table.values()))
            owned_seen[kind] = dict(table)
        args = (list(services.values()), list(pod_groups.values()))
        plan = sync(ms, kept, *args, **inputs)
        assert summary(plan) == summary(sync(ms, list(pods.values()), *args, **inputs))
        assert summary(plan) == summary(
            sync(ms, applied, owned["services"], owned["pod groups"], **inputs)
        )
        # what the kept index keeps of the Services and PodGroups is what a new one finds
        fresh = PodSet.of(ms.name, ms.metadata.uid or "", list(pods.values()))
        sync(ms, fresh, *args, **inputs)
        if not lost and applied.index is not None and fresh.index is not None:
            for what in ("unclaimed services", "unclaimed pod groups"):
                assert applied.index.kept[what][1] == fresh.index.kept[what][1], what
        # the order the objects come in decides nothing
        backwards = (args[0][::-1], args[1][::-1])
        assert summary(plan) == summary(sync(ms, list(pods.values())[::-1], *backwards, **inputs))
        # the index's shortcuts (ServingGroups left unvisited) change nothing
        every = sync(ms, list(pods.values()), *args, every_group=True, **inputs)
        assert summary(plan) == summary(every)
        assert plan.status is not None
        ms.status = ms.status or ModelServingStatus()
        ms.status.current_revision = plan.status.current_revision
        if action == "pass":  # carry the plan out
            for ref in plan.delete_pods:
                if ref.name in pods and data.draw(st.booleans()):  # the node agent takes its time
                    pods[ref.name] = changed(pods[ref.name], "terminating", n) or {}
                elif pods.pop(ref.name, None) is not None:
                    departed.add(ref.name)
            for name in plan.delete_services:
                services.pop(name, None)
            for name in plan.delete_pod_groups:
                pod_groups.pop(name, None)
            for work in plan.creates:
                if work.pod_group is not None:
                    pod_groups[work.name] = work.pod_group
                for s in work.steps:
                    if isinstance(s, DesiredPod):
                        pods[s.name] = made(s)
                    else:
                        services[s["metadata"]["name"]] = s


def test_refresh_works_only_on_what_changed() -> None:
    """An unchanged object keeps its ServingGroup's Group (and what was worked out about it);
    a changed one makes a new Group for its ServingGroup only."""
    ms = parse_model_serving(manifest(replicas=3, roles=[role("decode", replicas=2)]))
    first = sync(ms, [], now=0.0)
    pods = {d.name: made(d) for w in first.creates for d in w.pods}
    kept = PodSet(ms.name, ms.metadata.uid or "")
    assert kept.refresh(dict(pods)) == 6
    before = dict(kept.groups)
    assert kept.refresh(dict(pods)) == 0
    assert all(kept.groups[i] is before[i] for i in before)
    pods["sample-1-decode-0-0"] = changed(pods["sample-1-decode-0-0"], "not ready", 0) or {}
    assert kept.refresh(dict(pods)) == 1
    assert kept.groups[1] is not before[1]
    assert kept.groups[0] is before[0] and kept.groups[2] is before[2]
    del pods["sample-2-decode-0-0"], pods["sample-2-decode-1-0"]
    assert kept.refresh(dict(pods)) == 2
    assert list(kept.groups) == [0, 1]
    assert sync(ms, kept, now=0.0).status == sync(ms, list(pods.values()), now=0.0).status


def test_layouts_are_kept_for_the_last_few_shapes_of_roles() -> None:
    """Layouts are remembered per shape of the roles; those of shapes not used lately go, so
    a ModelServing resized many times holds a bounded number."""
    kept = PodSet("sample", "uid-1")
    first = kept.layouts(("a", 1))
    first[0] = "layout"
    assert kept.layouts(("a", 1)) is first
    for n in range(2, 2 + LAYOUT_SHAPES):
        kept.layouts(("a", n))
    assert kept.layouts(("a", 1)) == {}  # pushed out by four newer shapes
    ms = parse_model_serving(manifest(replicas=2, roles=[role("decode", replicas=1)]))
    pods = {d.name: made(d) for w in sync(ms, [], now=0.0).creates for d in w.pods}
    kept.refresh(pods)
    assert sync(ms, kept, now=0.0).creates == []  # complete: the one-replica layout kept
    resized = parse_model_serving(manifest(replicas=2, roles=[role("decode", replicas=3)]))
    plan = sync(resized, kept, now=0.0)
    assert [[p.name for p in w.pods] for w in plan.creates] == [
        ["sample-0-decode-1-0", "sample-0-decode-2-0"],
        ["sample-1-decode-1-0", "sample-1-decode-2-0"],
    ]


def test_a_verdict_that_raises_leaves_no_half_updated_index(monkeypatch: Any) -> None:
    """The kept index is changed in place; a pass that fails while it does so leaves none kept,
    and the next pass builds one afresh that decides as the Pods read anew."""
    ms = parse_model_serving(manifest(replicas=3, roles=[role("decode", replicas=2)]))
    pods = {d.name: made(d) for w in sync(ms, [], now=0.0).creates for d in w.pods}
    kept = PodSet(ms.name, ms.metadata.uid or "")
    kept.refresh(dict(pods))
    sync(ms, kept, now=0.0)
    assert kept.index is not None
    for name in ("sample-0-decode-0-0", "sample-2-decode-0-0"):
        pods[name] = changed(pods[name], "not ready", 0) or {}
    kept.apply({n: pods[n] for n in ("sample-0-decode-0-0", "sample-2-decode-0-0")})
    calls = [0]
    verdict = sync_module._Sync._verdict

    def failing(self: Any, group: Any) -> Any:
        calls[0] += 1
        if calls[0] == 2:
            raise RuntimeError("boom")
        return verdict(self, group)

    monkeypatch.setattr(sync_module._Sync, "_verdict", failing)
    with pytest.raises(RuntimeError):
        sync(ms, kept, now=0.0)
    assert kept.index is None
    monkeypatch.setattr(sync_module._Sync, "_verdict", verdict)
    plan = sync(ms, kept, now=0.0)
    assert summary(plan) == summary(sync(ms, list(pods.values()), now=0.0))
    assert plan.status is not None and plan.status.available_replicas == 1


def test_the_live_changes_an_index_remembers() -> None:
    """``live_changes_since`` names the ServingGroups that came or went since a version, and
    says it does not know once that version is older than what it remembers."""
    index = groupindex.GroupIndex(())
    on = groupindex.Verdict(True, "r", True, True, True, False, False, False, False)
    off = dataclasses.replace(on, live=False)
    group = Group(0, [])
    index.put(1, group, on)
    start = index.live_version
    index.put(2, group, on)
    index.put(1, group, off)
    index.put(1, group, dataclasses.replace(off, ready=False))  # liveness the same
    assert index.live_changes_since(start) == {1, 2}
    assert index.live_changes_since(index.live_version) == set()
    assert index.live_sorted == [2]
    for n in range(groupindex.LIVE_LOG_MAX + 1):
        index.put(3, group, on if n % 2 else off)
    assert index.live_changes_since(start) is None
    recent = index.live_version - 10
    assert index.live_changes_since(recent) == {3}
    index.remove(2)
    assert index.live_changes_since(recent) == {2, 3}
    assert index.live_changes_since(index.live_version + 1) is None
