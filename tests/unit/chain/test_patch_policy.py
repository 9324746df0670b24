"""PatchValidator: the default allow-list, identity and controller-owned metadata, privileges,
malformed patches, and the operator's own PatchPolicy."""

from __future__ import annotations

import contextlib
import copy
import json
from collections.abc import Sequence
from typing import Any

import jsonpatch
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from modelserving.api import PatchPolicy, PatchRejected, PathRule
from modelserving.api.labels import (
    ENTRY_LABEL,
    LABEL_PREFIX,
    NAME_LABEL,
    PLUGINS_APPLIED_ANNOTATION,
)
from modelserving.api.policy import BASELINE_CAPABILITIES, default_path_rules
from modelserving.chain import PatchValidator
from modelserving.plugins.patch import escape
from tests.unit.chain.conftest import PodFactory

Ops = list[dict[str, Any]]


def op(name: str, path: str, value: Any = None, **extra: Any) -> dict[str, Any]:
    out: dict[str, Any] = {"op": name, "path": path}
    if name != "remove":
        out["value"] = value
    out.update(extra)
    return out


def expected(pod: dict[str, Any], ops: Ops) -> dict[str, Any]:
    """What RFC 6902 makes of ``ops`` (computed independently of the validator)."""
    result: dict[str, Any] = jsonpatch.apply_patch(copy.deepcopy(pod), ops)
    return result


def policy_with(extra_paths: Sequence[str] = (), **flags: Any) -> PatchPolicy:
    """The default allow-list plus ``extra_paths``, with PatchPolicy ``flags`` set."""
    rules = default_path_rules() + [PathRule(path=p) for p in extra_paths]
    return PatchPolicy(allowed_paths=rules, **flags)


def rejected(validator: PatchValidator, pod: dict[str, Any], ops: Any) -> PatchRejected:
    before = copy.deepcopy(pod)
    with pytest.raises(PatchRejected) as info:
        validator.apply(pod, ops)
    assert pod == before, "a rejected patch must leave the input Pod alone"
    return info.value


SIDECAR = {"name": "proxy", "image": "envoy:1.31"}


def sidecar(**security: Any) -> dict[str, Any]:
    return {**SIDECAR, "securityContext": security}


# --- the default allow-list ------------------------------------------------------------------

ALLOWED: dict[str, Ops] = {
    "label add": [op("add", "/metadata/labels/example.com~1tier", "gold")],
    "label replace": [op("replace", "/metadata/labels/app", "other")],
    "label remove": [op("remove", "/metadata/labels/app")],
    "labels map replaced, controller labels kept": [
        op("replace", "/metadata/labels", {NAME_LABEL: "llm", LABEL_PREFIX + "role": "server"})
    ],
    "annotation add": [op("add", "/metadata/annotations/example.com~1note", "hi")],
    "annotation remove": [op("remove", "/metadata/annotations/team")],
    "annotations map replaced, controller annotation kept": [
        op("add", "/metadata/annotations", {LABEL_PREFIX + "note": "controller", "new": "1"})
    ],
    "env append": [op("add", "/spec/containers/0/env/-", {"name": "B", "value": "2"})],
    "env replace entry": [op("replace", "/spec/containers/0/env/0", {"name": "A", "value": "9"})],
    "env replace value": [op("replace", "/spec/containers/0/env/0/value", "9")],
    "env remove entry": [op("remove", "/spec/containers/0/env/0")],
    "env replaced wholesale": [op("replace", "/spec/containers/0/env", [])],
    "resources": [op("add", "/spec/containers/0/resources/requests", {"cpu": "2"})],
    "resources replaced": [op("replace", "/spec/containers/0/resources", {})],
    "volumeMounts": [
        op("add", "/spec/containers/0/volumeMounts/-", {"name": "m", "mountPath": "/m"})
    ],
    "ports": [op("add", "/spec/containers/0/ports/-", {"containerPort": 9000})],
    "livenessProbe": [op("add", "/spec/containers/0/livenessProbe", {"tcpSocket": {"port": 8000}})],
    "readinessProbe": [op("add", "/spec/containers/0/readinessProbe", {"httpGet": {"port": 1}})],
    "startupProbe": [op("add", "/spec/containers/0/startupProbe", {"exec": {"command": ["t"]}})],
    "probe detail": [
        op("add", "/spec/containers/0/readinessProbe", {"httpGet": {"port": 1}}),
        op("replace", "/spec/containers/0/readinessProbe/httpGet/port", 2),
    ],
    "init env": [op("add", "/spec/initContainers/0/env", [{"name": "X", "value": "1"}])],
    "init resources": [op("add", "/spec/initContainers/0/resources", {"limits": {"cpu": "1"}})],
    "init volumeMounts": [
        op("add", "/spec/initContainers/0/volumeMounts", [{"name": "cache", "mountPath": "/c"}])
    ],
    "init ports": [op("add", "/spec/initContainers/0/ports", [{"containerPort": 1}])],
    "init probes": [
        op("add", "/spec/initContainers/0/livenessProbe", {"tcpSocket": {"port": 1}}),
        op("add", "/spec/initContainers/0/readinessProbe", {"tcpSocket": {"port": 1}}),
        op("add", "/spec/initContainers/0/startupProbe", {"tcpSocket": {"port": 1}}),
    ],
    "init container appended": [op("add", "/spec/initContainers/-", {"name": "w", "image": "w:1"})],
    "init container inserted first": [
        op("add", "/spec/initContainers/0", {"name": "w", "image": "w:1"})
    ],
    "sidecar appended": [op("add", "/spec/containers/-", SIDECAR)],
    "sidecar inserted first": [op("add", "/spec/containers/0", SIDECAR)],
    "volume appended": [op("add", "/spec/volumes/-", {"name": "shm", "emptyDir": {}})],
    "volume inserted": [op("add", "/spec/volumes/0", {"name": "shm", "emptyDir": {}})],
    "nodeSelector key": [op("add", "/spec/nodeSelector/zone", "a")],
    "nodeSelector replaced": [op("replace", "/spec/nodeSelector", {"gpu": "h100"})],
    "nodeSelector removed": [op("remove", "/spec/nodeSelector")],
    "affinity": [
        op("add", "/spec/affinity", {"nodeAffinity": {}}),
        op("add", "/spec/affinity/nodeAffinity/x", 1),
    ],
    "tolerations": [
        op("add", "/spec/tolerations", [{"key": "gpu", "operator": "Exists"}]),
        op("add", "/spec/tolerations/-", {"key": "spot", "operator": "Exists"}),
    ],
    "topologySpreadConstraints": [
        op("add", "/spec/topologySpreadConstraints", [{"maxSkew": 1, "topologyKey": "zone"}])
    ],
    "runtimeClassName": [op("add", "/spec/runtimeClassName", "nvidia")],
    "schedulerName": [op("replace", "/spec/schedulerName", "default-scheduler")],
    "priorityClassName": [op("add", "/spec/priorityClassName", "high")],
    "test ops are read-only and allowed anywhere": [
        op("test", "/metadata/name", "llm-0-server-0-0"),
        op("test", "/spec/containers/0/image", "vllm/vllm-openai:v0.10.0"),
    ],
}


