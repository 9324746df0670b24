"""The manifests in deploy/: they parse, agree with each other and with the code, and grant
exactly the permissions the controller needs. Only parsed here (no kustomize or kubectl)."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import yaml
from pydantic import BaseModel

from modelserving.api.operator import OperatorConfig
from modelserving.controller import kube

ROOT = Path(__file__).resolve().parents[2]
DEPLOY = ROOT / "deploy"
NAMESPACE = "modelserving-system"
SERVICE_ACCOUNT = "modelserving-controller"
CONFIG_PATH = "/etc/modelserving/config.yaml"

# (API group, resource, verb): everything the ClusterRole may grant, and all of it.
CLUSTER_GRANTS = {
    *(("workload.serving.volcano.sh", "modelservings", v) for v in ("get", "list", "watch")),
    *(
        ("workload.serving.volcano.sh", "modelservings/status", v)
        for v in ("get", "update", "patch")
    ),
    *(("", "pods", v) for v in ("get", "list", "watch", "create", "delete", "patch")),
    *(("", "services", v) for v in ("get", "list", "watch", "create", "delete")),
    *(("", "nodes", v) for v in ("get", "list", "watch")),
    *(("", "configmaps", v) for v in ("get", "list", "watch", "create", "patch", "delete")),
    *(("", "events", v) for v in ("create", "patch")),
    *(("events.k8s.io", "events", v) for v in ("create", "patch")),
    *(("apps", "controllerrevisions", v) for v in ("get", "list", "watch", "create", "delete")),
    *(
        ("scheduling.volcano.sh", "podgroups", v)
        for v in ("get", "list", "watch", "create", "patch", "delete")
    ),
    *(("apiextensions.k8s.io", "customresourcedefinitions", v) for v in ("get", "list", "watch")),
}
LEASE_GRANTS = {("coordination.k8s.io", "leases", v) for v in ("get", "create", "update")}


def yaml_files() -> list[Path]:
    return sorted(p for p in DEPLOY.iterdir() if p.suffix in {".yaml", ".yml"})


def objects() -> Iterator[dict[str, Any]]:
    for path in yaml_files():
        if path.name != "kustomization.yaml":
            yield from (doc for doc in yaml.safe_load_all(path.read_text()) if doc)


def one(kind: str, name: str | None = None) -> dict[str, Any]:
    found = [o for o in objects() if o["kind"] == kind and name in (None, o["metadata"]["name"])]
    assert len(found) == 1, f"expected one {kind} {name or ''} in deploy/, found {len(found)}"
    return found[0]


def grants(role: dict[str, Any]) -> set[tuple[str, str, str]]:
    out = set()
    for rule in role["rules"]:
        assert set(rule) <= {"apiGroups", "resources", "verbs"}, rule
        for group in rule["apiGroups"]:
            for resource in rule["resources"]:
                for verb in rule["verbs"]:
                    out.add((group, resource, verb))
    return out


def container() -> dict[str, Any]:
    pod = one("Deployment", "modelserving-controller")["spec"]["template"]["spec"]
    (only,) = pod["containers"]
    return dict(only)


def operator_config_text() -> str:
    text = one("ConfigMap", "modelserving-config")["data"]["config.yaml"]
    assert isinstance(text, str)
    return text


@pytest.mark.parametrize("path", yaml_files(), ids=lambda p: p.name)
def test_every_yaml_file_parses(path: Path) -> None:
    docs = [d for d in yaml.safe_load_all(path.read_text()) if d is not None]
    assert docs
    for doc in docs:
        assert isinstance(doc, dict)
        assert doc.get("apiVersion")
        assert doc.get("kind")


def test_kustomization_lists_every_file() -> None:
    kustomization = yaml.safe_load((DEPLOY / "kustomization.yaml").read_text())
    resources = kustomization["resources"]
    present = {p.name for p in DEPLOY.iterdir()} - {"kustomization.yaml", "Dockerfile"}
    assert len(resources) == len(set(resources))
    assert {r for r in resources if not r.startswith("../")} == present
    assert "../crds" in resources
    assert kustomization["namespace"] == NAMESPACE


def test_crds_kustomization_lists_the_crd() -> None:
    crds = ROOT / "crds"
    kustomization = yaml.safe_load((crds / "kustomization.yaml").read_text())
    files = {p.name for p in crds.glob("*.yaml")} - {"kustomization.yaml"}
    assert set(kustomization["resources"]) == files


def test_config_map_holds_the_default_configuration() -> None:
    data = yaml.safe_load(operator_config_text())
    config = OperatorConfig.model_validate(data)
    assert config == OperatorConfig()


def field_names(model: type[BaseModel]) -> set[str]:
    return {info.alias or name for name, info in model.model_fields.items()}


def test_config_map_writes_every_setting_out() -> None:
    """Each field of every section appears, so the file documents all of them."""
    data = yaml.safe_load(operator_config_text())
    assert set(data) == field_names(OperatorConfig)
    for name, info in OperatorConfig.model_fields.items():
        section = info.annotation
        if isinstance(section, type) and issubclass(section, BaseModel):
            assert set(data[info.alias or name]) == field_names(section), name


def test_everything_namespaced_is_in_the_controller_namespace() -> None:
    assert one("Namespace")["metadata"]["name"] == NAMESPACE
    cluster_scoped = {"Namespace", "ClusterRole", "ClusterRoleBinding", "CustomResourceDefinition"}
    for obj in objects():
        if obj["kind"] not in cluster_scoped:
            assert obj["metadata"]["namespace"] == NAMESPACE, obj["metadata"]["name"]


def test_cluster_role_grants_exactly_what_the_controller_needs() -> None:
    role = one("ClusterRole", "modelserving-controller")
    got = grants(role)
    assert not any("*" in part for g in got for part in g)
    assert got == CLUSTER_GRANTS


def test_cluster_role_covers_every_resource_the_controller_touches() -> None:
    got = grants(one("ClusterRole", "modelserving-controller"))
    touched = [v for v in vars(kube).values() if isinstance(v, kube.Resource)]
    assert touched
    for res in touched:
        assert {(res.group, res.plural, v) for v in ("get", "list", "watch")} <= got, res


def test_leader_election_role_is_only_leases_in_its_namespace() -> None:
    role = one("Role", "modelserving-leader-election")
    assert role["metadata"]["namespace"] == NAMESPACE
    assert grants(role) == LEASE_GRANTS


@pytest.mark.parametrize(
    ("binding_kind", "role_kind", "name"),
    [
        ("ClusterRoleBinding", "ClusterRole", "modelserving-controller"),
        ("RoleBinding", "Role", "modelserving-leader-election"),
    ],
)
def test_bindings_give_the_roles_to_the_service_account(
    binding_kind: str, role_kind: str, name: str
) -> None:
    binding = one(binding_kind, name)
    assert binding["roleRef"] == {
        "apiGroup": "rbac.authorization.k8s.io",
        "kind": role_kind,
        "name": name,
    }
    assert binding["subjects"] == [
        {"kind": "ServiceAccount", "name": SERVICE_ACCOUNT, "namespace": NAMESPACE}
    ]
    one("ServiceAccount", SERVICE_ACCOUNT)


def test_deployment_runs_two_replicas_as_the_service_account() -> None:
    deployment = one("Deployment", "modelserving-controller")
    spec = deployment["spec"]
    assert spec["replicas"] == 2
    pod = spec["template"]["spec"]
    assert pod["serviceAccountName"] == SERVICE_ACCOUNT
    assert pod["automountServiceAccountToken"] is True
    labels = spec["template"]["metadata"]["labels"]
    assert spec["selector"]["matchLabels"].items() <= labels.items()
    preferred = pod["affinity"]["podAntiAffinity"][
        "preferredDuringSchedulingIgnoredDuringExecution"
    ]
    term = preferred[0]["podAffinityTerm"]
    assert term["topologyKey"] == "kubernetes.io/hostname"
    assert term["labelSelector"]["matchLabels"].items() <= labels.items()


def test_deployment_security_context() -> None:
    pod = one("Deployment", "modelserving-controller")["spec"]["template"]["spec"]
    assert pod["securityContext"]["runAsNonRoot"] is True
    assert pod["securityContext"]["runAsUser"] == 65532
    assert pod["securityContext"]["seccompProfile"] == {"type": "RuntimeDefault"}
    sc = container()["securityContext"]
    assert sc["runAsNonRoot"] is True
    assert sc["runAsUser"] == 65532
    assert sc["readOnlyRootFilesystem"] is True
    assert sc["allowPrivilegeEscalation"] is False
    assert sc["capabilities"] == {"drop": ["ALL"]}
    assert sc["seccompProfile"] == {"type": "RuntimeDefault"}
    assert "privileged" not in sc
    for key in ("hostNetwork", "hostPID", "hostIPC"):
        assert key not in pod


def test_deployment_command_env_and_volumes() -> None:
    c = container()
    assert c["image"] == "modelserving-controller:dev"
    assert c["command"] == ["modelserving", "run", "--config", CONFIG_PATH]
    env = {e["name"]: e for e in c["env"]}
    assert env["POD_NAMESPACE"]["valueFrom"] == {"fieldRef": {"fieldPath": "metadata.namespace"}}
    assert env["MODELSERVING_CACHE"]["value"] == "/var/cache/modelserving"

    pod = one("Deployment", "modelserving-controller")["spec"]["template"]["spec"]
    volumes = {v["name"]: v for v in pod["volumes"]}
    mounts = {m["mountPath"]: m for m in c["volumeMounts"]}
    config_mount = mounts[str(Path(CONFIG_PATH).parent)]
    assert config_mount["readOnly"] is True
    assert volumes[config_mount["name"]]["configMap"]["name"] == "modelserving-config"
    assert "emptyDir" in volumes[mounts["/var/cache/modelserving"]["name"]]
    assert "emptyDir" in volumes[mounts["/tmp"]["name"]]
    assert set(mounts) == {"/etc/modelserving", "/var/cache/modelserving", "/tmp"}


def test_deployment_resources() -> None:
    resources = container()["resources"]
    assert resources["requests"] == {"cpu": "200m", "memory": "256Mi"}
    assert resources["limits"] == {"memory": "1Gi"}


def test_ports_and_probes_match_the_configuration() -> None:
    config = OperatorConfig()
    c = container()
    ports = {p["name"]: p["containerPort"] for p in c["ports"]}
    assert ports == {"metrics": config.metrics.port, "health": config.health.port}
    for probe in ("livenessProbe", "readinessProbe"):
        # /healthz: /readyz is 200 only on the leader, which would keep the standby unready.
        assert c[probe]["httpGet"]["path"] == "/healthz", probe
        assert c[probe]["httpGet"]["port"] in ("health", config.health.port), probe


def test_metrics_service() -> None:
    service = one("Service", "modelserving-controller-metrics")
    annotations = service["metadata"]["annotations"]
    assert annotations["prometheus.io/scrape"] == "true"
    assert annotations["prometheus.io/port"] == str(OperatorConfig().metrics.port)
    (port,) = service["spec"]["ports"]
    assert port["targetPort"] == "metrics"
    pod_labels = one("Deployment")["spec"]["template"]["metadata"]["labels"]
    assert service["spec"]["selector"].items() <= pod_labels.items()


def test_dockerfile_matches_the_deployment() -> None:
    text = (DEPLOY / "Dockerfile").read_text()
    lines = [line.strip() for line in text.splitlines()]
    assert "FROM python:3.11-slim AS builder" in lines
    assert "USER 65532:65532" in lines
    assert 'ENTRYPOINT ["modelserving"]' in lines
    assert f'CMD ["run", "--config", "{CONFIG_PATH}"]' in lines


def test_docker_build_context_leaves_local_state_out() -> None:
    ignored = set((ROOT / ".dockerignore").read_text().split())
    assert {".git", ".venv", ".cluster", "build", "**/__pycache__"} <= ignored
