"""The plugin as the chain calls it: one ``call(hook, request) -> Reply`` for every runtime.

A ``PluginAdapter`` says which hooks it serves, its runtime, whether it needs a private copy of
the Pod (a native plugin is handed Python objects it could keep or change; a WebAssembly
plugin only serializes them) and, for a module, its digest. ``Reply`` is what one call came
back with, as a value: the patch, the observations or the owned objects, what the sandbox
recorded (fuel, time,
the guest's log lines), or why it failed (a failure class and a message; the chain's step,
``modelserving.chain.step.invoke``, names the plugin, the hook and the Pod). ``NativePlugin``
adapts a built-in's instance; ``modelserving.plugins.wasm.WasmPlugin`` a compiled module.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any, Protocol

from pydantic import BaseModel, ValidationError

from modelserving.api.errors import FailureClass, PluginFailure
from modelserving.api.group import GroupRequest, objects_shape_problem
from modelserving.api.hook import SPEC, Hook, HookRequest
from modelserving.api.validation import pydantic_errors
from modelserving.plugins.base import HookError, Observation
from modelserving.sandbox import CallResult, LogRecord


@dataclass(slots=True)
class Reply:
    """One call's result: ``patch`` (a patching hook's raw operations, checked by the chain),
    ``observations``, or ``objects`` (a ServingGroup hook's owned objects, their shape checked,
    the object policy still to apply); ``call`` what the sandbox recorded of a WebAssembly
    call; ``logs`` the guest's lines as the sandbox kept them (also of a failed call);
    ``failure`` and ``message`` when the call failed.

    A value: nothing changes a Reply once made (``dataclasses.replace`` makes another). It is
    not a frozen dataclass because one is made for every plugin call and a frozen one takes
    four times as long to make (1.37 against 0.35 us, seven fields)."""

    patch: Any = None
    observations: Sequence[Observation] = ()
    objects: Sequence[dict[str, Any]] = ()
    call: CallResult | None = None
    logs: Sequence[LogRecord] = ()
    failure: FailureClass | None = None
    message: str = ""

    @property
    def fuel(self) -> int | None:
        return self.call.fuel_consumed if self.call is not None else None

    def failure_of(
        self, plugin: str, hook: Hook, pod: str | None, group: str | None = None
    ) -> PluginFailure:
        """The failure naming plugin, hook and Pod (or ServingGroup): the one place a failed
        call becomes a ``PluginFailure``."""
        assert self.failure is not None
        return PluginFailure(self.failure, plugin, hook, self.message, pod or None, group or None)


def failed(failure: FailureClass, message: str, logs: Sequence[LogRecord] = ()) -> Reply:
    return Reply(failure=failure, message=message, logs=logs)


Request = HookRequest | GroupRequest
"""What a hook is called with: a Pod's context, or a ServingGroup's (the hooks whose target is
"group")."""


class PluginAdapter(Protocol):
    """A resolved plugin of any runtime, as the chain's step calls it."""

    @property
    def name(self) -> str: ...

    @property
    def runtime(self) -> str: ...

    @property
    def copies_pod(self) -> bool:
        """Whether the plugin must be given its own copy of the Pod (it could change the one it
        is given)."""
        ...

    @property
    def copies_values(self) -> bool:
        """Whether its patch values are copied before they join the Pod (the plugin may hold
        them: a native plugin's own objects; a WebAssembly reply is freshly decoded)."""
        ...

    @property
    def hooks(self) -> frozenset[Hook]: ...

    @property
    def digest(self) -> str | None: ...

    def call(self, hook: Hook, request: Request) -> Reply: ...


class NativePlugin:
    """A built-in's instance: its methods named by the hook table, its config model as its
    ValidateConfig. Exceptions propagate (the step turns them into PluginError)."""

    runtime = "Native"
    copies_values = True
    digest = None

    def __init__(
        self,
        name: str,
        instance: object,
        hooks: frozenset[Hook],
        config_model: type[BaseModel],
        config: Any,
        copies_pod: bool = True,
    ) -> None:
        self.name = name
        self.copies_pod = copies_pod
        self.instance = instance
        self.hooks = hooks
        self._config_model = config_model
        self._config = config

    def call(self, hook: Hook, request: Request) -> Reply:
        spec = SPEC[hook]
        if not spec.method:  # ValidateConfig: the config model
            try:
                self._config_model.model_validate(self._config)
            except ValidationError as exc:
                errors = pydantic_errors(exc)
                raise HookError(
                    "; ".join(
                        f"config.{e.path}: {e.message}" if e.path else e.message for e in errors
                    )
                ) from None
            return Reply()
        returned = getattr(self.instance, spec.method)(request)
        if spec.patches:
            return Reply(patch=returned)
        if spec.per_group:
            return Reply(objects=owned_objects(spec.method, returned))
        return Reply(observations=observations(spec.method, returned))


def observations(method: str, returned: Any) -> list[Observation]:
    """What an observing hook returned, as observations: None is none; anything but a list or
    tuple of ``Observation`` is a HookError (a plugin bug)."""
    if returned is None:
        return []
    if isinstance(returned, list | tuple) and all(isinstance(o, Observation) for o in returned):
        return list(returned)
    raise HookError(
        f"{method} returned {type(returned).__name__}, not None or a sequence of Observation"
    )


def owned_objects(method: str, returned: Any) -> list[dict[str, Any]]:
    """What a ServingGroup hook returned, as owned objects: None is none; anything but a list
    or tuple of objects of the ABI's shape (v3, 15.4) is a HookError (a plugin bug)."""
    if returned is None:
        return []
    if not isinstance(returned, list | tuple):
        raise HookError(
            f"{method} returned {type(returned).__name__}, not None or a list of objects"
        )
    problem = objects_shape_problem(list(returned))
    if problem is not None:
        raise HookError(f"{method} returned {problem}")
    return list(returned)
