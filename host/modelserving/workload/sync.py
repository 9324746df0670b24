"""Reconciliation decisions: a ModelServing and what exists in, what to create and delete out.

``sync`` is pure. The controller lists the ModelServing's Pods, Services and PodGroups, calls it,
and carries out the ``SyncPlan``: first the deletions, then the PodGroup updates, then the
creations group by group (PodGroup, then per role replica the entry Pod and the workers), and
the Services of the groups created last, as Kthena's pass does. It decides, as Kthena does:

- recovery: a failed Pod (phase Failed, or a container restarted) is handled after
  ``restartGracePeriodSeconds`` by the recovery policy: ServingGroupRecreate deletes its whole
  ServingGroup, RoleRecreate its role replica (Pods and Service), None leaves it;
- rolling update: outdated ServingGroups (or role replicas, for RoleRollingUpdate) at or above
  the partition are deleted, at most ``maxUnavailable`` unavailable at a time, and recreated at
  the new revision. ServingGroupRollingUpdate's partition protects the first N ServingGroups;
  RoleRollingUpdate's, set per role, the first N existing replicas of that role (by ordinal)
  in every ServingGroup; a protected replica that is repaired or made anew is made at its own
  (older) revision when that revision's roles are known, as a StatefulSet's partition does;
- scale: missing ServingGroups are created at the lowest free ordinals; surplus ones are deleted,
  not-ready first, then the lowest summed pod-deletion-cost, then the highest ordinal;
- membership: inside a kept ServingGroup, missing Pods and Services are created and those its
  revision no longer describes are deleted;
- PodGroups (Volcano's CRD present, scheduler ``volcano``): every kept or new ServingGroup has
  one, made from the current ModelServing (``modelserving.workload.gang``) and brought back to it
  when it differs; those of deleted ServingGroups are deleted;
- OnPodReady: Ready Pods whose hooks have not run yet.
"""

from __future__ import annotations

import functools
from collections import Counter
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field, replace
from typing import Any

from modelserving.api import labels
from modelserving.api.jsondata import json_copy
from modelserving.api.modelserving import ModelServing, Role
from modelserving.api.place import PodPlace
from modelserving.api.validation import scaled
from modelserving.workload import gang as gang_
from modelserving.workload.kept import KEPT_MAX, Kept
from modelserving.workload.names import group_name, pod_name
from modelserving.workload.observed import (
    NODE_DELETED,
    ObservedPod,
    owned_by,
)
from modelserving.workload.plan import (
    DesiredPod,
    GroupNames,
    GroupPlan,
    RoleReplicaPlan,
    group_names,
    plan_group,
    role_template_hashes,
)
from modelserving.workload.podset import Group, PodSet
from modelserving.workload.revision import revision as revision_of

BUSY_RETRY_SECONDS = 1.0
"""How soon to look again when a name is still held by a terminating object."""


@dataclass(frozen=True, slots=True)
class PodRef:
    """A Pod to delete; the UID is a precondition so a newer Pod of the same name is safe.

    ``cause`` is the step that decided it: recovery, update, scale, membership or node (its
    Node was deleted). ``force``: deleted at once (grace period 0), as the Pod garbage collector
    does for a Pod whose Node is gone (no kubelet will ever confirm its end).
    """

    name: str
    uid: str
    cause: str = "scale"
    force: bool = False


@dataclass
class GroupWork:
    """What to create in one ServingGroup, in creation order (Services are plain dicts)."""

    name: str
    index: int
    pod_group: dict[str, Any] | None = None
    steps: list[DesiredPod | dict[str, Any]] = field(default_factory=list)

    @property
    def pods(self) -> list[DesiredPod]:
        return [s for s in self.steps if isinstance(s, DesiredPod)]


@dataclass
class SyncStatus:
    """The status counts and conditions Kthena reports (without PluginsReady)."""

    replicas: int
    current_replicas: int
    updated_replicas: int
    available_replicas: int
    current_revision: str
    update_revision: str
    available: bool
    progressing: bool
    updating: bool