@pytest.mark.parametrize("ops", list(ALLOWED.values()), ids=list(ALLOWED))
def test_default_policy_allows_everyday_changes(pod: dict[str, Any], ops: Ops) -> None:
    before = copy.deepcopy(pod)
    result = PatchValidator().apply(pod, ops)
    assert result == expected(before, ops)
    assert result != before or all(o["op"] == "test" for o in ops)
    assert pod == before


def test_lists_and_maps_may_be_created_when_absent(pod: dict[str, Any]) -> None:
    del pod["spec"]["initContainers"], pod["spec"]["volumes"], pod["metadata"]["labels"]
    del pod["metadata"]["annotations"], pod["spec"]["containers"][0]["env"]
    ops = [
        op("add", "/spec/initContainers", [{"name": "w", "image": "w:1"}]),
        op("add", "/spec/volumes", [{"name": "shm", "emptyDir": {}}]),
        op("add", "/metadata/labels", {"a": "b"}),
        op("add", "/metadata/annotations", {"c": "d"}),
        op("add", "/spec/containers/0/env", [{"name": "E", "value": "1"}]),
    ]
    assert PatchValidator().apply(pod, ops) == expected(pod, ops)


def test_empty_patch_returns_an_equal_pod(pod: dict[str, Any]) -> None:
    result = PatchValidator().apply(pod, [])
    assert result == pod
    assert result is not pod


# --- forbidden paths -------------------------------------------------------------------------

FORBIDDEN: dict[str, tuple[Ops, str]] = {
    "name": ([op("replace", "/metadata/name", "other")], "/metadata/name"),
    "namespace": ([op("replace", "/metadata/namespace", "kube-system")], "/metadata/namespace"),
    "uid": ([op("remove", "/metadata/uid")], "/metadata/uid"),
    "generateName": ([op("add", "/metadata/generateName", "x-")], "/metadata/generateName"),
    "ownerReferences replaced": (
        [op("replace", "/metadata/ownerReferences", [])],
        "/metadata/ownerReferences",
    ),
    "ownerReferences appended": (
        [op("add", "/metadata/ownerReferences/-", {"kind": "X"})],
        "/metadata/ownerReferences/-",
    ),
    "whole metadata": ([op("replace", "/metadata", {"name": "x"})], "/metadata"),
    "kind": ([op("replace", "/kind", "Deployment")], "/kind"),
    "container image": (
        [op("replace", "/spec/containers/0/image", "evil:1")],
        "/spec/containers/0/image",
    ),
    "container command": (
        [op("add", "/spec/containers/0/command", ["sh"])],
        "/spec/containers/0/command",
    ),
    "container args": ([op("add", "/spec/containers/0/args", ["x"])], "/spec/containers/0/args"),
    "init container image": (
        [op("replace", "/spec/initContainers/0/image", "evil:1")],
        "/spec/initContainers/0/image",
    ),
    "init container command": (
        [op("remove", "/spec/initContainers/0/command")],
        "/spec/initContainers/0/command",
    ),
    "container replaced": (
        [op("replace", "/spec/containers/0", SIDECAR)],
        "/spec/containers/0",
    ),
    "container removed": ([op("remove", "/spec/containers/0")], "/spec/containers/0"),
    "containers list replaced": (
        [op("replace", "/spec/containers", [SIDECAR])],
        "/spec/containers",
    ),
    "containers list re-added": ([op("add", "/spec/containers", [SIDECAR])], "/spec/containers"),
    "init container replaced": (
        [op("replace", "/spec/initContainers/0", SIDECAR)],
        "/spec/initContainers/0",
    ),
    "init container removed": ([op("remove", "/spec/initContainers/0")], "/spec/initContainers/0"),
    "volume replaced": (
        [op("replace", "/spec/volumes/0", {"name": "cache", "secret": {"secretName": "s"}})],
        "/spec/volumes/0",
    ),
    "volume removed": ([op("remove", "/spec/volumes/0")], "/spec/volumes/0"),
    "volume edited": (
        [op("add", "/spec/volumes/0/secret", {"secretName": "s"})],
        "/spec/volumes/0/secret",
    ),
    "container securityContext": (
        [op("add", "/spec/containers/0/securityContext", {"runAsUser": 1000})],
        "/spec/containers/0/securityContext",
    ),
    "pod securityContext": (
        [op("replace", "/spec/securityContext", {})],
        "/spec/securityContext",
    ),
    "hostNetwork": ([op("add", "/spec/hostNetwork", True)], "/spec/hostNetwork"),
    "serviceAccountName": (
        [op("add", "/spec/serviceAccountName", "admin")],
        "/spec/serviceAccountName",
    ),
    "whole spec": ([op("replace", "/spec", {"containers": []})], "/spec"),
    "whole Pod": ([op("replace", "", {})], ""),
    "an allowed op first does not help": (
        [
            op("add", "/spec/runtimeClassName", "nvidia"),
            op("replace", "/spec/containers/0/image", "evil:1"),
        ],
        "/spec/containers/0/image",
    ),
}


@pytest.mark.parametrize(("ops", "path"), list(FORBIDDEN.values()), ids=list(FORBIDDEN))
def test_default_policy_refuses_other_paths(pod: dict[str, Any], ops: Ops, path: str) -> None:
    exc = rejected(PatchValidator(), pod, ops)
    assert exc.path == path
    assert "patchPolicy.allowedPaths" in str(exc)
    assert path in str(exc)


ADD_OVER_EXISTING: dict[str, tuple[Ops, str]] = {
    "init containers list": (
        [op("add", "/spec/initContainers", [{"name": "fetch", "image": "evil:1"}])],
        "/spec/initContainers",
    ),
    "volumes list": ([op("add", "/spec/volumes", [])], "/spec/volumes"),
}


@pytest.mark.parametrize(
    ("ops", "path"), list(ADD_OVER_EXISTING.values()), ids=list(ADD_OVER_EXISTING)
)
def test_add_that_replaces_an_existing_list_is_judged_as_replace(
    pod: dict[str, Any], ops: Ops, path: str
) -> None:
    """RFC 6902 'add' onto an existing member replaces it: creating these lists is allowed,
    replacing them (and with them existing init containers or volumes) is not."""
    exc = rejected(PatchValidator(), pod, ops)
    assert exc.path == path
    assert "replace" in exc.reason
    assert "patchPolicy.allowedPaths" in exc.reason


def test_add_over_an_existing_list_is_allowed_where_replace_is(pod: dict[str, Any]) -> None:
    ops = [op("add", "/spec/containers/0/env", [{"name": "B", "value": "2"}])]
    assert PatchValidator().apply(pod, ops) == expected(pod, ops)


# --- the controller's labels and annotations -------------------------------------------------

