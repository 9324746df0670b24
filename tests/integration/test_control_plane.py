"""The local control plane behaves like a real cluster: scheduling, kwok, GC, CRD validation."""

from __future__ import annotations

import subprocess
from typing import Any

import pytest
from kubernetes import client
from kubernetes.client import ApiException

from modelserving import devcluster
from modelserving.devcluster import KUBERNETES_VERSION

from .conftest import Cluster, wait_for


def _pod(name: str, owner: client.V1OwnerReference | None = None) -> client.V1Pod:
    resources = client.V1ResourceRequirements(
        requests={"cpu": "100m", "memory": "64Mi", "nvidia.com/gpu": "1"},
        limits={"nvidia.com/gpu": "1"},
    )
    return client.V1Pod(
        metadata=client.V1ObjectMeta(name=name, owner_references=[owner] if owner else None),
        spec=client.V1PodSpec(
            containers=[client.V1Container(name="main", image="fake:latest", resources=resources)]
        ),
    )


def _is_ready(pod: Any) -> bool:
    conditions = pod.status.conditions or []
    return pod.status.phase == "Running" and any(
        c.type == "Ready" and c.status == "True" for c in conditions
    )


def test_version_and_kubectl_reach_the_cluster(cluster: Cluster) -> None:
    version = client.VersionApi(cluster.api_client).get_code()
    assert version.git_version == KUBERNETES_VERSION
    out = subprocess.run(
        [
            str(cluster.kubectl),
            "--kubeconfig",
            str(cluster.kubeconfig),
            "get",
            "nodes",
            "-o",
            "name",
        ],
        capture_output=True,
        text=True,
        check=True,
        timeout=30,
    ).stdout
    assert "node/kwok-node-0" in out.split()


def test_pod_is_scheduled_on_a_fake_node_and_becomes_ready(
    cluster: Cluster, namespace: str
) -> None:
    core = cluster.core
    core.create_namespaced_pod(namespace, _pod("gpu-pod"))

    def ready_pod() -> Any:
        pod = core.read_namespaced_pod("gpu-pod", namespace)
        return pod if _is_ready(pod) else None

    pod = wait_for("gpu-pod to be Running and Ready", ready_pod)
    assert pod.spec.node_name.startswith("kwok-node-")
    assert pod.status.pod_ip


def test_fake_nodes_renew_their_leases(cluster: Cluster) -> None:
    """The heartbeat that keeps Nodes (and so their Pods) Ready past the node lifecycle
    controller's grace period: each fake Node's Lease is renewed well within it."""
    leases = client.CoordinationV1Api(cluster.api_client)

    def renewed() -> dict[str, Any]:
        found: list[Any] = leases.list_namespaced_lease("kube-node-lease").items
        return {lease.metadata.name: lease.spec.renew_time for lease in found}

    first = wait_for("the fake Nodes' Leases", lambda: "kwok-node-0" in renewed() and renewed())
    assert first["kwok-node-0"] is not None
    wait_for(
        "a Lease renewal",
        lambda: renewed()["kwok-node-0"] != first["kwok-node-0"],
        timeout=devcluster.NODE_LEASE_SECONDS / 2 + 5,
    )


def _gone(read: Any, *args: str) -> bool:
    try:
        read(*args)
    except ApiException as error:
        if error.status == 404:
            return True
        raise
    return False


