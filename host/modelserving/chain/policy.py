"""Enforces the operator's PatchPolicy on a plugin's JSON Patch: the one path for native and WASM.

``PatchValidator.apply`` checks each operation's shape and path against the allow-list, applies
the patch copy-on-write (RFC 6902, one operation at a time so that an ``add`` over an existing
member is judged as the ``replace`` it is; only the maps and lists on an operation's path are
copied), then checks what may never change: identity fields, the controller's own labels and
annotations, the fields the operator protects (``modelserving.chain.protected``), and the Pod's
privileges: no Pod Security control may end weaker than the template made it unless the policy
allows it (``modelserving.chain.pss`` compares; skipped for operations that cannot change one).
Any violation raises ``PatchRejected``; the chain reports it as ``ForbiddenPatch``.
"""

from __future__ import annotations

import functools
import re
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from modelserving.api.errors import PatchRejected
from modelserving.api.hook import PATCH_OPS, PatchOperation
from modelserving.api.jsondata import MAX_DEPTH, json_copy, json_problem
from modelserving.api.policy import (
    BASELINE_CAPABILITIES,
    PatchPolicy,
    capability_name,
    sysctl_name,
)
from modelserving.chain import pss
from modelserving.chain.protected import Protections
from modelserving.plugins.patch import escape

_ALLOWS_CACHE_SIZE = 8192
_BAD_ESCAPE = re.compile(r"~(?![01])")
_IDENTITY = ("name", "namespace", "uid", "ownerReferences", "generateName")
_CONTAINER_KINDS = pss.CONTAINER_KINDS


def split_pointer(path: str) -> list[str]:
    """RFC 6901 pointer -> unescaped reference tokens; raises PatchRejected when malformed."""
    return list(_split_pointer(path))


MAX_POINTER_LENGTH = 1024
"""Longest JSON Pointer a patch may use; real Pod paths stay under 200 characters."""


def _split_pointer(path: str) -> tuple[str, ...]:
    if len(path) > MAX_POINTER_LENGTH:
        raise PatchRejected(
            path[:80] + "...", f"a JSON Pointer may have at most {MAX_POINTER_LENGTH} characters"
        )
    if path.count("/") > MAX_DEPTH:
        raise PatchRejected(path[:80] + "...", f"the path is more than {MAX_DEPTH} levels deep")
    return _split_short_pointer(path)


@functools.lru_cache(maxsize=4096)
def _split_short_pointer(path: str) -> tuple[str, ...]:
    if path == "":
        return ()
    if not path.startswith("/"):
        raise PatchRejected(path, "a JSON Pointer must start with '/'")
    if _BAD_ESCAPE.search(path):
        raise PatchRejected(path, "a JSON Pointer may use '~' only as '~0' or '~1'")
    return tuple(t.replace("~1", "/").replace("~0", "~") for t in path[1:].split("/"))


@dataclass(frozen=True)
class _Rule:
    segments: tuple[str, ...]
    deep: bool
    ops: frozenset[str]

    def matches(self, tokens: Sequence[str], op: str) -> bool:
        if op not in self.ops:
            return False
        n = len(self.segments)
        if self.deep:
            if len(tokens) <= n:
                return False
        elif len(tokens) != n:
            return False
        return all(s == "*" or s == t for s, t in zip(self.segments, tokens, strict=False))


def _compile(policy: PatchPolicy) -> tuple[_Rule, ...]:
    rules = []
    for rule in policy.allowed_paths:
        segments = split_pointer(rule.path)
        deep = bool(segments) and segments[-1] == "**"
        if deep:
            segments = segments[:-1]
        rules.append(_Rule(tuple(segments), deep, frozenset(rule.ops)))
    return tuple(rules)


