"""Volcano: the PodGroup of a ServingGroup and the annotations on its Pods, as Kthena makes them.

Kthena (``podgroupmanager/manager.go`` at 3cc0572) gives every ServingGroup a PodGroup, and
every Pod the group and task annotations, whenever the ModelServing's ``schedulerName`` is
``volcano`` and the PodGroup CRD (``podgroups.scheduling.volcano.sh``) exists, whether or not the
template has a ``gangPolicy``. ``VolcanoApi`` says what the cluster has; the controller reads it
from the CRD (``controller.manager``), ``render --volcano`` assumes a current Volcano.

The PodGroup, named as its ServingGroup:

- labels ``modelserving.volcano.sh/name`` and ``group-name``; annotation
  ``scheduling.k8s.io/group-name``; a controller owner reference without ``blockOwnerDeletion``;
- ``minMember``: per role, (1 + workerReplicas) Pods times the role's minimum, which is
  ``min(gangPolicy.minRoleReplicas[role], replicas)`` when given, else ``replicas``; left out
  when 0;
- ``minResources``: the requests of the ``containers`` (not initContainers, not limits) of those
  same Pods, per resource, summed in role order (entry template, then each worker) as Kubernetes
  sums quantities (``modelserving.workload.quantity``); ``{}`` when nothing is requested;
- ``queue``: the ModelServing's ``scheduling.volcano.sh/queue-name`` annotation, when not empty;
- ``networkTopology``: ``template.networkTopology.groupPolicy``, when set;
- ``subGroupPolicy``, only when the CRD's schema has that field: per role, in order, ``name``
  (the role), ``networkTopology`` (``rolePolicy``, when set), ``subGroupSize`` (1 +
  workerReplicas), ``minSubGroups`` (the role's minimum), ``labelSelector`` (the ModelServing
  and role labels) and ``matchLabelKeys`` ``[modelserving.volcano.sh/role-id]``.

No ``minTaskMember`` and no ``priorityClassName``: Kthena sets neither. The spec is always made
from the current ModelServing (not from a ServingGroup's revision), and an existing PodGroup is
brought to it (``spec_changes``).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from modelserving.api import labels
from modelserving.api.modelserving import ModelServing, PodTemplateSpec
from modelserving.workload.pods import owner_reference
from modelserving.workload.quantity import Quantity, QuantityError, canonical, parse

POD_GROUP_CRD = "podgroups.scheduling.volcano.sh"

# The spec fields Kthena writes when it creates or updates a PodGroup; the rest it leaves be.
MANAGED_FIELDS = ("minMember", "minResources", "queue", "networkTopology", "subGroupPolicy")

# Volcano's CRD defaults (a field the API server fills in is no reason to update).
_DEFAULT_QUEUE = "default"
_DEFAULT_MODE = "hard"


@dataclass(frozen=True, slots=True)
class VolcanoApi:
    """What the cluster serves: the PodGroup CRD, and whether its spec has ``subGroupPolicy``."""

    pod_groups: bool = True
    sub_group_policy: bool = True


NO_VOLCANO = VolcanoApi(pod_groups=False, sub_group_policy=False)


def as_api(gang: bool | VolcanoApi) -> VolcanoApi:
    """``True`` is a current Volcano (``render --volcano``), ``False`` none."""
    if isinstance(gang, VolcanoApi):
        return gang
    return VolcanoApi() if gang else NO_VOLCANO


def volcano_api(crd: Mapping[str, Any] | None) -> VolcanoApi:
    """``VolcanoApi`` from the PodGroup CRD object (None: not installed). ``subGroupPolicy``
    counts when any version's schema has ``spec.properties.subGroupPolicy``."""
    if crd is None:
        return NO_VOLCANO
    sub_groups = False
    for version in (crd.get("spec") or {}).get("versions") or []:
        schema = ((version or {}).get("schema") or {}).get("openAPIV3Schema") or {}
        spec = (schema.get("properties") or {}).get("spec") or {}
        if "subGroupPolicy" in (spec.get("properties") or {}):
            sub_groups = True
    return VolcanoApi(pod_groups=True, sub_group_policy=sub_groups)


