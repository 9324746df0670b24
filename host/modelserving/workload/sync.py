"""Reconciliation decisions: a ModelServing and what exists in, what to create and delete out.

``sync`` is pure. The controller lists the ModelServing's Pods, Services and PodGroups, calls it,
and carries out the ``SyncPlan``: first the deletions, then the PodGroup updates, then the
creations group by group (PodGroup, then per role replica the entry Pod and the workers), and
the Services of the groups created last, as Kthena's pass does. It decides, as Kthena does:

- recovery: a failed Pod (phase Failed, or a container restarted and the Pod not Running and
  Ready) still failed after ``restartGracePeriodSeconds`` is handled by the recovery policy:
  ServingGroupRecreate deletes its whole ServingGroup, RoleRecreate its role replica (Pods and
  Service), None the Pod alone (as Kthena deletes it whatever the policy); a Pod someone
  else deleted (``deleted``) is handled the same way at once, as Kthena's ``handleDeletedPod``;
  a ServingGroup or role replica being deleted is made again once every Pod of it is gone;
- rolling update: outdated ServingGroups (or role replicas, for RoleRollingUpdate) at or above
  the partition are deleted, at most ``maxUnavailable`` unavailable at a time, and recreated at
  the new revision. ServingGroupRollingUpdate's partition protects the first N ServingGroups;
  RoleRollingUpdate's, set per role, the first N existing replicas of that role (by ordinal)
  in every ServingGroup; a protected replica that is repaired or made anew is made at its own
  (older) revision when that revision's roles are known, as a StatefulSet's partition does;
- scale: missing ServingGroups are created at the lowest free ordinals; surplus ones are deleted,
  not-ready first, then the lowest summed pod-deletion-cost, then the highest ordinal;
- membership: inside a kept ServingGroup, missing Pods and Services are created and those its
  revision no longer describes are deleted; a role scaled down keeps the replicas Kthena's
  scaleDownRoles keeps (at their ordinals), a role scaled up fills the lowest free ordinals;
- PodGroups (Volcano's CRD present, scheduler ``volcano``): every kept or new ServingGroup has
  one, made from the current ModelServing (``modelserving.workload.gang``) and brought back to it
  when it differs; those of deleted ServingGroups are deleted;
- OnPodReady: Ready Pods whose hooks have not run yet.
"""

from __future__ import annotations

import bisect
import functools
import itertools
from collections.abc import Callable, Hashable, Iterable, Mapping, Sequence
from collections.abc import Set as AbstractSet
from dataclasses import dataclass, field, replace
from typing import Any, TypeVar, cast

from modelserving.api import labels
from modelserving.api.jsondata import json_copy
from modelserving.api.modelserving import ModelServing, Role
from modelserving.api.place import PodPlace
from modelserving.api.validation import scaled
from modelserving.workload import gang as gang_
from modelserving.workload.groupindex import GroupIndex, Verdict
from modelserving.workload.kept import KEPT_MAX, Kept
from modelserving.workload.names import group_name, pod_name, role_id
from modelserving.workload.observed import (
    NODE_DELETED,
    ObservedPod,
    observe_pod,
    owned_by,
)
from modelserving.workload.owned import OwnedSet, owned_set
from modelserving.workload.plan import (
    DesiredPod,
    GroupNames,
    GroupPlan,
    RoleReplicaPlan,
    group_names,
    plan_group,
    role_ordinals,
    role_template_hashes,
)
from modelserving.workload.podset import Group, PodSet
from modelserving.workload.revision import revision as revision_of

