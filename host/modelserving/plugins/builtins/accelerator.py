"""``accelerator``: everything a Pod needs to run on N devices of one vendor (NVIDIA, Ascend, AMD).

Config (camelCase, unknown fields refused, null = absent):

  vendor            required: ``nvidia`` | ``ascend`` | ``amd``
  devices           devices per Pod, 1..128 (default 1)
  resourceName      the extended resource (a qualified name with a prefix); by vendor
                    ``nvidia.com/gpu``, ``huawei.com/Ascend910``, ``amd.com/gpu``
  container         the container to configure, by name (default the first)
  runtimeClassName  sets ``spec.runtimeClassName`` (a DNS-1123 subdomain)
  nodeSelector      merged into ``spec.nodeSelector`` (same keys overwritten)
  tolerations       appended unless an equal one is there (absent: tolerate the taint named
                    after the resource; ``[]``: none)
  env               ``{name, value}`` appended unless the name exists (absent: the vendor's
                    default, NVIDIA_DRIVER_CAPABILITIES for nvidia; ``[]``: none)
  shmSize           a shared-memory ``emptyDir`` of that size, mounted at ``/dev/shm``

The changes, in order: the device limit (and the request, when the container already requests
that resource), the runtime class, the node selector, the tolerations, the env, the shared-memory
volume and its mount. Entry and worker Pods are treated the same. The Rust twin in
``plugins-src/builtins/accelerator`` gives byte-identical responses.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any, Literal

from pydantic import Field, field_validator, model_validator

from modelserving.api.hook import HookRequest, PatchOperation
from modelserving.api.names import (
    is_dns1123_subdomain,
    is_env_var_name,
    is_label_value,
    is_qualified_name,
)
from modelserving.plugins.base import Builtin, PluginConfig, Quantity
from modelserving.plugins.podedit import PodEdit, str_field

NAME = "accelerator"
MAX_DEVICES = 128
INT64_MAX = 2**63 - 1
Vendor = Literal["nvidia", "ascend", "amd"]
DEFAULT_RESOURCE: dict[str, str] = {
    "nvidia": "nvidia.com/gpu",
    "ascend": "huawei.com/Ascend910",
    "amd": "amd.com/gpu",
}
DEFAULT_ENV: dict[str, list[dict[str, str]]] = {
    "nvidia": [{"name": "NVIDIA_DRIVER_CAPABILITIES", "value": "compute,utility"}],
    "ascend": [],
    "amd": [],
}
TOLERATION_MATCH = ("key", "operator", "value", "effect")


class Toleration(PluginConfig):
    """A core/v1 Toleration, checked as the API server would."""

    key: str | None = None
    operator: Literal["Exists", "Equal"] | None = None
    value: str | None = None
    effect: Literal["NoSchedule", "PreferNoSchedule", "NoExecute"] | None = None
    toleration_seconds: int | None = Field(default=None, ge=0, le=INT64_MAX)

    @field_validator("key")
    @classmethod
    def _key(cls, key: str | None) -> str | None:
        if key is not None and not is_qualified_name(key):
            raise ValueError(f"'{key}' is not a valid toleration key (a qualified name)")
        return key

    @field_validator("value")
    @classmethod
    def _value(cls, value: str | None) -> str | None:
        if value is not None and not is_label_value(value):
            raise ValueError(f"'{value}' is not a valid toleration value (a label value)")
        return value

    @model_validator(mode="after")
    def _consistent(self) -> Toleration:
        if self.key is None and self.operator != "Exists":
            raise ValueError("a toleration without a key must have operator Exists")
        if self.operator == "Exists" and self.value:
            raise ValueError("a toleration with operator Exists must have no value")
        if self.toleration_seconds is not None and self.effect != "NoExecute":
            raise ValueError("tolerationSeconds is only allowed with effect NoExecute")
        return self


class EnvVar(PluginConfig):
    """An env var with a literal value."""

    name: str
    value: str

    @field_validator("name")
    @classmethod
    def _env_name(cls, name: str) -> str:
        if not is_env_var_name(name):
            raise ValueError(f"'{name}' is not a valid environment variable name")
        return name


class AcceleratorConfig(PluginConfig):
    vendor: Vendor
    devices: int = Field(default=1, ge=1, le=MAX_DEVICES)
    resource_name: str | None = None
    container: str | None = None
    runtime_class_name: str | None = None
    node_selector: dict[str, str] | None = None
    tolerations: list[Toleration] | None = None
    env: list[EnvVar] | None = None
    shm_size: Quantity | None = None

    @field_validator("resource_name")
    @classmethod
    def _resource_name(cls, name: str | None) -> str | None:
        if name is not None and ("/" not in name or not is_qualified_name(name)):
            raise ValueError(
                f"'{name}' is not a resource name with a prefix (such as nvidia.com/gpu)"
            )
        return name

    @field_validator("runtime_class_name")
    @classmethod
    def _runtime_class(cls, name: str | None) -> str | None:
        if name is not None and not is_dns1123_subdomain(name):
            raise ValueError(f"'{name}' is not a valid RuntimeClass name (a DNS-1123 subdomain)")
        return name

    @field_validator("node_selector")
    @classmethod
    def _node_selector(cls, values: dict[str, str] | None) -> dict[str, str] | None:
        for key, value in (values or {}).items():
            if not is_qualified_name(key):
                raise ValueError(f"'{key}' is not a valid label key")
            if not is_label_value(value):
                raise ValueError(f"'{value}' is not a valid label value (key '{key}')")
        return values


class Accelerator:
    """The plugin instance for one PluginSpec entry."""

    def __init__(self, name: str, config: AcceleratorConfig) -> None:
        self.name = name
        self._resource = config.resource_name or DEFAULT_RESOURCE[config.vendor]
        self._amount = str(config.devices)
        self._container = config.container
        self._runtime_class = config.runtime_class_name
        self._node_selector = dict(config.node_selector or {})
        self._tolerations: list[dict[str, Any]] = (
            [{"key": self._resource, "operator": "Exists", "effect": "NoSchedule"}]
            if config.tolerations is None
            else [t.to_api() for t in config.tolerations]
        )
        self._env: list[dict[str, Any]] = (
            [dict(e) for e in DEFAULT_ENV[config.vendor]]
            if config.env is None
            else [e.to_api() for e in config.env]
        )
        self._shm_size = config.shm_size

    def on_pod_create(self, request: HookRequest) -> Sequence[PatchOperation]:
        edit = PodEdit(request.pod)
        container = edit.container(self._container)
        edit.set_amount(container, self._resource, self._amount)
        if self._runtime_class is not None:
            edit.put(["spec", "runtimeClassName"], self._runtime_class)
        edit.merge_map(["spec", "nodeSelector"], self._node_selector)
        for toleration in self._tolerations:
            edit.append_unless(["spec", "tolerations"], toleration, _same_as(toleration))
        for var in self._env:
            edit.add_env(container, var)
        if self._shm_size is not None:
            edit.add_shared_memory(container, self._shm_size)
        return edit.ops


def _same_as(toleration: dict[str, Any]) -> Callable[[Any], bool]:
    """Whether an existing toleration has the same key, operator, value and effect as
    ``toleration`` (absent == absent)."""
    return lambda existing: all(
        str_field(existing, k) == toleration.get(k) for k in TOLERATION_MATCH
    )


def _make(name: str, config: Any) -> Accelerator:
    return Accelerator(name, config)


BUILTIN = Builtin(
    name=NAME,
    config_model=AcceleratorConfig,
    factory=_make,
    summary="Requests N devices of a vendor, with runtime class, node selector, tolerations, "
    "env and shared memory.",
    hooks=frozenset({"on_pod_create"}),
    wasm_module="accelerator.wasm",
    reads_pod_only=True,
)
