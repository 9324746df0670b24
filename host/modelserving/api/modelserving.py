"""Pydantic models of ``workload.serving.volcano.sh/v1alpha1`` ModelServing, spec and status.

Field names, defaults and enums follow Kthena, so Kthena manifests load unchanged; PluginSpec adds
our fields (Wasm modules, runtime, limits, failure policy). Rules that span several fields live in
``modelserving.api.validation``. The CRD in ``crds/`` is generated from these models
(``modelserving.api.crd``), so schema markers for Kubernetes sit next to each field.
"""

from __future__ import annotations

import re
from typing import Annotated, Any, Literal

from pydantic import ConfigDict, Field, field_validator, model_validator
from pydantic.alias_generators import to_camel

from modelserving.api._base import ApiModel
from modelserving.api.podspec_defaults import apply_pod_spec_defaults, pod_spec_schema

INT32_MAX = 2**31 - 1
MAX_PLUGINS = 32
INT64_MAX = 2**63 - 1
INT64_MIN = -(2**63)

DNS1035_LABEL = re.compile(r"^[a-z]([-a-z0-9]*[a-z0-9])?$")
PLUGIN_NAME = re.compile(r"^[a-z0-9]([-a-z0-9.]*[a-z0-9])?$")
SHA256_HEX = re.compile(r"^[a-f0-9]{64}$")

# Kubernetes schema markers, read by the CRD generator.
INT_OR_STRING: dict[str, Any] = {"x-kubernetes-int-or-string": True}
PRESERVE_UNKNOWN: dict[str, Any] = {"x-kubernetes-preserve-unknown-fields": True}

IntOrString = Annotated[int | str, Field(json_schema_extra=INT_OR_STRING)]
Int32 = Annotated[int, Field(ge=0, le=INT32_MAX)]
# Open (unknown fields kept), with the paths to Kthena's CRD defaults (podspec_defaults).
PodSpec = Annotated[
    dict[str, Any],
    Field(json_schema_extra=pod_spec_schema()),
]

RecoveryPolicy = Literal["ServingGroupRecreate", "RoleRecreate", "None"]
RolloutStrategyType = Literal["ServingGroupRollingUpdate", "RoleRollingUpdate"]
PluginType = Literal["BuiltIn", "Wasm"]
PluginRuntime = Literal["Native", "Wasm"]
PluginTarget = Literal["All", "Entry", "Worker"]
FailurePolicy = Literal["Fail", "Ignore"]
PluginMode = Literal["Enforce", "Monitor"]


def cel(*rules: tuple[str, str]) -> ConfigDict:
    """Model config carrying CEL validation rules (rule, message) for the generated CRD."""
    return ConfigDict(
        json_schema_extra={
            "x-kubernetes-validations": [{"rule": r, "message": m} for r, m in rules]
        }
    )


class ObjectMeta(ApiModel):
    """The parts of ``metadata`` we read; everything else the API server sets is kept as is."""

    model_config = ConfigDict(
        alias_generator=to_camel, populate_by_name=True, extra="allow", validate_default=True
    )

    name: str = Field(min_length=1, max_length=253)
    namespace: str | None = None
    uid: str | None = None
    generation: int | None = None
    labels: dict[str, str] | None = None
    annotations: dict[str, str] | None = None


class Metadata(ApiModel):
    """The labels and annotations a role template adds to its Pods."""

    labels: dict[str, str] | None = None
    annotations: dict[str, str] | None = None


class PodTemplateSpec(ApiModel):
    """A Pod template: metadata plus a core/v1 PodSpec (checked lightly here, fully by the API)."""

    # As in Kthena's CRD, spec may be left out, and a spec that is there lists its containers
    # (possibly none: the worker template of a role without workers); what only the Pod API
    # refuses is refused when the Pod is created, as with Kthena.

    metadata: Metadata | None = None
    spec: PodSpec = Field(default_factory=dict)

    @model_validator(mode="before")
    @classmethod
    def _containers_listed(cls, data: Any) -> Any:
        spec = data.get("spec") if isinstance(data, dict) else None
        if isinstance(spec, dict) and "containers" not in spec:
            raise ValueError("spec.containers: required field is missing")
        return data

    @field_validator("spec")
    @classmethod
    def _containers_named(cls, spec: dict[str, Any]) -> dict[str, Any]:
        for key in ("containers", "initContainers", "ephemeralContainers"):
            items = spec.get(key)
            if items is None:
                continue
            if not isinstance(items, list):
                raise ValueError(f"{key}: must be a list")
            seen: set[str] = set()  # Kthena's CRD: a list map keyed by name, per list
            for i, c in enumerate(items):
                if not isinstance(c, dict):
                    raise ValueError(f"{key}[{i}]: a container is a map")
                _check_container(c, f"{key}[{i}]", seen, image=key == "containers")
        return spec

    @field_validator("spec")
    @classmethod
    def _crd_defaults(cls, spec: dict[str, Any]) -> dict[str, Any]:
        """The defaults the API server fills in from the CRD (a port's protocol, ...)."""
        result: dict[str, Any] = apply_pod_spec_defaults(spec)
        return result