T = TypeVar("T")

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
    unseen_deletions: list[str] = field(default_factory=list)
    """The UIDs of Pods given as ``deleted`` that the pass still read among the live ones (the
    watch reported them gone after the Pods were read): not acted on, they are for a later pass."""
    deleting: frozenset[str] = frozenset()
    """The ServingGroups (by name) and role replicas (``group/role-id``) the controller deleted
    whole, this pass or before, that still have Pods: give them to the next pass as
    ``deleting``. Each is made again only once every Pod of it is gone, as Kthena waits for a
    ServingGroup or role it is deleting."""

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
        services: OwnedSet | Iterable[Mapping[str, Any]],
        pod_groups: OwnedSet | Iterable[Mapping[str, Any]],
        now: float,
        gang: bool | gang_.VolcanoApi,
        history: Mapping[str, Sequence[Mapping[str, Any]]],
        seen_failed: Mapping[str, float],
        lost_nodes: Mapping[str, str],
        recently_gone: set[str],
        every_group: bool = False,
        deleted: Sequence[Mapping[str, Any]] = (),
        deleting: AbstractSet[str] = frozenset(),
    ) -> None:
        self.ms = ms
        self.deleted = deleted
        self.deleting = set(deleting)
        """The ServingGroups and role replicas being deleted whole (``SyncPlan.deleting``),
        those this pass deletes added."""
        self.every_group = every_group
        """Visit every ServingGroup in every step, not only those the index says may need it
        (slower: the reference the index's shortcuts are tested against)."""
        self.now = now
        self.gang = gang_.as_api(gang)
        self.pod_groups_wanted = self.gang.pod_groups and gang_.gang_wanted(ms)
        self.history = history
        self.seen_failed = seen_failed
        self.update_revision = revision_of(ms)
        self.hashes = role_template_hashes(ms)
        self._hashes_key = tuple(sorted(self.hashes.items()))
        uid = ms.metadata.uid or ""
        if not isinstance(pods, PodSet):
            self.podset = PodSet.of(ms.name, uid, pods)
        elif pods.uid == uid and pods.ms_name == ms.name:
            self.podset = pods
        else:  # kept for another ModelServing of the name: read it afresh
            self.podset = PodSet.of(ms.name, uid, pods.raw.values())
        self.recently_gone = recently_gone
        self.terminating_names = self.podset.terminating | recently_gone
        self.lost: dict[str, str] = {}
        """Pods on a lost Node by name: the Node's state (NODE_DELETED or NODE_NOT_READY)."""
        self.groups: Mapping[int, Group] = self.podset.groups
        if lost_nodes:
            self.groups = self._on_lost_nodes(lost_nodes)
        self.owned_services = owned_set("Service", uid, services)
        self.services = self.owned_services.objects
        self.service_groups = self.owned_services.groups
        """The ServingGroup each Service's label names, by Service name."""
        self.group_services = self.owned_services.by_group
        """Service names by the ServingGroup their label names (one scan, not one per group)."""
        self.owned_pod_groups = owned_set("PodGroup", uid, pod_groups)
        self.pod_groups = self.owned_pod_groups.objects
        self.pod_group_names = self.pod_groups.keys()
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
        self._partitions = tuple(self.role_partition(r) for r in ms.spec.template.roles)
        self._ordinals: dict[tuple[int, int], dict[str, tuple[int, ...]] | None] = {}
        """Each ServingGroup's role ordinals (``role_ordinals``) by (index, id of the
        ModelServing planned), for this pass."""
        self._plans: dict[tuple[int, str], GroupPlan | None] = {}
        self._names: dict[tuple[int, str], GroupNames | None] = {}
        self._layouts: dict[int, dict[int, GroupNames]] = {}
        """The kept layouts of each ModelServing (``ms_at``'s, by identity) this pass uses."""
        self._protected: dict[tuple[int, str], set[int]] = {}
        self._ready: dict[int, bool] = {}
        self._at: dict[str, ModelServing | None] = {}
        self._hashes_at: dict[str, dict[str, str]] = {}
        self.cause = "scale"
        self.touched: set[int] = set()
        """The ServingGroups this pass deleted something of."""
        self.index = self._index()

    # --- helpers ---------------------------------------------------------------------------

    def _on_lost_nodes(self, lost_nodes: Mapping[str, str]) -> dict[int, Group]:
        """The ServingGroups as this pass sees them: a Pod on a Node that is not Ready is not
        ready; one on a deleted Node has failed. Their ServingGroups are made anew for this
        pass with the Pods so adjusted."""
        groups = dict(self.groups)
        touched: set[int] = set()
        for index, group in groups.items():
            for pod in group.pods:
                state = lost_nodes.get(pod.node)
                if state is not None:
                    self.lost[pod.name] = state
                    touched.add(index)
        for index in touched:
            pods = [self._on_lost_node(p, lost_nodes) for p in groups[index].pods]
            groups[index] = Group(index, pods)
        return groups

    def _on_lost_node(self, pod: ObservedPod, lost_nodes: Mapping[str, str]) -> ObservedPod:
        state = lost_nodes.get(pod.node)
        if state is None:
            return pod
        gone = state == NODE_DELETED
        return replace(
            pod, ready=False, running=pod.running and not gone, failed=pod.failed or gone
        )

    def _context(self) -> Hashable:
        """Everything a ``Verdict`` reads beyond the ServingGroup's Pods, Services and PodGroup.
        Of the revision history only the revisions: a revision's roles never change (it is
        their hash, and the controller never rewrites a ControllerRevision)."""
        return (
            self.ms.name,
            self.update_revision,
            self._hashes_key,
            _roles_shape(self.ms),
            self.role_rolling,
            self.partition,
            self.pod_groups_wanted,
            frozenset(self.history),
            self._partitions,
            # what a missing replica the role partition protects is made at (``updated``)
            self.previous if any(self._partitions) else None,
        )

    def _index(self) -> GroupIndex:
        """The verdicts of every ServingGroup: the kept index brought up to date with what
        changed since, or (a new context, no index kept, or lost Nodes, which change Pods for
        this pass only) a new one."""
        context = self._context()
        services, pod_groups = self.owned_services, self.owned_pod_groups
        kept: GroupIndex | None = None if self.lost else self.podset.index
        dirty: set[int] = set()
        if kept is not None and kept.context == context:
            changed = services.changes_since(kept.services_version)
            changed_pgs = pod_groups.changes_since(kept.pod_groups_version)
            if changed is None or changed_pgs is None:
                kept = None
            else:
                dirty = self.podset.take_changed()
                for key in changed | changed_pgs:
                    index = _group_index(self.ms.name, key)
                    if index is not None:
                        dirty.add(index)
        else:
            kept = None
        if kept is None:
            kept = GroupIndex(context)
            if not self.lost:
                self.podset.take_changed()
            dirty = set(self.groups)
        elif not self.lost:
            # changed in place below: a verdict that raises leaves no half-updated index kept
            # (the next pass builds one afresh)
            self.podset.index = None
        for index in dirty:
            group = self.groups.get(index)
            if group is None:
                kept.remove(index)
            else:
                kept.put(index, group, self._verdict(group))
        kept.services_version = services.version
        kept.pod_groups_version = pod_groups.version
        if not self.lost:
            self.podset.index = kept
        return kept

    def _verdict(self, group: Group) -> Verdict:
        rev = group.revision()
        live = bool(group.live)
        ready = self._is_ready(group)
        updated = self.updated(group)
        if not updated and rev == self.update_revision:
            # RoleRollingUpdate: a replica the partition protects is missing and is made again
            # at an older revision; Kthena's ServingGroup keeps its old revision meanwhile
            rev = ""
        if self.role_rolling:
            current = self.hashes
            stale = any(
                p.role in current and p.template_hash != current[p.role] for p in group.live
            )
            complete = not stale and self._settled(group, self.update_revision)
        else:
            repair = self.repair_revision(group, rev)
            complete = bool(repair) and self._settled(group, repair)
        after = live and group.index >= self.partition
        return Verdict(
            live=live,
            revision=rev,
            updated=updated,
            ready=ready,
            complete=complete,
            failed=bool(group.failed),
            awaiting=bool(group.awaiting_ready_hooks),
            new_unready=after and rev == self.update_revision and not ready,
            outdated=after and rev != self.update_revision,
        )

    def repair_revision(self, group: Group, rev: str) -> str:
        """ServingGroupRollingUpdate: the revision a kept ServingGroup at revision ``rev`` ("":
        its Pods disagree) has its missing Pods made at. Its own when the partition protects
        it; else the update revision, whatever revision its other Pods have, as Kthena's
        ``syncRoleReplicas`` makes a missing Pod or role replica of a ServingGroup the
        partition does not protect from the current template (the ServingGroup then has Pods
        of two revisions, and the rolling update replaces it in its turn)."""
        if rev == self.update_revision or group.index < self.partition:
            return rev
        return self.update_revision

    def updated(self, group: Group) -> bool:
        """At the update revision (RoleRollingUpdate: each live Pod at its role's template,
        and no replica the partition protects missing that is made again at an older
        revision: Kthena makes it again, from the current revision, before it looks whether
        the ServingGroup still has outdated replicas, so its revision stays the old one)."""
        if self.role_rolling:
            key = ("updated", self._hashes_key)
            answer = group.memo.get(key)
            if answer is None:
                answer = group.memo[key] = all(
                    self.hashes.get(p.role) == p.template_hash for p in group.live
                )
            return bool(answer) and not self._awaits_older_replica(group)
        return group.revision() == self.update_revision

    def _awaits_older_replica(self, group: Group) -> bool:
        """A replica the role partition protects has no live Pod, and ``keep_protected`` plans
        it at the current revision, an older one than the update revision."""
        rev = self.previous
        if not rev or rev == self.update_revision or not any(self._partitions):
            return False
        wanted = self.role_ordinals(group.index, self.ms)
        for role in self.ms.spec.template.roles:
            if self.role_partition(role) <= 0:
                continue
            ordinals = role_ordinals(role, wanted)
            for ordinal in sorted(self.protected_ordinals(group, role)):
                if ordinal not in ordinals:
                    continue
                pods = group.role_replica(role_id(role.name, ordinal))
                if any(not p.terminating for p in pods):
                    continue
                if self.old_replica(group.index, rev, role.name, ordinal) is not None:
                    return True
        return False

    def dead(self) -> set[int]:
        """The live ServingGroups this pass has deleted whole so far (every live Pod)."""
        index = self.index
        return {
            i
            for i in self.touched | self.deleted_groups
            if i in index.live
            and (i in self.deleted_groups or self.groups[i].live_names <= self.deleted_pods)
        }

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
                    ordinals=self.role_ordinals(index, ms),
                )
        return self._plans[key]

    def names_for(self, index: int, rev: str) -> GroupNames | None:
        """The names ``plan_for(index, rev)`` would describe, without building the plan."""
        key = (index, rev)
        if key not in self._names:
            ms = self.ms_at(rev)
            if ms is None:
                self._names[key] = None
            else:
                ordinals = self.role_ordinals(index, ms)
                self._names[key] = (
                    self._layout(ms, index)
                    if ordinals is None
                    else group_names(ms, index, ordinals)
                )
        return self._names[key]

    def role_ordinals(self, index: int, ms: ModelServing) -> dict[str, tuple[int, ...]] | None:
        """The ordinals of each role's replicas in ServingGroup ``index`` as ``ms`` plans it,
        as Kthena keeps them: None while they are ``0 .. replicas-1`` (no live replica of a
        role at an ordinal of ``replicas`` or more). Otherwise, per role: with more live
        replicas than ``replicas``, those Kthena's ``scaleDownRoles`` keeps (it deletes the
        replicas the role's partition does not protect first; among them those not ready,
        then the lowest summed pod-deletion-cost, then the highest ordinal); with fewer, the
        live ones and the lowest free ordinals below ``replicas`` (``scaleUpRoles``)."""
        key = (index, id(ms))
        if key in self._ordinals:
            return self._ordinals[key]
        group = self.groups.get(index)
        found: dict[str, tuple[int, ...]] | None = None
        if group is not None:
            have: dict[str, dict[int, list[ObservedPod]]] = {}
            for pod in group.live:
                have.setdefault(pod.role, {}).setdefault(pod.role_index, []).append(pod)
            roles = ms.spec.template.roles
            if any(o >= r.replicas for r in roles for o in have.get(r.name, {})):
                found = {r.name: self._kept_ordinals(group, r, have.get(r.name, {})) for r in roles}
        self._ordinals[key] = found
        return found

    def _kept_ordinals(
        self, group: Group, role: Role, have: dict[int, list[ObservedPod]]
    ) -> tuple[int, ...]:
        """``role_ordinals`` of one role whose live replicas are ``have`` (by ordinal)."""
        surplus = len(have) - role.replicas
        if surplus <= 0:
            free = (o for o in range(role.replicas) if o not in have)
            return tuple(sorted([*have, *itertools.islice(free, -surplus)]))
        protected = self.protected_ordinals(group, role)
        expected = 1 + role.worker_replicas

        def rank(ordinal: int) -> tuple[bool, bool, int, int]:
            pods = have[ordinal]
            ready = len(pods) >= expected and all(p.ready for p in pods)
            return (ordinal in protected, ready, sum(p.deletion_cost for p in pods), -ordinal)

        doomed = set(sorted(have, key=rank)[:surplus])
        return tuple(o for o in sorted(have) if o not in doomed)

    def _layout(self, ms: ModelServing, index: int) -> GroupNames:
        """``group_names(ms, index)``, remembered with the Pods from pass to pass: the names
        depend only on the ModelServing's name and its roles' names and sizes."""
        layouts = self._layouts.get(id(ms))
        if layouts is None:
            shape = _roles_shape(ms)
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
        """Every Pod its revision describes (RoleRollingUpdate: the current spec) exists, is
        not terminating, and is Ready."""
        if self.index.seen.get(group.index) is group:
            return self.index.verdicts[group.index].ready
        answer = self._ready.get(group.index)
        if answer is None:
            answer = self._ready[group.index] = self._is_ready(group)
        return answer

    def _is_ready(self, group: Group) -> bool:
        if not group.all_ready:
            return False
        # RoleRollingUpdate: the replicas the current spec asks for, as membership keeps them
        # (Kthena's checkServingGroupReady counts the current spec's roles), not those of the
        # revision older Pods still carry (replicas taken from its ControllerRevision)
        rev = self.update_revision if self.role_rolling else group.revision()
        names = self.names_for(group.index, rev)
        if names is None:
            return True
        return names.pods <= group.live_names

    def delete_pod(self, pod: ObservedPod) -> None:
        if pod.name not in self.deleted_pods and not pod.terminating:
            self.deleted_pods.add(pod.name)
            self.touched.add(pod.group_index)
            force = self.lost.get(pod.name) == NODE_DELETED
            self.out.delete_pods.append(PodRef(pod.name, pod.uid, self.cause, force))

    def delete_service(self, name: str) -> None:
        if name in self.services and name not in self.out.service_causes:
            self.out.delete_services.append(name)
            self.out.service_causes[name] = self.cause

    def delete_group(self, group: Group, why: str | None) -> None:
        self.deleted_groups.add(group.index)
        self.touched.add(group.index)
        self.deleting.add(group_name(self.ms.name, group.index))
        for pod in group.pods:
            self.delete_pod(pod)
        for svc in self.group_services.get(group_name(self.ms.name, group.index), ()):
            self.delete_service(svc)
        # its PodGroup goes with it and is made again with it, as Kthena's deleteServingGroup
        self.delete_pod_group(group_name(self.ms.name, group.index))
        if why:
            self.out.notes.append(why)

    def delete_pod_group(self, name: str) -> None:
        if name in self.pod_group_names and name not in self.out.delete_pod_groups:
            self.out.delete_pod_groups.append(name)

    def delete_role_replica(self, group: Group, rid: str, why: str | None) -> None:
        self.touched.add(group.index)
        self.deleting.add(_unit(group_name(self.ms.name, group.index), rid))
        for pod in group.role_replica(rid):
            self.delete_pod(pod)
        self.delete_service(pod_name(group_name(self.ms.name, group.index), rid, 0))
        if why:
            self.out.notes.append(why)

    # --- the steps -------------------------------------------------------------------------

    def recover(self) -> None:
        """A failed Pod, once ``restartGracePeriodSeconds`` passed and it still is (Kthena's
        ``handlePodAfterGraceTime``, whatever the policy): ServingGroupRecreate deletes its
        ServingGroup, RoleRecreate its role replica, None the Pod alone (made again alone)."""
        policy = self.ms.spec.recovery_policy
        grace = self.ms.spec.template.restart_grace_period_seconds
        self.cause = "recovery"
        for index in sorted(self.groups if self.every_group else self.index.failed):
            group = self.groups[index]
            for pod in group.failed:
                if pod.name in self.deleted_pods:
                    continue
                if self.lost.get(pod.name) == NODE_DELETED:
                    if policy == "None":
                        continue  # deleted at once, alone, with no grace period (release_lost)
                    # gone for good: no restart to wait for
                    why = f"Pod {pod.name}'s Node {pod.node} was deleted"
                else:
                    since = pod.failed_at or self.seen_failed.get(pod.uid, self.now)
                    wait = since + grace - self.now
                    if wait > 0:
                        self.out.requeue(wait)
                        continue
                    why = f"Pod {pod.name} failed"
                if policy == "None":
                    self.delete_pod(pod)
                    self.out.notes.append(f"{why}: recreating it")
                    continue
                if policy == "ServingGroupRecreate":
                    self.delete_group(group, f"{why}: recreating ServingGroup {pod.group}")
                    break
                self.delete_role_replica(
                    group, pod.role_id, f"{why}: recreating role replica {pod.role_id}"
                )

    def recover_deleted(self) -> None:
        """Kthena's ``handleDeletedPod``: a Pod of this ModelServing that someone else deleted
        (``deleted``: the watch saw it go, and the controller had not deleted it) is recovered
        by the policy at once: ServingGroupRecreate deletes the rest of its ServingGroup,
        RoleRecreate the rest of its role replica (Pods and Service); both are then made
        again. A Pod of a ServingGroup or role replica being deleted whole (``deleting``) is
        part of that deletion, as Kthena's ``handleDeletionInProgress`` takes it; one whose
        other Pods are all terminating already is left to their deletion, and waits for them
        as one being deleted. Under None the Pod is made again alone (membership)."""
        policy = self.ms.spec.recovery_policy
        if policy == "None" or not self.deleted:
            return
        self.cause = "recovery"
        uid = self.ms.metadata.uid or ""
        for raw in self.deleted:
            pod = observe_pod(raw, self.ms.name) if owned_by(raw, uid) else None
            if pod is None:
                continue  # not ours
            group = self.groups.get(pod.group_index)
            if group is not None and pod.name in group.live_names:
                seen = self.podset.observed.get(pod.name)
                if seen is not None and seen.uid == pod.uid:
                    # read before the watch reported it gone: the next pass acts on it
                    self.out.unseen_deletions.append(pod.uid)
                    self.out.requeue(BUSY_RETRY_SECONDS)
                continue  # else made again since
            name = group_name(self.ms.name, pod.group_index)
            if self.under_way(group, name) or self.under_way(group, name, pod.role_id):
                continue  # part of a deletion under way
            why = f"Pod {pod.name} was deleted"
            if group is None:
                # It was the last Pod of its ServingGroup: what Kthena deletes with it (the
                # PodGroup and Services of the ServingGroup, or the role replica's Service)
                # goes, and the ServingGroup is made again on the next pass.
                self.recover_emptied(pod, policy, why)
                continue
            if policy == "ServingGroupRecreate":
                if group.live:
                    self.delete_group(group, f"{why}: recreating ServingGroup {pod.group}")
                else:  # the rest is going already: made again once it is gone
                    self.deleting.add(name)
                continue
            rest = group.role_replica(pod.role_id)
            if rest and all(p.terminating or p.name in self.deleted_pods for p in rest):
                self.deleting.add(_unit(name, pod.role_id))
                continue
            self.delete_role_replica(
                group, pod.role_id, f"{why}: recreating role replica {pod.role_id}"
            )

    def recover_emptied(self, pod: ObservedPod, policy: str, why: str) -> None:
        """``recover_deleted`` for a Pod that was all that was left of its ServingGroup."""
        name = pod.group
        if policy == "ServingGroupRecreate":
            before = len(self.out.delete_services) + len(self.out.delete_pod_groups)
            for svc in self.group_services.get(name, ()):
                self.delete_service(svc)
            self.delete_pod_group(name)
            if len(self.out.delete_services) + len(self.out.delete_pod_groups) > before:
                self.out.notes.append(f"{why}: recreating ServingGroup {name}")
        else:
            service = pod_name(name, pod.role_id, 0)
            if service in self.services and service not in self.out.service_causes:
                self.delete_service(service)
                self.out.notes.append(f"{why}: recreating role replica {pod.role_id}")

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
                    self.touched.add(pod.group_index)
                    self.out.delete_pods.append(PodRef(pod.name, pod.uid, "node", force=True))

    def live_groups(self) -> list[Group]:
        """Every ServingGroup with live Pods this pass has not deleted whole, read from the
        Pods rather than the index (``every_group``)."""
        return [
            g
            for g in self.groups.values()
            if g.index not in self.deleted_groups and not g.live_names <= self.deleted_pods
        ]

    def live_indices(self, dead: set[int]) -> set[int]:
        """The ServingGroups with live Pods this pass has not deleted whole (``dead``)."""
        return self.index.live - dead if dead else self.index.live

    def roll_groups(self) -> None:
        dead = self.dead()
        index = self.index
        max_unavailable = max(
            1, _scaled(self.max_unavailable_raw, self.replicas, 1, round_up=False)
        )
        # Kthena's budget (a Deployment's): every ServingGroup there is, less the ones that must
        # stay available, less the new ones not ready yet; outdated ones that are not ready go
        # first, then the highest ordinals.
        new_unavailable = index.new_unready - sum(1 for i in dead if index.verdicts[i].new_unready)
        live = len(index.live) - len(dead)
        if self.every_group:
            after = [g for g in self.live_groups() if g.index >= self.partition]
            new_unavailable = sum(
                1 for g in after if g.revision() == self.update_revision and not self._is_ready(g)
            )
            live = len(self.live_groups())
            outdated = [g for g in after if g.revision() != self.update_revision]
            budget = live - (self.replicas - max_unavailable) - new_unavailable
            outdated.sort(key=lambda g: (self.ready(g), -g.index))
            more = len(outdated) > max(budget, 0)
            chosen = outdated[: max(budget, 0)]
        else:
            budget = live - (self.replicas - max_unavailable) - new_unavailable
            chosen, more = self._first_outdated(max(budget, 0), dead)
        self.cause = "update"
        if more:
            self.out.requeue(BUSY_RETRY_SECONDS * 5)
        for group in chosen:
            self.delete_group(
                group,
                f"rolling update: recreating ServingGroup {group_name(self.ms.name, group.index)}"
                f" at revision {self.update_revision}",
            )

    def _first_outdated(self, count: int, dead: set[int]) -> tuple[list[Group], bool]:
        """The first ``count`` outdated ServingGroups the rolling update recreates (not Ready
        first, then the highest ordinals), and whether more are left: from the index's
        verdicts, and with nothing sorted when there is no room (most passes of a rollout)."""
        outdated = self.index.outdated - dead if dead else self.index.outdated
        if count == 0 or not outdated:
            return [], bool(outdated)
        verdicts = self.index.verdicts
        chosen = sorted((i for i in outdated if not verdicts[i].ready), reverse=True)[:count]
        if len(chosen) < count:
            ready = sorted((i for i in outdated if verdicts[i].ready), reverse=True)
            chosen += ready[: count - len(chosen)]
        return [self.groups[i] for i in chosen], len(outdated) > count

    def roll_roles(self) -> None:
        """RoleRollingUpdate: per ServingGroup and role, at most the role's ``maxUnavailable``
        (default 1) role replicas are unavailable while outdated ones are recreated."""
        dead = self.dead()
        # a ServingGroup whose every live Pod is at its role's template has nothing to roll
        candidates = self.index.not_updated
        if self.every_group:
            candidates = {g.index for g in self.live_groups()}
        for index in sorted(candidates - dead):
            if index < self.partition:
                continue
            group = self.groups[index]
            wanted = self.role_ordinals(index, self.ms)
            for role in self.ms.spec.template.roles:
                # Kthena scales the roles before it rolls them: a surplus replica is not rolled
                kept = role_ordinals(role, wanted)
                units: dict[str, list[ObservedPod]] = {}
                for pod in group.live:
                    if (
                        pod.role == role.name
                        and pod.name not in self.deleted_pods
                        and pod.role_index in kept
                    ):
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
        dead = self.dead()
        live_now = self.live_indices(dead)
        if self.every_group:
            live_now = {g.index for g in self.live_groups()}
        surplus = len(live_now) - self.replicas
        if surplus > 0:
            live = [self.groups[i] for i in sorted(live_now)]
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
        # the lowest ordinals not taken (in C: a rolling update takes this in every pass)
        return list(
            itertools.islice(
                itertools.filterfalse(live_now.__contains__, itertools.count()), max(0, -surplus)
            )
        )

    def create_missing(self, plan: GroupPlan, skip: set[str]) -> None:
        """Create what ``plan`` describes and does not exist (skipping names in ``skip``)."""
        if plan.name in self.out.delete_pod_groups:
            # its PodGroup is being deleted (the ServingGroup deleted whole): it is made again,
            # PodGroup first, on the next pass
            self.out.requeue(BUSY_RETRY_SECONDS)
            return
        group = self.groups.get(plan.index)
        name = group_name(self.ms.name, plan.index)
        if self.going(group, name):
            # deleted whole (recovered, replaced, scaled in): it is made again once every Pod
            # of it is gone, as Kthena makes a ServingGroup it deleted; made earlier, a later
            # deletion (a Pod evicted with the first) would count as a new loss
            self.out.requeue(BUSY_RETRY_SECONDS)
            return
        work = GroupWork(plan.name, plan.index, self.missing_pod_group(plan.name))
        busy = False
        for replica in plan.roles:
            if self.going(group, name, role_id(replica.role, replica.index)):
                # deleted whole (recovered, replaced) and some Pod of it still going: it is
                # made again once they are all gone, as Kthena waits for a role it is
                # deleting; made earlier, a later deletion would count as a new loss
                busy = True
                continue
            for desired in replica.pods():
                if desired.name in skip:
                    continue
                if desired.name in self.podset.raw or desired.name in self.recently_gone:
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
            if work.pod_group is not None and not any(
                isinstance(step, DesiredPod) for step in work.steps
            ):
                # its Pods' names are still held (a ServingGroup deleted whole, being made
                # again): its PodGroup is made with its first Pods, as Kthena makes it once the
                # ServingGroup is gone
                work.pod_group = None
        if work.steps or work.pod_group is not None:
            self.out.creates.append(work)

    def _left(self, group: Group | None, rid: str | None) -> bool | None:
        """What is left of ``group``, or of its role replica ``rid``: None, no Pod; True, only
        Pods being deleted; False, a Pod live and kept. Every Pod of it by its place counts,
        those of a layout the current revision no longer has too."""
        pods = () if group is None else group.pods if rid is None else group.role_replica(rid)
        if not pods:
            return None
        deleting = self.deleted_pods
        return all(p.terminating or p.name in deleting for p in pods)

    def going(self, group: Group | None, name: str, rid: str | None = None) -> bool:
        """Whether the ServingGroup ``name`` (``group``'s Pods), or its role replica ``rid``,
        is being deleted whole (``deleting``) and some Pod of it is still there."""
        return (
            bool(self.deleting)
            and _unit(name, rid) in self.deleting
            and bool(self._left(group, rid))
        )

    def under_way(self, group: Group | None, name: str, rid: str | None = None) -> bool:
        """Whether the deletion of the ServingGroup ``name``, or of its role replica ``rid``,
        is under way or done: listed in ``deleting`` with no Pod of it live and kept. One
        decided and not carried out (the pass failed, or had no working plugin list) is not:
        a Pod deleted from it is recovered again."""
        return _unit(name, rid) in self.deleting and self._left(group, rid) is not False

    def still_deleting(self) -> frozenset[str]:
        """``deleting`` without what is gone, or was not deleted after all (a Pod of it is
        live and kept: the delete failed, or it was made again)."""
        kept = set()
        for unit in self.deleting:
            name, _, rid = unit.partition("/")
            index = _group_index(self.ms.name, name)
            if index is not None and self._left(self.groups.get(index), rid or None):
                kept.add(unit)
        return frozenset(kept)

    def missing_pod_group(self, name: str) -> dict[str, Any] | None:
        """The PodGroup to create for ServingGroup ``name``, if it needs one and has none.
        Made from the current ModelServing whatever the ServingGroup's revision (as Kthena)."""
        if not self.pod_groups_wanted or name in self.pod_group_names:
            return None
        return gang_.pod_group(self.ms, name, self.gang)

    def pod_group_updates(self, names: AbstractSet[str]) -> None:
        """Bring the existing PodGroups of these ServingGroups to Kthena's spec."""
        if not self.pod_groups_wanted:
            return
        uid = self.ms.metadata.uid or ""
        desired = _same_spec(uid, gang_.pod_group_spec(self.ms, self.gang))
        owned = self.owned_pod_groups
        # the patches of every PodGroup, kept with the index for the same wanted spec and
        # brought up to date with the PodGroups that changed (Volcano writes their status)
        seen = self.index.kept.get("patches")
        changed: AbstractSet[str] | None = None
        patches: dict[str, dict[str, Any]] = {}
        if seen is not None and not self.every_group:
            (version, spec, api), patches = seen
            if spec is desired and api == self.gang:
                changed = owned.changes_since(version)
        if changed is None:
            patches = {}
            changed = self.pod_groups.keys()
        for name in changed:
            existing = self.pod_groups.get(name)
            patch = None
            if existing is not None and not (existing.get("metadata") or {}).get(
                "deletionTimestamp"
            ):
                patch = _PATCHES((uid, name), existing, desired, self.gang)
            if patch is None:
                patches.pop(name, None)
            else:
                patches[name] = patch
        self.index.kept["patches"] = ((owned.version, desired, self.gang), patches)
        deleting = self.out.delete_pod_groups
        for name in sorted(patches):
            if name in names and name not in deleting:
                self.out.update_pod_groups[name] = patches[name]

    def fresh_revision(self, index: int, current: str | None) -> str:
        """A new ServingGroup's revision: below the partition the current one (as a
        StatefulSet does) when its roles are known; otherwise the new one. A role's partition
        applies inside existing ServingGroups only (Kthena)."""
        old = index < self.partition and current and current != self.update_revision
        if old and current is not None and self.ms_at(current) is not None:
            return current
        return self.update_revision

    def fresh_plan(self, index: int, current: str | None) -> GroupPlan:
        plan = self.plan_for(index, self.fresh_revision(index, current))
        assert plan is not None
        return plan

    def create_fresh(self, index: int, current: str | None) -> None:
        """Create a new ServingGroup's missing objects (``create_missing``). While every name
        of its Pods is still held (by a Pod being deleted, or one gone a moment ago) and its
        Services exist, there is nothing to create (its PodGroup, when missing, waits for its
        first Pods while a held name is busy): then its plan is not built, and the pass only
        looks again, as ``create_missing`` would. In a rolling update the control plane takes
        minutes over, hundreds of ServingGroups wait so in every pass. ``every_group`` builds
        every plan (what this shortcut is tested against)."""
        names = self.names_for(index, self.fresh_revision(index, current))
        assert names is not None
        raw, gone = self.podset.raw, self.recently_gone
        if (
            self.every_group
            or not (names.pods <= raw.keys() or all(n in raw or n in gone for n in names.pods))
            or not names.services <= self.services.keys()
        ):
            self.create_missing(self.fresh_plan(index, current), set())
            return
        deleting, terminating = self.deleted_pods, self.terminating_names
        if (
            not names.services.isdisjoint(self.out.service_causes)
            or not names.pods.isdisjoint(deleting)
            or not names.pods.isdisjoint(terminating)
        ):
            self.out.requeue(BUSY_RETRY_SECONDS)
        elif self.missing_pod_group(names.name or group_name(self.ms.name, index)) is not None:
            self.create_missing(self.fresh_plan(index, current), set())

    def _terminating(self, desired: DesiredPod) -> bool:
        return desired.name in self.terminating_names

    def membership(self, group: Group) -> None:
        """Inside a kept ServingGroup: create what is missing, delete what no longer belongs."""
        self.cause = "membership"
        own = group.revision()
        if self.role_rolling:
            rev = self.update_revision
            current = self.hashes
            stale = {
                p.role_id
                for p in group.live
                if p.role in current and p.template_hash != current[p.role]
            }
            if not stale and self.complete(group, rev):
                # every Pod at its role's template, so the partition keeps none at an older one
                return
        else:
            rev = self.repair_revision(group, own)
            stale = set()
            if rev and self.complete(group, rev):
                return
        plan = self.plan_for(group.index, rev) if rev else None
        if plan is not None and self.role_rolling:
            plan, kept = self.keep_protected(plan, group)
            stale -= kept
        if plan is None:
            # Kept at an old revision by the partition with no history (or its Pods of two):
            # left alone, but it gets its PodGroup.
            name = group_name(self.ms.name, group.index)
            missing = self.missing_pod_group(name)
            if missing is not None:
                self.out.creates.append(GroupWork(name, group.index, missing))
            return
        wanted = {d.name for d in plan.pods()}
        keep: set[str] = set()
        if not self.role_rolling and rev != own:
            # Made from another revision than its Pods': Kthena deletes only a current role's
            # surplus replicas there (scaleDownRoles), not a worker or a role the template no
            # longer has; the rolling update replaces the ServingGroup whole in its turn.
            roles = {role.name for role in self.ms.spec.template.roles}
            replicas = {d.place.role_id for d in plan.pods()}
            keep = {p.role_id for p in group.live if p.role not in roles or p.role_id in replicas}
        for pod in group.live:
            if pod.name not in wanted and pod.role_id not in stale and pod.role_id not in keep:
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
                if rid not in stale and rid not in keep:
                    self.delete_service(name)

    def complete(self, group: Group, rev: str) -> bool:
        """Whether ``membership`` would do nothing for ``group`` at ``rev`` (its live Pods and
        its Services are exactly those the revision describes, none of them being deleted, and
        it has its PodGroup): decided from names, without planning the ServingGroup."""
        if not self._settled(group, rev):
            return False
        live = group.live_names
        if not live.isdisjoint(self.deleted_pods) or not live.isdisjoint(self.terminating_names):
            return False
        causes = self.out.service_causes
        if causes:
            names = self.names_for(group.index, rev)
            name = (names.name if names else "") or group_name(self.ms.name, group.index)
            if any(n in causes for n in self.group_services.get(name, ())):
                return False
        return True

    def _settled(self, group: Group, rev: str) -> bool:
        """``complete`` before the pass decides anything: its live Pods and Services are those
        ``rev`` describes, and it has its PodGroup."""
        names = self.names_for(group.index, rev)
        if names is None:
            return False
        if group.live_names != names.pods:
            return False
        name = names.name or group_name(self.ms.name, group.index)
        services = self.group_services.get(name, ())
        if len(services) != len(names.services) or not names.services.issuperset(services):
            return False  # (a ServingGroup's Services are listed once each)
        return self.missing_pod_group(name) is None

    def kept_groups(self, fresh: list[int], live: set[int]) -> tuple[list[str], AbstractSet[str]]:
        """The names of the ServingGroups kept (``live``: live and not deleted whole before
        membership) or made this pass, by index, and as a set. From the index's live
        ServingGroups in order, less those deleted whole, plus those made: no sort and no name
        worked out again for every ServingGroup in a pass that makes or deletes a few."""
        index = self.index
        if self.every_group:
            indices = sorted(live | set(fresh))
        elif fresh or live is not index.live:
            indices = list(index.live_sorted)
            for i in index.live - live:  # deleted whole
                del indices[bisect.bisect_left(indices, i)]
            for i in set(fresh) - live:
                bisect.insort(indices, i)
        else:
            names, as_set = self._from_index("names", (), self._live_names)
            return list(names), as_set
        names = self._names_of(indices)
        return names, frozenset(names)

    def _live_names(self) -> tuple[list[str], frozenset[str]]:
        names = self._names_of(self.index.live_sorted)
        return names, frozenset(names)

    def _names_of(self, indices: list[int]) -> list[str]:
        """The names of these ServingGroups, each worked out once for the index."""
        known: dict[int, str] = self.index.kept.setdefault("group names", {})
        if len(known) > 2 * len(self.index.verdicts) + 64:
            known.clear()
        for i in set(indices).difference(known):
            known[i] = group_name(self.ms.name, i)
        return list(map(known.__getitem__, indices))

    def _claims(self, label: str | None) -> bool:
        """Whether ``label`` (an object's ServingGroup label) names a live ServingGroup (as the
        pass began)."""
        if label is None:
            return False
        i = _group_index(self.ms.name, label)
        return i is not None and i in self.index.live and group_name(self.ms.name, i) == label

    def _from_index(self, what: str, key: Hashable, compute: Callable[[], T]) -> T:
        """``compute()``, kept with the index while its live ServingGroups are the same and
        ``key`` is equal."""
        index = self.index
        full = (index.live_version, key)
        seen = index.kept.get(what)
        if seen is not None and seen[0] == full:
            return cast(T, seen[1])
        answer = compute()
        index.kept[what] = (full, answer)
        return answer

    def _unclaimed(
        self,
        what: str,
        owned: OwnedSet,
        present: AbstractSet[str],
        label_of: Callable[[str], str | None],
        by_group: Callable[[str], Iterable[str]],
    ) -> set[str]:
        """The objects (``owned``: Services or PodGroups; ``present`` their names, ``label_of``
        the ServingGroup each names, ``by_group`` those naming one ServingGroup) no live
        ServingGroup claims, kept with the index and brought up to date with the objects that
        changed and the ServingGroups that came or went since."""
        index = self.index
        seen = index.kept.get(what)
        changed: AbstractSet[str] | None = None
        unclaimed: set[str] = set()
        if seen is not None and not self.every_group:
            (live_version, version), kept = seen
            objects = owned.changes_since(version)
            groups = index.live_changes_since(live_version)
            if objects is not None and groups is not None:
                unclaimed = set(kept)  # a copy: a pass that fails changes nothing kept
                changed = set(objects).union(
                    *(by_group(group_name(self.ms.name, i)) for i in groups)
                )
        if changed is None:
            changed = present
        for name in changed:
            if name in present and not self._claims(label_of(name)):
                unclaimed.add(name)
            else:
                unclaimed.discard(name)
        index.kept[what] = ((index.live_version, owned.version), unclaimed)
        return unclaimed

    def orphans(self, names: AbstractSet[str], dead: set[int]) -> None:
        """Services and PodGroups of ServingGroups that are neither kept nor being created
        (``names``: those that are; ``dead``: the live ones deleted whole)."""
        self.cause = "scale"
        unclaimed = self._unclaimed(
            "unclaimed services",
            self.owned_services,
            self.service_groups.keys(),
            self.service_groups.__getitem__,
            lambda group: self.group_services.get(group, ()),
        )
        # by name: what a pass decides does not depend on the order the objects came in
        candidates: Iterable[str] = sorted(unclaimed)
        if self.every_group:
            candidates = sorted(self.service_groups)
        elif dead:
            extra = {
                svc
                for i in dead
                for svc in self.group_services.get(group_name(self.ms.name, i), ())
            }
            candidates = sorted(extra.union(unclaimed))
        for name in candidates:
            if self.service_groups[name] not in names:
                self.delete_service(name)
        unclaimed_pgs = sorted(
            self._unclaimed(
                "unclaimed pod groups",
                self.owned_pod_groups,
                self.pod_group_names,
                lambda name: name,  # a PodGroup is named after its ServingGroup
                lambda group: (group,),
            )
        )
        found: Iterable[str] = unclaimed_pgs
        if self.every_group:
            found = sorted(self.pod_group_names)
        elif dead:
            gone = {group_name(self.ms.name, i) for i in dead} & self.pod_group_names
            found = sorted(gone.union(unclaimed_pgs))
        for name in found:
            if name not in names:
                self.delete_pod_group(name)

    def ready_hooks(self) -> None:
        for index in sorted(self.groups if self.every_group else self.index.awaiting):
            for pod in self.groups[index].awaiting_ready_hooks:
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
        index = self.index
        live = len(index.live)
        n_updated = index.updated
        available = index.ready
        updating = n_updated < live
        if not updating:
            current = self.update_revision
        elif previous_current and previous_current in index.older:
            current = previous_current
        else:
            current = index.most_common_older() or previous_current or self.update_revision
        # Kthena's count: the ServingGroups not at the update revision, or all of them once the
        # whole ModelServing is updated and available (unless a partition is set).
        n_current = live - n_updated
        if not self.partition_given and n_updated == available == live == self.replicas:
            n_current = n_updated
        is_available = not updating and available >= self.replicas and live == self.replicas
        return SyncStatus(
            replicas=live,
            current_replicas=n_current,
            updated_replicas=n_updated,
            available_replicas=available,
            current_revision=current,
            update_revision=self.update_revision,
            available=is_available,
            progressing=not is_available and not updating,
            updating=updating,
        )


