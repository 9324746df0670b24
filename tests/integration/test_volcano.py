"""Volcano schedules for real in the local control plane (Kthena's default ``schedulerName``).

A ServingGroup whose PodGroup cannot be placed whole gets no Pod bound at all (gang scheduling);
once capacity appears, every Pod of the group starts together. Kthena-shaped manifests written
here (``tests/data/volcano-manifests``: prefill/decode, multi-node, gang policy, network topology,
rolling update) apply unchanged and become Available, each ServingGroup under its PodGroup.
"""

from __future__ import annotations

import time
from pathlib import Path
from typing import Any

import pytest
import yaml
from kubernetes import client
from kubernetes.client.exceptions import ApiException

from modelserving.api import labels
from modelserving.devcluster.cluster import Api, fake_node
from tests.integration.conftest import Cluster, wait_for
from tests.integration.controller_env import Objects, install_crd, running_controller

MANIFESTS = Path(__file__).resolve().parents[1] / "data" / "volcano-manifests"
PODGROUPS = ("scheduling.volcano.sh", "v1beta1", "podgroups")


def _pod_groups(cluster: Cluster, namespace: str) -> list[dict[str, Any]]:
    custom = client.CustomObjectsApi(cluster.api_client)
    group, version, plural = PODGROUPS
    got: Any = custom.list_namespaced_custom_object(group, version, namespace, plural)
    return sorted(got["items"], key=lambda g: g["metadata"]["name"])


def _small_node(name: str, label: str, cpu: str) -> dict[str, Any]:
    node = fake_node(name)
    node["metadata"]["labels"]["gang-test"] = label
    resources = {"cpu": cpu, "memory": "16Gi", "pods": "10"}
    node["status"]["allocatable"] = node["status"]["capacity"] = resources
    return node


def _create_node(cluster: Cluster, body: dict[str, Any]) -> None:
    status, answer = Api(cluster.state).request("POST", "/api/v1/nodes", body)
    assert status == 201, answer

    def ready() -> bool:
        node = cluster.core.read_node(body["metadata"]["name"])
        conditions = node.status.conditions or []
        return any(c.type == "Ready" and c.status == "True" for c in conditions)

    wait_for(f"Node {body['metadata']['name']} Ready", ready, timeout=60)


def _delete_node(cluster: Cluster, name: str) -> None:
    try:
        cluster.core.delete_node(name)
    except ApiException as error:
        if error.status != 404:
            raise


def test_a_group_that_cannot_fit_whole_gets_no_pod_until_capacity_appears(
    cluster: Cluster, namespace: str
) -> None:
    install_crd(cluster)
    objs = Objects(cluster, namespace)
    # Three Pods of 2 CPUs each, only on this test's Nodes; the first Node holds two of them.
    container = {
        "name": "engine",
        "image": "registry.example/engine:1",
        "resources": {"requests": {"cpu": "2"}},
    }
    pod_spec = {"nodeSelector": {"gang-test": namespace}, "containers": [container]}
    ms = {
        "apiVersion": labels.API_VERSION,
        "kind": labels.KIND,
        "metadata": {"name": "whole"},
        "spec": {
            "replicas": 1,
            "template": {
                "roles": [
                    {
                        "name": "server",
                        "replicas": 1,
                        "entryTemplate": {"spec": pod_spec},
                        "workerReplicas": 2,
                        "workerTemplate": {"spec": pod_spec},
                    }
                ]
            },
        },
    }
    first, second = f"{namespace}-a", f"{namespace}-b"
    try:
        _create_node(cluster, _small_node(first, namespace, "4"))
        with running_controller(cluster):
            objs.create(ms)
            pods = objs.wait_pods("whole", 3)
            assert {p["spec"]["schedulerName"] for p in pods} == {"volcano"}

            def unschedulable() -> dict[str, Any] | None:
                groups = _pod_groups(cluster, namespace)
                if not groups:
                    return None
                for cond in (groups[0].get("status") or {}).get("conditions") or []:
                    if cond["type"] == "Unschedulable" and cond["status"] == "True":
                        return groups[0]
                return None

            group = wait_for("the PodGroup to be found unschedulable", unschedulable)
            assert group["spec"]["minMember"] == 3
            # Two Pods would fit: the gang holds all three back, across several of the
            # scheduler's one-second cycles.
            deadline = time.monotonic() + 5
            while time.monotonic() < deadline:
                bound = [p for p in objs.pods("whole") if p["spec"].get("nodeName")]
                assert bound == [], f"gang broken: {[p['metadata']['name'] for p in bound]}"
                time.sleep(0.5)

            _create_node(cluster, _small_node(second, namespace, "4"))

            def all_running() -> list[dict[str, Any]] | None:
                pods = objs.pods("whole")
                running = [p for p in pods if (p.get("status") or {}).get("phase") == "Running"]
                return pods if len(running) == 3 else None

            pods = wait_for("the three Pods to run", all_running, timeout=90)
            assert {p["spec"]["nodeName"] for p in pods} == {first, second}
            objs.wait_condition("whole", "Available", "True", timeout=60)
            phase = wait_for(
                "the PodGroup to be Running",
                lambda: (
                    (_pod_groups(cluster, namespace)[0].get("status") or {}).get("phase")
                    == "Running"
                ),
            )
            assert phase
    finally:
        _delete_node(cluster, first)
        _delete_node(cluster, second)


