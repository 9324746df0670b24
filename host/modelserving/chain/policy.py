"""Enforces the operator's PatchPolicy on a plugin's JSON Patch: the one path for native and WASM.

``PatchValidator.apply`` checks each operation's shape (``modelserving.chain.jsonpatch``) and
path against the allow-list, applies the patch copy-on-write (RFC 6902, one operation at a time
so that an ``add`` over an existing member is judged as the ``replace`` it is; only the maps and
lists on an operation's path are copied), then checks what may never change: identity fields,
the controller's own labels and annotations, the fields the operator protects
(``modelserving.chain.protected``), and the Pod's privileges: no Pod Security control may end
weaker than the template made it unless the policy allows it (``modelserving.chain.pss``
compares; skipped for operations that cannot change one, ``modelserving.chain.grants``), what it
may reach besides them (Secrets, service-account credentials and identity, CSI drivers,
volume claims, ``nodeName``: ``modelserving.chain.access``), and what runs in a container the
template grants a privilege a plugin could not add, or in one that writes a volume it mounts
(``modelserving.chain.takeover``). Any violation raises
``PatchRejected``; the chain reports it as ``ForbiddenPatch``.
"""

from __future__ import annotations

import posixpath
import re
import threading
from collections import OrderedDict
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import msgpack

from modelserving.api.bytebudget import ByteBudget
from modelserving.api.errors import PatchRejected
from modelserving.api.hook import PatchOperation
from modelserving.api.policy import PatchPolicy, capability_name, sysctl_name
from modelserving.chain import access, grants, pss, takeover
from modelserving.chain.grants import (
    added_capabilities,
    adds_capabilities_only,
    may_grant,
    toward_capabilities,
)
from modelserving.chain.jsonpatch import (
    Program,
    Step,
    apply_step,
    check_shape,
    program_of,
    split_pointer,
    split_tokens,
    step_of,
    step_replaces_member,
)
from modelserving.chain.protected import Protections
from modelserving.chain.shapes import as_list, as_map
from modelserving.plugins.patch import escape

_ALLOWS_CACHE_SIZE = 8192
_IDENTITY = ("name", "namespace", "uid", "ownerReferences", "generateName")
_CONTAINER_KINDS = pss.CONTAINER_KINDS
# What an operation can change, one bit each (``PatchValidator._effects``): container names,
# volume names, privileges, access, what runs, the identity fields (apiVersion, kind and the
# metadata of ``_IDENTITY``); two more say that privileges or access depend
# on the operation's value, and one that privileges depend on the Pod too (a volume mount
# reaches the host only through a hostPath volume; a capability added where there was no
# setting adds only itself).
_CONTAINER_NAMES, _VOLUME_NAMES, _GRANTS, _ACCESS, _TAKEOVER, _IDENTITY_FIELDS = (
    1 << i for i in range(6)
)
_PROTECTED = 1 << 9  # a field of patchPolicy.protectedFields (``Protections.reaches``)
_ALL_EFFECTS = (
    _CONTAINER_NAMES | _VOLUME_NAMES | _GRANTS | _ACCESS | _TAKEOVER | _IDENTITY_FIELDS | _PROTECTED
)
_GRANTS_BY_VALUE, _ACCESS_BY_VALUE, _GRANTS_BY_POD = 1 << 6, 1 << 7, 1 << 8
_DEPENDS = _GRANTS_BY_VALUE | _ACCESS_BY_VALUE | _GRANTS_BY_POD
_ANNOTATIONS = ("metadata", "annotations")


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


class _Known:
    """What the validator found in one Pod (each part found when first needed): its Pod
    Security facts, its access facts, and the containers its template grants a privilege."""

    __slots__ = ("access", "granted", "parent", "pod", "pss", "sibling")

    def __init__(
        self,
        pod: Mapping[str, Any],
        pss_facts: pss.PodFacts | None = None,
        access_facts: access.AccessFacts | None = None,
        granted: dict[str, tuple[str, str]] | None = None,
    ) -> None:
        self.pod = pod  # held: the entry is found by the Pod's id
        self.pss = pss_facts
        self.access = access_facts
        self.granted = granted
        self.parent: _Known | None = None
        """What is known of the Pod this one was patched from: the next plugin of a chain
        patches this one, and its facts are found from those of the nearest Pod up the chain
        that has them, where they are the same."""
        self.sibling = False
        """This is what was known of a Pod made from the same template as the one it is the
        ``parent`` of (``PatchValidator.related``), not of the Pod that one was patched from."""


_MAX_PARENTS = 64
"""How far up the Pods a patched Pod was patched from its facts are looked for: further than any
chain goes (a ModelServing lists at most 32 plugins)."""

KNOWN_PODS = 32
"""How many Pods a validator keeps the facts of: the template of each Pod in the works, and
each plugin's patched Pod, which the next plugin of the chain patches."""

PATCH_BYTES = 4096
"""A patch longer than this as msgpack is checked every time, and not kept: the built-ins'
are 250 to 900 bytes."""
KEPT_PATCH_BYTES = 64 * 1024
"""How many bytes of checked patches (as msgpack) a validator keeps, the newest first
(``PatchValidator.apply_patch``): as Python objects at most about 70 times that."""