def _check_container(c: dict[str, Any], where: str, seen: set[str], image: bool) -> None:
    """Kthena's rules for one container: a name unique in its list (its CRD's list-map key),
    env vars with names, and, for ``containers``, an image that is not blank and has no space
    (Kthena's webhook)."""
    name = c.get("name")
    if not isinstance(name, str):
        raise ValueError(f"{where}.name: every container needs a name")
    if name in seen:
        raise ValueError(f"{where}.name: duplicate container name '{name}'")
    seen.add(name)
    value = c.get("image")
    if image and isinstance(value, str) and value and (not value.strip() or " " in value):
        raise ValueError(f"{where}.image: must not be blank or contain spaces")
    env = c.get("env")
    if env is None:
        return
    if not isinstance(env, list):
        raise ValueError(f"{where}.env: must be a list")
    for j, var in enumerate(env):
        if not isinstance(var, dict) or not isinstance(var.get("name"), str):
            raise ValueError(f"{where}.env[{j}]: an env var is a map with a name")


class Role(ApiModel):
    """A role: an entry Pod plus ``workerReplicas`` workers, repeated ``replicas`` times."""

    model_config = cel(
        (
            "self.workerReplicas == 0 || has(self.workerTemplate)",
            "workerTemplate is required when workerReplicas is greater than 0",
        ),
    )

    name: str = Field(
        max_length=12,
        json_schema_extra={"pattern": DNS1035_LABEL.pattern},
    )
    replicas: Int32 = 1
    entry_template: PodTemplateSpec
    worker_replicas: Int32
    worker_template: PodTemplateSpec | None = None
    # RoleRollingUpdate's knobs (Kthena inlines its RollingUpdateConfiguration into the role);
    # ignored, though defaulted and stored, under ServingGroupRollingUpdate.
    max_unavailable: IntOrString = 1
    partition: IntOrString | None = None

    @field_validator("name")
    @classmethod
    def _dns1035(cls, name: str) -> str:
        if not DNS1035_LABEL.fullmatch(name):
            raise ValueError(
                f"role name '{name}' must be a DNS-1035 label: lower-case letters, digits and "
                "'-', starting with a letter and ending with a letter or digit"
            )
        return name


class GangPolicy(ApiModel):
    """Gang scheduling: the minimum replicas of each role that must be scheduled together."""

    # minRoleReplicas cannot change once set but may be removed (every role is then gang
    # required in full), as Kthena's rule allows.

    min_role_replicas: dict[str, Int32] | None = Field(
        default=None,
        json_schema_extra={
            "x-kubernetes-validations": [
                {"rule": "self == oldSelf", "message": "minRoleReplicas is immutable"}
            ]
        },
    )


_TOPOLOGY_SPEC: dict[str, Any] = {
    "type": "object",
    **PRESERVE_UNKNOWN,
    "properties": {
        "mode": {"type": "string", "enum": ["hard", "soft"], "default": "hard"},
        "highestTierAllowed": {"type": "integer", "minimum": 0},
        "highestTierName": {"type": "string", "maxLength": 253},
    },
}


def _topology_spec(policy: dict[str, Any] | None) -> dict[str, Any] | None:
    """Volcano's NetworkTopologySpec as Kthena's CRD types and defaults it (``mode: hard``)."""
    if policy is None:
        return None
    mode = policy.get("mode")
    if mode is None:
        policy = {**policy, "mode": "hard"}
    elif mode not in ("hard", "soft"):
        raise ValueError(f"mode: must be 'hard' or 'soft' (got {mode!r})")
    tier = policy.get("highestTierAllowed")
    if tier is not None and (not isinstance(tier, int) or isinstance(tier, bool) or tier < 0):
        raise ValueError("highestTierAllowed: must be a non-negative integer")
    name = policy.get("highestTierName")
    if name is not None and (not isinstance(name, str) or len(name) > 253):
        raise ValueError("highestTierName: must be a string of at most 253 characters")
    return policy


