"""Reconciliation decisions, run against a simulated cluster until they converge."""

from __future__ import annotations

import copy
import itertools
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from modelserving.api import ModelServing, parse_model_serving
from modelserving.api.modelserving import ModelServingStatus, Role
from modelserving.workload.observed import (
    DELETION_COST_ANNOTATION,
    NODE_DELETED,
    NODE_NOT_READY,
    READY_HOOKS_ANNOTATION,
    observe_pod,
)
from modelserving.workload.plan import DesiredPod, plan_group
from modelserving.workload.revision import revision
from modelserving.workload.sync import BUSY_RETRY_SECONDS, SyncPlan, _Sync, sync
from tests.unit.conftest import manifest, role
from tests.unit.workload.test_podset import summary

_uids = itertools.count(1)


def running(pod: dict[str, Any], ready: bool = True) -> dict[str, Any]:
    pod = copy.deepcopy(pod)
    pod["metadata"]["uid"] = f"pod-{next(_uids)}"
    pod["metadata"]["resourceVersion"] = "1"
    pod["status"] = {
        "phase": "Running",
        "conditions": [{"type": "Ready", "status": "True" if ready else "False"}],
        "containerStatuses": [{"name": "entry", "restartCount": 0}],
    }
    return pod


@dataclass
class World:
    """Pods and Services as the API would hold them; ``step`` carries out one plan."""

    ms: ModelServing
    pods: dict[str, dict[str, Any]] = field(default_factory=dict)
    services: dict[str, dict[str, Any]] = field(default_factory=dict)
    pod_groups: dict[str, dict[str, Any]] = field(default_factory=dict)
    ready: bool = True
    now: float = 1000.0
    history: dict[str, Any] = field(default_factory=dict)
    lost_nodes: dict[str, str] = field(default_factory=dict)
    gone: set[str] = field(default_factory=set)
    """Names of Pods the watch saw go a moment ago (made again only later)."""
    deleting: frozenset[str] = frozenset()
    """What the last pass said is being deleted whole (``SyncPlan.deleting``)."""

    def plan(self, gone: Sequence[str] = (), deleted: Sequence[dict[str, Any]] = ()) -> SyncPlan:
        """One pass; ``gone`` and ``deleted``: Pods the watch has just seen go (``deleted``:
        not by the controller), beside those of ``self.gone``."""
        plan = sync(
            self.ms,
            # copies: the tests change Pods in place, and observe_pod remembers an object's answer
            [copy.deepcopy(p) for p in self.pods.values()],
            list(self.services.values()),
            list(self.pod_groups.values()),
            now=self.now,
            history=self.history,
            gang=True,
            lost_nodes=self.lost_nodes,
            recently_gone=[*self.gone, *gone],
            deleted=deleted,
            deleting=self.deleting,
        )
        self.deleting = plan.deleting
        assert plan.status is not None
        status = self.ms.status or ModelServingStatus()
        status.current_revision = plan.status.current_revision
        self.ms.status = status
        return plan

    def apply(self, plan: SyncPlan) -> None:
        for ref in plan.delete_pods:
            assert self.pods[ref.name]["metadata"]["uid"] == ref.uid
            del self.pods[ref.name]
        for name in plan.delete_services:
            del self.services[name]
        for name in plan.delete_pod_groups:
            del self.pod_groups[name]
        for work in plan.creates:
            if work.pod_group is not None:
                self.pod_groups[work.name] = work.pod_group
            for step in work.steps:
                if isinstance(step, DesiredPod):
                    assert step.name not in self.pods
                    self.pods[step.name] = running(step.pod, self.ready)
                else:
                    self.services[step["metadata"]["name"]] = step

    def converge(self, limit: int = 10) -> list[SyncPlan]:
        plans = []
        for _ in range(limit):
            plan = self.plan()
            plans.append(plan)
            if not (plan.creates or plan.delete_pods or plan.delete_services):
                return plans
            self.apply(plan)
        raise AssertionError("did not converge")

    def new_image(self, image: str = "nginx:2") -> None:
        """A new image for the first role's entry template: a new revision to roll out."""
        self.ms.spec.template.roles[0].entry_template.spec["containers"][0]["image"] = image

    def groups(self) -> list[str]:
        return sorted(
            {
                p["metadata"]["labels"]["modelserving.volcano.sh/group-name"]
                for p in self.pods.values()
            }
        )

    def revisions(self) -> dict[str, str]:
        return {
            name: p["metadata"]["labels"]["modelserving.volcano.sh/revision"]
            for name, p in self.pods.items()
        }


def ms_of(**kwargs: Any) -> ModelServing:
    return parse_model_serving(manifest(**kwargs))


def pd_roles(image: str = "nginx:1") -> list[dict[str, Any]]:
    prefill = role("prefill", replicas=1, workers=1)
    prefill["entryTemplate"]["spec"]["containers"][0]["image"] = image
    return [prefill, role("decode", replicas=2, workers=0)]


MakeWorld = Callable[..., World]


def world(**kwargs: Any) -> World:
    return World(ms_of(**kwargs))


def test_creates_everything_in_kthena_order() -> None:
    w = world(replicas=2, roles=pd_roles())
    plan = w.plan()
    assert [g.name for g in plan.creates] == ["sample-0", "sample-1"]
    steps = [
        s.name if isinstance(s, DesiredPod) else "svc:" + s["metadata"]["name"]
        for s in plan.creates[0].steps
    ]
    assert steps == [
        "sample-0-prefill-0-0",
        "svc:sample-0-prefill-0-0",
        "sample-0-prefill-0-1",
        "sample-0-decode-0-0",
        "sample-0-decode-1-0",
    ]
    w.apply(plan)
    again = w.plan()
    assert again.creates == [] and again.delete_pods == [] and again.delete_services == []
    assert again.status is not None and again.status.available
    assert again.status.replicas == 2 and again.status.available_replicas == 2


def test_nothing_is_created_twice_after_a_partial_pass() -> None:
    w = world(replicas=1, roles=pd_roles())
    plan = w.plan()
    first = plan.creates[0]
    first.steps = first.steps[:2]  # a crash after the entry Pod and its Service
    w.apply(plan)
    rest = w.plan()
    assert [s.name for s in rest.creates[0].pods] == [
        "sample-0-prefill-0-1",
        "sample-0-decode-0-0",
        "sample-0-decode-1-0",
    ]


def test_scale_down_prefers_not_ready_then_cost_then_highest_ordinal() -> None:
    w = world(replicas=4)
    w.converge()
    w.pods["sample-1-server-0-0"]["metadata"]["annotations"] = {DELETION_COST_ANNOTATION: "-5"}
    w.pods["sample-2-server-0-0"]["status"]["conditions"][0]["status"] = "False"
    w.ms.spec.replicas = 2
    w.converge()
    assert w.groups() == ["sample-0", "sample-3"]
    w.ms.spec.replicas = 1
    w.converge()
    assert w.groups() == ["sample-0"]


def test_scale_up_fills_the_lowest_free_ordinals() -> None:
    w = world(replicas=3)
    w.converge()
    del w.pods["sample-1-server-0-0"]
    w.ms.spec.replicas = 4
    w.converge()
    assert w.groups() == ["sample-0", "sample-1", "sample-2", "sample-3"]


def test_foreign_pods_are_ignored() -> None:
    w = world(replicas=1)
    stranger = running(w.plan().creates[0].pods[0].pod)
    stranger["metadata"]["ownerReferences"][0]["uid"] = "someone-else"
    w.pods[stranger["metadata"]["name"]] = stranger
    plan = w.plan()
    assert plan.delete_pods == []
    # the name is taken; nothing is created over it (the ServingGroup still gets its PodGroup)
    assert [w.steps for w in plan.creates] == [[]]


def test_role_replicas_scale_inside_each_group() -> None:
    w = world(replicas=2, roles=pd_roles())
    w.converge()
    w.ms.spec.template.roles[1].replicas = 1
    w.converge()
    assert "sample-0-decode-1-0" not in w.pods and "sample-1-decode-1-0" not in w.pods
    w.ms.spec.template.roles[1].replicas = 3
    w.converge()
    assert "sample-1-decode-2-0" in w.pods