NAME_KEY = escape(NAME_LABEL)
PROTECTED: dict[str, tuple[Ops, str]] = {
    "label changed": (
        [op("replace", f"/metadata/labels/{NAME_KEY}", "other")],
        f"/metadata/labels/{escape(NAME_LABEL)}",
    ),
    "label overwritten by add": (
        [op("add", f"/metadata/labels/{NAME_KEY}", "other")],
        f"/metadata/labels/{escape(NAME_LABEL)}",
    ),
    "label removed": (
        [op("remove", f"/metadata/labels/{NAME_KEY}")],
        f"/metadata/labels/{escape(NAME_LABEL)}",
    ),
    "label added": (
        [op("add", f"/metadata/labels/{escape(ENTRY_LABEL)}", "true")],
        f"/metadata/labels/{escape(ENTRY_LABEL)}",
    ),
    "label set to a non-string": (
        [op("add", f"/metadata/labels/{NAME_KEY}", {"not": "a string"})],
        f"/metadata/labels/{escape(NAME_LABEL)}",
    ),
    "label set to a number": (
        [op("add", f"/metadata/labels/{NAME_KEY}", 7)],
        f"/metadata/labels/{escape(NAME_LABEL)}",
    ),
    "labels map replaced without them": (
        [op("replace", "/metadata/labels", {"app": "llm"})],
        f"/metadata/labels/{escape(NAME_LABEL)}",
    ),
    "labels map removed": (
        [op("remove", "/metadata/labels")],
        f"/metadata/labels/{escape(NAME_LABEL)}",
    ),
    "annotation changed": (
        [op("replace", f"/metadata/annotations/{escape(LABEL_PREFIX + 'note')}", "x")],
        f"/metadata/annotations/{escape(LABEL_PREFIX)}note",
    ),
    "plugins-applied forged": (
        [op("add", f"/metadata/annotations/{escape(PLUGINS_APPLIED_ANNOTATION)}", "[]")],
        f"/metadata/annotations/{escape(PLUGINS_APPLIED_ANNOTATION)}",
    ),
    "annotations map replaced without them": (
        [op("add", "/metadata/annotations", {"team": "a"})],
        f"/metadata/annotations/{escape(LABEL_PREFIX)}note",
    ),
}


@pytest.mark.parametrize(("ops", "path"), list(PROTECTED.values()), ids=list(PROTECTED))
def test_controller_labels_and_annotations_are_protected(
    pod: dict[str, Any], ops: Ops, path: str
) -> None:
    exc = rejected(PatchValidator(), pod, ops)
    assert exc.path == path
    assert "belongs to the controller" in exc.reason
    assert f"patchPolicy.protectedPrefixes: {LABEL_PREFIX}" in exc.reason


def test_protected_prefixes_come_from_the_policy(pod: dict[str, Any]) -> None:
    validator = PatchValidator(PatchPolicy(protected_prefixes=["example.com/"]))
    pod["metadata"]["labels"]["example.com/owner"] = "ops"
    mine = [op("replace", f"/metadata/labels/{NAME_KEY}", "other")]
    assert validator.apply(pod, mine)["metadata"]["labels"][NAME_LABEL] == "other"
    exc = rejected(validator, pod, [op("remove", "/metadata/labels/example.com~1owner")])
    assert exc.path == "/metadata/labels/example.com~1owner"


# --- privileges ------------------------------------------------------------------------------

# id -> (ops, extra allowed paths needed to reach the field, enabling flags, rejected path, hint)
PRIVILEGES: dict[str, tuple[Ops, list[str], dict[str, Any], str, str]] = {
    "privileged sidecar": (
        [op("add", "/spec/containers/-", sidecar(privileged=True))],
        [],
        {"allow_privileged": True},
        "/spec/containers/1/securityContext/privileged",
        "patchPolicy.allowPrivileged",
    ),
    "privileged init container": (
        [op("add", "/spec/initContainers/0", sidecar(privileged=True))],
        [],
        {"allow_privileged": True},
        "/spec/initContainers/0/securityContext/privileged",
        "patchPolicy.allowPrivileged",
    ),
    "privilege escalation": (
        [op("add", "/spec/containers/-", sidecar(allowPrivilegeEscalation=True))],
        [],
        {"allow_privilege_escalation": True},
        "/spec/containers/1/securityContext/allowPrivilegeEscalation",
        "patchPolicy.allowPrivilegeEscalation",
    ),
    "capability SYS_ADMIN": (
        [op("add", "/spec/containers/-", sidecar(capabilities={"add": ["SYS_ADMIN"]}))],
        [],
        {"allowed_capabilities": [*BASELINE_CAPABILITIES, "SYS_ADMIN"]},
        "/spec/containers/1/securityContext/capabilities/add",
        "SYS_ADMIN",
    ),
    "capability IPC_LOCK": (
        [op("add", "/spec/initContainers/-", sidecar(capabilities={"add": ["CAP_IPC_LOCK"]}))],
        [],
        {"allowed_capabilities": ["ipc_lock"]},
        "/spec/initContainers/1/securityContext/capabilities/add",
        "IPC_LOCK",
    ),
    "hostNetwork": (
        [op("add", "/spec/hostNetwork", True)],
        ["/spec/hostNetwork"],
        {"allow_host_namespaces": True},
        "/spec/hostNetwork",
        "patchPolicy.allowHostNamespaces",
    ),
    "hostPID": (
        [op("add", "/spec/hostPID", True)],
        ["/spec/hostPID"],
        {"allow_host_namespaces": True},
        "/spec/hostPID",
        "patchPolicy.allowHostNamespaces",
    ),
    "hostIPC": (
        [op("add", "/spec/hostIPC", True)],
        ["/spec/hostIPC"],
        {"allow_host_namespaces": True},
        "/spec/hostIPC",
        "patchPolicy.allowHostNamespaces",
    ),
    "hostPath volume": (
        [op("add", "/spec/volumes/-", {"name": "root", "hostPath": {"path": "/"}})],
        [],
        {"allow_host_path": True},
        "/spec/volumes/1",
        "patchPolicy.allowHostPath",
    ),
    "hostPort": (
        [op("add", "/spec/containers/0/ports/-", {"containerPort": 80, "hostPort": 80})],
        [],
        {"allow_host_ports": True},
        "/spec/containers/0/ports",
        "patchPolicy.allowHostPorts",
    ),
    "hostPort in a sidecar": (
        [op("add", "/spec/containers/0", {**SIDECAR, "ports": [{"hostPort": 9901}]})],
        [],
        {"allow_host_ports": True},
        "/spec/containers/0/ports",
        "patchPolicy.allowHostPorts",
    ),
    "container runAsUser 0": (
        [op("add", "/spec/containers/-", sidecar(runAsUser=0))],
        [],
        {"allow_run_as_root": True},
        "/spec/containers/1/securityContext/runAsUser",
        "patchPolicy.allowRunAsRoot",
    ),
    "container runAsNonRoot false": (
        [op("add", "/spec/containers/-", sidecar(runAsNonRoot=False))],
        [],
        {"allow_run_as_root": True},
        "/spec/containers/1/securityContext/runAsNonRoot",
        "patchPolicy.allowRunAsRoot",
    ),
    "Pod runAsUser 0": (
        [op("add", "/spec/securityContext/runAsUser", 0)],
        ["/spec/securityContext/**"],
        {"allow_run_as_root": True},
        "/spec/securityContext/runAsUser",
        "patchPolicy.allowRunAsRoot",
    ),
    "Pod runAsNonRoot removed": (
        [op("remove", "/spec/securityContext/runAsNonRoot")],
        ["/spec/securityContext/**"],
        {"allow_run_as_root": True},
        "/spec/securityContext/runAsNonRoot",
        "patchPolicy.allowRunAsRoot",
    ),
    "Pod runAsNonRoot set false": (
        [op("replace", "/spec/securityContext/runAsNonRoot", False)],
        ["/spec/securityContext/**"],
        {"allow_run_as_root": True},
        "/spec/securityContext/runAsNonRoot",
        "patchPolicy.allowRunAsRoot",
    ),
    "Pod securityContext removed": (
        [op("remove", "/spec/securityContext")],
        ["/spec/securityContext"],
        {"allow_run_as_root": True},
        "/spec/securityContext/runAsNonRoot",
        "patchPolicy.allowRunAsRoot",
    ),
}
PRIVILEGE_CASES = list(PRIVILEGES.values())


