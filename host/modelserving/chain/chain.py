"""Builds a ModelServing's plugin chain once (validating every plugin up front) and runs it.

``build_chain`` resolves each PluginSpec to an implementation and validates its config, so a bad
plugin list fails before any Pod is made. ``Chain.on_pod_create`` runs the in-scope plugins in
list order, each on the Pod the previous one produced, validates every patch with the patch
policy, applies the failure policy and times each call. ``Chain.on_pod_ready`` runs the in-scope
OnPodReady hooks and hands what they measured (``Observation``s) to the observer with each
call's record. ``ChainCache`` reuses a chain for as long as the ModelServing's generation and
plugin list stay the same.
"""

from __future__ import annotations

import json
import threading
import time
from collections import OrderedDict
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any

from pydantic import ValidationError

from modelserving.api.errors import (
    FailureClass,
    FieldError,
    PatchRejected,
    PluginConfigError,
    PluginFailure,
)
from modelserving.api.hook import Hook, HookRequest, PatchOperation
from modelserving.api.jsondata import find_wide_int, json_copy, wide_int_reason
from modelserving.api.labels import PLUGINS_APPLIED_ANNOTATION
from modelserving.api.modelserving import ModelServing, PluginSpec
from modelserving.api.validation import format_loc, pydantic_errors
from modelserving.chain.policy import PatchValidator
from modelserving.plugins.artifacts import ArtifactMissing, builtin_wasm
from modelserving.plugins.base import HOOK_METHODS, Builtin, HookError, Observation
from modelserving.plugins.modules import ModuleUnavailable
from modelserving.plugins.registry import Registry, default_registry
from modelserving.plugins.wasm import WasmPlugin
from modelserving.sandbox import Sandbox, SandboxError, default_sandbox
from modelserving.workload.plan import DesiredPod

HookCall = Callable[[HookRequest], Any]


@dataclass(frozen=True)
class ChainEntry:
    """One resolved plugin of the chain: its hooks as callables (None when not implemented).

    The same instance serves every Pod of the ModelServing generation, so plugins keep no
    per-Pod state.
    """

    index: int
    spec: PluginSpec
    runtime: str
    on_create: HookCall | None
    on_ready: HookCall | None
    digest: str | None = None
    plugin: object | None = None

    @property
    def name(self) -> str:
        return self.spec.name


@dataclass
class PluginOutcome:
    """What one plugin did to one Pod: its validated patch, or why it was skipped or failed."""

    plugin: str
    index: int
    runtime: str
    patch: list[PatchOperation] = field(default_factory=list)
    duration_us: float = 0.0
    failure: PluginFailure | None = None

    @property
    def applied(self) -> bool:
        return self.failure is None

    def explain(self) -> dict[str, Any]:
        out: dict[str, Any] = {"plugin": self.plugin, "index": self.index, "runtime": self.runtime}
        if self.failure is None:
            out["patch"] = self.patch
        else:
            out["ignored"] = str(self.failure)
        return out


@dataclass
class CreateResult:
    """The Pod after the chain, and each in-scope plugin's outcome in order."""

    pod: dict[str, Any]
    outcomes: list[PluginOutcome]

    @property
    def ignored(self) -> list[PluginOutcome]:
        return [o for o in self.outcomes if o.failure is not None]


@dataclass(frozen=True, slots=True)
class CallRecord:
    """One hook call as metrics see it: ``result`` is "ok" or the failure class; ``role`` is
    the Pod's role (from the request); ``observations`` what a successful OnPodReady call
    measured; ``namespace`` the ModelServing's."""

    plugin: str
    hook: str
    runtime: str
    result: str
    seconds: float
    fuel: int | None = None
    role: str = ""
    observations: tuple[Observation, ...] = ()
    namespace: str = ""


CallObserver = Callable[[CallRecord], None]


