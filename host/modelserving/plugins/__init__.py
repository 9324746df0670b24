"""Plugins: the contract (hooks, configs), the registry and the native built-ins.

The chain builds plugin instances from here; the WASM adapter joins once the sandbox lands.
"""

from modelserving.plugins.base import Builtin, HookError, PluginConfig
from modelserving.plugins.patch import PodPatch
from modelserving.plugins.registry import Registry, RegistryError, default_registry

__all__ = [
    "Builtin",
    "HookError",
    "PluginConfig",
    "PodPatch",
    "Registry",
    "RegistryError",
    "default_registry",
]