@pytest.mark.parametrize(
    ("ops", "paths", "flags", "path", "hint"), PRIVILEGE_CASES, ids=list(PRIVILEGES)
)
def test_privileges_are_never_raised_by_default(
    pod: dict[str, Any],
    ops: Ops,
    paths: list[str],
    flags: dict[str, Any],
    path: str,
    hint: str,
) -> None:
    exc = rejected(PatchValidator(policy_with(paths)), pod, ops)
    assert exc.path == path
    assert hint in exc.reason
    if paths:  # not reachable at all under the default allow-list
        exc = rejected(PatchValidator(), pod, ops)
        assert "patchPolicy.allowedPaths" in exc.reason


@pytest.mark.parametrize(
    ("ops", "paths", "flags", "path", "hint"), PRIVILEGE_CASES, ids=list(PRIVILEGES)
)
def test_each_privilege_is_allowed_when_the_policy_says_so(
    pod: dict[str, Any],
    ops: Ops,
    paths: list[str],
    flags: dict[str, Any],
    path: str,
    hint: str,
) -> None:
    assert PatchValidator(policy_with(paths, **flags)).apply(pod, ops) == expected(pod, ops)


@pytest.mark.parametrize(
    "flag",
    [
        "allow_privileged",
        "allow_privilege_escalation",
        "allow_host_namespaces",
        "allow_host_path",
        "allow_host_ports",
        "allow_run_as_root",
    ],
)
def test_one_flag_does_not_allow_another_privilege(pod: dict[str, Any], flag: str) -> None:
    everything = [
        op("add", "/spec/containers/-", sidecar(privileged=True, allowPrivilegeEscalation=True)),
        op("add", "/spec/volumes/-", {"name": "root", "hostPath": {"path": "/"}}),
        op("add", "/spec/hostNetwork", True),
        op("add", "/spec/containers/0/ports/-", {"containerPort": 1, "hostPort": 1}),
        op("add", "/spec/securityContext/runAsUser", 0),
    ]
    paths = ["/spec/hostNetwork", "/spec/securityContext/**"]
    rejected(PatchValidator(policy_with(paths, **{flag: True})), pod, everything)
    all_flags = {
        "allow_privileged": True,
        "allow_privilege_escalation": True,
        "allow_host_namespaces": True,
        "allow_host_path": True,
        "allow_host_ports": True,
        "allow_run_as_root": True,
    }
    allowed = PatchValidator(policy_with(paths, **all_flags)).apply(pod, everything)
    assert allowed == expected(pod, everything)


def test_ipc_lock_refusal_names_the_allowlist(pod: dict[str, Any]) -> None:
    ops = [op("add", "/spec/containers/-", sidecar(capabilities={"add": ["IPC_LOCK"]}))]
    exc = rejected(PatchValidator(), pod, ops)
    assert "IPC_LOCK" in str(exc)
    assert "add it to patchPolicy.allowedCapabilities" in str(exc)
    assert "container 'proxy'" in str(exc)


def test_baseline_capabilities_are_allowed_in_any_spelling(pod: dict[str, Any]) -> None:
    caps = ["NET_BIND_SERVICE", "cap_chown", "CAP_KILL", *BASELINE_CAPABILITIES]
    ops = [op("add", "/spec/containers/-", sidecar(capabilities={"add": caps}))]
    assert PatchValidator().apply(pod, ops) == expected(pod, ops)


def test_one_forbidden_capability_among_allowed_ones_is_refused(pod: dict[str, Any]) -> None:
    ops = [op("add", "/spec/containers/-", sidecar(capabilities={"add": ["CHOWN", "NET_ADMIN"]}))]
    assert "NET_ADMIN" in rejected(PatchValidator(), pod, ops).reason


def test_allowed_capabilities_replace_the_baseline(pod: dict[str, Any]) -> None:
    validator = PatchValidator(PatchPolicy(allowed_capabilities=["IPC_LOCK"]))
    ipc = [op("add", "/spec/containers/-", sidecar(capabilities={"add": ["IPC_LOCK"]}))]
    assert validator.apply(pod, ipc) == expected(pod, ipc)
    chown = [op("add", "/spec/containers/-", sidecar(capabilities={"add": ["CHOWN"]}))]
    assert "CHOWN" in rejected(validator, pod, chown).reason


def test_root_is_fine_when_the_pod_never_enforced_non_root(pod: dict[str, Any]) -> None:
    """Baseline allows root; only explicit downgrades count. Without Pod-level runAsNonRoot there
    is nothing to remove, but an explicit runAsUser 0 is still a new grant."""
    del pod["spec"]["securityContext"]
    plain = [op("add", "/spec/containers/-", SIDECAR)]
    assert PatchValidator().apply(pod, plain) == expected(pod, plain)
    root = [op("add", "/spec/containers/-", sidecar(runAsUser=0))]
    assert rejected(PatchValidator(), pod, root).path.endswith("/runAsUser")


# --- privileges the template already had ------------------------------------------------------


@pytest.fixture
def privileged_pod(pod: dict[str, Any]) -> dict[str, Any]:
    """The sample Pod whose template already grants a lot."""
    engine = pod["spec"]["containers"][0]
    engine["securityContext"] = {
        "privileged": True,
        "allowPrivilegeEscalation": True,
        "capabilities": {"add": ["SYS_ADMIN", "IPC_LOCK"]},
        "runAsUser": 0,
    }
    engine["ports"] = [{"containerPort": 8000, "hostPort": 8000}]
    pod["spec"]["initContainers"][0]["securityContext"] = {"privileged": True}
    pod["spec"]["volumes"].append({"name": "dev", "hostPath": {"path": "/dev"}})
    pod["spec"]["hostNetwork"] = True
    pod["spec"]["hostIPC"] = True
    del pod["spec"]["securityContext"]
    return pod


