"""The operator configuration model: defaults, camelCase names, and every rule it enforces."""

from __future__ import annotations

from typing import Any

import pytest
from pydantic import ValidationError

from modelserving.api.operator import OperatorConfig
from modelserving.api.policy import PatchPolicy
from modelserving.api.validation import pydantic_errors


def problems(doc: dict[str, Any]) -> list[str]:
    """Every problem of ``doc`` as ``path: message``."""
    with pytest.raises(ValidationError) as info:
        OperatorConfig.model_validate(doc)
    return [str(e) for e in pydantic_errors(info.value)]


def test_defaults() -> None:
    config = OperatorConfig()
    sb = config.sandbox
    assert (sb.default_fuel, sb.max_fuel) == (100_000_000, 2_000_000_000)
    assert (sb.default_memory_mib, sb.max_memory_mib) == (64, 512)
    assert (sb.default_timeout_ms, sb.max_timeout_ms) == (250, 5_000)
    assert sb.max_module_bytes == 32 * 1024 * 1024
    assert sb.pool_slots == 64
    assert sb.cache_dir is None
    assert config.patch_policy == PatchPolicy()
    assert config.plugin_namespaces == []
    assert config.watch_namespaces == []
    assert (config.concurrency.reconciles, config.concurrency.api_writes) == (4, 4)
    assert (config.metrics.port, config.metrics.bind_address) == (8080, "0.0.0.0")
    assert config.health.port == 8081
    le = config.leader_election
    assert le.enabled is True
    assert le.namespace is None
    assert le.lease_name == "modelserving-controller"
    assert (le.lease_duration_seconds, le.renew_deadline_seconds, le.retry_period_seconds) == (
        15,
        10,
        2,
    )
    assert config.resync_seconds == 300


def test_empty_mapping_is_the_defaults() -> None:
    assert OperatorConfig.model_validate({}) == OperatorConfig()


def test_null_means_default() -> None:
    doc = {"sandbox": {"cacheDir": None, "maxFuel": None}, "leaderElection": None}
    assert OperatorConfig.model_validate(doc) == OperatorConfig()


def test_camel_case_names_round_trip() -> None:
    doc = {
        "sandbox": {
            "defaultFuel": 1,
            "maxFuel": 2,
            "defaultMemoryMiB": 3,
            "maxMemoryMiB": 4,
            "defaultTimeoutMs": 5,
            "maxTimeoutMs": 6,
            "maxModuleBytes": 7,
            "poolSlots": 8,
            "cacheDir": "/var/cache/x",
            "moduleLimits": {
                "maxFunctions": 9,
                "maxFunctionBodyBytes": 10,
                "maxCodeBytes": 11,
                "maxLocalsPerFunction": 12,
                "maxLocalDeclarations": 29,
                "maxTypes": 13,
                "maxImports": 14,
                "maxExports": 15,
                "maxGlobals": 16,
                "maxTables": 1,
                "maxTableElements": 17,
                "maxDataSegments": 18,
                "maxDataBytes": 19,
                "maxElementSegments": 20,
                "maxElementSectionBytes": 21,
            },
            "compileTimeoutMs": 22,
            "compileMemoryMiB": 23,
            "compileWorkers": 24,
            "maxArtifactBytes": 25,
            "cacheMaxBytes": 26,
            "memoryCacheMaxBytes": 27,
            "extismCompiledPlugins": 27,
            "extismWorkers": 28,
        },
        "patchPolicy": {"allowPrivileged": True, "allowedCapabilities": ["IPC_LOCK"]},
        "pluginNamespaces": ["plugins", "shared-modules"],
        "watchNamespaces": ["team-a"],
        "concurrency": {"reconciles": 64, "apiWrites": 256},
        "metrics": {"port": 9090, "bindAddress": "::"},
        "health": {"port": 9091},
        "leaderElection": {
            "enabled": False,
            "namespace": "ops",
            "leaseName": "ms.example.com",
            "leaseDurationSeconds": 30,
            "renewDeadlineSeconds": 20,
            "retryPeriodSeconds": 5,
        },
        "resyncSeconds": 60,
    }
    config = OperatorConfig.model_validate(doc)
    assert config.sandbox.default_memory_mib == 3
    assert config.sandbox.max_memory_mib == 4
    assert config.patch_policy.allow_privileged is True
    assert config.leader_election.lease_name == "ms.example.com"
    out = config.to_api()
    assert out["sandbox"] == doc["sandbox"]
    assert out["leaderElection"] == doc["leaderElection"]
    assert out["metrics"] == doc["metrics"]
    assert OperatorConfig.model_validate(out) == config


def test_memory_aliases_are_mib_not_mib_lower_case() -> None:
    assert problems({"sandbox": {"defaultMemoryMib": 1}}) == [
        "sandbox.defaultMemoryMib: unknown field"
    ]


