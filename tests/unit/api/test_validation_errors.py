"""Every malformed ModelServing is refused with a message naming the object, field and cause."""

from __future__ import annotations

from typing import Any

import pytest

from modelserving.api import InvalidManifest, parse_model_serving
from tests.unit.conftest import ManifestFactory, role


def refuse(doc: dict[str, Any]) -> str:
    with pytest.raises(InvalidManifest) as info:
        parse_model_serving(doc)
    message = str(info.value)
    assert message.startswith(f"ModelServing team-a/{doc['metadata']['name']} is invalid:")
    return message


def test_lower_case_target_is_refused(make_manifest: ManifestFactory) -> None:
    doc = make_manifest(plugins=[{"name": "p", "scope": {"target": "worker"}}])
    msg = refuse(doc)
    assert "spec.plugins[0].scope.target" in msg
    assert "'worker'" in msg
    assert "'All', 'Entry' or 'Worker'" in msg


def test_unsupported_plugin_type_is_refused(make_manifest: ManifestFactory) -> None:
    msg = refuse(make_manifest(plugins=[{"name": "p", "type": "Webhook"}]))
    assert "spec.plugins[0].type" in msg
    assert "'Webhook'" in msg


def test_unknown_field_is_refused(make_manifest: ManifestFactory) -> None:
    doc = make_manifest(plugins=[{"name": "p", "disabled": True}])
    msg = refuse(doc)
    assert "spec.plugins[0].disabled: unknown field" in msg


def test_unknown_spec_field_is_refused(make_manifest: ManifestFactory) -> None:
    doc = make_manifest()
    doc["spec"]["replica"] = 3
    assert "spec.replica: unknown field" in refuse(doc)


def test_missing_worker_template_is_refused(make_manifest: ManifestFactory) -> None:
    r = role("server", workers=2)
    del r["workerTemplate"]
    msg = refuse(make_manifest(roles=[r]))
    assert "spec.template.roles[0].workerTemplate" in msg
    assert "workerReplicas is greater than 0" in msg


@pytest.mark.parametrize(
    "name", ["Prefill", "1prefill", "pre_fill", "prefill-", "averyveryverylongname"]
)
def test_bad_role_name_is_refused(make_manifest: ManifestFactory, name: str) -> None:
    msg = refuse(make_manifest(roles=[role(name)]))
    assert "spec.template.roles[0].name" in msg


def test_role_name_message_explains_the_rule(make_manifest: ManifestFactory) -> None:
    msg = refuse(make_manifest(roles=[role("Prefill")]))
    assert "role name 'Prefill' must be a DNS-1035 label" in msg


def test_generated_name_too_long_is_refused(make_manifest: ManifestFactory) -> None:
    msg = refuse(make_manifest(name="n" * 55, roles=[role("prefill")]))
    assert "metadata.name" in msg
    assert "generated name" in msg


def test_roles_must_be_unique(make_manifest: ManifestFactory) -> None:
    msg = refuse(make_manifest(roles=[role("a"), role("a")]))
    assert "spec.template.roles" in msg
    assert "repeated: a" in msg


@pytest.mark.parametrize("count", [0, 5])
def test_one_to_four_roles(make_manifest: ManifestFactory, count: int) -> None:
    msg = refuse(make_manifest(roles=[role(f"r{i}") for i in range(count)]))
    assert "spec.template.roles" in msg


def test_negative_replicas_refused(make_manifest: ManifestFactory) -> None:
    msg = refuse(make_manifest(replicas=-1))
    assert "spec.replicas" in msg


def test_negative_worker_replicas_refused(make_manifest: ManifestFactory) -> None:
    msg = refuse(make_manifest(roles=[role("a", workers=-1)]))
    assert "spec.template.roles[0].workerReplicas" in msg


