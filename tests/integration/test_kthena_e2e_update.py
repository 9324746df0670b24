"""Kthena's own end-to-end tests of rolling updates, partitions, a controller restart and the
choice of what a scale-down removes, ported from
``test/e2e/controller-manager/model_serving_test.go`` (Kthena 3cc0572) to our controller on the
local control plane (kwok Nodes, Volcano).

Covered, in Kthena's order: a ServingGroup ``partition`` (its boundary, a protected group
rebuilt at its historical revision, scaling up and down under it), a rolling update without
one, a controller restart while Pods are being created, ``RoleRollingUpdate`` (only the changed
role rolls, a role's ``maxUnavailable`` while new Pods never become Ready, a role's
``partition`` and scaling a role up and down under it), scale-down by
``controller.kubernetes.io/pod-deletion-cost`` (ServingGroups, role replicas, both) and a
scale-down that removes the ServingGroup or role replica that is not Ready first.

kwok Nodes run no containers, so the Kthena tests' real failures are made here: a Pod that
never becomes Ready is given, while a scheduling gate holds it, the status of a started Pod whose
readiness gate is False (kwok then leaves it alone; ``start_all_but``), and an image that cannot
be pulled is a template that also selects no Node, so its Pods stay Pending and never Ready, as
a Pod in ``ImagePullBackOff`` does (Kthena's controller reads neither a container's waiting
reason nor its image).
"""

from __future__ import annotations

import copy
import re
import socket
import time
from collections.abc import Iterator
from contextlib import ExitStack
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
import yaml

from modelserving.api import labels
from modelserving.controller.manager import Controller
from tests.integration.conftest import Cluster, wait_for
from tests.integration.controller_env import (
    Objects,
    controller_process,
    install_crd,
    running_controller,
)
from tests.integration.kthena_e2e import NGINX as OLD
from tests.integration.kthena_e2e import NGINX_ALPINE as NEW
from tests.integration.kthena_e2e import basic_model_serving as basic
from tests.integration.kthena_e2e import container, template
from tests.integration.kthena_e2e import kthena_role as role

BAD = "nginx:role-rollingupdate-maxunavailable-bad-image"
NO_NODE = {"kthena-e2e/unpullable-image": "true"}
"""A nodeSelector no Node matches: with it a Pod stays Pending, as one whose image cannot be
pulled does on a real Node (kwok would run any image)."""
GATE = "kthena.e2e/test-ready"
HOLD = "kthena.e2e/hold"
READY_HOOKS = labels.LABEL_PREFIX + "ready-hooks"
DELETION_COST = "controller.kubernetes.io/pod-deletion-cost"


class Restartable:
    """The in-process controller of this module, which a test may stop and start again."""

    def __init__(self, cluster: Cluster) -> None:
        self.cluster = cluster
        self._running = ExitStack()
        self.ctl: Controller | None = None

    def start(self) -> None:
        self.ctl = self._running.enter_context(running_controller(self.cluster))

    def stop(self) -> None:
        self._running.close()
        self._running = ExitStack()
        self.ctl = None


@pytest.fixture(scope="module")
def controller(cluster: Cluster) -> Iterator[Restartable]:
    install_crd(cluster)
    ctl = Restartable(cluster)
    ctl.start()
    try:
        yield ctl
    finally:
        ctl.stop()


@pytest.fixture
def objs(cluster: Cluster, namespace: str, controller: Restartable) -> Objects:
    return Objects(cluster, namespace)


# --- Kthena's builders (the rest in tests/integration/kthena_e2e.py) ---------------------------


def partitioned(name: str, replicas: int, partition: int) -> Any:
    """Kthena's ``createPartitionedModelServing``: one role ``role`` of one replica."""
    body = basic(name, replicas)
    body["spec"]["rolloutStrategy"]["rollingUpdateConfiguration"] = {
        "partition": partition,
        "maxUnavailable": replicas,
    }
    body["spec"]["template"]["roles"][0]["name"] = "role"
    return body


def role_rolling(name: str, roles: list[dict[str, Any]], replicas: int = 1) -> Any:
    """``RoleRollingUpdate`` with ``RoleRecreate``, as Kthena's role tests write it."""
    body = basic(name, replicas, 0, *roles)
    body["spec"]["rolloutStrategy"] = {"type": "RoleRollingUpdate"}
    body["spec"]["recoveryPolicy"] = "RoleRecreate"
    return body


def one_role(name: str, replicas: int, **rolling: int) -> dict[str, Any]:
    """A role of entry Pods only, with a role-level rolling update configuration."""
    return {
        "name": name,
        "replicas": replicas,
        "entryTemplate": template(container()),
        "workerReplicas": 0,
        **rolling,
    }


# --- Kthena's readers (utils.WaitForModelServingReady, collectRunningServingGroupStates, ...) ---


