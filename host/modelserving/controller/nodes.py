"""What the Node watch says of the cluster's Nodes: which are lost (deleted, or not Ready).

A Pod on a lost Node must stop counting as available when the Node goes, not a minute later
when the Pod garbage collector or the node lifecycle controller gets to it. ``NodeStates`` keeps
the lost ones from the watch's events; the reconciler reads them on every pass (and confirms a
deletion with a read of the Node before it deletes any Pod for it).
"""

from __future__ import annotations

import threading
from collections.abc import Mapping
from typing import Any

from modelserving.workload.observed import NODE_DELETED, NODE_NOT_READY


def node_state(event_type: str | None, node: Mapping[str, Any]) -> str | None:
    """The state an event shows of a Node: ``NODE_DELETED``, ``NODE_NOT_READY`` (its Ready
    condition is False or Unknown), or None (Ready, or not reported yet)."""
    if event_type == "DELETED":
        return NODE_DELETED
    for cond in (node.get("status") or {}).get("conditions") or []:
        if cond.get("type") == "Ready":
            return None if cond.get("status") == "True" else NODE_NOT_READY
    return None


class NodeStates:
    """Lost Nodes by name; thread-safe (the watch writes, reconcile workers read)."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._lost: dict[str, str] = {}
        self._present: set[str] = set()
        """Every Node the watch has shown and not seen deleted."""

    def event(self, event_type: str | None, node: Mapping[str, Any]) -> bool:
        """Take one watch event in; whether the Node's state changed (lost, or back)."""
        name = str((node.get("metadata") or {}).get("name", ""))
        state = node_state(event_type, node)
        with self._lock:
            if event_type == "DELETED":
                self._present.discard(name)
            else:
                self._present.add(name)
            before = self._lost.get(name)
            if state is None:
                self._lost.pop(name, None)
            else:
                self._lost[name] = state
            # a deleted Node's record is kept until its Pods are gone: it is small, and a Node
            # of that name that comes back replaces it
        return before != state

    def listed(self, names: set[str]) -> list[str]:
        """A fresh list of the Nodes (after the watch was gone): those shown before and not
        in it were deleted meanwhile, with no event; they are taken as deleted, and returned."""
        with self._lock:
            gone = sorted(self._present - names)
        for name in gone:
            self.event("DELETED", {"metadata": {"name": name}})
        return gone

    def lost(self) -> dict[str, str]:
        with self._lock:
            return dict(self._lost)
