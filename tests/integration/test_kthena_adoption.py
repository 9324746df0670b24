"""Taking over from Kthena: the Pods, Services, PodGroups and ControllerRevision Kthena created
for a ModelServing are adopted as they are, with no rollout.

The ModelServing (``tests/data/kthena-revision/cases/crafted-adoption.yaml``) goes through the
API server with our CRD; its revision and role-template hashes come from the vectors, which
Kthena's own hashing computed with Kthena's CRD. The objects are written here the way Kthena's
controller (commit 3cc0572) writes them: names, labels, owner references, the env it adds, the
headless Service per role replica with workers, and, when the scheduler is Volcano and the
PodGroup API is served, a PodGroup per ServingGroup and Volcano's Pod annotations. Then our
controller starts, and nothing may be deleted or recreated.
"""

from __future__ import annotations

import copy
import json
from pathlib import Path
from typing import Any

from kubernetes import client

from modelserving.api import parse_model_serving
from modelserving.controller.manager import Controller
from modelserving.workload.revision import revision, role_template_hash
from tests.integration.conftest import Cluster, wait_for
from tests.integration.controller_env import (
    Objects,
    install_crd,
    running_controller,
)

ROOT = Path(__file__).resolve().parents[2]
VECTORS = json.loads((ROOT / "tests" / "data" / "kthena-revision" / "vectors.json").read_text())

# Kthena's label keys (pkg/apis/workload/v1alpha1/labels.go).
NAME = "modelserving.volcano.sh/name"
GROUP = "modelserving.volcano.sh/group-name"
ROLE = "modelserving.volcano.sh/role"
ROLE_ID = "modelserving.volcano.sh/role-id"
ENTRY = "modelserving.volcano.sh/entry"
REVISION = "modelserving.volcano.sh/revision"
ROLE_HASH = "modelserving.volcano.sh/role-template-hash"
VOLCANO_GROUP = "scheduling.k8s.io/group-name"
VOLCANO_TASK = "volcano.sh/task-spec"
KTHENA_ENV = ("GROUP_SIZE", "ENTRY_ADDRESS", "WORKER_INDEX")


def vector(case_id: str) -> dict[str, Any]:
    return next(v for v in VECTORS["vectors"] if v["id"] == case_id)


def owner(ms: dict[str, Any], block: bool = True) -> dict[str, Any]:
    ref = {
        "apiVersion": ms["apiVersion"],
        "kind": "ModelServing",
        "name": ms["metadata"]["name"],
        "uid": ms["metadata"]["uid"],
        "controller": True,
    }
    if block:
        ref["blockOwnerDeletion"] = True
    return ref


def with_env(spec: dict[str, Any], group_size: int, entry_address: str, index: int) -> None:
    """Kthena's addPodEnvVars: in every container and init container, its three variables
    replace any of the same name and are appended after the others."""
    added = [
        {"name": "GROUP_SIZE", "value": str(group_size)},
        {"name": "ENTRY_ADDRESS", "value": entry_address},
        {"name": "WORKER_INDEX", "value": str(index)},
    ]
    for key in ("containers", "initContainers"):
        for c in spec.get(key) or []:
            kept = [e for e in c.get("env") or [] if e["name"] not in KTHENA_ENV]
            c["env"] = kept + copy.deepcopy(added)


def kthena_pod(
    ms: dict[str, Any],
    role: dict[str, Any],
    group: str,
    role_id: str,
    index: int,
    hashes: tuple[str, str],
    volcano: bool,
) -> dict[str, Any]:
    """GenerateEntryPod (index 0) / GenerateWorkerPod, then AnnotatePodWithPodGroup."""
    namespace = ms["metadata"]["namespace"]
    template = role["entryTemplate"] if index == 0 else role["workerTemplate"]
    entry_name = f"{group}-{role_id}-0"
    labels = {
        NAME: ms["metadata"]["name"],
        GROUP: group,
        ROLE: role["name"],
        ROLE_ID: role_id,
        REVISION: hashes[0],
        ROLE_HASH: hashes[1],
    }
    if index == 0:
        labels[ENTRY] = "true"
    metadata = template.get("metadata") or {}
    labels.update(metadata.get("labels") or {})
    annotations = dict(metadata.get("annotations") or {})
    if volcano:
        annotations[VOLCANO_GROUP] = group
        annotations[VOLCANO_TASK] = role_id
    spec = copy.deepcopy(template["spec"])
    spec["schedulerName"] = ms["spec"]["schedulerName"]
    with_env(spec, role["workerReplicas"] + 1, f"{entry_name}.{namespace}", index)
    pod: dict[str, Any] = {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {
            "name": f"{group}-{role_id}-{index}",
            "namespace": namespace,
            "labels": labels,
            "ownerReferences": [owner(ms)],
        },
        "spec": spec,
    }
    if annotations:
        pod["metadata"]["annotations"] = annotations
    return pod