EXISTING_PRIVILEGES_KEPT: dict[str, Ops] = {
    "left alone": [op("add", "/spec/containers/0/resources/requests", {"cpu": "1"})],
    "sidecar inserted before it": [op("add", "/spec/containers/0", SIDECAR)],
    "init container inserted before it": [
        op("add", "/spec/initContainers/0", {"name": "w", "image": "w:1"})
    ],
    "volume inserted before the hostPath one": [
        op("add", "/spec/volumes/0", {"name": "shm", "emptyDir": {}})
    ],
    "port added next to the host port": [
        op("add", "/spec/containers/0/ports/0", {"containerPort": 9000})
    ],
    "everything moved at once": [
        op("add", "/spec/containers/0", SIDECAR),
        op("add", "/spec/containers/0", {"name": "second", "image": "s:1"}),
        op("add", "/spec/initContainers/0", {"name": "w", "image": "w:1"}),
        op("add", "/spec/volumes/0", {"name": "shm", "emptyDir": {}}),
    ],
    "privileges dropped": [op("remove", "/spec/containers/0/ports/0")],
}


@pytest.mark.parametrize(
    "ops", list(EXISTING_PRIVILEGES_KEPT.values()), ids=list(EXISTING_PRIVILEGES_KEPT)
)
def test_privileges_the_template_had_are_not_violations(
    privileged_pod: dict[str, Any], ops: Ops
) -> None:
    assert PatchValidator().apply(privileged_pod, ops) == expected(privileged_pod, ops)


NEW_NEXT_TO_EXISTING: dict[str, tuple[Ops, str]] = {
    "privileged sidecar before a privileged container": (
        [op("add", "/spec/containers/0", sidecar(privileged=True))],
        "/spec/containers/0/securityContext/privileged",
    ),
    "container named like a privileged init container": (
        [op("add", "/spec/containers/-", {**sidecar(privileged=True), "name": "fetch"})],
        "/spec/initContainers/0/name",  # refused as a duplicate name before privileges
    ),
    "another hostPath volume": (
        [op("add", "/spec/volumes/0", {"name": "etc", "hostPath": {"path": "/etc"}})],
        "/spec/volumes/0",
    ),
    "another host port": (
        [op("add", "/spec/containers/0/ports/-", {"containerPort": 1, "hostPort": 22})],
        "/spec/containers/0/ports",
    ),
    "an existing capability in a new container": (
        [op("add", "/spec/containers/-", sidecar(capabilities={"add": ["SYS_ADMIN"]}))],
        "/spec/containers/1/securityContext/capabilities/add",
    ),
}


@pytest.mark.parametrize(
    ("ops", "path"), list(NEW_NEXT_TO_EXISTING.values()), ids=list(NEW_NEXT_TO_EXISTING)
)
def test_new_grants_next_to_existing_ones_are_refused(
    privileged_pod: dict[str, Any], ops: Ops, path: str
) -> None:
    assert rejected(PatchValidator(), privileged_pod, ops).path == path


# --- malformed patches and patches that do not apply -----------------------------------------

MALFORMED: dict[str, Any] = {
    "a map": {"op": "add", "path": "/spec/runtimeClassName", "value": "x"},
    "a string": "add /spec/runtimeClassName x",
    "JSON text": json.dumps([op("add", "/spec/runtimeClassName", "x")]),
    "None": None,
    "a number": 3,
    "an item that is not a map": [["add", "/spec/runtimeClassName", "x"]],
    "a null item": [None],
    "unknown op move": [{"op": "move", "from": "/spec/nodeSelector", "path": "/spec/affinity"}],
    "unknown op copy": [{"op": "copy", "from": "/metadata/name", "path": "/metadata/labels/x"}],
    "unknown op name": [{"op": "upsert", "path": "/spec/runtimeClassName", "value": "x"}],
    "op of the wrong case": [{"op": "ADD", "path": "/spec/runtimeClassName", "value": "x"}],
    "op missing": [{"path": "/spec/runtimeClassName", "value": "x"}],
    "op not a string": [{"op": ["add"], "path": "/spec/runtimeClassName", "value": "x"}],
    "op a map": [{"op": {"add": 1}, "path": "/spec/runtimeClassName", "value": "x"}],
    "add without value": [{"op": "add", "path": "/spec/runtimeClassName"}],
    "replace without value": [{"op": "replace", "path": "/spec/schedulerName"}],
    "test without value": [{"op": "test", "path": "/metadata/name"}],
    "extra key": [{"op": "add", "path": "/spec/runtimeClassName", "value": "x", "from": "/a"}],
    "path missing": [{"op": "remove"}],
    "path not a string": [{"op": "remove", "path": 7}],
    "pointer without a leading slash": [op("add", "spec/runtimeClassName", "x")],
    "pointer with a bad escape": [op("add", "/metadata/labels/a~2b", "x")],
    "second op malformed": [op("add", "/spec/runtimeClassName", "x"), {"op": "add"}],
}


@pytest.mark.parametrize("ops", list(MALFORMED.values()), ids=list(MALFORMED))
def test_malformed_patches_are_rejected(pod: dict[str, Any], ops: Any) -> None:
    exc = rejected(PatchValidator(), pod, ops)
    assert exc.reason


def test_shape_errors_name_the_operation(pod: dict[str, Any]) -> None:
    exc = rejected(PatchValidator(), pod, [op("add", "/spec/runtimeClassName", "x"), {"op": "x"}])
    assert "operation 1" in exc.reason
    exc = rejected(PatchValidator(), pod, {"op": "add"})
    assert "list of operations, not dict" in exc.reason
    exc = rejected(PatchValidator(), pod, [{"op": "test", "path": "/kind"}])
    assert (exc.path, exc.reason) == ("/kind", "operation 0: 'test' needs a value")
    exc = rejected(PatchValidator(), pod, [{"op": "remove", "path": "/kind", "from": "/x"}])
    assert (exc.path, exc.reason) == ("/kind", "operation 0: unknown keys ['from']")


def test_a_tuple_of_operations_is_a_patch(pod: dict[str, Any]) -> None:
    """Plugins return ``Sequence[PatchOperation]``; a tuple is as good as a list."""
    ops = (op("add", "/spec/runtimeClassName", "nvidia"),)
    assert PatchValidator().apply(pod, ops)["spec"]["runtimeClassName"] == "nvidia"


NOT_APPLICABLE: dict[str, tuple[Ops, str]] = {
    "remove of a missing member": (
        [op("remove", "/metadata/labels/missing")],
        "/metadata/labels/missing",
    ),
    "remove of a missing env entry": (
        [op("remove", "/spec/containers/0/env/5")],
        "/spec/containers/0/env/5",
    ),
    "replace of a missing member": (
        [op("replace", "/spec/priorityClassName", "x")],
        "/spec/priorityClassName",
    ),
    "add below a missing parent": (
        [op("add", "/spec/affinity/nodeAffinity", {})],
        "/spec/affinity/nodeAffinity",
    ),
    "add past the end of a list": (
        [op("add", "/spec/containers/3", SIDECAR)],
        "/spec/containers/3",
    ),
    "add into a container that does not exist": (
        [op("add", "/spec/containers/7/env/-", {"name": "B"})],
        "/spec/containers/7/env/-",
    ),
    "a non-numeric list index": (
        [op("add", "/spec/containers/engine/env", [])],
        "/spec/containers/engine/env",
    ),
    "add into a string": (
        [op("add", "/spec/schedulerName/x", "y")],
        "/spec/schedulerName/x",
    ),
    "failing test op": ([op("test", "/metadata/name", "someone-else")], "/metadata/name"),
    "failing test op after a good add": (
        [
            op("add", "/spec/runtimeClassName", "nvidia"),
            op("test", "/spec/runtimeClassName", "runc"),
        ],
        "/spec/runtimeClassName",
    ),
    "test of a missing member": ([op("test", "/spec/hostNetwork", False)], "/spec/hostNetwork"),
}


