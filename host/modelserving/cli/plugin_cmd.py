"""``modelserving plugin``: run, inspect, benchmark, package and create plugins offline.

The subcommands' implementations; their arguments, descriptions and exit codes are documented in
``cli.plugin_args``, which imports this module when a subcommand runs. Exit codes: 0 success;
``EXIT_FAILED`` (1) the plugin failed, or pack's module does not fit, or the request holds a value
no request can carry; ``EXIT_USAGE`` (2) usage errors.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import logging
import statistics
import sys
import time
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from modelserving.api.errors import (
    FailureClass,
    PluginConfigError,
    PluginFailure,
)
from modelserving.api.group import GroupRequest
from modelserving.api.hook import SPEC, Hook, HookRequest
from modelserving.api.modelserving import PluginSpec
from modelserving.api.names import is_dns1123_label
from modelserving.chain import ChainEntry, PatchValidator, invoke
from modelserving.chain.build import native_plugin
from modelserving.cli.pack import CONFIG_MAP_KEY, LAST_APPLIED_LIMIT, pack_module
from modelserving.cli.plugin_args import HOOKS, WARMUP
from modelserving.cli.plugin_request import (
    Request,
    Unencodable,
    UsageError,
    minimal_model_serving,
    read_request,
)
from modelserving.cli.scaffold import (
    LANGUAGES,
    NAME_RULE,
    ScaffoldError,
    check_name,
    find_sdk,
    scaffold,
)
from modelserving.plugins.adapter import PluginAdapter
from modelserving.plugins.artifacts import ArtifactMissing, builtin_wasm
from modelserving.plugins.base import Builtin
from modelserving.plugins.exports import HOOK_EXPORTS, default_sandbox, module_hooks
from modelserving.plugins.modules import ModuleTooLarge
from modelserving.plugins.registry import default_registry
from modelserving.plugins.wasm import WasmPlugin
from modelserving.sandbox import (
    CompiledModule,
    Limits,
    LogRecord,
    Sandbox,
    SandboxError,
    assemble_wat,
)

EXIT_FAILED = 1
EXIT_USAGE = 2


class DoesNotFit(Exception):
    """pack: the module's ConfigMap would be over the API server's limit; ``error: ...``, exit 1."""


class Failed(Exception):
    """The plugin failed (one failure class), with the guest's log lines up to the failure."""

    def __init__(self, failure: PluginFailure, logs: Sequence[LogRecord] = ()) -> None:
        super().__init__(str(failure))
        self.failure = failure
        self.logs = list(logs)


def _guarded(fn: Callable[[argparse.Namespace], int]) -> Callable[[argparse.Namespace], int]:
    def wrapped(args: argparse.Namespace) -> int:
        try:
            return fn(args)
        except UsageError as exc:
            print(f"error: {exc}", file=sys.stderr)
            return EXIT_USAGE
        except (DoesNotFit, Unencodable) as exc:
            print(f"error: {exc}", file=sys.stderr)
            return EXIT_FAILED
        except Failed as exc:
            print(exc.failure, file=sys.stderr)
            for record in exc.logs:
                print(
                    f"  guest {record.level} ({record.source}): {record.message}", file=sys.stderr
                )
            return EXIT_FAILED

    return wrapped


def _print_json(value: Any) -> None:
    sys.stdout.write(json.dumps(value, indent=2) + "\n")


# --- the module ------------------------------------------------------------------------------


@dataclass(frozen=True)
class Target:
    """What MODULE names: a file, or a built-in plugin."""

    spec: str
    path: Path | None = None
    builtin: Builtin | None = None

    @property
    def default_name(self) -> str:
        if self.builtin is not None:
            return self.builtin.name
        assert self.path is not None
        return self.path.stem

    def describe(self) -> dict[str, Any]:
        return {
            "path": str(self.path) if self.path is not None else None,
            "builtin": self.builtin.name if self.builtin is not None else None,
        }


def resolve_target(spec: str) -> Target:
    path = Path(spec)
    if path.is_file():
        return Target(spec, path=path)
    registry = default_registry()
    builtin = registry.get(spec)
    if builtin is not None:
        return Target(spec, builtin=builtin)
    if path.exists():
        raise UsageError(f"{spec}: not a file")
    known = ", ".join(registry.names()) or "none"
    raise UsageError(
        f"{spec}: no such file, and no built-in plugin has this name (built-ins: {known})"
    )


