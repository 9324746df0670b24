"""The plugin contract: hook protocols, config models and the definition a built-in registers.

A plugin is any object with a ``name`` and at least one hook: ``on_pod_create`` returns JSON Patch
operations for the Pod (it never changes the Pod it is given), ``on_pod_ready`` observes and may
return ``Observation``s (named measurements in seconds, which the controller exports as metrics).
Raise ``HookError`` to fail a call with a message; the chain applies the plugin's failure policy.
"""

from __future__ import annotations

import math
import re
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Annotated, Any, Protocol, runtime_checkable

from pydantic import AfterValidator

from modelserving.api._base import ApiModel
from modelserving.api.hook import HOOK_SPECS, Hook, HookRequest, PatchOperation
from modelserving.api.names import is_quantity


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


_OBSERVATION_NAME = re.compile(r"[a-z][a-z0-9_]{0,62}", re.ASCII)
OBSERVATION_SUFFIX = "_seconds"
MAX_OBSERVATION_SECONDS = 7 * 24 * 3600
"""The largest observation taken: a week (no readiness or step takes longer; a bigger value
would only ruin the histogram's sum)."""


def observation_name_problem(name: str) -> str | None:
    """Why ``name`` cannot name an observation (None when it can): it must match
    ``[a-z][a-z0-9_]{0,62}`` and end in ``_seconds``."""
    if not _OBSERVATION_NAME.fullmatch(name):
        return f"the name '{name[:70]}' does not match [a-z][a-z0-9_]{{0,62}}"
    if not name.endswith(OBSERVATION_SUFFIX):
        return f"the name '{name}' does not end in {OBSERVATION_SUFFIX}"
    return None


@dataclass(frozen=True, slots=True)
class Observation:
    """One measurement an OnPodReady hook reports: ``name`` (ends in ``_seconds``) and a
    non-negative, finite number of seconds. ValueError when either is invalid."""

    name: str
    seconds: float

    def __post_init__(self) -> None:
        if not isinstance(self.name, str):
            raise ValueError(
                f"invalid observation: the name must be a str, not {type(self.name).__name__}"
            )
        problem = observation_name_problem(self.name)
        if problem is not None:
            raise ValueError(f"invalid observation: {problem}")
        seconds = self.seconds
        if isinstance(seconds, bool) or not isinstance(seconds, int | float):
            raise ValueError(
                f"invalid observation {self.name}: seconds must be a number, "
                f"not {type(seconds).__name__}"
            )
        if not math.isfinite(seconds) or not 0 <= seconds <= MAX_OBSERVATION_SECONDS:
            raise ValueError(
                f"invalid observation {self.name}: seconds must be between 0 and "
                f"{MAX_OBSERVATION_SECONDS} (7 days), not {seconds}"
            )


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
