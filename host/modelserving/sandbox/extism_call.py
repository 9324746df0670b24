"""Hook calls of Extism-flavoured modules (they import ``extism:host/env``), through Extism.

The module's ``on_pod_create`` / ``on_pod_ready`` / ``validate_config`` take the same request
bytes as Extism input and give the same response bytes as Extism output. Each call gets a fresh
Extism plugin instance from a compiled plugin kept per (module, limits), with the same fuel,
memory (``max_pages``) and deadline (``timeout_ms``) limits as native-flavour modules. Extism
does not report the fuel used (reported as 0), nor does it pass the guest's WASI output on (it is
dropped); an error the guest sets is a PluginError, Extism's own fuel, time and memory errors map
to their classes, any other failure is a Trap.

Extism serves WASI itself, except ``poll_oneoff``: the host defines it as a host function in the
``wasi_snapshot_preview1`` namespace (Extism's linker lets a host function shadow its WASI) that
answers ENOTSUP at once, as for native-flavour modules, since a sleep in native code would
outlast the call's deadline. Language runtimes import it whether they sleep or not (standard
Go's always does).
"""

from __future__ import annotations

import base64
import json
import threading
import time
from typing import Any

from extism.extism import _ffi, _lib

from modelserving.api.errors import FailureClass
from modelserving.sandbox.call import CallFailure, CallResult
from modelserving.sandbox.errors import cause_line
from modelserving.sandbox.settings import WASM_PAGE, Limits, SandboxSettings

_MAX_ERROR_READ = 1024
_OUT_OF_FUEL = "all fuel consumed by WebAssembly"  # wasmtime's text for fuel exhaustion
_ENOTSUP = 58
_I32 = 0  # ExtismValType_I32
_HOST_FUNCTION = (
    "void(ExtismCurrentPlugin*, const ExtismVal*, ExtismSize, ExtismVal*, ExtismSize, void*)"
)


def _refuse_sleep(
    current: Any, inputs: Any, n_inputs: int, outputs: Any, n_outputs: int, data: Any
) -> None:
    """WASI ``poll_oneoff`` for Extism modules: ENOTSUP, at once."""
    outputs[0].v.i32 = _ENOTSUP


_refuse_sleep_callback = _ffi.callback(_HOST_FUNCTION, _refuse_sleep)


def _new_poll_oneoff() -> Any:
    """A new ``wasi_snapshot_preview1.poll_oneoff`` host function. Extism moves a function into
    the first plugin it is registered with, so each compiled plugin gets its own; the caller
    frees it once the plugin is made."""
    i32 = [_I32]
    function = _lib.extism_function_new(
        b"poll_oneoff", i32 * 4, 4, i32, 1, _refuse_sleep_callback, _ffi.NULL, _ffi.NULL
    )
    _lib.extism_function_set_namespace(function, b"wasi_snapshot_preview1")
    return function


