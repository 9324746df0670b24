"""Pod Security facts of a Pod, and those a patch added: the privilege comparison.

The controls are those of the Kubernetes Pod Security Standards, baseline and restricted (the
hosts of probes and lifecycle hooks are baseline since Kubernetes 1.34), and under Host
Namespaces the user namespace: a Pod without ``hostUsers: false`` shares the node's.
``pod_facts`` lists what a Pod is allowed beyond the most restricted value of each control, one
fact per ``(control, subject, what)``, e.g. ``("privileged", "container 'proxy'", "runs
privileged")``;
``weakenings(before, after)`` returns the facts of the patched Pod that the template (the Pod
before the patch) does not account for. ``modelserving.chain.policy.PatchValidator`` calls it
for every patch that may change a privilege, and decides with the operator's PatchPolicy which
of them a plugin may add. This module knows no policy.

Subjects are named, never indexed: containers by name (unique across kinds) and volumes by name
(unique; the validator checks both), so inserting a sidecar or a volume does not make existing
facts look new. Container facts use effective values: a field a container leaves out takes the
Pod's (runAsNonRoot, runAsUser, seccomp, AppArmor, SELinux, Windows hostProcess). Weakening a
value (a read-only host mount made writable) adds a fact, strengthening it removes one. A
container the patch adds is judged against the template Pod:

- a *grant* (a value baseline forbids, or an explicit root user) is new unless a container
  without settings of its own would have it in the template Pod (it inherits the Pod's);
- a *restricted* fact (baseline allows it, restricted does not: a default capability kept, no
  seccomp profile...) is new only when every container of the template met that control (the
  Pod's level for it was restricted).
"""

from __future__ import annotations

import json
import operator
from collections.abc import Iterator, Mapping
from dataclasses import dataclass, field
from typing import Any, NamedTuple

from modelserving.api.policy import (
    BASELINE_CAPABILITIES,
    RESTRICTED_VOLUME_TYPES,
    capability_name,
    sysctl_name,
)
from modelserving.chain.shapes import as_list, as_map
from modelserving.plugins.patch import escape


class Control(NamedTuple):
    """A control as the Pod Security Standards name it; ``restricted`` when baseline allows what
    its facts describe (only the restricted profile forbids it)."""

    title: str
    restricted: bool = False


HOST_PROCESS = "hostProcess"
HOST_NAMESPACES = "hostNamespaces"
PRIVILEGED = "privileged"
CAPABILITIES = "capabilities"
KEPT_CAPABILITIES = "keptCapabilities"
HOST_PATH = "hostPath"
HOST_PORTS = "hostPorts"
APPARMOR = "appArmor"
SELINUX = "seLinux"
PROC_MOUNT = "procMount"
SECCOMP = "seccomp"
NO_SECCOMP_PROFILE = "noSeccompProfile"
SYSCTLS = "sysctls"
VOLUME_TYPES = "volumeTypes"
ESCALATION = "privilegeEscalation"
ESCALATION_NOT_DISABLED = "privilegeEscalationNotDisabled"
RUN_AS_ROOT = "runAsRoot"
NON_ROOT_NOT_REQUIRED = "nonRootNotRequired"
ROOT_USER = "rootUser"
HOST_PROBES = "hostProbes"

CONTROLS: dict[str, Control] = {
    HOST_PROCESS: Control("HostProcess"),
    HOST_NAMESPACES: Control("Host Namespaces"),
    PRIVILEGED: Control("Privileged Containers"),
    CAPABILITIES: Control("Capabilities"),
    KEPT_CAPABILITIES: Control("Capabilities", restricted=True),
    HOST_PATH: Control("HostPath Volumes"),
    HOST_PORTS: Control("Host Ports"),
    APPARMOR: Control("AppArmor"),
    SELINUX: Control("SELinux"),
    PROC_MOUNT: Control("/proc Mount Type"),
    SECCOMP: Control("Seccomp"),
    NO_SECCOMP_PROFILE: Control("Seccomp", restricted=True),
    SYSCTLS: Control("Sysctls"),
    VOLUME_TYPES: Control("Volume Types"),
    ESCALATION: Control("Privilege Escalation"),
    ESCALATION_NOT_DISABLED: Control("Privilege Escalation", restricted=True),
    RUN_AS_ROOT: Control("Running as Non-root"),
    NON_ROOT_NOT_REQUIRED: Control("Running as Non-root", restricted=True),
    ROOT_USER: Control("Running as Non-root user"),
    HOST_PROBES: Control("Host Probes / Lifecycle Hooks"),
}

