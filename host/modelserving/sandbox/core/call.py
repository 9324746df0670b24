"""One hook call in a fresh instance: limits set, request written, hook called, response read.

This is the hot path, so it talks to wasmtime's C API directly where wasmtime-py's wrappers are
slow: exports are looked up by name (never ``Instance.exports()``), and functions are called with
``wasmtime_func_call_unchecked`` on a prepared argument buffer (their types were checked at
load). Every guest pointer is checked against the memory before the host reads or writes it, and
every way a call can fail ends in exactly one failure class.

The GIL: ctypes lets it go around every foreign call, and getting it back can take a whole switch
interval (5 ms) when other threads run Python, as the controller's API writers do. So the C calls
that run no guest code (store, limits, instantiation, export lookup, memory and fuel queries, the
request's copy into the guest's memory) are bound to keep it (``core.raw``). Instantiation runs
none: a start function is moved to an export (``structure.detach_start``) and called like
``_initialize`` and the hooks, which still let the GIL go, so a slow or hostile guest, which may
run until its deadline, never stops the controller's other threads.
"""

from __future__ import annotations

import ctypes
import time
from typing import TYPE_CHECKING, Any, cast

import wasmtime
from wasmtime import _ffi as ffi

from modelserving.abi.shape import ALLOC, INITIALIZE, MEMORY
from modelserving.api.errors import FailureClass
from modelserving.sandbox.core import raw
from modelserving.sandbox.engine import CallScope, SandboxEngine, set_current_scope
from modelserving.sandbox.errors import error_line
from modelserving.sandbox.logs import LogSink
from modelserving.sandbox.results import CallFailure, CallResult
from modelserving.sandbox.settings import WASM_PAGE, Limits
from modelserving.sandbox.structure import START_EXPORT

if TYPE_CHECKING:
    from modelserving.sandbox.compiled import CompiledModule

_NAMES = {name: name.encode() for name in (ALLOC, INITIALIZE, MEMORY)}
_START = START_EXPORT.encode()
_MAX_TABLES = 4
_FUNC = ffi.WASMTIME_EXTERN_FUNC.value
_MEMORY = ffi.WASMTIME_EXTERN_MEMORY.value
_U32 = 0xFFFFFFFF
_store_new = raw.store_new
_store_context = raw.store_context
_store_delete = raw.store_delete
_set_wasi = raw.set_wasi
_NO_FINALIZER = raw.NO_FINALIZER
_export_get = raw.export_get
_memory_data_size = raw.memory_data_size
_memory_data = raw.memory_data
_get_fuel = raw.get_fuel
_set_fuel = raw.set_fuel
_set_epoch_deadline = raw.set_epoch_deadline
_store_limiter = raw.store_limiter
_memmove = raw.memmove
_instantiate = raw.instantiate


class _Failed(Exception):
    """Internal: a call failed with a class; becomes CallFailure with usage attached."""

    def __init__(self, failure_class: FailureClass, message: str) -> None:
        self.failure_class = failure_class
        self.message = message