@pytest.mark.parametrize("policy", ["Background", "Foreground"])
def test_deleting_an_owner_garbage_collects_its_dependents(
    cluster: Cluster, namespace: str, policy: str
) -> None:
    core = cluster.core
    owner = core.create_namespaced_config_map(
        namespace, client.V1ConfigMap(metadata=client.V1ObjectMeta(name="owner"), data={"a": "b"})
    )
    reference = client.V1OwnerReference(
        api_version="v1",
        kind="ConfigMap",
        name="owner",
        uid=owner.metadata.uid,
        block_owner_deletion=True,
    )
    dependent_cm = client.V1ConfigMap(
        metadata=client.V1ObjectMeta(name="dependent", owner_references=[reference])
    )
    core.create_namespaced_config_map(namespace, dependent_cm)
    core.create_namespaced_pod(namespace, _pod("dependent-pod", reference))
    wait_for(
        "dependent-pod Ready",
        lambda: _is_ready(core.read_namespaced_pod("dependent-pod", namespace)),
    )

    core.delete_namespaced_config_map(
        "owner", namespace, body=client.V1DeleteOptions(propagation_policy=policy)
    )

    wait_for(
        "the owner to be deleted",
        lambda: _gone(core.read_namespaced_config_map, "owner", namespace),
    )
    for read, name in [
        (core.read_namespaced_config_map, "dependent"),
        (core.read_namespaced_pod, "dependent-pod"),
    ]:
        wait_for(f"{name} to be garbage-collected", lambda r=read, n=name: _gone(r, n, namespace))


GROUP = "devcluster.test.modelserving.io"
WIDGET_CRD: dict[str, Any] = {
    "apiVersion": "apiextensions.k8s.io/v1",
    "kind": "CustomResourceDefinition",
    "metadata": {"name": f"widgets.{GROUP}"},
    "spec": {
        "group": GROUP,
        "scope": "Namespaced",
        "names": {"plural": "widgets", "singular": "widget", "kind": "Widget"},
        "versions": [
            {
                "name": "v1",
                "served": True,
                "storage": True,
                "schema": {
                    "openAPIV3Schema": {
                        "type": "object",
                        "properties": {
                            "spec": {
                                "type": "object",
                                "required": ["size"],
                                "properties": {
                                    "size": {"type": "string", "enum": ["small", "large"]},
                                    "replicas": {"type": "integer", "minimum": 0},
                                },
                            }
                        },
                    }
                },
            }
        ],
    },
}


def _widget(name: str, spec: dict[str, Any]) -> dict[str, Any]:
    return {"apiVersion": f"{GROUP}/v1", "kind": "Widget", "metadata": {"name": name}, "spec": spec}


def test_an_installed_crd_schema_refuses_a_bad_object(cluster: Cluster, namespace: str) -> None:
    extensions: Any = client.ApiextensionsV1Api(cluster.api_client)  # takes plain dicts too
    custom = client.CustomObjectsApi(cluster.api_client)
    extensions.create_custom_resource_definition(WIDGET_CRD)
    try:

        def established() -> bool:
            crd = extensions.read_custom_resource_definition(f"widgets.{GROUP}")
            return any(
                c.type == "Established" and c.status == "True" for c in crd.status.conditions or []
            )

        wait_for("the Widget CRD to be established", established, timeout=30)
        good = _widget("good", {"size": "small", "replicas": 2})
        wait_for(
            "the Widget API to be served",
            lambda: _created(custom, namespace, good),
            timeout=30,
        )
        with pytest.raises(ApiException) as refused:
            custom.create_namespaced_custom_object(
                GROUP, "v1", namespace, "widgets", _widget("bad", {"size": "huge", "replicas": -1})
            )
        assert refused.value.status == 422
        body = str(refused.value.body)
        assert "spec.size" in body
        assert "spec.replicas" in body
        with pytest.raises(ApiException) as missing:
            custom.create_namespaced_custom_object(
                GROUP, "v1", namespace, "widgets", _widget("bad2", {"replicas": 1})
            )
        assert missing.value.status == 422
        assert "spec.size: Required value" in str(missing.value.body)
    finally:
        extensions.delete_custom_resource_definition(f"widgets.{GROUP}")


def _created(custom: Any, namespace: str, obj: dict[str, Any]) -> bool:
    try:
        custom.create_namespaced_custom_object(GROUP, "v1", namespace, "widgets", obj)
    except ApiException as error:
        if error.status == 404:  # discovery not refreshed yet
            return False
        raise
    return True