def module_bytes(target: Target, name: str) -> bytes:
    """The module's bytes; a .wat file is assembled (InvalidModule when it does not)."""
    if target.builtin is not None:
        builtin = target.builtin
        if builtin.wasm_module is None:
            raise UsageError(
                f"the built-in '{builtin.name}' has no WebAssembly build "
                "(bench it with --runtime native)"
            )
        try:
            return builtin_wasm(builtin.wasm_module)
        except (ArtifactMissing, OSError) as exc:
            raise UsageError(str(exc)) from None
    assert target.path is not None
    try:
        data = target.path.read_bytes()
    except OSError as exc:
        raise UsageError(f"{target.path}: cannot read: {exc.strerror or exc}") from None
    if target.path.suffix.lower() != ".wat":
        return data
    try:
        return assemble_wat(data)
    except SandboxError as exc:
        raise _load_failure(name, f"{target.path}: not valid WAT: {exc.message}") from None


def load(sandbox: Sandbox, target: Target, name: str) -> CompiledModule:
    return load_bytes(sandbox, module_bytes(target, name), name)


def load_bytes(sandbox: Sandbox, data: bytes, name: str) -> CompiledModule:
    """Check and compile as the controller does (marker, exports, imports); InvalidModule."""
    try:
        return sandbox.load(data)
    except SandboxError as exc:
        raise _load_failure(name, exc.message) from None


def _load_failure(name: str, message: str) -> Failed:
    return Failed(PluginFailure(FailureClass.INVALID_MODULE, name, "load", message))


def _check_exported(compiled: CompiledModule, hook: Hook) -> None:
    hooks = module_hooks(compiled.info)
    if hook not in hooks:
        has = ", ".join(h.value for h in hooks) or "none"
        raise UsageError(
            f"the module does not export {HOOK_EXPORTS[hook]} (its hooks: {has}); "
            "the controller skips this hook for it"
        )


def _request_for(args: argparse.Namespace, target: Target) -> tuple[Hook, Request]:
    hook = HOOKS[args.hook]
    return hook, read_request(args.request, hook, target.default_name, args.name, args.config)


def _limits(sandbox: Sandbox, args: argparse.Namespace) -> Limits:
    return sandbox.limits(args.fuel, args.memory_mib, args.timeout_ms)


# --- run -------------------------------------------------------------------------------------


def _entry(name: str, config: Any, plugin: PluginAdapter) -> ChainEntry:
    """One plugin as the controller's chain holds it: ``run`` and ``bench`` call it through the
    chain's own step (``modelserving.chain.invoke``)."""
    return ChainEntry(0, PluginSpec.model_construct(name=name, config=config), plugin)


@_guarded
def run_cmd(args: argparse.Namespace) -> int:
    target = resolve_target(args.module)
    hook, request = _request_for(args, target)
    sandbox = default_sandbox()
    compiled = load(sandbox, target, request.name)
    _check_exported(compiled, hook)
    limits = _limits(sandbox, args)
    # The module gets the request file's modelServing as written (the parsed one types the
    # request only).
    ms = request.parsed_model_serving(note=False)
    view = request.model_serving_api()
    plugin = WasmPlugin(request.name, request.config, compiled, sandbox, limits, ms, view)
    with _quiet_plugin_log():
        outcome = invoke(
            _entry(request.name, request.config, plugin), request.hook_request(hook, ms)
        )
    if outcome.failure is not None:
        raise Failed(outcome.failure, outcome.reply.logs)
    call = outcome.reply.call
    assert call is not None
    spec = SPEC[hook]
    extra: dict[str, Any] = {}
    if spec.observes:
        extra["observations"] = [
            {"name": o.name, "seconds": o.seconds} for o in outcome.observations
        ]
    if spec.per_group:
        extra["objects"] = outcome.objects
    _print_json(
        {
            "hook": hook.value,
            "plugin": {"name": request.name, "config": request.config},
            "module": target.describe(),
            "sha256": compiled.info.sha256,
            "limits": {
                "fuel": limits.fuel,
                "memoryBytes": limits.memory_bytes,
                "timeoutMs": limits.timeout_ms,
            },
            "patch": outcome.patch,
            **({} if spec.per_group else {"pod": outcome.pod if spec.patches else request.pod}),
            "fuelConsumed": call.fuel_consumed,
            "durationUs": round(call.duration_us, 1),
            "logs": [r.to_json() for r in call.logs],
            **extra,
        }
    )
    return 0


