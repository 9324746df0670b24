"""One test per Pod Security control (baseline and restricted): a patch that weakens exactly that
control is refused naming it, and one that keeps or strengthens it passes. The allow-list is
opened (``/**``) so that only the privilege comparison decides."""

from __future__ import annotations

import copy
from typing import Any

import pytest

from modelserving.api import PatchPolicy, PatchRejected, PathRule
from modelserving.api.policy import BASELINE_CAPABILITIES
from modelserving.chain import PatchValidator, pss
from modelserving.chain.pss import CONTROLS
from tests.unit.chain.test_patch_policy import expected, op

Ops = list[dict[str, Any]]
OPEN = [PathRule(path="/**")]
ENGINE = "/spec/containers/0"
ENGINE_SC = f"{ENGINE}/securityContext"


def template(*containers: dict[str, Any], **spec: Any) -> dict[str, Any]:
    """A Pod whose containers are ``containers`` (or one plain ``engine``), with ``spec``."""
    return {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {"name": "p", "namespace": "ns", "labels": {"app": "x"}},
        "spec": {"containers": list(containers) or [engine()], **spec},
    }


def engine(**security: Any) -> dict[str, Any]:
    container: dict[str, Any] = {"name": "engine", "image": "e:1"}
    if security:
        container["securityContext"] = security
    return container


def sidecar(**security: Any) -> dict[str, Any]:
    return {**engine(**security), "name": "side"}


# Only the Pod Security comparison decides here: the controls of test_access_controls are open.
NOT_PSS = {
    "allow_privileged_container_changes": True,
    "allowed_secrets": ["s"],
    "allowed_csi_drivers": ["d"],
    "allowed_claims": ["c"],
}


def validator(**settings: Any) -> PatchValidator:
    return PatchValidator(PatchPolicy(allowed_paths=OPEN, **{**NOT_PSS, **settings}))


def weakens(pod: dict[str, Any], ops: Ops, title: str, setting: str, **settings: Any) -> str:
    """``ops`` is refused naming Pod Security control ``title`` and the ``setting`` that would
    allow it, and passes when the policy sets ``settings``. Returns the refusal's path."""
    before = copy.deepcopy(pod)
    with pytest.raises(PatchRejected) as info:
        validator().apply(pod, ops)
    assert pod == before
    assert f"weakens Pod Security control '{title}'" in info.value.reason, info.value.reason
    assert f"patchPolicy.{setting}" in info.value.reason
    if settings:
        assert validator(**settings).apply(pod, ops) == expected(pod, ops)
    return info.value.path


def keeps(pod: dict[str, Any], ops: Ops) -> None:
    assert validator().apply(pod, ops) == expected(pod, ops)


def test_every_control_is_named_as_the_pod_security_standards_do() -> None:
    assert {c.title for c in CONTROLS.values()} == {
        "HostProcess",
        "Host Namespaces",
        "Privileged Containers",
        "Capabilities",
        "HostPath Volumes",
        "Host Ports",
        "AppArmor",
        "SELinux",
        "/proc Mount Type",
        "Seccomp",
        "Sysctls",
        "Volume Types",
        "Privilege Escalation",
        "Running as Non-root",
        "Running as Non-root user",
        "Host Probes / Lifecycle Hooks",
    }


# --- baseline --------------------------------------------------------------------------------


@pytest.mark.parametrize("namespace", ["hostNetwork", "hostPID", "hostIPC"])
def test_host_namespaces(namespace: str) -> None:
    path = weakens(
        template(),
        [op("add", f"/spec/{namespace}", True)],
        "Host Namespaces",
        "allowHostNamespaces is false",
        allow_host_namespaces=True,
    )
    assert path == f"/spec/{namespace}"
    shared = template(**{namespace: True})
    keeps(shared, [op("add", "/spec/containers/0/env", [])])
    keeps(shared, [op("replace", f"/spec/{namespace}", False)])