@pytest.mark.parametrize(("ops", "path"), list(NOT_APPLICABLE.values()), ids=list(NOT_APPLICABLE))
def test_patches_that_do_not_apply_are_rejected(pod: dict[str, Any], ops: Ops, path: str) -> None:
    exc = rejected(PatchValidator(), pod, ops)
    assert exc.path == path
    assert "does not apply" in exc.reason or "test operation failed" in exc.reason


def test_a_passing_test_op_guards_the_rest(pod: dict[str, Any]) -> None:
    ops = [
        op("test", "/spec/containers/0/name", "engine"),
        op("add", "/spec/containers/0/env/-", {"name": "B", "value": "2"}),
    ]
    assert PatchValidator().apply(pod, ops) == expected(pod, ops)


# --- the input Pod is never changed ----------------------------------------------------------


@pytest.mark.parametrize(
    "ops",
    [
        [
            op("add", "/spec/containers/0/env/-", {"name": "B"}),
            op("add", "/metadata/labels/x", "y"),
        ],
        # Applies cleanly to the copy, then fails the invariants: the copy was changed, the
        # input must not have been.
        [op("add", "/spec/containers/0/env/-", {"name": "B"}), op("remove", "/metadata/labels")],
        [op("add", "/spec/containers/0/env/-", {"name": "B"}), op("test", "/kind", "Job")],
    ],
    ids=["accepted", "refused after applying", "refused while applying"],
)
def test_the_input_pod_is_never_mutated(pod: dict[str, Any], ops: Ops) -> None:
    before = copy.deepcopy(pod)
    try:
        result = PatchValidator().apply(pod, ops)
    except PatchRejected:
        pass
    else:
        assert result["spec"]["containers"][0]["env"] is not pod["spec"]["containers"][0]["env"]
    assert pod == before


def test_the_result_is_built_copy_on_write(pod: dict[str, Any]) -> None:
    """Only what lies on an operation's path is new; the rest is shared, and the input Pod is
    never changed, whichever operations run (including several on the same list)."""
    before = copy.deepcopy(pod)
    ops = [
        op("add", "/spec/runtimeClassName", "x"),
        op("add", "/spec/containers/0/env/-", {"name": "A", "value": "1"}),
        op("replace", "/spec/containers/0/env/0", {"name": "B", "value": "2"}),
        op("remove", "/spec/containers/0/env/0"),
    ]
    result = PatchValidator().apply(pod, ops)
    assert pod == before
    assert result["metadata"] is pod["metadata"]
    assert result["spec"]["volumes"] is pod["spec"]["volumes"]
    assert result["spec"] is not pod["spec"]
    assert result["spec"]["containers"][0]["env"] is not pod["spec"]["containers"][0]["env"]
    assert result["spec"]["containers"][0]["env"][-1] == {"name": "A", "value": "1"}


def test_a_value_added_by_one_operation_is_copied_before_a_later_one_changes_it(
    pod: dict[str, Any],
) -> None:
    ops = [
        op("add", "/spec/nodeSelector", {"a": "1"}),
        op("add", "/spec/nodeSelector/b", "2"),
    ]
    result, validated = PatchValidator().apply_patch(pod, ops)
    assert validated[0]["value"] == {"a": "1"}
    assert result["spec"]["nodeSelector"] == {"a": "1", "b": "2"}


# --- the operator's own policy ---------------------------------------------------------------


def test_an_operator_allow_list_replaces_the_defaults(pod: dict[str, Any]) -> None:
    validator = PatchValidator(
        PatchPolicy(allowed_paths=[PathRule(path="/spec/nodeSelector/*", ops=["add"])])
    )
    ok = [op("add", "/spec/nodeSelector/zone", "a")]
    assert validator.apply(pod, ok) == expected(pod, ok)
    for ops, path in [
        ([op("add", "/metadata/labels/x", "y")], "/metadata/labels/x"),  # a default, now gone
        ([op("add", "/spec/runtimeClassName", "x")], "/spec/runtimeClassName"),
        ([op("remove", "/spec/nodeSelector/gpu")], "/spec/nodeSelector/gpu"),  # op not listed
        ([op("add", "/spec/nodeSelector/a/b", "y")], "/spec/nodeSelector/a/b"),  # '*' is one
        ([op("add", "/spec/nodeSelector", {})], "/spec/nodeSelector"),
    ]:
        exc = rejected(validator, pod, ops)
        assert exc.path == path
        assert "patchPolicy.allowedPaths" in exc.reason


def test_a_double_star_matches_any_depth_below_but_not_the_field(pod: dict[str, Any]) -> None:
    validator = PatchValidator(PatchPolicy(allowed_paths=[PathRule(path="/spec/affinity/**")]))
    pod["spec"]["affinity"] = {}
    deep = [
        op("add", "/spec/affinity/nodeAffinity", {"x": {}}),
        op("add", "/spec/affinity/nodeAffinity/x/y", 1),
    ]
    assert validator.apply(pod, deep) == expected(pod, deep)
    assert rejected(validator, pod, [op("replace", "/spec/affinity", {})]).path == "/spec/affinity"


def test_an_empty_allow_list_allows_only_test_ops(pod: dict[str, Any]) -> None:
    validator = PatchValidator(PatchPolicy(allowed_paths=[]))
    assert validator.apply(pod, [op("test", "/kind", "Pod")]) == pod
    rejected(validator, pod, [op("add", "/metadata/labels/x", "y")])


def test_identity_is_checked_even_when_the_operator_opens_metadata(pod: dict[str, Any]) -> None:
    validator = PatchValidator(PatchPolicy(allowed_paths=[PathRule(path="/metadata/**")]))
    for ops, path in [
        ([op("replace", "/metadata/name", "x")], "/metadata/name"),
        ([op("remove", "/metadata/namespace")], "/metadata/namespace"),
        ([op("add", "/metadata/uid", "u")], "/metadata/uid"),
        ([op("add", "/metadata/ownerReferences/-", {"kind": "X"})], "/metadata/ownerReferences"),
    ]:
        exc = rejected(validator, pod, ops)
        assert exc.path == path
        assert "identity" in exc.reason
    labels = [op("add", "/metadata/labels/x", "y")]
    assert validator.apply(pod, labels) == expected(pod, labels)


def test_api_version_and_kind_are_checked_even_when_the_operator_opens_them(
    pod: dict[str, Any],
) -> None:
    validator = PatchValidator(PatchPolicy(allowed_paths=[PathRule(path="/kind")]))
    assert "apiVersion or kind" in rejected(validator, pod, [op("replace", "/kind", "Job")]).reason