def test_gang_policy_keys_must_be_roles(make_manifest: ManifestFactory) -> None:
    doc = make_manifest()
    doc["spec"]["template"]["gangPolicy"] = {"minRoleReplicas": {"ghost": 1}}
    msg = refuse(doc)
    assert "spec.template.gangPolicy.minRoleReplicas[ghost]" in msg
    assert "role 'ghost' does not exist" in msg


def test_gang_policy_cannot_exceed_role_replicas(make_manifest: ManifestFactory) -> None:
    doc = make_manifest(roles=[role("server", replicas=2)])
    doc["spec"]["template"]["gangPolicy"] = {"minRoleReplicas": {"server": 3}}
    assert "cannot exceed its replicas (2)" in refuse(doc)


def test_group_recreate_with_role_rolling_update_refused(make_manifest: ManifestFactory) -> None:
    doc = make_manifest(
        recoveryPolicy="ServingGroupRecreate", rolloutStrategy={"type": "RoleRollingUpdate"}
    )
    msg = refuse(doc)
    assert "spec.rolloutStrategy.type" in msg
    assert "ServingGroupRecreate" in msg


def test_unknown_recovery_policy_refused(make_manifest: ManifestFactory) -> None:
    assert "spec.recoveryPolicy" in refuse(make_manifest(recoveryPolicy="Always"))


@pytest.mark.parametrize(("value", "replicas"), [(0, 3), ("0%", 3), ("20%", 3)])
def test_max_unavailable_must_not_resolve_to_zero(
    make_manifest: ManifestFactory, value: int | str, replicas: int
) -> None:
    doc = make_manifest(
        replicas=replicas,
        rolloutStrategy={"rollingUpdateConfiguration": {"maxUnavailable": value}},
    )
    msg = refuse(doc)
    assert "spec.rolloutStrategy.rollingUpdateConfiguration.maxUnavailable" in msg


@pytest.mark.parametrize("value", ["abc", "150%", -1])
def test_partition_must_be_int_or_percent(make_manifest: ManifestFactory, value: int | str) -> None:
    doc = make_manifest(rolloutStrategy={"rollingUpdateConfiguration": {"partition": value}})
    assert "rollingUpdateConfiguration.partition" in refuse(doc)


def test_rolling_update_configuration_only_for_group_strategy(
    make_manifest: ManifestFactory,
) -> None:
    doc = make_manifest(
        rolloutStrategy={"type": "RoleRollingUpdate", "rollingUpdateConfiguration": {}}
    )
    assert "only valid when rolloutStrategy.type is ServingGroupRollingUpdate" in refuse(doc)


def test_role_partition_needs_role_rolling_update(make_manifest: ManifestFactory) -> None:
    doc = make_manifest(roles=[role("server", partition=1)])
    assert (
        "spec.template.roles[0].partition: only valid when rolloutStrategy.type is "
        "RoleRollingUpdate" in refuse(doc)
    )


@pytest.mark.parametrize("value", [-1, "x", "101%", "1.5%"])
def test_role_partition_must_be_int_or_percent(
    make_manifest: ManifestFactory, value: int | str
) -> None:
    doc = make_manifest(
        roles=[role("server", replicas=2, partition=value)],
        rolloutStrategy={"type": "RoleRollingUpdate"},
    )
    assert "spec.template.roles[0].partition: must be a non-negative integer" in refuse(doc)


@pytest.mark.parametrize("value", [0, "0%", "49%"])
def test_role_max_unavailable_must_not_resolve_to_zero(
    make_manifest: ManifestFactory, value: int | str
) -> None:
    doc = make_manifest(
        roles=[role("server", replicas=2, maxUnavailable=value)],
        rolloutStrategy={"type": "RoleRollingUpdate"},
    )
    assert "spec.template.roles[0].maxUnavailable: must not resolve to 0" in refuse(doc)