OWN_PRIVILEGES = frozenset(
    name for name, control in CONTROLS.items() if not control.restricted and name != HOST_PROBES
)
"""The baseline controls whose facts can give a container a privilege of its own (a probe's or
handler's host sends the kubelet elsewhere, and grants the container nothing)."""

CONTAINER_KINDS = ("containers", "initContainers", "ephemeralContainers")
THE_POD = "the Pod"
_POD_SC = "/spec/securityContext"
_APPARMOR_ANNOTATION = "container.apparmor.security.beta.kubernetes.io/"
_CONFINED_PROFILES = frozenset({"RuntimeDefault", "Localhost"})
# SELinux types Pod Security "baseline" allows.
_SELINUX_TYPES = frozenset(
    {"", "container_t", "container_init_t", "container_kvm_t", "container_engine_t"}
)
# What a container gets from the runtime unless it drops it: the baseline set and NET_RAW, less
# NET_BIND_SERVICE, which "restricted" lets a container add back after dropping ALL.
_DEFAULT_CAPABILITIES = tuple(sorted({*BASELINE_CAPABILITIES, "NET_RAW"} - {"NET_BIND_SERVICE"}))
DEFAULT_CAPABILITIES = frozenset(_DEFAULT_CAPABILITIES)
_KEEPS = {cap: f"keeps default capability {cap}" for cap in _DEFAULT_CAPABILITIES}
_RESTRICTED_VOLUMES = frozenset(RESTRICTED_VOLUME_TYPES)
_NOUNS = {"containers": "container", "initContainers": "initContainer"}

Key = tuple[str, str, str]  # (control, subject, what)


# A fact's JSON pointer (where it is set), and the name the policy's lists judge: a capability,
# a sysctl, a volume type (None elsewhere, and for a capability or sysctl that is not a name).
Fact = tuple[str, str | None]


class Weakening(NamedTuple):
    """A fact of the patched Pod that the template does not account for."""

    control: str
    subject: str
    what: str
    path: str
    value: str | None
    added: bool  # the subject is a container the patch added


@dataclass(slots=True)
class Part:
    """The facts one part of a Pod adds (the Pod's own fields, a volume, a container), and the
    objects they were read from: a part whose objects are the same (``is``) in another Pod adds
    the same facts there (Pods are never changed in place: patches apply copy-on-write)."""

    inputs: tuple[Any, ...]
    facts: dict[Key, Fact]
    extra: Any = None
    """A volume part's hostPath volume, ``(name, what)`` (None when it is none); a container
    part's: the hostPath volumes of its Pod it was read with; the Pod's own part: its AppArmor
    annotations (``_apparmor``), compared by value."""
    privileged: bool = True
    """A container's part with a fact of ``OWN_PRIVILEGES`` (``pod_facts`` sets it once its
    facts are read; True until then: look at the facts)."""

    def same(self, inputs: tuple[Any, ...]) -> bool:
        old = self.inputs
        return len(old) == len(inputs) and all(map(operator.is_, old, inputs))


@dataclass(slots=True)
class PodFacts:
    """The facts of one Pod, its container subjects, and what a container inherits there;
    ``parts`` (by place in the Pod) are what ``pod_facts(..., reuse=)`` can take again."""

    facts: dict[Key, Fact]
    containers: set[str]
    pod_sc: Mapping[str, Any]
    _plain: frozenset[tuple[str, str]] | None = field(default=None, repr=False)
    parts: dict[tuple[str, int], Part] = field(default_factory=dict, repr=False)
    privileged: bool = True
    """Whether a container has a fact of ``OWN_PRIVILEGES`` here (``pod_facts`` finds it; True
    when not found: look at the facts)."""

    def plain(self) -> frozenset[tuple[str, str]]:
        """The ``(control, what)`` of a container without settings of its own in this Pod."""
        if self._plain is None:
            out: dict[Key, Fact] = {}
            _container({}, "", "", self.pod_sc, {}, out)
            self._plain = frozenset((c, w) for c, _, w in out if not CONTROLS[c].restricted)
        return self._plain

    def unrestricted(self) -> frozenset[str]:
        """The restricted controls some container here does not meet."""
        return frozenset(
            c for c, s, _ in self.facts if CONTROLS[c].restricted and s in self.containers
        )


