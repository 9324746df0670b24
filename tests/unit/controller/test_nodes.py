"""Lost Nodes: what the Node watch records, and what a pass does with Pods on them (a fake API)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from kubernetes import client

from modelserving.api.operator import OperatorConfig
from modelserving.controller.kube import MODEL_SERVINGS, NODES, PODS
from modelserving.controller.manager import Controller
from modelserving.controller.nodes import NodeStates, node_state
from modelserving.controller.reconciler import Reconciler
from modelserving.plugins.exports import set_default_sandbox
from modelserving.workload.observed import NODE_DELETED, NODE_NOT_READY
from tests.unit.controller.test_reconciler import (
    KEY,
    FakeKube,
    Obj,
    model_serving,
    set_running,
    status_of,
)

pytest_plugins = ["tests.unit.controller.test_reconciler"]


def node(name: str, ready: str | None = "True") -> Obj:
    conditions = [] if ready is None else [{"type": "Ready", "status": ready}]
    return {"metadata": {"name": name, "namespace": ""}, "status": {"conditions": conditions}}


@pytest.mark.parametrize(
    ("event", "ready", "state"),
    [
        ("ADDED", "True", None),
        ("MODIFIED", "False", NODE_NOT_READY),
        ("MODIFIED", "Unknown", NODE_NOT_READY),
        ("ADDED", None, None),  # not reported yet
        ("DELETED", "True", NODE_DELETED),
    ],
)
def test_node_state(event: str, ready: str | None, state: str | None) -> None:
    assert node_state(event, node("n", ready)) == state


def test_node_states_say_when_a_node_is_lost_or_back() -> None:
    states = NodeStates()
    assert not states.event("ADDED", node("a"))
    assert states.event("MODIFIED", node("a", "Unknown"))
    assert not states.event("MODIFIED", node("a", "False"))  # still lost
    assert states.lost() == {"a": NODE_NOT_READY}
    assert states.event("DELETED", node("a", "False"))
    assert states.lost() == {"a": NODE_DELETED}
    assert states.event("ADDED", node("a"))  # registered again
    assert states.lost() == {}


def placed(kube: FakeKube, on: dict[str, str]) -> None:
    """Every Pod Running and Ready; the Pods named in ``on`` on those Nodes."""
    for name in kube.all(PODS):
        set_running(kube, name)

        def bind(pod: Obj, name: str = name) -> None:
            pod["spec"]["nodeName"] = on.get(name, "healthy")

        kube.edit(PODS, name, bind)


def test_a_pod_on_a_deleted_node_is_deleted_at_once_and_made_again(
    kube: FakeKube, rec: Reconciler
) -> None:
    kube.put(MODEL_SERVINGS, model_serving(replicas=2, workers=1))
    rec.reconcile(KEY)
    placed(kube, {"sample-1-server-0-1": "gone"})
    rec.reconcile(KEY)
    assert status_of(kube)["availableReplicas"] == 2
    old = kube.all(PODS)["sample-1-server-0-1"]["metadata"]["uid"]
    rec.lost_nodes = lambda: {"gone": NODE_DELETED}
    rec.reconcile(KEY)
    assert status_of(kube)["availableReplicas"] == 1
    assert kube.forced == ["sample-1-server-0-1"]  # the default RoleRecreate: entry normally
    assert sorted(n for n in kube.all(PODS) if n.startswith("sample-1")) == []
    rec.reconcile(KEY)
    again = kube.all(PODS)["sample-1-server-0-1"]["metadata"]["uid"]
    assert again != old


def test_a_node_that_registered_again_is_not_taken_for_deleted(
    kube: FakeKube, rec: Reconciler
) -> None:
    kube.put(MODEL_SERVINGS, model_serving(replicas=1, workers=1))
    rec.reconcile(KEY)
    placed(kube, {"sample-0-server-0-1": "back"})
    kube.put(NODES, node("back"))  # the watch's deletion is older than this Node
    rec.lost_nodes = lambda: {"back": NODE_DELETED}
    rec.reconcile(KEY)
    assert kube.forced == [] and status_of(kube)["availableReplicas"] == 1


def test_a_not_ready_node_makes_its_pods_unavailable_and_deletes_nothing(
    kube: FakeKube, rec: Reconciler
) -> None:
    kube.put(MODEL_SERVINGS, model_serving(replicas=2, workers=1))
    rec.reconcile(KEY)
    placed(kube, {"sample-0-server-0-0": "sick"})
    rec.lost_nodes = lambda: {"sick": NODE_NOT_READY}
    rec.reconcile(KEY)
    assert status_of(kube)["availableReplicas"] == 1
    assert kube.count("delete", PODS) == 0
    rec.lost_nodes = dict
    rec.reconcile(KEY)
    assert status_of(kube)["availableReplicas"] == 2


def test_a_node_event_queues_every_model_serving_only_when_its_state_changes(
    tmp_path: Path,
) -> None:
    config = OperatorConfig.model_validate({"sandbox": {"cacheDir": str(tmp_path)}})
    ctl = Controller(config, client.ApiClient(), serve_http=False)
    try:
        queued: list[Any] = []
        ctl.known = {("a", "x"), ("b", "y")}
        ctl.enqueue = lambda key, change=False: queued.append(key)  # type: ignore[method-assign]
        ctl.node_event("ADDED", node("n"))
        ctl.node_event("MODIFIED", node("n"))  # a heartbeat
        assert queued == []
        ctl.node_event("DELETED", node("n"))
        assert sorted(queued) == [("a", "x"), ("b", "y")]
        assert ctl.reconciler.lost_nodes() == {"n": NODE_DELETED}
    finally:
        ctl.writes.shutdown()
        set_default_sandbox(None)


def test_a_node_missing_from_a_fresh_list_is_taken_as_deleted() -> None:
    """A Node deleted while the watch was gone sends no event; the list after it does not show
    it, and it is taken as deleted (a Node that was never shown, or already gone, is not)."""
    states = NodeStates()
    for name in ("a", "b", "c"):
        states.event("ADDED", node(name))
    states.event("DELETED", node("c"))
    assert states.listed({"a"}) == ["b"]
    assert states.lost() == {"b": NODE_DELETED, "c": NODE_DELETED}
    assert states.listed({"a"}) == []  # taken once