@dataclass
class SyncPlan:
    """The actions of one reconcile pass and the status they are based on."""

    revision: str
    creates: list[GroupWork] = field(default_factory=list)
    delete_pods: list[PodRef] = field(default_factory=list)
    delete_services: list[str] = field(default_factory=list)
    service_causes: dict[str, str] = field(default_factory=dict)
    delete_pod_groups: list[str] = field(default_factory=list)
    update_pod_groups: dict[str, dict[str, Any]] = field(default_factory=dict)
    """Merge patches by PodGroup name, bringing existing PodGroups to Kthena's spec."""
    ready_hooks: list[DesiredPod] = field(default_factory=list)
    groups: list[str] = field(default_factory=list)
    """The ServingGroups the ModelServing keeps after this pass (existing and new), by index."""
    requeue_after: float | None = None
    notes: list[str] = field(default_factory=list)
    status: SyncStatus | None = None

    def requeue(self, seconds: float) -> None:
        seconds = max(seconds, 0.0)
        if self.requeue_after is None or seconds < self.requeue_after:
            self.requeue_after = seconds

    @property
    def pods_to_create(self) -> int:
        return sum(len(w.pods) for w in self.creates)


def _scaled(value: int | str | None, total: int, default: int, round_up: bool) -> int:
    if value is None:
        return default
    resolved = scaled(value, total, round_up)
    return default if resolved is None else resolved


