"""The operator's patch policy: which Pod paths plugins may change, which privileges they may add,
which fields they may never change.

Configuration only; ``modelserving.chain.policy`` enforces it on every patch, native or WASM.
Defaults allow the everyday needs of inference plugins and never raise a Pod's privileges. The
names and lists of the Kubernetes Pod Security Standards used here (capabilities, sysctls,
volume types) are the ones its baseline and restricted profiles give.
"""

from __future__ import annotations

import re
from typing import Annotated, Literal

from pydantic import AfterValidator, Field, field_validator

from modelserving.api._base import ApiModel
from modelserving.api.labels import LABEL_PREFIX
from modelserving.api.names import is_dns1123_subdomain

MutatingOp = Literal["add", "remove", "replace"]
ALL_MUTATING_OPS: tuple[MutatingOp, ...] = ("add", "remove", "replace")

# Labels and annotations owned by the controller: its own, and Volcano's gang-scheduling keys.
PROTECTED_PREFIXES: tuple[str, ...] = (
    LABEL_PREFIX,
    "scheduling.k8s.io/group-name",
    "volcano.sh/task-spec",
)

# Capabilities Kubernetes' Pod Security "baseline" level allows; anything else is a privilege.
BASELINE_CAPABILITIES: tuple[str, ...] = (
    "AUDIT_WRITE",
    "CHOWN",
    "DAC_OVERRIDE",
    "FOWNER",
    "FSETID",
    "KILL",
    "MKNOD",
    "NET_BIND_SERVICE",
    "SETFCAP",
    "SETGID",
    "SETPCAP",
    "SETUID",
    "SYS_CHROOT",
)

_CAPABILITY = re.compile(r"[A-Z][A-Z0-9_]*")


def capability_name(raw: object) -> str | None:
    """A capability as the runtime reads it: upper-cased, without ``CAP_`` (``cap_ipc_lock`` is
    ``IPC_LOCK``); None when it is not a name (a space, punctuation, not a string)."""
    if not isinstance(raw, str):
        return None
    name = raw.upper().removeprefix("CAP_")
    return name if _CAPABILITY.fullmatch(name) else None


# Sysctls Pod Security "baseline" allows (the kubelet's safe set, as of Kubernetes 1.32).
SAFE_SYSCTLS: tuple[str, ...] = (
    "kernel.shm_rmid_forced",
    "net.ipv4.ip_local_port_range",
    "net.ipv4.ip_unprivileged_port_start",
    "net.ipv4.tcp_syncookies",
    "net.ipv4.ping_group_range",
    "net.ipv4.ip_local_reserved_ports",
    "net.ipv4.tcp_keepalive_time",
    "net.ipv4.tcp_fin_timeout",
    "net.ipv4.tcp_keepalive_intvl",
    "net.ipv4.tcp_keepalive_probes",
    "net.ipv4.tcp_rmem",
    "net.ipv4.tcp_wmem",
)

_SYSCTL = re.compile(r"([a-z0-9]([-_a-z0-9]*[a-z0-9])?[./])*[a-z0-9]([-_a-z0-9]*[a-z0-9])?")


def sysctl_name(raw: object) -> str | None:
    """A sysctl name in its dotted form (the kubelet reads ``net/ipv4/tcp_syncookies`` as
    ``net.ipv4.tcp_syncookies``); None when it is not a sysctl name."""
    if not isinstance(raw, str) or len(raw) > 253 or not _SYSCTL.fullmatch(raw):
        return None
    first = min((raw.find(sep) for sep in "./" if sep in raw), default=-1)
    if first >= 0 and raw[first] == "/":
        return raw.translate(str.maketrans("./", "/."))
    return raw


# Volume types Pod Security "restricted" allows; every other type but hostPath is judged by
# allowedVolumeTypes (hostPath by allowHostPath).
RESTRICTED_VOLUME_TYPES: tuple[str, ...] = (
    "configMap",
    "csi",
    "downwardAPI",
    "emptyDir",
    "ephemeral",
    "persistentVolumeClaim",
    "projected",
    "secret",
)
# Every volume source a Pod may name (core/v1 VolumeSource).
VOLUME_TYPES: frozenset[str] = frozenset(
    {
        *RESTRICTED_VOLUME_TYPES,
        "awsElasticBlockStore",
        "azureDisk",
        "azureFile",
        "cephfs",
        "cinder",
        "fc",
        "flexVolume",
        "flocker",
        "gcePersistentDisk",
        "gitRepo",
        "glusterfs",
        "hostPath",
        "image",
        "iscsi",
        "nfs",
        "photonPersistentDisk",
        "portworxVolume",
        "quobyte",
        "rbd",
        "scaleIO",
        "storageos",
        "vsphereVolume",
    }
)