def test_rolling_update_respects_max_unavailable_and_partition() -> None:
    w = world(
        replicas=4,
        rolloutStrategy={"rollingUpdateConfiguration": {"maxUnavailable": 1, "partition": 1}},
    )
    w.converge()
    old = set(w.revisions().values())
    w.new_image()
    new = sync(w.ms, [], now=0).revision
    assert old != {new}
    w.ready = False  # new Pods start not ready: only one group may be down at once
    first = w.plan()
    assert len({r.name.rsplit("-", 3)[0] for r in first.delete_pods}) == 1
    assert first.delete_pods[0].name == "sample-3-server-0-0"  # highest ordinal first
    w.apply(first)
    w.apply(w.plan())  # recreated at the new revision, not ready yet
    blocked = w.plan()
    assert blocked.delete_pods == [] and blocked.requeue_after is not None
    assert blocked.status is not None and blocked.status.updating
    w.ready = True
    for pod in w.pods.values():
        pod["status"]["conditions"][0]["status"] = "True"
    w.converge(limit=20)
    revisions = w.revisions()
    assert revisions["sample-0-server-0-0"] != new  # below the partition
    assert {revisions[f"sample-{i}-server-0-0"] for i in (1, 2, 3)} == {new}


def test_partition_percent_rounds_up() -> None:
    w = world(
        replicas=4,
        rolloutStrategy={
            "rollingUpdateConfiguration": {"maxUnavailable": "50%", "partition": "25%"}
        },
    )
    w.converge()
    w.new_image()
    plan = w.plan()
    assert sorted(r.name for r in plan.delete_pods) == [
        "sample-2-server-0-0",
        "sample-3-server-0-0",
    ]
    assert {r.cause for r in plan.delete_pods} == {"update"}
    w.apply(plan)
    w.converge(limit=20)
    assert w.revisions()["sample-0-server-0-0"] != w.revisions()["sample-1-server-0-0"]


def fail(pod: dict[str, Any], at: str = "1970-01-01T00:16:40Z") -> None:
    """A container of ``pod`` restarted at ``at``, and the Pod is not Ready since."""
    pod["status"]["containerStatuses"][0]["restartCount"] = 1
    pod["status"]["containerStatuses"][0]["lastState"] = {"terminated": {"finishedAt": at}}
    pod["status"]["conditions"][0]["status"] = "False"


def test_role_recreate_waits_for_the_grace_period() -> None:
    w = world(replicas=1, roles=pd_roles())
    w.ms.spec.template.restart_grace_period_seconds = 30
    w.converge()
    fail(w.pods["sample-0-prefill-0-1"])  # failed at t=1000
    waiting = w.plan()
    assert waiting.delete_pods == [] and waiting.requeue_after == 30
    w.now = 1031
    plan = w.plan()
    assert sorted(r.name for r in plan.delete_pods) == [
        "sample-0-prefill-0-0",
        "sample-0-prefill-0-1",
    ]
    assert plan.delete_services == ["sample-0-prefill-0-0"]
    assert {r.cause for r in plan.delete_pods} == {"recovery"}
    assert any("recreating role replica prefill-0" in n for n in plan.notes)


def test_serving_group_recreate_deletes_the_whole_group() -> None:
    w = world(replicas=2, roles=pd_roles(), recoveryPolicy="ServingGroupRecreate")
    w.converge()
    w.pods["sample-1-decode-1-0"]["status"]["phase"] = "Failed"
    plan = w.plan()
    assert {r.name for r in plan.delete_pods} == {n for n in w.pods if n.startswith("sample-1-")}
    w.apply(plan)
    w.converge()
    assert w.groups() == ["sample-0", "sample-1"]


def test_recovery_none_deletes_a_failed_pod_alone_and_makes_it_again() -> None:
    """Kthena's handlePodAfterGraceTime deletes a Pod still failed after the grace period
    whatever the recovery policy; under None nothing else goes, and the Pod is made again
    alone."""
    w = world(replicas=1, roles=pd_roles(), recoveryPolicy="None")
    w.ms.spec.template.restart_grace_period_seconds = 30
    w.converge()
    before = {n: p["metadata"]["uid"] for n, p in w.pods.items()}
    fail(w.pods["sample-0-prefill-0-1"])  # at t=1000
    assert w.plan().delete_pods == []
    w.now = 1031
    plan = w.plan()
    assert [(r.name, r.cause) for r in plan.delete_pods] == [("sample-0-prefill-0-1", "recovery")]
    assert plan.delete_services == [] and plan.notes == [
        "Pod sample-0-prefill-0-1 failed: recreating it"
    ]
    w.apply(plan)
    w.converge()
    after = {n: p["metadata"]["uid"] for n, p in w.pods.items()}
    assert {n for n in after if after[n] != before[n]} == {"sample-0-prefill-0-1"}


@pytest.mark.parametrize("policy", ["None", "RoleRecreate", "ServingGroupRecreate"])
def test_a_crash_loop_is_recovered_once_the_grace_period_from_its_first_failure_ends(
    policy: str,
) -> None:
    """A container crashes again and again (each crash a later finishedAt, the kubelet's
    back-off at most 300 s) while the Pod stays not Ready: the grace period (600 s) counts
    from when it stopped being Ready, as Kthena's timer starts at the first failure it sees,
    and does not start again with each crash."""
    w = world(replicas=1, roles=pd_roles(), recoveryPolicy=policy)
    w.ms.spec.template.restart_grace_period_seconds = 600
    w.converge()
    pod = w.pods["sample-0-prefill-0-1"]
    fail(pod)  # at t=1000
    pod["status"]["conditions"][0]["lastTransitionTime"] = "1970-01-01T00:16:40Z"
    for crash in range(1, 4):  # crashes at t=1300, 1600 (the grace period ends) and 1900
        w.now = 1000 + 300 * crash
        stamp = time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime(w.now))
        pod["status"]["containerStatuses"][0]["lastState"]["terminated"]["finishedAt"] = stamp
        pod["status"]["containerStatuses"][0]["restartCount"] = 1 + crash
        plan = w.plan()
        if w.now < 1600:
            assert plan.delete_pods == [] and plan.requeue_after == 1600 - w.now
        else:
            assert "sample-0-prefill-0-1" in {r.name for r in plan.delete_pods}
            return
    raise AssertionError("not recovered")


@pytest.mark.parametrize("policy", ["None", "RoleRecreate", "ServingGroupRecreate"])
@pytest.mark.parametrize("grace", [0, 30])
def test_a_pod_running_and_ready_again_after_a_restart_is_not_failed(
    policy: str, grace: int
) -> None:
    """Kthena's updatePod takes a Pod Running and Ready as ready before it looks at restarts,
    and handlePodAfterGraceTime keeps a Pod that is Running and Ready again: a container that
    restarted and came back costs nothing; one still not Ready once the grace period is over
    is recovered."""
    w = world(replicas=1, roles=pd_roles(), recoveryPolicy=policy)
    w.ms.spec.template.restart_grace_period_seconds = grace
    w.converge()
    pod = w.pods["sample-0-prefill-0-1"]
    fail(pod)  # at t=1000
    pod["status"]["conditions"][0]["status"] = "True"  # Ready again at once
    w.now = 1000 + grace + 1
    plan = w.plan()
    assert plan.delete_pods == [] and plan.notes == []
    pod["status"]["phase"] = "Pending"  # (restarting, not Running: not ready)
    assert {r.cause for r in w.plan().delete_pods} == {"recovery"}
    pod["status"]["phase"] = "Succeeded"  # ended: no restart counts, as in Kthena
    assert w.plan().delete_pods == []


def on_node(w: World, node: str, *names: str) -> None:
    for name in names:
        w.pods[name]["spec"]["nodeName"] = node