def test_role_max_unavailable_cannot_exceed_replicas(make_manifest: ManifestFactory) -> None:
    doc = make_manifest(
        roles=[role("server", replicas=1, maxUnavailable=2)],
        rolloutStrategy={"type": "RoleRollingUpdate"},
    )
    assert "cannot be greater than the role's replicas (1)" in refuse(doc)


def test_wasm_plugin_needs_module(make_manifest: ManifestFactory) -> None:
    msg = refuse(make_manifest(plugins=[{"name": "p", "type": "Wasm"}]))
    assert "spec.plugins[0]: module is required when type is Wasm" in msg


def test_builtin_plugin_refuses_module(make_manifest: ManifestFactory) -> None:
    module = {"configMapRef": {"name": "m", "key": "k"}, "sha256": "b" * 64}
    assert "module is only allowed when type is Wasm" in refuse(
        make_manifest(plugins=[{"name": "p", "module": module}])
    )


def test_wasm_plugin_refuses_native_runtime(make_manifest: ManifestFactory) -> None:
    module = {"configMapRef": {"name": "m", "key": "k"}, "sha256": "b" * 64}
    msg = refuse(
        make_manifest(
            plugins=[{"name": "p", "type": "Wasm", "runtime": "Native", "module": module}]
        )
    )
    assert "runtime Native is only for BuiltIn plugins" in msg


def test_bad_sha256_refused(make_manifest: ManifestFactory) -> None:
    module = {"configMapRef": {"name": "m", "key": "k"}, "sha256": "XYZ"}
    msg = refuse(make_manifest(plugins=[{"name": "p", "type": "Wasm", "module": module}]))
    assert "spec.plugins[0].module.sha256" in msg
    assert "64 lower-case hex digits" in msg


def test_scope_roles_must_exist(make_manifest: ManifestFactory) -> None:
    msg = refuse(make_manifest(plugins=[{"name": "p", "scope": {"roles": ["decode"]}}]))
    assert "spec.plugins[0].scope.roles" in msg
    assert "unknown role(s) 'decode'" in msg
    assert "known roles: server" in msg


def test_plugin_name_pattern(make_manifest: ManifestFactory) -> None:
    assert "spec.plugins[0].name" in refuse(make_manifest(plugins=[{"name": "Bad Name"}]))


def test_limits_must_be_positive(make_manifest: ManifestFactory) -> None:
    doc = make_manifest(plugins=[{"name": "p", "limits": {"fuel": 0}}])
    assert "spec.plugins[0].limits.fuel" in refuse(doc)


def test_container_names_required(make_manifest: ManifestFactory) -> None:
    doc = make_manifest()
    doc["spec"]["template"]["roles"][0]["entryTemplate"]["spec"]["containers"] = [{"image": "x"}]
    msg = refuse(doc)
    assert "spec.template.roles[0].entryTemplate.spec" in msg
    assert "every container needs a name" in msg


def test_template_spec_lists_its_containers(make_manifest: ManifestFactory) -> None:
    doc = make_manifest()
    doc["spec"]["template"]["roles"][0]["entryTemplate"]["spec"] = {}
    assert "spec.containers: required field is missing" in refuse(doc)


@pytest.mark.parametrize("image", ["a b", "   "])
def test_image_with_spaces_refused(make_manifest: ManifestFactory, image: str) -> None:
    doc = make_manifest()
    doc["spec"]["template"]["roles"][0]["entryTemplate"]["spec"]["containers"][0]["image"] = image
    assert "must not be blank or contain spaces" in refuse(doc)


def test_wrong_api_group_refused(make_manifest: ManifestFactory) -> None:
    doc = make_manifest()
    doc["apiVersion"] = "workload.kthena.io/v1alpha1"
    assert "apiVersion" in refuse(doc)


def test_every_problem_is_reported_at_once(make_manifest: ManifestFactory) -> None:
    r = role("server", workers=1)
    del r["workerTemplate"]
    doc = make_manifest(roles=[r], plugins=[{"name": "p", "scope": {"roles": ["nope"]}}])
    with pytest.raises(InvalidManifest) as info:
        parse_model_serving(doc)
    paths = {e.path for e in info.value.errors}
    assert {"spec.template.roles[0].workerTemplate", "spec.plugins[0].scope.roles"} <= paths