class _Sync:
    """One pass; fields hold the inputs, ``out`` the decisions taken so far."""

    def __init__(
        self,
        ms: ModelServing,
        pods: PodSet | Iterable[Mapping[str, Any]],
        services: Iterable[Mapping[str, Any]],
        pod_groups: Iterable[Mapping[str, Any]],
        now: float,
        gang: bool | gang_.VolcanoApi,
        history: Mapping[str, Sequence[Mapping[str, Any]]],
        seen_failed: Mapping[str, float],
        lost_nodes: Mapping[str, str],
        recently_gone: set[str],
    ) -> None:
        self.ms = ms
        self.now = now
        self.gang = gang_.as_api(gang)
        self.pod_groups_wanted = self.gang.pod_groups and gang_.gang_wanted(ms)
        self.history = history
        self.seen_failed = seen_failed
        self.update_revision = revision_of(ms)
        self.hashes = role_template_hashes(ms)
        uid = ms.metadata.uid or ""
        if not isinstance(pods, PodSet):
            self.podset = PodSet.of(ms.name, uid, pods)
        elif pods.uid == uid and pods.ms_name == ms.name:
            self.podset = pods
        else:  # kept for another ModelServing of the name: read it afresh
            self.podset = PodSet.of(ms.name, uid, pods.raw.values())
        self.terminating_names = self.podset.terminating | recently_gone
        self.lost: dict[str, str] = {}
        """Pods on a lost Node by name: the Node's state (NODE_DELETED or NODE_NOT_READY)."""
        self.groups = dict(self.podset.groups)
        if lost_nodes:
            self._on_lost_nodes(lost_nodes)
        # Every name in use blocks a create, including Pods this ModelServing does not control;
        # a name whose Pod was deleted a moment ago is waited for, as a terminating one is.
        self.pod_names = self.podset.raw.keys() | recently_gone
        self.services: dict[str, Mapping[str, Any]] = {}
        self.service_groups: dict[str, str | None] = {}
        """The ServingGroup each Service's label names, by Service name."""
        self.group_services: dict[str, list[str]] = {}
        """Service names by the ServingGroup their label names (one scan, not one per group)."""
        for name, obj, group in _owned("Service", uid, services):
            self.services[name] = obj
            self.service_groups[name] = group
            self.group_services.setdefault(str(group), []).append(name)
        self.pod_groups = {name: obj for name, obj, _ in _owned("PodGroup", uid, pod_groups)}
        self.pod_group_names = set(self.pod_groups)
        self.out = SyncPlan(revision=self.update_revision)
        self.deleted_groups: set[int] = set()
        self.deleted_pods: set[str] = set()
        self.replicas = ms.spec.replicas
        strategy = ms.spec.rollout_strategy
        self.role_rolling = strategy is not None and strategy.type == "RoleRollingUpdate"
        config = strategy.rolling_update_configuration if strategy else None
        self.max_unavailable_raw = config.max_unavailable if config else 1
        self.partition = _scaled(
            config.partition if config else None, self.replicas, 0, round_up=True
        )
        self.partition_given = config is not None and config.partition is not None
        self.previous = ms.status.current_revision if ms.status else None
        self._plans: dict[tuple[int, str], GroupPlan | None] = {}
        self._names: dict[tuple[int, str], GroupNames | None] = {}
        self._layouts: dict[int, dict[int, GroupNames]] = {}
        """The kept layouts of each ModelServing (``ms_at``'s, by identity) this pass uses."""
        self._protected: dict[tuple[int, str], set[int]] = {}
        self._ready: dict[int, bool] = {}
        self._at: dict[str, ModelServing | None] = {}
        self._hashes_at: dict[str, dict[str, str]] = {}
        self.cause = "scale"

    # --- helpers ---------------------------------------------------------------------------

    def _on_lost_nodes(self, lost_nodes: Mapping[str, str]) -> None:
        """A Pod on a Node that is not Ready is not ready; one on a deleted Node has failed.
        Their ServingGroups are made anew for this pass with the Pods so adjusted."""
        touched: set[int] = set()
        for index, group in self.groups.items():
            for pod in group.pods:
                state = lost_nodes.get(pod.node)
                if state is not None:
                    self.lost[pod.name] = state
                    touched.add(index)
        for index in touched:
            pods = [self._on_lost_node(p, lost_nodes) for p in self.groups[index].pods]
            self.groups[index] = Group(index, pods)

    def _on_lost_node(self, pod: ObservedPod, lost_nodes: Mapping[str, str]) -> ObservedPod:
        state = lost_nodes.get(pod.node)
        if state is None:
            return pod
        gone = state == NODE_DELETED
        return replace(
            pod, ready=False, running=pod.running and not gone, failed=pod.failed or gone
        )

    def ms_at(self, rev: str) -> ModelServing | None:
        """The ModelServing as it was at ``rev`` (from the revision history), when known."""
        if rev == self.update_revision:
            return self.ms
        if rev not in self._at:
            self._at[rev] = self._from_history(rev)
        return self._at[rev]

    def _from_history(self, rev: str) -> ModelServing | None:
        roles = self.history.get(rev)
        if roles is None:
            return None
        try:
            old = [Role.model_validate(r) for r in roles]
        except ValueError:
            return None
        template = self.ms.spec.template.model_copy(update={"roles": old})
        spec = self.ms.spec.model_copy(update={"template": template})
        return self.ms.model_copy(update={"spec": spec})

    def plan_for(self, index: int, rev: str) -> GroupPlan | None:
        key = (index, rev)
        if key not in self._plans:
            ms = self.ms_at(rev)
            if ms is None:
                self._plans[key] = None
            else:
                if rev not in self._hashes_at:  # once per revision, not per ServingGroup
                    same = rev == self.update_revision
                    self._hashes_at[rev] = self.hashes if same else role_template_hashes(ms)
                hashes = self._hashes_at[rev]
                # without its PodGroup: a pass makes one only when missing (missing_pod_group)
                self._plans[key] = plan_group(
                    ms,
                    index,
                    revision=rev,
                    gang=self.gang,
                    template_hashes=hashes,
                    pod_group=False,
                )
        return self._plans[key]

    def names_for(self, index: int, rev: str) -> GroupNames | None:
        """The names ``plan_for(index, rev)`` would describe, without building the plan."""
        key = (index, rev)
        if key not in self._names:
            ms = self.ms_at(rev)
            self._names[key] = None if ms is None else self._layout(ms, index)
        return self._names[key]

    def _layout(self, ms: ModelServing, index: int) -> GroupNames:
        """``group_names(ms, index)``, remembered with the Pods from pass to pass: the names
        depend only on the ModelServing's name and its roles' names and sizes."""
        layouts = self._layouts.get(id(ms))
        if layouts is None:
            shape = tuple(
                (r.name, r.replicas, r.worker_replicas, r.worker_template is not None)
                for r in ms.spec.template.roles
            )
            layouts = self._layouts[id(ms)] = self.podset.layouts(shape)
        found = layouts.get(index)
        if found is None:
            found = layouts[index] = group_names(ms, index)
        return found

    def role_partition(self, role: Role) -> int:
        """A role's partition (RoleRollingUpdate only; a percent of its replicas, rounded up)."""
        if not self.role_rolling or role.partition is None:
            return 0
        return _scaled(role.partition, role.replicas, 0, round_up=True)

    def protected_ordinals(self, group: Group, role: Role) -> set[int]:
        """The replicas of ``role`` in ``group`` that its partition keeps from the update: the
        first N existing ones in ascending ordinal order, and the missing ordinals below N."""
        partition = self.role_partition(role)
        if partition <= 0:
            return set()
        key = (group.index, role.name)  # once per pass: asked for every replica of the role
        if key not in self._protected:
            existing = sorted({p.role_index for p in group.pods if p.role == role.name})
            self._protected[key] = set(existing[:partition]) | set(
                range(min(partition, role.replicas))
            )
        return self._protected[key]

    def keep_protected(self, plan: GroupPlan, group: Group) -> tuple[GroupPlan, set[str]]:
        """RoleRollingUpdate: ``plan`` (at the update revision) with each partition-protected
        role replica planned at its own revision instead: that of its Pods, or for a missing one
        the current revision. Returns the plan and the role ids it now describes at an older
        revision (those whose older roles are not known are left out of both)."""
        replicas = list(plan.roles)
        kept: set[str] = set()
        roles = {r.name: r for r in self.ms.spec.template.roles}
        for i, replica in enumerate(replicas):
            role = roles.get(replica.role)
            if role is None or replica.index not in self.protected_ordinals(group, role):
                continue
            rid = replica.entry.place.role_id
            pods = [p for p in group.role_replica(rid) if not p.terminating]
            if pods and all(p.template_hash == self.hashes[role.name] for p in pods):
                continue  # already at the new template
            rev = pods[0].revision if pods else self.previous or ""
            old = self.old_replica(plan.index, rev, replica.role, replica.index)
            if old is not None:
                replicas[i] = old
                kept.add(rid)
        if not kept:
            return plan, kept
        return replace(plan, roles=tuple(replicas)), kept

    def old_replica(self, index: int, rev: str, role: str, ordinal: int) -> RoleReplicaPlan | None:
        """Replica ``ordinal`` of ``role`` in ServingGroup ``index`` as revision ``rev`` (an older
        one) describes it, when that revision's roles are known and have it."""
        if not rev or rev == self.update_revision:
            return None
        old = self.plan_for(index, rev)
        if old is None:
            return None
        return next((r for r in old.roles if r.role == role and r.index == ordinal), None)

    def ready(self, group: Group) -> bool:
        """Every Pod its revision describes exists, is not terminating, and is Ready."""
        answer = self._ready.get(group.index)
        if answer is None:
            answer = self._ready[group.index] = self._is_ready(group)
        return answer

    def _is_ready(self, group: Group) -> bool:
        if not group.all_ready:
            return False
        names = self.names_for(group.index, group.revision())
        if names is None:
            return True
        return names.pods <= group.live_names

    def delete_pod(self, pod: ObservedPod) -> None:
        if pod.name not in self.deleted_pods and not pod.terminating:
            self.deleted_pods.add(pod.name)
            force = self.lost.get(pod.name) == NODE_DELETED
            self.out.delete_pods.append(PodRef(pod.name, pod.uid, self.cause, force))

    def delete_service(self, name: str) -> None:
        if name in self.services and name not in self.out.service_causes:
            self.out.delete_services.append(name)
            self.out.service_causes[name] = self.cause

    def delete_group(self, group: Group, why: str | None) -> None:
        self.deleted_groups.add(group.index)
        for pod in group.pods:
            self.delete_pod(pod)
        for svc in self.group_services.get(group_name(self.ms.name, group.index), ()):
            self.delete_service(svc)
        if why:
            self.out.notes.append(why)

    def delete_role_replica(self, group: Group, rid: str, why: str | None) -> None:
        for pod in group.role_replica(rid):
            self.delete_pod(pod)
        self.delete_service(pod_name(group_name(self.ms.name, group.index), rid, 0))
        if why:
            self.out.notes.append(why)

    # --- the steps -------------------------------------------------------------------------

    def recover(self) -> None:
        policy = self.ms.spec.recovery_policy
        if policy == "None":
            return
        grace = self.ms.spec.template.restart_grace_period_seconds
        self.cause = "recovery"
        for group in self.groups.values():
            for pod in group.failed:
                if pod.name in self.deleted_pods:
                    continue
                if self.lost.get(pod.name) == NODE_DELETED:
                    # gone for good: no restart to wait for
                    why = f"Pod {pod.name}'s Node {pod.node} was deleted"
                else:
                    since = pod.failed_at or self.seen_failed.get(pod.uid, self.now)
                    wait = since + grace - self.now
                    if wait > 0:
                        self.out.requeue(wait)
                        continue
                    why = f"Pod {pod.name} failed"
                if policy == "ServingGroupRecreate":
                    self.delete_group(group, f"{why}: recreating ServingGroup {pod.group}")
                    break
                self.delete_role_replica(
                    group, pod.role_id, f"{why}: recreating role replica {pod.role_id}"
                )

    def release_lost(self) -> None:
        """Pods on a deleted Node that recovery left (recovery policy None, or terminating
        already) are deleted at once all the same: their Node is gone, so they can never run or
        end, and their names are needed again."""
        if NODE_DELETED not in self.lost.values():
            return
        for group in self.groups.values():
            for pod in group.pods:
                if self.lost.get(pod.name) == NODE_DELETED and pod.name not in self.deleted_pods:
                    self.deleted_pods.add(pod.name)
                    self.out.delete_pods.append(PodRef(pod.name, pod.uid, "node", force=True))

    def live_groups(self) -> list[Group]:
        return [
            g
            for g in self.groups.values()
            if g.index not in self.deleted_groups and not g.live_names <= self.deleted_pods
        ]

    def roll_groups(self) -> None:
        live = self.live_groups()
        max_unavailable = max(
            1, _scaled(self.max_unavailable_raw, self.replicas, 1, round_up=False)
        )
        # Kthena's budget (a Deployment's): every ServingGroup there is, less the ones that must
        # stay available, less the new ones not ready yet; outdated ones that are not ready go
        # first, then the highest ordinals.
        after = [g for g in live if g.index >= self.partition]
        new_unavailable = sum(
            1 for g in after if g.revision() == self.update_revision and not self.ready(g)
        )
        budget = len(live) - (self.replicas - max_unavailable) - new_unavailable
        outdated = [g for g in after if g.revision() != self.update_revision]
        outdated.sort(key=lambda g: (self.ready(g), -g.index))
        self.cause = "update"
        for group in outdated:
            if budget <= 0:
                self.out.requeue(BUSY_RETRY_SECONDS * 5)
                break
            budget -= 1
            self.delete_group(
                group,
                f"rolling update: recreating ServingGroup {group_name(self.ms.name, group.index)}"
                f" at revision {self.update_revision}",
            )

    def roll_roles(self) -> None:
        """RoleRollingUpdate: per ServingGroup and role, at most the role's ``maxUnavailable``
        (default 1) role replicas are unavailable while outdated ones are recreated."""
        for group in self.live_groups():
            if group.index < self.partition:
                continue
            for role in self.ms.spec.template.roles:
                units: dict[str, list[ObservedPod]] = {}
                for pod in group.live:
                    if pod.role == role.name and pod.name not in self.deleted_pods:
                        units.setdefault(pod.role_id, []).append(pod)
                limit = max(1, _scaled(role.max_unavailable, role.replicas, 1, round_up=False))
                expected = 1 + role.worker_replicas

                def ready(pods: list[ObservedPod], expected: int = expected) -> bool:
                    return len(pods) >= expected and all(p.ready for p in pods)

                current = self.hashes[role.name]
                # Kthena's per-role budget: the role replicas there are, less the ones that must
                # stay available, less the new ones not ready yet.
                new_unavailable = sum(
                    1
                    for pods in units.values()
                    if all(p.template_hash == current for p in pods) and not ready(pods)
                )
                budget = len(units) - max(role.replicas - limit, 0) - new_unavailable
                protected = self.protected_ordinals(group, role)
                outdated = [
                    (rid, pods)
                    for rid, pods in units.items()
                    if pods[0].role_index not in protected
                    and any(p.template_hash != current for p in pods)
                ]
                outdated.sort(key=lambda c: (ready(c[1]), -c[1][0].role_index))
                for rid, _pods in outdated:
                    if budget <= 0:
                        self.out.requeue(BUSY_RETRY_SECONDS * 5)
                        break
                    budget -= 1
                    self.cause = "update"
                    self.delete_role_replica(
                        group,
                        rid,
                        f"rolling update: recreating role replica {rid} of ServingGroup "
                        f"{group_name(self.ms.name, group.index)}",
                    )

    def scale(self) -> list[int]:
        """Delete surplus ServingGroups; return the ordinals of ServingGroups to create."""
        self.cause = "scale"
        live = self.live_groups()
        surplus = len(live) - self.replicas
        if surplus > 0:
            # As Kthena: those the partition protects last; then not ready first, the lowest
            # summed deletion cost, the highest ordinal.
            ranked = sorted(
                live,
                key=lambda g: (
                    g.index < self.partition,
                    self.ready(g),
                    sum(p.deletion_cost for p in g.live),
                    -g.index,
                ),
            )
            for group in ranked[:surplus]:
                self.delete_group(group, None)
            return []
        taken = {g.index for g in live}
        fresh: list[int] = []
        index = 0
        while len(fresh) < -surplus:
            if index not in taken:
                fresh.append(index)
            index += 1
        return fresh

    def create_missing(self, plan: GroupPlan, skip: set[str]) -> None:
        """Create what ``plan`` describes and does not exist (skipping names in ``skip``)."""
        work = GroupWork(plan.name, plan.index, self.missing_pod_group(plan.name))
        busy = False
        for replica in plan.roles:
            for desired in replica.pods():
                if desired.name in skip:
                    continue
                if desired.name in self.pod_names:
                    busy = busy or desired.name in self.deleted_pods or self._terminating(desired)
                else:
                    work.steps.append(desired)
                if desired.place.is_entry and replica.service is not None:
                    name = replica.service["metadata"]["name"]
                    if name not in self.services:
                        work.steps.append(replica.service)
                    elif name in self.out.service_causes:
                        busy = True
        if busy:
            self.out.requeue(BUSY_RETRY_SECONDS)
        if work.steps or work.pod_group is not None:
            self.out.creates.append(work)

    def missing_pod_group(self, name: str) -> dict[str, Any] | None:
        """The PodGroup to create for ServingGroup ``name``, if it needs one and has none.
        Made from the current ModelServing whatever the ServingGroup's revision (as Kthena)."""
        if not self.pod_groups_wanted or name in self.pod_group_names:
            return None
        return gang_.pod_group(self.ms, name, self.gang)

    def pod_group_updates(self, names: Iterable[str]) -> None:
        """Bring the existing PodGroups of these ServingGroups to Kthena's spec."""
        if not self.pod_groups_wanted:
            return
        uid = self.ms.metadata.uid or ""
        desired = _same_spec(uid, gang_.pod_group_spec(self.ms, self.gang))
        for name in sorted(names):
            existing = self.pod_groups.get(name)
            if existing is None or (existing.get("metadata") or {}).get("deletionTimestamp"):
                continue
            patch = _PATCHES((uid, name), existing, desired, self.gang)
            if patch is not None:
                self.out.update_pod_groups[name] = patch

    def fresh_plan(self, index: int, current: str | None) -> GroupPlan:
        """A new ServingGroup: below the partition it is made at the current revision (as a
        StatefulSet does) when that revision's roles are known; otherwise at the new one."""
        if index < self.partition and current and current != self.update_revision:
            old = self.plan_for(index, current)
            if old is not None:
                return old
        plan = self.plan_for(index, self.update_revision)
        assert plan is not None
        return plan  # a role's partition applies inside existing ServingGroups only (Kthena)

    def _terminating(self, desired: DesiredPod) -> bool:
        return desired.name in self.terminating_names

    def membership(self, group: Group) -> None:
        """Inside a kept ServingGroup: create what is missing, delete what no longer belongs."""
        self.cause = "membership"
        if self.role_rolling:
            rev = self.update_revision
            current = self.hashes
            stale = {
                p.role_id
                for p in group.live
                if p.role in current and p.template_hash != current[p.role]
            }
        else:
            rev = group.revision()
            stale = set()
            if rev and self.complete(group, rev):
                return
        plan = self.plan_for(group.index, rev) if rev else None
        if plan is not None and self.role_rolling:
            plan, kept = self.keep_protected(plan, group)
            stale -= kept
        if plan is None:
            # Outdated with no history: left alone until the rolling update takes it, but it
            # gets its PodGroup.
            name = group_name(self.ms.name, group.index)
            missing = self.missing_pod_group(name)
            if missing is not None:
                self.out.creates.append(GroupWork(name, group.index, missing))
            return
        wanted = {d.name for d in plan.pods()}
        for pod in group.live:
            if pod.name not in wanted and pod.role_id not in stale:
                self.delete_pod(pod)
        # A stale role replica is left whole to the rolling update (or, protected by the
        # partition with its revision unknown, alone): nothing of the new template is added.
        skip = {p.name for p in group.pods if p.role_id in stale}
        skip |= {d.name for d in plan.pods() if d.place.role_id in stale}
        self.create_missing(plan, skip)
        wanted_services = {r.service["metadata"]["name"] for r in plan.roles if r.service}
        for name in self.group_services.get(plan.name, ()):
            if name not in wanted_services:
                rid = (self.services[name]["metadata"].get("labels") or {}).get(
                    labels.ROLE_ID_LABEL
                )
                if rid not in stale:
                    self.delete_service(name)

    def complete(self, group: Group, rev: str) -> bool:
        """Whether ``membership`` would do nothing for ``group`` at ``rev`` (its live Pods and
        its Services are exactly those the revision describes, none of them being deleted, and
        it has its PodGroup): decided from names, without planning the ServingGroup."""
        names = self.names_for(group.index, rev)
        if names is None:
            return False
        live = group.live_names
        if live != names.pods:
            return False
        if not live.isdisjoint(self.deleted_pods) or not live.isdisjoint(self.terminating_names):
            return False
        name = names.name or group_name(self.ms.name, group.index)
        services = self.group_services.get(name, ())
        if len(services) != len(names.services) or not names.services.issuperset(services):
            return False  # (a ServingGroup's Services are listed once each)
        causes = self.out.service_causes
        if causes and any(n in causes for n in services):
            return False
        return self.missing_pod_group(name) is None

    def orphans(self, names: set[str]) -> None:
        """Services and PodGroups of ServingGroups that are neither kept nor being created
        (``names``: those that are)."""
        self.cause = "scale"
        for name, group in self.service_groups.items():
            if group not in names:
                self.delete_service(name)
        for name in sorted(self.pod_group_names - names):
            self.out.delete_pod_groups.append(name)

    def ready_hooks(self) -> None:
        for group in self.groups.values():
            for pod in group.awaiting_ready_hooks:
                if pod.name in self.deleted_pods:
                    continue
                self.out.ready_hooks.append(
                    DesiredPod(
                        None,
                        PodPlace(pod.group, pod.role, pod.role_id, pod.pod_index == 0),
                        pod.role_index,
                        pod.pod_index,
                        name=pod.name,
                        # a copy (the raw Pod may be the controller's cache's), made only for
                        # a ModelServing with OnPodReady hooks
                        build=functools.partial(_copied, pod.raw),
                    )
                )

    def status(self, previous_current: str | None) -> SyncStatus:
        live = [g for g in self.groups.values() if g.live]
        hashes = tuple(sorted(self.hashes.items()))

        def updated(g: Group) -> bool:
            if self.role_rolling:
                key = ("updated", hashes)
                answer = g.memo.get(key)
                if answer is None:
                    answer = g.memo[key] = all(
                        self.hashes.get(p.role) == p.template_hash for p in g.live
                    )
                return bool(answer)
            return g.revision() == self.update_revision

        n_updated = sum(1 for g in live if updated(g))
        available = sum(1 for g in live if self.ready(g))
        updating = n_updated < len(live)
        if not updating:
            current = self.update_revision
        else:
            older = Counter(g.revision() for g in live if not updated(g) and g.revision())
            if previous_current and previous_current in older:
                current = previous_current
            elif older:
                current = older.most_common(1)[0][0]
            else:
                current = previous_current or self.update_revision
        # Kthena's count: the ServingGroups not at the update revision, or all of them once the
        # whole ModelServing is updated and available (unless a partition is set).
        n_current = len(live) - n_updated
        if not self.partition_given and n_updated == available == len(live) == self.replicas:
            n_current = n_updated
        is_available = not updating and available >= self.replicas and len(live) == self.replicas
        return SyncStatus(
            replicas=len(live),
            current_replicas=n_current,
            updated_replicas=n_updated,
            available_replicas=available,
            current_revision=current,
            update_revision=self.update_revision,
            available=is_available,
            progressing=not is_available and not updating,
            updating=updating,
        )


