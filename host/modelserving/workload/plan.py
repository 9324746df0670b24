"""The desired objects of a ModelServing, in the order the controller creates them.

ServingGroup by ServingGroup: its PodGroup (Volcano only), then per role and role replica
the entry Pod, its headless Service and the workers. Pure; used by ``render`` and the controller.
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

from modelserving.api import labels
from modelserving.api.modelserving import ModelServing, Role
from modelserving.api.place import PodPlace
from modelserving.workload import gang as gang_
from modelserving.workload.names import group_name, role_id
from modelserving.workload.pods import entry_pod, worker_pod
from modelserving.workload.revision import revision as revision_of
from modelserving.workload.revision import role_template_hash
from modelserving.workload.services import headless_service


@dataclass(frozen=True, slots=True)
class DesiredPod:
    """A generated Pod and where it sits (``place``, handed on as is in the plugin chain's
    HookRequest), with the indexes of its role replica and of the Pod in it (0: the entry)."""

    pod: dict[str, Any]
    place: PodPlace
    role_index: int
    worker_index: int

    @property
    def name(self) -> str:
        return str(self.pod["metadata"]["name"])


@dataclass(frozen=True, slots=True)
class RoleReplicaPlan:
    """One replica of one role: an entry Pod, its workers, and a Service when it has workers."""

    role: str
    index: int
    entry: DesiredPod
    workers: tuple[DesiredPod, ...]
    service: dict[str, Any] | None

    def pods(self) -> Iterator[DesiredPod]:
        yield self.entry
        yield from self.workers


@dataclass(frozen=True, slots=True)
class GroupPlan:
    """One ServingGroup."""

    name: str
    index: int
    pod_group: dict[str, Any] | None
    roles: tuple[RoleReplicaPlan, ...]

    def pods(self) -> Iterator[DesiredPod]:
        for replica in self.roles:
            yield from replica.pods()


def plan_role_replica(
    ms: ModelServing,
    group: str,
    role: Role,
    index: int,
    revision: str,
    gang: bool,
    template_hash: str | None = None,
) -> RoleReplicaPlan:
    rid = role_id(role.name, index)
    template_hash = template_hash or role_template_hash(role)
    entry = entry_pod(ms, group, role, index, revision, template_hash)
    if gang:
        gang_.annotate(entry, group, rid)
    workers = []
    for k in range(1, role.worker_replicas + 1):
        pod = worker_pod(ms, group, role, index, k, revision, template_hash)
        if gang:
            gang_.annotate(pod, group, rid)
        workers.append(DesiredPod(pod, PodPlace(group, role.name, rid, False), index, k))
    service = headless_service(ms, group, role, index) if role.worker_template is not None else None
    return RoleReplicaPlan(
        role=role.name,
        index=index,
        entry=DesiredPod(entry, PodPlace(group, role.name, rid, True), index, 0),
        workers=tuple(workers),
        service=service,
    )


def plan_group(
    ms: ModelServing,
    index: int,
    revision: str | None = None,
    gang: bool | gang_.VolcanoApi = False,
    template_hashes: dict[str, str] | None = None,
) -> GroupPlan:
    """ServingGroup ``index``; ``gang`` says what Volcano serves (``True``: a current Volcano,
    PodGroup CRD with ``subGroupPolicy``; ``False``: none).

    ``revision`` and ``template_hashes`` (role name -> hash) may be passed when planning many
    groups, so they are computed once.
    """
    hashes = template_hashes or role_template_hashes(ms)
    rev = revision if revision is not None else revision_of(ms)
    name = group_name(ms.name, index)
    api = gang_.as_api(gang)
    use_gang = api.pod_groups and gang_.gang_wanted(ms)
    replicas = tuple(
        plan_role_replica(ms, name, role, j, rev, use_gang, hashes[role.name])
        for role in ms.spec.template.roles
        for j in range(role.replicas)
    )
    pod_group = gang_.pod_group(ms, name, api) if use_gang else None
    return GroupPlan(name=name, index=index, pod_group=pod_group, roles=replicas)


def plan(ms: ModelServing, gang: bool | gang_.VolcanoApi = False) -> list[GroupPlan]:
    """Every ServingGroup of ``ms`` at its current revision."""
    rev = revision_of(ms)
    hashes = role_template_hashes(ms)
    return [plan_group(ms, i, rev, gang, hashes) for i in range(ms.spec.replicas)]


def role_template_hashes(ms: ModelServing) -> dict[str, str]:
    """Each role's template hash, by role name."""
    return {role.name: role_template_hash(role) for role in ms.spec.template.roles}


def label_selector(ms: ModelServing) -> str:
    """``status.labelSelector``: one Pod per ServingGroup (the first role's first entry Pod)."""
    first = ms.spec.template.roles[0].name
    return ",".join(
        [
            f"{labels.NAME_LABEL}={ms.name}",
            f"{labels.ENTRY_LABEL}=true",
            f"{labels.ROLE_LABEL}={first}",
            f"{labels.ROLE_ID_LABEL}={first}-0",
        ]
    )