def weakenings(before: PodFacts, after: PodFacts) -> Iterator[Weakening]:
    """The facts of ``after`` that ``before`` does not account for, in the Pod's order."""
    unrestricted: frozenset[str] | None = None
    for key, fact in after.facts.items():
        if key in before.facts:
            continue
        control, subject, what = key
        added = subject in after.containers and subject not in before.containers
        if added:
            if CONTROLS[control].restricted:
                if unrestricted is None:
                    unrestricted = before.unrestricted()
                if control in unrestricted:
                    continue
            elif (control, what) in before.plain():
                continue
        yield Weakening(control, subject, what, fact[0], fact[1], added)


def pod_facts(
    pod: Mapping[str, Any], reuse: PodFacts | None = None, sibling: bool = True
) -> PodFacts:
    """Every fact of ``pod``: Pod-level ones first, then volumes, then containers in order.

    ``reuse``: the facts of a Pod ``pod`` shares objects with (the template of a patched Pod).
    Each part of ``pod`` (its own fields, a volume, a container) whose facts depend only on
    objects that are the same in that Pod, at the same place, takes its facts from there
    instead of reading them again: the result is the same as without ``reuse``, in the same
    order (a property test checks this), at the cost of the parts a patch touched. When every
    part is taken so (a Pod made from the same template as ``reuse``'s), ``reuse`` itself is
    the answer. ``sibling``: ``pod`` was made from the same template as ``reuse``'s Pod, and is
    likely to take every part (tested first, without building anything); else (a patched Pod
    and its template, where the patch mostly changed a part) the parts are taken one by one
    and ``reuse`` is still the answer when every one was."""
    if reuse is not None and sibling and _unchanged(pod, reuse.parts):
        return reuse
    old = reuse.parts if reuse is not None else {}
    taken = 0  # the parts taken from ``reuse``
    parts: dict[tuple[str, int], Part] = {}
    spec = as_map(pod.get("spec"))
    raw_sc = spec.get("securityContext")
    pod_sc = as_map(raw_sc)
    out: dict[Key, Fact] = {}
    annotations = as_map(pod.get("metadata")).get("annotations")
    inputs = (raw_sc, *map(spec.get, _POD_FIELDS))
    apparmor = _apparmor(annotations)
    part = old.get(_POD_PART)
    if part is None or part.extra != apparmor or not part.same(inputs):
        part = Part(inputs, {}, apparmor)
        _pod_level(dict(zip(_POD_FIELDS, inputs[1:], strict=True)), pod_sc, annotations, part.facts)
    else:
        taken += 1
    parts[_POD_PART] = part
    out.update(part.facts)
    host_volumes: dict[str, str] = {}
    for i, volume in enumerate(as_list(spec.get("volumes"))):
        part = old.get(("volumes", i))
        if part is None or part.inputs[0] is not volume:
            part = Part((volume,), {})
            part.extra = _volume(as_map(volume), i, part.facts)
        else:
            taken += 1
        parts["volumes", i] = part
        out.update(part.facts)
        if part.extra is not None:
            host_volumes[part.extra[0]] = part.extra[1]
    containers: set[str] = set()
    privileged = False
    for kind, reach_kind, i, container in containers_of(spec):
        subject = container_subject(kind, container)
        containers.add(subject)
        base = f"/spec/{kind}/{i}"
        # two parts: its own security settings, and what it reaches (probe hosts, hostPath
        # mounts, host ports), so a patch of one does not read the other again
        name, security = container.get("name"), container.get("securityContext")
        part = old.get((kind, i))
        if part is None or not part.same((raw_sc, name, security)):
            part = Part((raw_sc, name, security), {})
            _security(as_map(security), subject, base, pod_sc, part.facts)
            part.privileged = _has_own_privilege(part.facts)
        else:
            taken += 1
        parts[kind, i] = part
        out.update(part.facts)
        privileged = privileged or part.privileged
        inputs = (name, *map(container.get, _REACH_FIELDS))
        part = old.get((reach_kind, i))
        if part is None or part.extra != host_volumes or not part.same(inputs):
            part = Part(inputs, {}, host_volumes)
            view = dict(zip(_REACH_FIELDS, inputs[1:], strict=True))
            _reach(view, subject, base, host_volumes, part.facts)
            part.privileged = _has_own_privilege(part.facts)
        else:
            taken += 1
        parts[reach_kind, i] = part
        out.update(part.facts)
        privileged = privileged or part.privileged
    if reuse is not None and taken == len(parts) == len(old):
        return reuse  # every part taken, none more or fewer: the same facts
    return PodFacts(out, containers, pod_sc, parts=parts, privileged=privileged)