def check_shape(raw: Any, copy_values: bool = True) -> list[PatchOperation]:
    """A patch must be a list (or tuple) of ``{op, path[, value]}`` maps with known ops and no
    other keys. ``copy_values=False`` is for operations nobody else holds (freshly decoded)."""
    if not isinstance(raw, list | tuple):
        raise PatchRejected("", f"a patch is a list of operations, not {type(raw).__name__}")
    ops: list[PatchOperation] = []
    for i, item in enumerate(raw):
        where = f"operation {i}"
        if not isinstance(item, dict | Mapping):
            raise PatchRejected("", f"{where} is not a map")
        op, path = item.get("op"), item.get("path")
        if not isinstance(op, str) or op not in PATCH_OPS:
            raise PatchRejected(
                path if isinstance(path, str) else "",
                f"{where}: op {op!r} is not one of add, remove, replace, test",
            )
        if not isinstance(path, str):
            raise PatchRejected("", f"{where}: path must be a string")
        extra = set(item) - {"op", "path", "value"}
        if extra:
            raise PatchRejected(path, f"{where}: unknown keys {sorted(extra)}")
        if op != "remove" and "value" not in item:
            raise PatchRejected(path, f"{where}: '{op}' needs a value")
        # The value's depth counts from where it lands, so no sequence of operations can build a
        # Pod nested deeper than MAX_DEPTH (and no later walk of the Pod can exhaust the stack).
        room = MAX_DEPTH - len(_split_pointer(path))
        if room < 0:
            raise PatchRejected(path, f"{where}: the path is more than {MAX_DEPTH} levels deep")
        problem = json_problem(item["value"], room) if "value" in item else None
        if problem:
            raise PatchRejected(path, f"{where}: the value {problem}")
        # A copy: the value lands in the Pod by reference, and must not be shared with the
        # plugin's own objects.
        ops.append(json_copy(dict(item)) if copy_values else item)  # type: ignore[arg-type]
    return ops