def test_pods_on_a_not_ready_node_stop_counting_and_stay() -> None:
    w = world(replicas=2, roles=pd_roles())
    w.converge()
    assert w.plan().status.available_replicas == 2  # type: ignore[union-attr]
    on_node(w, "n1", "sample-1-decode-0-0")
    w.lost_nodes = {"n1": NODE_NOT_READY}
    plan = w.plan()
    assert plan.status is not None and plan.status.available_replicas == 1
    assert plan.delete_pods == [] and plan.creates == []  # it may come back


@pytest.mark.parametrize(
    ("policy", "deleted"),
    [
        (
            "ServingGroupRecreate",
            {
                "sample-1-prefill-0-0",
                "sample-1-prefill-0-1",
                "sample-1-decode-0-0",
                "sample-1-decode-1-0",
            },
        ),
        ("RoleRecreate", {"sample-1-prefill-0-0", "sample-1-prefill-0-1"}),
        ("None", {"sample-1-prefill-0-1"}),
    ],
)
def test_pods_on_a_deleted_node_are_recovered_at_once(policy: str, deleted: set[str]) -> None:
    w = world(replicas=2, roles=pd_roles(), recoveryPolicy=policy)
    w.ms.spec.template.restart_grace_period_seconds = 600  # not waited for: the Node is gone
    w.converge()
    on_node(w, "n1", "sample-1-prefill-0-1")
    w.lost_nodes = {"n1": NODE_DELETED}
    plan = w.plan()
    assert plan.status is not None and plan.status.available_replicas == 1
    assert {r.name for r in plan.delete_pods} == deleted
    forced = {r.name for r in plan.delete_pods if r.force}
    assert forced == {"sample-1-prefill-0-1"}  # only the Pod whose Node is gone skips its grace
    if policy != "None":
        assert any("Pod sample-1-prefill-0-1's Node n1 was deleted" in n for n in plan.notes)
    w.apply(plan)
    w.lost_nodes = {}
    w.converge()
    assert len(w.pods) == 8


def test_a_terminating_pod_on_a_deleted_node_is_deleted_at_once() -> None:
    w = world(replicas=1, roles=pd_roles())
    w.converge()
    pod = w.pods["sample-0-decode-0-0"]
    pod["metadata"]["deletionTimestamp"] = "1970-01-01T00:16:00Z"
    on_node(w, "gone", "sample-0-decode-0-0")
    w.lost_nodes = {"gone": NODE_DELETED}
    refs = [r for r in w.plan().delete_pods if r.name == "sample-0-decode-0-0"]
    assert [(r.uid, r.force, r.cause) for r in refs] == [(pod["metadata"]["uid"], True, "node")]


@pytest.mark.parametrize("rollout", ["ServingGroupRollingUpdate", "RoleRollingUpdate"])
def test_a_pod_released_from_a_deleted_node_is_made_again_once_it_is_gone(rollout: str) -> None:
    """Under recovery policy None a Pod whose Node was deleted is deleted at once, alone and
    with no grace period (``release_lost``); its name is busy until it is gone, so the pass
    looks again soon (its ServingGroup, complete before the pass, is visited for it)."""
    w = world(
        replicas=1, roles=pd_roles(), recoveryPolicy="None", rolloutStrategy={"type": rollout}
    )
    w.converge()
    on_node(w, "gone", "sample-0-decode-0-0")
    w.lost_nodes = {"gone": NODE_DELETED}
    plan = w.plan()
    assert [(r.name, r.cause, r.force) for r in plan.delete_pods] == [
        ("sample-0-decode-0-0", "node", True)
    ]
    assert plan.requeue_after == BUSY_RETRY_SECONDS


def test_role_rolling_update_only_touches_the_changed_role() -> None:
    w = world(replicas=2, roles=pd_roles(), rolloutStrategy={"type": "RoleRollingUpdate"})
    w.converge()
    before = {n: p["metadata"]["uid"] for n, p in w.pods.items()}
    w.ms.spec.template.roles[1].entry_template.spec["containers"][0]["image"] = "nginx:9"
    w.converge(limit=20)
    changed = {n for n, p in w.pods.items() if p["metadata"]["uid"] != before.get(n)}
    assert changed == {f"sample-{g}-decode-{j}-0" for g in (0, 1) for j in (0, 1)}


@pytest.mark.parametrize(
    "lost", [["sample-0-server-1-0"], ["sample-0-server-0-0", "sample-0-server-1-0"]]
)
def test_outdated_group_kept_by_partition_is_repaired_from_history(lost: list[str]) -> None:
    w = world(
        replicas=2,
        roles=[role(replicas=2)],
        rolloutStrategy={"rollingUpdateConfiguration": {"partition": 1}},
    )
    w.converge()
    old_rev = w.revisions()["sample-0-server-0-0"]
    w.history[old_rev] = [r.to_api() for r in w.ms.spec.template.roles]
    w.new_image()
    w.converge(limit=20)
    for name in lost:
        del w.pods[name]
    w.converge()
    for name in lost:
        pod = w.pods[name]
        assert pod["metadata"]["labels"]["modelserving.volcano.sh/revision"] == old_rev
        assert pod["spec"]["containers"][0]["image"] == "nginx:1.28.0"


def role_partitioned(partition: int | str, replicas: int = 4, groups: int = 1) -> World:
    """One role of ``replicas`` replicas (one worker each), RoleRollingUpdate with a partition,
    converged, its revision recorded in the history, then given a new image."""
    w = world(
        replicas=groups,
        roles=[role("decode", replicas=replicas, workers=1, partition=partition)],
        rolloutStrategy={"type": "RoleRollingUpdate"},
    )
    w.converge()
    old_rev = w.revisions()["sample-0-decode-0-0"]
    w.history[old_rev] = [r.to_api() for r in w.ms.spec.template.roles]
    decode = w.ms.spec.template.roles[0]
    assert decode.worker_template is not None
    for template in (decode.entry_template, decode.worker_template):
        template.spec["containers"][0]["image"] = "nginx:2"
    return w


def images(w: World) -> dict[str, str]:
    return {n: p["spec"]["containers"][0]["image"] for n, p in sorted(w.pods.items())}


@pytest.mark.parametrize(("partition", "protected"), [(2, 2), ("50%", 2), ("30%", 2), (0, 0)])
def test_role_partition_keeps_the_first_replicas(partition: int | str, protected: int) -> None:
    """Kthena: the first N replicas of the role (ascending ordinal; a percent of the role's
    replicas rounded up) keep their revision in every ServingGroup; the rest are updated."""
    w = role_partitioned(partition, groups=2)
    plan = w.plan()
    assert {r.cause for r in plan.delete_pods} == {"update"}
    # maxUnavailable defaults to 1: one replica per group and role at a time, highest first.
    assert sorted(r.name for r in plan.delete_pods) == [
        "sample-0-decode-3-0",
        "sample-0-decode-3-1",
        "sample-1-decode-3-0",
        "sample-1-decode-3-1",
    ]
    w.apply(plan)
    w.converge(limit=40)
    for name, image in images(w).items():
        ordinal = int(name.split("-")[3])
        assert image == ("nginx:1.28.0" if ordinal < protected else "nginx:2"), name
    status = w.plan().status
    assert status is not None
    assert status.updating == (protected > 0)


def test_role_partition_lowered_updates_the_rest() -> None:
    w = role_partitioned(3)
    w.converge(limit=40)
    assert list(images(w).values()).count("nginx:2") == 2  # decode-3, both Pods
    w.ms.spec.template.roles[0].partition = 1
    w.converge(limit=40)
    assert set(images(w)) == {f"sample-0-decode-{j}-{k}" for j in range(4) for k in (0, 1)}
    assert {n for n, i in images(w).items() if i == "nginx:1.28.0"} == {
        "sample-0-decode-0-0",
        "sample-0-decode-0-1",
    }


@pytest.mark.parametrize("lost", [["sample-0-decode-1-1"], ["sample-0-decode-1-0"]])
def test_protected_role_replica_is_repaired_at_its_revision(lost: list[str]) -> None:
    w = role_partitioned(2)
    w.converge(limit=40)
    old_rev = w.revisions()["sample-0-decode-0-0"]
    for name in lost:
        del w.pods[name]
    w.converge()
    for name in ("sample-0-decode-1-0", "sample-0-decode-1-1"):
        assert w.pods[name]["metadata"]["labels"]["modelserving.volcano.sh/revision"] == old_rev
        assert w.pods[name]["spec"]["containers"][0]["image"] == "nginx:1.28.0"


