"""Grants beyond Pod Security "baseline" that a sidecar or patch could sneak in: seccomp,
AppArmor, SELinux, procMount, Windows host processes, probe hosts, hostPath mounts, Volcano's
gang annotations; and hostile values that must end in PatchRejected, never a crash."""

from __future__ import annotations

from typing import Any

import pytest

from modelserving.api import PatchPolicy, PathRule
from modelserving.chain import PatchValidator
from tests.unit.chain.test_patch_policy import op, rejected


def sidecar(**extra: Any) -> dict[str, Any]:
    return {"name": "side", "image": "busybox:1.37", **extra}


CONFINEMENT = {
    "seccomp unconfined": {"securityContext": {"seccompProfile": {"type": "Unconfined"}}},
    "apparmor unconfined": {"securityContext": {"appArmorProfile": {"type": "Unconfined"}}},
    "selinux spc_t": {"securityContext": {"seLinuxOptions": {"type": "spc_t"}}},
    "selinux user": {"securityContext": {"seLinuxOptions": {"user": "system_u"}}},
    "procMount unmasked": {"securityContext": {"procMount": "Unmasked"}},
}


@pytest.mark.parametrize("extra", list(CONFINEMENT.values()), ids=list(CONFINEMENT))
def test_sidecar_cannot_lift_confinement(pod: dict[str, Any], extra: dict[str, Any]) -> None:
    exc = rejected(PatchValidator(), pod, [op("add", "/spec/containers/-", sidecar(**extra))])
    assert "patchPolicy.allowUnconfined is false" in exc.reason
    assert "container 'side'" in exc.reason
    allowed = PatchValidator(PatchPolicy(allow_unconfined=True))
    assert allowed.apply(pod, [op("add", "/spec/containers/-", sidecar(**extra))])


def test_confined_settings_are_fine(pod: dict[str, Any]) -> None:
    extra = {
        "securityContext": {
            "seccompProfile": {"type": "RuntimeDefault"},
            "appArmorProfile": {"type": "RuntimeDefault"},
            "seLinuxOptions": {"type": "container_t", "level": "s0:c1,c2"},
            "procMount": "Default",
        }
    }
    after = PatchValidator().apply(pod, [op("add", "/spec/containers/-", sidecar(**extra))])
    assert after["spec"]["containers"][-1]["name"] == "side"


def test_windows_host_process_is_a_host_namespace(pod: dict[str, Any]) -> None:
    extra = {"securityContext": {"windowsOptions": {"hostProcess": True}}}
    exc = rejected(PatchValidator(), pod, [op("add", "/spec/containers/-", sidecar(**extra))])
    assert "patchPolicy.allowHostNamespaces is false" in exc.reason


@pytest.mark.parametrize("value", ["unconfined", "anything-else"])
def test_apparmor_annotation_unconfined(pod: dict[str, Any], value: str) -> None:
    key = "container.apparmor.security.beta.kubernetes.io~1engine"
    exc = rejected(PatchValidator(), pod, [op("add", f"/metadata/annotations/{key}", value)])
    assert "AppArmor annotation" in exc.reason
    assert "patchPolicy.allowUnconfined" in exc.reason


@pytest.mark.parametrize("value", ["runtime/default", "localhost/my-profile"])
def test_apparmor_annotation_confined_is_fine(pod: dict[str, Any], value: str) -> None:
    key = "container.apparmor.security.beta.kubernetes.io~1engine"
    assert PatchValidator().apply(pod, [op("add", f"/metadata/annotations/{key}", value)])


@pytest.mark.parametrize(
    ("field", "handler"),
    [
        ("livenessProbe", {"httpGet": {"host": "10.0.0.1", "port": 80}}),
        ("readinessProbe", {"tcpSocket": {"host": "metadata.internal", "port": 80}}),
        ("startupProbe", {"httpGet": {"host": "x", "port": 1}}),
    ],
)
def test_probe_hosts_are_refused(pod: dict[str, Any], field: str, handler: dict[str, Any]) -> None:
    exc = rejected(PatchValidator(), pod, [op("add", f"/spec/containers/0/{field}", handler)])
    assert "patchPolicy.allowProbeHosts is false" in exc.reason
    assert PatchValidator(PatchPolicy(allow_probe_hosts=True)).apply(
        pod, [op("add", f"/spec/containers/0/{field}", handler)]
    )


def test_probe_without_host_is_fine(pod: dict[str, Any]) -> None:
    probe = {"httpGet": {"path": "/health", "port": 8000}}
    after = PatchValidator().apply(pod, [op("add", "/spec/containers/0/readinessProbe", probe)])
    assert after["spec"]["containers"][0]["readinessProbe"] == probe


def test_lifecycle_hook_host_in_new_sidecar_is_refused(pod: dict[str, Any]) -> None:
    extra = {"lifecycle": {"preStop": {"httpGet": {"host": "evil", "port": 80}}}}
    exc = rejected(PatchValidator(), pod, [op("add", "/spec/containers/-", sidecar(**extra))])
    assert "lifecycle/preStop httpGet.host 'evil'" in exc.reason


def test_new_mount_of_an_existing_host_path_volume_is_refused(pod: dict[str, Any]) -> None:
    pod["spec"]["volumes"].append({"name": "host", "hostPath": {"path": "/var/lib"}})
    mount = {"name": "host", "mountPath": "/host"}
    exc = rejected(
        PatchValidator(),
        pod,
        [op("add", "/spec/containers/-", sidecar(volumeMounts=[mount]))],
    )
    assert "container 'side' mounts hostPath volume 'host' at '/host'" in exc.reason
    assert "patchPolicy.allowHostPath is false" in exc.reason
    exc = rejected(PatchValidator(), pod, [op("add", "/spec/containers/0/volumeMounts/-", mount)])
    assert "container 'engine' mounts hostPath volume 'host'" in exc.reason


