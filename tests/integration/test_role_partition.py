"""RoleRollingUpdate with a role's ``partition`` on a real control plane, as Kthena rolls it:
the first N replicas of the role (by ordinal) in every ServingGroup keep the old revision; the
others are recreated at the new one; lowering the partition lets the rest follow. Also the
Kthena shapes our CRD used to refuse (an empty worker template without workers, CRD defaults).
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest

from modelserving.api import labels
from modelserving.controller.manager import Controller
from tests.integration.conftest import Cluster, wait_for
from tests.integration.controller_env import (
    Objects,
    install_crd,
    model_serving,
    running_controller,
)

OLD = "registry.example/engine:1"
NEW = "registry.example/engine:2"


@pytest.fixture(scope="module")
def controller(cluster: Cluster) -> Iterator[Controller]:
    install_crd(cluster)
    with running_controller(cluster) as ctl:
        yield ctl


@pytest.fixture
def objs(cluster: Cluster, namespace: str, controller: Controller) -> Objects:
    return Objects(cluster, namespace)


def by_name(objs: Objects, ms: str) -> dict[str, dict[str, Any]]:
    return {p["metadata"]["name"]: p for p in objs.pods(ms)}


def ordinal(pod_name: str) -> int:
    """``<ms>-<group>-<role>-<ordinal>-<pod>`` -> the role replica's ordinal."""
    return int(pod_name.rsplit("-", 2)[1])


def set_image(objs: Objects, name: str, image: str) -> None:
    template = objs.get(name)["spec"]["template"]
    role = template["roles"][0]
    for key in ("entryTemplate", "workerTemplate"):
        role[key]["spec"]["containers"][0]["image"] = image
    objs.patch(name, {"spec": {"template": template}})


def test_role_partition_keeps_the_first_replicas_at_the_old_revision(objs: Objects) -> None:
    body = model_serving("rolepart", replicas=2, workers=1)
    body["spec"]["rolloutStrategy"] = {"type": "RoleRollingUpdate"}
    body["spec"]["template"]["roles"][0].update(replicas=3, partition=1)
    objs.create(body)
    stored = objs.get("rolepart")["spec"]["template"]["roles"][0]
    assert stored["maxUnavailable"] == 1  # Kthena's CRD default, as ours now declares it
    assert stored["partition"] == 1
    objs.wait_pods("rolepart", 2 * 3 * 2, timeout=90)
    objs.wait_condition("rolepart", "Available", "True", timeout=90)
    old = objs.get("rolepart")["status"]["currentRevision"]
    before = {n: p["metadata"]["uid"] for n, p in by_name(objs, "rolepart").items()}
    set_image(objs, "rolepart", NEW)

    def partly_rolled() -> bool:
        pods = by_name(objs, "rolepart")
        if set(pods) != set(before):
            return False
        for name, pod in pods.items():
            image = pod["spec"]["containers"][0]["image"]
            revision = pod["metadata"]["labels"][labels.REVISION_LABEL]
            if ordinal(name) == 0:
                if pod["metadata"]["uid"] != before[name] or image != OLD or revision != old:
                    return False
            elif image != NEW or revision == old or not pod_ready(pod):
                return False
        return True

    wait_for("replicas 1 and 2 of every ServingGroup at the new revision", partly_rolled, 180)
    status = objs.get("rolepart")["status"]
    assert status["currentRevision"] == old != status["updateRevision"]
    assert status["updatedReplicas"] == 0  # every ServingGroup still holds a protected replica

    objs.patch(
        "rolepart",
        {
            "spec": {
                "template": {
                    "roles": [
                        {**objs.get("rolepart")["spec"]["template"]["roles"][0], "partition": 0}
                    ]
                }
            }
        },
    )

    def rolled() -> bool:
        pods = by_name(objs, "rolepart")
        return len(pods) == 12 and all(
            p["spec"]["containers"][0]["image"] == NEW for p in pods.values()
        )

    wait_for("every replica at the new revision once the partition is 0", rolled, 180)
    objs.wait_condition("rolepart", "Available", "True", timeout=90)
    status = objs.get("rolepart")["status"]
    assert status["currentRevision"] == status["updateRevision"] != old
    assert status["updatedReplicas"] == 2


def pod_ready(pod: dict[str, Any]) -> bool:
    conditions = (pod.get("status") or {}).get("conditions") or []
    return any(c.get("type") == "Ready" and c.get("status") == "True" for c in conditions)


def test_kthena_shapes_are_stored_and_served(objs: Objects) -> None:
    """Kthena's PD example's shape: a worker template whose containers are empty, with no
    workers; a network topology without a mode (the CRD defaults it to hard)."""
    body = model_serving("pdshape", replicas=1, workers=0)
    role = body["spec"]["template"]["roles"][0]
    role["workerTemplate"] = {"spec": {"containers": []}}
    body["spec"]["template"]["networkTopology"] = {"groupPolicy": {"highestTierAllowed": 1}}
    objs.create(body)
    spec = objs.get("pdshape")["spec"]
    assert spec["template"]["networkTopology"]["groupPolicy"] == {
        "highestTierAllowed": 1,
        "mode": "hard",
    }
    assert spec["template"]["roles"][0]["workerTemplate"] == {"spec": {"containers": []}}
    objs.wait_pods("pdshape", 1, timeout=90)
    objs.wait_condition("pdshape", "Available", "True", timeout=90)


def test_min_role_replicas_may_be_removed_as_in_kthena(objs: Objects) -> None:
    """Kthena's rule is ``self == oldSelf`` on the map: it cannot change, but may go."""
    body = model_serving("gangfree", replicas=1, workers=0)
    body["spec"]["template"]["gangPolicy"] = {"minRoleReplicas": {"server": 1}}
    objs.create(body)
    objs.patch("gangfree", {"spec": {"template": {"gangPolicy": {"minRoleReplicas": None}}}})
    assert objs.get("gangfree")["spec"]["template"]["gangPolicy"] == {}
