"""The operator's configuration file: sandbox limits, patch policy, namespaces, leader election.

``OperatorConfig`` is what ``modelserving.controller.config.load_config`` reads from the file
given to ``modelserving run --config`` (in the deployment, the ``modelserving-config``
ConfigMap). Every field has a default, so an empty file is a valid configuration; unknown fields
and values of the wrong type are refused, and every problem is reported with its field path.
See docs/operator.md for the meaning of each field.
"""

from __future__ import annotations

import ipaddress
import re
from typing import Annotated, Self

from pydantic import AfterValidator, Field, field_validator, model_validator

from modelserving.api._base import ApiModel
from modelserving.api.modelserving import INT64_MAX
from modelserving.api.names import is_dns1123_subdomain
from modelserving.api.policy import ObjectPolicy, PatchPolicy

MIB = 1024 * 1024
DNS1123_LABEL = re.compile(r"^[a-z0-9]([-a-z0-9]*[a-z0-9])?$")
MAX_PORT = 65_535


def _namespace_name(value: str) -> str:
    if len(value) > 63 or not DNS1123_LABEL.fullmatch(value):
        raise ValueError(
            f"{value!r} is not a namespace name (a DNS-1123 label: lower-case letters, digits "
            "and '-', at most 63 characters)"
        )
    return value


NamespaceName = Annotated[str, AfterValidator(_namespace_name)]


def _once_each(values: list[str]) -> list[str]:
    twice = sorted({v for v in values if values.count(v) > 1})
    if twice:
        raise ValueError(f"{', '.join(repr(t) for t in twice)} listed more than once")
    return values


class ModuleLimitsConfig(ApiModel):
    """The most a WebAssembly module may declare; a module over one is refused before it is
    compiled (the sandbox's defaults leave room for standard Go modules several times over)."""

    max_functions: int = Field(default=30_000, ge=1, le=1_000_000)
    max_function_body_bytes: int = Field(default=512 * 1024, ge=1, le=INT64_MAX)
    max_code_bytes: int = Field(default=16 * MIB, ge=1, le=INT64_MAX)
    max_locals_per_function: int = Field(default=10_000, ge=1, le=50_000)
    max_local_declarations: int = Field(default=100_000, ge=1, le=10_000_000)
    max_types: int = Field(default=10_000, ge=1, le=1_000_000)
    max_imports: int = Field(default=1_000, ge=1, le=1_000_000)
    max_exports: int = Field(default=10_000, ge=1, le=1_000_000)
    max_globals: int = Field(default=10_000, ge=1, le=1_000_000)
    max_tables: int = Field(default=4, ge=1, le=4)
    max_table_elements: int = Field(default=100_000, ge=1, le=10_000_000)
    max_data_segments: int = Field(default=100_000, ge=1, le=10_000_000)
    max_data_bytes: int = Field(default=16 * MIB, ge=1, le=INT64_MAX)
    max_element_segments: int = Field(default=10_000, ge=1, le=10_000_000)
    max_element_section_bytes: int = Field(default=4 * MIB, ge=1, le=INT64_MAX)


class SandboxConfig(ApiModel):
    """Per-call limits of WebAssembly plugins: defaults, and maxima that requests are clamped to.

    A plugin's ``limits`` above a maximum are clamped to it; unset ones take the default.
    """

    default_fuel: int = Field(default=100_000_000, ge=1, le=INT64_MAX)
    max_fuel: int = Field(default=2_000_000_000, ge=1, le=INT64_MAX)
    # wasm32 memories cannot exceed 4 GiB.
    default_memory_mib: int = Field(default=64, ge=1, le=4096, alias="defaultMemoryMiB")
    max_memory_mib: int = Field(default=512, ge=1, le=4096, alias="maxMemoryMiB")
    default_timeout_ms: int = Field(default=250, ge=1, le=600_000)
    max_timeout_ms: int = Field(default=5_000, ge=1, le=600_000)
    max_module_bytes: int = Field(default=32 * MIB, ge=1, le=INT64_MAX)
    pool_slots: int = Field(default=64, ge=1, le=65_536)
    cache_dir: str | None = Field(default=None, min_length=1)
    module_limits: ModuleLimitsConfig = Field(default_factory=ModuleLimitsConfig)
    compile_timeout_ms: int = Field(default=10_000, ge=1, le=600_000)
    compile_memory_mib: int = Field(default=512, ge=16, le=65_536, alias="compileMemoryMiB")
    compile_workers: int = Field(default=2, ge=1, le=64)
    max_artifact_bytes: int = Field(default=256 * MIB, ge=1, le=INT64_MAX)
    cache_max_bytes: int = Field(default=512 * MIB, ge=1, le=INT64_MAX)
    memory_cache_max_bytes: int = Field(default=256 * MIB, ge=1, le=INT64_MAX)
    extism_compiled_plugins: int = Field(default=8, ge=1, le=1024)
    extism_workers: int = Field(default=2, ge=1, le=64)

    @model_validator(mode="after")
    def _defaults_within_maxima(self) -> Self:
        pairs = (
            ("defaultFuel", self.default_fuel, "maxFuel", self.max_fuel),
            ("defaultMemoryMiB", self.default_memory_mib, "maxMemoryMiB", self.max_memory_mib),
            ("defaultTimeoutMs", self.default_timeout_ms, "maxTimeoutMs", self.max_timeout_ms),
        )
        problems = [
            f"{dname} ({dvalue}) must not be greater than {mname} ({mvalue})"
            for dname, dvalue, mname, mvalue in pairs
            if dvalue > mvalue
        ]
        if problems:
            raise ValueError("; ".join(problems))
        return self


