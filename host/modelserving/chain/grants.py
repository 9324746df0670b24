"""The Pod privilege inventory by path: which patch operations can change a Pod's privileges.

``may_grant`` is False only for paths no privilege is read from (labels, plain annotations,
scheduling fields, a container's env, args, image or resources), so the policy skips the Pod
Security comparison (``modelserving.chain.pss``) for them; ``adds_capabilities_only`` tells an
operation that only adds privileged capabilities (``allowedCapabilities`` alone decides it).
"""

from __future__ import annotations

from typing import Any

from modelserving.api.hook import PatchOperation
from modelserving.api.policy import BASELINE_CAPABILITIES, capability_name
from modelserving.chain import pss
from modelserving.chain.jsonpatch import split_tokens

_CONTAINER_KINDS = pss.CONTAINER_KINDS
_APPARMOR_ANNOTATION = "container.apparmor.security.beta.kubernetes.io/"

_NEUTRAL_SPEC_FIELDS = frozenset(
    {
        "runtimeClassName",
        "nodeSelector",
        "affinity",
        "tolerations",
        "topologySpreadConstraints",
        "schedulerName",
        "priorityClassName",
        "priority",
        "preemptionPolicy",
        "terminationGracePeriodSeconds",
        "activeDeadlineSeconds",
        "dnsPolicy",
        "dnsConfig",
        "readinessGates",
    }
)
_NEUTRAL_CONTAINER_FIELDS = frozenset(
    {
        "env",
        "envFrom",
        "args",
        "command",
        "image",
        "imagePullPolicy",
        "resources",
        "workingDir",
        "terminationMessagePath",
        "terminationMessagePolicy",
    }
)


def may_grant(op: PatchOperation) -> bool:
    """Whether ``op`` can change what ``privileges`` finds. False only for paths that no
    privilege is read from (labels, plain annotations, scheduling fields, a container's env,
    args, image or resources); a property test checks this."""
    if op["op"] == "test":
        return False
    tokens = split_tokens(op["path"])
    if len(tokens) < 2:
        return True
    head, field = tokens[0], tokens[1]
    if head == "metadata":
        if field != "annotations" or op["op"] == "remove":
            return False
        if len(tokens) == 2:  # the whole map: only an AppArmor key in it can grant anything
            value = op.get("value")
            keys = value.keys() if isinstance(value, dict) else [_APPARMOR_ANNOTATION]
            return any(str(k).startswith(_APPARMOR_ANNOTATION) for k in keys)
        return tokens[2].startswith(_APPARMOR_ANNOTATION)
    if head != "spec":
        return True
    if field in _NEUTRAL_SPEC_FIELDS:
        return False
    if field in _CONTAINER_KINDS and len(tokens) >= 4:
        return tokens[3] not in _NEUTRAL_CONTAINER_FIELDS
    return True


_CAPABILITY_PATH = ("securityContext", "capabilities", "add")


def adds_capabilities_only(op: PatchOperation) -> bool:
    """Whether ``op`` only adds privileged capabilities to a container: an ``add`` of
    ``securityContext.capabilities.add`` items, or of the maps and list on the way holding
    nothing else, none of them a Pod Security baseline capability. Such an operation needs no
    path rule; ``allowedCapabilities`` alone decides (the privilege check), and an ``add`` over
    an existing map still counts as a replace. Baseline capabilities are not privileges, so the
    privilege check would let them through: adding one (say back into a container that drops
    ALL) still needs a path rule."""
    if op["op"] != "add":
        return False
    tokens = split_tokens(op["path"])
    if len(tokens) < 4 or tokens[0] != "spec" or tokens[1] not in _CONTAINER_KINDS:
        return False
    tail = tokens[3:]
    if len(tail) > len(_CAPABILITY_PATH) + 1 or tuple(tail[:3]) != _CAPABILITY_PATH[: len(tail)]:
        return False
    value: Any = op["value"]
    if len(tail) == len(_CAPABILITY_PATH) + 1:  # one item: .../add/- or .../add/<index>
        return _privileged_capability(value)
    for key in _CAPABILITY_PATH[len(tail) :]:
        if not isinstance(value, dict) or list(value) != [key]:
            return False
        value = value[key]
    return isinstance(value, list) and bool(value) and all(map(_privileged_capability, value))


_BASELINE = frozenset(BASELINE_CAPABILITIES)


def _privileged_capability(cap: Any) -> bool:
    """Anything but a baseline capability (a name that is not valid included: the privilege check
    refuses it)."""
    return capability_name(cap) not in _BASELINE