def parent_and_ordinal(name: str) -> tuple[str, int]:
    """Kthena's ``GetParentNameAndOrdinal``: ``<parent>-<n>`` -> (parent, n), else (name, -1)."""
    match = re.fullmatch(r"(.*)-(\d+)", name)
    return (match[1], int(match[2])) if match else (name, -1)


def all_pods(objs: Objects, ms: str, **selector: str) -> list[dict[str, Any]]:
    """The Pods of ``ms`` with these extra labels, terminating ones included (a Go List)."""
    terms = [f"{labels.NAME_LABEL}={ms}", *(f"{k}={v}" for k, v in selector.items())]
    got = objs.core.list_namespaced_pod(objs.namespace, label_selector=",".join(terms))
    items: list[dict[str, Any]] = objs.cluster.api_client.sanitize_for_serialization(got)["items"]
    return items


def running(pod: dict[str, Any]) -> bool:
    phase = (pod.get("status") or {}).get("phase")
    return phase == "Running" and not pod["metadata"].get("deletionTimestamp")


def image(pod: dict[str, Any]) -> str:
    return str(pod["spec"]["containers"][0]["image"])


def label(pod: dict[str, Any], key: str) -> str:
    return str((pod["metadata"].get("labels") or {}).get(key, ""))


def role_ordinal(pod: dict[str, Any]) -> int:
    return parent_and_ordinal(label(pod, labels.ROLE_ID_LABEL))[1]


def status(objs: Objects, name: str) -> dict[str, Any]:
    return dict(objs.get(name).get("status") or {})


def is_ready(objs: Objects, name: str) -> bool:
    """Kthena's ``WaitForModelServingReady`` condition."""
    ms = objs.get(name)
    got = ms.get("status") or {}
    want = ms["spec"].get("replicas", 1)
    return bool(
        got.get("observedGeneration") == ms["metadata"]["generation"]
        and got.get("replicas") == want
        and got.get("availableReplicas") == want
    )


def wait(objs: Objects, ms: str, what: str, check: Any, timeout: float = 90) -> Any:
    """``wait_for``, failing with what ``ms`` and its Pods looked like at the end."""
    try:
        return wait_for(what, check, timeout)
    except pytest.fail.Exception as failed:
        pytest.fail(f"{failed}\n{describe(objs, ms)}", pytrace=False)


def describe(objs: Objects, ms: str) -> str:
    got = objs.get(ms).get("status") or {}
    lines = [f"status: { {k: v for k, v in got.items() if k != 'conditions'} }"]
    for pod in all_pods(objs, ms):
        meta = pod["metadata"]
        conditions = (pod.get("status") or {}).get("conditions") or []
        ready = next((c["status"] for c in conditions if c.get("type") == "Ready"), "-")
        lines.append(
            f"  {meta['name']} {(pod.get('status') or {}).get('phase')} ready={ready} "
            f"{image(pod)} rev={label(pod, labels.REVISION_LABEL)} "
            f"deleting={bool(meta.get('deletionTimestamp'))} "
            f"cost={(meta.get('annotations') or {}).get(DELETION_COST, '-')}"
        )
    return "\n".join(lines)


def wait_ready(objs: Objects, name: str, timeout: float = 90) -> None:
    wait(objs, name, f"{name} ready", lambda: is_ready(objs, name), timeout)


def create_ready(objs: Objects, body: dict[str, Any]) -> None:
    """Kthena's ``createAndWaitForModelServing``."""
    objs.create(body)
    wait_ready(objs, body["metadata"]["name"])


def update(objs: Objects, name: str, mutate: Any) -> None:
    """Kthena's ``updateModelServingWithRetry``: the whole spec, mutated, as a merge patch."""
    spec = copy.deepcopy(objs.get(name)["spec"])
    mutate(spec)
    objs.patch(name, {"spec": spec})


def set_entry_image(spec: dict[str, Any], image_: str, role_index: int = 0) -> None:
    spec["template"]["roles"][role_index]["entryTemplate"]["spec"]["containers"][0]["image"] = (
        image_
    )


def running_count(objs: Objects, ms: str) -> int:
    return sum(running(p) for p in all_pods(objs, ms))


def wait_running(objs: Objects, ms: str, count: int, timeout: float = 90) -> None:
    """Kthena's ``waitForRunningPodCount``."""
    wait(objs, ms, f"{count} running Pods", lambda: running_count(objs, ms) == count, timeout)


@dataclass(frozen=True)
class GroupState:
    group: str
    revision: str
    image: str
    uid: str


def group_states(objs: Objects, ms: str) -> dict[int, GroupState]:
    """Kthena's ``collectRunningServingGroupStates``: per ServingGroup ordinal, its first running
    Pod's revision and image."""
    states: dict[int, GroupState] = {}
    for pod in all_pods(objs, ms):
        if not running(pod):
            continue
        parent, ordinal = parent_and_ordinal(label(pod, labels.GROUP_NAME_LABEL))
        revision = label(pod, labels.REVISION_LABEL)
        if parent != ms or ordinal < 0 or not revision:
            continue
        states.setdefault(
            ordinal,
            GroupState(label(pod, labels.GROUP_NAME_LABEL), revision, image(pod), pod_uid(pod)),
        )
    return states