class _Instance:
    """A fresh instance in its own store, with raw handles to what the call needs. The store is
    wasmtime's C object itself (``wasmtime_store_new``), deleted by ``close``: wasmtime-py's
    ``Store`` would add a Python object, a finalizer and a context lookup to every call."""

    def __init__(
        self,
        engine: SandboxEngine,
        compiled: CompiledModule,
        pre: wasmtime.InstancePre,
        limits: Limits,
    ) -> None:
        self.store: Any = _store_new(engine.engine.ptr(), None, _NO_FINALIZER)
        self.memory: ffi.wasmtime_memory_t | None = None
        self._engine = engine
        engine.running(self)  # the epoch advances until close
        try:  # nothing else deletes the store (no finalizer): any failure from here on does
            self.ctx = _store_context(self.store)
            self.limit_bytes = limits.memory_bytes
            error = _set_fuel(self.ctx, limits.fuel)
            if error:
                raise wasmtime.WasmtimeError._from_ptr(error)
            _set_epoch_deadline(self.ctx, engine.deadline_ticks(limits.timeout_ms))
            _store_limiter(
                self.store,
                limits.memory_bytes,
                engine.settings.max_table_elements,
                1,
                _MAX_TABLES,
                1,
            )
        except BaseException:
            self.close()
            raise
        self.instance = ffi.wasmtime_instance_t()
        self.trap = ctypes.POINTER(ffi.wasm_trap_t)()
        self.args = (ffi.wasmtime_val_raw_t * 2)()
        self._compiled = compiled
        self._pre = pre

    def start(self, wasi: wasmtime.WasiConfig | None) -> None:
        if wasi is not None:
            error = _set_wasi(self.ctx, wasi._consume())
            if error:
                raise wasmtime.WasmtimeError._from_ptr(error)
        error = _instantiate(
            self._pre.ptr(), self.ctx, ctypes.byref(self.instance), ctypes.byref(self.trap)
        )
        self._check(error)
        memory = self.export(_NAMES[MEMORY])
        if memory is None or cast(int, memory.kind) != _MEMORY:
            raise _Failed(FailureClass.INVALID_MODULE, "the instance has no exported memory")
        self.memory = memory.of.memory
        if self._compiled.info.start:
            self.call(_START, 0)
        if self._compiled.info.initialize:
            self.call(_NAMES[INITIALIZE], 0)

    def export(self, name: bytes) -> ffi.wasmtime_extern_t | None:
        item = ffi.wasmtime_extern_t()
        found = _export_get(
            self.ctx, ctypes.byref(self.instance), name, len(name), ctypes.byref(item)
        )
        return item if found else None

    def call(self, name: bytes, *params: int) -> ffi.wasmtime_val_raw_t:
        item = self.export(name)
        if item is None or cast(int, item.kind) != _FUNC:
            raise _Failed(FailureClass.INVALID_MODULE, f"the instance has no function {name!r}")
        args = self.args
        for i, value in enumerate(params):
            args[i].i32 = value
        error = ffi.wasmtime_func_call_unchecked(
            self.ctx, ctypes.byref(item.of.func), args, 2, ctypes.byref(self.trap)
        )
        self._check(error)
        return args[0]

    def _check(self, error: ctypes._Pointer[ffi.wasmtime_error_t] | None) -> None:
        if error:
            raise wasmtime.WasmtimeError._from_ptr(error)
        if self.trap:
            trap = wasmtime.Trap._from_ptr(self.trap)
            self.trap = ctypes.POINTER(ffi.wasm_trap_t)()
            raise trap

    def memory_size(self) -> int:
        if self.memory is None:
            return 0
        return int(_memory_data_size(self.ctx, ctypes.byref(self.memory)))

    def memory_base(self) -> int:
        assert self.memory is not None
        data = _memory_data(self.ctx, ctypes.byref(self.memory))
        return ctypes.addressof(data.contents)

    def fuel_left(self) -> int:
        fuel = ctypes.c_uint64(0)
        error = _get_fuel(self.ctx, ctypes.byref(fuel))
        if error:
            wasmtime.WasmtimeError._from_ptr(error)
            return 0
        return fuel.value

    def near_memory_limit(self) -> bool:
        """Whether the memory is in the top quarter of its limit (or within a page of it).

        wasmtime reports a refused ``memory.grow`` to the guest only (it returns -1), so a call
        that fails this close to the limit is reported as MemoryLimit: a refused grow is the
        likely cause, and the message keeps the guest's own trap text.
        """
        slack = max(WASM_PAGE, self.limit_bytes // 4)
        return self.memory_size() + slack > self.limit_bytes

    def close(self) -> None:
        """Delete the store (and the instance in it); once, whatever calls it again."""
        store, self.store = self.store, None
        if store is not None:
            self.ctx = None
            self.memory = None
            _store_delete(store)
            self._engine.done(self)


def start_instance(
    engine: SandboxEngine, compiled: CompiledModule, pre: wasmtime.InstancePre, limits: Limits
) -> None:
    """Start a fresh instance of a core module (``pre``, its InstancePre) and drop it: what
    every call pays before the hook runs (for benchmarks)."""
    inst = _Instance(engine, compiled, pre, limits)
    try:
        inst.start(None)
    finally:
        inst.close()


def call_export(
    engine: SandboxEngine,
    compiled: CompiledModule,
    pre: wasmtime.InstancePre,
    export: str,
    request: bytes,
    limits: Limits,
) -> CallResult:
    """Run ``export(ptr, len)`` on ``request`` in a fresh instance of ``compiled`` (``pre``,
    its InstancePre, which the call keeps alive); CallFailure on any failure."""
    settings = engine.settings
    sink = LogSink(settings.log_max_lines, settings.log_max_line_bytes, settings.log_max_bytes)
    if compiled.info.memory_min_bytes > limits.memory_bytes:
        raise CallFailure(
            FailureClass.MEMORY_LIMIT,
            f"the module's initial memory ({compiled.info.memory_min_bytes} bytes) exceeds the "
            f"memory limit ({limits.memory_bytes} bytes)",
        )
    start = time.perf_counter()
    # A slot of the instance pool, waited for at most the call's own deadline: when every slot
    # is busy the call times out instead of failing inside wasmtime.
    if not engine.slots.acquire(timeout=limits.timeout_ms / 1000):
        raise CallFailure(
            FailureClass.TIMEOUT,
            f"no instance slot became free within the deadline ({limits.timeout_ms} ms): "
            f"all {settings.pool_slots} are busy",
        )
    try:
        return _run(engine, compiled, pre, export, request, limits, sink, start)
    finally:
        engine.slots.release()


def _run(
    engine: SandboxEngine,
    compiled: CompiledModule,
    pre: wasmtime.InstancePre,
    export: str,
    request: bytes,
    limits: Limits,
    sink: LogSink,
    start: float,
) -> CallResult:
    settings = engine.settings
    scope = CallScope(sink, time.monotonic() + limits.timeout_ms / 1000)
    inst = _Instance(engine, compiled, pre, limits)  # deleted by the 'finally' from here on
    try:
        set_current_scope(scope)
        inst.start(_wasi_config() if compiled.info.wasi else None)
        response = _round_trip(inst, export.encode(), request, settings.max_response_bytes)
        fuel = limits.fuel - inst.fuel_left()
    except _Failed as exc:
        raise _failure(inst, limits, start, sink, exc.failure_class, exc.message) from None
    except wasmtime.Trap as trap:
        cls, message = _classify_trap(inst, trap, scope)
        raise _failure(inst, limits, start, sink, cls, message) from None
    except wasmtime.ExitTrap as exit_:
        message = f"the module exited (WASI proc_exit with status {exit_.code})"
        raise _failure(inst, limits, start, sink, FailureClass.TRAP, message) from None
    except wasmtime.WasmtimeError as exc:
        if scope.late:  # a host function stopped the call at its deadline
            cls, message = FailureClass.TIMEOUT, "the call passed its deadline"
        elif inst.near_memory_limit():
            cls, message = FailureClass.MEMORY_LIMIT, error_line(exc)
        else:
            cls, message = FailureClass.TRAP, error_line(exc)
        raise _failure(inst, limits, start, sink, cls, message) from None
    finally:
        set_current_scope(None)
        inst.close()  # (again, after a failure: once is what happens)
    return CallResult(response, fuel, (time.perf_counter() - start) * 1e6, sink.close())


def _round_trip(inst: _Instance, hook: bytes, request: bytes, max_response: int) -> bytes:
    size = len(request)
    ptr = inst.call(_NAMES[ALLOC], size).i32 & _U32
    memory = inst.memory_size()
    if ptr == 0:
        cls = (
            FailureClass.MEMORY_LIMIT if inst.near_memory_limit() else FailureClass.INVALID_RESPONSE
        )
        raise _Failed(cls, f"{ALLOC}({size}) returned 0 (allocation failed)")
    if ptr + size > memory:
        raise _Failed(
            FailureClass.INVALID_RESPONSE,
            f"{ALLOC}({size}) returned {ptr}, which does not leave {size} bytes inside the "
            f"{memory}-byte memory",
        )
    _memmove(inst.memory_base() + ptr, request, size)
    result = inst.call(hook, ptr, size).i64
    out_ptr = (result >> 32) & _U32
    out_len = result & _U32
    if out_len == 0:
        return b""
    if out_len > max_response:
        raise _Failed(
            FailureClass.INVALID_RESPONSE,
            f"the response is {out_len} bytes; the limit is {max_response}",
        )
    memory = inst.memory_size()
    if out_ptr + out_len > memory:
        raise _Failed(
            FailureClass.INVALID_RESPONSE,
            f"the response ({out_ptr}+{out_len}) lies outside the {memory}-byte memory",
        )
    return ctypes.string_at(inst.memory_base() + out_ptr, out_len)


def _classify_trap(
    inst: _Instance, trap: wasmtime.Trap, scope: CallScope
) -> tuple[FailureClass, str]:
    code = trap.trap_code
    text = error_line(trap)
    if code == wasmtime.TrapCode.OUT_OF_FUEL:
        return FailureClass.FUEL_EXHAUSTED, "the call ran out of fuel"
    if code == wasmtime.TrapCode.INTERRUPT or scope.late:
        return FailureClass.TIMEOUT, "the call passed its deadline"
    if inst.near_memory_limit():
        return (
            FailureClass.MEMORY_LIMIT,
            f"the module trapped with its memory at the limit ({inst.limit_bytes} bytes): {text}",
        )
    return FailureClass.TRAP, text


def _failure(
    inst: _Instance,
    limits: Limits,
    start: float,
    sink: LogSink,
    failure_class: FailureClass,
    message: str,
) -> CallFailure:
    fuel = limits.fuel - inst.fuel_left()
    inst.close()
    if failure_class is FailureClass.TIMEOUT:
        message += f" ({limits.timeout_ms} ms)"
    elif failure_class is FailureClass.FUEL_EXHAUSTED:
        message += f" ({limits.fuel} units)"
    return CallFailure(
        failure_class, message, fuel, (time.perf_counter() - start) * 1e6, sink.close()
    )


def _wasi_config() -> wasmtime.WasiConfig:
    """WASI with nothing: no preopened directories, environment or arguments; empty stdin.
    Standard output and error are served by the engine's own ``fd_write`` (log lines)."""
    return wasmtime.WasiConfig()
