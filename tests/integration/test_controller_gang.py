"""Gang scheduling: when Volcano's PodGroup API is served, each ServingGroup gets a PodGroup
before its Pods, and the Pods carry Volcano's group and task annotations."""

from __future__ import annotations

from typing import Any

from kubernetes import client
from kubernetes.client.exceptions import ApiException

from modelserving.api import labels
from tests.integration.conftest import Cluster, wait_for
from tests.integration.controller_env import Objects, install_crd, model_serving, running_controller

POD_GROUP_CRD: Any = {
    "apiVersion": "apiextensions.k8s.io/v1",
    "kind": "CustomResourceDefinition",
    "metadata": {"name": "podgroups.scheduling.volcano.sh"},
    "spec": {
        "group": "scheduling.volcano.sh",
        "names": {"kind": "PodGroup", "plural": "podgroups", "singular": "podgroup"},
        "scope": "Namespaced",
        "versions": [
            {
                "name": "v1beta1",
                "served": True,
                "storage": True,
                "schema": {
                    "openAPIV3Schema": {
                        "type": "object",
                        "x-kubernetes-preserve-unknown-fields": True,
                    }
                },
            }
        ],
    },
}


def test_pod_groups_when_volcano_is_installed(cluster: Cluster, namespace: str) -> None:
    install_crd(cluster)
    ext = client.ApiextensionsV1Api(cluster.api_client)
    try:
        ext.create_custom_resource_definition(POD_GROUP_CRD)
    except ApiException as error:
        if error.status != 409:
            raise
    custom = client.CustomObjectsApi(cluster.api_client)

    def served() -> bool:
        try:
            custom.list_namespaced_custom_object(
                "scheduling.volcano.sh", "v1beta1", namespace, "podgroups"
            )
        except ApiException:
            return False
        return True

    wait_for("the PodGroup API", served, timeout=30)
    objs = Objects(cluster, namespace)
    with running_controller(cluster):
        ms = model_serving("gang", replicas=2, workers=2)
        ms["spec"]["schedulerName"] = "volcano"
        ms["spec"]["template"]["gangPolicy"] = {"minRoleReplicas": {"server": 1}}
        objs.create(ms)
        pods = objs.wait_pods("gang", 6)

        def pod_groups() -> list[dict[str, Any]]:
            got: Any = custom.list_namespaced_custom_object(
                "scheduling.volcano.sh", "v1beta1", namespace, "podgroups"
            )
            return list(got["items"])

        groups = wait_for("two PodGroups", lambda: len(pod_groups()) == 2 and pod_groups())
    assert sorted(g["metadata"]["name"] for g in groups) == ["gang-0", "gang-1"]
    assert all(g["spec"]["minMember"] == 3 for g in groups)
    for pod in pods:
        annotations = pod["metadata"]["annotations"]
        group = pod["metadata"]["labels"][labels.GROUP_NAME_LABEL]
        assert annotations[labels.VOLCANO_GROUP_ANNOTATION] == group
        assert annotations[labels.VOLCANO_TASK_ANNOTATION] == "server-0"
        assert pod["spec"]["schedulerName"] == "volcano"