def test_missing_protected_ordinal_is_made_at_the_current_revision() -> None:
    """A protected ordinal made anew (the role replica was lost whole, or the role scaled up)
    takes the current revision, as Kthena's scaleUpRoles does."""
    w = role_partitioned(2, replicas=2)
    w.converge(limit=40)
    old_rev = w.revisions()["sample-0-decode-0-0"]
    for name in [n for n in w.pods if n.startswith("sample-0-decode-1-")]:
        del w.pods[name]
    w.converge()
    assert w.revisions()["sample-0-decode-1-0"] == old_rev
    assert images(w)["sample-0-decode-1-1"] == "nginx:1.28.0"


def test_missing_protected_replica_keeps_its_serving_group_at_the_old_revision() -> None:
    """Kthena (``scaleUpRoles`` before ``manageRollingUpdate``) makes a lost protected replica
    again from the current revision before it looks for outdated replicas, so the ServingGroup
    keeps its old revision and ``currentRevision`` stays. While the replica's name was still
    held, ours counted the ServingGroup updated (all its live Pods were new), moved
    ``currentRevision`` to the new one, and then made the replica at the new revision."""
    w = role_partitioned(1, replicas=3)
    w.converge(limit=40)
    old_rev = w.revisions()["sample-0-decode-0-0"]
    lost = [n for n in w.pods if n.startswith("sample-0-decode-0-")]
    for name in lost:
        del w.pods[name]
    w.gone = set(lost)
    plan = w.plan()
    assert plan.status is not None
    assert plan.status.current_revision == old_rev
    assert plan.status.updating and plan.status.updated_replicas == 0
    w.apply(plan)
    w.gone = set()
    w.converge()
    assert w.revisions()["sample-0-decode-0-0"] == old_rev
    assert images(w)["sample-0-decode-0-0"] == "nginx:1.28.0"
    assert {images(w)[f"sample-0-decode-{j}-0"] for j in (1, 2)} == {"nginx:2"}


def cost(w: World, name: str, value: int) -> None:
    w.pods[name]["metadata"]["annotations"] = {DELETION_COST_ANNOTATION: str(value)}


def test_role_scale_down_picks_as_kthena_and_scale_up_fills_the_lowest_free_ordinals() -> None:
    """Kthena's ``scaleDownRoles``: not ready first, then the lowest summed
    pod-deletion-cost, then the highest ordinal; the replicas kept keep their ordinals, and
    ``scaleUpRoles`` fills the lowest free ordinals below ``replicas``. Ours deleted the
    highest ordinals whatever their readiness and cost."""
    w = world(replicas=1, roles=[role("decode", replicas=4, workers=1)])
    w.converge()
    for j in range(4):
        cost(w, f"sample-0-decode-{j}-0", j * 100)
    w.ms.spec.template.roles[0].replicas = 2
    w.converge()
    assert sorted(w.pods) == [f"sample-0-decode-{j}-{k}" for j in (2, 3) for k in (0, 1)]
    assert sorted(w.services) == ["sample-0-decode-2-0", "sample-0-decode-3-0"]
    status = w.plan().status
    assert status is not None and status.available and status.available_replicas == 1
    w.pods["sample-0-decode-3-1"]["status"]["conditions"][0]["status"] = "False"
    w.ms.spec.template.roles[0].replicas = 1
    w.converge()
    assert sorted(w.pods) == ["sample-0-decode-2-0", "sample-0-decode-2-1"]
    w.ms.spec.template.roles[0].replicas = 2
    w.converge()
    assert {n.rsplit("-", 1)[0] for n in w.pods} == {"sample-0-decode-0", "sample-0-decode-2"}
    w.ms.spec.template.roles[0].replicas = 3
    w.converge()
    assert {n.rsplit("-", 1)[0] for n in w.pods} == {f"sample-0-decode-{j}" for j in range(3)}


def test_role_scale_down_deletes_the_replicas_the_partition_protects_last() -> None:
    """Kthena: the first ``partition`` replicas go last, whatever their cost."""
    w = role_partitioned(2, replicas=4)
    w.converge(limit=40)
    for j, value in enumerate((0, 0, 50, 100)):
        cost(w, f"sample-0-decode-{j}-0", value)
    w.ms.spec.template.roles[0].replicas = 3
    w.converge(limit=40)
    assert {n.rsplit("-", 1)[0] for n in w.pods} == {f"sample-0-decode-{j}" for j in (0, 1, 3)}
    assert images(w)["sample-0-decode-0-0"] == "nginx:1.28.0"
    assert images(w)["sample-0-decode-3-0"] == "nginx:2"


def test_a_role_scaled_down_to_its_protected_replicas_stays_available() -> None:
    """Kthena's ``checkServingGroupReady`` counts the current spec's role replicas. Ours
    counted those of the revision the Pods left carry, as its ControllerRevision stored them
    (5), so the ServingGroup of 3 Ready replicas was never available again."""
    w = role_partitioned(3, replicas=5)
    w.converge(limit=40)
    w.ms.spec.template.roles[0].replicas = 3
    w.converge(limit=40)
    assert set(images(w).values()) == {"nginx:1.28.0"}
    status = w.plan().status
    assert status is not None
    assert status.available_replicas == 1 and status.replicas == 1


def test_new_serving_group_is_made_at_the_new_revision() -> None:
    """Kthena's scaleUpServingGroups makes a new ServingGroup from the current template; a
    role's partition applies inside existing ServingGroups only."""
    w = role_partitioned(2)
    w.converge(limit=40)
    w.ms.spec.replicas = 2
    w.converge(limit=40)
    assert {i for n, i in images(w).items() if n.startswith("sample-1-")} == {"nginx:2"}
    assert images(w)["sample-0-decode-0-0"] == "nginx:1.28.0"


def test_protected_role_replica_without_history_is_left_alone() -> None:
    w = role_partitioned(2)
    w.history.clear()
    w.converge(limit=40)
    del w.pods["sample-0-decode-0-1"]
    plan = w.converge()[0]
    assert not any(
        isinstance(s, DesiredPod) and s.name == "sample-0-decode-0-1"
        for work in plan.creates
        for s in work.steps
    )
    assert images(w)["sample-0-decode-0-0"] == "nginx:1.28.0"


def test_ready_hooks_once_marked() -> None:
    w = world(replicas=1)
    w.converge()
    (hook,) = w.plan().ready_hooks
    assert hook.name == "sample-0-server-0-0" and hook.place.is_entry
    w.pods[hook.name]["metadata"]["annotations"] = {READY_HOOKS_ANNOTATION: "done"}
    assert w.plan().ready_hooks == []


def test_no_ready_hooks_listed_when_no_plugin_has_one() -> None:
    w = world(replicas=2)
    w.converge()
    pods = list(w.pods.values())
    assert len(sync(w.ms, pods, now=w.now).ready_hooks) == 2
    assert sync(w.ms, pods, now=w.now, ready_hooks=False).ready_hooks == []


def test_a_deleted_group_takes_only_its_own_services() -> None:
    w = world(replicas=3, roles=pd_roles())
    w.converge()
    plan = sync(
        w.ms.model_copy(update={"spec": w.ms.spec.model_copy(update={"replicas": 2})}),
        list(w.pods.values()),
        list(w.services.values()),
        now=w.now,
    )
    assert plan.delete_services == ["sample-2-prefill-0-0"]
    assert {ref.name.rsplit("-", 3)[0] for ref in plan.delete_pods} == {"sample-2"}


def test_observe_pod_rejects_foreign_layouts() -> None:
    w = world(replicas=1)
    pod = running(w.plan().creates[0].pods[0].pod)
    assert observe_pod(pod, "sample") is not None
    assert observe_pod(pod, "other") is None
    pod["metadata"]["name"] = "renamed"
    assert observe_pod(pod, "sample") is None
    # a digit Python's int() does not take (a superscript two) is no index, not a crash
    pod["metadata"]["name"] = "sample-0-server-0-\u00b2"
    assert observe_pod(pod, "sample") is None


