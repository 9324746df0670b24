"""A ModelServing's Pods, observed and grouped by ServingGroup, kept from one pass to the next.

A pass decides over every Pod of its ModelServing. While Pods turn Ready one event at a time, a
pass that observed every Pod again and grouped them again did O(Pods) work for each event: a
rolling update of 5,000 Pods spent half its controller CPU there. ``PodSet.refresh`` takes the
Pods as the controller's cache holds them now and works only on those whose object changed:
the cache replaces an object on every change and never edits one in place, so an object that is
still the same (``is``) has the same facts. The ServingGroups those Pods belong to are rebuilt;
every other ``Group`` is the same object as in the last pass, with what was worked out about it
(its live Pods, its revision, its readiness for a given layout) still at hand.

A ``PodSet`` made for one pass from a plain list (``PodSet.of``) decides exactly as a kept one;
``tests/unit/workload/test_podset.py`` checks that on random histories.
"""

from __future__ import annotations

import functools
from collections import Counter
from collections.abc import Hashable, Iterable, Mapping
from typing import Any

from modelserving.api import labels
from modelserving.workload.observed import ObservedPod, observe_pod

LAYOUT_SHAPES = 4
"""How many shapes of roles a ``PodSet`` keeps ServingGroup layouts for."""


class Group:
    """The Pods of one ServingGroup (terminating ones too), ordered by role replica and Pod.
    Immutable once made: a change to any of its Pods makes a new ``Group``."""

    def __init__(self, index: int, pods: list[ObservedPod]) -> None:
        self.index = index
        self.pods = pods
        self.memo: dict[Any, Any] = {}
        """Answers about this ServingGroup that depend only on its Pods and the key (a pass's
        readiness for a layout, for one)."""

    @functools.cached_property
    def _by_role_id(self) -> dict[str, list[ObservedPod]]:
        found: dict[str, list[ObservedPod]] = {}
        for pod in self.pods:
            found.setdefault(pod.role_id, []).append(pod)
        return found

    def role_replica(self, rid: str) -> list[ObservedPod]:
        """The Pods of role replica ``rid`` (terminating ones too), in ``pods``' order."""
        return self._by_role_id.get(rid, [])

    @functools.cached_property
    def live(self) -> list[ObservedPod]:
        """The Pods not terminating."""
        return [p for p in self.pods if not p.terminating]

    @functools.cached_property
    def live_names(self) -> frozenset[str]:
        return frozenset(p.name for p in self.live)

    @functools.cached_property
    def failed(self) -> list[ObservedPod]:
        """The live Pods that failed, in ``live``'s order."""
        return [p for p in self.live if p.failed]

    @functools.cached_property
    def awaiting_ready_hooks(self) -> list[ObservedPod]:
        """The live Ready Pods whose OnPodReady hooks have not run."""
        return [p for p in self.live if p.ready and not p.ready_hooks_done]

    @functools.cached_property
    def all_ready(self) -> bool:
        """It has live Pods and every one of them is Ready."""
        live = self.live
        return bool(live) and all(p.ready for p in live)

    @functools.cached_property
    def _revision(self) -> str:
        revs = {p.revision for p in self.live}
        return revs.pop() if len(revs) == 1 else ""

    def revision(self) -> str:
        """The revision all live Pods share; "" when they disagree."""
        return self._revision


def _order(pod: ObservedPod) -> tuple[str, int, str]:
    return pod.role_id, pod.pod_index, pod.name


def _revision_label(pod: Mapping[str, Any]) -> str | None:
    value = ((pod.get("metadata") or {}).get("labels") or {}).get(labels.REVISION_LABEL)
    return None if value is None else str(value)