def _has_own_privilege(facts: Mapping[Key, Fact]) -> bool:
    return any(key[0] in OWN_PRIVILEGES for key in facts)


def _unchanged(pod: Mapping[str, Any], parts: Mapping[tuple[str, int], Part]) -> bool:
    """Whether ``pod_facts`` would take every part of ``pod`` from ``parts`` (each made of the
    same objects, and no part more or fewer): the same test, without building anything, for a
    Pod made from the same template as the one ``parts`` were read from."""
    # It runs for every Pod the controller creates, so it is written out: ``as_map`` and
    # ``as_list`` only for what is not a dict or a list, the containers walked here in the
    # order of ``containers_of`` (``_PART_KINDS``), and each part's inputs compared one by one
    # with the fields they were read from, in the order of ``_POD_KEYS`` and ``_REACH_KEYS``
    # (1.05 against 1.59 us with ``all(map(...))`` for the benchmark's Pod, ``timeit``;
    # tests/unit/chain/test_validator_memo.py changes each of those fields in turn).
    spec = pod.get("spec")
    if type(spec) is not dict:
        spec = as_map(spec)
    part = parts.get(_POD_PART)
    if part is None:
        return False
    get = spec.get
    inputs = part.inputs
    if (
        get("securityContext") is not inputs[0]
        or get("hostNetwork") is not inputs[1]
        or get("hostPID") is not inputs[2]
        or get("hostIPC") is not inputs[3]
        or get("hostUsers") is not inputs[4]
    ):
        return False
    metadata = pod.get("metadata")
    annotations = (metadata if type(metadata) is dict else as_map(metadata)).get("annotations")
    if part.extra != (_apparmor(annotations) if annotations else ()):
        return False
    raw_sc = inputs[0]
    count = 1
    volumes = get("volumes")
    if volumes is not None:
        for i, volume in enumerate(volumes if type(volumes) is list else as_list(volumes)):
            part = parts.get(("volumes", i))
            if part is None or part.inputs[0] is not volume:
                return False
            count += 1
    # with every volume the same, so are the hostPath volumes the containers' reach parts read
    for kind, reach_kind in _PART_KINDS:
        items = get(kind)
        if items is None:
            continue
        for i, container in enumerate(items if type(items) is list else as_list(items)):
            if type(container) is not dict:
                container = as_map(container)
            part = parts.get((kind, i))
            if part is None:
                return False
            field = container.get
            name = field("name")
            inputs = part.inputs
            if (
                inputs[0] is not raw_sc
                or inputs[1] is not name
                or inputs[2] is not field("securityContext")
            ):
                return False
            part = parts.get((reach_kind, i))
            if part is None:
                return False
            inputs = part.inputs
            if (
                inputs[0] is not name
                or inputs[1] is not field("livenessProbe")
                or inputs[2] is not field("readinessProbe")
                or inputs[3] is not field("startupProbe")
                or inputs[4] is not field("lifecycle")
                or inputs[5] is not field("volumeMounts")
                or inputs[6] is not field("ports")
            ):
                return False
            count += 2
    return count == len(parts)