def test_status_while_progressing() -> None:
    w = world(replicas=2)
    w.ready = False
    w.converge()
    status = w.plan().status
    assert status is not None
    assert (status.available, status.progressing, status.updating) == (False, True, False)
    assert status.available_replicas == 0 and status.replicas == 2


def test_observe_pod_answers_an_unchanged_object_once() -> None:
    w = world(replicas=1)
    pod = running(w.plan().creates[0].pods[0].pod)
    first = observe_pod(pod, "sample")
    assert observe_pod(pod, "sample") is first
    newer = copy.deepcopy(pod)  # as the watch replaces an object
    newer["status"]["phase"] = "Failed"
    seen = observe_pod(newer, "sample")
    assert seen is not None and seen.failed and seen is not first


def test_a_pod_deleted_a_moment_ago_is_made_again_a_little_later() -> None:
    w = world(replicas=1, roles=pd_roles())
    w.converge()
    del w.pods["sample-0-decode-1-0"]  # the watch saw it go just now
    plan = sync(
        w.ms,
        list(w.pods.values()),
        list(w.services.values()),
        list(w.pod_groups.values()),
        now=w.now,
        gang=True,
        recently_gone=["sample-0-decode-1-0"],
    )
    assert plan.creates == [] and plan.requeue_after == 1.0
    assert [s.name for g in w.plan().creates for s in g.pods] == ["sample-0-decode-1-0"]


def deleted_by_someone(w: World, name: str) -> SyncPlan:
    """A pass after the watch saw ``name`` deleted just now, not by the controller."""
    gone = w.pods.pop(name)
    return w.plan(gone=[name], deleted=[gone])


def test_a_pod_deleted_by_someone_else_recreates_its_serving_group() -> None:
    """Kthena's handleDeletedPod under ServingGroupRecreate: the rest of the ServingGroup goes,
    and it is made again whole."""
    w = world(replicas=2, roles=pd_roles(), recoveryPolicy="ServingGroupRecreate")
    w.converge()
    plan = deleted_by_someone(w, "sample-1-decode-1-0")
    assert {r.name for r in plan.delete_pods} == {n for n in w.pods if n.startswith("sample-1-")}
    assert {r.cause for r in plan.delete_pods} == {"recovery"}
    assert plan.delete_services == ["sample-1-prefill-0-0"]
    assert plan.creates == []
    assert plan.notes == ["Pod sample-1-decode-1-0 was deleted: recreating ServingGroup sample-1"]
    w.apply(plan)
    w.converge()
    assert len(w.pods) == 8 and w.groups() == ["sample-0", "sample-1"]


def test_a_pod_deleted_by_someone_else_recreates_its_role_replica() -> None:
    """Kthena's handleDeletedPod under RoleRecreate: the rest of the role replica (Pods and
    Service) goes, the other role replicas stay."""
    w = world(replicas=1, roles=pd_roles())
    w.converge()
    plan = deleted_by_someone(w, "sample-0-prefill-0-1")
    assert [r.name for r in plan.delete_pods] == ["sample-0-prefill-0-0"]
    assert plan.delete_services == ["sample-0-prefill-0-0"]
    assert plan.notes == ["Pod sample-0-prefill-0-1 was deleted: recreating role replica prefill-0"]
    w.apply(plan)
    w.converge()
    assert len(w.pods) == 4


@pytest.mark.parametrize("case", ["none", "other owner", "made again", "group going"])
def test_a_deleted_pod_not_to_recover(case: str) -> None:
    """Recovery None (the Pod is made again alone), a Pod of an earlier ModelServing of the
    name, a Pod made again since, and a ServingGroup whose Pods are being deleted already."""
    policy = "None" if case == "none" else "ServingGroupRecreate"
    w = world(replicas=1, roles=pd_roles(), recoveryPolicy=policy)
    w.converge()
    gone = copy.deepcopy(w.pods["sample-0-decode-1-0"])
    if case == "other owner":
        gone["metadata"]["ownerReferences"][0]["uid"] = "uid-0"
    if case == "made again":
        w.pods["sample-0-decode-1-0"]["metadata"]["uid"] = "pod-again"
    else:
        del w.pods["sample-0-decode-1-0"]
    if case == "group going":
        for pod in w.pods.values():
            pod["metadata"]["deletionTimestamp"] = "2026-01-01T00:00:00Z"
    plan = w.plan(deleted=[gone])
    assert plan.delete_pods == [] and plan.notes == []
    if case in ("none", "other owner"):
        assert [s.name for g in plan.creates for s in g.pods] == ["sample-0-decode-1-0"]


POD_NAMES = [  # the Pods of world(replicas=1, roles=pd_roles())
    "sample-0-decode-0-0",
    "sample-0-decode-1-0",
    "sample-0-prefill-0-0",
    "sample-0-prefill-0-1",
]


def evict(w: World, *names: str) -> None:
    """``names`` begin to go together (an eviction, a drain): terminating, not gone yet.
    Passes (``converge``) leave them so until the test lets them go (``deleted_by_someone``)."""
    for name in names:
        w.pods[name]["metadata"]["deletionTimestamp"] = "2026-12-07T00:00:30Z"


@pytest.mark.parametrize("first", ["sample-0-decode-0-0", "sample-0-prefill-0-1"])
def test_pods_evicted_together_recreate_their_serving_group_once(first: str) -> None:
    """Two Pods of one ServingGroup are evicted together and go one after the other. The
    ServingGroup, deleted for the first, is made again only once the second is gone too (as
    Kthena waits for a ServingGroup it deletes), so the second's deletion is no new loss."""
    w = world(replicas=1, roles=pd_roles(), recoveryPolicy="ServingGroupRecreate")
    w.converge()
    second = "sample-0-decode-1-0"
    evict(w, first, second)
    plan = deleted_by_someone(w, first)
    assert plan.notes == [f"Pod {first} was deleted: recreating ServingGroup sample-0"]
    assert plan.delete_pod_groups == ["sample-0"]
    w.apply(plan)
    for plan in w.converge():  # the second is still going: nothing of the ServingGroup is made
        assert plan.creates == [] and plan.requeue_after == BUSY_RETRY_SECONDS
    assert list(w.pods) == [second] and w.pod_groups == {}
    plan = deleted_by_someone(w, second)  # the ServingGroup is gone: it is made again
    assert plan.delete_pods == [] and plan.deleting == frozenset()
    w.apply(plan)
    made = [s.name for p in [plan, *w.converge()] for g in p.creates for s in g.pods]
    assert sorted(made) == sorted(POD_NAMES)
    uids = {n: p["metadata"]["uid"] for n, p in w.pods.items()}
    assert w.converge()[0].delete_pods == []
    assert {n: p["metadata"]["uid"] for n, p in w.pods.items()} == uids


def test_pods_evicted_together_recreate_their_role_replica_once() -> None:
    """RoleRecreate, a role replica of an entry and two workers: both workers are evicted
    together. The replica is deleted for the first and made again once the second is gone;
    the other role's Pods are untouched throughout."""
    roles = [role("prefill", replicas=1, workers=2), role("decode", replicas=1)]
    w = world(replicas=1, roles=roles, recoveryPolicy="RoleRecreate")
    w.converge()
    decode = w.pods["sample-0-decode-0-0"]["metadata"]["uid"]
    evict(w, "sample-0-prefill-0-1", "sample-0-prefill-0-2")
    plan = deleted_by_someone(w, "sample-0-prefill-0-1")
    assert [r.name for r in plan.delete_pods] == ["sample-0-prefill-0-0"]
    w.apply(plan)
    for plan in w.converge():
        assert plan.creates == [] and plan.delete_pods == []
    plan = deleted_by_someone(w, "sample-0-prefill-0-2")
    assert plan.delete_pods == []
    w.apply(plan)
    w.converge()
    assert sorted(w.pods) == [
        "sample-0-decode-0-0",
        "sample-0-prefill-0-0",
        "sample-0-prefill-0-1",
        "sample-0-prefill-0-2",
    ]
    assert w.pods["sample-0-decode-0-0"]["metadata"]["uid"] == decode
    assert "sample-0-prefill-0-0" in w.services


