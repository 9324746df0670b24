"""The sandbox facade: one engine, one module cache, and calls of a module's exports under limits.

Callers (the plugin adapter, the CLI, benchmarks) load module bytes once and call an export with
request bytes; they never touch wasmtime themselves. The sandbox is told which exports the host
may call (``Entrypoint``s: the plugin layer derives them from the hook table), never of hooks.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence

import wasmtime

from modelserving.api.errors import FailureClass
from modelserving.sandbox.cache import CompiledModule, ModuleCache
from modelserving.sandbox.core.call import call_export, start_instance
from modelserving.sandbox.engine import SandboxEngine
from modelserving.sandbox.errors import SandboxError, error_line, invalid_module
from modelserving.sandbox.extism.call import ExtismPool, call_extism
from modelserving.sandbox.module import FLAVOUR_EXTISM, Entrypoint
from modelserving.sandbox.results import CallFailure, CallResult
from modelserving.sandbox.settings import Limits, SandboxSettings, default_cache_dir, resolve_limits


class Sandbox:
    """Loads modules (compiled once per digest) and runs their entry points in fresh instances.

    ``entrypoints`` are the functions the host may call: a module is checked against them at
    load (their types, at least one required one). ``trusted``: the digests of modules that
    ship with the host (its built-ins), compiled in this process instead of a compile worker;
    they are checked like any other module."""

    def __init__(
        self,
        settings: SandboxSettings | None,
        entrypoints: Sequence[Entrypoint],
        trusted: Iterable[str] = (),
    ) -> None:
        self.settings = settings or SandboxSettings(cache_dir=default_cache_dir())
        self.engine = SandboxEngine(self.settings)
        # Extism modules run in worker processes of this sandbox, each started on first use.
        self.extism = ExtismPool(self.settings)
        self.modules = ModuleCache(
            self.engine,
            self.settings.cache_dir,
            tuple(entrypoints),
            extism=self.extism,
            trusted=frozenset(trusted),
        )

    def load(self, data: bytes, sha256: str | None = None) -> CompiledModule:
        """Compile (or find) and check a module; SandboxError(InvalidModule) when refused."""
        return self.modules.load(data, sha256)

    def limits(
        self, fuel: int | None = None, memory_mib: int | None = None, timeout_ms: int | None = None
    ) -> Limits:
        return resolve_limits(self.settings, fuel, memory_mib, timeout_ms)

    def call(
        self, compiled: CompiledModule, export: str, request: bytes, limits: Limits
    ) -> CallResult:
        """Run the entry point ``export`` (its name in the module's flavour) on ``request``;
        CallFailure (a SandboxError) when the call fails."""
        if export not in compiled.info.entrypoints:
            raise CallFailure(FailureClass.INVALID_MODULE, f"the module does not export {export}")
        if compiled.info.flavour == FLAVOUR_EXTISM:
            assert compiled.extism is not None
            return call_extism(self.extism, compiled.extism, export, request, limits)
        return call_export(self.engine, compiled, self._pre(compiled), export, request, limits)

    def start_instance(self, compiled: CompiledModule, limits: Limits) -> None:
        """Start a fresh instance of a core module and drop it (for benchmarks)."""
        start_instance(self.engine, compiled, self._pre(compiled), limits)

    def _pre(self, compiled: CompiledModule) -> wasmtime.InstancePre:
        """The module's InstancePre, loaded again when the module cache evicted it; a failure
        to load it is the call's (CallFailure)."""
        try:
            native = self.modules.native(compiled)
        except SandboxError as exc:
            raise CallFailure(
                exc.failure_class, f"the module could not be loaded again: {exc.message}"
            ) from None
        assert native.pre is not None
        return native.pre

    def compile_here(self, data: bytes) -> None:
        """Compile ``data`` in this process, unchecked and uncached: what the compile worker
        spares the controller (for benchmarks)."""
        wasmtime.Module(self.engine.engine, data)

    def close(self) -> None:
        """Stop the sandbox's Extism workers (also done when it is collected)."""
        self.extism.close()


def assemble_wat(text: bytes) -> bytes:
    """A module in the WebAssembly text format, assembled; InvalidModule saying why not."""
    try:
        return bytes(wasmtime.wat2wasm(text.decode("utf-8")))
    except (UnicodeDecodeError, wasmtime.WasmtimeError) as exc:
        raise invalid_module(error_line(exc)) from None