# --- property: any patch ends in a Pod or in PatchRejected -----------------------------------

TOKENS = [
    "metadata", "spec", "labels", "annotations", "name", "namespace", "uid", "ownerReferences",
    "containers", "initContainers", "ephemeralContainers", "env", "image", "command", "ports",
    "hostPort", "volumes", "hostPath", "volumeMounts", "resources", "securityContext",
    "privileged", "capabilities", "add", "runAsUser", "runAsNonRoot", "hostNetwork",
    "nodeSelector", "affinity", "tolerations", "runtimeClassName", "kind", "apiVersion",
    "0", "1", "2", "-", "01", "99", "", "~", "~0", "~1", "~2", escape(NAME_LABEL), "x",
]  # fmt: skip
REALISTIC = [
    "/metadata/labels", f"/metadata/labels/{escape(NAME_LABEL)}", "/metadata/labels/app",
    "/metadata/annotations", "/spec/containers/-", "/spec/containers/0", "/spec/containers/0/env",
    "/spec/containers/0/env/-", "/spec/containers/0/env/0", "/spec/containers/0/ports",
    "/spec/containers/0/ports/-", "/spec/initContainers", "/spec/initContainers/-",
    "/spec/volumes", "/spec/volumes/-", "/spec/volumes/0", "/spec/nodeSelector",
    "/spec/nodeSelector/gpu", "/spec/tolerations", "/spec/securityContext/runAsNonRoot",
]  # fmt: skip

POD_VALUES = [
    SIDECAR,
    sidecar(privileged=True),
    sidecar(capabilities={"add": ["CHOWN", "SYS_ADMIN"]}),
    {"name": "B", "value": "1"},
    {"containerPort": 1, "hostPort": 1},
    {"name": "root", "hostPath": {"path": "/"}},
    {"name": "shm", "emptyDir": {}},
    {NAME_LABEL: "llm", "app": "x"},
    "x",
    True,
    0,
    [],
]

good_pointers = st.one_of(
    st.sampled_from(REALISTIC),
    st.lists(st.sampled_from(TOKENS), max_size=5).map(lambda ts: "".join("/" + t for t in ts)),
)
pointers = st.one_of(good_pointers, st.text(max_size=8))
scalars = st.one_of(
    st.none(),
    st.booleans(),
    st.integers(min_value=-2, max_value=2**40),
    st.floats(allow_nan=False, allow_infinity=False),
    st.text(max_size=6),
)
json_values = st.recursive(
    scalars,
    lambda inner: st.one_of(
        st.lists(inner, max_size=3),
        st.dictionaries(st.one_of(st.sampled_from(TOKENS), st.text(max_size=4)), inner, max_size=3),
    ),
    max_leaves=10,
)
values = st.one_of(st.sampled_from(POD_VALUES), json_values)
# Mostly well-formed operations on Pod-ish pointers, so that many patches get past the shape
# check into path matching, application and the invariants; some garbage of every kind.
well_formed = st.builds(
    op, st.sampled_from(["add", "remove", "replace", "test"]), good_pointers, values
)
garbage = st.fixed_dictionaries(
    {
        "op": st.one_of(
            st.sampled_from(["add", "remove", "replace", "test", "move", "copy", "", "ADD"]),
            json_values,
        ),
        "path": st.one_of(pointers, json_values),
    },
    optional={"value": values, "from": pointers},
)
operations = st.one_of(well_formed, well_formed, well_formed, garbage, json_values)
clean = st.lists(well_formed, max_size=3)
patches = st.one_of(st.lists(operations, max_size=5), clean, clean, values)


plausible = st.lists(
    st.builds(
        op,
        st.sampled_from(["add", "add", "remove", "replace", "test"]),
        st.sampled_from(REALISTIC),
        values,
    ),
    min_size=1,
    max_size=3,
)
PROPERTY_SETTINGS = settings(
    max_examples=300,
    deadline=None,
    suppress_health_check=[HealthCheck.function_scoped_fixture],
)


def try_apply(pod: dict[str, Any], patch: Any) -> dict[str, Any] | None:
    """The patched Pod, or None when refused with PatchRejected; the input must not change."""
    before = copy.deepcopy(pod)
    result: dict[str, Any] | None = None
    with contextlib.suppress(PatchRejected):  # the one way to refuse; anything else fails
        result = PatchValidator().apply(pod, patch)
    assert pod == before
    return result


@PROPERTY_SETTINGS
@given(patch=st.one_of(patches, plausible), privileged=st.booleans())
def test_any_patch_ends_in_a_pod_or_patch_rejected(
    make_pod: PodFactory, patch: Any, privileged: bool
) -> None:
    pod = make_pod()
    if privileged:
        pod["spec"]["containers"][0]["securityContext"] = {"privileged": True}
    result = try_apply(pod, patch)
    assert result is None or isinstance(result, dict)


def as_dict(value: Any) -> dict[str, Any]:
    return value if isinstance(value, dict) else {}


def as_dicts(items: Any) -> list[dict[str, Any]]:
    """The maps in a list field; a plugin may put anything there (the API server refuses it)."""
    return [i for i in items if isinstance(i, dict)] if isinstance(items, list) else []


def containers(pod: dict[str, Any]) -> list[tuple[str, dict[str, Any]]]:
    spec = pod["spec"]
    return [
        (kind, c) for kind in ("containers", "initContainers") for c in as_dicts(spec.get(kind))
    ]


@PROPERTY_SETTINGS
@given(patch=plausible, privileged=st.booleans())
def test_an_accepted_patch_keeps_identity_controller_metadata_and_privileges(
    make_pod: PodFactory, patch: Any, privileged: bool
) -> None:
    pod = make_pod()
    if privileged:
        pod["spec"]["containers"][0]["securityContext"] = {"privileged": True}
    result = try_apply(pod, patch)
    if result is None:
        return
    meta = result["metadata"]
    for key in ("name", "namespace", "uid", "ownerReferences"):
        assert meta.get(key) == pod["metadata"][key]
    assert {k: v for k, v in meta["labels"].items() if k.startswith(LABEL_PREFIX)} == {
        k: v for k, v in pod["metadata"]["labels"].items() if k.startswith(LABEL_PREFIX)
    }
    assert {("containers", pod["spec"]["containers"][0]["name"], "vllm/vllm-openai:v0.10.0")} <= {
        (kind, c.get("name"), c.get("image")) for kind, c in containers(result)
    }
    privileged_now = {
        (kind, c.get("name"))
        for kind, c in containers(result)
        if as_dict(c.get("securityContext")).get("privileged") is True
    }
    assert privileged_now <= ({("containers", "engine")} if privileged else set())
    for _, c in containers(result):
        caps = as_dict(as_dict(c.get("securityContext")).get("capabilities")).get("add")
        if isinstance(caps, list):
            assert all(cap in BASELINE_CAPABILITIES for cap in caps)
        assert not any(p.get("hostPort") for p in as_dicts(c.get("ports")))
    assert not any("hostPath" in v for v in as_dicts(result["spec"].get("volumes")))