def _roles_shape(ms: ModelServing) -> tuple[tuple[str, int, int, bool], ...]:
    """What a ServingGroup's names depend on of its roles: their names and sizes."""
    return tuple(
        (r.name, r.replicas, r.worker_replicas, r.worker_template is not None)
        for r in ms.spec.template.roles
    )


def _unit(name: str, rid: str | None = None) -> str:
    """How ``SyncPlan.deleting`` names the ServingGroup ``name``, or its role replica ``rid``."""
    return name if rid is None else f"{name}/{rid}"


def _group_index(ms_name: str, key: str) -> int | None:
    """The index in ServingGroup name ``key`` (``<ms>-<i>``), if it is one."""
    prefix = ms_name + "-"
    if key.startswith(prefix):
        rest = key[len(prefix) :]
        if rest.isascii() and rest.isdigit():  # not '²': digits int() refuses
            return int(rest)
    return None


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
    services: OwnedSet | Iterable[Mapping[str, Any]] = (),
    pod_groups: OwnedSet | Iterable[Mapping[str, Any]] = (),
    *,
    now: float,
    gang: bool | gang_.VolcanoApi = False,
    history: Mapping[str, Sequence[Mapping[str, Any]]] | None = None,
    seen_failed: Mapping[str, float] | None = None,
    lost_nodes: Mapping[str, str] | None = None,
    recently_gone: Iterable[str] = (),
    deleted: Sequence[Mapping[str, Any]] = (),
    deleting: AbstractSet[str] = frozenset(),
    ready_hooks: bool = True,
    every_group: bool = False,
) -> SyncPlan:
    """Decide one reconcile pass of ``ms`` (see the module docstring).

    ``pods``, ``services`` and ``pod_groups`` are the objects as the API returns them; only those
    the ModelServing controls are considered. ``pods`` may be a ``PodSet`` of this ModelServing (its
    name and UID) kept from pass to pass: then only what changed since its last ``refresh`` is
    observed again; ``services`` and ``pod_groups`` may likewise be ``OwnedSet``s of this
    ModelServing's UID, kept from pass to pass. ``history`` maps older revisions to their roles
    (from ControllerRevisions), so a ServingGroup kept at an old revision by the partition can be
    repaired. ``seen_failed`` gives, by Pod UID, when the controller first saw a failed Pod whose
    status carries no time, for the grace period. ``lost_nodes`` gives the state of Nodes that are
    not Ready or were deleted (``NODE_NOT_READY``, ``NODE_DELETED``): their Pods do not count as
    ready, and a Pod on a deleted Node is recovered at once and deleted with no grace period.
    ``recently_gone`` names Pods deleted a moment ago: they are made again a little later, as if
    still terminating. ``deleted`` holds the last state of Pods someone else deleted (the
    controller did not), each to be recovered once by the recovery policy, as Kthena recovers
    a deleted Pod (``recover_deleted``). ``deleting`` is the last pass's ``SyncPlan.deleting``:
    the ServingGroups and role replicas deleted whole that are made again only once every Pod of
    them is gone. ``ready_hooks=False`` (no plugin has an OnPodReady
    hook) leaves ``SyncPlan.ready_hooks`` empty without looking at every Ready Pod.
    ``every_group=True`` visits every ServingGroup in every step instead of only those the
    ``GroupIndex`` names (the same plan, slower: what the index is tested against).
    """
    lost = lost_nodes or {}
    gone = set(recently_gone)
    s = _Sync(
        ms,
        pods,
        services,
        pod_groups,
        now,
        gang,
        history or {},
        seen_failed or {},
        lost,
        gone,
        every_group,
        deleted,
        deleting,
    )
    previous = ms.status.current_revision if ms.status else None
    s.out.status = s.status(previous)
    s.recover()
    s.recover_deleted()
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
    dead = s.dead()
    # a ServingGroup complete before the pass, and untouched by it, has nothing to add or take
    observed = s.podset.observed
    waited = {observed[n].group_index for n in gone if n in observed}
    live = s.live_indices(dead)
    if every_group:
        live = {g.index for g in s.live_groups()}
        visit = live
    else:
        visit = (s.index.incomplete | s.touched | waited) & live
    for index in sorted(visit):
        s.membership(s.groups[index])
    for index in fresh:
        s.create_fresh(index, previous)
    names, named = s.kept_groups(fresh, live)
    s.orphans(named, dead)
    s.out.groups = names
    s.pod_group_updates(named)
    s.out.deleting = s.still_deleting()
    if ready_hooks:
        s.ready_hooks()
    return s.out