class PatchValidator:
    """Validates and applies patches under one PatchPolicy (compiled once)."""

    def __init__(self, policy: PatchPolicy | None = None) -> None:
        self.policy = policy or PatchPolicy()
        self._rules = _compile(self.policy)
        self._allowed: dict[tuple[str, str], bool] = {}
        self._prefixes = tuple(self.policy.protected_prefixes)
        self._protections = Protections(self.policy.protected_fields)
        self._open = frozenset(c for c, flag in _FLAGS.items() if getattr(self.policy, flag))
        self._listed: dict[str, frozenset[str | None]] = {
            pss.CAPABILITIES: frozenset(map(capability_name, self.policy.allowed_capabilities)),
            pss.SYSCTLS: frozenset(map(sysctl_name, self.policy.allowed_sysctls)),
            pss.VOLUME_TYPES: frozenset(self.policy.allowed_volume_types),
        }

    def allows(self, path: str, op: str) -> bool:
        """Whether the allow-list lets ``op`` change ``path`` (answers cached per validator)."""
        key = (path, op)
        answer = self._allowed.get(key)
        if answer is None:
            tokens = split_pointer(path)
            answer = any(rule.matches(tokens, op) for rule in self._rules)
            if len(self._allowed) >= _ALLOWS_CACHE_SIZE:
                self._allowed.clear()
            self._allowed[key] = answer
        return answer

    def check_paths(self, ops: Iterable[PatchOperation]) -> None:
        for op in ops:
            if op["op"] == "test" or _adds_capabilities_only(op):
                continue
            if not self.allows(op["path"], op["op"]):
                raise PatchRejected(
                    op["path"],
                    f"'{op['op']}' is not allowed here (patchPolicy.allowedPaths)",
                )

    def apply(self, pod: Mapping[str, Any], raw_ops: Any) -> dict[str, Any]:
        """Return the patched copy of ``pod``; raise PatchRejected on any violation."""
        return self.apply_patch(pod, raw_ops)[0]

    def apply_patch(
        self, pod: Mapping[str, Any], raw_ops: Any, copy_values: bool = True
    ) -> tuple[dict[str, Any], list[PatchOperation]]:
        """The patched Pod and the validated operations (copies, safe to keep).

        ``pod`` is never changed. The patched Pod is built copy-on-write: only the maps and lists
        on the path of an operation are new, everything else is shared with ``pod``, so treat
        both as read-only (or copy the part you change). ``copy_values=False`` puts the
        operations' values into the Pod as they are: only for operations no one else holds.
        """
        ops = check_shape(raw_ops, copy_values)
        return self._apply_checked(pod, ops), ops

    def _apply_checked(self, pod: Mapping[str, Any], ops: list[PatchOperation]) -> dict[str, Any]:
        if not ops:
            return dict(pod)
        self.check_paths(ops)
        after: Any = pod
        owned: set[int] = set()  # containers this patch copied: changed in place from then on
        for op in ops:  # one by one, so that an 'add' is judged by what it does to this Pod
            if (
                op["op"] == "add"
                and _replaces_member(after, op["path"])
                and not self.allows(op["path"], "replace")
            ):
                raise PatchRejected(
                    op["path"],
                    "'add' over an existing value replaces it, and 'replace' is not allowed here "
                    "(patchPolicy.allowedPaths)",
                )
            after = _apply_one(after, op, owned)
        if not isinstance(after, dict):
            raise PatchRejected("", "the patch replaced the whole Pod")
        self.check_invariants(pod, after, ops)
        return after

    def check_invariants(
        self,
        before: Mapping[str, Any],
        after: Mapping[str, Any],
        ops: Sequence[PatchOperation] | None = None,
    ) -> None:
        """Identity, protected labels, annotations and fields, container and volume names, and
        privileges. With the ``ops`` that led from ``before`` to ``after``, the name and
        privilege checks are skipped when no operation can affect them."""
        meta_b, meta_a = _meta(before), _meta(after)
        for key in _IDENTITY if meta_a is not meta_b else ():
            if meta_b.get(key) != meta_a.get(key):
                raise PatchRejected(f"/metadata/{key}", "plugins may never change a Pod's identity")
        for field in ("labels", "annotations"):
            if meta_b.get(field) is meta_a.get(field):
                continue  # untouched (the patched Pod is built copy-on-write)
            old = _owned(meta_b.get(field), self._prefixes)
            new = _owned(meta_a.get(field), self._prefixes)
            if old != new:
                key = min((k for k in old.keys() | new.keys() if _differs(old, new, k)), key=str)
                raise PatchRejected(
                    f"/metadata/{field}/{escape(str(key))}",
                    f"{field[:-1]} '{key}' belongs to the controller "
                    f"(patchPolicy.protectedPrefixes: {', '.join(self._prefixes)})",
                )
        if before.get("apiVersion") != after.get("apiVersion") or before.get("kind") != after.get(
            "kind"
        ):
            raise PatchRejected("", "plugins may never change apiVersion or kind")
        self._protections.check(before, after)
        if ops is None or any(_touches_names(op, _CONTAINER_KINDS) for op in ops):
            _check_unique_container_names(after)
        if ops is None or any(_touches_names(op, ("volumes",)) for op in ops):
            _check_unique_volume_names(before, after)
        if ops is None or any(_may_grant(op) for op in ops):
            self.check_privileges(before, after)

    def check_privileges(self, before: Mapping[str, Any], after: Mapping[str, Any]) -> None:
        """Refuse the first Pod Security control ``after`` has weaker than ``before`` that the
        policy does not allow to weaken."""
        for weakening in pss.weakenings(pss.pod_facts(before), pss.pod_facts(after)):
            reason = self._refusal(weakening)
            if reason:
                raise PatchRejected(weakening.path, reason)

    def _refusal(self, w: pss.Weakening) -> str | None:
        """Why the policy refuses ``w``, or None when it allows it."""
        if w.control in self._open:
            return None
        control = pss.CONTROLS[w.control]
        weakens = f"weakens Pod Security control '{control.title}'"
        listed = self._listed.get(w.control)
        if w.control == pss.CAPABILITIES:
            if w.value is None:
                return (
                    f"{w.subject} {w.what}, which is not a capability name (letters, digits and "
                    "'_', like SYS_ADMIN or CAP_SYS_ADMIN)"
                )
            if w.value in self._listed[pss.CAPABILITIES]:
                return None
            return (
                f"adds capability {w.value} to {w.subject}; "
                "add it to patchPolicy.allowedCapabilities"
            )
        if listed is not None:
            if w.value in listed:
                return None
            setting = _camel(_LISTS[w.control])
            if w.value is None:
                return f"{w.subject} {w.what}, which is not a sysctl name ({weakens})"
            return f"{w.subject} {w.what}, which {weakens}; add {w.value} to patchPolicy.{setting}"
        unlike = (
            " (every container of the template meets this control)"
            if w.added and control.restricted
            else ""
        )
        setting = _camel(_FLAGS[w.control])
        return f"{w.subject} {w.what}{unlike}, which {weakens} (patchPolicy.{setting} is false)"


