"""The headless Service of a role replica, so workers reach their entry Pod by DNS.

Kthena creates one only when the role has a workerTemplate; its name is the entry Pod's name.
"""

from __future__ import annotations

from typing import Any

from modelserving.api import labels
from modelserving.api.modelserving import ModelServing, Role
from modelserving.workload.names import pod_name, role_id
from modelserving.workload.pods import owner_reference


def headless_service(ms: ModelServing, group: str, role: Role, role_index: int) -> dict[str, Any]:
    rid = role_id(role.name, role_index)
    return {
        "apiVersion": "v1",
        "kind": "Service",
        "metadata": {
            "name": pod_name(group, rid, 0),
            "namespace": ms.namespace,
            "labels": {
                labels.NAME_LABEL: ms.name,
                labels.GROUP_NAME_LABEL: group,
                labels.ROLE_LABEL: role.name,
                labels.ROLE_ID_LABEL: rid,
            },
            "ownerReferences": [owner_reference(ms)],
        },
        "spec": {
            "clusterIP": "None",
            "selector": {
                labels.GROUP_NAME_LABEL: group,
                labels.ROLE_LABEL: role.name,
                labels.ROLE_ID_LABEL: rid,
                labels.ENTRY_LABEL: "true",
            },
            "publishNotReadyAddresses": True,
        },
    }