_OWNED: dict[tuple[str, str], dict[str, tuple[Mapping[str, Any], bool, str | None]]] = {}
"""By kind and ModelServing UID, then by name: an object, whether that ModelServing controls
it, and the ServingGroup its label names (see ``kept``: the same object, the same answer)."""


def _owned(
    kind: str, uid: str, objects: Iterable[Mapping[str, Any]]
) -> list[tuple[str, Mapping[str, Any], str | None]]:
    """The name, object and ServingGroup label of each of ``objects`` (Services or PodGroups)
    the ModelServing with ``uid`` controls (all of them when ``uid`` is empty)."""
    table = _OWNED.get((kind, uid))
    if table is None:
        if len(_OWNED) >= KEPT_MAX // 16:
            _OWNED.clear()
        table = _OWNED[(kind, uid)] = {}
    found: list[tuple[str, Mapping[str, Any], str | None]] = []
    count = 0
    for obj in objects:
        count += 1
        name = str(obj["metadata"]["name"])
        seen = table.get(name)
        if seen is None or seen[0] is not obj:
            meta = obj.get("metadata") or {}
            group = (meta.get("labels") or {}).get(labels.GROUP_NAME_LABEL)
            seen = table[name] = (
                obj,
                not uid or owned_by(obj, uid),
                None if group is None else str(group),
            )
        if seen[1]:
            found.append((name, obj, seen[2]))
    if len(table) > 2 * count + 64:  # names gone since: start again
        table.clear()
    return found