# Named protections of protectedFields, on by default (docs/operator.md, "patchPolicy").
EXISTING_RUNTIME_CLASS = "existingRuntimeClassName"
SYSTEM_PRIORITY_CLASS = "systemPriorityClassName"
CONTROL_PLANE_TOLERATIONS = "controlPlaneTolerations"
NAMED_PROTECTIONS: tuple[str, ...] = (
    EXISTING_RUNTIME_CLASS,
    SYSTEM_PRIORITY_CLASS,
    CONTROL_PLANE_TOLERATIONS,
)
# Taints kubeadm and others put on control-plane nodes.
CONTROL_PLANE_TAINTS: tuple[str, ...] = (
    "node-role.kubernetes.io/control-plane",
    "node-role.kubernetes.io/master",
)
_BAD_ESCAPE = re.compile(r"~(?![01])")


def _capability(value: str) -> str:
    if capability_name(value) is None:
        raise ValueError(
            f"{value!r} is not a capability: a name of letters, digits and '_', with or without "
            "'CAP_' (e.g. IPC_LOCK or CAP_IPC_LOCK)"
        )
    return value


def _sysctl(value: str) -> str:
    if sysctl_name(value) is None:
        raise ValueError(
            f"{value!r} is not a sysctl: a name like net.ipv4.tcp_syncookies (lower-case letters, "
            "digits, '-' and '_' between dots)"
        )
    return value


def _volume_type(value: str) -> str:
    if value == "hostPath":
        raise ValueError("hostPath volumes are allowed by allowHostPath, not listed here")
    if value not in VOLUME_TYPES:
        raise ValueError(
            f"{value!r} is not a volume type; the types are "
            f"{', '.join(sorted(VOLUME_TYPES - {'hostPath'}))}"
        )
    return value


def _protection(value: str) -> str:
    if not value.startswith("/"):
        if value not in NAMED_PROTECTIONS:
            raise ValueError(
                f"{value!r} is neither a JSON Pointer (starting with '/') nor a named protection "
                f"({', '.join(NAMED_PROTECTIONS)})"
            )
    elif _BAD_ESCAPE.search(value):
        raise ValueError(f"{value!r}: a JSON Pointer may use '~' only as '~0' or '~1'")
    elif {"*", "**", "-"} & set(value.split("/")):
        raise ValueError(
            f"{value!r}: an entry names one field; '*', '**' and '-' are not patterns here"
        )
    return value


def _object_name(value: str) -> str:
    if not is_dns1123_subdomain(value):
        raise ValueError(
            f"{value[:80]!r} is not an object name (lower-case letters, digits, '-' and '.', at "
            "most 253 characters)"
        )
    return value


_CSI_DRIVER = re.compile(r"[A-Za-z0-9]([-A-Za-z0-9_.]{0,61}[A-Za-z0-9])?")


def _csi_driver(value: str) -> str:
    if not _CSI_DRIVER.fullmatch(value):
        raise ValueError(
            f"{value[:80]!r} is not a CSI driver name (letters, digits, '-', '_' and '.', at most "
            "63 characters, e.g. secrets-store.csi.k8s.io)"
        )
    return value


Capability = Annotated[str, AfterValidator(_capability)]
Sysctl = Annotated[str, AfterValidator(_sysctl)]
VolumeType = Annotated[str, AfterValidator(_volume_type)]
Protection = Annotated[str, AfterValidator(_protection)]
ObjectName = Annotated[str, AfterValidator(_object_name)]
CsiDriver = Annotated[str, AfterValidator(_csi_driver)]


