"""Entry and worker Pods of one role replica, with Kthena's labels, env and owner reference.

Pure functions from a validated ModelServing to JSON-compatible Pod dicts; the plugin chain runs
on their output. Called by ``workload.plan``.

The Pods made from one template share what they take from it unchanged: the template's spec is
copied once (and remembered by its identity), and each Pod gets its own spec map, container
lists and container maps (the env and the scheduler name are written there), the rest of the
copy (a container's resources, args, securityContext, probes, mounts; the volumes) shared.
Every Pod is read-only from then on: plugins patch copy-on-write. Sharing saves a deep copy of
the template per Pod, and lets the patch policy find a Pod's facts from a sibling's by identity
(``PatchValidator.related``).
"""

from __future__ import annotations

from typing import Any

from modelserving.api import labels
from modelserving.api.jsondata import json_copy
from modelserving.api.modelserving import ModelServing, PodTemplateSpec, Role
from modelserving.workload.kept import Kept
from modelserving.workload.names import pod_name, role_id
from modelserving.workload.revision import role_template_hash


def owner_reference(ms: ModelServing, block_owner_deletion: bool = True) -> dict[str, Any]:
    """The controller owner reference every generated object carries (GC and adoption).

    Kthena sets ``blockOwnerDeletion`` on Pods and Services but not on PodGroups.
    """
    ref: dict[str, Any] = {
        "apiVersion": labels.API_VERSION,
        "kind": labels.KIND,
        "name": ms.name,
    }
    if ms.metadata.uid:
        ref["uid"] = ms.metadata.uid
    ref["controller"] = True
    if block_owner_deletion:
        ref["blockOwnerDeletion"] = True
    return ref


def upsert_env(pod_spec: dict[str, Any], env: list[dict[str, Any]]) -> None:
    """Put ``env`` into every container and initContainer; same-named entries are replaced.

    Existing entries keep their order and the new ones go last (Kthena's order).
    """
    names = {e["name"] for e in env}
    for key in ("containers", "initContainers"):
        for container in pod_spec.get(key) or []:
            kept = [e for e in container.get("env") or [] if e.get("name") not in names]
            container["env"] = kept + [dict(e) for e in env]


def _base_pod(
    ms: ModelServing,
    name: str,
    group: str,
    role: Role,
    role_index: int,
    revision: str,
    template_hash: str,
) -> dict[str, Any]:
    return {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {
            "name": name,
            "namespace": ms.namespace,
            "labels": {
                labels.NAME_LABEL: ms.name,
                labels.GROUP_NAME_LABEL: group,
                labels.ROLE_LABEL: role.name,
                labels.ROLE_ID_LABEL: role_id(role.name, role_index),
                labels.REVISION_LABEL: revision,
                labels.ROLE_TEMPLATE_HASH_LABEL: template_hash,
            },
            "ownerReferences": [owner_reference(ms)],
        },
    }


def _apply_template(
    pod: dict[str, Any], template: PodTemplateSpec, scheduler: str, template_hash: str
) -> None:
    meta = pod["metadata"]
    if template.metadata is not None:
        if template.metadata.labels:
            meta["labels"].update(template.metadata.labels)
        if template.metadata.annotations:
            meta.setdefault("annotations", {}).update(template.metadata.annotations)
    # by the role's template hash too: a template changed in place is copied again
    spec = dict(_TEMPLATE_SPECS(id(template.spec), template.spec, template_hash))
    for key in _CONTAINER_LISTS:
        listed = spec.get(key)
        if type(listed) is list:
            spec[key] = [dict(c) if type(c) is dict else c for c in listed]
    spec["schedulerName"] = scheduler
    pod["spec"] = spec


_TEMPLATE_SPECS = Kept(lambda spec, _hash: json_copy(spec), limit=1024)
"""One deep copy of each template's spec, by the template's identity and its role's template
hash, shared by its Pods."""
_CONTAINER_LISTS = ("containers", "initContainers", "ephemeralContainers")
"""The container lists a Pod gets its own copy of, down to each container's map."""


def _common_env(
    role: Role, entry_name: str, namespace: str, worker_index: int
) -> list[dict[str, Any]]:
    return [
        {"name": labels.GROUP_SIZE_ENV, "value": str(role.worker_replicas + 1)},
        {"name": labels.ENTRY_ADDRESS_ENV, "value": f"{entry_name}.{namespace}"},
        {"name": labels.WORKER_INDEX_ENV, "value": str(worker_index)},
    ]


def entry_pod(
    ms: ModelServing,
    group: str,
    role: Role,
    role_index: int,
    revision: str,
    template_hash: str | None = None,
) -> dict[str, Any]:
    """The entry Pod (index 0) of replica ``role_index`` of ``role`` in ServingGroup ``group``."""
    name = pod_name(group, role_id(role.name, role_index), 0)
    hash_ = template_hash or role_template_hash(role)
    pod = _base_pod(ms, name, group, role, role_index, revision, hash_)
    pod["metadata"]["labels"][labels.ENTRY_LABEL] = "true"
    _apply_template(pod, role.entry_template, ms.spec.scheduler_name, hash_)
    upsert_env(pod["spec"], _common_env(role, name, ms.namespace, 0))
    return pod


def worker_pod(
    ms: ModelServing,
    group: str,
    role: Role,
    role_index: int,
    worker_index: int,
    revision: str,
    template_hash: str | None = None,
) -> dict[str, Any]:
    """Worker ``worker_index`` (1..workerReplicas) of a role replica; needs a workerTemplate."""
    if role.worker_template is None:
        raise ValueError(f"role '{role.name}' has workers but no workerTemplate")
    rid = role_id(role.name, role_index)
    name = pod_name(group, rid, worker_index)
    hash_ = template_hash or role_template_hash(role)
    pod = _base_pod(ms, name, group, role, role_index, revision, hash_)
    _apply_template(pod, role.worker_template, ms.spec.scheduler_name, hash_)
    entry_name = pod_name(group, rid, 0)
    upsert_env(pod["spec"], _common_env(role, entry_name, ms.namespace, worker_index))
    return pod
