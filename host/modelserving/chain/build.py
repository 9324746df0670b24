"""Builds a ModelServing's plugin chain once, validating every plugin up front.

``build_chain`` resolves each PluginSpec to an adapter (``NativePlugin`` for a built-in,
``WasmPlugin`` for a module: a ConfigMap's or a built-in's compiled twin) and validates its
config (a built-in's config model, a module's ValidateConfig), so a bad plugin list fails with
``PluginConfigError`` before any Pod is made.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from pydantic import ValidationError

from modelserving.api.errors import FailureClass, FieldError, PluginConfigError, PluginFailure
from modelserving.api.jsondata import find_wide_int, wide_int_reason
from modelserving.api.modelserving import ModelServing, PluginSpec
from modelserving.api.validation import format_loc, pydantic_errors
from modelserving.chain.policy import PatchValidator
from modelserving.chain.run import Chain
from modelserving.chain.step import ChainEntry
from modelserving.plugins.adapter import NativePlugin
from modelserving.plugins.artifacts import ArtifactMissing, builtin_wasm
from modelserving.plugins.base import NATIVE_METHODS, Builtin
from modelserving.plugins.exports import default_sandbox
from modelserving.plugins.modules import ModuleUnavailable
from modelserving.plugins.registry import Registry, default_registry
from modelserving.plugins.wasm import WasmPlugin
from modelserving.sandbox import Sandbox, SandboxError

ModuleResolver = Callable[[PluginSpec], bytes]
"""Fetches the module bytes of a ``type: Wasm`` plugin (the controller reads the ConfigMap);
raises ModuleUnavailable naming what is missing."""


@dataclass(frozen=True)
class _Build:
    """What resolving a plugin list needs besides the specs."""

    ms: ModelServing
    registry: Registry
    modules: ModuleResolver | None
    sandbox: Sandbox | None

    def wasm_sandbox(self) -> Sandbox:
        return self.sandbox or default_sandbox()


def _resolve(index: int, spec: PluginSpec, build: _Build) -> ChainEntry:
    wide = find_wide_int(spec.config)
    if wide is not None:  # a request could not carry it (msgpack), whichever runtime runs
        path, value = wide
        field_path = format_loc(("config", *path))
        raise PluginConfigError(spec.name, index, [FieldError(field_path, wide_int_reason(value))])
    if spec.type == "Wasm":
        return _wasm_entry(index, spec, _fetch_module(index, spec, build), build)
    registry = build.registry
    builtin = registry.get(spec.name)
    if builtin is None:
        known = ", ".join(registry.names()) or "none"
        raise PluginConfigError(
            spec.name,
            index,
            [FieldError("name", f"no built-in plugin has this name (known: {known})")],
        )
    raw, config = _native_config(index, spec.name, builtin, spec.config)
    if spec.effective_runtime == "Wasm":
        return _wasm_entry(index, spec, _builtin_module(index, spec, builtin), build)
    return ChainEntry(index, spec, _native(index, spec.name, builtin, raw, config))


def native_plugin(index: int, name: str, builtin: Builtin, config: Any) -> NativePlugin:
    """The adapter of ``builtin`` named ``name`` with ``config`` (checked by its config model);
    PluginConfigError naming each refused field (``index``: its place in spec.plugins)."""
    raw, model = _native_config(index, name, builtin, config)
    return _native(index, name, builtin, raw, model)


def _native_config(index: int, name: str, builtin: Builtin, config: Any) -> tuple[Any, Any]:
    """The raw config (a map) and the built-in's config model of it; PluginConfigError."""
    raw = config if config is not None else {}
    if not isinstance(raw, dict):
        raise PluginConfigError(
            name, index, [FieldError("config", f"must be a map, not {type(raw).__name__}")]
        )
    try:
        return raw, builtin.config_model.model_validate(raw)
    except ValidationError as exc:
        errors = [
            FieldError(f"config.{e.path}" if e.path else "config", e.message)
            for e in pydantic_errors(exc)
        ]
        raise PluginConfigError(name, index, errors) from None


