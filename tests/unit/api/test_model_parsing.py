"""ModelServing manifests: Kthena's defaults and shapes load unchanged; our PluginSpec fields."""

from __future__ import annotations

from pathlib import Path

import pytest
import yaml

from modelserving.api import ModelServing, parse_model_serving
from tests.unit.conftest import ManifestFactory, role

EXAMPLES = Path(__file__).resolve().parents[3] / "examples"


def test_defaults_follow_kthena(make_manifest: ManifestFactory) -> None:
    doc = make_manifest()
    del doc["spec"]["template"]["roles"][0]["replicas"]
    ms = parse_model_serving(doc)
    assert ms.spec.replicas == 1
    assert ms.spec.scheduler_name == "volcano"
    assert ms.spec.recovery_policy == "RoleRecreate"
    assert ms.spec.template.restart_grace_period_seconds == 0
    assert ms.spec.template.roles[0].replicas == 1
    assert ms.spec.rollout_strategy is None


def test_plugin_spec_defaults(make_manifest: ManifestFactory) -> None:
    doc = make_manifest(plugins=[{"name": "demo-pod-tweaks"}])
    plugin = parse_model_serving(doc).spec.plugins[0]  # type: ignore[index]
    assert plugin.type == "BuiltIn"
    assert plugin.runtime is None
    assert plugin.effective_runtime == "Native"
    assert plugin.failure_policy == "Fail"
    assert plugin.config is None
    assert plugin.applies_to("server", is_entry=True)
    assert plugin.applies_to("server", is_entry=False)


def test_full_plugin_spec_round_trips(make_manifest: ManifestFactory) -> None:
    spec = {
        "name": "my-wasm",
        "type": "Wasm",
        "config": {"anything": [1, {"nested": True}]},
        "scope": {"roles": ["server"], "target": "Worker"},
        "module": {"configMapRef": {"name": "mods", "key": "p.wasm"}, "sha256": "a" * 64},
        "limits": {"fuel": 1000, "memoryMiB": 16, "timeoutMs": 50},
        "failurePolicy": "Ignore",
    }
    ms = parse_model_serving(make_manifest(plugins=[spec]))
    plugin = ms.spec.plugins[0]  # type: ignore[index]
    assert plugin.effective_runtime == "Wasm"
    assert plugin.limits is not None and plugin.limits.memory_mib == 16
    assert plugin.to_api() == spec


@pytest.mark.parametrize(
    ("target", "role_name", "is_entry", "expected"),
    [
        ("All", "server", True, True),
        ("All", "server", False, True),
        ("Entry", "server", True, True),
        ("Entry", "server", False, False),
        ("Worker", "server", True, False),
        ("Worker", "server", False, True),
        ("All", "other", True, False),
    ],
)
def test_scope(
    make_manifest: ManifestFactory, target: str, role_name: str, is_entry: bool, expected: bool
) -> None:
    doc = make_manifest(
        roles=[role("server"), role("other")],
        plugins=[{"name": "p", "scope": {"roles": ["server"], "target": target}}],
    )
    plugin = parse_model_serving(doc).spec.plugins[0]  # type: ignore[index]
    assert plugin.applies_to(role_name, is_entry) is expected


def test_empty_roles_in_scope_means_every_role(make_manifest: ManifestFactory) -> None:
    doc = make_manifest(plugins=[{"name": "p", "scope": {"roles": [], "target": "Entry"}}])
    plugin = parse_model_serving(doc).spec.plugins[0]  # type: ignore[index]
    assert plugin.applies_to("server", True)
    assert not plugin.applies_to("server", False)


@pytest.mark.parametrize("path", sorted((EXAMPLES / "kthena").glob("*.yaml")), ids=lambda p: p.name)
def test_kthena_shaped_examples_load(path: Path) -> None:
    ms = parse_model_serving(yaml.safe_load(path.read_text()))
    assert isinstance(ms, ModelServing)
    assert ms.spec.template.roles


def test_newer_kthena_fields_are_accepted(make_manifest: ManifestFactory) -> None:
    doc = make_manifest(
        roles=[role("server", replicas=2, maxUnavailable="50%")],
        rolloutStrategy={
            "type": "RoleRollingUpdate",
            "evictionStrategy": {"protectionLevel": "Role", "roleMinAvailable": {"server": 1}},
        },
    )
    doc["spec"]["template"]["networkTopology"] = {
        "groupPolicy": {"mode": "hard", "highestTierAllowed": 2}
    }
    ms = parse_model_serving(doc)
    assert ms.spec.template.network_topology is not None
    assert ms.spec.template.network_topology.group_policy == {
        "mode": "hard",
        "highestTierAllowed": 2,
    }


def test_metadata_keeps_server_fields(make_manifest: ManifestFactory) -> None:
    doc = make_manifest()
    doc["metadata"]["resourceVersion"] = "42"
    doc["metadata"]["managedFields"] = [{"manager": "kubectl"}]
    ms = parse_model_serving(doc)
    assert ms.metadata.model_extra == {
        "resourceVersion": "42",
        "managedFields": [{"manager": "kubectl"}],
    }


def test_status_is_parsed(make_manifest: ManifestFactory) -> None:
    doc = make_manifest()
    doc["status"] = {
        "observedGeneration": 3,
        "replicas": 2,
        "availableReplicas": 1,
        "conditions": [{"type": "Available", "status": "True", "reason": "AllGroupsReady"}],
        "labelSelector": "a=b",
    }
    status = parse_model_serving(doc).status
    assert status is not None
    assert status.available_replicas == 1
    assert status.conditions is not None and status.conditions[0].reason == "AllGroupsReady"