@dataclass(slots=True, eq=False)
class _Checked:
    """A patch whose shape and paths passed: its operations (read-only), what they can change
    whatever the Pod, and those whose answer reads the Pod too."""

    ops: list[PatchOperation]
    effects: int
    by_pod: tuple[tuple[Step, bool | None], ...]
    """Each operation whose privilege answer reads the Pod, with its answer when it replaces
    nothing there (None: a volume mount, whose answer is whether the Pod has a hostPath
    volume)."""
    guarded: tuple[bool, ...]
    """Per operation: an ``add`` where the allow-list does not allow a ``replace``, refused
    when it lands on an existing member."""
    steps: tuple[Step, ...]
    """The operations ready to apply (their paths split once)."""
    program: Program | None
    """The same as one pass (``jsonpatch.program_of``), when they are plain changes."""


def _patch_key(raw: Any) -> bytes | None:
    """A patch's msgpack bytes, by which an equal patch is known again: with strict types, so
    only exact lists, maps, strings, integers, floats, booleans and nulls have bytes (a tuple
    or a subclass has none, nor an integer msgpack cannot hold), and equal bytes mean equal
    data of the same types. None when it has none or is longer than ``PATCH_BYTES``."""
    packer = getattr(_packers, "packer", None)
    if packer is None:  # one per thread: a Packer keeps its buffer between calls
        packer = _packers.packer = msgpack.Packer(strict_types=True)
    try:
        key = packer.pack(raw)
    except (TypeError, ValueError, OverflowError, UnicodeError):
        return None
    return key if len(key) <= PATCH_BYTES else None


_packers = threading.local()
"""Each thread's msgpack Packer for ``_patch_key`` (made once: about a third of a microsecond
less per patch than ``msgpack.packb``, which makes one per call)."""