_PATCHES = Kept(gang_.patch_to)
"""PodGroup merge patches by (ModelServing UID, name): a pass after one Pod event compares
again only the PodGroups that changed."""
_SPECS: dict[str, dict[str, Any]] = {}
"""The PodGroup spec of each ModelServing's last pass, by UID."""


def _same_spec(uid: str, spec: dict[str, Any]) -> dict[str, Any]:
    """``spec``, or the equal one the last pass of this ModelServing made: the same object, so
    ``_PATCHES`` finds its input unchanged by identity, not by comparing the two once for each
    PodGroup."""
    kept = _SPECS.get(uid)
    if kept == spec:
        return kept
    if len(_SPECS) >= KEPT_MAX:
        _SPECS.clear()
    _SPECS[uid] = spec
    return spec


def _copied(raw: Mapping[str, Any]) -> dict[str, Any]:
    return dict(json_copy(raw))


def sync(
    ms: ModelServing,
    pods: PodSet | Iterable[Mapping[str, Any]],
    services: Iterable[Mapping[str, Any]] = (),
    pod_groups: Iterable[Mapping[str, Any]] = (),
    *,
    now: float,
    gang: bool | gang_.VolcanoApi = False,
    history: Mapping[str, Sequence[Mapping[str, Any]]] | None = None,
    seen_failed: Mapping[str, float] | None = None,
    lost_nodes: Mapping[str, str] | None = None,
    recently_gone: Iterable[str] = (),
    ready_hooks: bool = True,
) -> SyncPlan:
    """Decide one reconcile pass of ``ms`` (see the module docstring).

    ``pods``, ``services`` and ``pod_groups`` are the objects as the API returns them; only those
    the ModelServing controls are considered. ``pods`` may be a ``PodSet`` of this ModelServing
    (its name and UID) kept from pass to pass: then only what changed since its last
    ``refresh`` is observed again. ``history`` maps older revisions to their roles
    (from ControllerRevisions), so a ServingGroup kept at an old revision by the partition can be
    repaired. ``seen_failed`` gives, by Pod UID, when the controller first saw a failed Pod whose
    status carries no time, for the grace period. ``lost_nodes`` gives the state of Nodes that
    are not Ready or were deleted (``NODE_NOT_READY``, ``NODE_DELETED``): their Pods do not
    count as ready, and a Pod on a deleted Node is recovered at once and deleted with no grace
    period. ``recently_gone`` names Pods deleted a moment ago: they are made again a little
    later, as if still terminating. ``ready_hooks=False`` (no plugin has an OnPodReady hook)
    leaves ``SyncPlan.ready_hooks`` empty without looking at every Ready Pod.
    """
    lost = lost_nodes or {}
    gone = set(recently_gone)
    s = _Sync(
        ms, pods, services, pod_groups, now, gang, history or {}, seen_failed or {}, lost, gone
    )
    previous = ms.status.current_revision if ms.status else None
    s.out.status = s.status(previous)
    s.recover()
    s.release_lost()
    # Kthena's order: the ServingGroups' number first, then the rolling update over the rest
    # (so a scale-down picks among the groups as they are, before any is replaced); then the
    # ordinals to make, the rolled ones among them.
    s.scale()
    if s.role_rolling:
        s.roll_roles()
    else:
        s.roll_groups()
    fresh = s.scale()
    kept = s.live_groups()
    for group in kept:
        s.membership(group)
    for index in fresh:
        s.create_missing(s.fresh_plan(index, previous), set())
    names = [group_name(ms.name, i) for i in sorted({g.index for g in kept} | set(fresh))]
    s.orphans(set(names))
    s.out.groups = names
    s.pod_group_updates(names)
    if ready_hooks:
        s.ready_hooks()
    return s.out