def test_duplicate_container_names_are_refused(pod: dict[str, Any]) -> None:
    name = pod["spec"]["containers"][0]["name"]
    sidecar = {"name": name, "image": "busybox:1.37"}
    exc = rejected(PatchValidator(), pod, [op("add", "/spec/containers/-", sidecar)])
    assert f"container name {name!r} is used twice" in exc.reason
    init = {"name": name, "image": "busybox:1.37"}
    exc = rejected(PatchValidator(), pod, [op("add", "/spec/initContainers/-", init)])
    assert "used twice" in exc.reason


def test_host_port_with_another_protocol_is_a_new_grant() -> None:
    pod = {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {"name": "p"},
        "spec": {"containers": [{"name": "c", "ports": [{"containerPort": 53, "hostPort": 53}]}]},
    }
    udp = {"containerPort": 53, "hostPort": 53, "protocol": "UDP"}
    exc = rejected(PatchValidator(), pod, [op("add", "/spec/containers/0/ports/-", udp)])
    assert "53/UDP" in exc.reason
    same = {"containerPort": 8053, "hostPort": 53}
    assert PatchValidator().apply(pod, [op("add", "/spec/containers/0/ports/-", same)])


def test_path_answers_are_cached_without_changing_them() -> None:
    validator = PatchValidator()
    for _ in range(3):
        assert validator.allows("/spec/containers/0/env/-", "add")
        assert not validator.allows("/spec/containers/0/image", "replace")
        assert validator.allows("/spec/volumes/-", "add")
        assert not validator.allows("/spec/volumes/0", "replace")


# --- adding capabilities needs no path rule: allowedCapabilities decides -----------------------

CAPABILITY_ADDS: dict[str, Ops] = {
    "securityContext created": [
        op("add", "/spec/containers/0/securityContext", {"capabilities": {"add": ["IPC_LOCK"]}})
    ],
    "capabilities created": [
        op("add", "/spec/containers/0/securityContext", {"runAsNonRoot": True}),
        op("add", "/spec/containers/0/securityContext/capabilities", {"add": ["IPC_LOCK"]}),
    ],
    "item appended": [
        op("add", "/spec/containers/0/securityContext", {"capabilities": {"add": ["CHOWN"]}}),
        op("add", "/spec/containers/0/securityContext/capabilities/add/-", "IPC_LOCK"),
    ],
    "item appended, CAP_ spelling": [
        op("add", "/spec/containers/0/securityContext", {"capabilities": {"add": ["CHOWN"]}}),
        op("add", "/spec/containers/0/securityContext/capabilities/add/-", "cap_ipc_lock"),
    ],
}


@pytest.mark.parametrize("ops", list(CAPABILITY_ADDS.values()), ids=list(CAPABILITY_ADDS))
def test_adding_a_capability_is_judged_by_allowed_capabilities_alone(
    pod: dict[str, Any], ops: Ops
) -> None:
    last = ops[-1:]
    if len(ops) > 1:  # set up the container's securityContext first (a path the policy allows)
        pod = PatchValidator(policy_with(["/spec/containers/*/securityContext"])).apply(
            pod, ops[:1]
        )
    exc = rejected(PatchValidator(), pod, last)
    assert exc.reason.endswith("add it to patchPolicy.allowedCapabilities")
    assert "IPC_LOCK" in exc.reason
    allowed = PatchPolicy(allowed_capabilities=[*BASELINE_CAPABILITIES, "IPC_LOCK"])
    assert PatchValidator(allowed).apply(pod, last) == expected(pod, last)


@pytest.mark.parametrize(
    "ops",
    [
        [
            op(
                "add",
                "/spec/containers/0/securityContext",
                {"capabilities": {"add": ["IPC_LOCK"]}, "readOnlyRootFilesystem": False},
            )
        ],
        [op("add", "/spec/containers/0/securityContext", {"capabilities": {"drop": ["ALL"]}})],
        [op("add", "/spec/containers/0/securityContext/capabilities", {"add": "CHOWN"})],
        [op("add", "/spec/containers/0/securityContext/capabilities/drop", ["CHOWN"])],
        [op("replace", "/spec/containers/0/securityContext", {"capabilities": {"add": []}})],
        [op("add", "/spec/securityContext", {"capabilities": {"add": ["IPC_LOCK"]}})],
        [op("add", "/spec/volumes/0/securityContext", {"capabilities": {"add": ["IPC_LOCK"]}})],
    ],
    ids=["other fields", "drop", "not a list", "drop list", "replace", "pod level", "no container"],
)
def test_only_pure_capability_adds_skip_the_path_rules(pod: dict[str, Any], ops: Ops) -> None:
    assert "patchPolicy.allowedPaths" in rejected(PatchValidator(), pod, ops).reason


def test_baseline_capabilities_still_need_a_path_rule(pod: dict[str, Any]) -> None:
    """The privilege check lets baseline capabilities through, so without a path rule a plugin
    could add them back into a container that drops ALL."""
    hardened = PatchValidator(policy_with(["/spec/containers/*/securityContext"])).apply(
        pod,
        [op("add", "/spec/containers/0/securityContext", {"capabilities": {"drop": ["ALL"]}})],
    )
    base = "/spec/containers/0/securityContext/capabilities"
    for ops in (
        [op("add", f"{base}/add", ["SETUID", "DAC_OVERRIDE"])],
        [op("add", f"{base}/add", ["IPC_LOCK", "CAP_SETUID"])],
        [op("add", f"{base}/add", [])],
    ):
        assert "patchPolicy.allowedPaths" in rejected(PatchValidator(), hardened, ops).reason
    ipc = [op("add", f"{base}/add", ["IPC_LOCK"])]
    allowed = PatchPolicy(allowed_capabilities=[*BASELINE_CAPABILITIES, "IPC_LOCK"])
    assert PatchValidator(allowed).apply(hardened, ipc) == expected(hardened, ipc)
    # one item at a time, appended or inserted, in any spelling
    with_ipc = PatchValidator(allowed).apply(hardened, ipc)
    for ops in (
        [op("add", f"{base}/add/-", "SETUID")],
        [op("add", f"{base}/add/0", "cap_chown")],
    ):
        assert "patchPolicy.allowedPaths" in rejected(PatchValidator(allowed), with_ipc, ops).reason
    more = [op("add", f"{base}/add/0", "cap_ipc_lock")]
    assert PatchValidator(allowed).apply(with_ipc, more) == expected(with_ipc, more)


def test_a_capability_add_over_an_existing_security_context_is_a_replace(
    pod: dict[str, Any],
) -> None:
    pod = PatchValidator(policy_with(["/spec/containers/*/securityContext"])).apply(
        pod, [op("add", "/spec/containers/0/securityContext", {"runAsNonRoot": True})]
    )
    sc = {"capabilities": {"add": ["IPC_LOCK"]}}
    ops = [op("add", "/spec/containers/0/securityContext", sc)]
    assert "replaces it" in rejected(PatchValidator(), pod, ops).reason