class PatchValidator:
    """Validates and applies patches under one PatchPolicy (compiled once).

    The facts of a Pod (its privileges and access) are found once per Pod: a validator keeps
    those of the last ``KNOWN_PODS`` Pods it saw (by identity: Pods are never changed in
    place, a patched Pod is a new object built copy-on-write), and finds those of a patched Pod
    from its template's, reading again only the parts the patch made new. ``memo=False`` reads
    every Pod whole, every time (the reference the tests compare with)."""

    def __init__(self, policy: PatchPolicy | None = None, memo: bool = True) -> None:
        self.policy = policy or PatchPolicy()
        self.memo = memo
        self._known: OrderedDict[int, _Known] = OrderedDict()
        self._known_lock = threading.Lock()
        self._recent: _Known | None = None
        """The entry last found or made: a chain's next look is mostly for that same Pod (the
        template ``related`` linked, then checked; a patched Pod, then patched again)."""
        self._rules = _compile(self.policy)
        self._allowed: dict[tuple[str, str], bool] = {}
        self._op_effects: dict[tuple[str, str], int] = {}
        self._patches: ByteBudget[bytes, _Checked] = ByteBudget(KEPT_PATCH_BYTES)
        self._prefixes = tuple(self.policy.protected_prefixes)
        self._protections = Protections(self.policy.protected_fields)
        self._open = frozenset(c for c, flag in _FLAGS.items() if getattr(self.policy, flag))
        self._listed: dict[str, frozenset[str | None]] = {
            pss.CAPABILITIES: frozenset(map(capability_name, self.policy.allowed_capabilities)),
            pss.SYSCTLS: frozenset(map(sysctl_name, self.policy.allowed_sysctls)),
            pss.VOLUME_TYPES: frozenset(self.policy.allowed_volume_types),
            access.SECRETS: frozenset(self.policy.allowed_secrets),
            access.CSI_DRIVERS: frozenset(self.policy.allowed_csi_drivers),
            access.CLAIMS: frozenset(self.policy.allowed_claims),
            access.SERVICE_ACCOUNT: frozenset(self.policy.allowed_service_accounts),
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
            name = op["op"]
            if name == "test" or self.allows(op["path"], name):
                continue
            if not adds_capabilities_only(op):
                raise PatchRejected(
                    op["path"],
                    f"'{op['op']}' is not allowed here (patchPolicy.allowedPaths)",
                )

    def apply(self, pod: Mapping[str, Any], raw_ops: Any) -> dict[str, Any]:
        """Return the patched copy of ``pod``; raise PatchRejected on any violation."""
        return self.apply_patch(pod, raw_ops)[0]

    def apply_patch(
        self, pod: Mapping[str, Any], raw_ops: Any, copy_values: bool = True, keep: bool = True
    ) -> tuple[dict[str, Any], list[PatchOperation]]:
        """The patched Pod and the validated operations (safe to keep; read-only: their values
        are in the Pod).

        ``pod`` is never changed. The patched Pod is built copy-on-write: only the maps and lists
        on the path of an operation are new, everything else is shared with ``pod``, so treat
        both as read-only (or copy the part you change). ``copy_values=False`` puts the
        operations' values into the Pod as they are: only for operations no one else holds.
        ``keep=False``: the patched Pod is the chain's last, no plugin patches it again, so
        what is found of it is not kept for the next (nor does it take a template's place).

        What does not depend on the Pod (the operations' shape, their paths against the
        allow-list, what their values can change) is worked out once per patch: a patch equal
        to one of the last whose shape and paths passed (the same msgpack bytes;
        ``KEPT_PATCH_BYTES`` of them) takes that one's checked operations, and so its copied
        values, again. Every Pod gets the same patch from most plugins.
        """
        checked = self._checked(raw_ops, copy_values)
        return self._apply_checked(pod, checked, keep), list(checked.ops)

    def _checked(self, raw_ops: Any, copy_values: bool) -> _Checked:
        """``raw_ops`` checked: shape, paths and the effects their values decide (raises
        PatchRejected); kept by the patch's bytes when it passes."""
        key = _patch_key(raw_ops) if self.memo else None
        if key is not None:
            kept = self._patches.get(key)
            if kept is not None:
                return kept
        ops = check_shape(raw_ops, copy_values)
        self.check_paths(ops)
        effects, found_by_pod = self._value_effects(ops)
        guarded = tuple(op["op"] == "add" and not self.allows(op["path"], "replace") for op in ops)
        steps = tuple(map(step_of, ops))
        by_step = {id(step.op): step for step in steps} if found_by_pod else {}
        by_pod = tuple((by_step[id(op)], fresh) for op, fresh in found_by_pod)
        checked = _Checked(ops, effects, by_pod, guarded, steps, program_of(steps, guarded))
        if key is not None:
            self._patches.keep(key, len(key), checked)
        return checked

    def _apply_checked(
        self, pod: Mapping[str, Any], checked: _Checked, keep: bool = True
    ) -> dict[str, Any]:
        ops = checked.ops
        if not ops:
            return dict(pod)
        program = checked.program
        after: Any = None if program is None else program.run(pod)
        if after is None:
            after = self._apply_steps(pod, checked)
        if not isinstance(after, dict):
            raise PatchRejected("", "the patch replaced the whole Pod")
        self._check_invariants(pod, after, self._patch_effects(checked, pod), keep)
        return after

    @staticmethod
    def _apply_steps(pod: Mapping[str, Any], checked: _Checked) -> Any:
        """The operations applied one by one (what a Program does not do, and every refusal)."""
        after: Any = pod
        owned: set[int] = set()  # containers this patch copied: changed in place from then on
        # one by one, so that an 'add' is judged by what it does to this Pod
        for step, guarded in zip(checked.steps, checked.guarded, strict=True):
            if guarded and step_replaces_member(after, step):
                raise PatchRejected(
                    step.op["path"],
                    "'add' over an existing value replaces it, and 'replace' is not allowed here "
                    "(patchPolicy.allowedPaths)",
                )
            after = apply_step(after, step, owned)
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
        self._check_invariants(
            before, after, _ALL_EFFECTS if ops is None else self._effects(ops, before)
        )

    def _check_invariants(
        self, before: Mapping[str, Any], after: Mapping[str, Any], effects: int, keep: bool = True
    ) -> None:
        """``check_invariants`` with what the operations can change (``_effects``); ``keep``:
        what is found of ``after`` is kept for a patch of it (``apply_patch``)."""
        meta_b, meta_a = _meta(before), _meta(after)
        if effects & _IDENTITY_FIELDS:
            self._check_identity(before, after, meta_b, meta_a)
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
        if effects & _PROTECTED:
            self._protections.check(before, after)
        if effects & _CONTAINER_NAMES:
            _check_unique_container_names(after)
        if effects & _VOLUME_NAMES:
            _check_unique_volume_names(before, after)
        template = self._entry(before)
        patched = None  # what is known of ``after``: made when a check needs it
        if keep:
            patched = self._entry(after)
            if patched.parent is None and patched is not template:
                patched.parent = template
        elif effects & (_GRANTS | _ACCESS):
            patched = _Known(after)
            patched.parent = template
        if effects & _GRANTS:
            self.check_privileges(before, after, template, patched)
        if effects & _ACCESS:
            self.check_access(before, after, template, patched)
        if effects & _TAKEOVER:
            self.check_takeover(before, after, template, patched, keep)

    @staticmethod
    def _check_identity(
        before: Mapping[str, Any],
        after: Mapping[str, Any],
        meta_b: Mapping[str, Any],
        meta_a: Mapping[str, Any],
    ) -> None:
        for key in _IDENTITY if meta_a is not meta_b else ():
            if meta_b.get(key) != meta_a.get(key):
                raise PatchRejected(f"/metadata/{key}", "plugins may never change a Pod's identity")
        if before.get("apiVersion") != after.get("apiVersion") or before.get("kind") != after.get(
            "kind"
        ):
            raise PatchRejected("", "plugins may never change apiVersion or kind")

    def _effects(self, ops: Sequence[PatchOperation], before: Mapping[str, Any]) -> int:
        """What the operations can change in ``before``, a bit each: container names, volume
        names, privileges (``may_grant``), access (``access.may_change``), what runs
        (``takeover.may_change``). Most answers depend on the operation's name and path alone,
        so they are kept per validator; the others read its value (``grants.reads_value``,
        ``access.reads_value``, volumes: ``_volumes_may_weaken``) or ``before`` too
        (a volume mount; an operation that only adds capabilities: ``_patch_effects``)."""
        effects, by_pod = self._value_effects(ops)
        return _with_pod(effects, ((step_of(op), fresh) for op, fresh in by_pod), before)

    def _patch_effects(self, checked: _Checked, before: Mapping[str, Any]) -> int:
        """``_effects`` of a checked patch: what its values decide (found once per patch), and
        what its operations whose answer reads the Pod can change in ``before``."""
        return _with_pod(checked.effects, checked.by_pod, before)

    def _value_effects(
        self, ops: Sequence[PatchOperation]
    ) -> tuple[int, tuple[tuple[PatchOperation, bool | None], ...]]:
        """What the operations can change whatever the Pod (their names, paths and values), and
        the operations whose answer also reads the Pod (``_GRANTS_BY_POD``). A value is read
        only for an effect no operation has already shown."""
        found = 0  # a bit per effect
        by_pod: list[tuple[PatchOperation, bool | None]] = []
        cache = self._op_effects
        deferred = []
        names_last: PatchOperation | None = None  # the last operation that can rename volumes
        for op in ops:
            key = (op["op"], op["path"])
            bits = cache.get(key)
            if bits is None:
                if len(cache) >= _ALLOWS_CACHE_SIZE:
                    cache.clear()
                bits = cache[key] = self._op_bits(op)
            if bits & _DEPENDS:  # some depend on the value or the Pod, not only on the path
                deferred.append((op, bits))
            if bits & _VOLUME_NAMES:
                names_last = op
            found |= bits
        if names_last is not None and _named_volumes(names_last):
            found &= ~_VOLUME_NAMES  # the Pod's volumes are that list, whatever it had
        for op, bits in deferred:
            if bits & _GRANTS_BY_VALUE and not found & _GRANTS and self._may_grant(op):
                found |= _GRANTS
            if bits & _ACCESS_BY_VALUE and not found & _ACCESS and access.may_change(op):
                found |= _ACCESS
            if bits & _GRANTS_BY_POD and not found & _GRANTS:
                if _mounts(op):
                    by_pod.append((op, None))
                elif not adds_capabilities_only(op):
                    found |= _GRANTS * may_grant(op)
                else:
                    by_pod.append((op, self._capabilities_may_grant(op)))
        return found & _ALL_EFFECTS, tuple(by_pod)

    def _op_bits(self, op: PatchOperation) -> int:
        """The effects of an operation with its name and path, as bits (with ``_DEPENDS`` ones
        when some depend on its value or on the Pod)."""
        if grants.reads_value(op) or access.volumes_put(op) is not None:
            grant = _GRANTS_BY_VALUE
        elif _mounts(op) or toward_capabilities(op):
            grant = _GRANTS_BY_POD
        else:
            grant = _GRANTS * may_grant(op)
        reach = _ACCESS_BY_VALUE if access.reads_value(op) else _ACCESS * access.may_change(op)
        return (
            _IDENTITY_FIELDS * _touches_identity(op)
            | _CONTAINER_NAMES * _touches_names(op, _CONTAINER_KINDS)
            | _VOLUME_NAMES * _touches_names(op, ("volumes",))
            | grant
            | reach
            | _TAKEOVER * takeover.may_change(op)
            | _PROTECTED
            * (op["op"] != "test" and self._protections.reaches(split_tokens(op["path"])))
        )

    def _may_grant(self, op: PatchOperation) -> bool:
        """``may_grant`` of an operation whose answer reads its value; for whole volumes, with
        this policy: whether they may weaken a control it does not let a plugin weaken."""
        volumes = access.volumes_put(op)
        if volumes is None:
            return may_grant(op)
        return self._volumes_may_weaken(volumes)

    def _capabilities_may_grant(self, op: PatchOperation) -> bool:
        """``may_grant`` of an operation that only adds capabilities, with this policy, where the
        container had none of the settings on its way (the operation creates them, it replaces
        nothing: where it replaces, ``may_grant`` decides). It adds one fact per capability and
        nothing else, unless one is a capability every container has by default (adding it back
        after dropping ALL keeps it): it may grant only when the policy does not allow one of
        them. (A volume mount's answer reads the Pod alone: it may grant only where the Pod has
        a hostPath volume; an operation of the same patch that adds one is judged by its own
        bits.)"""
        if pss.CAPABILITIES in self._open:
            return False
        allowed = self._listed[pss.CAPABILITIES]
        for raw in added_capabilities(op):
            name = capability_name(raw)
            if name is None or name in pss.DEFAULT_CAPABILITIES or name not in allowed:
                return True
        return False

    def _volumes_may_weaken(self, volumes: Any) -> bool:
        """Whether volumes put into a Pod (``access.volumes_put``) may weaken a Pod Security
        control this policy does not let a plugin weaken: a hostPath volume may (what it
        reaches depends on the containers that mount it), a volume of another type only when
        the policy does not allow that type (``allowedVolumeTypes``). Anything but a list of
        maps is judged as a weakening, whatever it is."""
        if not access.plain_volumes(volumes):
            return True
        judged = pss.VOLUME_TYPES not in self._open
        allowed = self._listed[pss.VOLUME_TYPES]
        for volume in volumes:
            for (control, _, _), (_, kind) in pss.volume_facts(volume).items():
                if control != pss.VOLUME_TYPES or (judged and kind not in allowed):
                    return True
        return False

    def _entry(self, pod: Mapping[str, Any]) -> _Known:
        """What the validator knows of ``pod`` (found by identity), the most recently used;
        with ``memo`` off, nothing."""
        if not self.memo:
            return _Known(pod)
        recent = self._recent  # another thread's maybe: it is this Pod's entry or not looked at
        if recent is not None and recent.pod is pod:
            return recent  # just made or moved to the end: no need to move it again
        with self._known_lock:
            return self._held_entry(pod)

    def _held_entry(self, pod: Mapping[str, Any]) -> _Known:
        """``_entry`` with ``_known_lock`` held."""
        key = id(pod)
        known = self._known.get(key)
        if known is not None and known.pod is pod:
            self._known.move_to_end(key)
        else:
            known = self._known[key] = _Known(pod)
            while len(self._known) > KNOWN_PODS:
                self._known.popitem(last=False)
        self._recent = known
        return known

    def related(self, pod: Mapping[str, Any], sibling: Mapping[str, Any]) -> None:
        """Let ``pod``'s facts, when first needed, be found from those already found of
        ``sibling``, a Pod made from the same template (``workload.pods``: such Pods share what
        they took from it unchanged). Only the parts made of the same objects are taken, so
        the facts are the same as those read from ``pod`` whole; a sibling whose facts are not
        known, or a Pod already read or linked, is left as it is."""
        if not self.memo or pod is sibling:
            return
        with self._known_lock:
            other = self._known.get(id(sibling))
            if other is None or other.pod is not sibling:
                return
            if other.pss is None and other.access is None:
                return
            known = self._held_entry(pod)
        if known.parent is not None or known.pss is not None or known.access is not None:
            return
        # a detached copy of what is known of the sibling: no chain of Pods, each holding the
        # one made before it, can form. The sibling's own link is such a copy, and when its
        # facts are the very objects the sibling has (it took them all from its own sibling, as
        # Pods made from one template do), it serves as it is: nothing is made per Pod.
        parent = other.parent
        if (
            parent is None
            or not parent.sibling
            or parent.pss is not other.pss
            or parent.access is not other.access
            or parent.granted is not other.granted
        ):
            parent = _Known(sibling, other.pss, other.access, other.granted)
            parent.sibling = True  # before it is linked: another thread may link this Pod
        known.parent = parent

    def _pss(self, known: _Known, template: _Known | None = None) -> pss.PodFacts:
        """The Pod Security facts of ``known``'s Pod (from ``template``'s where they are the
        same)."""
        if known.pss is None:
            source = self._source(known, template, "pss")
            if source is None:
                known.pss = pss.pod_facts(known.pod)
            else:
                known.pss = pss.pod_facts(known.pod, source.pss, source.sibling)
        return known.pss

    def _access(self, known: _Known, template: _Known | None = None) -> access.AccessFacts:
        """The access facts of ``known``'s Pod (from ``template``'s where they are the same)."""
        if known.access is None:
            source = self._source(known, template, "access")
            known.access = access.facts_of(known.pod, source.access if source is not None else None)
        return known.access

    def _source(self, known: _Known, template: _Known | None, facts: str) -> _Known | None:
        """The Pod whose ``facts`` (``pss`` or ``access``) ``known``'s are found from: the
        template, else the nearest Pod up the chain that has them; none with ``memo`` off."""
        source = template if template is not None else known.parent
        for _ in range(_MAX_PARENTS):
            if source is None or getattr(source, facts) is not None:
                return source if self.memo else None
            source = source.parent
        return None  # no chain is that long: a loop (``check_invariants`` of two Pods both ways)

    def check_privileges(
        self,
        before: Mapping[str, Any],
        after: Mapping[str, Any],
        old: _Known | None = None,
        new: _Known | None = None,
    ) -> None:
        """Refuse the first Pod Security control ``after`` has weaker than ``before`` that the
        policy does not allow to weaken. (``old`` and ``new``: what is known of them.)"""
        old = old or self._entry(before)
        new = new or self._entry(after)
        self._refuse_first(pss.weakenings(self._pss(old), self._pss(new, old)))

    def check_access(
        self,
        before: Mapping[str, Any],
        after: Mapping[str, Any],
        old: _Known | None = None,
        new: _Known | None = None,
    ) -> None:
        """Refuse the first Secret, service-account credential, ServiceAccount, CSI volume, volume
        claim or node binding of ``after`` that ``before`` does not have and the policy does not
        allow."""
        old = old or self._entry(before)
        new = new or self._entry(after)
        self._refuse_first(access.weakenings_between(self._access(old), self._access(new, old)))

    def check_takeover(
        self,
        before: Mapping[str, Any],
        after: Mapping[str, Any],
        old: _Known | None = None,
        new: _Known | None = None,
        keep: bool = True,
    ) -> None:
        """Refuse a change to what runs in a container that the template grants a privilege the
        policy would refuse a plugin to add (``modelserving.chain.takeover``): a plugin could
        otherwise run its own code with that privilege. Not when the patched container has no
        such privilege left. The same for the containers that write a volume such a container
        mounts (it may run or read what they write), and for a container the patch adds or
        changes to write one. (``keep=False``: what is found of ``after`` is not kept, as in
        ``apply_patch``.)"""
        if self.policy.allow_privileged_container_changes:
            return
        old = old or self._entry(before)
        if old.granted is None:
            facts = self._pss(old)
            source = old.parent
            if source is not None and source.pss is facts and source.granted is not None:
                old.granted = source.granted  # the same facts: every part the same objects
            else:
                old.granted = self._granted(facts, before)
        granted = old.granted
        if not granted:
            return
        after_granted: list[dict[str, tuple[str, str]]] = []

        def still(subject: str) -> bool:
            if not after_granted:
                known = new
                if known is None:
                    known = self._entry(after) if keep else _Known(after)
                after_granted.append(self._granted(self._pss(known, old), after))
            return subject in after_granted[0]

        for change in takeover.changes(before, after, list(granted)):
            if not still(change.subject):
                continue
            what = (
                f"shares the Pod's processes with {change.subject}"
                if change.path == "/spec/shareProcessNamespace"
                else f"changes the {change.field} of {change.subject}"
            )
            raise _takeover(change.path, f"{what}, which", granted[change.subject])
        self._check_writers(before, after, granted, still)
        if _shares_processes(after):
            self._refuse_new_container(before, after, granted)

    def _check_writers(
        self,
        before: Mapping[str, Any],
        after: Mapping[str, Any],
        granted: Mapping[str, tuple[str, str]],
        still: Callable[[str], bool],
    ) -> None:
        """A container that writes a volume a granted container mounts (an init container that
        fills an emptyDir the privileged one executes from) decides what that one runs: what
        runs in it may not change, nor may a container be added or changed to write one."""
        shared = takeover.shared_volumes(before, list(granted))
        if not shared.volumes:
            return
        for change in takeover.changes(before, after, list(shared.writers)):
            root = shared.roots[change.subject]
            if change.path == "/spec/shareProcessNamespace" or not still(root):
                continue
            chain = shared.chain(shared.writers[change.subject])
            what = f"changes the {change.field} of {change.subject}, which writes {chain}, which"
            raise _takeover(change.path, what, granted[root], writes=True)
        for writer in takeover.new_writers(before, after, shared):
            root = shared.roots[shared.volumes[writer.volume]]
            if not still(root):
                continue
            does = (
                f"adds {writer.subject}, which writes"
                if writer.added
                else (f"lets {writer.subject} write")
            )
            what = f"{does} {shared.chain(writer.volume, writer.through)}, which"
            raise _takeover(writer.path, what, granted[root], writes=True)

    def _refuse_new_container(
        self,
        before: Mapping[str, Any],
        after: Mapping[str, Any],
        granted: Mapping[str, tuple[str, str]],
    ) -> None:
        """In a Pod that shares its processes, a container the patch adds could see and signal
        the processes of a container the template grants a privilege (and read their memory
        through /proc): that is a takeover too."""
        old = set(_container_names(before).values())
        for path, name in _container_names(after).items():
            if name in old:
                continue
            subject = min(granted)
            what = (
                f"adds container {name!r}, which shares the Pod's processes with {subject}, which"
            )
            raise _takeover(path, what, granted[subject])

    def _granted(self, facts: pss.PodFacts, pod: Mapping[str, Any]) -> dict[str, tuple[str, str]]:
        """The containers with a privilege of their own (one a container without settings would
        not have in this Pod) of a baseline control that the policy would refuse a plugin to
        add, each with the first such privilege and the setting that would allow adding it.
        Probe hosts grant the container nothing."""
        out: dict[str, tuple[str, str]] = {}
        if not facts.privileged:  # no container has a fact of such a control
            return out
        plain: frozenset[tuple[str, str]] | None = None
        inert: frozenset[str] | None = None
        containers = facts.containers
        for (control, subject, what), (path, value) in facts.facts.items():
            if control not in pss.OWN_PRIVILEGES or subject in out or subject not in containers:
                continue
            if inert is None:
                inert = _inert_host_volumes(pod)
            if not _takeover_grant(control, what, value, inert):
                continue
            if plain is None:
                plain = facts.plain()
            if (control, what) in plain:
                continue
            if self._refusal(pss.Weakening(control, subject, what, path, value, True)):
                out[subject] = (what, _camel(_FLAGS.get(control) or _LISTS[control]))
        return out

    def _refuse_first(self, weakenings: Iterable[pss.Weakening]) -> None:
        """PatchRejected for the first of ``weakenings`` the policy does not allow."""
        for weakening in weakenings:
            reason = self._refusal(weakening)
            if reason:
                raise PatchRejected(weakening.path, reason)

    def _refusal(self, w: pss.Weakening) -> str | None:
        """Why the policy refuses ``w``, or None when it allows it."""
        if w.control in self._open:
            return None
        control = pss.CONTROLS.get(w.control) or access.CONTROLS[w.control]
        weakens = (
            f"weakens Pod Security control '{control.title}'"
            if w.control in pss.CONTROLS
            else f"weakens control '{control.title}'"
        )
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
                noun = _NAMED[w.control]
                return f"{w.subject} {w.what}, which is not a {noun} name ({weakens})"
            return f"{w.subject} {w.what}, which {weakens}; add {w.value} to patchPolicy.{setting}"
        unlike = (
            " (every container of the template meets this control)"
            if w.added and control.restricted
            else ""
        )
        setting = _camel(_FLAGS[w.control])
        return f"{w.subject} {w.what}{unlike}, which {weakens} (patchPolicy.{setting} is false)"


def _with_pod(
    effects: int,
    by_pod: Iterable[tuple[Step, bool | None]],
    before: Mapping[str, Any],
) -> int:
    """``effects`` with what the operations whose privilege answer reads the Pod
    (``_Checked.by_pod``, as Steps) can change in ``before``."""
    for step, fresh in by_pod:
        if effects & _GRANTS:
            break
        if fresh is None:
            grants = _has_host_volumes(before)
        elif step_replaces_member(before, step):
            grants = may_grant(step.op)
        else:
            grants = fresh
        if grants:
            effects |= _GRANTS
    return effects


def _mounts(op: PatchOperation) -> bool:
    """Whether ``op`` is in a container's ``volumeMounts`` (privileges read from them only where
    they mount a hostPath volume)."""
    tokens = split_tokens(op["path"])
    return (
        len(tokens) >= 4
        and tokens[0] == "spec"
        and tokens[1] in _CONTAINER_KINDS
        and tokens[3] == "volumeMounts"
    )


def _has_host_volumes(pod: Mapping[str, Any]) -> bool:
    spec = pod.get("spec")
    volumes = spec.get("volumes") if type(spec) is dict or isinstance(spec, Mapping) else None
    return isinstance(volumes, list) and any(
        (type(v) is not dict and not isinstance(v, Mapping)) or "hostPath" in v for v in volumes
    )


def _takeover(path: str, what: str, grant: tuple[str, str], writes: bool = False) -> PatchRejected:
    """The refusal of a takeover: ``what`` (ending in "which") the granted container's ``grant``
    (what it is granted, the setting that would let plugins add it)."""
    nor = ", nor what writes a volume such a container mounts" if writes else ""
    return PatchRejected(
        path,
        f"{what} {grant[0]} in the template; a plugin may not change what runs in a container "
        f"with a privilege it could not add itself{nor} "
        "(patchPolicy.allowPrivilegedContainerChanges is false; or let plugins add that "
        f"privilege: patchPolicy.{grant[1]})",
    )


def _shares_processes(pod: Mapping[str, Any]) -> bool:
    spec = pod.get("spec")
    return isinstance(spec, Mapping) and spec.get("shareProcessNamespace") is True


def _container_names(pod: Mapping[str, Any]) -> dict[str, str]:
    """Each container's name by its path (every kind of container)."""
    spec = pod.get("spec")
    out: dict[str, str] = {}
    for kind in pss.CONTAINER_KINDS:
        listed = spec.get(kind) if isinstance(spec, Mapping) else None
        for i, container in enumerate(listed if isinstance(listed, list) else ()):
            name = container.get("name") if isinstance(container, Mapping) else None
            out[f"/spec/{kind}/{i}"] = str(name)
    return out


TAKEOVER_EXEMPT_CAPABILITIES = frozenset({"IPC_LOCK"})
"""Capabilities that do not make a container worth taking over: IPC_LOCK lets it lock its own
memory (RDMA needs it), nothing beyond the container."""


INERT_HOST_PATH_TYPES = frozenset({"Directory", "DirectoryOrCreate", "File", "FileOrCreate"})
"""hostPath types whose mount, read-only, gives a container's code nothing but files to read."""
LIVE_HOST_DIRECTORIES = (
    "/dev",
    "/proc",
    "/sys",
    "/run",
    "/var/run",
    "/var/lib",
    "/tmp",
    "/etc/kubernetes",
)
"""Host directories that hold sockets, devices or other Pods' data: a read-only mount of one (or
of a directory above one) still lets code connect to a runtime's socket or write to a device."""
_MOUNT_OF = re.compile(r"mounts hostPath volume '([^'\\]*)' at ")


def _inert_host_volumes(pod: Mapping[str, Any]) -> frozenset[str]:
    """The hostPath volumes of ``pod`` whose read-only mount grants nothing worth taking a
    container over for: of a typed directory or file (never a socket, a device or an unchecked
    path), neither in nor above a host directory of ``LIVE_HOST_DIRECTORIES``."""
    spec = pod.get("spec")
    volumes = spec.get("volumes") if type(spec) is dict or isinstance(spec, Mapping) else None
    found: set[str] = set()
    for volume in volumes if isinstance(volumes, list) else ():
        if not isinstance(volume, Mapping) or not isinstance(volume.get("name"), str):
            continue
        source = volume.get("hostPath")
        if not isinstance(source, Mapping):
            continue
        kind = source.get("type")
        if not isinstance(kind, str) or kind not in INERT_HOST_PATH_TYPES:  # a map: unhashable
            continue
        path = source.get("path")
        if not isinstance(path, str) or not path.startswith("/"):
            continue
        clean = posixpath.normpath(path)
        if any(
            clean == live
            or clean.startswith(live + "/")
            or live.startswith(clean.rstrip("/") + "/")
            for live in LIVE_HOST_DIRECTORIES
        ):
            continue
        found.add(volume["name"])
    return frozenset(found)


def _takeover_grant(control: str, what: str, value: Any, inert: frozenset[str]) -> bool:
    """Whether a privilege of a container makes changes to what it runs a takeover. Not a
    read-only mount of an inert hostPath volume (``_inert_host_volumes``; what a plugin's code
    could do there, read those host files, the driver and model-cache mounts of serving Pods
    allow any process of the container), unless it has a ``subPathExpr`` (its env, which a
    plugin could change, would choose the host directory); nor an exempt capability. A
    writable hostPath mount, or one with mount propagation, always counts."""
    if control == pss.HOST_PATH:
        if ", writable" in what or "propagat" in what or "subPathExpr" in what:
            return True
        mount = _MOUNT_OF.match(what)
        return mount is None or mount.group(1) not in inert
    if control == pss.CAPABILITIES:
        return value not in TAKEOVER_EXEMPT_CAPABILITIES
    return True


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
    access.CREDENTIALS: "allow_service_account_tokens",
    access.NODE_NAME: "allow_node_name",
}
# control -> the PatchPolicy list of names it may use
_LISTS: dict[str, str] = {
    pss.CAPABILITIES: "allowed_capabilities",
    pss.SYSCTLS: "allowed_sysctls",
    pss.VOLUME_TYPES: "allowed_volume_types",
    access.SECRETS: "allowed_secrets",
    access.CSI_DRIVERS: "allowed_csi_drivers",
    access.CLAIMS: "allowed_claims",
    access.SERVICE_ACCOUNT: "allowed_service_accounts",
}
# control -> what its list names (a value that is not a string is no name)
_NAMED: dict[str, str] = {
    pss.SYSCTLS: "sysctl",
    pss.VOLUME_TYPES: "volume type",
    access.SECRETS: "Secret",
    access.CSI_DRIVERS: "CSI driver",
    access.CLAIMS: "PersistentVolumeClaim or data source",
    access.SERVICE_ACCOUNT: "ServiceAccount",
}


