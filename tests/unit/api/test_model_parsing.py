"""ModelServing manifests: Kthena's defaults and shapes load unchanged; our PluginSpec fields."""

from __future__ import annotations

import re
from pathlib import Path

import pytest
import yaml

from modelserving.api import InvalidManifest, ModelServing, parse_model_serving
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
    assert plugin.to_api() == {**spec, "mode": "Enforce"}  # defaults are filled in


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
    doc["spec"]["template"]["roles"][0]["partition"] = "50%"
    ms = parse_model_serving(doc)
    assert ms.spec.template.roles[0].partition == "50%"
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


def test_role_rolling_knobs_default_as_kthenas_crd(make_manifest: ManifestFactory) -> None:
    """Kthena's CRD defaults a role's maxUnavailable to 1 whatever the rollout type; under
    ServingGroupRollingUpdate it is ignored (not refused), as Kthena's webhook does."""
    ms = parse_model_serving(make_manifest(roles=[role("server", replicas=0)]))
    assert ms.spec.template.roles[0].max_unavailable == 1
    assert ms.spec.template.roles[0].partition is None
    assert ms.spec.template.roles[0].to_api()["maxUnavailable"] == 1
    written = make_manifest(roles=[role("server", replicas=3, maxUnavailable="90%")])
    assert parse_model_serving(written).spec.template.roles[0].max_unavailable == "90%"


def test_network_topology_mode_defaults_to_hard(make_manifest: ManifestFactory) -> None:
    doc = make_manifest()
    doc["spec"]["template"]["networkTopology"] = {
        "groupPolicy": {"highestTierAllowed": 1},
        "rolePolicy": {"mode": "soft"},
    }
    topology = parse_model_serving(doc).spec.template.network_topology
    assert topology is not None
    assert topology.group_policy == {"highestTierAllowed": 1, "mode": "hard"}
    assert topology.role_policy == {"mode": "soft"}


@pytest.mark.parametrize(
    ("policy", "cause"),
    [
        ({"mode": "Hard"}, "mode: must be 'hard' or 'soft'"),
        ({"highestTierAllowed": -1}, "highestTierAllowed: must be a non-negative integer"),
        ({"highestTierName": "x" * 254}, "highestTierName: must be a string of at most 253"),
    ],
)
def test_network_topology_is_typed_as_kthenas(
    make_manifest: ManifestFactory, policy: dict[str, object], cause: str
) -> None:
    doc = make_manifest()
    doc["spec"]["template"]["networkTopology"] = {"groupPolicy": policy}
    with pytest.raises(InvalidManifest, match=re.escape(cause)):
        parse_model_serving(doc)


def test_empty_worker_template_without_workers_is_accepted(make_manifest: ManifestFactory) -> None:
    """Kthena's PD example and booster fixtures: ``workerTemplate.spec.containers: []`` with
    ``workerReplicas: 0``; and a template without ``spec`` at all (Kthena's CRD allows it)."""
    r = role("prefill", workerTemplate={"spec": {"containers": []}})
    ms = parse_model_serving(make_manifest(roles=[r, role("decode", workerTemplate={})]))
    templates = [x.worker_template for x in ms.spec.template.roles]
    assert [t.spec if t else None for t in templates] == [{"containers": []}, {}]


def test_kthena_only_checks_what_its_api_checks(make_manifest: ManifestFactory) -> None:
    """Accepted as Kthena accepts them (the Pod API refuses some later, at Pod creation):
    an init container named like a container, a tab in an image, an init container's image
    with a space, a negative restart grace period."""
    doc = make_manifest()
    spec = doc["spec"]["template"]["roles"][0]["entryTemplate"]["spec"]
    spec["containers"][0]["image"] = "nginx\t1"
    spec["initContainers"] = [{"name": spec["containers"][0]["name"], "image": "a b"}]
    doc["spec"]["template"]["restartGracePeriodSeconds"] = -5
    assert parse_model_serving(doc).spec.template.restart_grace_period_seconds == -5


def test_unknown_fields_are_pruned_on_request(make_manifest: ManifestFactory) -> None:
    doc = make_manifest()
    doc["spec"]["topologySpreadConstraints"] = [{"maxSkew": 1}]
    doc["spec"]["template"]["roles"][0]["entryTemplate"]["spec"]["unknownPodField"] = 1
    with pytest.raises(InvalidManifest, match=r"spec\.topologySpreadConstraints: unknown field"):
        parse_model_serving(doc)
    ms = parse_model_serving(doc, prune=True)
    assert "topologySpreadConstraints" not in ms.spec.to_api()
    # The Pod template stays open, as in our CRD (Kthena's would prune this one too).
    assert ms.spec.template.roles[0].entry_template.spec["unknownPodField"] == 1