def test_host_process() -> None:
    host_process = {"windowsOptions": {"hostProcess": True}}
    weakens(
        template(),
        [op("add", "/spec/containers/-", sidecar(**host_process))],
        "HostProcess",
        "allowHostNamespaces is false",
        allow_host_namespaces=True,
    )
    # pod level, and a container override taken away so that it inherits the Pod's
    weakens(template(), [op("add", "/spec/securityContext", host_process)], "HostProcess", "")
    pod = template(engine(windowsOptions={"hostProcess": False}), securityContext=host_process)
    path = weakens(pod, [op("remove", f"{ENGINE_SC}/windowsOptions")], "HostProcess", "")
    assert path == "/spec/securityContext/windowsOptions/hostProcess"
    keeps(pod, [op("add", "/spec/containers/-", sidecar(windowsOptions={"hostProcess": False}))])
    keeps(pod, [op("replace", "/spec/securityContext/windowsOptions/hostProcess", False)])


def test_privileged_containers() -> None:
    pod = template(engine(privileged=False))
    path = weakens(
        pod,
        [op("replace", f"{ENGINE_SC}/privileged", True)],
        "Privileged Containers",
        "allowPrivileged is false",
        allow_privileged=True,
    )
    assert path == f"{ENGINE_SC}/privileged"
    weakens(
        pod,
        [op("add", "/spec/initContainers", [sidecar(privileged=True)])],
        "Privileged Containers",
        "",
    )
    keeps(template(engine(privileged=True)), [op("replace", f"{ENGINE_SC}/privileged", False)])


def test_capabilities_beyond_the_baseline_set() -> None:
    pod = template(engine(capabilities={"add": ["CHOWN"]}))
    ops = [op("add", f"{ENGINE_SC}/capabilities/add/-", "SYS_ADMIN")]
    with pytest.raises(PatchRejected) as info:
        validator().apply(pod, ops)
    assert info.value.reason == (
        "adds capability SYS_ADMIN to container 'engine'; add it to patchPolicy.allowedCapabilities"
    )
    allowing = validator(allowed_capabilities=[*BASELINE_CAPABILITIES, "SYS_ADMIN"])
    assert allowing.apply(pod, ops) == expected(pod, ops)
    keeps(pod, [op("add", f"{ENGINE_SC}/capabilities/add/-", "CAP_KILL")])
    admin = template(engine(capabilities={"add": ["SYS_ADMIN", "CHOWN"]}))
    keeps(admin, [op("remove", f"{ENGINE_SC}/capabilities/add/0")])


@pytest.mark.parametrize(
    "name", ["CHOWN SYS_ADMIN", "CHOWN,SYS_ADMIN", "", "CAP_", "SYS-ADMIN", "SYS_ADMIN\n", 7, None]
)
def test_capability_names_must_be_names(name: Any) -> None:
    """Only a whole name counts: ``"CHOWN SYS_ADMIN"`` is neither CHOWN nor allowed."""
    pod = template(engine(capabilities={"add": ["CHOWN"]}))
    ops = [op("add", f"{ENGINE_SC}/capabilities/add/-", name)]
    everything = validator(allowed_capabilities=[*BASELINE_CAPABILITIES, "SYS_ADMIN"])
    with pytest.raises(PatchRejected) as info:
        everything.apply(pod, ops)
    assert f"adds {name!r}, which is not a capability name" in info.value.reason
    assert info.value.path == f"{ENGINE_SC}/capabilities/add"


def test_capabilities_restricted_drop_all() -> None:
    """Restricted: drop ALL, add back at most NET_BIND_SERVICE."""
    hardened = template(engine(capabilities={"drop": ["ALL"], "add": ["NET_BIND_SERVICE"]}))
    setting = "allowRegainingCapabilities is false"
    for ops in (
        [op("replace", f"{ENGINE_SC}/capabilities/drop", ["NET_RAW"])],
        [op("remove", f"{ENGINE_SC}/capabilities/drop")],
        [op("add", f"{ENGINE_SC}/capabilities/add/-", "CHOWN")],  # baseline, but dropped
        [op("add", "/spec/containers/-", sidecar())],  # every container dropped ALL
    ):
        weakens(hardened, ops, "Capabilities", setting, allow_regaining_capabilities=True)
    keeps(hardened, [op("add", "/spec/containers/-", sidecar(capabilities={"drop": ["all"]}))])
    keeps(hardened, [op("add", f"{ENGINE_SC}/capabilities/drop/-", "NET_RAW")])
    partly = template(engine(capabilities={"drop": ["NET_RAW", "CHOWN"]}))
    weakens(partly, [op("remove", f"{ENGINE_SC}/capabilities/drop/1")], "Capabilities", setting)
    keeps(partly, [op("replace", f"{ENGINE_SC}/capabilities/drop", ["ALL"])])
    keeps(partly, [op("add", "/spec/containers/-", sidecar())])  # the Pod was not restricted