def _fuel(entry: ChainEntry) -> int | None:
    """The fuel of the entry's last successful WebAssembly call (the chain runs one call at a
    time per entry)."""
    last = getattr(entry.plugin, "last", None)
    call = getattr(last, "call", None)
    fuel = getattr(call, "fuel_consumed", None)
    return fuel if isinstance(fuel, int) else None


class Chain:
    """The plugins of one ModelServing generation, ready to run on its Pods.

    ``observer``, when set, is told about every hook call (the controller's metrics).
    """

    def __init__(self, ms: ModelServing, entries: Sequence[ChainEntry], validator: PatchValidator):
        self.model_serving = ms
        self.entries = tuple(entries)
        self.validator = validator
        self.observer: CallObserver | None = None
        self.announced = False
        """Set by the controller once it has reported this chain (a new chain starts False)."""

    def _observe(
        self,
        entry: ChainEntry,
        hook: Hook,
        failure: PluginFailure | None,
        seconds: float,
        role: str = "",
        observations: tuple[Observation, ...] = (),
    ) -> None:
        if self.observer is None:
            return
        result = "ok" if failure is None else str(failure.failure_class)
        fuel = _fuel(entry) if failure is None and entry.runtime == "Wasm" else None
        self.observer(
            CallRecord(
                entry.name,
                str(hook),
                entry.runtime,
                result,
                seconds,
                fuel,
                role,
                observations,
                self.model_serving.namespace,
            )
        )

    def __len__(self) -> int:
        return len(self.entries)

    def request(
        self,
        hook: Hook,
        desired: DesiredPod,
        pod: dict[str, Any],
        ms: ModelServing | None = None,
    ) -> HookRequest:
        return HookRequest(
            hook=hook,
            model_serving=ms or self.model_serving,
            serving_group=desired.group,
            role_name=desired.role,
            role_id=desired.role_id,
            is_entry=desired.is_entry,
            pod=pod,
        )

    def on_pod_create(self, desired: DesiredPod, ms: ModelServing | None = None) -> CreateResult:
        """Run each in-scope OnPodCreate; raise PluginFailure when a Fail-policy plugin fails.

        ``ms`` is the ModelServing as the caller sees it now (its labels and annotations may have
        changed without a new generation); by default the one the chain was built from.
        """
        pod = desired.pod
        outcomes: list[PluginOutcome] = []
        for entry in self.entries:
            if not entry.spec.applies_to(desired.role, desired.is_entry):
                continue
            if entry.on_create is None:
                continue
            outcome = PluginOutcome(entry.name, entry.index, entry.runtime)
            start = time.perf_counter()
            try:
                # A WebAssembly plugin only serializes the Pod, so it needs no private copy.
                given = pod if entry.runtime == "Wasm" else json_copy(pod)
                request = self.request(Hook.ON_POD_CREATE, desired, given, ms)
                raw = _call(entry, entry.on_create, request, desired.name)
                pod, outcome.patch = self._validate(entry, pod, raw, desired.name)
            except PluginFailure as failure:
                outcome.failure = failure
                if entry.spec.failure_policy == "Fail":
                    raise
            finally:
                outcome.duration_us = (time.perf_counter() - start) * 1e6
                seconds = outcome.duration_us / 1e6
                self._observe(entry, Hook.ON_POD_CREATE, outcome.failure, seconds, desired.role)
            outcomes.append(outcome)
        if pod is desired.pod:
            pod = json_copy(pod)
        pod = record_applied(pod, [e for e in self.entries if _ran(e, outcomes)])
        return CreateResult(pod=pod, outcomes=outcomes)

    def _validate(
        self, entry: ChainEntry, pod: dict[str, Any], raw: Any, pod_name: str
    ) -> tuple[dict[str, Any], list[PatchOperation]]:
        """The patched Pod and the validated operations; ForbiddenPatch on any problem."""
        try:
            # Operations decoded from a WebAssembly response belong to no one: no copy needed.
            fresh = entry.runtime == "Wasm"
            return self.validator.apply_patch(pod, [] if raw is None else raw, not fresh)
        except PatchRejected as exc:
            message = str(exc)
        except Exception as exc:  # a validator bug must not escape the failure policy
            message = f"the patch could not be validated: {type(exc).__name__}: {exc}"
        raise PluginFailure(
            FailureClass.FORBIDDEN_PATCH, entry.name, Hook.ON_POD_CREATE, message, pod_name
        )

    def on_pod_ready(
        self, desired: DesiredPod, pod: dict[str, Any], ms: ModelServing | None = None
    ) -> list[PluginFailure]:
        """Run OnPodReady of every in-scope plugin; failures are returned, never raised.

        What each successful call returned (its ``Observation``s) goes to the observer with the
        call's record, attributed to the plugin and the Pod's role.
        """
        failures = []
        for entry in self.entries:
            if entry.on_ready is None or not entry.spec.applies_to(desired.role, desired.is_entry):
                continue
            start = time.perf_counter()
            failed: PluginFailure | None = None
            observations: tuple[Observation, ...] = ()
            try:
                request = self.request(Hook.ON_POD_READY, desired, json_copy(pod), ms)
                returned = _call(entry, entry.on_ready, request, desired.name)
                observations = _observations(entry, returned, desired.name)
            except PluginFailure as failure:
                failed = failure
                failures.append(failure)
            seconds = time.perf_counter() - start
            self._observe(entry, Hook.ON_POD_READY, failed, seconds, desired.role, observations)
        return failures

    def has_ready_hooks(self, desired: DesiredPod) -> bool:
        """Whether any OnPodReady hook is in scope for this Pod."""
        return any(
            e.on_ready is not None and e.spec.applies_to(desired.role, desired.is_entry)
            for e in self.entries
        )