def test_missing_name_is_reported(make_manifest: ManifestFactory) -> None:
    doc = make_manifest()
    del doc["metadata"]["name"]
    with pytest.raises(InvalidManifest) as info:
        parse_model_serving(doc)
    assert "ModelServing team-a/<unnamed>" in str(info.value)
    assert "metadata.name: required field is missing" in str(info.value)


def test_trailing_newline_does_not_pass_name_patterns(make_manifest: ManifestFactory) -> None:
    msg = refuse(make_manifest(roles=[role("ab\n")], plugins=[{"name": "demo-pod-tweaks\n"}]))
    assert "spec.template.roles[0].name" in msg
    assert "spec.plugins[0].name" in msg


def test_container_names_unique_in_their_list(make_manifest: ManifestFactory) -> None:
    doc = make_manifest()
    spec = doc["spec"]["template"]["roles"][0]["entryTemplate"]["spec"]
    spec["initContainers"] = [{"name": "init", "image": "a"}, {"name": "init", "image": "b"}]
    assert "initContainers[1].name: duplicate container name 'init'" in refuse(doc)


@pytest.mark.parametrize(
    ("env", "cause"),
    [
        (5, "env: must be a list"),
        ([5], "env[0]: an env var is a map with a name"),
        ([{"value": "x"}], "env[0]: an env var is a map with a name"),
    ],
)
def test_env_shape_is_checked(make_manifest: ManifestFactory, env: Any, cause: str) -> None:
    doc = make_manifest()
    doc["spec"]["template"]["roles"][0]["entryTemplate"]["spec"]["containers"][0]["env"] = env
    assert cause in refuse(doc)


def test_container_must_be_a_map(make_manifest: ManifestFactory) -> None:
    doc = make_manifest()
    doc["spec"]["template"]["roles"][0]["entryTemplate"]["spec"]["containers"] = ["nginx"]
    assert "containers[0]: a container is a map" in refuse(doc)


@pytest.mark.parametrize("value", ["2", True, 2.0])
def test_types_are_not_coerced(make_manifest: ManifestFactory, value: Any) -> None:
    assert "spec.replicas" in refuse(make_manifest(replicas=value))


def test_explicit_null_means_default(make_manifest: ManifestFactory) -> None:
    doc = make_manifest(
        replicas=None,
        plugins=[{"name": "p", "type": None, "scope": {"target": None}, "config": None}],
    )
    ms = parse_model_serving(doc)
    assert ms.spec.replicas == 1
    plugin = ms.spec.plugins[0]  # type: ignore[index]
    assert plugin.type == "BuiltIn"
    assert plugin.scope is not None
    assert plugin.scope.target == "All"


def test_an_integer_beyond_64_bits_in_a_template_is_refused_with_its_field(
    make_manifest: ManifestFactory,
) -> None:
    doc = make_manifest()
    doc["spec"]["template"]["roles"][0]["entryTemplate"]["spec"]["activeDeadlineSeconds"] = 2**70
    msg = refuse(doc)
    assert msg.endswith(
        "  - spec.template.roles[0].entryTemplate.spec.activeDeadlineSeconds: integer "
        "1180591620717411303424 is outside the 64-bit range "
        "(-9223372036854775808 to 18446744073709551615)"
    )


def test_a_plugin_config_integer_is_left_to_the_chain(make_manifest: ManifestFactory) -> None:
    """The chain refuses it naming the plugin, with the plugin's other config problems."""
    doc = make_manifest(plugins=[{"name": "p", "config": {"a": [2**64 - 1, -(2**63), 2**70]}}])
    assert parse_model_serving(doc).spec.plugins is not None