def test_unknown_fields_are_refused_everywhere() -> None:
    doc = {
        "sandboxx": {},
        "sandbox": {"fuel": 1},
        "patchPolicy": {"allowEverything": True},
        "metrics": {"path": "/metrics"},
        "leaderElection": {"lease": "x"},
    }
    assert sorted(problems(doc)) == [
        "leaderElection.lease: unknown field",
        "metrics.path: unknown field",
        "patchPolicy.allowEverything: unknown field",
        "sandbox.fuel: unknown field",
        "sandboxx: unknown field",
    ]


def test_values_are_not_coerced() -> None:
    doc = {
        "sandbox": {"maxFuel": "2000000000"},
        "concurrency": {"reconciles": 2.0},
        "leaderElection": {"enabled": "true"},
        "resyncSeconds": True,
    }
    assert sorted(problems(doc)) == [
        "concurrency.reconciles: Input should be a valid integer",
        "leaderElection.enabled: Input should be a valid boolean",
        "resyncSeconds: Input should be a valid integer",
        "sandbox.maxFuel: Input should be a valid integer",
    ]


@pytest.mark.parametrize(
    "field",
    [
        "defaultFuel",
        "maxFuel",
        "defaultMemoryMiB",
        "maxMemoryMiB",
        "defaultTimeoutMs",
        "maxTimeoutMs",
        "maxModuleBytes",
        "poolSlots",
    ],
)
@pytest.mark.parametrize("value", [0, -1])
def test_sandbox_numbers_must_be_positive(field: str, value: int) -> None:
    assert problems({"sandbox": {field: value}}) == [
        f"sandbox.{field}: Input should be greater than or equal to 1"
    ]


def test_memory_cannot_exceed_what_wasm32_addresses() -> None:
    assert problems({"sandbox": {"maxMemoryMiB": 4097}}) == [
        "sandbox.maxMemoryMiB: Input should be less than or equal to 4096"
    ]


def test_empty_cache_dir_is_refused() -> None:
    assert problems({"sandbox": {"cacheDir": ""}}) == [
        "sandbox.cacheDir: String should have at least 1 character"
    ]


@pytest.mark.parametrize(
    ("default", "maximum", "dvalue", "mvalue"),
    [
        ("defaultFuel", "maxFuel", 10, 9),
        ("defaultMemoryMiB", "maxMemoryMiB", 1024, 512),
        ("defaultTimeoutMs", "maxTimeoutMs", 6000, 5000),
    ],
)
def test_default_may_not_exceed_maximum(
    default: str, maximum: str, dvalue: int, mvalue: int
) -> None:
    assert problems({"sandbox": {default: dvalue, maximum: mvalue}}) == [
        f"sandbox: {default} ({dvalue}) must not be greater than {maximum} ({mvalue})"
    ]


def test_default_above_the_default_maximum_is_refused() -> None:
    assert problems({"sandbox": {"defaultTimeoutMs": 10_000}}) == [
        "sandbox: defaultTimeoutMs (10000) must not be greater than maxTimeoutMs (5000)"
    ]


def test_every_default_above_its_maximum_is_reported_at_once() -> None:
    doc = {"sandbox": {"defaultFuel": 3, "maxFuel": 2, "defaultMemoryMiB": 9, "maxMemoryMiB": 8}}
    assert problems(doc) == [
        "sandbox: defaultFuel (3) must not be greater than maxFuel (2); "
        "defaultMemoryMiB (9) must not be greater than maxMemoryMiB (8)"
    ]


def test_default_equal_to_maximum_is_allowed() -> None:
    config = OperatorConfig.model_validate({"sandbox": {"defaultFuel": 7, "maxFuel": 7}})
    assert config.sandbox.default_fuel == config.sandbox.max_fuel == 7


@pytest.mark.parametrize("field", ["pluginNamespaces", "watchNamespaces"])
@pytest.mark.parametrize("bad", ["Team-A", "team_a", "-team", "team-", "a.b", "", "x" * 64])
def test_namespaces_must_be_dns1123_labels(field: str, bad: str) -> None:
    assert problems({field: ["ok", bad]}) == [
        f"{field}[1]: {bad!r} is not a namespace name (a DNS-1123 label: lower-case letters, "
        "digits and '-', at most 63 characters)"
    ]


@pytest.mark.parametrize("field", ["pluginNamespaces", "watchNamespaces"])
def test_namespaces_are_listed_once(field: str) -> None:
    assert problems({field: ["a", "b", "a"]}) == [f"{field}: 'a' listed more than once"]


def test_namespaces_accept_labels_of_63_characters() -> None:
    name = "a" * 63
    assert OperatorConfig.model_validate({"pluginNamespaces": [name]}).plugin_namespaces == [name]


def test_namespaces_must_be_a_list_of_strings() -> None:
    assert problems({"pluginNamespaces": "plugins"}) == [
        "pluginNamespaces: Input should be a valid list"
    ]


@pytest.mark.parametrize(
    ("field", "value", "message"),
    [
        ("reconciles", 0, "Input should be greater than or equal to 1"),
        ("reconciles", 65, "Input should be less than or equal to 64"),
        ("apiWrites", 0, "Input should be greater than or equal to 1"),
        ("apiWrites", 257, "Input should be less than or equal to 256"),
    ],
)
def test_concurrency_bounds(field: str, value: int, message: str) -> None:
    assert problems({"concurrency": {field: value}}) == [f"concurrency.{field}: {message}"]


