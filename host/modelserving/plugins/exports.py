"""Which export serves which hook, and the sandbox the plugins run in.

The sandbox knows exports, not hooks. This module turns the hook table (``api.hook.HOOK_SPECS``)
into what the sandbox is given, ``ENTRYPOINTS`` (each hook's export in a core and in an Extism
module; a module needs one of the hooks that do work, and one added in a later ABI version only
in a module of that version, ``abi.versions.since``), and maps back: ``export_name`` is the
export that serves a hook in a module of a flavour, ``module_hooks`` the hooks a loaded module
serves.
``plugin_sandbox`` makes a sandbox with these entry points; ``default_sandbox`` is the
process-wide one the chain, the CLI and the controller share.
"""

from __future__ import annotations

import threading

from modelserving.abi.versions import since
from modelserving.api.hook import HOOK_SPECS, SPEC, Hook
from modelserving.plugins.artifacts import builtin_digests
from modelserving.sandbox import FLAVOUR_EXTISM, Entrypoint, ModuleInfo, Sandbox, SandboxSettings

ENTRYPOINTS: tuple[Entrypoint, ...] = tuple(
    Entrypoint(spec.export, spec.extism, required=spec.target != "plugin", since=since(spec.hook))
    for spec in HOOK_SPECS
)
"""The functions the host may call, one per hook, in the order of the hook table."""

HOOK_EXPORTS: dict[Hook, str] = {spec.hook: spec.export for spec in HOOK_SPECS}
"""Each hook's export in a core module."""

EXTISM_FUNCS: dict[Hook, str] = {spec.hook: spec.extism for spec in HOOK_SPECS}
"""Each hook's function in an Extism module."""


def export_name(hook: Hook, flavour: str) -> str:
    """The export that serves ``hook`` in a module of ``flavour``."""
    spec = SPEC[hook]
    return spec.extism if flavour == FLAVOUR_EXTISM else spec.export


def module_hooks(info: ModuleInfo) -> tuple[Hook, ...]:
    """The hooks a loaded module serves, in the order of the hook table."""
    return tuple(
        spec.hook for spec in HOOK_SPECS if export_name(spec.hook, info.flavour) in info.entrypoints
    )


def plugin_sandbox(settings: SandboxSettings | None = None) -> Sandbox:
    """A sandbox that runs plugin modules (its entry points are the hooks' exports); the
    built-ins that ship with the controller compile in its own process."""
    return Sandbox(settings, ENTRYPOINTS, trusted=builtin_digests())


_default: Sandbox | None = None
_default_lock = threading.Lock()


def default_sandbox() -> Sandbox:
    """The process-wide sandbox (created on first use, with the default settings)."""
    global _default
    with _default_lock:
        if _default is None:
            _default = plugin_sandbox()
        return _default


def set_default_sandbox(sandbox: Sandbox | None) -> None:
    """Replace the process-wide sandbox (the controller's settings, tests)."""
    global _default
    with _default_lock:
        _default = sandbox