def test_an_operator_listed_capability_may_follow_drop_all() -> None:
    """A capability beyond the default set (IPC_LOCK for RDMA) is decided by
    allowedCapabilities alone, whatever the container drops."""
    pod = template(engine(capabilities={"drop": ["ALL"]}))
    ops = [op("add", f"{ENGINE_SC}/capabilities/add", ["IPC_LOCK"])]
    allowing = validator(allowed_capabilities=[*BASELINE_CAPABILITIES, "IPC_LOCK"])
    assert allowing.apply(pod, ops) == expected(pod, ops)


def test_hostpath_volumes() -> None:
    pod = template(volumes=[{"name": "dev", "hostPath": {"path": "/dev"}}])
    for ops in (
        [op("add", "/spec/volumes/-", {"name": "root", "hostPath": {"path": "/"}})],
        [op("replace", "/spec/volumes/0/hostPath/path", "/")],
        [op("add", "/spec/volumes/0/hostPath/type", "DirectoryOrCreate")],
    ):
        weakens(pod, ops, "HostPath Volumes", "allowHostPath is false", allow_host_path=True)
    keeps(pod, [op("add", "/spec/volumes/0", {"name": "shm", "emptyDir": {}})])
    keeps(pod, [op("remove", "/spec/volumes/0")])


def test_a_second_volume_of_a_host_path_volumes_name_is_refused() -> None:
    """Host access is tracked by volume name: a same-named volume at ``/`` must not hide."""
    pod = template(
        engine(),
        volumes=[{"name": "models", "hostPath": {"path": "/models"}}],
    )
    pod["spec"]["containers"][0]["volumeMounts"] = [{"name": "models", "mountPath": "/m"}]
    for ops in (
        [op("add", "/spec/volumes/-", {"name": "models", "hostPath": {"path": "/"}})],
        [op("add", "/spec/volumes/0", {"name": "models", "emptyDir": {}})],
    ):
        with pytest.raises(PatchRejected) as info:
            validator(allow_host_path=True).apply(pod, ops)
        assert "volume name 'models' is used twice" in info.value.reason
    # a duplicate the template already had is not the plugin's (the API server refuses it)
    pod["spec"]["volumes"].append({"name": "models", "emptyDir": {}})
    keeps(pod, [op("add", "/spec/volumes/-", {"name": "shm", "emptyDir": {}})])
    with pytest.raises(PatchRejected, match="used twice"):
        validator().apply(pod, [op("add", "/spec/volumes/-", {"name": "models", "emptyDir": {}})])


@pytest.fixture
def host_mounted() -> dict[str, Any]:
    """A read-only, recursively read-only hostPath mount of one subdirectory."""
    pod = template(volumes=[{"name": "models", "hostPath": {"path": "/models"}}])
    pod["spec"]["containers"][0]["volumeMounts"] = [
        {
            "name": "models",
            "mountPath": "/models",
            "readOnly": True,
            "recursiveReadOnly": "Enabled",
            "subPath": "llama",
        }
    ]
    return pod


