"""Plugins: the contract (hooks, configs), the registry and the native built-ins.

The chain builds plugin instances from here. ``PodPatch`` and ``PodEdit`` turn changes into
JSON Patch operations; ``Observation`` is what an OnPodReady hook may report.
"""

from modelserving.plugins.base import Builtin, HookError, Observation, PluginConfig
from modelserving.plugins.patch import PodPatch
from modelserving.plugins.podedit import PodEdit
from modelserving.plugins.registry import Registry, RegistryError, default_registry

__all__ = [
    "Builtin",
    "HookError",
    "Observation",
    "PluginConfig",
    "PodEdit",
    "PodPatch",
    "Registry",
    "RegistryError",
    "default_registry",
]