def gang_wanted(ms: ModelServing) -> bool:
    """Whether this ModelServing gets PodGroups when the CRD exists: its scheduler is Volcano."""
    return ms.spec.scheduler_name == labels.VOLCANO_SCHEDULER


def min_role_replicas(ms: ModelServing, role_name: str, replicas: int) -> int:
    """The role replicas a ServingGroup needs: ``gangPolicy.minRoleReplicas`` capped by
    ``replicas``; all of them without a minimum."""
    gang = ms.spec.template.gang_policy
    if gang and gang.min_role_replicas and role_name in gang.min_role_replicas:
        return min(gang.min_role_replicas[role_name], replicas)
    return replicas


def annotate(pod: dict[str, Any], group: str, task: str) -> None:
    """Tell Volcano which PodGroup and task (``<role>-<index>``) a Pod belongs to."""
    annotations = pod["metadata"].setdefault("annotations", {})
    annotations[labels.VOLCANO_GROUP_ANNOTATION] = group
    annotations[labels.VOLCANO_TASK_ANNOTATION] = task


def _add_requests(
    totals: dict[str, Quantity], template: PodTemplateSpec | None, count: int, times: int = 1
) -> None:
    """The requests of ``template``'s containers times ``count``, added ``times`` times (once
    per Pod, as Kthena adds them, at the cost of one addition)."""
    if template is None or times <= 0:
        return
    containers = template.spec.get("containers")
    for container in containers if isinstance(containers, list) else []:
        resources = container.get("resources") if isinstance(container, dict) else None
        requests = resources.get("requests") if isinstance(resources, dict) else None
        for name, value in requests.items() if isinstance(requests, dict) else ():
            try:
                term = parse(value) * count
            except QuantityError:
                continue  # the Pod API refuses such a request; nothing to sum
            start = totals.get(name, Quantity(0, term.format))
            totals[name] = start.add_times(term, times)


def min_resources(ms: ModelServing) -> dict[str, str]:
    """The summed requests of the Pods ``minMember`` counts, as canonical quantities."""
    totals: dict[str, Quantity] = {}
    for role in ms.spec.template.roles:
        needed = min_role_replicas(ms, role.name, role.replicas)
        _add_requests(totals, role.entry_template, needed)
        _add_requests(totals, role.worker_template, needed, times=role.worker_replicas)
    return {name: canonical(q) for name, q in totals.items()}


def _topology(policy: Mapping[str, Any] | None) -> dict[str, Any] | None:
    """Volcano's NetworkTopologySpec of a policy: its three fields, empty strings left out."""
    if policy is None:
        return None
    out: dict[str, Any] = {}
    if policy.get("mode"):
        out["mode"] = policy["mode"]
    if policy.get("highestTierAllowed") is not None:
        out["highestTierAllowed"] = policy["highestTierAllowed"]
    if policy.get("highestTierName"):
        out["highestTierName"] = policy["highestTierName"]
    return out


def _sub_group_policy(ms: ModelServing) -> list[dict[str, Any]]:
    topology = ms.spec.template.network_topology
    role_policy = _topology(topology.role_policy if topology else None)
    out: list[dict[str, Any]] = []
    for role in ms.spec.template.roles:
        entry: dict[str, Any] = {"name": role.name}
        if role_policy is not None:
            entry["networkTopology"] = dict(role_policy)
        entry["subGroupSize"] = 1 + role.worker_replicas
        entry["minSubGroups"] = min_role_replicas(ms, role.name, role.replicas)
        entry["labelSelector"] = {
            "matchLabels": {labels.NAME_LABEL: ms.name, labels.ROLE_LABEL: role.name}
        }
        entry["matchLabelKeys"] = [labels.ROLE_ID_LABEL]
        out.append(entry)
    return out


