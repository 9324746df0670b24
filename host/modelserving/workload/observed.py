"""What the controller sees of a ModelServing's existing Pods: the facts reconciliation needs.

``observe_pod`` reads one Pod as the API returns it (a JSON dict) into an ``ObservedPod``: where it
sits (group, role replica, index), its revision, readiness, failure and deletion cost. Pure; used
by ``workload.sync``.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from datetime import datetime
from typing import Any

from modelserving.api import labels

DELETION_COST_ANNOTATION = "controller.kubernetes.io/pod-deletion-cost"
# Set by the controller once OnPodReady ran for a Pod (the Pod object is per UID, so is the mark).
READY_HOOKS_ANNOTATION = labels.LABEL_PREFIX + "ready-hooks"
NODE_DELETED = "deleted"
"""A lost Node's state: the Node object is gone (its Pods can never run or end)."""
NODE_NOT_READY = "NotReady"
"""A lost Node's state: its Ready condition is not True (its Pods may come back)."""


@dataclass(frozen=True, slots=True)
class ObservedPod:
    """One existing Pod of a ModelServing, reduced to what reconciliation decides on."""

    name: str
    uid: str
    resource_version: str
    group: str
    group_index: int
    role: str
    role_id: str
    role_index: int
    pod_index: int
    node: str
    revision: str
    template_hash: str
    terminating: bool
    running: bool
    ready: bool
    failed: bool
    failed_at: float | None
    deletion_cost: int
    ready_hooks_done: bool
    raw: Mapping[str, Any]
    owners: tuple[Any, ...] = ()
    """The UIDs its controller owner references name, as they are (``owned_by``)."""


def _timestamp(text: Any) -> float | None:
    if not isinstance(text, str) or not text:
        return None
    try:
        return datetime.fromisoformat(text.replace("Z", "+00:00")).timestamp()
    except ValueError:
        return None


def _failure(status: Mapping[str, Any], ready: bool) -> tuple[bool, float | None]:
    """Kthena's rule (``updatePod``): the Pod Failed, or, Running or Pending and not Running
    and Ready, one of its containers restarted (a Pod Running and Ready again after a restart
    is a ready Pod, and Kthena looks at that first). Also when it happened."""
    phase = status.get("phase")
    if phase != "Failed" and (ready or phase not in ("Running", "Pending")):
        return False, None  # most Pods: nothing to read of their containers
    statuses = list(status.get("containerStatuses") or []) + list(
        status.get("initContainerStatuses") or []
    )
    if phase != "Failed" and not any(int(c.get("restartCount") or 0) > 0 for c in statuses):
        return False, None
    # since when: the Pod stopped being Ready, which a crash loop does not move on (each crash
    # writes a later finishedAt: counted from that, a grace period longer than the kubelet's
    # back-off would never end; Kthena counts from the failure it saw first); else the last
    # time a container ended
    for cond in status.get("conditions") or []:
        if cond.get("type") == "Ready" and cond.get("status") != "True":
            stamp = _timestamp(cond.get("lastTransitionTime"))
            if stamp is not None:
                return True, stamp
    times: list[float] = []
    for c in statuses:
        for state in (c.get("state") or {}, c.get("lastState") or {}):
            stamp = _timestamp((state.get("terminated") or {}).get("finishedAt"))
            if stamp is not None:
                times.append(stamp)
    return True, max(times) if times else None


def _index_after(prefix: str, text: str) -> int | None:
    if not text.startswith(prefix):
        return None
    rest = text[len(prefix) :]
    return int(rest) if rest.isascii() and rest.isdigit() else None


def _group_in_name(name: str, ms_name: str, rid: str) -> int | None:
    """The ServingGroup index of a Pod named ``<ms_name>-<index>-<rid>-<n>``."""
    if not name.startswith(f"{ms_name}-"):
        return None
    index, _, rest = name[len(ms_name) + 1 :].partition("-")
    if not (index.isascii() and index.isdigit() and rest.startswith(f"{rid}-")):
        return None
    return int(index)


_SEEN: dict[tuple[str, str], tuple[Mapping[str, Any], ObservedPod | None]] = {}
"""observe_pod's last answer by (ModelServing, Pod name), with the Pod object it read: a pass reads
every Pod of its ModelServing from the controller's cache, whose objects are replaced, never
changed in place, so the same object gives the same answer. One entry per Pod name; deleted
Pods' entries go when the table is full."""
_SEEN_MAX = 65536


def observe_pod(pod: Mapping[str, Any], ms_name: str) -> ObservedPod | None:
    """The facts of ``pod``, or None when its labels do not place it in ``ms_name``'s layout.
    ``pod`` must not be changed in place afterwards (its answer is remembered)."""
    key = (ms_name, str((pod.get("metadata") or {}).get("name", "")))
    seen = _SEEN.get(key)
    if seen is not None and seen[0] is pod:
        return seen[1]
    found = _observe(pod, ms_name)
    if len(_SEEN) >= _SEEN_MAX:
        _SEEN.clear()
    _SEEN[key] = (pod, found)
    return found


def _observe(pod: Mapping[str, Any], ms_name: str) -> ObservedPod | None:
    meta = pod.get("metadata") or {}
    lab = meta.get("labels") or {}
    role = str(lab.get(labels.ROLE_LABEL, ""))
    rid = str(lab.get(labels.ROLE_ID_LABEL, ""))
    name = str(meta.get("name", ""))
    # The ServingGroup is the one the Pod's name gives, whatever its group-name label says: the
    # template may set that label itself (Kthena's router examples give every Pod one, to pair
    # prefill with decode), and it then wins over the controller's.
    group_index = _group_in_name(name, ms_name, rid)
    group = f"{ms_name}-{group_index}"
    role_index = _index_after(f"{role}-", rid)
    pod_index = _index_after(f"{group}-{rid}-", name)
    if group_index is None or role_index is None or pod_index is None:
        return None
    status = pod.get("status") or {}
    conditions = {c.get("type"): c.get("status") for c in status.get("conditions") or []}
    running = status.get("phase") == "Running"
    ready = running and conditions.get("Ready") == "True"
    failed, failed_at = _failure(status, ready)
    annotations = meta.get("annotations") or {}
    try:
        cost = int(annotations.get(DELETION_COST_ANNOTATION, 0))
    except (TypeError, ValueError):
        cost = 0
    return ObservedPod(
        name=name,
        uid=str(meta.get("uid", "")),
        resource_version=str(meta.get("resourceVersion", "")),
        group=group,
        group_index=group_index,
        role=role,
        role_id=rid,
        role_index=role_index,
        pod_index=pod_index,
        node=str((pod.get("spec") or {}).get("nodeName") or ""),
        revision=str(lab.get(labels.REVISION_LABEL, "")),
        template_hash=str(lab.get(labels.ROLE_TEMPLATE_HASH_LABEL, "")),
        terminating=bool(meta.get("deletionTimestamp")),
        running=running,
        ready=ready,
        failed=failed,
        failed_at=failed_at,
        deletion_cost=cost,
        ready_hooks_done=bool(annotations.get(READY_HOOKS_ANNOTATION)),
        raw=pod,
        owners=tuple(
            r.get("uid") for r in meta.get("ownerReferences") or [] if r.get("controller")
        ),
    )


def owned_by(obj: Mapping[str, Any], uid: str) -> bool:
    """Whether ``obj``'s controller owner reference points at the object with ``uid``."""
    refs = (obj.get("metadata") or {}).get("ownerReferences") or []
    return any(r.get("controller") and r.get("uid") == uid for r in refs)
