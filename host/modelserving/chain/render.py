"""Everything the controller would create for one ModelServing, plugins applied, without a cluster.

Used by ``modelserving render`` and by tests that compare against Kthena's output.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from modelserving.api.modelserving import ModelServing
from modelserving.chain.build import build_chain
from modelserving.chain.run import Chain
from modelserving.chain.step import Outcome
from modelserving.workload.plan import plan


@dataclass
class Rendered:
    """The objects of one ModelServing, and per Pod the outcome of each in-scope plugin."""

    objects: list[dict[str, Any]] = field(default_factory=list)
    outcomes: dict[str, list[Outcome]] = field(default_factory=dict)


def render(ms: ModelServing, chain: Chain | None = None, gang: bool = False) -> Rendered:
    """Pods (after OnPodCreate), headless Services and, with ``gang``, Volcano PodGroups.

    Raises PluginConfigError for a bad plugin list and PluginFailure when a plugin with failure
    policy Fail fails; Ignore-policy failures are recorded in ``outcomes``.
    """
    chain = chain if chain is not None else build_chain(ms)
    out = Rendered()
    for group in plan(ms, gang=gang):
        if group.pod_group is not None:
            out.objects.append(group.pod_group)
        for replica in group.roles:
            for desired in replica.pods():
                result = chain.on_pod_create(desired)
                out.objects.append(result.pod)
                out.outcomes[desired.name] = result.outcomes
            if replica.service is not None:
                out.objects.append(replica.service)
    return out
