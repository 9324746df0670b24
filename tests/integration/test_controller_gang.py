"""Volcano: when the PodGroup CRD exists, each ServingGroup of a volcano-scheduled ModelServing
gets a PodGroup before its Pods (with or without gangPolicy), the Pods carry Volcano's group and
task annotations, and the PodGroups follow a scale."""

from __future__ import annotations

from typing import Any

from kubernetes import client

from modelserving.api import labels
from modelserving.workload.gang import volcano_api
from tests.integration.conftest import Cluster, wait_for
from tests.integration.controller_env import (
    Objects,
    install_crd,
    model_serving,
    running_controller,
)


def test_pod_groups_when_volcano_is_installed(cluster: Cluster, namespace: str) -> None:
    install_crd(cluster)
    ext = client.ApiextensionsV1Api(cluster.api_client)
    custom = client.CustomObjectsApi(cluster.api_client)
    installed = ext.read_custom_resource_definition("podgroups.scheduling.volcano.sh")
    raw = cluster.api_client.sanitize_for_serialization(installed)
    sub_groups = volcano_api(raw).sub_group_policy  # as the controller reads it
    objs = Objects(cluster, namespace)

    def pod_groups() -> list[dict[str, Any]]:
        got: Any = custom.list_namespaced_custom_object(
            "scheduling.volcano.sh", "v1beta1", namespace, "podgroups"
        )
        return sorted(got["items"], key=lambda g: g["metadata"]["name"])

    with running_controller(cluster):
        ms = model_serving("gang", replicas=2, workers=2)  # no gangPolicy
        ms["spec"]["schedulerName"] = "volcano"
        entry = ms["spec"]["template"]["roles"][0]["entryTemplate"]["spec"]["containers"][0]
        entry["resources"] = {"requests": {"cpu": "500m", "memory": "512Mi"}}
        objs.create(ms)
        pods = objs.wait_pods("gang", 6)
        groups = wait_for("two PodGroups", lambda: len(pod_groups()) == 2 and pod_groups())
        assert [g["metadata"]["name"] for g in groups] == ["gang-0", "gang-1"]
        for g in groups:
            spec = g["spec"]
            assert spec["minMember"] == 3
            assert spec["minResources"] == {"cpu": "500m", "memory": "512Mi"}
            assert "minTaskMember" not in spec
            assert ("subGroupPolicy" in spec) == sub_groups
            owner = g["metadata"]["ownerReferences"][0]
            assert owner["kind"] == "ModelServing" and owner["controller"] is True
        for pod in pods:
            annotations = pod["metadata"]["annotations"]
            group = pod["metadata"]["labels"][labels.GROUP_NAME_LABEL]
            assert annotations[labels.VOLCANO_GROUP_ANNOTATION] == group
            assert annotations[labels.VOLCANO_TASK_ANNOTATION] == "server-0"
            assert pod["spec"]["schedulerName"] == "volcano"

        # Scaling the role follows into the PodGroups, and the queue annotation too.
        custom.patch_namespaced_custom_object(
            "workload.serving.volcano.sh",
            "v1alpha1",
            namespace,
            "modelservings",
            "gang",
            {
                "metadata": {"annotations": {"scheduling.volcano.sh/queue-name": "gpu"}},
                "spec": {
                    "template": {"roles": [{**ms["spec"]["template"]["roles"][0], "replicas": 2}]}
                },
            },
        )

        def scaled() -> list[dict[str, Any]] | None:
            got = pod_groups()
            ok = all(
                g["spec"].get("minMember") == 6
                and g["spec"].get("minResources") == {"cpu": "1", "memory": "1Gi"}
                and g["spec"].get("queue") == "gpu"
                for g in got
            )
            return got if ok and len(got) == 2 else None

        groups = wait_for("PodGroups follow the scale", scaled, timeout=60)
        if sub_groups:
            assert [p["minSubGroups"] for p in groups[0]["spec"]["subGroupPolicy"]] == [2]