# --- inspect ---------------------------------------------------------------------------------


@_guarded
def inspect_cmd(args: argparse.Namespace) -> int:
    target = resolve_target(args.module)
    compiled = load(default_sandbox(), target, target.default_name)
    facts = compiled.info.to_json()
    head = {key: facts.pop(key) for key in ("abiVersion", "flavour")}
    hooks = [h.value for h in module_hooks(compiled.info)]
    _print_json({**target.describe(), **head, "hooks": hooks, **facts})
    return 0


# --- bench -----------------------------------------------------------------------------------

Step = Callable[[], int | None]
"""One timed call; returns the fuel it used (None for native)."""


@contextlib.contextmanager
def _quiet_plugin_log() -> Iterator[None]:
    """Guest log lines of benchmarked calls are dropped (not printed once per iteration)."""
    logger = logging.getLogger("modelserving.plugin")
    handler = logging.NullHandler()
    propagate = logger.propagate
    logger.addHandler(handler)
    logger.propagate = False
    try:
        yield
    finally:
        logger.removeHandler(handler)
        logger.propagate = propagate


def wasm_step(
    args: argparse.Namespace, target: Target, hook: Hook, request: Request
) -> tuple[Step, str]:
    """The controller's WebAssembly path: one WasmPlugin (its encoder holding the shared parts),
    a fresh instance per call, decode, then validate and apply the patch."""
    sandbox = default_sandbox()
    compiled = load(sandbox, target, request.name)
    _check_exported(compiled, hook)
    per_pod = SPEC[hook].target != "plugin"
    ms = request.parsed_model_serving() if per_pod else minimal_model_serving()
    plugin = WasmPlugin(request.name, request.config, compiled, sandbox, _limits(sandbox, args), ms)
    if per_pod:
        plugin.validate_config()  # once, as the controller does when it builds the chain
    entry = _entry(request.name, request.config, plugin)
    return _step(entry, request.hook_request(hook, ms)), compiled.info.sha256


def native_step(target: Target, hook: Hook, request: Request) -> Step:
    """The controller's native path: the hook on a private copy of the Pod, then validate and
    apply the patch. A config the built-in refuses is a PluginError of ValidateConfig."""
    builtin = target.builtin
    assert builtin is not None
    try:
        plugin = native_plugin(0, request.name, builtin, request.config)
    except PluginConfigError as exc:
        message = "; ".join(str(e) for e in exc.errors)
        raise Failed(
            PluginFailure(FailureClass.PLUGIN_ERROR, request.name, Hook.VALIDATE_CONFIG, message)
        ) from None
    per_pod = SPEC[hook].target != "plugin"
    if per_pod and hook not in plugin.hooks:
        raise UsageError(f"the built-in '{builtin.name}' has no {hook} hook")
    ms = request.parsed_model_serving() if per_pod else minimal_model_serving()
    return _step(_entry(request.name, request.config, plugin), request.hook_request(hook, ms))


def _step(entry: ChainEntry, request: HookRequest | GroupRequest) -> Step:
    """One call through the chain's step; a failure is raised (PluginFailure)."""
    validator = PatchValidator()

    def step() -> int | None:
        outcome = invoke(entry, request, validator)
        if outcome.failure is not None:
            raise outcome.failure
        return outcome.reply.fuel

    return step


def measure(step: Step, iterations: int, warmup: int = WARMUP) -> tuple[list[float], list[int]]:
    """Per-call times in microseconds (sorted) and the fuel of each timed call."""
    for _ in range(warmup):
        step()
    times: list[float] = []
    fuels: list[int] = []
    clock = time.perf_counter_ns
    for _ in range(iterations):
        start = clock()
        used = step()
        times.append((clock() - start) / 1000)
        if used is not None:
            fuels.append(used)
    times.sort()
    return times, fuels


