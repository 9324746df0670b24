"""Our generated CRD on a real API server: Kthena-shaped manifests are accepted with their
defaults, bad ones are refused by the schema, and rendered Pods and Services are valid objects."""

from __future__ import annotations

import copy
from pathlib import Path
from typing import Any

import pytest
import yaml
from kubernetes import client
from kubernetes.client.exceptions import ApiException

from modelserving.api import labels, parse_model_serving
from modelserving.chain import build_chain
from modelserving.chain.render import render
from tests.integration.conftest import Cluster, wait_for

ROOT = Path(__file__).resolve().parents[2]
CRD = ROOT / "crds" / "workload.serving.volcano.sh_modelservings.yaml"
EXAMPLES = [
    *sorted((ROOT / "examples" / "kthena").glob("*.yaml")),
    ROOT / "examples" / "prefill-decode.yaml",
]


@pytest.fixture(scope="module")
def crd(cluster: Cluster) -> None:
    api = client.ApiextensionsV1Api(cluster.api_client)
    body = yaml.safe_load(CRD.read_text())
    try:
        api.create_custom_resource_definition(body)
    except ApiException as error:
        if error.status != 409:
            raise

    def established() -> bool:
        got = api.read_custom_resource_definition(body["metadata"]["name"])
        conditions = (got.status.conditions if got.status else None) or []
        return any(c.type == "Established" and c.status == "True" for c in conditions)

    wait_for("the ModelServing CRD to be established", established, timeout=30)
    # The examples' plugins set runtimeClassName: nvidia, which admission checks exists.
    try:
        client.NodeV1Api(cluster.api_client).create_runtime_class(
            client.V1RuntimeClass(metadata=client.V1ObjectMeta(name="nvidia"), handler="nvidia")
        )
    except ApiException as error:
        if error.status != 409:
            raise


def objects_api(cluster: Cluster) -> Any:
    return client.CustomObjectsApi(cluster.api_client)


def create(cluster: Cluster, namespace: str, doc: dict[str, Any]) -> dict[str, Any]:
    body = copy.deepcopy(doc)
    body["metadata"]["namespace"] = namespace
    created: dict[str, Any] = objects_api(cluster).create_namespaced_custom_object(
        labels.GROUP, labels.VERSION, namespace, labels.PLURAL, body
    )
    return created


def refused(cluster: Cluster, namespace: str, doc: dict[str, Any]) -> str:
    with pytest.raises(ApiException) as info:
        create(cluster, namespace, doc)
    assert info.value.status == 422, info.value.body
    return str(info.value.body)


def update_refused(cluster: Cluster, namespace: str, stored: dict[str, Any]) -> str:
    """Replace ``stored`` and expect the server to refuse it; return the response body."""
    with pytest.raises(ApiException) as info:
        objects_api(cluster).replace_namespaced_custom_object(
            labels.GROUP,
            labels.VERSION,
            namespace,
            labels.PLURAL,
            stored["metadata"]["name"],
            stored,
        )
    assert info.value.status == 422, info.value.body
    return str(info.value.body)


def example(path: Path) -> dict[str, Any]:
    doc: dict[str, Any] = yaml.safe_load(path.read_text())
    return doc


@pytest.mark.usefixtures("crd")
@pytest.mark.parametrize("path", EXAMPLES, ids=lambda p: p.name)
def test_examples_are_accepted_and_render_valid_objects(
    cluster: Cluster, namespace: str, path: Path
) -> None:
    stored = create(cluster, namespace, example(path))
    assert stored["metadata"]["uid"]
    ms = parse_model_serving(stored)  # what the API server stored is what we parse
    core = cluster.core
    rendered = render(ms, build_chain(ms), gang=False).objects
    assert rendered
    for obj in rendered:
        if obj["kind"] == "Pod":
            core.create_namespaced_pod(namespace, obj, dry_run="All")
        elif obj["kind"] == "Service":
            core.create_namespaced_service(namespace, obj, dry_run="All")
        assert obj["metadata"]["ownerReferences"][0]["uid"] == stored["metadata"]["uid"]


@pytest.mark.usefixtures("crd")
def test_server_applies_the_schema_defaults(cluster: Cluster, namespace: str) -> None:
    doc = example(ROOT / "examples" / "kthena" / "single-role.yaml")
    del doc["spec"]["replicas"]
    doc["spec"]["plugins"] = [{"name": "demo-pod-tweaks", "scope": {"roles": ["prefill"]}}]
    stored = create(cluster, namespace, doc)
    spec = stored["spec"]
    assert spec["replicas"] == 1
    assert spec["schedulerName"] == "volcano"
    assert spec["recoveryPolicy"] == "RoleRecreate"
    assert spec["plugins"][0]["type"] == "BuiltIn"
    assert spec["plugins"][0]["failurePolicy"] == "Fail"
    assert spec["plugins"][0]["scope"]["target"] == "All"
    assert "runtime" not in spec["plugins"][0]
    assert spec["template"]["restartGracePeriodSeconds"] == 0


