"""The generated CRD: structural schema with enums, defaults and markers; crds/ is current."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import yaml

from modelserving.api.crd import model_serving_crd
from modelserving.cli.crd_cmd import CRD_FILE, HEADER
from modelserving.cli.manifests import dump_yaml

ROOT = Path(__file__).resolve().parents[3]


def spec_schema() -> dict[str, Any]:
    version = model_serving_crd()["spec"]["versions"][0]
    schema: dict[str, Any] = version["schema"]["openAPIV3Schema"]["properties"]["spec"]
    return schema


def plugin_schema() -> dict[str, Any]:
    items: dict[str, Any] = spec_schema()["properties"]["plugins"]["items"]
    return items


def walk(node: Any) -> list[dict[str, Any]]:
    found = []
    if isinstance(node, dict):
        found.append(node)
        for value in node.values():
            found.extend(walk(value))
    elif isinstance(node, list):
        for value in node:
            found.extend(walk(value))
    return found


def test_identity_and_subresources() -> None:
    crd = model_serving_crd()
    assert crd["metadata"]["name"] == "modelservings.workload.serving.volcano.sh"
    version = crd["spec"]["versions"][0]
    assert version["name"] == "v1alpha1"
    assert version["subresources"]["status"] == {}
    assert version["subresources"]["scale"] == {
        "specReplicasPath": ".spec.replicas",
        "statusReplicasPath": ".status.replicas",
        "labelSelectorPath": ".status.labelSelector",
    }
    columns = {c["name"] for c in version["additionalPrinterColumns"]}
    assert {"Replicas", "Available", "Updated", "Plugins", "Age"} <= columns


def test_target_is_an_enum_with_default() -> None:
    target = plugin_schema()["properties"]["scope"]["properties"]["target"]
    assert target["enum"] == ["All", "Entry", "Worker"]
    assert target["default"] == "All"


def test_plugin_fields_enums_and_defaults() -> None:
    props = plugin_schema()["properties"]
    assert props["type"] == {"default": "BuiltIn", "enum": ["BuiltIn", "Wasm"], "type": "string"}
    assert props["runtime"]["enum"] == ["Native", "Wasm"]
    assert props["failurePolicy"]["default"] == "Fail"
    assert props["config"] == {"x-kubernetes-preserve-unknown-fields": True}
    assert set(props["limits"]["properties"]) == {"fuel", "memoryMiB", "timeoutMs"}
    assert props["module"]["required"] == ["configMapRef", "sha256"]
    assert plugin_schema()["required"] == ["name"]


def test_spec_defaults_match_kthena() -> None:
    props = spec_schema()["properties"]
    assert props["replicas"]["default"] == 1
    assert props["schedulerName"]["default"] == "volcano"
    assert props["recoveryPolicy"]["default"] == "RoleRecreate"
    assert props["recoveryPolicy"]["enum"] == ["ServingGroupRecreate", "RoleRecreate", "None"]
    roles = props["template"]["properties"]["roles"]
    assert roles["minItems"] == 1 and roles["maxItems"] == 4
    assert roles["x-kubernetes-validations"][0]["message"] == "roles name must be unique"
    role_props = roles["items"]["properties"]
    assert role_props["name"]["maxLength"] == 12
    assert role_props["entryTemplate"]["properties"]["spec"]["x-kubernetes-preserve-unknown-fields"]
    assert set(roles["items"]["required"]) == {"name", "entryTemplate", "workerReplicas"}


def test_int_or_string_fields() -> None:
    rolling = spec_schema()["properties"]["rolloutStrategy"]["properties"][
        "rollingUpdateConfiguration"
    ]
    assert rolling["properties"]["maxUnavailable"] == {
        "x-kubernetes-int-or-string": True,
        "default": 1,
    }
    assert rolling["properties"]["partition"] == {"x-kubernetes-int-or-string": True}


def test_kthena_role_and_topology_defaults() -> None:
    """Kthena's CRD: a role's maxUnavailable defaults to 1 and its partition is int-or-string;
    a network topology policy's mode defaults to hard (hard or soft)."""
    template = spec_schema()["properties"]["template"]["properties"]
    role = template["roles"]["items"]["properties"]
    assert role["maxUnavailable"] == {"x-kubernetes-int-or-string": True, "default": 1}
    assert role["partition"] == {"x-kubernetes-int-or-string": True}
    for policy in ("groupPolicy", "rolePolicy"):
        props = template["networkTopology"]["properties"][policy]["properties"]
        assert props["mode"] == {"type": "string", "enum": ["hard", "soft"], "default": "hard"}
        assert props["highestTierAllowed"]["minimum"] == 0
        assert props["highestTierName"]["maxLength"] == 253


def test_schema_is_structural() -> None:
    """No JSON Schema constructs the API server refuses in a structural schema."""
    for node in walk(model_serving_crd()["spec"]["versions"][0]["schema"]):
        for key in ("$ref", "anyOf", "oneOf", "allOf", "const", "title", "$defs"):
            assert key not in node
        if "properties" in node and isinstance(node["properties"], dict):
            assert node.get("type") == "object"
            assert node.get("additionalProperties") in (None,)


def test_crds_directory_is_current() -> None:
    text = (ROOT / "crds" / CRD_FILE).read_text()
    assert text == HEADER + dump_yaml(model_serving_crd()), "crds/ is stale: run `make crds`"
    assert yaml.safe_load(text)["kind"] == "CustomResourceDefinition"


def test_numeric_bounds_fit_in_a_float64() -> None:
    """The API server reads bounds as float64; larger ones wrap and the CRD is refused."""
    for node in walk(model_serving_crd()["spec"]["versions"][0]["schema"]):
        for key in ("maximum", "minimum"):
            if isinstance(node.get(key), int):
                assert abs(node[key]) <= 2**53, node
