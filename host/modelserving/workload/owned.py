"""The Services or PodGroups a ModelServing controls, kept from pass to pass: ``OwnedSet``.

A pass reads a ModelServing's Services and PodGroups by name and by the ServingGroup their label
names. During a rolling update some of them go and come in every pass, and reading them all
again each time made a pass O(Services): 3 to 4 ms of a 10,000-Pod ModelServing's pass went to
it (``docs/performance.md``). An ``OwnedSet`` is brought up to date either from every object
(``refresh``, or ``sync`` given a list) or from the names that changed since (``apply``, as the
controller's cache gives them: ``ObjectCache.changes``), and names in ``changed`` what differs
from the version before, so what a pass worked out from the objects is kept until they change.

What a pass reads does not depend on the order of the objects: a ServingGroup's names are kept
sorted, so a set brought up to date from its changes and one read whole answer alike.
"""

from __future__ import annotations

import bisect
import itertools
import operator
from collections.abc import Iterable, Mapping
from typing import Any

from modelserving.api import labels
from modelserving.workload.kept import KEPT_MAX
from modelserving.workload.observed import owned_by

_VERSIONS = itertools.count(1)

Entry = tuple[Mapping[str, Any], bool, str | None]
"""An object, whether the ModelServing controls it, and its ServingGroup label."""


class OwnedSet:
    """The objects of one kind a ModelServing (``uid``; empty: any) controls, as last seen,
    with what a pass reads of them; shared by the passes, read-only for them.

    Whether the ModelServing controls an object, and the ServingGroup its label names, are
    remembered by the object's identity: the same object, the same answer. A change that finds
    every object the same keeps the ``version``; one that does not takes a new one and names in
    ``changed`` the names and ServingGroup labels, old and new, of what differs. Not
    thread-safe: one pass of a ModelServing at a time (the work queue's promise)."""

    def __init__(self, uid: str = "") -> None:
        self.uid = uid
        self._reset(0)

    def _reset(self, version: int) -> None:
        self.table: dict[str, Entry] = {}
        """By name: every object seen, controlled or not."""
        self.present: list[Mapping[str, Any]] | None = None
        """The objects of the last ``refresh``, in its order (None after ``apply``, or before
        any refresh: then a refresh compares every object)."""
        self.version = version
        self.previous = -1
        """The version before ``version`` (``changed`` is what differs between the two)."""
        self.changed: set[str] = set()
        self.objects: dict[str, Mapping[str, Any]] = {}
        """The controlled objects by name."""
        self.groups: dict[str, str | None] = {}
        """The ServingGroup label of each controlled object, by name."""
        self.by_group: dict[str, list[str]] = {}
        """The controlled objects' names, sorted, by their ServingGroup label ("None": none)."""
        self.whole = False
        """Brought up to date by a ``refresh``, and by every change since (``apply`` needs it)."""

    def changes_since(self, version: int) -> set[str] | None:
        """Names and labels of what changed since ``version`` (None: not known, so anything)."""
        if version == self.version:
            return set()
        if version == self.previous:
            return self.changed
        return None

    def refresh(self, objects: Iterable[Mapping[str, Any]]) -> None:
        """Take ``objects`` as they are now. One that raises (an object without a name) leaves
        the set empty, at a version whose changes are not known."""
        try:
            self._refresh(objects)
        except BaseException:
            self._reset(next(_VERSIONS))
            raise

    def apply(self, changes: Mapping[str, Mapping[str, Any] | None]) -> None:
        """Take the objects of these names as they are now (None: gone), the others as they
        were: O(changes). Only for a set kept ``whole``; one that raises leaves it empty."""
        if not self.whole:
            raise ValueError("apply needs a set brought up to date by refresh")
        try:
            changed: set[str] = set()
            for name, obj in changes.items():
                seen = self.table.get(name)
                if seen is None if obj is None else seen is not None and seen[0] is obj:
                    continue  # gone and not known, or the same object
                if seen is not None:
                    self._drop(name, seen)
                    changed.add(str(seen[2]))
                if obj is not None:
                    if str(obj["metadata"]["name"]) != name:
                        raise ValueError(f"the change of {name!r} names another object")
                    changed.add(str(self._take(name, obj)[2]))
                changed.add(name)
            self.present = None
            if changed:
                self._advance(changed)
        except BaseException:
            self._reset(next(_VERSIONS))
            raise

    def _refresh(self, objects: Iterable[Mapping[str, Any]]) -> None:
        items = objects if isinstance(objects, list | tuple) else list(objects)
        present = self.present
        if (
            present is not None
            and len(items) == len(present)
            and all(map(operator.is_, items, present))
        ):
            return  # the same objects as the last refresh, and nothing applied since
        table = self.table
        changed: set[str] = set()
        names: set[str] = set()
        for obj in items:
            name = str(obj["metadata"]["name"])
            names.add(name)
            seen = table.get(name)
            if seen is not None and seen[0] is obj:
                continue
            if seen is not None:
                self._drop(name, seen)
                changed.add(str(seen[2]))
            changed.add(name)
            changed.add(str(self._take(name, obj)[2]))
        for name in table.keys() - names:
            seen = table[name]
            self._drop(name, seen)
            changed.add(name)
            changed.add(str(seen[2]))
        self.present = list(items)
        self.whole = True
        if changed:
            self._advance(changed)

    def _take(self, name: str, obj: Mapping[str, Any]) -> Entry:
        meta = obj.get("metadata") or {}
        group = (meta.get("labels") or {}).get(labels.GROUP_NAME_LABEL)
        entry = self.table[name] = (
            obj,
            not self.uid or owned_by(obj, self.uid),
            None if group is None else str(group),
        )
        if entry[1]:
            self.objects[name] = obj
            self.groups[name] = entry[2]
            bisect.insort(self.by_group.setdefault(str(entry[2]), []), name)
        return entry

    def _drop(self, name: str, seen: Entry) -> None:
        del self.table[name]
        if not seen[1]:
            return
        del self.objects[name]
        del self.groups[name]
        key = str(seen[2])
        names = self.by_group[key]
        names.remove(name)
        if not names:
            del self.by_group[key]

    def _advance(self, changed: set[str]) -> None:
        self.previous, self.version = self.version, next(_VERSIONS)
        self.changed = changed


_KEPT: dict[tuple[str, str], OwnedSet] = {}
"""By kind and ModelServing UID: the sets of ``sync`` calls given lists."""


def owned_set(kind: str, uid: str, objects: OwnedSet | Iterable[Mapping[str, Any]]) -> OwnedSet:
    """The objects (Services or PodGroups) the ModelServing with ``uid`` controls (all of them
    when ``uid`` is empty): ``objects`` itself when it is an ``OwnedSet`` of that ModelServing,
    else the set kept from the last call of the same kind and ModelServing, refreshed."""
    if isinstance(objects, OwnedSet):
        if objects.uid == uid and objects.whole:
            return objects
        objects = [entry[0] for entry in objects.table.values()]
    found = _KEPT.get((kind, uid))
    if found is None:
        if len(_KEPT) >= KEPT_MAX // 16:
            _KEPT.clear()
        found = _KEPT[(kind, uid)] = OwnedSet(uid)
    found.refresh(objects)
    return found