def _ran(entry: ChainEntry, outcomes: list[PluginOutcome]) -> bool:
    return any(o.index == entry.index and o.applied for o in outcomes)


def _call(entry: ChainEntry, hook: HookCall, request: HookRequest, pod_name: str) -> Any:
    """Call one hook; any error becomes a PluginFailure naming plugin, hook and Pod."""
    try:
        return hook(request)
    except PluginFailure:
        raise
    except HookError as exc:
        message = str(exc)
    except Exception as exc:
        message = f"{type(exc).__name__}: {exc}"
    raise PluginFailure(FailureClass.PLUGIN_ERROR, entry.name, request.hook, message, pod_name)


def _observations(entry: ChainEntry, returned: Any, pod_name: str) -> tuple[Observation, ...]:
    """What an OnPodReady hook returned, as observations: None is none; anything but a list or
    tuple of ``Observation`` is a PluginFailure (a plugin bug)."""
    if returned is None:
        return ()
    if isinstance(returned, list | tuple) and all(isinstance(o, Observation) for o in returned):
        return tuple(returned)
    message = (
        f"on_pod_ready returned {type(returned).__name__}, not None or a sequence of Observation"
    )
    raise PluginFailure(FailureClass.PLUGIN_ERROR, entry.name, Hook.ON_POD_READY, message, pod_name)