def _camel(snake: str) -> str:
    head, *rest = snake.split("_")
    return head + "".join(word.title() for word in rest)


def _touches_identity(op: PatchOperation) -> bool:
    """Whether ``op`` can change apiVersion, kind or an identity field of the metadata
    (``_IDENTITY``): only at the Pod, those fields or the whole metadata (a patch changes
    nothing but what its paths name, copy-on-write)."""
    if op["op"] == "test":
        return False
    tokens = split_tokens(op["path"])
    if not tokens or tokens[0] in ("apiVersion", "kind"):
        return True
    return tokens[0] == "metadata" and (len(tokens) == 1 or tokens[1] in _IDENTITY)


def _touches_names(op: PatchOperation, lists: Sequence[str]) -> bool:
    """Whether ``op`` can add, remove or rename an item of the Pod's ``lists``."""
    tokens = split_tokens(op["path"])
    if op["op"] == "test" or len(tokens) < 2 or tokens[0] != "spec":
        return len(tokens) < 2 and op["op"] != "test"
    if tokens[1] not in lists:
        return False
    return len(tokens) <= 3 or tokens[3] == "name"


def _check_unique_container_names(pod: Mapping[str, Any]) -> None:
    """Container names are unique across all kinds (as the API server requires); privileges are
    tracked by name, so a duplicate could hide a new grant behind an existing one."""
    spec = as_map(pod.get("spec"))
    seen: set[Any] = set()
    for kind in _CONTAINER_KINDS:
        for i, container in enumerate(as_list(spec.get(kind))):
            name = as_map(container).get("name")
            if not isinstance(name, str):
                raise PatchRejected(f"/spec/{kind}/{i}/name", "a container name must be a string")
            if name in seen:
                raise PatchRejected(
                    f"/spec/{kind}/{i}/name", f"container name {name!r} is used twice in the Pod"
                )
            seen.add(name)