def pod_uid(pod: dict[str, Any]) -> str:
    return str(pod["metadata"]["uid"])


def covers(states: dict[int, Any], replicas: int) -> bool:
    """Kthena's ``hasExpectedOrdinalRange``: the keys are exactly ``[0, replicas)``."""
    return set(states) == set(range(replicas))


def partition_counts(
    states: dict[int, GroupState], partition: int, current: str, update_revision: str
) -> tuple[int, int]:
    """Kthena's ``calculateGroupPartitionState``: (protected at the current revision and old
    image, others at the update revision)."""
    protected = updated = 0
    for ordinal, state in states.items():
        below = partition > 0 and ordinal < partition
        if below and state.revision == current and state.image == OLD:
            protected += 1
        elif not below and state.revision == update_revision:
            updated += 1
    return protected, updated


def wait_partition_state(
    objs: Objects, ms: str, partition: int, replicas: int, initial: str
) -> str:
    """Kthena's ``waitForPartitionState``; returns the update revision."""

    def settled() -> str | None:
        got = status(objs, ms)
        states = group_states(objs, ms)
        if not covers(states, replicas):
            return None
        update_revision = got.get("updateRevision") or ""
        protected, updated = partition_counts(states, partition, initial, update_revision)
        if (
            got.get("currentRevision") != initial
            or not update_revision
            or update_revision == initial
            or protected != partition
            or updated != replicas - partition
        ):
            return None
        return str(update_revision)

    result: str = wait(objs, ms, f"{ms}'s partition state", settled)
    return result


def initial_revision(objs: Objects, name: str) -> str:
    revision = status(objs, name).get("currentRevision")
    assert revision, "the initial currentRevision should be set"
    return str(revision)


def role_images(pods: list[dict[str, Any]]) -> dict[int, dict[str, Any]]:
    """Running Pods by their role replica's ordinal (Kthena's ``imageByOrdinal`` maps)."""
    return {role_ordinal(p): p for p in pods if running(p)}


def patch_deletion_cost(objs: Objects, pod: str, cost: int, costs: dict[str, str]) -> None:
    """Kthena's ``patchPodDeletionCost``: a merge patch of the annotation (noted in ``costs``)."""
    objs.core.patch_namespaced_pod(
        pod,
        objs.namespace,
        {"metadata": {"annotations": {DELETION_COST: str(cost)}}},
        _content_type="application/merge-patch+json",
    )
    costs[pod] = str(cost)


def costs_seen(controller: Restartable, objs: Objects, ms: str, costs: dict[str, str]) -> None:
    """Wait until the controller's own view of the Pods (its watch's cache) has every deletion
    cost of ``costs``. The scale-down that follows is decided from that view, as Kthena's is
    from its informer's, and the watch may hand over the Pods' changes after the
    ModelServing's: without this wait the test would race the watch (it lost, once in three
    runs, with the integration tests in two workers beside the heavy ones)."""
    ctl = controller.ctl
    assert ctl is not None and costs

    def seen() -> bool:
        cached = ctl.cache.by_name("pods", objs.namespace, ms)
        for name, cost in costs.items():
            metadata = (cached.get(name) or {}).get("metadata") or {}
            if (metadata.get("annotations") or {}).get(DELETION_COST) != cost:
                return False
        return True

    wait_for(f"the controller to see the deletion costs of {ms}'s Pods", seen, 30)


# --- ServingGroup partition ---


def test_partition_keeps_groups_below_it_at_the_old_revision(objs: Objects) -> None:
    """Ports TestModelServingPartitionBoundaryProtection."""
    replicas, partition = 5, 3
    create_ready(objs, partitioned("boundary", replicas, partition))
    initial = initial_revision(objs, "boundary")
    update(objs, "boundary", lambda s: set_entry_image(s, NEW))
    wait_ready(objs, "boundary")
    update_revision = wait_partition_state(objs, "boundary", partition, replicas, initial)
    assert update_revision != initial


def test_deleted_group_below_the_partition_comes_back_at_its_historical_revision(
    objs: Objects,
) -> None:
    """Ports TestModelServingPartitionDeletedGroupHistoricalRevision."""
    replicas, partition = 5, 3
    body = partitioned("historical", replicas, partition)
    body["spec"]["recoveryPolicy"] = "RoleRecreate"
    create_ready(objs, body)
    initial = initial_revision(objs, "historical")
    update(objs, "historical", lambda s: set_entry_image(s, NEW))
    wait_ready(objs, "historical")
    update_revision = wait_partition_state(objs, "historical", partition, replicas, initial)

    target = 1
    pods = all_pods(objs, "historical", **{labels.GROUP_NAME_LABEL: f"historical-{target}"})
    assert pods
    gone = pod_uid(pods[0])
    objs.core.delete_namespaced_pod(pods[0]["metadata"]["name"], objs.namespace)
    wait_ready(objs, "historical")

    def rebuilt() -> bool:
        state = group_states(objs, "historical").get(target)
        return bool(
            state and state.uid != gone and state.revision == initial and state.image == OLD
        )

    wait(objs, "historical", "the protected group rebuilt at its revision", rebuilt)
    final = status(objs, "historical")
    states = group_states(objs, "historical")
    assert partition_counts(states, partition, initial, update_revision) == (
        partition,
        replicas - partition,
    )
    assert final["currentRevision"] == initial
    assert final["updateRevision"] == update_revision