class ConcurrencyConfig(ApiModel):
    """How many ModelServings are reconciled at once, how many API writes run at once, and what
    slows the writes down (``controller/pacing.py``)."""

    reconciles: int = Field(default=4, ge=1, le=64)
    api_writes: int = Field(default=4, ge=1, le=256)
    adaptive_writes: bool = True
    write_latency_factor: float = Field(default=3.0, ge=1.5, le=100.0)
    max_starting_pods: int = Field(default=1024, ge=0, le=100_000)
    start_window_seconds: int = Field(default=30, ge=1, le=3_600)


class MetricsConfig(ApiModel):
    """Where the Prometheus metrics are served."""

    port: int = Field(default=8080, ge=1, le=MAX_PORT)
    bind_address: str = "0.0.0.0"

    @field_validator("bind_address")
    @classmethod
    def _ip_address(cls, value: str) -> str:
        try:
            ipaddress.ip_address(value)
        except ValueError:
            raise ValueError(
                f"{value!r} is not an IP address (e.g. 0.0.0.0, 127.0.0.1 or ::)"
            ) from None
        return value


class HealthConfig(ApiModel):
    """Where ``/healthz`` (and ``/readyz``) are served."""

    port: int = Field(default=8081, ge=1, le=MAX_PORT)


class LeaderElectionConfig(ApiModel):
    """The Lease that makes one replica of several the active one (timings as in client-go)."""

    enabled: bool = True
    # None: the namespace the controller runs in (resolved by the controller when it loads).
    namespace: NamespaceName | None = None
    lease_name: str = "modelserving-controller"
    lease_duration_seconds: int = Field(default=15, ge=1, le=3600)
    renew_deadline_seconds: int = Field(default=10, ge=1, le=3600)
    retry_period_seconds: int = Field(default=2, ge=1, le=3600)

    @field_validator("lease_name")
    @classmethod
    def _lease_name(cls, value: str) -> str:
        if not is_dns1123_subdomain(value):
            raise ValueError(
                f"{value!r} is not a valid Lease name (a DNS-1123 subdomain: lower-case "
                "letters, digits, '-' and '.', at most 253 characters)"
            )
        return value

    @model_validator(mode="after")
    def _timings(self) -> Self:
        duration = self.lease_duration_seconds
        deadline = self.renew_deadline_seconds
        retry = self.retry_period_seconds
        problems = []
        if duration <= deadline:
            problems.append(
                f"leaseDurationSeconds ({duration}) must be greater than "
                f"renewDeadlineSeconds ({deadline})"
            )
        if deadline <= retry:
            problems.append(
                f"renewDeadlineSeconds ({deadline}) must be greater than "
                f"retryPeriodSeconds ({retry})"
            )
        if problems:
            raise ValueError("; ".join(problems))
        return self


class OperatorConfig(ApiModel):
    """The whole operator configuration file; every field is optional."""

    sandbox: SandboxConfig = Field(default_factory=SandboxConfig)
    patch_policy: PatchPolicy = Field(default_factory=PatchPolicy)
    object_policy: ObjectPolicy = Field(default_factory=ObjectPolicy)
    plugin_namespaces: list[NamespaceName] = Field(default_factory=list)
    watch_namespaces: list[NamespaceName] = Field(default_factory=list)
    concurrency: ConcurrencyConfig = Field(default_factory=ConcurrencyConfig)
    metrics: MetricsConfig = Field(default_factory=MetricsConfig)
    health: HealthConfig = Field(default_factory=HealthConfig)
    leader_election: LeaderElectionConfig = Field(default_factory=LeaderElectionConfig)
    resync_seconds: int = Field(default=300, ge=1, le=86_400)
    max_pods_per_model_serving: int = Field(default=100_000, ge=1, le=10_000_000)
    """The most Pods one ModelServing may ask for (replicas times each ServingGroup's Pods);
    one that asks for more is refused as InvalidSpec. A pass plans every Pod it may create
    (about 1.3 KB and 43 us each), so 2**31 replicas would take the controller's memory."""

    @field_validator("plugin_namespaces", "watch_namespaces")
    @classmethod
    def _namespaces(cls, values: list[str]) -> list[str]:
        return _once_each(values)

    @model_validator(mode="after")
    def _distinct_ports(self) -> Self:
        if self.metrics.port == self.health.port:
            raise ValueError(
                f"metrics.port and health.port are both {self.metrics.port}; they must differ"
            )
        return self