def _named_volumes(op: PatchOperation) -> bool:
    """Whether ``op`` sets the Pod's whole volume list to volumes of distinct string names: when
    no later operation can rename a volume, the patched Pod's names are unique whatever the Pod
    had (``_check_unique_volume_names`` need not run; the built-ins' patches that add volumes)."""
    if op["op"] not in ("add", "replace") or split_tokens(op["path"]) != ("spec", "volumes"):
        return False
    volumes = op.get("value")
    if type(volumes) is not list:
        return False
    names = set()
    for volume in volumes:
        name = volume.get("name") if type(volume) is dict else None
        if type(name) is not str or name in names:
            return False
        names.add(name)
    return True


def _check_unique_volume_names(before: Mapping[str, Any], after: Mapping[str, Any]) -> None:
    """Volume names are unique (as the API server requires); hostPath access is tracked by name,
    so a second volume of the same name could hide a new host path behind an existing one. A
    duplicate the template already had is not the plugin's (the API server refuses that Pod)."""
    seen: set[Any] = set()
    for i, volume in enumerate(_volumes(after)):
        name = (volume if type(volume) is dict else as_map(volume)).get("name")
        if not isinstance(name, str):
            raise PatchRejected(f"/spec/volumes/{i}/name", "a volume name must be a string")
        if name in seen and _count(after, name) > _count(before, name):
            raise PatchRejected(
                f"/spec/volumes/{i}/name", f"volume name {name!r} is used twice in the Pod"
            )
        seen.add(name)


def _volumes(pod: Mapping[str, Any]) -> list[Any]:
    spec = pod.get("spec")
    volumes = (spec if type(spec) is dict else as_map(spec)).get("volumes")
    return volumes if type(volumes) is list else as_list(volumes)


def _count(pod: Mapping[str, Any], name: str) -> int:
    return sum(as_map(v).get("name") == name for v in _volumes(pod))


def _meta(obj: Mapping[str, Any]) -> Mapping[str, Any]:
    meta = obj.get("metadata")
    # a dict told by its exact type first: ``isinstance`` of a union with an ABC costs a
    # microsecond for what is not a dict (a patched Pod's checks call this and ``_owned``
    # several times)
    return meta if type(meta) is dict or isinstance(meta, Mapping) else {}


def _owned(values: Any, prefixes: tuple[str, ...]) -> dict[str, Any]:
    if not values or (type(values) is not dict and not isinstance(values, Mapping)):
        return {}
    return {
        k: v for k, v in values.items() if (k if type(k) is str else str(k)).startswith(prefixes)
    }


def _differs(old: Mapping[str, Any], new: Mapping[str, Any], key: str) -> bool:
    return key not in old or key not in new or old[key] != new[key]
