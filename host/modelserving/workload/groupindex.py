"""What a pass needs to know of every ServingGroup, kept as counts and sets from pass to pass.

A pass reads every ServingGroup of its ModelServing: for the status (how many are live,
updated, Ready), for the rolling update (which are outdated, how many new ones are not Ready
yet), for recovery (which have failed Pods), for membership (which lack a Pod or a Service) and
for the OnPodReady hooks. While a fleet's Pods turn Ready one event at a time, that made each
pass O(ServingGroups) for a change in one of them: 18.5 ms a pass at 10,000 Pods.

``GroupIndex`` keeps one ``Verdict`` per ServingGroup, worked out from its ``Group`` (its Pods),
its Services and PodGroup, and the pass's context (the revisions, the role templates, the
partition, the known history). A later pass with the same context works out again only the
ServingGroups whose Pods, Services or PodGroup changed, and reads the rest from the counts and
sets. A verdict never depends on what the pass itself decides (the Pods it deletes): ``sync``
adds those, for the few ServingGroups they touch.

An index built afresh for every pass decides exactly as a kept one (``tests/unit/workload/
test_podset.py`` checks that on random histories).
"""

from __future__ import annotations

import bisect
from collections.abc import Hashable
from dataclasses import dataclass
from typing import Any

from modelserving.workload.podset import Group

LIVE_LOG_MAX = 4096
"""Changes of the live ServingGroups an index remembers for ``live_changes_since``."""


@dataclass(frozen=True, slots=True)
class Verdict:
    """What a pass reads of one ServingGroup, before it deletes anything."""

    live: bool
    """It has Pods not terminating."""
    revision: str
    """The revision its live Pods share ("" when they disagree)."""
    updated: bool
    """At the update revision (RoleRollingUpdate: every live Pod at its role's new template)."""
    ready: bool
    """Every Pod its revision describes (RoleRollingUpdate: the current spec) exists, is not
    terminating, and is Ready."""
    complete: bool
    """Membership has nothing to create or delete in it (its Pods, Services and PodGroup are
    those its revision describes)."""
    failed: bool
    """It has live Pods that failed (recovery looks at it)."""
    awaiting: bool
    """It has Ready Pods whose OnPodReady hooks have not run."""
    new_unready: bool
    """Live, at or above the partition, at the update revision and not Ready: the rolling
    update counts it as unavailable."""
    outdated: bool
    """Live, at or above the partition, not at the update revision: the rolling update may
    recreate it."""


class GroupIndex:
    """The verdicts of one ModelServing's ServingGroups under one context, and their sums."""

    def __init__(self, context: Hashable) -> None:
        self.context = context
        self.seen: dict[int, Group] = {}
        """The ``Group`` each verdict was worked out from, by ServingGroup index."""
        self.verdicts: dict[int, Verdict] = {}
        self.live: set[int] = set()
        self.updated = 0
        """Live and updated."""
        self.ready = 0
        """Live and Ready."""
        self.new_unready = 0
        self.older: dict[str, set[int]] = {}
        """The live ServingGroups not updated, by their (non-empty) revision."""
        self.outdated: set[int] = set()
        self.not_updated: set[int] = set()
        """Live and not updated."""
        self.incomplete: set[int] = set()
        """Live and not complete."""
        self.failed: set[int] = set()
        self.awaiting: set[int] = set()
        self.live_version = 0
        """Bumped whenever ``live`` changes (what is worked out from it is kept until then)."""
        self._live_log: list[int] = []
        """The ServingGroup of each bump of ``live_version`` since ``_log_base``, in order."""
        self._log_base = 0
        self.live_sorted: list[int] = []
        """``live``, in order."""
        self.services_version = 0
        self.pod_groups_version = 0
        """The versions of the Services and PodGroups (``sync._Owned``) the verdicts read."""
        self.kept: dict[str, Any] = {}
        """Answers worked out from the whole index (the live ServingGroups' names, the
        Services and PodGroups no live one claims, the PodGroup patches), by what: each with
        what it holds for."""

    def put(self, index: int, group: Group, verdict: Verdict) -> None:
        """Take ``verdict`` as ServingGroup ``index``'s (``group``: its Pods now)."""
        self.seen[index] = group
        old = self.verdicts.get(index)
        if old == verdict:
            return
        if old is not None:
            self._count(index, old, -1)
        self.verdicts[index] = verdict
        self._count(index, verdict, 1)
        if old is None or old.live != verdict.live:
            self._bump(index)

    def remove(self, index: int) -> None:
        """Forget ServingGroup ``index`` (it has no Pods any more)."""
        self.seen.pop(index, None)
        old = self.verdicts.pop(index, None)
        if old is not None:
            self._count(index, old, -1)
            if old.live:
                self._bump(index)

    def _bump(self, index: int) -> None:
        self.live_version += 1
        log = self._live_log
        log.append(index)
        if len(log) > LIVE_LOG_MAX:
            drop = len(log) // 2
            del log[:drop]
            self._log_base += drop

    def live_changes_since(self, version: int) -> set[int] | None:
        """The ServingGroups whose liveness may have changed since ``live_version`` was
        ``version`` (None: not known, so any)."""
        start = version - self._log_base
        if start < 0 or version > self.live_version:
            return None
        return set(self._live_log[start:])

    def _count(self, index: int, verdict: Verdict, sign: int) -> None:
        """Add (``sign`` 1) or take away (-1) one verdict in the counts and sets."""

        def mark(found: set[int], on: bool) -> None:
            if on:
                if sign > 0:
                    found.add(index)
                else:
                    found.discard(index)

        live = verdict.live
        if live:
            if sign > 0:
                bisect.insort(self.live_sorted, index)
            else:
                self.live_sorted.pop(bisect.bisect_left(self.live_sorted, index))
        mark(self.live, live)
        if live and verdict.updated:
            self.updated += sign
        if live and verdict.ready:
            self.ready += sign
        if verdict.new_unready:
            self.new_unready += sign
        mark(self.not_updated, live and not verdict.updated)
        mark(self.incomplete, live and not verdict.complete)
        mark(self.outdated, verdict.outdated)
        mark(self.failed, verdict.failed)
        mark(self.awaiting, verdict.awaiting)
        if live and not verdict.updated and verdict.revision:
            same = self.older.setdefault(verdict.revision, set())
            mark(same, True)
            if not same:
                del self.older[verdict.revision]

    def most_common_older(self) -> str:
        """The revision most live, not updated ServingGroups share; on a tie, that of the
        lowest index ("" when there is none)."""
        if not self.older:
            return ""
        return max(self.older.items(), key=lambda kv: (len(kv[1]), -min(kv[1])))[0]