class NetworkTopology(ApiModel):
    """Volcano network-topology policies, passed through to the PodGroup."""

    group_policy: dict[str, Any] | None = Field(default=None, json_schema_extra=_TOPOLOGY_SPEC)
    role_policy: dict[str, Any] | None = Field(default=None, json_schema_extra=_TOPOLOGY_SPEC)

    @field_validator("group_policy", "role_policy")
    @classmethod
    def _kthena_typed(cls, policy: dict[str, Any] | None) -> dict[str, Any] | None:
        return _topology_spec(policy)


class ServingGroupTemplate(ApiModel):
    """The template every ServingGroup is made from: 1 to 4 roles with unique names."""

    model_config = cel(
        (
            "!has(oldSelf.gangPolicy) || has(self.gangPolicy)",
            "gangPolicy is required once set",
        ),
    )

    # Any int64, as in Kthena; a negative grace period recovers at once, as 0 does.
    restart_grace_period_seconds: int = Field(default=0, ge=INT64_MIN, le=INT64_MAX)
    gang_policy: GangPolicy | None = None
    network_topology: NetworkTopology | None = None
    roles: list[Role] = Field(
        min_length=1,
        max_length=4,
        json_schema_extra={
            "x-kubernetes-validations": [
                {
                    "rule": "self.all(x, self.exists_one(y, y.name == x.name))",
                    "message": "roles name must be unique",
                }
            ]
        },
    )

    @field_validator("roles")
    @classmethod
    def _unique_roles(cls, roles: list[Role]) -> list[Role]:
        names = [r.name for r in roles]
        duplicates = sorted({n for n in names if names.count(n) > 1})
        if duplicates:
            raise ValueError(f"role names must be unique; repeated: {', '.join(duplicates)}")
        return roles


class RollingUpdateConfiguration(ApiModel):
    """ServingGroupRollingUpdate knobs: how many groups may be down, how many are protected."""

    # partition protects the first N ServingGroups (ordinals below it), as a StatefulSet's does.

    max_unavailable: IntOrString = 1
    partition: IntOrString | None = None


class EvictionStrategy(ApiModel):
    """Kthena's node-eviction protection (accepted and passed through)."""

    protection_level: Literal["ServingGroup", "Role"] = "ServingGroup"
    min_available: IntOrString | None = None
    role_min_available: dict[str, IntOrString] | None = None


class RolloutStrategy(ApiModel):
    """How changed templates reach running groups."""

    type: RolloutStrategyType = "ServingGroupRollingUpdate"
    rolling_update_configuration: RollingUpdateConfiguration | None = None
    eviction_strategy: EvictionStrategy | None = None


class PluginScope(ApiModel):
    """Where a plugin runs: only these roles (empty: all) and only these Pods (entry/worker)."""

    roles: list[str] | None = Field(default=None, max_length=4)
    target: PluginTarget = "All"


class ConfigMapKeyRef(ApiModel):
    """A key of a ConfigMap holding a WebAssembly module (binaryData, optionally gzip).

    ``namespace`` defaults to the ModelServing's own; another namespace must be one the operator
    allows (``pluginNamespaces`` in the controller's configuration).
    """

    name: str = Field(min_length=1, max_length=253)
    key: str = Field(min_length=1, max_length=253)
    namespace: str | None = Field(default=None, min_length=1, max_length=63)


class ModuleSource(ApiModel):
    """Where a Wasm plugin's module comes from, pinned by its sha256."""

    config_map_ref: ConfigMapKeyRef
    sha256: str = Field(json_schema_extra={"pattern": SHA256_HEX.pattern})

    @field_validator("sha256")
    @classmethod
    def _hex_digest(cls, digest: str) -> str:
        if not SHA256_HEX.fullmatch(digest):
            raise ValueError("must be 64 lower-case hex digits (the module's sha256)")
        return digest


class PluginLimits(ApiModel):
    """Per-call limits for a WebAssembly plugin, clamped to the operator's maxima."""

    fuel: int | None = Field(default=None, ge=1, le=INT64_MAX)
    memory_mib: int | None = Field(default=None, ge=1, le=4096, alias="memoryMiB")
    timeout_ms: int | None = Field(default=None, ge=1, le=600_000)


