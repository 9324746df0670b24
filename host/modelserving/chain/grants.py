"""The Pod privilege inventory by path: which patch operations can change a Pod's privileges.

``may_grant`` is False only for paths no privilege is read from (labels, plain annotations,
scheduling fields, a container's env, args, image or resources), so the policy skips the Pod
Security comparison (``modelserving.chain.pss``) for them; ``adds_capabilities_only`` tells an
operation that only adds privileged capabilities (``allowedCapabilities`` alone decides it).
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any

from modelserving.api.hook import PatchOperation
from modelserving.api.policy import BASELINE_CAPABILITIES, capability_name
from modelserving.chain import pss
from modelserving.chain.jsonpatch import split_tokens

_CONTAINER_KINDS = pss.CONTAINER_KINDS
_APPARMOR_ANNOTATION = "container.apparmor.security.beta.kubernetes.io/"
_PROBES = ("livenessProbe", "readinessProbe", "startupProbe")

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
    """Whether ``op`` can change what ``privileges`` finds. False for paths that no privilege is
    read from (labels, plain annotations, scheduling fields, a container's env, args, image or
    resources), and for a few values that hold none where one could be (``reads_value``); a
    property test checks this."""
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
        if _reads_container_value(op, tokens):
            return _REACHES[tokens[3]](op.get("value"), tokens[4:])
        return tokens[3] not in _NEUTRAL_CONTAINER_FIELDS
    return True


def reads_value(op: PatchOperation) -> bool:
    """Whether ``may_grant(op)`` depends on the operation's value, not only on its name and path:
    an ``add`` or ``replace`` of the whole annotations map, of a container's ports (or one port),
    of a whole probe, of its lifecycle (or one handler)."""
    if op["op"] not in ("add", "replace"):
        return False
    tokens = split_tokens(op["path"])
    if tokens == ("metadata", "annotations"):
        return True
    return len(tokens) >= 4 and tokens[0] == "spec" and _reads_container_value(op, tokens)


def _reads_container_value(op: PatchOperation, tokens: tuple[str, ...]) -> bool:
    """An ``add`` or ``replace`` of a container field (``tokens[3]``) whose value alone tells
    whether it reaches a host: a port list or one port, a probe, the lifecycle or one of its
    handlers."""
    if op["op"] not in ("add", "replace") or tokens[1] not in _CONTAINER_KINDS:
        return False
    depth = _VALUE_DEPTHS.get(tokens[3])
    return depth is not None and len(tokens) <= depth


def _ports_reach(value: Any, below: tuple[str, ...]) -> bool:
    """Whether ports (the list, or one port when ``below`` names it) open a host port."""
    ports = [value] if below else value
    return isinstance(ports, list) and any(
        isinstance(p, Mapping) and bool(p.get("hostPort")) for p in ports
    )


def _handler_reaches(handler: Any) -> bool:
    """Whether a probe or lifecycle handler sends the kubelet to a host (a value that is not
    a map reaches nothing: ``pss`` reads no facts from it)."""
    if not isinstance(handler, Mapping):
        return False
    for action in ("httpGet", "tcpSocket"):
        target = handler.get(action)
        if isinstance(target, Mapping) and target.get("host"):
            return True
    return False


def _lifecycle_reaches(value: Any, below: tuple[str, ...]) -> bool:
    if below:  # one handler: postStart, preStop (any other name is not read)
        return below[0] in _HANDLERS and _handler_reaches(value)
    return isinstance(value, Mapping) and any(_handler_reaches(value.get(h)) for h in _HANDLERS)


_HANDLERS = ("postStart", "preStop")
_REACHES: dict[str, Callable[[Any, tuple[str, ...]], bool]] = {
    "ports": _ports_reach,
    "lifecycle": _lifecycle_reaches,
    **{probe: (lambda value, _below: _handler_reaches(value)) for probe in _PROBES},
}
_VALUE_DEPTHS = {"ports": 5, "lifecycle": 5, **dict.fromkeys(_PROBES, 4)}
"""How deep into each such field an operation's value is judged (a port, a handler)."""


_CAPABILITY_PATH = ("securityContext", "capabilities", "add")


def toward_capabilities(op: PatchOperation) -> bool:
    """Whether ``op`` is an ``add`` at a path an operation that only adds capabilities can have
    (``adds_capabilities_only`` reads its value too): a container's ``securityContext``, its
    ``capabilities``, their ``add`` list or an item of it."""
    if op["op"] != "add":
        return False
    tokens = split_tokens(op["path"])
    if len(tokens) < 4 or tokens[0] != "spec" or tokens[1] not in _CONTAINER_KINDS:
        return False
    tail = tokens[3:]
    return len(tail) <= len(_CAPABILITY_PATH) + 1 and tail[:3] == _CAPABILITY_PATH[: len(tail)]


def adds_capabilities_only(op: PatchOperation) -> bool:
    """Whether ``op`` only adds privileged capabilities to a container: an ``add`` of
    ``securityContext.capabilities.add`` items, or of the maps and list on the way holding
    nothing else, none of them a Pod Security baseline capability. Such an operation needs no
    path rule; ``allowedCapabilities`` alone decides (the privilege check), and an ``add`` over
    an existing map still counts as a replace. Baseline capabilities are not privileges, so the
    privilege check would let them through: adding one (say back into a container that drops
    ALL) still needs a path rule."""
    if not toward_capabilities(op):
        return False
    tail = split_tokens(op["path"])[3:]
    value: Any = op["value"]
    if len(tail) == len(_CAPABILITY_PATH) + 1:  # one item: .../add/- or .../add/<index>
        return _privileged_capability(value)
    for key in _CAPABILITY_PATH[len(tail) :]:
        if not isinstance(value, dict) or list(value) != [key]:
            return False
        value = value[key]
    return isinstance(value, list) and bool(value) and all(map(_privileged_capability, value))


def added_capabilities(op: PatchOperation) -> list[Any]:
    """The capabilities an operation that ``adds_capabilities_only`` adds, as written."""
    tail = split_tokens(op["path"])[3:]
    value: Any = op["value"]
    if len(tail) == len(_CAPABILITY_PATH) + 1:
        return [value]
    for key in _CAPABILITY_PATH[len(tail) :]:
        value = value[key]
    return list(value)


_BASELINE = frozenset(BASELINE_CAPABILITIES)


def _privileged_capability(cap: Any) -> bool:
    """Anything but a baseline capability (a name that is not valid included: the privilege check
    refuses it)."""
    return capability_name(cap) not in _BASELINE