def test_scale_up_under_a_partition_makes_new_groups_at_the_update_revision(
    objs: Objects,
) -> None:
    """Ports TestModelServingPartitionScaleUp."""
    initial_replicas, partition, scaled = 5, 3, 7
    create_ready(objs, partitioned("scaleup", initial_replicas, partition))
    initial = initial_revision(objs, "scaleup")
    update(objs, "scaleup", lambda s: set_entry_image(s, NEW))
    wait_ready(objs, "scaleup")
    update_revision = wait_partition_state(objs, "scaleup", partition, initial_replicas, initial)
    before = group_states(objs, "scaleup")

    objs.patch("scaleup", {"spec": {"replicas": scaled}})
    wait_ready(objs, "scaleup")

    def converged() -> bool:
        states = group_states(objs, "scaleup")
        counts = partition_counts(states, partition, initial, update_revision)
        return covers(states, scaled) and counts == (partition, scaled - partition)

    wait(objs, "scaleup", "the partition state after the scale-up", converged)
    final = objs.get("scaleup")
    assert final["spec"]["replicas"] == scaled
    assert final["status"]["currentRevision"] == initial
    assert final["status"]["updateRevision"] == update_revision
    after = group_states(objs, "scaleup")
    for ordinal in range(partition):
        assert ordinal in after, f"protected group {ordinal} should still exist"
        assert after[ordinal].revision == before[ordinal].revision
        assert after[ordinal].uid == before[ordinal].uid, f"group {ordinal} was recreated"


def test_scale_down_under_a_partition_removes_the_updated_groups(objs: Objects) -> None:
    """Ports TestModelServingPartitionScaleDown."""
    initial_replicas, partition, scaled = 5, 3, 3
    create_ready(objs, partitioned("scaledown", initial_replicas, partition))
    initial = initial_revision(objs, "scaledown")
    update(objs, "scaledown", lambda s: set_entry_image(s, NEW))
    wait_ready(objs, "scaledown")
    update_revision = wait_partition_state(objs, "scaledown", partition, initial_replicas, initial)

    update(objs, "scaledown", lambda s: s.update(replicas=scaled))
    wait_ready(objs, "scaledown")

    states = group_states(objs, "scaledown")
    assert partition_counts(states, partition, initial, update_revision) == (scaled, 0)
    final = objs.get("scaledown")
    assert final["spec"]["replicas"] == scaled
    got = final["status"]
    assert got["replicas"] == scaled
    assert got.get("updatedReplicas", 0) == 0
    assert got["currentReplicas"] == scaled
    assert got["availableReplicas"] == scaled


def test_rolling_update_without_partition_moves_every_group(objs: Objects) -> None:
    """Ports TestModelServingRollingUpdate."""
    replicas = 3
    create_ready(objs, basic("rolling", replicas))
    initial = status(objs, "rolling")["currentRevision"]

    def all_at(image_: str) -> bool:
        pods = all_pods(objs, "rolling")
        live = [p for p in pods if not p["metadata"].get("deletionTimestamp")]
        return bool(pods) and all(running(p) and image(p) == image_ for p in live)

    wait(objs, "rolling", f"every Pod running {OLD}", lambda: all_at(OLD))
    update(objs, "rolling", lambda s: set_entry_image(s, NEW))
    wait_ready(objs, "rolling")
    wait(objs, "rolling", f"every Pod running {NEW}", lambda: all_at(NEW))

    def converged() -> bool:  # Kthena's waitForRollingUpdateConverged
        got = status(objs, "rolling")
        target = got.get("updateRevision")
        if not target or target == initial or got.get("currentRevision") != target:
            return False
        counts = [got.get(k) for k in ("replicas", "availableReplicas", "updatedReplicas")]
        if counts != [replicas] * 3:
            return False
        states = group_states(objs, "rolling")
        return covers(states, replicas) and all(
            s.revision == target and s.image == NEW for s in states.values()
        )

    wait(objs, "rolling", "the rolling update to converge", converged)