@pytest.mark.parametrize("rollout", ["ServingGroupRollingUpdate", "RoleRollingUpdate"])
def test_a_pod_the_new_revision_no_longer_has_is_waited_for_too(rollout: str) -> None:
    """A worker is evicted (slow to go) as a new revision drops it (two workers to one). The
    update deletes the ServingGroup (or the role replica), which is made again only once that
    worker is gone too, though the new layout has no such name; its deletion then recovers
    nothing again."""
    policy = "ServingGroupRecreate" if rollout == "ServingGroupRollingUpdate" else "RoleRecreate"
    roles = [role("prefill", replicas=1, workers=2), role("decode", replicas=1)]
    w = world(replicas=1, roles=roles, recoveryPolicy=policy, rolloutStrategy={"type": rollout})
    w.converge()
    evict(w, "sample-0-prefill-0-2")
    w.ms.spec.template.roles[0].worker_replicas = 1
    plans = w.converge()
    assert {r.name for p in plans for r in p.delete_pods} >= {"sample-0-prefill-0-0"}
    assert [g for p in plans for g in p.creates if g.pods] == []
    plan = deleted_by_someone(w, "sample-0-prefill-0-2")
    assert plan.notes == [] and plan.delete_pods == []
    w.apply(plan)
    w.converge()
    assert sorted(w.pods) == ["sample-0-decode-0-0", "sample-0-prefill-0-0", "sample-0-prefill-0-1"]


@pytest.mark.parametrize("policy", ["None", "RoleRecreate"])
def test_a_pod_stuck_terminating_holds_only_what_is_being_deleted_with_it(policy: str) -> None:
    """A Pod evicted and stuck terminating (its Node not Ready, a finalizer) that the
    controller is not deleting whole with others: the rest of its ServingGroup, gone
    meanwhile, is made again around it, as Kthena makes every role replica short of Pods."""
    w = world(replicas=1, roles=[role("server", replicas=2)], recoveryPolicy=policy)
    w.converge()
    evict(w, "sample-0-server-0-0")
    w.apply(deleted_by_someone(w, "sample-0-server-1-0"))
    made = [s.name for p in w.converge() for g in p.creates for s in g.pods]
    assert made == ["sample-0-server-1-0"]
    assert w.pods["sample-0-server-0-0"]["metadata"].get("deletionTimestamp")


def test_serving_group_recreate_waits_for_pods_going_already() -> None:
    """ServingGroupRecreate: a Pod is deleted by someone else while every other Pod of its
    ServingGroup is terminating already (evicted with it). Nothing more is deleted, and the
    ServingGroup is made again once they are gone, as Kthena's deleteServingGroup waits; a
    controller that restarted meanwhile (no memory of it) makes the missing Pods at once."""
    w = world(replicas=1, roles=pd_roles(), recoveryPolicy="ServingGroupRecreate")
    w.converge()
    evict(w, *POD_NAMES)
    plan = deleted_by_someone(w, "sample-0-prefill-0-0")
    assert plan.delete_pods == [] and plan.deleting == {"sample-0"}
    w.apply(plan)
    assert [g for p in w.converge() for g in p.creates] == []
    restarted = World(w.ms, pods=w.pods, services=w.services, pod_groups=w.pod_groups)
    assert [s.name for g in restarted.plan().creates for s in g.pods] == ["sample-0-prefill-0-0"]
    for name in POD_NAMES[:2]:
        plan = deleted_by_someone(w, name)
        assert plan.notes == [] and plan.creates == []
    plan = deleted_by_someone(w, "sample-0-prefill-0-1")
    assert plan.notes == [] and plan.deleting == frozenset()
    w.apply(plan)
    w.converge()
    assert sorted(w.pods) == POD_NAMES


@pytest.mark.parametrize("policy", ["ServingGroupRecreate", "RoleRecreate"])
def test_a_recovery_decided_and_not_carried_out_is_decided_again(policy: str) -> None:
    """The pass that decided a recovery did not delete anything (its API calls failed, or the
    plugin list was broken), so the deletion stays unhandled: the next pass recovers it again
    though the ServingGroup or role replica is listed as being deleted, since every Pod of it
    is still live."""
    w = world(replicas=1, roles=pd_roles(), recoveryPolicy=policy)
    w.converge()
    victim = "sample-0-prefill-0-0"
    gone = w.pods.pop(victim)
    first = w.plan(gone=[victim], deleted=[gone])
    assert first.delete_pods and w.deleting  # decided, not carried out
    again = w.plan(deleted=[gone])
    assert summary(again) == summary(first) and again.notes == first.notes
    w.apply(again)
    made = [s.name for p in w.converge() for g in p.creates for s in g.pods]
    assert sorted(made) == (POD_NAMES if policy == "ServingGroupRecreate" else POD_NAMES[2:])


def test_a_deletion_the_pass_still_reads_among_the_live_pods_waits_for_the_next_pass() -> None:
    """The watch reported a Pod gone after the pass read the Pods: it is still among them, with
    the UID of the one deleted. Nothing is done for it, and its UID is given back so the
    deletion stays for the next pass, which recovers it."""
    w = world(replicas=1, roles=pd_roles(), recoveryPolicy="ServingGroupRecreate")
    w.converge()
    gone = copy.deepcopy(w.pods["sample-0-decode-1-0"])
    plan = w.plan(deleted=[gone])
    assert plan.delete_pods == [] and plan.notes == [] and plan.creates == []
    assert plan.unseen_deletions == [gone["metadata"]["uid"]]
    assert plan.requeue_after == BUSY_RETRY_SECONDS
    plan = deleted_by_someone(w, "sample-0-decode-1-0")
    assert plan.unseen_deletions == []
    assert plan.notes == ["Pod sample-0-decode-1-0 was deleted: recreating ServingGroup sample-0"]


@settings(max_examples=60, deadline=None)
@given(data=st.data())
def test_a_complete_group_is_decided_as_if_it_were_planned(data: st.DataObject) -> None:
    """The shortcut that leaves a ServingGroup unplanned when its names all match changes no
    decision: random worlds (Pods gone, terminating or failed, Services gone, a new image, a
    new size) get the same plan with it and without it."""
    w = world(replicas=3, roles=pd_roles())
    w.converge()
    names = sorted(w.pods)
    for name in data.draw(st.lists(st.sampled_from(names), unique=True, max_size=4)):
        change = data.draw(st.sampled_from(["gone", "terminating", "failed", "not ready"]))
        if change == "gone":
            del w.pods[name]
        elif change == "terminating":
            w.pods[name]["metadata"]["deletionTimestamp"] = "1970-01-01T00:16:00Z"
        elif change == "failed":
            w.pods[name]["status"]["phase"] = "Failed"
        else:
            w.pods[name]["status"]["conditions"][0]["status"] = "False"
    for name in data.draw(st.lists(st.sampled_from(sorted(w.services)), unique=True, max_size=2)):
        del w.services[name]
    for name in data.draw(st.lists(st.sampled_from(sorted(w.pod_groups)), unique=True, max_size=2)):
        del w.pod_groups[name]
    spec: dict[str, Any] = {"replicas": data.draw(st.integers(1, 4))}
    if data.draw(st.booleans()):
        spec["template"] = w.ms.spec.template.model_copy(
            update={"roles": [Role.model_validate(r) for r in pd_roles("nginx:2")]}
        )
    ms = w.ms.model_copy(update={"spec": w.ms.spec.model_copy(update=spec)})
    gone = set(data.draw(st.lists(st.sampled_from(names), unique=True, max_size=2)))

    def decide() -> SyncPlan:
        return sync(
            ms,
            [copy.deepcopy(p) for p in w.pods.values()],
            list(w.services.values()),
            list(w.pod_groups.values()),
            now=w.now,
            gang=True,
            recently_gone=gone,
        )

    shortcut = summary(decide())
    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(_Sync, "complete", lambda self, group, rev: False)
        assert summary(decide()) == shortcut