def containers_of(
    spec: Mapping[str, Any],
) -> Iterator[tuple[str, str, int, Mapping[str, Any]]]:
    """``(kind, its reach part's kind, index, container)`` of each container of a Pod's
    ``spec``, kind by kind (``CONTAINER_KINDS``): the order of the parts ``pod_facts`` reads and
    ``_unchanged`` compares. A kind that is not a list has none; a container that is not a map
    is an empty one."""
    for kind, reach_kind in _PART_KINDS:
        items = spec.get(kind)
        if items is None:
            continue
        for i, container in enumerate(items if type(items) is list else as_list(items)):
            yield kind, reach_kind, i, container if type(container) is dict else as_map(container)


_is = operator.is_
_POD_PART = ("pod", 0)
_POD_FIELDS = ("hostNetwork", "hostPID", "hostIPC", "hostUsers")
"""The fields of the Pod's spec its own facts are read from (besides its securityContext)."""
_REACH_FIELDS = (
    "livenessProbe",
    "readinessProbe",
    "startupProbe",
    "lifecycle",
    "volumeMounts",
    "ports",
)
"""The fields of a container ``_reach`` reads (its security facts: its securityContext alone)."""
_POD_KEYS = ("securityContext", *_POD_FIELDS)
"""The Pod's own part's inputs, in order: its securityContext, then ``_POD_FIELDS``."""
_REACH_KEYS = ("name", *_REACH_FIELDS)
"""A container's reach part's inputs, in order: its name, then ``_REACH_FIELDS``."""
_PART_KINDS = tuple((kind, f"{kind}/reach") for kind in CONTAINER_KINDS)
"""Each container kind, and the key of its containers' reach parts (``PodFacts.parts``)."""


def container_subject(kind: str, container: Mapping[str, Any]) -> str:
    """How facts name a container of ``kind`` (``"container 'engine'"``)."""
    return f"{_NOUNS.get(kind, 'ephemeralContainer')} {container.get('name')!r}"


_HOST_USERS = "shares the node's user namespace (hostUsers is not false)"


def _apparmor(annotations: Any) -> tuple[tuple[str, str], ...]:
    """What the Pod's own facts read of its annotations: each AppArmor one, its key and the
    text of its value (a Pod's other annotations, its name's among them, change no fact)."""
    return tuple(
        (str(key), repr(value))
        for key, value in as_map(annotations).items()
        if str(key).startswith(_APPARMOR_ANNOTATION)
    )


def _pod_level(
    spec: Mapping[str, Any],
    pod_sc: Mapping[str, Any],
    annotations: Any,
    out: dict[Key, Fact],
) -> None:
    """The Pod's own facts, from ``spec`` (the fields of ``_POD_FIELDS``), its securityContext
    and its annotations."""
    for namespace in ("hostNetwork", "hostPID", "hostIPC"):
        if _set(spec.get(namespace)):
            out[HOST_NAMESPACES, THE_POD, f"sets {namespace}"] = (f"/spec/{namespace}", None)
    if spec.get("hostUsers") is not False:  # the user namespace: root in the Pod is root outside
        out[HOST_NAMESPACES, THE_POD, _HOST_USERS] = ("/spec/hostUsers", None)
    if _set(as_map(pod_sc.get("windowsOptions")).get("hostProcess")):
        out[HOST_PROCESS, THE_POD, "runs as a Windows host process"] = (
            f"{_POD_SC}/windowsOptions/hostProcess",
            None,
        )
    if _is_zero(pod_sc.get("runAsUser")):
        out[ROOT_USER, THE_POD, "runs as user 0 (runAsUser: 0)"] = (f"{_POD_SC}/runAsUser", None)
    _profiles(pod_sc, _POD_SC, pod_sc, _POD_SC, THE_POD, out)
    for i, sysctl in enumerate(as_list(pod_sc.get("sysctls"))):
        sysctl = as_map(sysctl)
        name = sysctl.get("name")
        out[SYSCTLS, THE_POD, f"sets sysctl {name!r} to {sysctl.get('value')!r}"] = (
            f"{_POD_SC}/sysctls/{i}",
            sysctl_name(name),
        )
    for key, value in as_map(annotations).items():
        if str(key).startswith(_APPARMOR_ANNOTATION) and not (
            value == "runtime/default" or str(value).startswith("localhost/")
        ):
            out[APPARMOR, THE_POD, f"has AppArmor annotation {key!r}: {value!r}"] = (
                f"/metadata/annotations/{escape(str(key))}",
                None,
            )