# --- a controller restart ---


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def test_controller_killed_while_creating_and_restarted_makes_every_pod_once(
    objs: Objects, controller: Restartable, tmp_path: Path
) -> None:
    """Ports TestModelServingControllerManagerRestart. Kthena deletes its controller Pod 0 to
    3 s after the create and waits for the new one. Here the module's controller is stopped,
    the ModelServing is reconciled by ``modelserving run`` as a process, which is killed
    (SIGKILL) as soon as the first Pod is there, and a new controller is started. Stopped
    gracefully, the in-process controller finishes the pass it is in (all 25 Pods), so the kill
    is what makes a restart in the middle of creating."""
    body = basic("restart", 5, 0, role("prefill", 1, 2), role("decode", 1, 1))
    config = tmp_path / "config.yaml"
    config.write_text(
        yaml.safe_dump(
            {
                "leaderElection": {"enabled": False},
                "metrics": {"port": free_port(), "bindAddress": "127.0.0.1"},
                "health": {"port": free_port()},
            }
        )
    )
    controller.stop()
    try:
        with controller_process(objs.cluster, tmp_path / "controller.log", config=config):
            objs.create(body)
            wait_for("the first Pod", lambda: all_pods(objs, "restart"), 60, interval=0.02)
        before = {p["metadata"]["name"]: pod_uid(p) for p in all_pods(objs, "restart")}
    finally:
        controller.start()

    wait_ready(objs, "restart")
    pods = all_pods(objs, "restart")
    assert len(pods) == 25, "5 ServingGroups x (3 prefill + 2 decode Pods)"
    assert all(running(p) for p in pods), "every Pod should be Running"
    after = {p["metadata"]["name"]: pod_uid(p) for p in pods}
    assert {name: after.get(name) for name in before} == before, "a Pod was made again"


# --- RoleRollingUpdate ---


def test_role_rolling_update_replaces_only_the_changed_role(objs: Objects) -> None:
    """Ports TestModelServingRoleBasedRollingUpdate."""
    body = role_rolling("rolebased", [one_role("prefill", 2), one_role("decode", 1)], replicas=2)
    create_ready(objs, body)
    initial = objs.get("rolebased")
    assert initial["spec"]["replicas"] == 2
    assert initial["status"]["availableReplicas"] == 2
    decode = all_pods(objs, "rolebased", **{labels.ROLE_LABEL: "decode"})
    assert len(decode) == 2, "there should be 2 decode Pods before the update"
    decode_uids = {p["metadata"]["name"]: pod_uid(p) for p in decode}

    update(objs, "rolebased", lambda s: set_entry_image(s, NEW, role_index=0))

    def rolled() -> bool:
        if not is_ready(objs, "rolebased"):
            return False
        final = objs.get("rolebased")
        assert final["spec"]["replicas"] == 2
        assert final["status"]["availableReplicas"] == 2
        assert (
            final["spec"]["template"]["roles"][0]["entryTemplate"]["spec"]["containers"][0]["image"]
            == NEW
        )
        prefill = all_pods(objs, "rolebased", **{labels.ROLE_LABEL: "prefill"})
        if any(image(p) != NEW for p in prefill):
            return False
        for pod in all_pods(objs, "rolebased", **{labels.ROLE_LABEL: "decode"}):
            name = pod["metadata"]["name"]
            if image(pod) != OLD or decode_uids.get(name) != pod_uid(pod):
                return False
        return True

    wait(objs, "rolebased", "prefill rolled and decode untouched", rolled)


def test_role_max_unavailable_holds_while_new_pods_never_become_ready(objs: Objects) -> None:
    """Ports TestModelServingRoleRollingUpdateMaxUnavailable. The bad image's Pods select no
    Node, so they stay Pending (see the module docstring). Kthena then watches 30 s; here the
    hold is 6 s during which the ModelServing's annotations change every second, each change
    a pass of the controller (what could exceed the budget is a pass)."""
    prefill = one_role("prefill", 4, maxUnavailable=2)
    body = role_rolling("maxunavail", [prefill, one_role("decode", 1)])
    create_ready(objs, body)
    decode = all_pods(objs, "maxunavail", **{labels.ROLE_LABEL: "decode"})
    assert len(decode) == 1
    decode_uids = {p["metadata"]["name"]: pod_uid(p) for p in decode}

    def bad(spec: dict[str, Any]) -> None:
        set_entry_image(spec, BAD, role_index=0)
        spec["template"]["roles"][0]["entryTemplate"]["spec"]["nodeSelector"] = NO_NODE

    update(objs, "maxunavail", bad)

    def counts() -> tuple[int, int, int]:
        old_running = bad_prefill = decode_unchanged = 0
        for pod in all_pods(objs, "maxunavail"):
            if pod["metadata"].get("deletionTimestamp"):
                continue
            role_name = label(pod, labels.ROLE_LABEL)
            if role_name == "prefill":
                old_running += image(pod) == OLD and running(pod)
                bad_prefill += image(pod) == BAD
            elif role_name == "decode" and image(pod) == OLD:
                decode_unchanged += decode_uids.get(pod["metadata"]["name"]) == pod_uid(pod)
        return old_running, bad_prefill, decode_unchanged

    wait(objs, "maxunavail", "2 prefill replicas replaced, 2 kept", lambda: counts() == (2, 2, 1))
    for poke in range(12):
        if poke % 2 == 0:
            objs.patch("maxunavail", {"metadata": {"annotations": {"e2e/poke": str(poke)}}})
        old_running, bad_prefill, decode_unchanged = counts()
        assert old_running >= 2 and bad_prefill <= 2 and decode_unchanged == 1, (
            "RoleRollingUpdate went beyond the role's maxUnavailable"
        )
        time.sleep(0.5)


