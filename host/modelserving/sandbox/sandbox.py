"""The sandbox facade: one engine, one module cache, and hook calls under limits.

Callers (the plugin adapter, the CLI, benchmarks) load module bytes once and call hooks with
request bytes; they never touch wasmtime themselves.
"""

from __future__ import annotations

import threading

import wasmtime

from modelserving.abi.contract import export_name
from modelserving.api.errors import FailureClass
from modelserving.api.hook import Hook
from modelserving.sandbox.cache import CompiledModule, ModuleCache
from modelserving.sandbox.core.call import call_hook, start_instance
from modelserving.sandbox.engine import SandboxEngine
from modelserving.sandbox.errors import error_line, invalid_module
from modelserving.sandbox.extism.call import ExtismWorker, call_extism
from modelserving.sandbox.module import FLAVOUR_EXTISM
from modelserving.sandbox.results import CallFailure, CallResult
from modelserving.sandbox.settings import Limits, SandboxSettings, default_cache_dir, resolve_limits


class Sandbox:
    """Loads modules (compiled once per digest) and runs their hooks in fresh instances."""

    def __init__(self, settings: SandboxSettings | None = None) -> None:
        self.settings = settings or SandboxSettings(cache_dir=default_cache_dir())
        self.engine = SandboxEngine(self.settings)
        # Extism modules run in a worker process of this sandbox, started on first use.
        self.extism = ExtismWorker(self.settings)
        self.modules = ModuleCache(self.engine, self.settings.cache_dir, extism=self.extism)

    def load(self, data: bytes, sha256: str | None = None) -> CompiledModule:
        """Compile (or find) and check a module; SandboxError(InvalidModule) when refused."""
        return self.modules.load(data, sha256)

    def limits(
        self, fuel: int | None = None, memory_mib: int | None = None, timeout_ms: int | None = None
    ) -> Limits:
        return resolve_limits(self.settings, fuel, memory_mib, timeout_ms)

    def call(
        self, compiled: CompiledModule, hook: Hook, request: bytes, limits: Limits
    ) -> CallResult:
        """Run one hook on ``request``; CallFailure (a SandboxError) when the call fails."""
        extism = compiled.info.flavour == FLAVOUR_EXTISM
        export = export_name(hook, extism)
        if hook not in compiled.info.hooks:
            raise CallFailure(FailureClass.INVALID_MODULE, f"the module does not export {export}")
        if extism:
            assert compiled.extism is not None
            return call_extism(self.extism, compiled.extism, export, request, limits)
        return call_hook(self.engine, compiled, export, request, limits)

    def start_instance(self, compiled: CompiledModule, limits: Limits) -> None:
        """Start a fresh instance of a core module and drop it (for benchmarks)."""
        start_instance(self.engine, compiled, limits)

    def compile_here(self, data: bytes) -> None:
        """Compile ``data`` in this process, unchecked and uncached: what the compile worker
        spares the controller (for benchmarks)."""
        wasmtime.Module(self.engine.engine, data)

    def close(self) -> None:
        """Stop the sandbox's Extism worker, if one runs (also done when it is collected)."""
        self.extism.close()


def assemble_wat(text: bytes) -> bytes:
    """A module in the WebAssembly text format, assembled; InvalidModule saying why not."""
    try:
        return bytes(wasmtime.wat2wasm(text.decode("utf-8")))
    except (UnicodeDecodeError, wasmtime.WasmtimeError) as exc:
        raise invalid_module(error_line(exc)) from None


_default: Sandbox | None = None
_default_lock = threading.Lock()


def default_sandbox() -> Sandbox:
    """The process-wide sandbox (created on first use, with the default settings)."""
    global _default
    with _default_lock:
        if _default is None:
            _default = Sandbox()
        return _default


def set_default_sandbox(sandbox: Sandbox | None) -> None:
    """Replace the process-wide sandbox (the controller's settings, tests)."""
    global _default
    with _default_lock:
        _default = sandbox
