"""``modelserving run`` as real processes: killed in the middle of a reconcile and restarted, and
two replicas where only the leader acts and the standby takes over when the leader dies."""

from __future__ import annotations

import json
import signal
import socket
import time
from pathlib import Path
from typing import Any

import pytest
import yaml
from kubernetes import client

from modelserving.api import labels
from tests.integration.conftest import Cluster, wait_for
from tests.integration.controller_env import Objects, controller_process, install_crd, model_serving

NATIVE = [{"name": "demo-pod-tweaks", "config": {"annotations": {"example.com/by": "plugin"}}}]


@pytest.fixture
def objs(cluster: Cluster, namespace: str) -> Objects:
    install_crd(cluster)
    return Objects(cluster, namespace)


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def write_config(path: Path, namespace: str, leader: bool) -> Path:
    config: dict[str, Any] = {
        "metrics": {"port": free_port(), "bindAddress": "127.0.0.1"},
        "health": {"port": free_port()},
        "leaderElection": {
            "enabled": leader,
            "namespace": namespace,
            "leaseDurationSeconds": 4,
            "renewDeadlineSeconds": 3,
            "retryPeriodSeconds": 1,
        },
    }
    path.write_text(yaml.safe_dump(config))
    return path


def test_killed_in_the_middle_of_a_reconcile_and_restarted(
    objs: Objects, cluster: Cluster, tmp_path: Path
) -> None:
    config = write_config(tmp_path / "config.yaml", objs.namespace, leader=False)
    log = tmp_path / "controller.log"
    groups = 100
    with controller_process(cluster, log, config=config):
        objs.create(model_serving("big", replicas=groups, workers=1, plugins=NATIVE))
        partial = wait_for("some Pods", lambda: len(objs.pods("big")) >= 20 and objs.pods("big"))
    assert len(partial) < 2 * groups, "the controller finished before it could be killed"
    with controller_process(cluster, log, config=config):
        pods = objs.wait_pods("big", 2 * groups, timeout=120)
        wait_for("every Service", lambda: len(objs.services("big")) == groups, timeout=60)
        objs.wait_condition("big", "PluginsReady", "True")
    expected = {f"big-{g}-server-0-{k}" for g in range(groups) for k in (0, 1)}
    assert {p["metadata"]["name"] for p in pods} == expected
    for pod in pods:
        applied = pod["metadata"]["annotations"][labels.PLUGINS_APPLIED_ANNOTATION]
        assert json.loads(applied) == [{"name": "demo-pod-tweaks", "runtime": "Native"}]
        assert pod["metadata"]["annotations"]["example.com/by"] == "plugin"
    # Pods created before the kill kept their identity: nothing was deleted and recreated.
    before = {p["metadata"]["name"]: p["metadata"]["uid"] for p in partial}
    after = {p["metadata"]["name"]: p["metadata"]["uid"] for p in pods}
    assert all(after[name] == uid for name, uid in before.items())


def holder(cluster: Cluster, namespace: str) -> str | None:
    api = client.CoordinationV1Api(cluster.api_client)
    try:
        lease = api.read_namespaced_lease("modelserving-controller", namespace)
    except client.exceptions.ApiException:
        return None
    return lease.spec.holder_identity if lease.spec else None


def test_only_the_leader_acts_and_the_standby_takes_over(
    objs: Objects, cluster: Cluster, tmp_path: Path
) -> None:
    ns = objs.namespace
    a_config = write_config(tmp_path / "a.yaml", ns, leader=True)
    b_config = write_config(tmp_path / "b.yaml", ns, leader=True)
    with controller_process(cluster, tmp_path / "a.log", "--identity", "a", config=a_config) as a:
        wait_for("replica a to lead", lambda: holder(cluster, ns) == "a")
        with controller_process(cluster, tmp_path / "b.log", "--identity", "b", config=b_config):
            objs.create(model_serving("first", replicas=1, workers=0))
            objs.wait_pods("first", 1)
            assert holder(cluster, ns) == "a"
            a.send_signal(signal.SIGKILL)
            a.wait(10)
            killed = time.monotonic()
            objs.create(model_serving("second", replicas=1, workers=0))
            wait_for("replica b to take over", lambda: holder(cluster, ns) == "b", timeout=30)
            objs.wait_pods("second", 1, timeout=30)
            took = time.monotonic() - killed
    b_log = (tmp_path / "b.log").read_text()
    assert "waiting to lead" in b_log
    print(f"standby took over and created the Pod {took:.1f}s after the leader was killed")


def test_sigterm_stops_cleanly_and_hands_the_lease_back(
    objs: Objects, cluster: Cluster, tmp_path: Path
) -> None:
    ns = objs.namespace
    config = write_config(tmp_path / "a.yaml", ns, leader=True)
    with controller_process(cluster, tmp_path / "a.log", "--identity", "a", config=config) as a:
        wait_for("replica a to lead", lambda: holder(cluster, ns) == "a")
        objs.create(model_serving("term", replicas=1, workers=0))
        objs.wait_pods("term", 1)
        a.send_signal(signal.SIGTERM)
        assert a.wait(30) == 0
    assert not holder(cluster, ns)