def test_role_partition_keeps_low_ordinals_at_the_old_image(objs: Objects) -> None:
    """Ports TestModelServingRoleRollingUpdatePartition."""
    replicas, partition = 4, 2
    prefill = one_role("prefill", replicas, partition=partition, maxUnavailable=replicas)
    create_ready(objs, role_rolling("rolepart", [prefill]))
    wait_running(objs, "rolepart", replicas)
    update(objs, "rolepart", lambda s: set_entry_image(s, NEW))
    selector = {labels.ROLE_LABEL: "prefill", labels.ENTRY_LABEL: "true"}

    def converged() -> bool:
        pods = all_pods(objs, "rolepart", **selector)
        by_ordinal = role_images(pods)
        if len(pods) != replicas or not covers(by_ordinal, replicas):
            return False
        return all(image(by_ordinal[o]) == (OLD if o < partition else NEW) for o in by_ordinal)

    wait(objs, "rolepart", "the role partition state", converged)


def test_deleted_protected_role_replica_comes_back_at_its_historical_revision(
    objs: Objects,
) -> None:
    """Ports TestModelServingRolePartitionScaleUp."""
    replicas, partition = 3, 1
    prefill = one_role("prefill", replicas, partition=partition, maxUnavailable=replicas)
    create_ready(objs, role_rolling("rolescaleup", [prefill]))
    wait_running(objs, "rolescaleup", replicas)
    initial = initial_revision(objs, "rolescaleup")
    update(objs, "rolescaleup", lambda s: set_entry_image(s, NEW))
    wait_ready(objs, "rolescaleup")
    selector = {labels.ROLE_LABEL: "prefill", labels.ENTRY_LABEL: "true"}

    def partly_rolled() -> str | None:
        pods = all_pods(objs, "rolescaleup", **selector)
        by_ordinal = role_images(pods)
        if len(pods) != replicas or not covers(by_ordinal, replicas):
            return None
        if any(image(by_ordinal[o]) != (OLD if o < partition else NEW) for o in by_ordinal):
            return None
        target = status(objs, "rolescaleup").get("updateRevision")
        return str(target) if target and target != initial else None

    update_revision: str = wait(objs, "rolescaleup", "the role partition state", partly_rolled)
    first = role_images(all_pods(objs, "rolescaleup", **selector))[0]
    objs.core.delete_namespaced_pod(first["metadata"]["name"], objs.namespace)
    wait_ready(objs, "rolescaleup")

    def recreated() -> bool:
        pods = all_pods(objs, "rolescaleup", **selector)
        by_ordinal = role_images(pods)
        if len(pods) != replicas or not covers(by_ordinal, replicas):
            return False
        zero = by_ordinal[0]
        if image(zero) != OLD or label(zero, labels.REVISION_LABEL) != initial:
            return False
        if pod_uid(zero) == pod_uid(first):
            return False
        rest = [by_ordinal[o] for o in range(partition, replicas)]
        return all(
            image(p) == NEW and label(p, labels.REVISION_LABEL) == update_revision for p in rest
        )

    wait(objs, "rolescaleup", "prefill-0 made again at its revision", recreated)


def test_role_scale_down_under_a_partition_removes_the_updated_replicas(
    objs: Objects, controller: Restartable
) -> None:
    """Ports TestModelServingRolePartitionScaleDown: the protected replicas get the lower
    deletion cost, so only the partition can make the controller keep them."""
    initial_replicas, scaled, partition = 5, 3, 3
    prefill = one_role(
        "prefill", initial_replicas, partition=partition, maxUnavailable=initial_replicas
    )
    create_ready(objs, role_rolling("rolescaledown", [prefill]))
    wait_running(objs, "rolescaledown", initial_replicas)
    initial = initial_revision(objs, "rolescaledown")
    update(objs, "rolescaledown", lambda s: set_entry_image(s, NEW))
    wait_ready(objs, "rolescaledown")
    selector = {labels.ROLE_LABEL: "prefill", labels.ENTRY_LABEL: "true"}

    def partly_rolled() -> bool:
        pods = all_pods(objs, "rolescaledown", **selector)
        by_ordinal = role_images(pods)
        if len(pods) != initial_replicas or len(by_ordinal) != initial_replicas:
            return False
        return all(image(by_ordinal[o]) == (OLD if o < partition else NEW) for o in by_ordinal)

    wait(objs, "rolescaledown", "the role partition state", partly_rolled)
    costs: dict[str, str] = {}
    for pod in all_pods(objs, "rolescaledown", **selector):
        if running(pod):
            ordinal = role_ordinal(pod)
            cost = 0 if ordinal < partition else 10000 + ordinal
            patch_deletion_cost(objs, pod["metadata"]["name"], cost, costs)
    costs_seen(controller, objs, "rolescaledown", costs)

    def scale(spec: dict[str, Any]) -> None:
        spec["template"]["roles"][0].update(replicas=scaled, maxUnavailable=scaled)

    update(objs, "rolescaledown", scale)
    wait_ready(objs, "rolescaledown")

    def scaled_down() -> bool:
        pods = all_pods(objs, "rolescaledown", **selector)
        by_ordinal = role_images(pods)
        if len(pods) != scaled or len(by_ordinal) != scaled:
            return False
        for ordinal in range(scaled):
            pod = by_ordinal.get(ordinal)
            if pod is None or image(pod) != OLD or label(pod, labels.REVISION_LABEL) != initial:
                return False
        return not [o for o in by_ordinal if o >= partition]

    wait(objs, "rolescaledown", "only the protected replicas left", scaled_down)
    # Kthena's WaitForModelServingReady after the scale-down, once more now the Pods are gone:
    # right after the spec change, the status of the pass before the deletions satisfies it
    wait_ready(objs, "rolescaledown", 30)


