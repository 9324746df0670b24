"""The registry of built-in plugins: a plain name -> Builtin map that refuses duplicates.

``default_registry()`` holds the plugins shipped with modelserving; tests and embedders may make
their own ``Registry`` and register more.
"""

from __future__ import annotations

from collections.abc import Iterator
from functools import cache

from modelserving.plugins.base import HOOK_METHODS, Builtin


class RegistryError(ValueError):
    """A plugin definition that cannot be registered (duplicate name, no hooks)."""


class Registry:
    def __init__(self) -> None:
        self._plugins: dict[str, Builtin] = {}

    def register(self, plugin: Builtin) -> Builtin:
        """Add a built-in; refuse a name already taken or a definition without any hook."""
        if plugin.name in self._plugins:
            raise RegistryError(f"plugin '{plugin.name}' is already registered")
        if not plugin.hooks or not plugin.hooks <= set(HOOK_METHODS):
            raise RegistryError(
                f"plugin '{plugin.name}' must declare hooks among {', '.join(HOOK_METHODS)}; "
                f"got {sorted(plugin.hooks) or 'none'}"
            )
        self._plugins[plugin.name] = plugin
        return plugin

    def get(self, name: str) -> Builtin | None:
        return self._plugins.get(name)

    def names(self) -> list[str]:
        return sorted(self._plugins)

    def __contains__(self, name: object) -> bool:
        return name in self._plugins

    def __iter__(self) -> Iterator[Builtin]:
        return iter(sorted(self._plugins.values(), key=lambda b: b.name))


@cache
def default_registry() -> Registry:
    """The built-ins shipped with modelserving."""
    from modelserving.plugins.builtins import BUILTINS

    registry = Registry()
    for plugin in BUILTINS:
        registry.register(plugin)
    return registry