MOUNT = f"{ENGINE}/volumeMounts/0"
WIDER_MOUNTS: dict[str, Ops] = {
    "recursiveReadOnly Disabled": [op("replace", f"{MOUNT}/recursiveReadOnly", "Disabled")],
    "recursiveReadOnly IfPossible": [op("replace", f"{MOUNT}/recursiveReadOnly", "IfPossible")],
    "recursiveReadOnly removed": [op("remove", f"{MOUNT}/recursiveReadOnly")],
    "readOnly false": [
        op("remove", f"{MOUNT}/recursiveReadOnly"),
        op("replace", f"{MOUNT}/readOnly", False),
    ],
    "readOnly removed": [
        op("remove", f"{MOUNT}/recursiveReadOnly"),
        op("remove", f"{MOUNT}/readOnly"),
    ],
    "subPath removed": [op("remove", f"{MOUNT}/subPath")],
    "subPath changed": [op("replace", f"{MOUNT}/subPath", "other")],
    "subPathExpr instead": [
        op("remove", f"{MOUNT}/subPath"),
        op("add", f"{MOUNT}/subPathExpr", "$(POD_NAME)"),
    ],
    "mountPath changed": [op("replace", f"{MOUNT}/mountPath", "/etc")],
    "propagation from the host": [op("add", f"{MOUNT}/mountPropagation", "HostToContainer")],
    "propagation both ways": [op("add", f"{MOUNT}/mountPropagation", "Bidirectional")],
    "second mount": [op("add", f"{ENGINE}/volumeMounts/-", {"name": "models", "mountPath": "/x"})],
    "mount in a sidecar": [
        op(
            "add",
            "/spec/containers/-",
            {**sidecar(), "volumeMounts": [{"name": "models", "mountPath": "/m"}]},
        )
    ],
}


@pytest.mark.parametrize("ops", list(WIDER_MOUNTS.values()), ids=list(WIDER_MOUNTS))
def test_hostpath_mounts(host_mounted: dict[str, Any], ops: Ops) -> None:
    path = weakens(
        host_mounted, ops, "HostPath Volumes", "allowHostPath is false", allow_host_path=True
    )
    assert path.startswith("/spec/containers/")


def test_hostpath_mounts_may_narrow() -> None:
    pod = template(volumes=[{"name": "models", "hostPath": {"path": "/models"}}])
    pod["spec"]["containers"][0]["volumeMounts"] = [
        {"name": "models", "mountPath": "/models", "mountPropagation": "Bidirectional"}
    ]
    narrower = [
        op("add", f"{MOUNT}/readOnly", True),
        op("add", f"{MOUNT}/recursiveReadOnly", "Enabled"),
        op("replace", f"{MOUNT}/mountPropagation", "HostToContainer"),
    ]
    keeps(pod, narrower)
    keeps(pod, [op("remove", f"{ENGINE}/volumeMounts/0")])
    keeps(pod, [op("add", f"{ENGINE}/volumeMounts/0", {"name": "cache", "mountPath": "/c"})])


def test_host_ports() -> None:
    pod = template(engine())
    pod["spec"]["containers"][0]["ports"] = [{"containerPort": 80, "hostPort": 80}]
    for ops in (
        [op("add", f"{ENGINE}/ports/-", {"containerPort": 81, "hostPort": 81})],
        [op("replace", f"{ENGINE}/ports/0/hostPort", 22)],
        [op("add", f"{ENGINE}/ports/0/protocol", "UDP")],
    ):
        weakens(pod, ops, "Host Ports", "allowHostPorts is false", allow_host_ports=True)
    keeps(pod, [op("add", f"{ENGINE}/ports/0/name", "http")])
    keeps(pod, [op("remove", f"{ENGINE}/ports/0/hostPort")])


def test_apparmor() -> None:
    unconfined = {"appArmorProfile": {"type": "Unconfined"}}
    setting = "allowUnconfined is false"
    pod = template(engine(appArmorProfile={"type": "RuntimeDefault"}))
    for ops in (
        [op("replace", f"{ENGINE_SC}/appArmorProfile/type", "Unconfined")],
        [op("add", "/spec/containers/-", sidecar(**unconfined))],
        [op("add", "/spec/securityContext", unconfined)],
        [
            op(
                "add",
                "/metadata/annotations",
                {"container.apparmor.security.beta.kubernetes.io/engine": "unconfined"},
            )
        ],
    ):
        weakens(pod, ops, "AppArmor", setting, allow_unconfined=True)
    # the container's own profile taken away, so that it inherits the Pod's Unconfined
    inherits = template(
        engine(appArmorProfile={"type": "RuntimeDefault"}), securityContext=unconfined
    )
    weakens(inherits, [op("remove", f"{ENGINE_SC}/appArmorProfile")], "AppArmor", setting)
    keeps(
        inherits, [op("add", "/spec/containers/-", sidecar())]
    )  # inherits as the template's would
    local = {"type": "Localhost", "localhostProfile": "k8s-deny-write"}
    keeps(pod, [op("replace", f"{ENGINE_SC}/appArmorProfile", local)])
    keeps(inherits, [op("replace", "/spec/securityContext/appArmorProfile/type", "RuntimeDefault")])