class PathRule(ApiModel):
    """A JSON Pointer pattern plugins may change: ``*`` is one segment, a final ``**`` any depth."""

    path: str
    ops: list[MutatingOp] = Field(default_factory=lambda: list(ALL_MUTATING_OPS))

    @field_validator("path")
    @classmethod
    def _pointer(cls, path: str) -> str:
        if not path.startswith("/"):
            raise ValueError("a path pattern is a JSON Pointer and starts with '/'")
        if "**" in path.split("/")[:-1]:
            raise ValueError("'**' may only be the last segment")
        return path


def _container_rules(kind: str) -> list[PathRule]:
    fields = (
        "env",
        "resources",
        "volumeMounts",
        "ports",
        "livenessProbe",
        "readinessProbe",
        "startupProbe",
    )
    rules = [PathRule(path=f"/spec/{kind}/*/{f}/**") for f in fields]
    rules += [PathRule(path=f"/spec/{kind}/*/{f}") for f in fields]
    # A whole new container (sidecar or init container) may be added, never replaced or removed.
    rules.append(PathRule(path=f"/spec/{kind}/*", ops=["add"]))
    return rules


def default_path_rules() -> list[PathRule]:
    """The default allow-list (see README, "Patch policy")."""
    rules = [
        PathRule(path="/metadata/labels"),
        PathRule(path="/metadata/labels/*"),
        PathRule(path="/metadata/annotations"),
        PathRule(path="/metadata/annotations/*"),
        PathRule(path="/spec/initContainers", ops=["add"]),
        PathRule(path="/spec/volumes", ops=["add"]),
        PathRule(path="/spec/volumes/*", ops=["add"]),
    ]
    rules += _container_rules("containers") + _container_rules("initContainers")
    for field in (
        "nodeSelector",
        "affinity",
        "tolerations",
        "topologySpreadConstraints",
        "runtimeClassName",
        "schedulerName",
        "priorityClassName",
    ):
        rules += [PathRule(path=f"/spec/{field}"), PathRule(path=f"/spec/{field}/**")]
    return rules


class PatchPolicy(ApiModel):
    """Operator configuration of what plugin patches may do (README: "Patch policy")."""

    allowed_paths: list[PathRule] = Field(default_factory=default_path_rules)
    protected_prefixes: list[str] = Field(default_factory=lambda: list(PROTECTED_PREFIXES))
    allow_privileged: bool = False
    allow_privilege_escalation: bool = False
    allow_host_namespaces: bool = False
    allow_host_path: bool = False
    allow_host_ports: bool = False
    allow_run_as_root: bool = False
    allow_unconfined: bool = False
    allow_probe_hosts: bool = False
    allow_regaining_capabilities: bool = False
    allowed_capabilities: list[Capability] = Field(
        default_factory=lambda: list(BASELINE_CAPABILITIES)
    )
    allowed_sysctls: list[Sysctl] = Field(default_factory=lambda: list(SAFE_SYSCTLS))
    allowed_volume_types: list[VolumeType] = Field(
        default_factory=lambda: list(RESTRICTED_VOLUME_TYPES)
    )
    protected_fields: list[Protection] = Field(default_factory=lambda: list(NAMED_PROTECTIONS))
    # What a Pod may reach beyond Pod Security (modelserving.chain.access, .takeover).
    allowed_secrets: list[ObjectName] = Field(default_factory=list)
    allowed_csi_drivers: list[CsiDriver] = Field(default_factory=list)
    allowed_claims: list[ObjectName] = Field(default_factory=list)
    allow_service_account_tokens: bool = False
    allowed_service_accounts: list[ObjectName] = Field(default_factory=list)
    allow_node_name: bool = False
    allow_privileged_container_changes: bool = False


ObjectKind = Literal["ConfigMap"]


def _default_kinds() -> list[ObjectKind]:
    return ["ConfigMap"]


class ObjectPolicy(ApiModel):
    """Operator configuration of the objects a ServingGroup hook may own (ABI v3, 15.4): which
    kinds (ConfigMap only in this version; empty: none), how many per plugin and ServingGroup,
    and how large each may be (its JSON)."""

    kinds: list[ObjectKind] = Field(default_factory=_default_kinds)
    max_objects: int = Field(default=8, ge=0, le=16)
    max_object_bytes: int = Field(default=256 * 1024, ge=1, le=1024 * 1024)