class ExtismModule:
    """One Extism-flavoured module: its bytes and its compiled plugins by limits."""

    def __init__(self, data: bytes, wasi: bool) -> None:
        self._data = data
        self._wasi = wasi
        self._compiled: dict[Limits, Any] = {}
        self._lock = threading.Lock()

    def compiled(self, limits: Limits) -> Any:
        with self._lock:
            found = self._compiled.get(limits)
            if found is None:
                found = self._compile(limits)
                self._compiled[limits] = found
            return found

    def _compile(self, limits: Limits) -> Any:
        manifest = json.dumps(
            {
                "wasm": [{"data": base64.b64encode(self._data).decode()}],
                "memory": {"max_pages": max(1, limits.memory_bytes // WASM_PAGE)},
                "timeout_ms": limits.timeout_ms,
            }
        ).encode()
        errmsg = _ffi.new("char**")
        poll_oneoff = _new_poll_oneoff() if self._wasi else None
        functions = [] if poll_oneoff is None else [poll_oneoff]
        array = _ffi.new("ExtismFunction*[]", functions) if functions else _ffi.NULL
        try:
            pointer = _lib.extism_compiled_plugin_new_with_fuel_limit(
                manifest, len(manifest), array, len(functions), self._wasi, limits.fuel, errmsg
            )
        finally:
            if poll_oneoff is not None:
                _lib.extism_function_free(poll_oneoff)
        if pointer == _ffi.NULL:
            message = _ffi.string(errmsg[0]).decode(errors="replace")
            _lib.extism_plugin_new_error_free(errmsg[0])
            raise CallFailure(
                FailureClass.INVALID_MODULE, f"Extism refused the module: {cause_line(message)}"
            )
        return _ffi.gc(pointer, _lib.extism_compiled_plugin_free)


def check_links(module: ExtismModule, limits: Limits) -> None:
    """Compile and instantiate once, so a module Extism cannot link (an ``extism:host/env``
    function Extism does not have) is refused at load, not at its first call."""
    plugin = _instance(
        module.compiled(limits), FailureClass.INVALID_MODULE, "Extism cannot link the module"
    )
    _lib.extism_plugin_free(plugin)


def _instance(compiled: Any, failure: FailureClass, what: str, limits: Limits | None = None) -> Any:
    """A new Extism instance of ``compiled``; CallFailure(``failure``) saying ``what`` failed,
    or FuelExhausted when starting it (a reactor's ``_initialize``, which Extism runs here)
    used up the call's ``limits``."""
    errmsg = _ffi.new("char**")
    plugin = _lib.extism_plugin_new_from_compiled(compiled, errmsg)
    if plugin == _ffi.NULL:
        message = _ffi.string(errmsg[0]).decode(errors="replace")
        _lib.extism_plugin_new_error_free(errmsg[0])
        if limits is not None and _OUT_OF_FUEL in message:
            raise CallFailure(
                FailureClass.FUEL_EXHAUSTED, f"the call ran out of fuel ({limits.fuel} units)"
            )
        raise CallFailure(failure, f"{what}: {cause_line(message)}")
    return plugin


def call_extism(
    settings: SandboxSettings, module: ExtismModule, function: str, request: bytes, limits: Limits
) -> CallResult:
    """Run ``function`` on ``request`` in a fresh Extism instance; CallFailure on any failure."""
    compiled = module.compiled(limits)
    start = time.perf_counter()
    plugin = _instance(compiled, FailureClass.TRAP, "the Extism instance could not start", limits)
    try:
        status = _lib.extism_plugin_call(plugin, function.encode(), request, len(request))
        error = _lib.extism_plugin_error(plugin)
        elapsed = (time.perf_counter() - start) * 1e6
        if error != _ffi.NULL or status != 0:
            # bounded: the guest sets this text (error_set) and may make it huge
            raw = _ffi.string(error, _MAX_ERROR_READ) if error != _ffi.NULL else b""
            text = raw.decode(errors="replace")
            if len(raw) == _MAX_ERROR_READ:
                text += "...[cut]"
            elapsed_ms = (time.perf_counter() - start) * 1000
            cls, message = _classify(text, status, limits, elapsed_ms)
            raise CallFailure(cls, message, 0, elapsed)
        size = _lib.extism_plugin_output_length(plugin)
        if size > settings.max_response_bytes:
            raise CallFailure(
                FailureClass.INVALID_RESPONSE,
                f"the response is {size} bytes; the limit is {settings.max_response_bytes}",
                0,
                elapsed,
            )
        output = bytes(_ffi.buffer(_lib.extism_plugin_output_data(plugin), size))
        return CallResult(output, 0, elapsed, [])
    finally:
        _lib.extism_plugin_free(plugin)


def _classify(
    text: str, status: int, limits: Limits, elapsed_ms: float
) -> tuple[FailureClass, str]:
    """Extism reports its own limits with fixed texts, which a guest could also set with
    error_set; the deadline is believed only when the time has really passed."""
    lowered = text.strip().lower()
    if lowered == "plugin ran out of fuel":
        return FailureClass.FUEL_EXHAUSTED, f"the call ran out of fuel ({limits.fuel} units)"
    if lowered == "timeout" and elapsed_ms >= limits.timeout_ms * 0.9:
        return FailureClass.TIMEOUT, f"the call passed its deadline ({limits.timeout_ms} ms)"
    if lowered == "oom":
        return (
            FailureClass.MEMORY_LIMIT,
            f"the call hit its memory limit ({limits.memory_bytes} bytes)",
        )
    if "wasm backtrace" in lowered or lowered.startswith("wasm trap"):
        return FailureClass.TRAP, cause_line(text)
    if text:
        return FailureClass.PLUGIN_ERROR, text
    return FailureClass.PLUGIN_ERROR, f"the Extism function returned status {status}"