def record_applied(pod: dict[str, Any], entries: Sequence[ChainEntry]) -> dict[str, Any]:
    """The Pod annotated with the plugins applied to it: those whose OnPodCreate succeeded
    (name, runtime and, for WebAssembly, the module digest). Copy-on-write: ``pod`` itself and
    everything it shares with earlier Pods stay unchanged."""
    if not entries:
        return pod
    applied = []
    for e in entries:
        item = {"name": e.name, "runtime": e.runtime}
        if e.digest:
            item["sha256"] = e.digest
        applied.append(item)
    metadata = dict(pod.get("metadata") or {})
    annotations = dict(metadata.get("annotations") or {})
    annotations[PLUGINS_APPLIED_ANNOTATION] = json.dumps(applied, separators=(",", ":"))
    metadata["annotations"] = annotations
    return {**pod, "metadata": metadata}


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
    raw = spec.config if spec.config is not None else {}
    if not isinstance(raw, dict):
        raise PluginConfigError(
            spec.name, index, [FieldError("config", f"must be a map, not {type(raw).__name__}")]
        )
    try:
        config = builtin.config_model.model_validate(raw)
    except ValidationError as exc:
        errors = [
            FieldError(f"config.{e.path}" if e.path else "config", e.message)
            for e in pydantic_errors(exc)
        ]
        raise PluginConfigError(spec.name, index, errors) from None
    if spec.effective_runtime == "Wasm":
        return _wasm_entry(index, spec, _builtin_module(index, spec, builtin), build)
    instance = builtin.factory(spec.name, config)
    hooks: dict[str, HookCall | None] = {}
    for hook in HOOK_METHODS:
        method = getattr(instance, hook, None) if hook in builtin.hooks else None
        if hook in builtin.hooks and not callable(method):
            raise PluginConfigError(
                spec.name,
                index,
                [FieldError("name", f"the built-in declares {hook} but does not implement it")],
            )
        hooks[hook] = method
    return ChainEntry(
        index=index,
        spec=spec,
        runtime="Native",
        on_create=hooks["on_pod_create"],
        on_ready=hooks["on_pod_ready"],
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
    try:
        compiled = sandbox.load(data, pinned)
    except SandboxError as exc:
        raise PluginConfigError(
            spec.name, index, [FieldError("module", str(exc))], exc.failure_class
        ) from None
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
    hooks = plugin.hooks
    return ChainEntry(
        index=index,
        spec=spec,
        runtime="Wasm",
        on_create=plugin.on_pod_create if Hook.ON_POD_CREATE in hooks else None,
        on_ready=plugin.on_pod_ready if Hook.ON_POD_READY in hooks else None,
        digest=plugin.digest,
        plugin=plugin,
    )


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


def chain_key(ms: ModelServing) -> tuple[str, str, str, int | None, str]:
    """What a chain depends on: the object, its generation and its plugin list."""
    plugins = json.dumps([p.to_api() for p in ms.spec.plugins or []], sort_keys=True)
    return (ms.namespace, ms.name, ms.metadata.uid or "", ms.metadata.generation, plugins)


class ChainCache:
    """Chains by ``chain_key``, least recently used evicted past ``size``."""

    def __init__(
        self,
        registry: Registry | None = None,
        validator: PatchValidator | None = None,
        size: int = 256,
        modules: ModuleResolver | None = None,
        sandbox: Sandbox | None = None,
    ) -> None:
        self._registry = registry
        self._modules = modules
        self._sandbox = sandbox
        self._validator = validator or PatchValidator()
        self._size = size
        self._chains: OrderedDict[tuple[str | int | None, ...], Chain] = OrderedDict()
        self.builds = 0
        self._lock = threading.Lock()

    def get(
        self,
        ms: ModelServing,
        extra: tuple[str, ...] = (),
        modules: ModuleResolver | None = None,
    ) -> Chain:
        """The chain of ``ms``, built when missing. ``extra`` joins the key (the controller passes
        the resourceVersions of module ConfigMaps); ``modules`` overrides the resolver."""
        key = (*chain_key(ms), *extra)
        with self._lock:
            chain = self._chains.get(key)
            if chain is not None:
                self._chains.move_to_end(key)
                return chain
        # Built outside the lock: a cold compile must not hold up other ModelServings.
        chain = build_chain(
            ms, self._registry, self._validator, modules or self._modules, self._sandbox
        )
        with self._lock:
            self.builds += 1
            self._chains[key] = chain
            while len(self._chains) > self._size:
                self._chains.popitem(last=False)
        return chain

    def forget(self, namespace: str, name: str) -> None:
        """Drop every chain of one ModelServing (it was deleted)."""
        with self._lock:
            for key in [k for k in self._chains if k[0] == namespace and k[1] == name]:
                del self._chains[key]
