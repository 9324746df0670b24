"""The plugin contract: hook protocols, config models and the definition a built-in registers.

A plugin is any object with a ``name`` and at least one hook: ``on_pod_create`` returns JSON Patch
operations for the Pod (it never changes the Pod it is given), ``on_pod_ready`` observes. Raise
``HookError`` to fail a call with a message; the chain applies the plugin's failure policy.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any, Protocol, runtime_checkable

from modelserving.api._base import ApiModel
from modelserving.api.hook import HookRequest, PatchOperation


class HookError(Exception):
    """Raised by a plugin hook to refuse a Pod with a message (failure class PluginError)."""


class PluginConfig(ApiModel):
    """Base of every plugin's config model: camelCase, unknown fields refused."""


class EmptyConfig(PluginConfig):
    """For plugins that take no configuration."""


@runtime_checkable
class PodCreateHook(Protocol):
    def on_pod_create(self, request: HookRequest) -> Sequence[PatchOperation]: ...


@runtime_checkable
class PodReadyHook(Protocol):
    def on_pod_ready(self, request: HookRequest) -> None: ...


HOOK_METHODS = ("on_pod_create", "on_pod_ready")


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