# control -> the PatchPolicy flag that lets plugins weaken it
_FLAGS: dict[str, str] = {
    pss.HOST_PROCESS: "allow_host_namespaces",
    pss.HOST_NAMESPACES: "allow_host_namespaces",
    pss.PRIVILEGED: "allow_privileged",
    pss.KEPT_CAPABILITIES: "allow_regaining_capabilities",
    pss.HOST_PATH: "allow_host_path",
    pss.HOST_PORTS: "allow_host_ports",
    pss.APPARMOR: "allow_unconfined",
    pss.SELINUX: "allow_unconfined",
    pss.PROC_MOUNT: "allow_unconfined",
    pss.SECCOMP: "allow_unconfined",
    pss.NO_SECCOMP_PROFILE: "allow_unconfined",
    pss.ESCALATION: "allow_privilege_escalation",
    pss.ESCALATION_NOT_DISABLED: "allow_privilege_escalation",
    pss.RUN_AS_ROOT: "allow_run_as_root",
    pss.NON_ROOT_NOT_REQUIRED: "allow_run_as_root",
    pss.ROOT_USER: "allow_run_as_root",
    pss.HOST_PROBES: "allow_probe_hosts",
}
# control -> the PatchPolicy list of names it may use
_LISTS: dict[str, str] = {
    pss.CAPABILITIES: "allowed_capabilities",
    pss.SYSCTLS: "allowed_sysctls",
    pss.VOLUME_TYPES: "allowed_volume_types",
}
_APPARMOR_ANNOTATION = "container.apparmor.security.beta.kubernetes.io/"


def _camel(snake: str) -> str:
    head, *rest = snake.split("_")
    return head + "".join(word.title() for word in rest)


def _shallow(value: Any) -> Any:
    if isinstance(value, dict):
        return dict(value)
    if isinstance(value, list):
        return list(value)
    return value


def _apply_one(doc: Any, op: PatchOperation, owned: set[int] | None = None) -> Any:
    """Apply one RFC 6902 operation to a copy-on-write copy of ``doc``: only the maps and lists on
    the operation's path are new, so nothing shared with ``doc`` changes. ``owned`` holds the ids
    of containers made by earlier operations of the same patch, which are changed in place
    instead of being copied again. (The tests check this against the jsonpatch library.)"""
    if owned is None:
        owned = set()
    path, name = op["path"], op["op"]
    tokens = _split_pointer(path)
    if name == "test":
        target = _resolve(doc, tokens, path)
        if not _json_equal(target, op["value"]):
            raise PatchRejected(path, "test operation failed: the value differs")
        return doc
    if not tokens:
        if name == "remove":
            raise PatchRejected(path, "patch does not apply to the Pod: cannot remove the Pod")
        return op["value"]
    root = _owned_copy(doc, owned)
    parent = root
    for token in tokens[:-1]:
        key = _member(parent, token, path)
        child = _owned_copy(parent[key], owned)
        parent[key] = child
        parent = child
    _change(parent, tokens[-1], op)
    return root