def volume_facts(volume: Mapping[str, Any]) -> dict[Key, Fact]:
    """The facts one volume adds to a Pod (its place aside), whatever containers mount it: a
    hostPath volume's reach through its mounts is the containers' facts."""
    out: dict[Key, Fact] = {}
    _volume(volume, 0, out)
    return out


def _volume(volume: Mapping[str, Any], i: int, out: dict[Key, Fact]) -> tuple[str, str] | None:
    """The facts of the volume at index ``i``; its name and its fact's text when it is a
    hostPath volume with a name."""
    host = None
    name = volume.get("name")
    subject, path = f"volume {name!r}", f"/spec/volumes/{i}"
    for kind, source in volume.items():
        if kind == "name":
            continue
        if kind == "hostPath":
            source = as_map(source)
            what = f"is hostPath {source.get('path')!r}"
            if source.get("type"):
                what += f" of type {source.get('type')!r}"
            out[HOST_PATH, subject, what] = (path, None)
            if isinstance(name, str):
                host = (name, what)
        elif kind in _RESTRICTED_VOLUMES:
            out[VOLUME_TYPES, subject, f"is a {kind} volume"] = (path, kind)
        else:  # any change to such a volume is a new fact
            what = f"is a {kind} volume {json.dumps(source, sort_keys=True, default=str)}"
            out[VOLUME_TYPES, subject, what] = (path, kind)
    return host


def _container(
    container: Mapping[str, Any],
    subject: str,
    base: str,
    pod_sc: Mapping[str, Any],
    host_volumes: Mapping[str, str],
    out: dict[Key, Fact],
) -> None:
    """Every fact of one container, in order: its security settings', then its reach's."""
    _security(as_map(container.get("securityContext")), subject, base, pod_sc, out)
    _reach(container, subject, base, host_volumes, out)


def _security(
    sc: Mapping[str, Any],
    subject: str,
    base: str,
    pod_sc: Mapping[str, Any],
    out: dict[Key, Fact],
) -> None:
    """The facts of a container's securityContext ``sc`` (and what it inherits from the Pod's)."""
    scp = f"{base}/securityContext"
    if _set(sc.get("privileged")):
        out[PRIVILEGED, subject, "runs privileged"] = (f"{scp}/privileged", None)
    escalation = sc.get("allowPrivilegeEscalation")
    if _set(escalation):
        out[ESCALATION, subject, "sets allowPrivilegeEscalation: true"] = (
            f"{scp}/allowPrivilegeEscalation",
            None,
        )
    if escalation is not False:
        out[ESCALATION_NOT_DISABLED, subject, "does not set allowPrivilegeEscalation: false"] = (
            f"{scp}/allowPrivilegeEscalation",
            None,
        )
    _capabilities(as_map(sc.get("capabilities")), subject, f"{scp}/capabilities", out)
    _users(sc, scp, pod_sc, subject, out)
    _profiles(sc, scp, pod_sc, _POD_SC, subject, out)
    if sc.get("procMount") not in (None, "Default"):
        out[PROC_MOUNT, subject, f"has procMount {sc.get('procMount')!r}"] = (
            f"{scp}/procMount",
            None,
        )
    host_process, where = as_map(sc.get("windowsOptions")).get("hostProcess"), scp
    if host_process is None:
        host_process, where = as_map(pod_sc.get("windowsOptions")).get("hostProcess"), _POD_SC
    if _set(host_process):
        out[HOST_PROCESS, subject, "runs as a Windows host process"] = (
            f"{where}/windowsOptions/hostProcess",
            None,
        )


