"""The ModelServings Kthena's own end-to-end tests build (``test/e2e/controller-manager/
model_serving_test.go`` at 3cc0572: ``createBasicModelServing``, ``createRole``), shared by
``test_kthena_e2e_basic.py`` and ``test_kthena_e2e_update.py``."""

from __future__ import annotations

from typing import Any

from modelserving.api import labels

NGINX = "nginx:1.28.2"
"""Kthena's ``nginxImage``."""
NGINX_ALPINE = "nginx:alpine"
"""Kthena's ``nginxAlpineImage``."""


def container(name: str = "test-container", image: str = NGINX) -> dict[str, Any]:
    return {"name": name, "image": image, "ports": [{"name": "http", "containerPort": 80}]}


def template(*containers: dict[str, Any]) -> dict[str, Any]:
    return {"spec": {"containers": list(containers)}}


def kthena_role(name: str, replicas: int, workers: int) -> dict[str, Any]:
    """``createRole``: an entry and a worker template, both nginx, the worker template there
    even with no workers."""
    return {
        "name": name,
        "replicas": replicas,
        "entryTemplate": template(container()),
        "workerReplicas": workers,
        "workerTemplate": template(container("worker-container")),
    }


def basic_model_serving(
    name: str, groups: int, role_replicas: int = 0, *roles: dict[str, Any]
) -> dict[str, Any]:
    """``createBasicModelServing``: one role ``prefill`` (``role_replicas``, 0 meaning 1, no
    workers) unless roles are given; ``ServingGroupRollingUpdate`` with ``maxUnavailable: 2``."""
    if not roles:
        roles = (
            {
                "name": "prefill",
                "replicas": role_replicas or 1,
                "entryTemplate": template(container()),
                "workerReplicas": 0,
            },
        )
    return {
        "apiVersion": labels.API_VERSION,
        "kind": labels.KIND,
        "metadata": {"name": name},
        "spec": {
            "replicas": groups,
            "rolloutStrategy": {
                "type": "ServingGroupRollingUpdate",
                "rollingUpdateConfiguration": {"maxUnavailable": 2},
            },
            "template": {"roles": list(roles)},
        },
    }