@pytest.mark.usefixtures("crd")
def test_lower_case_target_is_refused_by_the_server(cluster: Cluster, namespace: str) -> None:
    doc = example(ROOT / "examples" / "kthena" / "single-role.yaml")
    doc["spec"]["plugins"] = [{"name": "demo-pod-tweaks", "scope": {"target": "worker"}}]
    body = refused(cluster, namespace, doc)
    assert "spec.plugins[0].scope.target" in body
    assert "supported values" in body


@pytest.mark.usefixtures("crd")
def test_duplicate_role_names_are_refused_by_the_server(cluster: Cluster, namespace: str) -> None:
    doc = example(ROOT / "examples" / "kthena" / "single-role.yaml")
    doc["spec"]["template"]["roles"].append(copy.deepcopy(doc["spec"]["template"]["roles"][0]))
    assert "roles name must be unique" in refused(cluster, namespace, doc)


@pytest.mark.usefixtures("crd")
def test_bad_role_name_and_plugin_type_are_refused_by_the_server(
    cluster: Cluster, namespace: str
) -> None:
    doc = example(ROOT / "examples" / "kthena" / "single-role.yaml")
    doc["spec"]["template"]["roles"][0]["name"] = "Prefill"
    doc["spec"]["plugins"] = [{"name": "x", "type": "Webhook"}]
    body = refused(cluster, namespace, doc)
    assert "spec.template.roles[0].name" in body
    assert "spec.plugins[0].type" in body


@pytest.mark.usefixtures("crd")
def test_gang_policy_is_immutable(cluster: Cluster, namespace: str) -> None:
    doc = example(ROOT / "examples" / "kthena" / "multinode-ray.yaml")
    stored = create(cluster, namespace, doc)
    stored["spec"]["template"]["gangPolicy"]["minRoleReplicas"]["leader"] = 0
    assert "minRoleReplicas is immutable" in update_refused(cluster, namespace, stored)


@pytest.mark.usefixtures("crd")
def test_scale_subresource(cluster: Cluster, namespace: str) -> None:
    stored = create(
        cluster, namespace, example(ROOT / "examples" / "kthena" / "rolling-partition.yaml")
    )
    name = stored["metadata"]["name"]
    api = objects_api(cluster)
    api.patch_namespaced_custom_object_scale(
        labels.GROUP, labels.VERSION, namespace, labels.PLURAL, name, {"spec": {"replicas": 5}}
    )
    got = api.get_namespaced_custom_object(
        labels.GROUP, labels.VERSION, namespace, labels.PLURAL, name
    )
    assert got["spec"]["replicas"] == 5


@pytest.mark.usefixtures("crd")
def test_missing_worker_template_is_refused_by_the_server(cluster: Cluster, namespace: str) -> None:
    doc = example(ROOT / "examples" / "kthena" / "single-role.yaml")
    doc["spec"]["template"]["roles"][0]["workerReplicas"] = 2
    assert "workerTemplate is required when workerReplicas is greater than 0" in refused(
        cluster, namespace, doc
    )


@pytest.mark.usefixtures("crd")
def test_wasm_plugin_rules_are_enforced_by_the_server(cluster: Cluster, namespace: str) -> None:
    module = {"configMapRef": {"name": "m", "key": "k"}, "sha256": "a" * 64}
    cases = [
        ({"name": "p", "type": "Wasm"}, "module is required when type is Wasm"),
        ({"name": "p", "module": module}, "module is only allowed when type is Wasm"),
        (
            {"name": "p", "type": "Wasm", "runtime": "Native", "module": module},
            "runtime Native is only for BuiltIn plugins",
        ),
        ({"name": "p", "scope": {"roles": ["decode"]}}, "scope.roles must name roles"),
    ]
    for plugin, message in cases:
        doc = example(ROOT / "examples" / "kthena" / "single-role.yaml")
        doc["spec"]["plugins"] = [plugin]
        assert message in refused(cluster, namespace, doc), plugin
    doc = example(ROOT / "examples" / "kthena" / "single-role.yaml")
    doc["spec"]["plugins"] = [{"name": "p", "type": "Wasm", "module": module}]
    assert create(cluster, namespace, doc)["spec"]["plugins"][0]["failurePolicy"] == "Fail"


@pytest.mark.usefixtures("crd")
def test_gang_policy_cannot_be_removed(cluster: Cluster, namespace: str) -> None:
    stored = create(
        cluster, namespace, example(ROOT / "examples" / "kthena" / "multinode-ray.yaml")
    )
    del stored["spec"]["template"]["gangPolicy"]
    assert "gangPolicy is required once set" in update_refused(cluster, namespace, stored)