@pytest.mark.parametrize(
    "options",
    [{"type": "spc_t"}, {"user": "system_u"}, {"role": "system_r"}, {"type": "unconfined_t"}],
)
def test_selinux(options: dict[str, str]) -> None:
    pod = template(engine(seLinuxOptions={"type": "container_t"}))
    for ops in (
        [op("replace", f"{ENGINE_SC}/seLinuxOptions", options)],
        [op("add", "/spec/securityContext", {"seLinuxOptions": options})],
        [op("add", "/spec/containers/-", sidecar(seLinuxOptions=options))],
    ):
        weakens(pod, ops, "SELinux", "allowUnconfined is false", allow_unconfined=True)
    inherits = template(engine(seLinuxOptions={"type": "container_t"}))
    inherits["spec"]["securityContext"] = {"seLinuxOptions": options}
    weakens(inherits, [op("remove", f"{ENGINE_SC}/seLinuxOptions")], "SELinux", "")
    keeps(pod, [op("add", f"{ENGINE_SC}/seLinuxOptions/level", "s0:c1,c2")])
    keeps(pod, [op("replace", f"{ENGINE_SC}/seLinuxOptions/type", "container_init_t")])
    keeps(inherits, [op("remove", "/spec/securityContext/seLinuxOptions")])


def test_proc_mount_type() -> None:
    pod = template(engine(procMount="Default"))
    weakens(
        pod,
        [op("replace", f"{ENGINE_SC}/procMount", "Unmasked")],
        "/proc Mount Type",
        "allowUnconfined is false",
        allow_unconfined=True,
    )
    keeps(
        template(engine(procMount="Unmasked")), [op("replace", f"{ENGINE_SC}/procMount", "Default")]
    )
    keeps(pod, [op("remove", f"{ENGINE_SC}/procMount")])


def test_seccomp_baseline() -> None:
    """Baseline: never Unconfined, at Pod or container level."""
    pod = template(engine(seccompProfile={"type": "RuntimeDefault"}))
    unconfined = {"seccompProfile": {"type": "Unconfined"}}
    for ops in (
        [op("replace", f"{ENGINE_SC}/seccompProfile/type", "Unconfined")],
        [op("add", "/spec/securityContext", unconfined)],
    ):
        weakens(pod, ops, "Seccomp", "allowUnconfined is false", allow_unconfined=True)
    local = {"type": "Localhost", "localhostProfile": "profiles/audit.json"}
    keeps(pod, [op("replace", f"{ENGINE_SC}/seccompProfile", local)])
    keeps(
        template(securityContext=unconfined),
        [op("add", "/spec/securityContext/seccompProfile/type", "RuntimeDefault")],
    )


def test_seccomp_restricted() -> None:
    """Restricted: RuntimeDefault or Localhost, the container's own or the Pod's."""
    runtime_default = {"type": "RuntimeDefault"}
    pod = template(engine(seccompProfile=runtime_default))
    for ops in (
        [op("remove", f"{ENGINE_SC}/seccompProfile")],
        [op("add", "/spec/containers/-", sidecar())],  # every container had a profile
    ):
        path = weakens(pod, ops, "Seccomp", "allowUnconfined is false", allow_unconfined=True)
        assert path.endswith("/seccompProfile")
    keeps(pod, [op("add", "/spec/containers/-", sidecar(seccompProfile=runtime_default))])
    keeps(pod, [op("add", "/spec/securityContext", {"seccompProfile": runtime_default})])
    pod_level = template(securityContext={"seccompProfile": runtime_default})
    keeps(pod_level, [op("add", "/spec/containers/-", sidecar())])  # inherits it
    weakens(pod_level, [op("remove", "/spec/securityContext/seccompProfile")], "Seccomp", "")
    keeps(template(), [op("add", "/spec/containers/-", sidecar())])  # the Pod had none


