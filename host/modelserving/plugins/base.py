"""The plugin contract: hook protocols, config models and the definition a built-in registers.

A plugin is any object with a ``name`` and at least one hook: ``on_pod_create`` returns JSON Patch
operations for the Pod (it never changes the Pod it is given), ``on_pod_ready`` observes and may
return ``Observation``s (named measurements in seconds, which the controller exports as metrics).
Raise ``HookError`` to fail a call with a message; the chain applies the plugin's failure policy.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Annotated, Any, Protocol, runtime_checkable

from pydantic import AfterValidator

from modelserving.api._base import ApiModel
from modelserving.api.hook import HOOK_SPECS, Hook, HookRequest, PatchOperation
from modelserving.api.names import is_quantity
from modelserving.api.observation import (
    MAX_OBSERVATION_SECONDS,
    OBSERVATION_SUFFIX,
    Observation,
    observation_name_problem,
)

__all__ = [
    "MAX_OBSERVATION_SECONDS",
    "OBSERVATION_SUFFIX",
    "Observation",
    "observation_name_problem",
]


class HookError(Exception):
    """Raised by a plugin hook to refuse a Pod with a message (failure class PluginError)."""


class PluginConfig(ApiModel):
    """Base of every plugin's config model: camelCase, unknown fields refused."""


class EmptyConfig(PluginConfig):
    """For plugins that take no configuration."""


def _quantity(value: str) -> str:
    if not is_quantity(value):
        raise ValueError(f"'{value}' is not a valid quantity (such as 16Gi)")
    return value


Quantity = Annotated[str, AfterValidator(_quantity)]
"""A config field holding a Kubernetes resource quantity (``is_quantity``)."""


@runtime_checkable
class PodCreateHook(Protocol):
    def on_pod_create(self, request: HookRequest) -> Sequence[PatchOperation]: ...


@runtime_checkable
class PodReadyHook(Protocol):
    """Observes a Ready Pod; may return measurements (None or an empty sequence: none)."""

    def on_pod_ready(self, request: HookRequest) -> Sequence[Observation] | None: ...


NATIVE_METHODS: dict[Hook, str] = {spec.hook: spec.method for spec in HOOK_SPECS if spec.method}
"""The method a native plugin implements for each hook it can have (from ``HOOK_SPECS``)."""
HOOK_METHODS: tuple[str, ...] = tuple(NATIVE_METHODS.values())


@dataclass(frozen=True)
class Builtin:
    """A built-in plugin as registered: its name, config model and how to make an instance.

    ``factory(name, config)`` receives the validated config model instance. ``wasm_module`` names
    the compiled WebAssembly twin in ``plugins-wasm/`` (``runtime: Wasm``), when there is one.
    """

    name: str
    config_model: type[PluginConfig]
    factory: Callable[[str, Any], object]
    summary: str
    hooks: frozenset[str] = field(default_factory=frozenset)
    wasm_module: str | None = None
    reads_pod_only: bool = False
    """The plugin never changes ``request.pod`` (it reads it, and builds its patch with
    ``PodPatch`` or ``PodEdit``, which never change the Pod they are given): the chain then hands
    it the Pod itself instead of a copy. Every built-in shipped with modelserving sets it, and
    ``tests/unit/plugins/test_read_only_pods.py`` checks it on Pods that refuse any change."""