def _reach(
    container: Mapping[str, Any],
    subject: str,
    base: str,
    host_volumes: Mapping[str, str],
    out: dict[Key, Fact],
) -> None:
    """What a container reaches outside the Pod: hosts its probes and handlers send the kubelet
    to, hostPath volumes it mounts, host ports it opens."""
    _probe_hosts(container, subject, base, out)
    if host_volumes:
        _host_mounts(container, subject, base, host_volumes, out)
    for port in as_list(container.get("ports")):
        port = as_map(port)
        if port.get("hostPort"):
            protocol = port.get("protocol") or "TCP"
            host_ip = port.get("hostIP") or "0.0.0.0"
            what = f"opens host port {host_ip}:{port.get('hostPort')}/{protocol}"
            out[HOST_PORTS, subject, what] = (f"{base}/ports", None)


def _capabilities(caps: Mapping[str, Any], subject: str, path: str, out: dict[Key, Fact]) -> None:
    """Each added capability (judged by name), and each default capability the container keeps
    (restricted: drop ALL, add back at most NET_BIND_SERVICE). Other added ones are judged by
    their name alone, so the operator's list decides them whatever the container drops."""
    added: set[str] = set()
    for raw in as_list(caps.get("add")):
        name = capability_name(raw)
        if name is None:
            out[CAPABILITIES, subject, f"adds {raw!r}"] = (f"{path}/add", None)
        else:
            added.add(name)
            out[CAPABILITIES, subject, f"adds capability {name}"] = (f"{path}/add", name)
    # As the runtime applies them: ALL dropped, then each added one back, then each dropped one.
    dropped = {capability_name(raw) for raw in as_list(caps.get("drop"))}
    kept = set() if "ALL" in dropped else set(_DEFAULT_CAPABILITIES)
    kept |= added
    fact = (path, None)
    for cap in _DEFAULT_CAPABILITIES:
        if cap in kept and cap not in dropped:
            out[KEPT_CAPABILITIES, subject, _KEEPS[cap]] = fact


def _users(
    sc: Mapping[str, Any],
    scp: str,
    pod_sc: Mapping[str, Any],
    subject: str,
    out: dict[Key, Fact],
) -> None:
    user, where = sc.get("runAsUser"), scp
    if user is None:
        user, where = pod_sc.get("runAsUser"), _POD_SC
    if _is_zero(user):
        out[ROOT_USER, subject, "runs as user 0 (runAsUser: 0)"] = (f"{where}/runAsUser", None)
    non_root, where = sc.get("runAsNonRoot"), scp
    if non_root is not None and non_root is not True:
        out[RUN_AS_ROOT, subject, "sets runAsNonRoot: false"] = (f"{scp}/runAsNonRoot", None)
    if non_root is None:
        non_root, where = pod_sc.get("runAsNonRoot"), _POD_SC
    if non_root is not True:
        out[NON_ROOT_NOT_REQUIRED, subject, "may run as root (runAsNonRoot is not true)"] = (
            f"{where}/runAsNonRoot",
            None,
        )


def _profiles(
    sc: Mapping[str, Any],
    scp: str,
    pod_sc: Mapping[str, Any],
    pod_scp: str,
    subject: str,
    out: dict[Key, Fact],
) -> None:
    """Seccomp, AppArmor and SELinux as they apply to ``subject``: its own setting, else the
    Pod's (for the Pod itself, both are the Pod's)."""
    for name in _PROFILES:
        value, where = sc.get(name), scp
        if value is None:
            value, where = pod_sc.get(name), pod_scp
        if value is None:
            if name == "seccompProfile" and subject != THE_POD:
                out[NO_SECCOMP_PROFILE, subject, _NO_SECCOMP] = (f"{where}/{name}", None)
            continue
        value = as_map(value)
        if name == "seLinuxOptions":
            _selinux(value, subject, f"{where}/{name}", out)
            continue
        kind = value.get("type")
        if _one_of(kind, _CONFINED_PROFILES):
            continue
        if name == "seccompProfile":
            if kind is not None:
                what = f"runs with seccomp profile {kind!r}"
                out[SECCOMP, subject, what] = (f"{where}/{name}", None)
            if subject != THE_POD:
                out[NO_SECCOMP_PROFILE, subject, _NO_SECCOMP] = (f"{where}/{name}", None)
        elif kind is not None:
            out[APPARMOR, subject, f"runs with AppArmor profile {kind!r}"] = (
                f"{where}/{name}",
                None,
            )