def counts_of(w: World) -> tuple[int, int, int, int]:
    status = w.plan().status
    assert status is not None
    return (
        status.replicas,
        status.current_replicas,
        status.updated_replicas,
        status.available_replicas,
    )


def test_current_replicas_count_as_kthena_counts_them() -> None:
    """Kthena's currentReplicas: the ServingGroups not at the update revision, and all of them
    once every one is updated and available (without a partition); so 0 while a new
    ModelServing's groups are not ready yet."""
    w = world(replicas=2)
    w.ready = False
    w.converge()
    assert counts_of(w) == (2, 0, 2, 0)
    w.ready = True
    for pod in w.pods.values():
        pod["status"]["conditions"][0]["status"] = "True"
    assert counts_of(w) == (2, 2, 2, 2)
    w.new_image()
    assert counts_of(w) == (2, 2, 0, 2)  # both at the old revision, both available


def test_current_replicas_with_a_partition_stay_those_not_updated() -> None:
    w = world(replicas=2, rolloutStrategy={"rollingUpdateConfiguration": {"partition": 0}})
    w.converge()
    assert counts_of(w) == (2, 0, 2, 2)


def test_a_template_that_sets_the_group_label_keeps_its_groups_counted_and_updated() -> None:
    """Kthena's router examples label every Pod ``group-name: group-0`` in the template (the
    router pairs prefill and decode by it), and the template's labels win over the
    controller's: the ServingGroup of such a Pod is the one its name gives."""
    roles = pd_roles()
    for r in roles:
        for key in ("entryTemplate", "workerTemplate"):
            if key in r:
                meta = r[key].setdefault("metadata", {})
                meta.setdefault("labels", {})["modelserving.volcano.sh/group-name"] = "group-0"
    w = world(replicas=2, roles=roles)
    w.converge()
    assert w.groups() == ["group-0"]  # every Pod carries the template's label
    assert len(w.pods) == 2 * 4
    status = w.plan().status
    assert status is not None and status.available
    assert (status.replicas, status.available_replicas) == (2, 2)
    before = w.revisions()
    w.new_image()
    w.converge(limit=40)
    assert len(w.pods) == 2 * 4
    assert all(w.revisions()[n] != before[n] for n in w.pods if "prefill" in n)
    status = w.plan().status
    assert status is not None and status.available and status.updated_replicas == 2


@pytest.mark.parametrize(
    ("kwargs", "first", "second"),
    [
        ({"replicas": 2}, "sample-1-server-0-0", "sample-0-server-0-0"),
        (
            {
                "replicas": 1,
                "roles": [role("decode", replicas=2, workers=0)],
                "rolloutStrategy": {"type": "RoleRollingUpdate"},
            },
            "sample-0-decode-1-0",
            "sample-0-decode-0-0",
        ),
    ],
    ids=["serving-groups", "role-replicas"],
)
def test_outdated_replicas_that_are_not_ready_count_against_max_unavailable(
    kwargs: dict[str, Any], first: str, second: str
) -> None:
    """As Kthena (and a Deployment) counts: with two ServingGroups (or role replicas) that are
    not ready and ``maxUnavailable: 1``, one is replaced; the other waits while the new one is
    not ready, and goes once it is."""
    w = world(**kwargs)
    w.ready = False
    w.converge()
    w.new_image()
    plan = w.plan()
    assert [r.name for r in plan.delete_pods] == [first]
    w.apply(plan)
    w.apply(w.plan())  # made again at the new revision, not ready either
    waiting = w.plan()
    assert waiting.delete_pods == [] and waiting.requeue_after is not None
    w.ready = True
    for pod in w.pods.values():
        pod["status"]["conditions"][0]["status"] = "True"
    assert [r.name for r in w.plan().delete_pods] == [second]


def test_a_scale_down_during_a_rolling_update_picks_before_the_update_replaces() -> None:
    """Kthena scales first, then rolls: scaled from 2 to 1 while neither ServingGroup is ready
    (sample-1 already at the new revision), sample-1 goes (the highest ordinal of equals) and
    sample-0 is the one kept and updated."""
    w = world(replicas=2)
    w.ready = False
    w.converge()
    w.new_image()
    w.apply(w.plan())  # sample-1 deleted for the update
    w.apply(w.plan())  # and made again, not ready
    w.ms.spec.replicas = 1
    plan = w.plan()
    assert {(r.name, r.cause) for r in plan.delete_pods} == {
        ("sample-1-server-0-0", "scale"),
        ("sample-0-server-0-0", "update"),
    }
    w.apply(plan)
    w.converge()
    assert sorted(w.pods) == ["sample-0-server-0-0"]
    assert w.pods["sample-0-server-0-0"]["spec"]["containers"][0]["image"] == "nginx:2"


def test_scale_down_spares_the_groups_the_partition_protects() -> None:
    """Kthena deletes ServingGroups above the partition first, even a ready one before a
    protected one that is not ready."""
    w = world(replicas=4, rolloutStrategy={"rollingUpdateConfiguration": {"partition": 2}})
    w.converge()
    w.pods["sample-0-server-0-0"]["status"]["conditions"][0]["status"] = "False"
    w.ms.spec.replicas = 3
    assert [r.name for r in w.plan().delete_pods] == ["sample-3-server-0-0"]
    w.ms.spec.replicas = 1  # past the partition: the protected ones go too, not ready first
    assert sorted(r.name for r in w.plan().delete_pods) == [
        "sample-0-server-0-0",
        "sample-2-server-0-0",
        "sample-3-server-0-0",
    ]


def test_a_new_serving_group_below_the_partition_waits_for_its_names_at_the_current_revision() -> (
    None
):
    """ServingGroup 0, below the partition, is made again at the current revision, whose role
    has two replicas where the new one has one. One of those two names is free: its plan is
    built and that Pod made, though the one name the new revision has is still held."""
    strategy = {
        "type": "ServingGroupRollingUpdate",
        "rollingUpdateConfiguration": {"maxUnavailable": 1, "partition": 2},
    }
    old = parse_model_serving(manifest(roles=[role(replicas=2)], replicas=2))
    changed = role(replicas=1)
    changed["entryTemplate"]["spec"]["containers"][0]["image"] = "nginx:2"
    new = parse_model_serving(manifest(roles=[changed], replicas=2, rolloutStrategy=strategy))
    current = revision(old)
    new.status = ModelServingStatus(current_revision=current)
    history = {current: [r.to_api() for r in old.spec.template.roles]}
    pods = []
    for desired in plan_group(old, 1, current).pods():  # ServingGroup 1: complete, Ready
        pod = copy.deepcopy(desired.pod)
        pod["metadata"].update(uid=f"uid-{desired.name}", resourceVersion="1")
        pod["status"] = {"phase": "Running", "conditions": [{"type": "Ready", "status": "True"}]}
        pods.append(pod)
    held = copy.deepcopy(next(plan_group(old, 0, current).pods()).pod)
    assert held["metadata"]["name"] == "sample-0-server-0-0"  # the new revision's only name
    held["metadata"].update(uid="uid-held", deletionTimestamp="2026-12-07T00:00:00Z")
    held["status"] = {"phase": "Running"}
    pods.append(held)  # sample-0-server-1-0 is free
    inputs: dict[str, Any] = {"now": 1000.0, "history": history}
    plan = sync(new, pods, **inputs)
    assert summary(plan) == summary(sync(new, pods, every_group=True, **inputs))
    made = [s.name for c in plan.creates for s in c.steps if isinstance(s, DesiredPod)]
    assert made == ["sample-0-server-1-0"]


def pod_group_uids(w: World) -> dict[str, int]:
    return {name: id(pg) for name, pg in w.pod_groups.items()}