def kthena_service(ms: dict[str, Any], role: dict[str, Any], group: str, role_id: str) -> Any:
    """CreateHeadlessService: one per role replica whose role has a worker template."""
    return {
        "apiVersion": "v1",
        "kind": "Service",
        "metadata": {
            "name": f"{group}-{role_id}-0",
            "namespace": ms["metadata"]["namespace"],
            "ownerReferences": [owner(ms)],
            "labels": {NAME: ms["metadata"]["name"], GROUP: group, ROLE: role["name"]}
            | {ROLE_ID: role_id},
        },
        "spec": {
            "clusterIP": "None",
            "selector": {GROUP: group, ROLE: role["name"], ROLE_ID: role_id, ENTRY: "true"},
            "publishNotReadyAddresses": True,
        },
    }


def _milli(text: str) -> int:
    return int(text[:-1]) if text.endswith("m") else int(text) * 1000


def kthena_pod_group(ms: dict[str, Any], group: str) -> dict[str, Any]:
    """createPodGroup: minMember counts every Pod (no gangPolicy), minResources sums the
    containers' requests (this case requests only millicores and Mi of memory)."""
    members, cpu, memory = 0, 0, 0
    for role in ms["spec"]["template"]["roles"]:
        workers = (
            [role["workerTemplate"]] * role["workerReplicas"] if role["workerReplicas"] else []
        )
        templates = [role["entryTemplate"], *workers]
        members += len(templates) * role["replicas"]
        for template in templates:
            for c in template["spec"]["containers"]:
                requests = (c.get("resources") or {}).get("requests") or {}
                cpu += _milli(requests.get("cpu", "0")) * role["replicas"]
                memory += int(requests.get("memory", "0Mi")[:-2]) * role["replicas"]
    return {
        "apiVersion": "scheduling.volcano.sh/v1beta1",
        "kind": "PodGroup",
        "metadata": {
            "name": group,
            "namespace": ms["metadata"]["namespace"],
            "labels": {NAME: ms["metadata"]["name"], GROUP: group},
            "annotations": {VOLCANO_GROUP: group},
            "ownerReferences": [owner(ms, block=False)],
        },
        "spec": {"minMember": members, "minResources": {"cpu": f"{cpu}m", "memory": f"{memory}Mi"}},
    }


def kthena_controller_revision(ms: dict[str, Any], rev: str) -> dict[str, Any]:
    """CreateControllerRevision: the roles wrapped as {"data": roles}."""
    name = ms["metadata"]["name"]
    return {
        "apiVersion": "apps/v1",
        "kind": "ControllerRevision",
        "metadata": {
            "name": f"{name}-{rev}",
            "namespace": ms["metadata"]["namespace"],
            "labels": {NAME: name, REVISION: rev},
            "ownerReferences": [owner(ms)],
        },
        "revision": 1,
        "data": {"data": ms["spec"]["template"]["roles"]},
    }


class Kthena:
    """Writes what Kthena's controller would have written for one stored ModelServing."""

    def __init__(self, cluster: Cluster, objs: Objects, ms: dict[str, Any], vec: dict[str, Any]):
        self.cluster, self.objs, self.ms, self.vec = cluster, objs, ms, vec
        self.custom = client.CustomObjectsApi(cluster.api_client)
        self.apps = client.AppsV1Api(cluster.api_client)
        self.volcano = ms["spec"]["schedulerName"] == "volcano"

    def create_all(self) -> int:
        ns = self.objs.namespace
        rev = self.vec["revision"]
        history: Any = kthena_controller_revision(self.ms, rev)
        self.apps.create_namespaced_controller_revision(ns, history)
        count = 0
        for g in range(self.ms["spec"]["replicas"]):
            group = f"{self.ms['metadata']['name']}-{g}"
            if self.volcano:
                self.custom.create_namespaced_custom_object(
                    "scheduling.volcano.sh", "v1beta1", ns, "podgroups",
                    kthena_pod_group(self.ms, group),
                )  # fmt: skip
            for role in self.ms["spec"]["template"]["roles"]:
                hashes = (rev, self.vec["roleTemplateHashes"][role["name"]])
                for j in range(role["replicas"]):
                    role_id = f"{role['name']}-{j}"
                    for k in range(role["workerReplicas"] + 1):
                        pod: Any = kthena_pod(
                            self.ms, role, group, role_id, k, hashes, self.volcano
                        )
                        self.objs.core.create_namespaced_pod(ns, pod)
                        count += 1
                    if role.get("workerTemplate") is not None:
                        service: Any = kthena_service(self.ms, role, group, role_id)
                        self.objs.core.create_namespaced_service(ns, service)
        return count

    def snapshot(self) -> dict[str, dict[str, str]]:
        """Every object of the ModelServing by kind and name, as its UID (a deleted and
        recreated object has a new one; one being deleted is marked)."""
        ns, name = self.objs.namespace, self.ms["metadata"]["name"]
        selector = f"{NAME}={name}"

        def uids(items: Any) -> dict[str, str]:
            out = {}
            for item in self.cluster.api_client.sanitize_for_serialization(items):
                meta = item["metadata"]
                mark = " (deleting)" if meta.get("deletionTimestamp") else ""
                out[str(meta["name"])] = str(meta["uid"]) + mark
            return out

        shot = {
            "pods": uids(self.objs.core.list_namespaced_pod(ns, label_selector=selector).items),
            "services": uids(
                self.objs.core.list_namespaced_service(ns, label_selector=selector).items
            ),
            "controllerrevisions": uids(
                self.apps.list_namespaced_controller_revision(ns, label_selector=selector).items
            ),
        }
        if self.volcano:
            got: Any = self.custom.list_namespaced_custom_object(
                "scheduling.volcano.sh", "v1beta1", ns, "podgroups"
            )
            shot["podgroups"] = uids(list(got["items"]))
        return shot