def _owned_copy(value: Any, owned: set[int]) -> Any:
    """``value`` itself when this patch made it, else a shallow copy that this patch now owns."""
    if id(value) in owned:
        return value
    copy = _shallow(value)
    owned.add(id(copy))
    return copy


def _change(parent: Any, last: str, op: PatchOperation) -> None:
    path, name = op["path"], op["op"]
    if isinstance(parent, dict):
        if name == "add":
            parent[last] = op["value"]
        elif last not in parent:
            raise PatchRejected(path, f"patch does not apply to the Pod: no member '{last}'")
        elif name == "remove":
            del parent[last]
        else:
            parent[last] = op["value"]
        return
    if not isinstance(parent, list):
        raise PatchRejected(
            path, f"patch does not apply to the Pod: a {type(parent).__name__} has no members"
        )
    if name == "add" and last == "-":
        parent.append(op["value"])
        return
    index = _index(last)
    limit = len(parent) + (1 if name == "add" else 0)
    if index is None or index >= limit:
        raise PatchRejected(path, f"patch does not apply to the Pod: no index '{last}'")
    if name == "add":
        parent.insert(index, op["value"])
    elif name == "remove":
        del parent[index]
    else:
        parent[index] = op["value"]


def _index(token: str) -> int | None:
    """An array index token: digits without leading zeros (RFC 6901)."""
    if not token.isascii() or not token.isdigit() or (len(token) > 1 and token[0] == "0"):
        return None
    return int(token)


def _member(parent: Any, token: str, path: str) -> Any:
    """The key or index ``token`` names in ``parent``, which must exist."""
    if isinstance(parent, dict):
        if token in parent:
            return token
    elif isinstance(parent, list):
        index = _index(token)
        if index is not None and index < len(parent):
            return index
    raise PatchRejected(path, f"patch does not apply to the Pod: '{token}' does not exist")


def _resolve(doc: Any, tokens: Sequence[str], path: str) -> Any:
    for token in tokens:
        doc = doc[_member(doc, token, path)]
    return doc


def _json_equal(a: Any, b: Any) -> bool:
    """JSON equality: unlike ``==``, true is not 1 and 1 is not 1.0... except that JSON has one
    number type, so 1 and 1.0 are equal; true and 1 are not."""
    if isinstance(a, bool) or isinstance(b, bool):
        return type(a) is type(b) and a == b
    if isinstance(a, dict):
        return (
            isinstance(b, dict) and a.keys() == b.keys() and all(_json_equal(a[k], b[k]) for k in a)
        )
    if isinstance(a, list):
        return isinstance(b, list) and len(a) == len(b) and all(map(_json_equal, a, b))
    if isinstance(a, int | float) and isinstance(b, int | float):
        return a == b
    return type(a) is type(b) and a == b


def _replaces_member(doc: Any, path: str) -> bool:
    """Whether an 'add' at ``path`` would overwrite a non-null object member (RFC 6902 4.1)."""
    tokens = _split_pointer(path)
    if not tokens:
        return True
    parent = doc
    for token in tokens[:-1]:
        if isinstance(parent, dict | Mapping) and token in parent:
            parent = parent[token]
        elif isinstance(parent, list) and token.isdigit() and int(token) < len(parent):
            parent = parent[int(token)]
        else:
            return False  # it will not apply at all
    return isinstance(parent, dict | Mapping) and parent.get(tokens[-1]) is not None


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


def _may_grant(op: PatchOperation) -> bool:
    """Whether ``op`` can change what ``privileges`` finds. False only for paths that no
    privilege is read from (labels, plain annotations, scheduling fields, a container's env,
    args, image or resources); a property test checks this."""
    if op["op"] == "test":
        return False
    tokens = _split_pointer(op["path"])
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