def test_sysctls() -> None:
    pod = template(securityContext={"sysctls": [{"name": "kernel.msgmax", "value": "65536"}]})
    sysctls = "/spec/securityContext/sysctls"
    for ops, name in (
        ([op("add", f"{sysctls}/-", {"name": "kernel.sem", "value": "1"})], "kernel.sem"),
        (
            [op("add", f"{sysctls}/-", {"name": "net/core/somaxconn", "value": "1"})],
            "net.core.somaxconn",
        ),
        ([op("replace", f"{sysctls}/0/value", "1")], "kernel.msgmax"),
    ):
        with pytest.raises(PatchRejected) as info:
            validator().apply(pod, ops)
        assert "weakens Pod Security control 'Sysctls'" in info.value.reason
        assert info.value.reason.endswith(f"add {name} to patchPolicy.allowedSysctls")
        assert validator(allowed_sysctls=[name]).apply(pod, ops) == expected(pod, ops)
    for safe in (
        "net.ipv4.tcp_syncookies",
        "net/ipv4/ip_local_port_range",
        "kernel.shm_rmid_forced",
    ):
        keeps(pod, [op("add", f"{sysctls}/0", {"name": safe, "value": "1"})])
    keeps(pod, [op("remove", f"{sysctls}/0")])


def test_host_probes_and_lifecycle_hooks() -> None:
    pod = template(engine())
    for ops in (
        [op("add", f"{ENGINE}/readinessProbe", {"httpGet": {"host": "10.0.0.1", "port": 80}})],
        [op("add", f"{ENGINE}/lifecycle", {"preStop": {"tcpSocket": {"host": "db", "port": 5}}})],
    ):
        weakens(
            pod,
            ops,
            "Host Probes / Lifecycle Hooks",
            "allowProbeHosts is false",
            allow_probe_hosts=True,
        )
    keeps(pod, [op("add", f"{ENGINE}/readinessProbe", {"httpGet": {"host": "", "port": 80}})])


# --- restricted ------------------------------------------------------------------------------


def test_volume_types() -> None:
    nfs = {"name": "data", "nfs": {"server": "nfs.local", "path": "/data"}}
    pod = template(volumes=[nfs])
    for ops in (
        [op("add", "/spec/volumes/-", {"name": "repo", "gitRepo": {"repository": "x"}})],
        [op("replace", "/spec/volumes/0/nfs/server", "evil.example")],
        [op("replace", "/spec/volumes/0", {"name": "data", "iscsi": {"iqn": "x"}})],
    ):
        with pytest.raises(PatchRejected) as info:
            validator().apply(pod, ops)
        assert "weakens Pod Security control 'Volume Types'" in info.value.reason
        assert "to patchPolicy.allowedVolumeTypes" in info.value.reason
    for kind, source in (
        ("emptyDir", {}),
        ("configMap", {"name": "c"}),
        ("secret", {"secretName": "s"}),
        ("projected", {"sources": []}),
        ("downwardAPI", {"items": []}),
        ("persistentVolumeClaim", {"claimName": "c"}),
        ("csi", {"driver": "d"}),
        ("ephemeral", {"volumeClaimTemplate": {}}),
    ):
        keeps(pod, [op("add", "/spec/volumes/-", {"name": "v", kind: source})])
    keeps(pod, [op("remove", "/spec/volumes/0")])
    allowing = validator(allowed_volume_types=["emptyDir", "nfs"])
    more_nfs = [op("add", "/spec/volumes/-", {**nfs, "name": "more"})]
    assert allowing.apply(pod, more_nfs) == expected(pod, more_nfs)
    secret = [op("add", "/spec/volumes/-", {"name": "s", "secret": {"secretName": "s"}})]
    with pytest.raises(PatchRejected, match=r"add secret to patchPolicy\.allowedVolumeTypes"):
        allowing.apply(pod, secret)


