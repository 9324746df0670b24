"""Loading the operator configuration file: defaults, a full file, and every kind of bad file."""

from __future__ import annotations

from pathlib import Path

import pytest

from modelserving.api.errors import FieldError, ModelServingError
from modelserving.api.operator import OperatorConfig
from modelserving.controller import config as config_module
from modelserving.controller.config import ConfigError, load_config, pod_namespace, sandbox_settings
from modelserving.controller.yamltext import MAX_DEPTH
from modelserving.sandbox import SandboxSettings
from modelserving.sandbox.settings import ModuleBounds

FULL = """\
sandbox:
  defaultFuel: 5000000
  maxFuel: 900000000
  defaultMemoryMiB: 32
  maxMemoryMiB: 256
  defaultTimeoutMs: 100
  maxTimeoutMs: 2000
  maxModuleBytes: 8388608
  poolSlots: 16
  cacheDir: /var/cache/ms
patchPolicy:
  allowedPaths:
    - path: /metadata/labels/*
      ops: [add, replace]
  protectedPrefixes: [example.com/]
  allowPrivileged: false
  allowedCapabilities: [IPC_LOCK]
pluginNamespaces: [plugins]
watchNamespaces: [team-a, team-b]
concurrency: {reconciles: 8, apiWrites: 32}
metrics: {port: 9090, bindAddress: 127.0.0.1}
health: {port: 9091}
leaderElection:
  enabled: false
  namespace: ops
  leaseName: ms-lease
  leaseDurationSeconds: 20
  renewDeadlineSeconds: 12
  retryPeriodSeconds: 3
resyncSeconds: 120
"""


