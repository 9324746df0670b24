"""Volcano gang scheduling: the PodGroup of a ServingGroup and the annotations on its Pods.

Only used when the scheduler is ``volcano``, the template asks for gang or network-topology
scheduling, and the Volcano PodGroup CRD exists (the caller knows; ``render --volcano`` assumes it).
"""

from __future__ import annotations

from typing import Any

from modelserving.api import labels
from modelserving.api.modelserving import ModelServing
from modelserving.workload.pods import owner_reference


def gang_wanted(ms: ModelServing) -> bool:
    """Whether this ModelServing asks for a PodGroup (the CRD's presence is checked elsewhere)."""
    template = ms.spec.template
    return ms.spec.scheduler_name == labels.VOLCANO_SCHEDULER and (
        template.gang_policy is not None or template.network_topology is not None
    )


def min_role_replicas(ms: ModelServing, role_name: str, replicas: int) -> int:
    gang = ms.spec.template.gang_policy
    if gang and gang.min_role_replicas and role_name in gang.min_role_replicas:
        return min(gang.min_role_replicas[role_name], replicas)
    return replicas


def annotate(pod: dict[str, Any], group: str, task: str) -> None:
    """Tell Volcano which PodGroup and task a Pod belongs to."""
    annotations = pod["metadata"].setdefault("annotations", {})
    annotations[labels.VOLCANO_GROUP_ANNOTATION] = group
    annotations[labels.VOLCANO_TASK_ANNOTATION] = task


def pod_group(ms: ModelServing, group: str) -> dict[str, Any]:
    """The PodGroup of one ServingGroup: minMember and per-task minimums from gangPolicy."""
    min_member = 0
    min_task_member: dict[str, int] = {}
    for role in ms.spec.template.roles:
        per_replica = 1 + role.worker_replicas
        expected = min_role_replicas(ms, role.name, role.replicas)
        min_member += per_replica * expected
        for j in range(expected):
            min_task_member[f"{role.name}-{j}"] = per_replica
    spec: dict[str, Any] = {"minMember": min_member, "minTaskMember": min_task_member}
    queue = (ms.metadata.annotations or {}).get(labels.VOLCANO_QUEUE_ANNOTATION)
    if queue:
        spec["queue"] = queue
    topology = ms.spec.template.network_topology
    if topology is not None and topology.group_policy is not None:
        spec["networkTopology"] = topology.group_policy
    return {
        "apiVersion": labels.PODGROUP_API_VERSION,
        "kind": "PodGroup",
        "metadata": {
            "name": group,
            "namespace": ms.namespace,
            "labels": {labels.NAME_LABEL: ms.name, labels.GROUP_NAME_LABEL: group},
            "annotations": {labels.VOLCANO_GROUP_ANNOTATION: group},
            "ownerReferences": [owner_reference(ms, block_owner_deletion=False)],
        },
        "spec": spec,
    }