@_guarded
def bench_cmd(args: argparse.Namespace) -> int:
    target = resolve_target(args.module)
    if args.runtime == "native" and target.builtin is None:
        raise UsageError(
            f"--runtime native needs a built-in plugin's name; {args.module} is a module file"
        )
    hook, request = _request_for(args, target)
    sha256: str | None = None
    with _quiet_plugin_log():
        try:
            if args.runtime == "native":
                step = native_step(target, hook, request)
            else:
                step, sha256 = wasm_step(args, target, hook, request)
            times, fuels = measure(step, args.iterations)
        except PluginFailure as failure:
            raise Failed(failure) from None
    n = len(times)
    _print_json(
        {
            "hook": hook.value,
            "plugin": request.name,
            "module": target.describe(),
            "runtime": args.runtime,
            "sha256": sha256,
            "iterations": n,
            "warmup": WARMUP,
            "p50Us": round(times[n // 2], 1),
            "p99Us": round(times[min(n - 1, int(n * 0.99))], 1),
            "meanUs": round(statistics.fmean(times), 1),
            "minUs": round(times[0], 1),
            "meanFuel": round(statistics.fmean(fuels), 1) if fuels else None,
        }
    )
    return 0


# --- pack ------------------------------------------------------------------------------------


def _pack_key(args: argparse.Namespace) -> str:
    key: str = args.key or (f"{args.name}.wasm.gz" if args.gzip else f"{args.name}.wasm")
    if len(key) > 253 or not CONFIG_MAP_KEY.fullmatch(key) or key in (".", ".."):
        raise UsageError(
            f"--key {key!r}: a ConfigMap key is at most 253 letters, digits, '-', '_' or '.' "
            "(not '.' or '..')"
        )
    return key


@_guarded
def pack_cmd(args: argparse.Namespace) -> int:
    name: str = args.name
    if not is_dns1123_label(name):
        raise UsageError(f"--name {name!r}: {NAME_RULE}")
    if args.namespace is not None and not is_dns1123_label(args.namespace):
        raise UsageError(
            f"--namespace {args.namespace!r}: a namespace must be a DNS-1123 label (at most 63 "
            "lower-case letters, digits and '-', starting and ending with a letter or digit)"
        )
    key = _pack_key(args)
    target = resolve_target(args.module)
    data = module_bytes(target, name)
    load_bytes(default_sandbox(), data, name)
    try:
        packed = pack_module(data, name, key, args.namespace, args.gzip)
    except ModuleTooLarge as exc:
        raise DoesNotFit(f"{args.module}: {exc}") from None
    if len(packed.stored) * 4 // 3 > LAST_APPLIED_LIMIT - 4096:
        print(
            f"note: the ConfigMap holds {len(packed.stored) * 4 // 3} bytes of base64; a "
            "client-side `kubectl apply` would copy them into the last-applied-configuration "
            f"annotation, over the {LAST_APPLIED_LIMIT} bytes Kubernetes allows in annotations: "
            "use `kubectl apply --server-side` or `kubectl create`",
            file=sys.stderr,
        )
    sys.stdout.write(packed.manifest())
    return 0


# --- new -------------------------------------------------------------------------------------


@_guarded
def new_cmd(args: argparse.Namespace) -> int:
    language = LANGUAGES[args.lang]
    name: str = args.name
    target = Path(args.dir) if args.dir else Path(name)
    try:
        check_name(name, language)
        sdk = find_sdk(language, args.sdk)
        written = scaffold(language, name, target, sdk)
    except ScaffoldError as exc:
        raise UsageError(str(exc)) from None
    print(f"created {target}: the {language.title} plugin {name} (SDK: {sdk})")
    vendor = target / language.vendor if language.vendor else None
    copied = [p for p in written if vendor is not None and vendor in p.parents]
    for path in written:
        if path not in copied:
            print(f"  {path}")
    if vendor is not None and copied:
        print(f"  {vendor}/  (a copy of the SDK: {len(copied)} files)")
    print(f"next: cd {target} && make test build run pack   (README.md says more)")
    return 0
