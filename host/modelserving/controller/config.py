"""Loading the operator configuration file, and the sandbox settings it yields.

``modelserving run --config FILE`` calls ``load_config``; the controller builds its sandbox from
``sandbox_settings``. Every problem in the file is reported at once, each with its field path.
"""

from __future__ import annotations

import os
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from pydantic import ValidationError

from modelserving.api.errors import FieldError, ModelServingError
from modelserving.api.jsondata import describe
from modelserving.api.operator import OperatorConfig
from modelserving.api.validation import pydantic_errors
from modelserving.controller.yamltext import YamlInvalid, YamlRefused, load_all, read_bytes
from modelserving.sandbox.settings import ModuleBounds, SandboxSettings, default_cache_dir

SERVICE_ACCOUNT_NAMESPACE = Path("/var/run/secrets/kubernetes.io/serviceaccount/namespace")
"""Where a Pod finds its own namespace when ``POD_NAMESPACE`` is not set."""


class ConfigError(ModelServingError):
    """The operator configuration file cannot be used; fix the file (the controller won't start)."""

    def __init__(self, path: Path, problem: str, errors: Sequence[FieldError] = ()) -> None:
        self.path = path
        self.errors = tuple(errors)
        lines = "".join(f"\n  - {e}" for e in self.errors)
        super().__init__(f"config {path} {problem}{':' if lines else ''}{lines}")


def load_config(path: Path | None) -> OperatorConfig:
    """The configuration in ``path`` (YAML), or the defaults when ``path`` is None.

    An empty file means the defaults. An unset ``leaderElection.namespace`` is resolved to the
    namespace the controller runs in (``pod_namespace``).
    """
    config = OperatorConfig() if path is None else _parse(path, _read(path))
    if config.leader_election.namespace is None:
        config.leader_election.namespace = pod_namespace()
    return config


def _read(path: Path) -> Any:
    try:
        text = read_bytes(path).decode("utf-8")
    except OSError as exc:
        raise ConfigError(path, f"cannot be read: {exc.strerror or exc}") from None
    except UnicodeDecodeError:
        raise ConfigError(path, "is not UTF-8 text") from None
    try:
        documents = load_all(text)
    except YamlRefused as exc:
        raise ConfigError(path, f"is refused: {exc}") from None
    except YamlInvalid as exc:
        raise ConfigError(path, f"is not valid YAML: {exc}") from None
    if len(documents) > 1:
        raise ConfigError(path, f"must hold one YAML document, not {len(documents)}")
    return documents[0] if documents else None


def _parse(path: Path, data: Any) -> OperatorConfig:
    if data is None:
        return OperatorConfig()
    if not isinstance(data, dict):
        raise ConfigError(path, f"must hold a mapping of settings, not {describe(data)}")
    try:
        return OperatorConfig.model_validate(data)
    except ValidationError as exc:
        raise ConfigError(path, "is invalid", pydantic_errors(exc)) from None


def pod_namespace() -> str:
    """The namespace this controller runs in: ``$POD_NAMESPACE``, else the service account's
    namespace file, else ``default``."""
    env = os.environ.get("POD_NAMESPACE", "").strip()
    if env:
        return env
    try:
        found = SERVICE_ACCOUNT_NAMESPACE.read_text(encoding="utf-8").strip()
    except (OSError, UnicodeDecodeError):
        found = ""
    return found or "default"


def sandbox_settings(config: OperatorConfig) -> SandboxSettings:
    """The sandbox settings of a configuration; no ``cacheDir`` means ``default_cache_dir()``."""
    sb = config.sandbox
    return SandboxSettings(
        default_fuel=sb.default_fuel,
        max_fuel=sb.max_fuel,
        default_memory_mib=sb.default_memory_mib,
        max_memory_mib=sb.max_memory_mib,
        default_timeout_ms=sb.default_timeout_ms,
        max_timeout_ms=sb.max_timeout_ms,
        max_module_bytes=sb.max_module_bytes,
        pool_slots=sb.pool_slots,
        cache_dir=Path(sb.cache_dir).expanduser() if sb.cache_dir else default_cache_dir(),
        module_bounds=ModuleBounds(**sb.module_limits.model_dump()),
        compile_timeout_ms=sb.compile_timeout_ms,
        compile_memory_mib=sb.compile_memory_mib,
        compile_workers=sb.compile_workers,
        max_artifact_bytes=sb.max_artifact_bytes,
        cache_max_bytes=sb.cache_max_bytes,
        memory_cache_max_bytes=sb.memory_cache_max_bytes,
        extism_compiled_plugins=sb.extism_compiled_plugins,
        extism_workers=sb.extism_workers,
    )
