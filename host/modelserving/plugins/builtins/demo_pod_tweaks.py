"""``demo-pod-tweaks``: Kthena's demo plugin: runtime class, annotations and env on every Pod.

Config (camelCase, unknown fields refused):
  runtimeClassName  set ``spec.runtimeClassName`` when non-empty
  annotations       merged into the Pod's annotations, overwriting same keys
  env               upserted into every container and initContainer by name (Kthena appends,
                    which duplicates names; we replace a same-named entry in place)
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from pydantic import Field, field_validator

from modelserving.api.hook import HookRequest, PatchOperation
from modelserving.api.names import is_dns1123_subdomain, is_env_var_name, is_qualified_name
from modelserving.plugins.base import Builtin, PluginConfig
from modelserving.plugins.patch import PodPatch

NAME = "demo-pod-tweaks"


class EnvVar(PluginConfig):
    """A core/v1 EnvVar."""

    name: str = Field(min_length=1)
    value: str | None = None
    value_from: dict[str, Any] | None = None

    @field_validator("name")
    @classmethod
    def _env_name(cls, name: str) -> str:
        if not is_env_var_name(name):
            raise ValueError(f"'{name}' is not a valid environment variable name")
        return name


class DemoPodTweaksConfig(PluginConfig):
    runtime_class_name: str | None = None
    annotations: dict[str, str] | None = None
    env: list[EnvVar] | None = None

    @field_validator("runtime_class_name")
    @classmethod
    def _runtime_class(cls, name: str | None) -> str | None:
        if name and not is_dns1123_subdomain(name):
            raise ValueError(f"'{name}' is not a valid RuntimeClass name (a DNS-1123 subdomain)")
        return name

    @field_validator("annotations")
    @classmethod
    def _annotation_keys(cls, values: dict[str, str] | None) -> dict[str, str] | None:
        for key in values or {}:
            if not is_qualified_name(key):
                raise ValueError(f"'{key}' is not a valid annotation key")
        return values


class DemoPodTweaks:
    """The plugin instance for one PluginSpec entry."""

    def __init__(self, name: str, config: DemoPodTweaksConfig) -> None:
        self.name = name
        self._runtime_class = config.runtime_class_name
        self._annotations = dict(config.annotations or {})
        self._env = [e.to_api() for e in config.env or []]

    def on_pod_create(self, request: HookRequest) -> Sequence[PatchOperation]:
        patch = PodPatch(request.pod)
        if self._runtime_class:
            patch.set_runtime_class_name(self._runtime_class)
        patch.merge_annotations(self._annotations)
        patch.upsert_env(self._env)
        return patch.ops


def _make(name: str, config: Any) -> DemoPodTweaks:
    return DemoPodTweaks(name, config)


BUILTIN = Builtin(
    name=NAME,
    config_model=DemoPodTweaksConfig,
    factory=_make,
    summary="Sets runtimeClassName, merges annotations and upserts env on every Pod.",
    hooks=frozenset({"on_pod_create"}),
    wasm_module="demo-pod-tweaks.wasm",
    reads_pod_only=True,
)