def test_privilege_escalation() -> None:
    pod = template(engine(allowPrivilegeEscalation=False))
    setting = "allowPrivilegeEscalation is false"
    for ops in (
        [op("remove", f"{ENGINE_SC}/allowPrivilegeEscalation")],
        [op("replace", f"{ENGINE_SC}/allowPrivilegeEscalation", True)],
        [op("add", "/spec/containers/-", sidecar())],  # every container disabled it
        [op("add", "/spec/containers/-", sidecar(allowPrivilegeEscalation=True))],
    ):
        path = weakens(pod, ops, "Privilege Escalation", setting, allow_privilege_escalation=True)
        assert path.endswith("/allowPrivilegeEscalation")
    keeps(pod, [op("add", "/spec/containers/-", sidecar(allowPrivilegeEscalation=False))])
    keeps(template(), [op("add", "/spec/containers/-", sidecar())])  # nobody disabled it
    # but an explicit true is a grant of its own, even where nobody disabled it
    explicit = [op("add", "/spec/containers/-", sidecar(allowPrivilegeEscalation=True))]
    weakens(template(), explicit, "Privilege Escalation", setting)
    keeps(template(), [op("add", f"{ENGINE}/securityContext", {"allowPrivilegeEscalation": False})])


def test_running_as_non_root() -> None:
    pod = template(securityContext={"runAsNonRoot": True})
    setting = "allowRunAsRoot is false"
    for ops in (
        [op("remove", "/spec/securityContext/runAsNonRoot")],
        [op("add", f"{ENGINE}/securityContext", {"runAsNonRoot": False})],
        [op("add", "/spec/containers/-", sidecar(runAsNonRoot=False))],
    ):
        weakens(pod, ops, "Running as Non-root", setting, allow_run_as_root=True)
    keeps(pod, [op("add", "/spec/containers/-", sidecar())])  # inherits the Pod's
    moved = [
        op("add", f"{ENGINE}/securityContext", {"runAsNonRoot": True}),
        op("remove", "/spec/securityContext/runAsNonRoot"),
    ]
    keeps(pod, moved)  # each container still requires it
    own = template(engine(runAsNonRoot=True))
    weakens(own, [op("add", "/spec/containers/-", sidecar())], "Running as Non-root", setting)
    keeps(template(), [op("add", "/spec/containers/-", sidecar())])  # the Pod never required it
    # but an explicit false is a grant of its own, even where the Pod never required it
    explicit = [op("add", "/spec/containers/-", sidecar(runAsNonRoot=False))]
    weakens(template(), explicit, "Running as Non-root", setting)


def test_running_as_non_root_user() -> None:
    setting = "allowRunAsRoot is false"
    pod = template(engine(runAsUser=1000))
    for ops in (
        [op("replace", f"{ENGINE_SC}/runAsUser", 0)],
        [op("add", "/spec/securityContext", {"runAsUser": 0})],
        [op("add", "/spec/containers/-", sidecar(runAsUser=0))],
    ):
        weakens(pod, ops, "Running as Non-root user", setting, allow_run_as_root=True)
    root_pod = template(engine(runAsUser=1000), securityContext={"runAsUser": 0})
    path = weakens(
        root_pod, [op("remove", f"{ENGINE_SC}/runAsUser")], "Running as Non-root user", ""
    )
    assert path == "/spec/securityContext/runAsUser"
    keeps(root_pod, [op("add", "/spec/containers/-", sidecar())])  # as the template's would
    keeps(root_pod, [op("replace", "/spec/securityContext/runAsUser", 1000)])


def test_containers_of_walks_every_kind_in_the_pods_order() -> None:
    """The walk ``pod_facts``, ``_unchanged`` and the takeover checks share: kind by kind, each
    container with its index; a kind that is not a list holds none, a container that is not a
    map is an empty one."""
    spec = {
        "ephemeralContainers": [{"name": "e"}],
        "containers": [{"name": "a"}, "not a map", {"name": "b"}],
        "initContainers": {"name": "not a list"},
    }
    walked = [(kind, reach, i, dict(c)) for kind, reach, i, c in pss.containers_of(spec)]
    assert walked == [
        ("containers", "containers/reach", 0, {"name": "a"}),
        ("containers", "containers/reach", 1, {}),
        ("containers", "containers/reach", 2, {"name": "b"}),
        ("ephemeralContainers", "ephemeralContainers/reach", 0, {"name": "e"}),
    ]
