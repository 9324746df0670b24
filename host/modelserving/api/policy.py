"""The operator's patch policy: which Pod paths plugins may change, which privileges they may add.

Configuration only; ``modelserving.chain.policy`` enforces it on every patch, native or WASM.
Defaults allow the everyday needs of inference plugins and never raise a Pod's privileges.
"""

from __future__ import annotations

from typing import Literal

from pydantic import Field, field_validator

from modelserving.api._base import ApiModel
from modelserving.api.labels import LABEL_PREFIX

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
    allowed_capabilities: list[str] = Field(default_factory=lambda: list(BASELINE_CAPABILITIES))