def _native(index: int, name: str, builtin: Builtin, raw: Any, config: Any) -> NativePlugin:
    instance = builtin.factory(name, config)
    hooks = [hook for hook, method in NATIVE_METHODS.items() if method in builtin.hooks]
    for hook in hooks:
        if not callable(getattr(instance, NATIVE_METHODS[hook], None)):
            message = f"the built-in declares {NATIVE_METHODS[hook]} but does not implement it"
            raise PluginConfigError(name, index, [FieldError("name", message)])
    return NativePlugin(
        name,
        instance,
        frozenset(hooks),
        builtin.config_model,
        raw,
        copies_pod=not builtin.reads_pod_only,
    )


def _fetch_module(index: int, spec: PluginSpec, build: _Build) -> bytes:
    assert spec.module is not None  # the API model requires it for type Wasm
    ref = spec.module.config_map_ref
    where = f"ConfigMap {build.ms.namespace}/{ref.name} key {ref.key}"
    if build.modules is None:
        reason = f"no module source is configured to read {where}"
    else:
        try:
            return build.modules(spec)
        except ModuleUnavailable as exc:
            reason = str(exc)
    raise PluginConfigError(
        spec.name, index, [FieldError("module.configMapRef", reason)], FailureClass.INVALID_MODULE
    )


def _builtin_module(index: int, spec: PluginSpec, builtin: Builtin) -> bytes:
    if builtin.wasm_module is None:
        reason = f"the built-in '{builtin.name}' has no WebAssembly build; use runtime Native"
    else:
        try:
            return builtin_wasm(builtin.wasm_module)
        except (ArtifactMissing, OSError) as exc:
            reason = str(exc)
    raise PluginConfigError(
        spec.name, index, [FieldError("runtime", reason)], FailureClass.INVALID_MODULE
    )


def _wasm_entry(index: int, spec: PluginSpec, data: bytes, build: _Build) -> ChainEntry:
    """Load the module (checked, compiled once per digest) and run its ValidateConfig."""
    sandbox = build.wasm_sandbox()
    pinned = spec.module.sha256 if spec.module is not None else None
    refusal: tuple[str, FailureClass] | None = None
    try:
        compiled = sandbox.load(data, pinned)
    except SandboxError as exc:
        refusal = str(exc), exc.failure_class
    if refusal is not None:  # raised here, it has no context: the refusal's traceback holds
        # the load's frames, and they the module's bytes, as long as the error is kept
        raise PluginConfigError(spec.name, index, [FieldError("module", refusal[0])], refusal[1])
    requested = spec.limits
    limits = sandbox.limits(
        requested.fuel if requested else None,
        requested.memory_mib if requested else None,
        requested.timeout_ms if requested else None,
    )
    plugin = WasmPlugin(spec.name, spec.config, compiled, sandbox, limits, build.ms)
    try:
        plugin.validate_config()
    except PluginFailure as failure:
        cls = failure.failure_class
        message = failure.detail if cls is FailureClass.PLUGIN_ERROR else f"{cls}: {failure.detail}"
        raise PluginConfigError(spec.name, index, [FieldError("config", message)], cls) from None
    return ChainEntry(index=index, spec=spec, plugin=plugin)


def build_chain(
    ms: ModelServing,
    registry: Registry | None = None,
    validator: PatchValidator | None = None,
    modules: ModuleResolver | None = None,
    sandbox: Sandbox | None = None,
) -> Chain:
    """Resolve and validate each plugin of ``ms``; raise PluginConfigError on the first bad one.

    ``modules`` fetches the bytes of ``type: Wasm`` plugins; ``sandbox`` runs WebAssembly
    plugins (by default the process-wide one).
    """
    build = _Build(ms, registry or default_registry(), modules, sandbox)
    entries = [_resolve(i, spec, build) for i, spec in enumerate(ms.spec.plugins or [])]
    return Chain(ms, entries, validator or PatchValidator())
