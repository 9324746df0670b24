"""The error tree, grouped by what the caller should do about it.

Raised by every layer; the CLI prints them and the controller turns them into Events and
conditions. Each message names the object, the field or plugin, and the cause.
"""

from __future__ import annotations

import enum
from collections.abc import Sequence
from dataclasses import dataclass

from modelserving.api.text import escape_controls


class ModelServingError(Exception):
    """Base of every error this package raises on purpose."""


@dataclass(frozen=True)
class FieldError:
    """One problem at one field path, e.g. ``spec.template.roles[0].name``."""

    path: str
    message: str

    def __str__(self) -> str:
        return f"{self.path}: {self.message}" if self.path else self.message


class InvalidManifest(ModelServingError):
    """An object that cannot be accepted as written (schema or semantic rule broken)."""

    def __init__(self, obj: str, errors: Sequence[FieldError]) -> None:
        self.obj = obj
        self.errors = tuple(errors)
        lines = "\n".join(f"  - {e}" for e in self.errors)
        super().__init__(f"{obj} is invalid:\n{lines}")


class FailureClass(enum.StrEnum):
    """The one class every failed plugin call is reported with (ABI v1 contract)."""

    INVALID_MODULE = "InvalidModule"
    FUEL_EXHAUSTED = "FuelExhausted"
    TIMEOUT = "Timeout"
    MEMORY_LIMIT = "MemoryLimit"
    TRAP = "Trap"
    INVALID_RESPONSE = "InvalidResponse"
    FORBIDDEN_PATCH = "ForbiddenPatch"
    FORBIDDEN_OBJECT = "ForbiddenObject"
    PLUGIN_ERROR = "PluginError"


class PluginConfigError(ModelServingError):
    """A plugin's spec, config or module is wrong; no Pod was touched. Fix the ModelServing.

    ``failure_class`` is set when a WebAssembly module was refused at load (InvalidModule) or its
    ValidateConfig call failed (PluginError for a refused config, or the class of the failure).
    """

    def __init__(
        self,
        plugin: str,
        index: int,
        errors: Sequence[FieldError],
        failure_class: FailureClass | None = None,
    ) -> None:
        self.plugin = plugin
        self.index = index
        self.errors = tuple(errors)
        self.failure_class = failure_class
        where = f"spec.plugins[{index}] (plugin '{plugin}')"
        lines = "; ".join(str(e) for e in self.errors)
        super().__init__(f"{where}: {lines}")


class PluginFailure(ModelServingError):
    """A plugin call failed; ``failure_class`` says how. The failure policy decides what follows.

    ``message`` may quote the plugin (a guest's error text, a value of its patch), so its
    control characters are escaped: the failure is one line in logs, events and the CLI.
    """

    def __init__(
        self,
        failure_class: FailureClass,
        plugin: str,
        hook: str,
        message: str,
        pod: str | None = None,
        group: str | None = None,
    ) -> None:
        self.failure_class = failure_class
        self.plugin = plugin
        self.hook = hook
        self.pod = pod
        self.group = group
        self.detail = message = escape_controls(message)
        on = f" on Pod {pod}" if pod else f" on ServingGroup {group}" if group else ""
        super().__init__(f"{failure_class}: plugin '{plugin}' {hook}{on}: {message}")


class PatchRejected(ModelServingError):
    """A patch broke the operator's patch policy or could not be applied (no plugin context yet).

    The chain wraps it into a ``PluginFailure`` of class ``ForbiddenPatch``.
    """

    def __init__(self, path: str, reason: str) -> None:
        self.path = path
        self.reason = reason
        super().__init__(f"{path}: {reason}" if path else reason)


class ObjectRejected(ModelServingError):
    """An owned object broke the operator's object policy (no plugin context yet).

    The chain wraps it into a ``PluginFailure`` of class ``ForbiddenObject``.
    """