@pytest.mark.parametrize("key", ["scheduling.k8s.io~1group-name", "volcano.sh~1task-spec"])
def test_volcano_gang_annotations_are_protected(pod: dict[str, Any], key: str) -> None:
    exc = rejected(PatchValidator(), pod, [op("add", f"/metadata/annotations/{key}", "other")])
    assert "belongs to the controller" in exc.reason


@pytest.mark.parametrize("name", [{"a": 1}, ["x"], 7, None])
def test_non_string_container_names_are_rejected(pod: dict[str, Any], name: Any) -> None:
    exc = rejected(PatchValidator(), pod, [op("add", "/spec/containers/-", sidecar(name=name))])
    assert "container name must be a string" in exc.reason


@pytest.mark.parametrize(
    ("security", "setting"),
    [
        ({"privileged": "y"}, "allowPrivileged"),
        ({"privileged": 1}, "allowPrivileged"),
        ({"allowPrivilegeEscalation": "Y"}, "allowPrivilegeEscalation"),
        ({"runAsUser": 0.0}, "allowRunAsRoot"),
        ({"runAsNonRoot": "n"}, "allowRunAsRoot"),
        ({"windowsOptions": {"hostProcess": "true"}}, "allowHostNamespaces"),
    ],
)
def test_wrongly_typed_security_values_count_as_grants(
    pod: dict[str, Any], security: dict[str, Any], setting: str
) -> None:
    """kubectl reads YAML 1.1: ``y`` is true and ``0.0`` is 0, so such values must not pass."""
    side = sidecar(securityContext=security)
    exc = rejected(PatchValidator(), pod, [op("add", "/spec/containers/-", side)])
    assert f"patchPolicy.{setting} is false" in exc.reason


def test_wrongly_typed_host_network_counts(pod: dict[str, Any]) -> None:
    policy = PatchPolicy(allowed_paths=[PathRule(path="/spec/hostNetwork")])
    exc = rejected(PatchValidator(policy), pod, [op("add", "/spec/hostNetwork", "yes")])
    assert "patchPolicy.allowHostNamespaces is false" in exc.reason


@pytest.fixture
def host_mounted(pod: dict[str, Any]) -> dict[str, Any]:
    pod["spec"]["volumes"].append({"name": "models", "hostPath": {"path": "/models"}})
    pod["spec"]["containers"][0]["volumeMounts"].append(
        {"name": "models", "mountPath": "/models", "readOnly": True, "subPath": "llama"}
    )
    pod["spec"]["containers"][0]["ports"][0].update({"hostPort": 9100, "hostIP": "127.0.0.1"})
    return pod


@pytest.mark.parametrize(
    "ops",
    [
        [op("replace", "/spec/containers/0/volumeMounts/1/readOnly", False)],
        [op("remove", "/spec/containers/0/volumeMounts/1/subPath")],
        [op("add", "/spec/containers/0/volumeMounts/1/mountPropagation", "HostToContainer")],
        [op("add", "/spec/containers/0/volumeMounts/-", {"name": "models", "mountPath": "/h"})],
    ],
    ids=["writable", "whole directory", "propagation", "second mount"],
)
def test_widening_an_existing_host_path_mount_is_refused(
    host_mounted: dict[str, Any], ops: Any
) -> None:
    exc = rejected(PatchValidator(), host_mounted, ops)
    assert "patchPolicy.allowHostPath is false" in exc.reason


def test_host_port_on_every_interface_is_a_new_grant(host_mounted: dict[str, Any]) -> None:
    ops = [op("replace", "/spec/containers/0/ports/0/hostIP", "0.0.0.0")]
    exc = rejected(PatchValidator(), host_mounted, ops)
    assert "0.0.0.0:9100/TCP" in exc.reason


def test_unrelated_changes_next_to_host_grants_are_fine(host_mounted: dict[str, Any]) -> None:
    ops = [op("add", "/spec/containers/0/resources", {"limits": {"cpu": "1"}})]
    assert PatchValidator().apply(host_mounted, ops)["spec"]["containers"][0]["resources"]


def nested(depth: int) -> Any:
    value: Any = {}
    for _ in range(depth):
        value = {"a": value}
    return value


def test_deep_values_are_refused_not_crashing(pod: dict[str, Any]) -> None:
    exc = rejected(PatchValidator(), pod, [op("add", "/spec/affinity", nested(5000))])
    assert "nested more than" in exc.reason


def test_deep_pods_built_from_shallow_operations_are_refused(pod: dict[str, Any]) -> None:
    ops = [op("add", "/spec/affinity", nested(40))]
    ops.append(op("add", "/spec/affinity" + "/a" * 40 + "/b", nested(40)))
    exc = rejected(PatchValidator(), pod, ops)
    assert exc.reason.startswith("operation 1: the value is nested more than")
    too_deep = [op("add", "/spec/affinity" + "/a" * 70, 1)]
    assert (
        "the path is more than 64 levels deep" in rejected(PatchValidator(), pod, too_deep).reason
    )


@pytest.mark.parametrize(
    "value",
    [("SYS_ADMIN",), {"SYS_ADMIN"}, b"x", float("nan"), {1: "a"}],
    ids=["tuple", "set", "bytes", "nan", "int key"],
)
def test_values_that_are_not_json_are_refused(pod: dict[str, Any], value: Any) -> None:
    side = sidecar(securityContext={"capabilities": {"add": value}})
    exc = rejected(PatchValidator(), pod, [op("add", "/spec/containers/-", side)])
    assert "operation 0: the value" in exc.reason
