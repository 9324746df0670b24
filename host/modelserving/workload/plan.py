"""The desired objects of a ModelServing, in the order ``render`` prints them.

ServingGroup by ServingGroup: its PodGroup (Volcano only), then per role and role replica
the entry Pod, its headless Service and the workers (the controller makes a pass's Services
after all of its Pods). Pure; used by ``render`` and the controller.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from modelserving.api import labels
from modelserving.api.modelserving import ModelServing, Role
from modelserving.api.place import PodPlace
from modelserving.workload import gang as gang_
from modelserving.workload import quantity as quantity_
from modelserving.workload.names import group_name, pod_name, role_id
from modelserving.workload.pods import entry_pod, worker_pod
from modelserving.workload.revision import revision as revision_of
from modelserving.workload.revision import role_template_hash
from modelserving.workload.services import headless_service


class DesiredPod:
    """A generated Pod and where it sits (``place``, handed on as is in the plugin chain's
    HookRequest), with the indexes of its role replica and of the Pod in it (0: the entry).

    The Pod itself may be built on first use (``build``): a pass plans every ServingGroup it
    keeps, but most of its Pods exist already and only their names are compared."""

    __slots__ = ("_build", "_pod", "name", "place", "role_index", "worker_index")

    def __init__(
        self,
        pod: dict[str, Any] | None,
        place: PodPlace,
        role_index: int,
        worker_index: int,
        *,
        name: str | None = None,
        build: Callable[[], dict[str, Any]] | None = None,
    ) -> None:
        if pod is None and (build is None or name is None):
            raise ValueError("a DesiredPod needs its Pod, or its name and a builder")
        self._pod = pod
        self._build = build
        self.name: str = name if name is not None else str(pod["metadata"]["name"])  # type: ignore[index]
        self.place = place
        self.role_index = role_index
        self.worker_index = worker_index

    @property
    def pod(self) -> dict[str, Any]:
        if self._pod is None:
            assert self._build is not None
            self._pod, self._build = self._build(), None
        return self._pod

    def __repr__(self) -> str:
        return f"DesiredPod({self.name!r}, {self.place!r})"


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
    hash_ = template_hash or role_template_hash(role)

    def build(k: int) -> Callable[[], dict[str, Any]]:
        def make() -> dict[str, Any]:
            if k == 0:
                pod = entry_pod(ms, group, role, index, revision, hash_)
            else:
                pod = worker_pod(ms, group, role, index, k, revision, hash_)
            if gang:
                gang_.annotate(pod, group, rid)
            return pod

        return make

    if role.worker_replicas and role.worker_template is None:
        raise ValueError(f"role '{role.name}' has workers but no workerTemplate")
    pods = [
        DesiredPod(
            None,
            PodPlace(group, role.name, rid, k == 0),
            index,
            k,
            name=pod_name(group, rid, k),
            build=build(k),
        )
        for k in range(role.worker_replicas + 1)
    ]
    service = headless_service(ms, group, role, index) if role.worker_template is not None else None
    return RoleReplicaPlan(
        role=role.name,
        index=index,
        entry=pods[0],
        workers=tuple(pods[1:]),
        service=service,
    )


def group_size(ms: ModelServing) -> int:
    """The Pods of one of ``ms``'s ServingGroups: every role replica's entry and workers."""
    return sum(role.replicas * (1 + role.worker_replicas) for role in ms.spec.template.roles)


_RESOURCE_PLACES = ("containers", "initContainers", "ephemeralContainers")


def costly_quantity(ms: ModelServing) -> str | None:
    """The first resource quantity of a Pod template that the API server would take long over
    (``quantity.costly``), with its field; None when there is none. The CRD leaves Pod
    templates open, so nothing else stops one, and every retry of its Pods would cost that."""
    for i, role in enumerate(ms.spec.template.roles):
        for field_name, template in (
            ("entryTemplate", role.entry_template),
            ("workerTemplate", role.worker_template),
        ):
            if template is None:
                continue
            for path, value in _quantities(template.spec):
                why = quantity_.costly(value)
                if why is not None:
                    return f"spec.template.roles[{i}].{field_name}.spec.{path}: {why}"
    return None


def _quantities(spec: Mapping[str, Any]) -> Iterator[tuple[str, Any]]:
    """Each resource quantity of a Pod spec (its containers' requests and limits, its own
    resources and overhead), with its path."""
    for place in _RESOURCE_PLACES:
        items = spec.get(place)
        for j, container in enumerate(items if isinstance(items, list) else ()):
            resources = container.get("resources") if isinstance(container, Mapping) else None
            yield from _resources(resources, f"{place}[{j}].resources")
    yield from _resources(spec.get("resources"), "resources")
    overhead = spec.get("overhead")
    if isinstance(overhead, Mapping):
        yield from ((f"overhead.{name}", value) for name, value in overhead.items())


def _resources(resources: Any, path: str) -> Iterator[tuple[str, Any]]:
    if not isinstance(resources, Mapping):
        return
    for kind in ("requests", "limits"):
        values = resources.get(kind)
        if isinstance(values, Mapping):
            yield from ((f"{path}.{kind}.{name}", value) for name, value in values.items())


def refusal(ms: ModelServing, max_pods: int) -> str | None:
    """Why ``ms`` is refused before anything is planned (``too_many_pods``, then
    ``costly_quantity``), or None: what the controller and ``render`` check alike."""
    return too_many_pods(ms, max_pods) or costly_quantity(ms)


def _count(n: int, noun: str) -> str:
    return f"{n:,} {noun}" + ("" if n == 1 else "s")


def too_many_pods(ms: ModelServing, limit: int) -> str | None:
    """Why ``ms`` asks for more than ``limit`` Pods (operator setting
    ``maxPodsPerModelServing``), worked out without planning any; None when it does not."""
    per_group = group_size(ms)
    total = ms.spec.replicas * per_group
    if total <= limit:
        return None
    return (
        f"spec asks for {total:,} Pods ({_count(ms.spec.replicas, 'ServingGroup')} x "
        f"{_count(per_group, 'Pod')}); the limit is {limit:,} (operator setting "
        "maxPodsPerModelServing)"
    )


def plan_group(
    ms: ModelServing,
    index: int,
    revision: str | None = None,
    gang: bool | gang_.VolcanoApi = False,
    template_hashes: dict[str, str] | None = None,
    *,
    pod_group: bool = True,
    ordinals: Mapping[str, Sequence[int]] | None = None,
) -> GroupPlan:
    """ServingGroup ``index``; ``gang`` says what Volcano serves (``True``: a current Volcano,
    PodGroup CRD with ``subGroupPolicy``; ``False``: none).

    ``revision`` and ``template_hashes`` (role name -> hash) may be passed when planning many
    groups, so they are computed once. ``pod_group=False`` leaves the PodGroup out (the
    Pods' gang annotations stay), for a caller that makes it only when it is missing.
    ``ordinals`` gives, by role name, the ordinals of the role's replicas when they are not
    ``0 .. replicas-1`` (a scale-down kept higher ones, as Kthena's does).
    """
    hashes = template_hashes or role_template_hashes(ms)
    rev = revision if revision is not None else revision_of(ms)
    name = group_name(ms.name, index)
    api = gang_.as_api(gang)
    use_gang = api.pod_groups and gang_.gang_wanted(ms)
    replicas = tuple(
        plan_role_replica(ms, name, role, j, rev, use_gang, hashes[role.name])
        for role in ms.spec.template.roles
        for j in role_ordinals(role, ordinals)
    )
    group = gang_.pod_group(ms, name, api) if use_gang and pod_group else None
    return GroupPlan(name=name, index=index, pod_group=group, roles=replicas)


@dataclass(frozen=True, slots=True)
class GroupNames:
    """The names of what ``plan_group`` describes for one ServingGroup, without building it."""

    pods: frozenset[str]
    services: frozenset[str]
    name: str = ""
    """The ServingGroup's name."""


def role_ordinals(role: Role, ordinals: Mapping[str, Sequence[int]] | None) -> Sequence[int]:
    """The ordinals of ``role``'s replicas: ``ordinals[role.name]`` when given, else
    ``0 .. replicas-1``."""
    if ordinals is not None and role.name in ordinals:
        return ordinals[role.name]
    return range(role.replicas)


def group_names(
    ms: ModelServing, index: int, ordinals: Mapping[str, Sequence[int]] | None = None
) -> GroupNames:
    """The Pod and Service names of ServingGroup ``index`` (those of ``plan_group(ms, index,
    ordinals=ordinals)``): a pass compares them with what exists for every ServingGroup it
    keeps, and plans only the ServingGroups that differ."""
    group = group_name(ms.name, index)
    pods: list[str] = []
    services: list[str] = []
    for role in ms.spec.template.roles:
        if role.worker_replicas and role.worker_template is None:
            raise ValueError(f"role '{role.name}' has workers but no workerTemplate")
        for j in role_ordinals(role, ordinals):
            rid = role_id(role.name, j)
            pods.extend(pod_name(group, rid, k) for k in range(role.worker_replicas + 1))
            if role.worker_template is not None:
                services.append(pod_name(group, rid, 0))
    return GroupNames(frozenset(pods), frozenset(services), group)


def plan(ms: ModelServing, gang: bool | gang_.VolcanoApi = False) -> list[GroupPlan]:
    """Every ServingGroup of ``ms`` at its current revision."""
    rev = revision_of(ms)
    hashes = role_template_hashes(ms)
    return [plan_group(ms, i, rev, gang, hashes) for i in range(ms.spec.replicas)]


def role_template_hashes(ms: ModelServing) -> dict[str, str]:
    """Each role's template hash, by role name."""
    return {role.name: role_template_hash(role) for role in ms.spec.template.roles}


def label_selector(ms: ModelServing) -> str:
    """``status.labelSelector``: one Pod per ServingGroup (the first role's first entry Pod).

    The ``key=value`` terms are sorted as text, as Kthena writes a label set (so ``role-id``
    comes before ``role``): the same string, so a takeover rewrites no status."""
    first = ms.spec.template.roles[0].name
    return ",".join(
        sorted(
            [
                f"{labels.NAME_LABEL}={ms.name}",
                f"{labels.ENTRY_LABEL}=true",
                f"{labels.ROLE_LABEL}={first}",
                f"{labels.ROLE_ID_LABEL}={first}-0",
            ]
        )
    )