@pytest.mark.parametrize("section", ["metrics", "health"])
@pytest.mark.parametrize(
    ("port", "message"),
    [
        (0, "Input should be greater than or equal to 1"),
        (65536, "Input should be less than or equal to 65535"),
    ],
)
def test_ports_are_tcp_ports(section: str, port: int, message: str) -> None:
    assert problems({section: {"port": port}}) == [f"{section}.port: {message}"]


def test_metrics_and_health_ports_must_differ() -> None:
    assert problems({"metrics": {"port": 9000}, "health": {"port": 9000}}) == [
        "metrics.port and health.port are both 9000; they must differ"
    ]


@pytest.mark.parametrize("address", ["0.0.0.0", "127.0.0.1", "::", "::1", "10.1.2.3"])
def test_bind_address_accepts_ip_addresses(address: str) -> None:
    config = OperatorConfig.model_validate({"metrics": {"bindAddress": address}})
    assert config.metrics.bind_address == address


@pytest.mark.parametrize("address", ["localhost", "", "0.0.0.0:8080", "256.0.0.1"])
def test_bind_address_refuses_anything_else(address: str) -> None:
    assert problems({"metrics": {"bindAddress": address}}) == [
        f"metrics.bindAddress: {address!r} is not an IP address (e.g. 0.0.0.0, 127.0.0.1 or ::)"
    ]


def test_leader_election_namespace_is_a_namespace_name() -> None:
    assert problems({"leaderElection": {"namespace": "Ops"}}) == [
        "leaderElection.namespace: 'Ops' is not a namespace name (a DNS-1123 label: lower-case "
        "letters, digits and '-', at most 63 characters)"
    ]


@pytest.mark.parametrize("name", ["Lease", "lease_1", "", "-lease", "a" * 254])
def test_lease_name_is_a_dns1123_subdomain(name: str) -> None:
    assert problems({"leaderElection": {"leaseName": name}}) == [
        f"leaderElection.leaseName: {name!r} is not a valid Lease name (a DNS-1123 subdomain: "
        "lower-case letters, digits, '-' and '.', at most 253 characters)"
    ]


@pytest.mark.parametrize(
    "field", ["leaseDurationSeconds", "renewDeadlineSeconds", "retryPeriodSeconds"]
)
def test_leader_election_timings_are_positive(field: str) -> None:
    assert problems({"leaderElection": {field: 0}}) == [
        f"leaderElection.{field}: Input should be greater than or equal to 1"
    ]


def test_lease_duration_must_exceed_renew_deadline() -> None:
    doc = {"leaderElection": {"leaseDurationSeconds": 10, "renewDeadlineSeconds": 10}}
    assert problems(doc) == [
        "leaderElection: leaseDurationSeconds (10) must be greater than renewDeadlineSeconds (10)"
    ]


def test_renew_deadline_must_exceed_retry_period() -> None:
    doc = {"leaderElection": {"renewDeadlineSeconds": 3, "retryPeriodSeconds": 5}}
    assert problems(doc) == [
        "leaderElection: renewDeadlineSeconds (3) must be greater than retryPeriodSeconds (5)"
    ]


def test_both_timing_rules_are_reported_at_once() -> None:
    doc = {
        "leaderElection": {
            "leaseDurationSeconds": 2,
            "renewDeadlineSeconds": 2,
            "retryPeriodSeconds": 2,
        }
    }
    assert problems(doc) == [
        "leaderElection: leaseDurationSeconds (2) must be greater than renewDeadlineSeconds (2); "
        "renewDeadlineSeconds (2) must be greater than retryPeriodSeconds (2)"
    ]


@pytest.mark.parametrize(
    ("value", "message"),
    [
        (0, "Input should be greater than or equal to 1"),
        (86_401, "Input should be less than or equal to 86400"),
    ],
)
def test_resync_seconds_bounds(value: int, message: str) -> None:
    assert problems({"resyncSeconds": value}) == [f"resyncSeconds: {message}"]


def test_patch_policy_is_validated_by_its_own_model() -> None:
    assert problems({"patchPolicy": {"allowedPaths": [{"path": "spec/volumes"}]}}) == [
        "patchPolicy.allowedPaths[0].path: a path pattern is a JSON Pointer and starts with '/'"
    ]


def test_every_problem_is_reported_at_once() -> None:
    doc = {
        "sandbox": {"poolSlots": 0},
        "pluginNamespaces": ["BAD"],
        "concurrency": {"apiWrites": 0},
        "leaderElection": {"leaseName": "X"},
    }
    paths = [p.split(":", 1)[0] for p in problems(doc)]
    assert paths == [
        "sandbox.poolSlots",
        "pluginNamespaces[0]",
        "concurrency.apiWrites",
        "leaderElection.leaseName",
    ]
