"""Pure workload generation: a ModelServing in, the desired ServingGroups, Pods and Services out.

No I/O; the controller and ``modelserving render`` share it.
"""

from modelserving.workload.plan import (
    DesiredPod,
    GroupPlan,
    RoleReplicaPlan,
    label_selector,
    plan,
    plan_group,
)
from modelserving.workload.revision import revision

__all__ = [
    "DesiredPod",
    "GroupPlan",
    "RoleReplicaPlan",
    "label_selector",
    "plan",
    "plan_group",
    "revision",
]