def _manifest(name: str) -> dict[str, Any]:
    body: dict[str, Any] = yaml.safe_load((MANIFESTS / name).read_text())
    return body


def _group_names(pods: list[dict[str, Any]]) -> set[str]:
    return {p["metadata"]["labels"][labels.GROUP_NAME_LABEL] for p in pods}


@pytest.mark.parametrize(
    ("manifest", "pods"),
    [
        ("pd-disaggregation.yaml", 3),
        ("multi-node.yaml", 8),
        ("gang.yaml", 8),
        ("network-topology.yaml", 3),
        ("rolling-update.yaml", 6),
    ],
)
def test_kthena_shaped_manifests_become_available_under_volcano(
    cluster: Cluster, namespace: str, manifest: str, pods: int
) -> None:
    install_crd(cluster)
    objs = Objects(cluster, namespace)
    ms = _manifest(manifest)
    name = ms["metadata"]["name"]
    with running_controller(cluster):
        objs.create(ms)
        objs.wait_condition(name, "Available", "True", timeout=120)
        created = objs.pods(name)
        assert len(created) == pods
        assert all(p["spec"]["schedulerName"] == "volcano" for p in created)
        assert all(p["spec"].get("nodeName") for p in created)
        groups = {g["metadata"]["name"]: g for g in _pod_groups(cluster, namespace)}
        assert set(groups) == _group_names(created)  # one PodGroup per ServingGroup
        for pod in created:
            group = pod["metadata"]["annotations"][labels.VOLCANO_GROUP_ANNOTATION]
            assert group == pod["metadata"]["labels"][labels.GROUP_NAME_LABEL]
            assert (groups[group].get("status") or {}).get("phase") in ("Running", "Inqueue")

        if manifest == "rolling-update.yaml":
            before = objs.get(name)["status"]["currentRevision"]
            roles = ms["spec"]["template"]["roles"]
            roles[0]["entryTemplate"]["spec"]["containers"][0]["image"] = "registry.example/v:2"
            objs.patch(name, {"spec": {"template": {"roles": roles}}})

            def rolled() -> dict[str, Any] | None:
                status = objs.get(name).get("status") or {}
                revision = status.get("currentRevision")
                done = revision and revision != before and status.get("updatedReplicas") == 3
                return status if done else None

            status = wait_for("the rolling update to finish", rolled, timeout=180)
            assert status["updateRevision"] == status["currentRevision"]
            objs.wait_condition(name, "Available", "True", timeout=60)
            new = objs.pods(name)
            assert len(new) == pods
            assert all(p["spec"].get("nodeName") for p in new)