def pod_group_spec(ms: ModelServing, api: VolcanoApi) -> dict[str, Any]:
    """The spec Kthena writes for every ServingGroup of ``ms`` (see the module docstring)."""
    spec: dict[str, Any] = {}
    min_member = sum(
        (1 + role.worker_replicas) * min_role_replicas(ms, role.name, role.replicas)
        for role in ms.spec.template.roles
    )
    if min_member:
        spec["minMember"] = min_member
    spec["minResources"] = min_resources(ms)
    queue = (ms.metadata.annotations or {}).get(labels.VOLCANO_QUEUE_ANNOTATION)
    if queue:
        spec["queue"] = queue
    topology = ms.spec.template.network_topology
    group_policy = _topology(topology.group_policy if topology else None)
    if group_policy is not None:
        spec["networkTopology"] = group_policy
    if api.sub_group_policy:
        policy = _sub_group_policy(ms)
        if policy:
            spec["subGroupPolicy"] = policy
    return spec


def pod_group(ms: ModelServing, group: str, api: VolcanoApi | None = None) -> dict[str, Any]:
    """The PodGroup of ServingGroup ``group`` (``api``: a current Volcano when not given)."""
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
        "spec": pod_group_spec(ms, api or VolcanoApi()),
    }


def _normal(field: str, value: Any) -> Any:
    """A managed field with Volcano's CRD defaults filled in, so defaulting is no change."""
    if field == "queue":
        return value or _DEFAULT_QUEUE
    if field == "minMember":
        return value or 0
    if field == "minResources":
        return {k: str(v) for k, v in (value or {}).items()}
    if field == "networkTopology" and isinstance(value, dict):
        return {"mode": _DEFAULT_MODE, **value}
    if field == "subGroupPolicy":
        out = []
        for entry in value or []:
            entry = {"subGroupSize": 1, "minSubGroups": 0, **entry}
            if isinstance(entry.get("networkTopology"), dict):
                entry["networkTopology"] = {"mode": _DEFAULT_MODE, **entry["networkTopology"]}
            out.append(entry)
        return out or None
    return value


def spec_changes(
    existing: Mapping[str, Any],
    ms: ModelServing,
    api: VolcanoApi,
    desired: Mapping[str, Any] | None = None,
) -> dict[str, Any] | None:
    """A JSON merge patch bringing ``existing`` (a PodGroup) to Kthena's spec for ``ms``, or
    None when it already has it. Only the managed fields are compared and written (after
    Volcano's CRD defaults), as Kthena's update does; a field Kthena leaves out is removed;
    ``subGroupPolicy`` is left alone when the CRD lacks it. ``desired``: ``pod_group_spec(ms,
    api)`` when the caller has it already (it is the same for every ServingGroup)."""
    return patch_to(existing, pod_group_spec(ms, api) if desired is None else desired, api)


def patch_to(
    existing: Mapping[str, Any], desired: Mapping[str, Any], api: VolcanoApi
) -> dict[str, Any] | None:
    """``spec_changes`` towards the spec ``desired`` (``pod_group_spec``'s)."""
    current = existing.get("spec") or {}
    fields = [f for f in MANAGED_FIELDS if f != "subGroupPolicy" or api.sub_group_policy]
    patch: dict[str, Any] = {}
    for field in fields:
        if _normal(field, current.get(field)) == _normal(field, desired.get(field)):
            continue
        patch[field] = _replacing(current.get(field), desired.get(field))
    return {"spec": patch} if patch else None


def _replacing(current: Any, desired: Any) -> Any:
    """The merge-patch value that turns ``current`` into ``desired`` (keys of a map that
    ``desired`` lacks are removed; lists and scalars are replaced)."""
    if isinstance(current, dict) and isinstance(desired, dict):
        out = {k: _replacing(current.get(k), v) for k, v in desired.items()}
        out.update({k: None for k in current if k not in desired})
        return out
    return desired
