"""The headless Service of a role replica, so workers reach their entry Pod by DNS.

Kthena creates one only when the role has a workerTemplate; its name is the entry Pod's name.
"""

from __future__ import annotations

from typing import Any

from modelserving.api import labels as L
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
                L.NAME_LABEL: ms.name,
                L.GROUP_NAME_LABEL: group,
                L.ROLE_LABEL: role.name,
                L.ROLE_ID_LABEL: rid,
            },
            "ownerReferences": [owner_reference(ms)],
        },
        "spec": {
            "clusterIP": "None",
            "selector": {
                L.GROUP_NAME_LABEL: group,
                L.ROLE_LABEL: role.name,
                L.ROLE_ID_LABEL: rid,
                L.ENTRY_LABEL: "true",
            },
            "publishNotReadyAddresses": True,
        },
    }