def more_passes(ctl: Controller, key: tuple[str, str], count: int = 2) -> None:
    """Let the controller run ``count`` more full reconcile passes of ``key``: whatever a pass
    would delete or create, it has done by then."""
    for _ in range(count):
        done = ctl.passes[key]
        ctl.enqueue(key)
        wait_for(f"another reconcile pass of {key}", lambda d=done: ctl.passes[key] > d)


def _ready(pod: Any) -> bool:
    return any(c.type == "Ready" and c.status == "True" for c in (pod.status.conditions or []))


def _stored(objs: Objects, case_id: str) -> tuple[dict[str, Any], dict[str, Any]]:
    """The case's ModelServing created through the API server, and its vector; the stored object
    (our CRD's defaults filled in) hashes to Kthena's values."""
    vec = vector(case_id)
    objs.create(vec["manifest"])
    ms = objs.get(vec["manifest"]["metadata"]["name"])
    parsed = parse_model_serving(ms)
    assert revision(parsed) == vec["revision"]
    assert {r.name: role_template_hash(r) for r in parsed.spec.template.roles} == vec[
        "roleTemplateHashes"
    ]
    ports = ms["spec"]["template"]["roles"][0]["entryTemplate"]["spec"]["containers"][0]["ports"]
    assert ports == [{"containerPort": 8000, "name": "http", "protocol": "TCP"}]  # CRD default
    return ms, vec


def test_kthena_created_objects_are_adopted_without_a_rollout(
    cluster: Cluster, namespace: str
) -> None:
    install_crd(cluster)
    objs = Objects(cluster, namespace)
    ms, vec = _stored(objs, "crafted-adoption/adopted")
    kthena = Kthena(cluster, objs, ms, vec)
    created = kthena.create_all()
    assert created == 10

    def all_ready() -> bool:
        pods = objs.core.list_namespaced_pod(namespace, label_selector=f"{NAME}=adopted").items
        return len(pods) == created and all(_ready(p) for p in pods)

    wait_for("Kthena's Pods to run", all_ready, timeout=90)
    before = kthena.snapshot()
    assert len(before["pods"]) == 10 and len(before["services"]) == 4

    with running_controller(cluster) as ctl:
        objs.wait_condition("adopted", "Available", "True", timeout=90)
        status = wait_for(
            "the status at Kthena's revision",
            lambda: (
                (s := objs.get("adopted").get("status") or {}).get("updatedReplicas") == 2 and s
            ),
        )
        more_passes(ctl, (namespace, "adopted"))
        after = kthena.snapshot()
    assert status["updateRevision"] == status["currentRevision"] == vec["revision"]
    assert status["replicas"] == status["availableReplicas"] == 2
    assert after == before


def test_kthena_volcano_objects_are_kept(cluster: Cluster, namespace: str) -> None:
    """With Volcano (Kthena's default scheduler, running in the local control plane), Kthena's
    PodGroups and annotated Pods are kept as they are, Volcano schedules them and the
    ModelServing becomes Available at Kthena's revision."""
    install_crd(cluster)
    objs = Objects(cluster, namespace)
    ms, vec = _stored(objs, "crafted-adoption/adopted-volcano")
    kthena = Kthena(cluster, objs, ms, vec)
    assert kthena.create_all() == 10
    before = kthena.snapshot()
    assert len(before["podgroups"]) == 2

    with running_controller(cluster) as ctl:
        status = wait_for(
            "a status written by our controller",
            lambda: (
                (s := objs.get("adopted-volcano").get("status") or {}).get("updateRevision") and s
            ),
            timeout=60,
        )
        objs.wait_condition("adopted-volcano", "Available", "True", timeout=90)
        more_passes(ctl, (namespace, "adopted-volcano"))
        after = kthena.snapshot()
    assert status["updateRevision"] == vec["revision"]
    assert objs.get("adopted-volcano")["status"]["currentRevision"] == vec["revision"]
    assert after == before