class PodSet:
    """Every Pod of one ModelServing (``ms_name``, UID ``uid``) by name, and the Pods it controls
    that sit in its layout, by ServingGroup. Not thread-safe: one pass at a time."""

    def __init__(self, ms_name: str, uid: str) -> None:
        self.ms_name = ms_name
        self.uid = uid
        self.raw: dict[str, Mapping[str, Any]] = {}
        """Every Pod by name, its own or not (each name in use blocks a create)."""
        self.observed: dict[str, ObservedPod] = {}
        """The Pods it controls, placed in its layout, by name."""
        self.terminating: set[str] = set()
        """The names of observed Pods being deleted."""
        self.unstamped_failures: dict[str, ObservedPod] = {}
        """Placed Pods that failed and whose status gives no time for it (the controller notes
        when it first saw them, for the grace period)."""
        self.revisions: Counter[str] = Counter()
        """The revision labels of every Pod (a ControllerRevision in use is kept)."""
        self._members: dict[int, dict[str, ObservedPod]] = {}
        self._groups: dict[int, Group] = {}
        self._sorted = True
        self._layouts: dict[Any, dict[int, Any]] = {}
        """ServingGroup layouts (``sync``'s names by index) by the roles' shape, most recent
        last: a ModelServing's layouts do not change with its Pods."""
        self.index: Any = None
        """The last pass's ``GroupIndex`` (``sync`` keeps it here, with the Pods it reads)."""
        self.changed: set[int] = set()
        """The ServingGroups whose Pods changed since ``index`` last took them in."""
        self.whole = False
        """It holds every Pod of a full ``refresh`` and the changes since (``apply`` may
        bring it up to date)."""

    @classmethod
    def of(cls, ms_name: str, uid: str, pods: Iterable[Mapping[str, Any]]) -> PodSet:
        """A set made for one pass from a list (a later Pod of a name replaces an earlier)."""
        made = cls(ms_name, uid)
        made.refresh({str((p.get("metadata") or {}).get("name", "")): p for p in pods})
        return made

    def layouts(self, shape: Hashable) -> dict[int, Any]:
        """The layouts kept for roles of ``shape`` (names, sizes), to read and fill. Those of
        the ``LAYOUT_SHAPES`` shapes used last are kept: the revisions in use at once."""
        found = self._layouts.pop(shape, None)
        if found is None:
            found = {}
        self._layouts[shape] = found
        while len(self._layouts) > LAYOUT_SHAPES:
            del self._layouts[next(iter(self._layouts))]
        return found

    @property
    def groups(self) -> dict[int, Group]:
        """The ServingGroups with Pods, by ascending index."""
        if not self._sorted:
            self._groups = dict(sorted(self._groups.items()))
            self._sorted = True
        return self._groups

    def refresh(self, pods: Mapping[str, Mapping[str, Any]]) -> int:
        """Take the Pods as they are now (by name; an object still the same as last time is
        taken as unchanged). Returns how many Pods changed, came or went. A refresh that
        raises leaves the set empty, so the next one reads every Pod afresh (half a refresh
        would keep Pods taken in but ServingGroups not rebuilt, unseen as unchanged)."""
        try:
            return self._refresh(pods)
        except BaseException:
            self._clear()
            raise

    def _clear(self) -> None:
        self.raw.clear()
        self.observed.clear()
        self.terminating.clear()
        self.unstamped_failures.clear()
        self.revisions.clear()
        self._members.clear()
        self._groups.clear()
        self._sorted = True
        self.index = None
        self.changed.clear()
        self.whole = False

    def take_changed(self) -> set[int]:
        """The ServingGroups whose Pods changed since the last call (and forget them)."""
        changed, self.changed = self.changed, set()
        return changed

    def apply(self, changes: Mapping[str, Mapping[str, Any] | None]) -> int:
        """Take the Pods of these names as they are now (None: gone), the others as they were;
        for a set brought up to date by a ``refresh`` (``whole``) and every change since.
        Returns how many Pods changed, came or went. One that raises leaves the set empty, as
        ``refresh`` does."""
        try:
            dirty: set[int] = set()
            changed = 0
            for name, obj in changes.items():
                if obj is None:
                    if name in self.raw:
                        changed += 1
                        self._drop(name, dirty)
                elif self.raw.get(name) is not obj:
                    changed += 1
                    self._drop(name, dirty)
                    self._put(name, obj, dirty)
            self._rebuild(dirty)
            return changed
        except BaseException:
            self._clear()
            raise

    def _refresh(self, pods: Mapping[str, Mapping[str, Any]]) -> int:
        dirty: set[int] = set()
        raw = self.raw
        gone = raw.keys() - pods.keys()
        for name in gone:
            self._drop(name, dirty)
        changed = len(gone)
        for name, obj in pods.items():
            if raw.get(name) is not obj:
                changed += 1
                self._drop(name, dirty)
                self._put(name, obj, dirty)
        self._rebuild(dirty)
        self.whole = True
        return changed

    def _rebuild(self, dirty: set[int]) -> None:
        """Make the ``Group`` of each ServingGroup in ``dirty`` anew from its members."""
        for index in dirty:
            members = self._members.get(index)
            if not members:
                self._members.pop(index, None)
                self._groups.pop(index, None)
                continue
            if index not in self._groups:
                self._sorted = False
            self._groups[index] = Group(index, sorted(members.values(), key=_order))
        self.changed |= dirty

    def _drop(self, name: str, dirty: set[int]) -> None:
        old = self.raw.pop(name, None)
        if old is None:
            return
        rev = _revision_label(old)
        if rev is not None:
            self.revisions[rev] -= 1
            if self.revisions[rev] <= 0:
                del self.revisions[rev]
        self.unstamped_failures.pop(name, None)
        seen = self.observed.pop(name, None)
        if seen is None:
            return
        self.terminating.discard(name)
        members = self._members.get(seen.group_index)
        if members is not None:
            members.pop(name, None)
        dirty.add(seen.group_index)

    def _put(self, name: str, obj: Mapping[str, Any], dirty: set[int]) -> None:
        self.raw[name] = obj
        rev = _revision_label(obj)
        if rev is not None:
            self.revisions[rev] += 1
        seen = observe_pod(obj, self.ms_name)
        if seen is None:
            return
        if seen.failed and seen.failed_at is None:
            self.unstamped_failures[name] = seen
        if self.uid and self.uid not in seen.owners:
            return
        self.observed[name] = seen
        if seen.terminating:
            self.terminating.add(name)
        self._members.setdefault(seen.group_index, {})[name] = seen
        dirty.add(seen.group_index)
