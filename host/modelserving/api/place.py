"""Where a Pod sits in its ModelServing (``PodPlace``): the four facts every layer passes on.

The workload's plan puts them on each ``DesiredPod``, the chain hands them to plugins in a
``HookRequest``, and the ABI codec writes them into a request as ``servingGroup``, ``roleName``,
``roleId`` and ``isEntry``: one value, under one set of names, from plan to plugin.
"""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True, slots=True)
class PodPlace:
    """A Pod's ServingGroup, its role, the id of its role replica and whether it is the
    replica's entry Pod (else one of its workers)."""

    serving_group: str
    role_name: str
    role_id: str
    is_entry: bool