def _adds_capabilities_only(op: PatchOperation) -> bool:
    """Whether ``op`` only adds privileged capabilities to a container: an ``add`` of
    ``securityContext.capabilities.add`` items, or of the maps and list on the way holding
    nothing else, none of them a Pod Security baseline capability. Such an operation needs no
    path rule; ``allowedCapabilities`` alone decides (the privilege check), and an ``add`` over
    an existing map still counts as a replace. Baseline capabilities are not privileges, so the
    privilege check would let them through: adding one (say back into a container that drops
    ALL) still needs a path rule."""
    if op["op"] != "add":
        return False
    tokens = _split_pointer(op["path"])
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


def _touches_names(op: PatchOperation, lists: Sequence[str]) -> bool:
    """Whether ``op`` can add, remove or rename an item of the Pod's ``lists``."""
    tokens = _split_pointer(op["path"])
    if op["op"] == "test" or len(tokens) < 2 or tokens[0] != "spec":
        return len(tokens) < 2 and op["op"] != "test"
    if tokens[1] not in lists:
        return False
    return len(tokens) <= 3 or tokens[3] == "name"


def _check_unique_container_names(pod: Mapping[str, Any]) -> None:
    """Container names are unique across all kinds (as the API server requires); privileges are
    tracked by name, so a duplicate could hide a new grant behind an existing one."""
    spec = _as_map(pod.get("spec"))
    seen: set[Any] = set()
    for kind in _CONTAINER_KINDS:
        for i, container in enumerate(_as_list(spec.get(kind))):
            name = _as_map(container).get("name")
            if not isinstance(name, str):
                raise PatchRejected(f"/spec/{kind}/{i}/name", "a container name must be a string")
            if name in seen:
                raise PatchRejected(
                    f"/spec/{kind}/{i}/name", f"container name {name!r} is used twice in the Pod"
                )
            seen.add(name)


def _check_unique_volume_names(before: Mapping[str, Any], after: Mapping[str, Any]) -> None:
    """Volume names are unique (as the API server requires); hostPath access is tracked by name,
    so a second volume of the same name could hide a new host path behind an existing one. A
    duplicate the template already had is not the plugin's (the API server refuses that Pod)."""
    seen: set[Any] = set()
    for i, volume in enumerate(_volumes(after)):
        name = _as_map(volume).get("name")
        if not isinstance(name, str):
            raise PatchRejected(f"/spec/volumes/{i}/name", "a volume name must be a string")
        if name in seen and _count(after, name) > _count(before, name):
            raise PatchRejected(
                f"/spec/volumes/{i}/name", f"volume name {name!r} is used twice in the Pod"
            )
        seen.add(name)


def _volumes(pod: Mapping[str, Any]) -> list[Any]:
    return _as_list(_as_map(pod.get("spec")).get("volumes"))


def _count(pod: Mapping[str, Any], name: str) -> int:
    return sum(_as_map(v).get("name") == name for v in _volumes(pod))


def _meta(obj: Mapping[str, Any]) -> Mapping[str, Any]:
    meta = obj.get("metadata")
    return meta if isinstance(meta, dict | Mapping) else {}


def _owned(values: Any, prefixes: tuple[str, ...]) -> dict[str, Any]:
    if not isinstance(values, dict | Mapping):
        return {}
    return {k: v for k, v in values.items() if str(k).startswith(prefixes)}


def _differs(old: Mapping[str, Any], new: Mapping[str, Any], key: str) -> bool:
    return key not in old or key not in new or old[key] != new[key]


def _as_map(value: Any) -> Mapping[str, Any]:
    return value if isinstance(value, Mapping) else {}


def _as_list(value: Any) -> list[Any]:
    """A list field as written; anything else holds no items (the API server refuses it)."""
    return value if isinstance(value, list) else []