_PROFILES = ("seccompProfile", "appArmorProfile", "seLinuxOptions")
_NO_SECCOMP = "runs without a RuntimeDefault or Localhost seccomp profile"


def _selinux(options: Mapping[str, Any], subject: str, path: str, out: dict[Key, Fact]) -> None:
    kind = options.get("type")
    if kind is not None and not _one_of(kind, _SELINUX_TYPES):
        out[SELINUX, subject, f"runs with SELinux type {kind!r}"] = (path, None)
    for part in ("user", "role"):
        if options.get(part):
            out[SELINUX, subject, f"runs with SELinux {part} {options.get(part)!r}"] = (path, None)


def _probe_hosts(
    container: Mapping[str, Any], subject: str, base: str, out: dict[Key, Fact]
) -> None:
    """Probes and lifecycle handlers that send the kubelet to a host other than the Pod."""
    handlers = [(p, container.get(p)) for p in ("livenessProbe", "readinessProbe", "startupProbe")]
    lifecycle = as_map(container.get("lifecycle"))
    handlers += [(f"lifecycle/{h}", lifecycle.get(h)) for h in ("postStart", "preStop")]
    for where, handler in handlers:
        if handler is None:
            continue
        handler = as_map(handler)
        for action in ("httpGet", "tcpSocket"):
            host = as_map(handler.get(action)).get("host")
            if host:
                what = f"sends the kubelet to another host: {where} {action}.host {host!r}"
                out[HOST_PROBES, subject, what] = (f"{base}/{where}", None)


def _host_mounts(
    container: Mapping[str, Any],
    subject: str,
    base: str,
    host_volumes: Mapping[str, str],
    out: dict[Key, Fact],
) -> None:
    """A hostPath mount is one fact for what it reaches (volume, mountPath, subPath), and one more
    for each way it is less than read-only: writable, submounts writable (``recursiveReadOnly``
    neither Enabled nor IfPossible) or possibly so (not Enabled), and mount propagation from the
    host, or both ways."""
    for j, mount in enumerate(as_list(container.get("volumeMounts"))):
        mount = as_map(mount)
        name = mount.get("name")
        if not isinstance(name, str) or name not in host_volumes:
            continue
        reach = f"mounts hostPath volume {name!r} at {mount.get('mountPath')!r}"
        for sub in ("subPath", "subPathExpr"):
            if mount.get(sub):
                reach += f" {sub} {mount.get(sub)!r}"
        path = f"{base}/volumeMounts/{j}"
        out[HOST_PATH, subject, reach] = (path, None)
        read_only = mount.get("readOnly") is True
        recursive = mount.get("recursiveReadOnly") if read_only else None
        propagation = mount.get("mountPropagation")
        for weaker, how in (
            (not read_only, "writable"),
            (recursive not in ("Enabled", "IfPossible"), "with writable submounts"),
            (recursive != "Enabled", "with possibly writable submounts"),
            (propagation not in (None, "None"), "with mounts propagated from the host"),
            (
                propagation not in (None, "None", "HostToContainer"),
                "propagating mounts to the host",
            ),
        ):
            if weaker:
                out[HOST_PATH, subject, f"{reach}, {how}"] = (path, None)


def _one_of(value: Any, allowed: frozenset[str]) -> bool:
    return isinstance(value, str) and value in allowed


def _is_zero(value: Any) -> bool:
    """A user id of 0 in any numeric spelling (``0``, ``0.0``); kubectl sends them all as 0."""
    return type(value) in (int, float) and value == 0


def _set(flag: Any) -> bool:
    """Whether a boolean security field grants something: anything but absent or ``false``
    counts, so a value of the wrong type can only be refused, never slip through."""
    return flag is not None and flag is not False