class PluginSpec(ApiModel):
    """An entry of ``spec.plugins``: Kthena's fields plus modules, limits, failure policy, mode."""

    model_config = cel(
        (
            "self.type != 'Wasm' || has(self.module)",
            "module is required when type is Wasm",
        ),
        (
            "self.type == 'Wasm' || !has(self.module)",
            "module is only allowed when type is Wasm",
        ),
        (
            "self.type != 'Wasm' || !has(self.runtime) || self.runtime == 'Wasm'",
            "runtime Native is only for BuiltIn plugins",
        ),
    )

    name: str = Field(
        min_length=1,
        max_length=63,
        json_schema_extra={"pattern": PLUGIN_NAME.pattern},
    )
    type: PluginType = "BuiltIn"
    runtime: PluginRuntime | None = None
    config: Any = Field(default=None, json_schema_extra=PRESERVE_UNKNOWN)
    scope: PluginScope | None = None
    module: ModuleSource | None = None
    limits: PluginLimits | None = None
    failure_policy: FailurePolicy = "Fail"
    mode: PluginMode = "Enforce"

    @field_validator("name")
    @classmethod
    def _plugin_name(cls, name: str) -> str:
        if not PLUGIN_NAME.fullmatch(name):
            raise ValueError(
                f"plugin name '{name}' must be lower-case letters, digits, '-' or '.', "
                "starting and ending with a letter or digit"
            )
        return name

    @model_validator(mode="after")
    def _type_matches_source(self) -> PluginSpec:
        if self.type == "Wasm":
            if self.module is None:
                raise ValueError("module is required when type is Wasm")
            if self.runtime == "Native":
                raise ValueError(
                    "runtime Native is only for BuiltIn plugins; a Wasm plugin runs Wasm"
                )
        elif self.module is not None:
            raise ValueError("module is only allowed when type is Wasm")
        return self

    @property
    def monitor(self) -> bool:
        """Whether the plugin runs in Monitor mode (reports, changes nothing, never blocks)."""
        return self.mode == "Monitor"

    @property
    def blocks(self) -> bool:
        """Whether a failure of this plugin stops what it was called for (failure policy Fail,
        not in Monitor mode)."""
        return self.failure_policy == "Fail" and not self.monitor

    @property
    def effective_runtime(self) -> PluginRuntime:
        """Which implementation runs: Wasm plugins always Wasm, built-ins Native unless asked."""
        if self.type == "Wasm":
            return "Wasm"
        return self.runtime or "Native"

    def applies_to(self, role: str, is_entry: bool) -> bool:
        """Whether this plugin's scope covers a Pod of ``role`` (entry or worker)."""
        if self.scope is None:
            return True
        if self.scope.roles and role not in self.scope.roles:
            return False
        target = self.scope.target
        return target == "All" or (target == "Entry") == is_entry


class ModelServingSpec(ApiModel):
    """The desired state: ``replicas`` ServingGroups made from ``template``, plus plugins."""

    model_config = cel(
        (
            "!has(self.plugins) || self.plugins.all(p, !has(p.scope) || !has(p.scope.roles)"
            " || p.scope.roles.all(r, self.template.roles.exists(x, x.name == r)))",
            "plugin scope.roles must name roles of template.roles",
        ),
    )

    replicas: Int32 = 1
    scheduler_name: str = "volcano"
    plugins: list[PluginSpec] | None = Field(default=None, max_length=MAX_PLUGINS)
    template: ServingGroupTemplate
    rollout_strategy: RolloutStrategy | None = None
    recovery_policy: RecoveryPolicy = "RoleRecreate"


class Condition(ApiModel):
    """A metav1.Condition."""

    type: str
    status: Literal["True", "False", "Unknown"]
    reason: str = ""
    message: str = ""
    last_transition_time: str | None = None
    observed_generation: int | None = None


class ModelServingStatus(ApiModel):
    """What the controller observed; Kthena's fields (conditions include our PluginsReady)."""

    observed_generation: int | None = None
    replicas: int = 0
    current_replicas: int = 0
    updated_replicas: int = 0
    available_replicas: int = 0
    current_revision: str | None = None
    update_revision: str | None = None
    conditions: list[Condition] | None = None
    label_selector: str | None = None


class ModelServing(ApiModel):
    """A ModelServing object as stored by the API server."""

    api_version: Literal["workload.serving.volcano.sh/v1alpha1"] = (
        "workload.serving.volcano.sh/v1alpha1"
    )
    kind: Literal["ModelServing"] = "ModelServing"
    metadata: ObjectMeta
    spec: ModelServingSpec
    status: ModelServingStatus | None = None

    @property
    def namespace(self) -> str:
        return self.metadata.namespace or "default"

    @property
    def name(self) -> str:
        return self.metadata.name

    @property
    def ref(self) -> str:
        """``ModelServing <namespace>/<name>``, how errors and events name this object."""
        return f"ModelServing {self.namespace}/{self.name}"