# --- scale-down by pod-deletion-cost ---


def test_scale_down_keeps_the_group_with_the_highest_deletion_cost(
    objs: Objects, controller: Restartable
) -> None:
    """Ports TestModelServingBinPackScaleDownServingGroup."""
    create_ready(objs, basic("binpackgroup", 4))
    wait_running(objs, "binpackgroup", 4)
    assert objs.get("binpackgroup")["spec"]["replicas"] == 4
    highest = -1
    costs: dict[str, str] = {}
    for pod in all_pods(objs, "binpackgroup"):
        parent, ordinal = parent_and_ordinal(label(pod, labels.GROUP_NAME_LABEL))
        assert parent == "binpackgroup" and ordinal >= 0
        highest = max(highest, ordinal)
        patch_deletion_cost(objs, pod["metadata"]["name"], ordinal * 100, costs)
    costs_seen(controller, objs, "binpackgroup", costs)

    objs.patch("binpackgroup", {"spec": {"replicas": 1}})
    wait_ready(objs, "binpackgroup")
    wait_running(objs, "binpackgroup", 1)
    left = [p for p in all_pods(objs, "binpackgroup") if running(p)]
    assert left
    for pod in left:
        assert parent_and_ordinal(label(pod, labels.GROUP_NAME_LABEL))[1] == highest


def test_role_scale_down_keeps_the_replica_with_the_highest_deletion_cost(
    objs: Objects, controller: Restartable
) -> None:
    """Ports TestModelServingBinPackScaleDownRole."""
    create_ready(objs, basic("binpackrole", 1, 4))
    wait_running(objs, "binpackrole", 4)
    highest = -1
    costs: dict[str, str] = {}
    for pod in all_pods(objs, "binpackrole"):
        ordinal = role_ordinal(pod)
        assert ordinal >= 0
        highest = max(highest, ordinal)
        patch_deletion_cost(objs, pod["metadata"]["name"], ordinal * 100, costs)
    costs_seen(controller, objs, "binpackrole", costs)

    update(objs, "binpackrole", lambda s: s["template"]["roles"][0].update(replicas=1))
    wait_ready(objs, "binpackrole")
    wait_running(objs, "binpackrole", 1)
    left = [p for p in all_pods(objs, "binpackrole") if running(p)]
    assert left
    for pod in left:
        assert role_ordinal(pod) == highest


def test_group_and_role_scale_down_keep_the_highest_deletion_cost(
    objs: Objects, controller: Restartable
) -> None:
    """Ports TestModelServingBinPackScaleDownCombined."""
    create_ready(objs, basic("binpackboth", 2, 0, role("prefill", 2, 0), role("decode", 1, 0)))
    wait_running(objs, "binpackboth", 6)
    highest = -1
    costs: dict[str, str] = {}
    for pod in all_pods(objs, "binpackboth"):
        parent, ordinal = parent_and_ordinal(label(pod, labels.GROUP_NAME_LABEL))
        assert parent == "binpackboth" and ordinal >= 0
        highest = max(highest, ordinal)
        cost = ordinal * 100 + max(role_ordinal(pod), 0) * 10
        patch_deletion_cost(objs, pod["metadata"]["name"], cost, costs)
    costs_seen(controller, objs, "binpackboth", costs)

    def scale(spec: dict[str, Any]) -> None:
        spec["replicas"] = 1
        spec["template"]["roles"][0]["replicas"] = 1

    update(objs, "binpackboth", scale)
    wait_ready(objs, "binpackboth")
    wait_running(objs, "binpackboth", 2)
    for pod in all_pods(objs, "binpackboth"):
        if running(pod):
            assert parent_and_ordinal(label(pod, labels.GROUP_NAME_LABEL))[1] == highest