def test_a_rolling_update_deletes_each_serving_groups_pod_group_with_it() -> None:
    """Kthena's deleteServingGroup deletes the PodGroup first; the ServingGroup made again gets
    a new one, made with its first Pods."""
    w = world(replicas=2, roles=pd_roles())
    w.converge()
    before = pod_group_uids(w)
    assert sorted(before) == ["sample-0", "sample-1"]
    w.new_image()
    for plan in w.converge(limit=20):
        deleted = {r.name.rsplit("-", 3)[0] for r in plan.delete_pods}
        assert sorted(plan.delete_pod_groups) == sorted(deleted)
        assert not deleted & set(plan.update_pod_groups)
    after = pod_group_uids(w)
    assert sorted(after) == ["sample-0", "sample-1"]
    assert all(after[n] != before[n] for n in after)  # each made again


def test_serving_group_recreate_deletes_and_remakes_its_pod_group() -> None:
    w = world(replicas=2, roles=pd_roles(), recoveryPolicy="ServingGroupRecreate")
    w.converge()
    before = pod_group_uids(w)
    w.pods["sample-1-decode-1-0"]["status"]["phase"] = "Failed"
    plan = w.plan()
    assert plan.delete_pod_groups == ["sample-1"]
    w.apply(plan)
    w.converge()
    after = pod_group_uids(w)
    assert after["sample-0"] == before["sample-0"] and after["sample-1"] != before["sample-1"]


def test_a_role_replica_made_again_keeps_its_pod_group() -> None:
    """Kthena's DeleteRole leaves the ServingGroup's PodGroup."""
    w = world(replicas=1, roles=pd_roles())
    w.converge()
    before = pod_group_uids(w)
    plan = deleted_by_someone(w, "sample-0-prefill-0-1")
    assert plan.delete_pod_groups == []
    w.apply(plan)
    w.converge()
    assert pod_group_uids(w) == before


def test_the_pod_group_of_a_deleted_group_waits_for_its_pods_names() -> None:
    """While the Pods of a ServingGroup deleted whole are still terminating, its PodGroup is
    not made again; it is made with the first Pods."""
    w = world(replicas=1, roles=pd_roles(), recoveryPolicy="ServingGroupRecreate")
    w.converge()
    w.pods["sample-0-decode-1-0"]["status"]["phase"] = "Failed"
    plan = w.plan()
    assert plan.delete_pod_groups == ["sample-0"]
    del w.pod_groups["sample-0"]
    for pod in w.pods.values():  # being deleted: still there, terminating
        pod["metadata"]["deletionTimestamp"] = "2026-12-07T00:00:00Z"
    waiting = w.plan()
    assert waiting.creates == [] and waiting.requeue_after is not None
    w.pods.clear()
    made = w.plan()
    assert [(g.name, g.pod_group is not None, len(g.pods)) for g in made.creates] == [
        ("sample-0", True, 4)
    ]


def stuck_update(**kwargs: Any) -> tuple[World, str, str]:
    """Two ServingGroups mid-update: ``sample-1`` made again at the new revision and not
    ready, so ``maxUnavailable: 1`` keeps ``sample-0`` at the old one. Returns the world, the
    old revision and the new."""
    w = world(
        replicas=2,
        roles=pd_roles(),
        rolloutStrategy={"rollingUpdateConfiguration": {"maxUnavailable": 1}},
        **kwargs,
    )
    w.converge()
    old = w.revisions()["sample-0-prefill-0-0"]
    w.new_image()
    w.ready = False
    w.apply(w.plan())  # sample-1 deleted
    w.apply(w.plan())  # and made again, not ready
    new = w.revisions()["sample-1-prefill-0-0"]
    assert old != new and w.plan().delete_pods == []  # stuck
    return w, old, new


def test_a_pod_lost_in_an_outdated_group_comes_back_at_the_update_revision() -> None:
    """Kthena's syncRoleReplicas makes a missing Pod of a ServingGroup the partition does not
    protect from the current template (manageRoleReplicasPerGroup, newRevision), whatever its
    other Pods' revision: the ServingGroup then counts as outdated and is replaced in its
    turn."""
    w, old, new = stuck_update(recoveryPolicy="None")
    del w.pods["sample-0-prefill-0-1"]
    plan = w.plan()
    made = [d for g in plan.creates for d in g.pods]
    assert [d.name for d in made] == ["sample-0-prefill-0-1"]
    assert made[0].pod["metadata"]["labels"]["modelserving.volcano.sh/revision"] == new
    assert plan.delete_pods == []
    w.apply(plan)
    assert w.revisions()["sample-0-prefill-0-0"] == old  # the others stay
    for pod in w.pods.values():  # the new Pods get ready: sample-0 is replaced whole
        pod["status"]["conditions"][0]["status"] = "True"
    w.ready = True
    w.converge(limit=20)
    assert set(w.revisions().values()) == {new}


def test_a_role_replica_recovered_in_an_outdated_group_is_made_at_the_update_revision() -> None:
    w, old, new = stuck_update()
    plan = deleted_by_someone(w, "sample-0-prefill-0-1")
    assert [r.name for r in plan.delete_pods] == ["sample-0-prefill-0-0"]
    w.apply(plan)
    w.apply(w.plan())
    revisions = w.revisions()
    assert revisions["sample-0-prefill-0-0"] == revisions["sample-0-prefill-0-1"] == new
    assert revisions["sample-0-decode-0-0"] == revisions["sample-0-decode-1-0"] == old
    assert w.pods["sample-0-prefill-0-0"]["spec"]["containers"][0]["image"] == "nginx:2"


def test_an_outdated_group_keeps_what_only_its_own_revision_has() -> None:
    """A worker or a role the current template no longer has stays in a ServingGroup not yet
    replaced (Kthena's syncRoleReplicas only creates from the current roles, and deletes only a
    current role's surplus replicas); a missing Pod is still made from the current one."""
    w, _, _ = stuck_update(recoveryPolicy="None")
    roles = w.ms.spec.template.roles
    roles[0].worker_replicas = 0  # prefill loses its worker
    w.ms.spec.template.roles = [roles[0]]  # decode goes
    w.ms.spec.template.roles[0].replicas = 1
    del w.pods["sample-0-prefill-0-0"]
    plan = w.plan()
    assert [d.name for g in plan.creates for d in g.pods if d.name.startswith("sample-0-")] == [
        "sample-0-prefill-0-0"
    ]
    assert not [r.name for r in plan.delete_pods if r.name.startswith("sample-0-")]
    assert "sample-0-prefill-0-0" not in plan.delete_services


def test_the_last_pod_of_a_serving_group_deleted_remakes_its_pod_group_first() -> None:
    """A ServingGroup of one Pod under ServingGroupRecreate: Kthena's deleteServingGroup still
    deletes its PodGroup, and the ServingGroup is made again, PodGroup first, on the next pass."""
    w = world(replicas=1, recoveryPolicy="ServingGroupRecreate")
    w.converge()
    assert list(w.pods) == ["sample-0-server-0-0"] and list(w.pod_groups) == ["sample-0"]
    before = pod_group_uids(w)
    plan = deleted_by_someone(w, "sample-0-server-0-0")
    assert plan.delete_pod_groups == ["sample-0"]
    assert plan.creates == [] and plan.requeue_after is not None
    assert plan.notes == ["Pod sample-0-server-0-0 was deleted: recreating ServingGroup sample-0"]
    w.apply(plan)
    made = w.plan()
    assert [(g.name, g.pod_group is not None, [d.name for d in g.pods]) for g in made.creates] == [
        ("sample-0", True, ["sample-0-server-0-0"])
    ]
    w.apply(made)
    assert pod_group_uids(w)["sample-0"] != before["sample-0"]


def test_the_last_pod_of_a_serving_group_deleted_under_role_recreate_keeps_its_pod_group() -> None:
    w = world(replicas=1)
    w.converge()
    before = pod_group_uids(w)
    plan = deleted_by_someone(w, "sample-0-server-0-0")
    assert plan.delete_pod_groups == [] and plan.notes == []
    w.apply(plan)
    made = w.plan()  # (its name has rested)
    assert [d.name for g in made.creates for d in g.pods] == ["sample-0-server-0-0"]
    w.apply(made)
    assert pod_group_uids(w) == before