@pytest.fixture(autouse=True)
def no_pod_namespace(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    """No ``POD_NAMESPACE`` and no service account file, unless a test sets them."""
    monkeypatch.delenv("POD_NAMESPACE", raising=False)
    monkeypatch.setattr(config_module, "SERVICE_ACCOUNT_NAMESPACE", tmp_path / "no-such-file")


def write(tmp_path: Path, text: str) -> Path:
    path = tmp_path / "config.yaml"
    path.write_text(text, encoding="utf-8")
    return path


def refuse(path: Path) -> ConfigError:
    with pytest.raises(ConfigError) as info:
        load_config(path)
    assert info.value.path == path
    return info.value


def defaults_in(namespace: str) -> OperatorConfig:
    config = OperatorConfig()
    config.leader_election.namespace = namespace
    return config


def test_no_file_means_the_defaults() -> None:
    assert load_config(None) == defaults_in("default")


@pytest.mark.parametrize("text", ["", "\n", "# only a comment\n", "---\n", "null\n"])
def test_empty_file_means_the_defaults(tmp_path: Path, text: str) -> None:
    assert load_config(write(tmp_path, text)) == defaults_in("default")


def test_full_file(tmp_path: Path) -> None:
    config = load_config(write(tmp_path, FULL))
    assert config.sandbox.default_fuel == 5_000_000
    assert config.sandbox.max_memory_mib == 256
    assert config.sandbox.cache_dir == "/var/cache/ms"
    assert [r.path for r in config.patch_policy.allowed_paths] == ["/metadata/labels/*"]
    assert config.patch_policy.allowed_paths[0].ops == ["add", "replace"]
    assert config.patch_policy.allowed_capabilities == ["IPC_LOCK"]
    assert config.plugin_namespaces == ["plugins"]
    assert config.watch_namespaces == ["team-a", "team-b"]
    assert (config.concurrency.reconciles, config.concurrency.api_writes) == (8, 32)
    assert (config.metrics.port, config.metrics.bind_address) == (9090, "127.0.0.1")
    assert config.health.port == 9091
    le = config.leader_election
    assert (le.enabled, le.namespace, le.lease_name) == (False, "ops", "ms-lease")
    assert (le.lease_duration_seconds, le.renew_deadline_seconds, le.retry_period_seconds) == (
        20,
        12,
        3,
    )
    assert config.resync_seconds == 120


def test_partial_file_keeps_the_other_defaults(tmp_path: Path) -> None:
    config = load_config(write(tmp_path, "sandbox:\n  maxFuel: 3000000000\n"))
    expected = defaults_in("default")
    expected.sandbox.max_fuel = 3_000_000_000
    assert config == expected


def test_lease_namespace_from_pod_namespace(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("POD_NAMESPACE", "modelserving-system")
    assert load_config(None).leader_election.namespace == "modelserving-system"
    assert load_config(write(tmp_path, "")).leader_election.namespace == "modelserving-system"


def test_configured_lease_namespace_wins(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("POD_NAMESPACE", "modelserving-system")
    path = write(tmp_path, "leaderElection: {namespace: ops}\n")
    assert load_config(path).leader_election.namespace == "ops"


def test_pod_namespace_order(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    assert pod_namespace() == "default"
    sa_file = tmp_path / "namespace"
    sa_file.write_text("from-service-account\n")
    monkeypatch.setattr(config_module, "SERVICE_ACCOUNT_NAMESPACE", sa_file)
    assert pod_namespace() == "from-service-account"
    monkeypatch.setenv("POD_NAMESPACE", "from-env")
    assert pod_namespace() == "from-env"
    monkeypatch.setenv("POD_NAMESPACE", "  ")
    assert pod_namespace() == "from-service-account"


def test_missing_file(tmp_path: Path) -> None:
    path = tmp_path / "absent.yaml"
    error = refuse(path)
    assert str(error) == f"config {path} cannot be read: No such file or directory"
    assert isinstance(error, ModelServingError)


def test_directory_instead_of_a_file(tmp_path: Path) -> None:
    assert str(refuse(tmp_path)).startswith(f"config {tmp_path} cannot be read: ")


def test_not_utf8(tmp_path: Path) -> None:
    path = tmp_path / "config.yaml"
    path.write_bytes(b"sandbox: {cacheDir: \xff}\n")
    assert str(refuse(path)) == f"config {path} is not UTF-8 text"


def test_yaml_syntax_error_names_the_place(tmp_path: Path) -> None:
    path = write(tmp_path, "sandbox:\n  maxFuel: [1\n")
    message = str(refuse(path))
    assert message.startswith(f"config {path} is not valid YAML: ")
    assert "(line 3, column 1)" in message


@pytest.mark.parametrize("depth", [MAX_DEPTH + 1, 100_000])
def test_deep_nesting_is_refused_not_a_crash(tmp_path: Path, depth: int) -> None:
    path = write(tmp_path, "sandbox: " + "[" * depth + "]" * depth + "\n")
    assert str(refuse(path)) == (
        f"config {path} is refused: maps and lists nested more than {MAX_DEPTH} levels deep "
        "(document 1)"
    )


def test_several_documents_are_refused(tmp_path: Path) -> None:
    path = write(tmp_path, "sandbox: {}\n---\nsandbox: {}\n")
    assert str(refuse(path)) == f"config {path} must hold one YAML document, not 2"


@pytest.mark.parametrize(
    ("text", "kind"),
    [
        ("- sandbox\n", "a list"),
        ("sandbox\n", "a string"),
        ("42\n", "a number"),
        ("true\n", "a boolean"),
    ],
)
def test_non_mapping_file_is_refused(tmp_path: Path, text: str, kind: str) -> None:
    path = write(tmp_path, text)
    assert str(refuse(path)) == f"config {path} must hold a mapping of settings, not {kind}"


def test_invalid_file_lists_every_bad_field(tmp_path: Path) -> None:
    path = write(
        tmp_path,
        "sandbox:\n"
        "  maxFuel: 0\n"
        "  maxMemoryMib: 100\n"
        "pluginNamespaces: [Plugins]\n"
        "concurrency: {reconciles: '4'}\n"
        "metrics: {bindAddress: localhost}\n"
        "resyncSeconds: 1.5\n",
    )
    error = refuse(path)
    assert str(error) == (
        f"config {path} is invalid:\n"
        "  - sandbox.maxFuel: Input should be greater than or equal to 1\n"
        "  - sandbox.maxMemoryMib: unknown field\n"
        "  - pluginNamespaces[0]: 'Plugins' is not a namespace name (a DNS-1123 label: "
        "lower-case letters, digits and '-', at most 63 characters)\n"
        "  - concurrency.reconciles: Input should be a valid integer\n"
        "  - metrics.bindAddress: 'localhost' is not an IP address "
        "(e.g. 0.0.0.0, 127.0.0.1 or ::)\n"
        "  - resyncSeconds: Input should be a valid integer"
    )
    assert [e.path for e in error.errors] == [
        "sandbox.maxFuel",
        "sandbox.maxMemoryMib",
        "pluginNamespaces[0]",
        "concurrency.reconciles",
        "metrics.bindAddress",
        "resyncSeconds",
    ]


def test_cross_field_rules_are_reported_with_their_section(tmp_path: Path) -> None:
    path = write(
        tmp_path,
        "sandbox: {defaultFuel: 10, maxFuel: 5}\n"
        "leaderElection: {leaseDurationSeconds: 5, renewDeadlineSeconds: 10}\n",
    )
    error = refuse(path)
    assert error.errors == (
        FieldError("sandbox", "defaultFuel (10) must not be greater than maxFuel (5)"),
        FieldError(
            "leaderElection",
            "leaseDurationSeconds (5) must be greater than renewDeadlineSeconds (10)",
        ),
    )
    assert str(error) == (
        f"config {path} is invalid:\n"
        "  - sandbox: defaultFuel (10) must not be greater than maxFuel (5)\n"
        "  - leaderElection: leaseDurationSeconds (5) must be greater than "
        "renewDeadlineSeconds (10)"
    )


def test_same_ports_are_refused(tmp_path: Path) -> None:
    path = write(tmp_path, "metrics: {port: 8081}\n")
    assert str(refuse(path)) == (
        f"config {path} is invalid:\n"
        "  - metrics.port and health.port are both 8081; they must differ"
    )


def test_sandbox_settings_of_the_defaults(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    monkeypatch.setenv("MODELSERVING_CACHE", str(tmp_path / "cache"))
    settings = sandbox_settings(OperatorConfig())
    assert settings == SandboxSettings(cache_dir=tmp_path / "cache" / "wasm")


def test_sandbox_settings_map_every_field(tmp_path: Path) -> None:
    settings = sandbox_settings(load_config(write(tmp_path, FULL)))
    assert settings == SandboxSettings(
        default_fuel=5_000_000,
        max_fuel=900_000_000,
        default_memory_mib=32,
        max_memory_mib=256,
        default_timeout_ms=100,
        max_timeout_ms=2_000,
        max_module_bytes=8_388_608,
        pool_slots=16,
        cache_dir=Path("/var/cache/ms"),
    )


def test_sandbox_cache_dir_expands_home(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    monkeypatch.setenv("HOME", str(tmp_path))
    config = OperatorConfig.model_validate({"sandbox": {"cacheDir": "~/wasm"}})
    assert sandbox_settings(config).cache_dir == tmp_path / "wasm"


def test_module_limits_and_compile_bounds_reach_the_sandbox() -> None:
    config = OperatorConfig.model_validate(
        {
            "sandbox": {
                "moduleLimits": {"maxFunctions": 1234, "maxLocalsPerFunction": 99},
                "compileTimeoutMs": 777,
                "compileMemoryMiB": 300,
                "compileWorkers": 3,
                "maxArtifactBytes": 4096,
                "memoryCacheMaxBytes": 8192,
                "extismCompiledPlugins": 5,
                "extismWorkers": 3,
            }
        }
    )
    settings = sandbox_settings(config)
    assert settings.module_bounds.max_functions == 1234
    assert settings.module_bounds.max_locals_per_function == 99
    assert settings.module_bounds.max_code_bytes == ModuleBounds().max_code_bytes
    assert (settings.compile_timeout_ms, settings.compile_memory_mib) == (777, 300)
    assert (settings.extism_compiled_plugins, settings.extism_workers) == (5, 3)
    assert (settings.compile_workers, settings.max_artifact_bytes) == (3, 4096)
    assert settings.memory_cache_max_bytes == 8192


def test_the_config_defaults_of_module_limits_are_the_sandboxs() -> None:
    assert sandbox_settings(OperatorConfig()).module_bounds == ModuleBounds()