# --- scale-down removes what is not Ready first ---


def held_until_started(body: dict[str, Any]) -> dict[str, Any]:
    """Kthena's readiness gate on the entry template, and a scheduling gate the test lifts
    once it has chosen the Pod to keep not Ready (see ``start_all_but``)."""
    spec = body["spec"]["template"]["roles"][0]["entryTemplate"]["spec"]
    spec["readinessGates"] = [{"conditionType": GATE}]
    spec["schedulingGates"] = [{"name": HOLD}]
    return body


def start_all_but(objs: Objects, ms: str, count: int) -> dict[str, Any]:
    """Start ``count`` held Pods of ``ms``, the first (by name) never Ready; return that one.

    Kthena's readiness gate keeps every Pod not Ready until the test sets the gate's condition,
    and it sets it on all but one. kwok sets every readiness gate's condition True when it
    starts a Pod, and starts a Pod only while it has no IP. So the chosen Pod is given the
    status of a started Pod whose gate (and so Ready) is False while it is still held, before
    any scheduler sees it: kwok leaves it so, and Volcano, finding it Running, does not place
    it. The others are let go, and kwok starts them Ready."""
    pods = sorted(objs.wait_pods(ms, count), key=lambda p: str(p["metadata"]["name"]))
    chosen = pods[0]
    now = time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime())
    conditions = [
        {"type": kind, "status": "False", "lastTransitionTime": now}
        for kind in (GATE, "Ready", "ContainersReady")
    ]
    started = {
        "phase": "Running",
        "podIP": "10.244.250.1",
        "podIPs": [{"ip": "10.244.250.1"}],
        "startTime": now,
        "conditions": conditions,
    }
    objs.core.patch_namespaced_pod_status(
        chosen["metadata"]["name"],
        objs.namespace,
        {"status": started},
        _content_type="application/strategic-merge-patch+json",
    )
    for pod in pods:
        objs.core.patch_namespaced_pod(
            pod["metadata"]["name"],
            objs.namespace,
            {"spec": {"schedulingGates": None}},
            _content_type="application/merge-patch+json",
        )
    wait_running(objs, ms, count)
    return chosen


def test_scale_down_removes_the_group_that_is_not_ready(objs: Objects) -> None:
    """Ports TestModelServingStatusAwarePriorityScaleDownServingGroup: the first Pod (group 0,
    which the highest-ordinal rule would keep) never becomes Ready."""
    objs.create(held_until_started(basic("statusgroup", 4)))
    target = start_all_but(objs, "statusgroup", 4)
    unhealthy = label(target, labels.GROUP_NAME_LABEL)
    assert unhealthy
    ready = [
        p for p in all_pods(objs, "statusgroup") if label(p, labels.GROUP_NAME_LABEL) != unhealthy
    ]
    assert len(ready) == 3
    wait(
        objs,
        "statusgroup",
        "availableReplicas 3",
        lambda: status(objs, "statusgroup").get("availableReplicas") == 3,
        30,
    )

    objs.patch("statusgroup", {"spec": {"replicas": 3}})
    wait_ready(objs, "statusgroup")
    wait_running(objs, "statusgroup", 3)
    left = all_pods(objs, "statusgroup")
    assert [p for p in left if label(p, labels.GROUP_NAME_LABEL) == unhealthy] == []


def test_role_scale_down_removes_the_replica_that_is_not_ready(objs: Objects) -> None:
    """Ports TestModelServingStatusAwarePriorityScaleDownRole. Kthena waits for three
    ``RoleRunning`` events, its controller's word that it saw those Pods Ready; ours posts no
    such event (docs/moving-from-kthena.md), so the ModelServing carries the ``ready-reporter``
    plugin, whose OnPodReady mark the controller puts on a Pod it saw Ready."""
    body = held_until_started(basic("statusrole", 1, 4))
    body["spec"]["plugins"] = [{"name": "ready-reporter"}]
    objs.create(body)
    target = start_all_but(objs, "statusrole", 4)
    unhealthy = label(target, labels.ROLE_ID_LABEL)
    assert unhealthy

    def seen_ready() -> bool:
        marked = [
            p
            for p in all_pods(objs, "statusrole")
            if READY_HOOKS in (p["metadata"].get("annotations") or {})
        ]
        return len(marked) == 3 and unhealthy not in {
            label(p, labels.ROLE_ID_LABEL) for p in marked
        }

    wait(objs, "statusrole", "the controller to see 3 Pods Ready", seen_ready)
    assert status(objs, "statusrole").get("availableReplicas", 0) == 0

    update(objs, "statusrole", lambda s: s["template"]["roles"][0].update(replicas=3))
    wait_ready(objs, "statusrole")
    wait_running(objs, "statusrole", 3)
    left = all_pods(objs, "statusrole")
    assert [p for p in left if label(p, labels.ROLE_ID_LABEL) == unhealthy] == []
