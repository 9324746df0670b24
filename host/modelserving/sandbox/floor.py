"""The floor of one call, for benchmarks: the fewest wasmtime C calls a fresh-instance call needs.

``raw_call`` does what ``Sandbox.call`` must do for a core module and nothing else: a new store
(the C function, no wasmtime-py object), fuel, the epoch deadline and the store's limits, an
instance from the module's InstancePre (the pooling allocator), ``ms_alloc``, the request
copied in, the entry point, the response copied out, the store deleted. No checks, no log sink,
no pool slot, no failure classes: a module that traps raises. The benchmark times it beside the
real call, on the same module in the same process, to show what the sandbox's own work costs.
"""

from __future__ import annotations

import ctypes
from typing import TYPE_CHECKING

from wasmtime import _ffi as ffi

from modelserving.abi.shape import ALLOC, MEMORY
from modelserving.sandbox.core import raw
from modelserving.sandbox.settings import Limits

if TYPE_CHECKING:
    from modelserving.sandbox.cache import CompiledModule
    from modelserving.sandbox.sandbox import Sandbox

_instantiate = ffi.wasmtime_instance_pre_instantiate
_call = ffi.wasmtime_func_call_unchecked
_ALLOC = ALLOC.encode()
_MEMORY = MEMORY.encode()


class RawCall:
    """``raw_call`` bound to one module and export (what a benchmark calls in a loop)."""

    def __init__(self, sandbox: Sandbox, compiled: CompiledModule, export: str, limits: Limits):
        native = sandbox.modules.native(compiled)
        assert native.pre is not None and not compiled.info.wasi and not compiled.info.initialize
        self._pre = native.pre
        self._sandbox_engine = sandbox.engine
        self._engine = sandbox.engine.engine.ptr()
        self._ticks = sandbox.engine.deadline_ticks(limits.timeout_ms)
        self._limits = limits
        self._tables = sandbox.settings.max_table_elements
        self._export = export.encode()

    def __call__(self, request: bytes) -> bytes:
        store = raw.store_new(self._engine, None, raw.NO_FINALIZER)
        token = object()
        self._sandbox_engine.running(token)
        try:
            ctx = raw.store_context(store)
            limits = self._limits
            raw.set_fuel(ctx, limits.fuel)
            raw.set_epoch_deadline(ctx, self._ticks)
            raw.store_limiter(store, limits.memory_bytes, self._tables, 1, 4, 1)
            instance = ffi.wasmtime_instance_t()
            trap = ctypes.POINTER(ffi.wasm_trap_t)()
            if _instantiate(self._pre.ptr(), ctx, ctypes.byref(instance), ctypes.byref(trap)):
                raise RuntimeError("instantiation failed")
            memory, alloc, hook = (ffi.wasmtime_extern_t() for _ in range(3))
            where = ctypes.byref(instance)
            raw.export_get(ctx, where, _MEMORY, len(_MEMORY), ctypes.byref(memory))
            raw.export_get(ctx, where, _ALLOC, len(_ALLOC), ctypes.byref(alloc))
            raw.export_get(ctx, where, self._export, len(self._export), ctypes.byref(hook))
            args = (ffi.wasmtime_val_raw_t * 2)()
            args[0].i32 = len(request)
            if _call(ctx, ctypes.byref(alloc.of.func), args, 2, ctypes.byref(trap)) or trap:
                raise RuntimeError("ms_alloc failed")
            ptr = args[0].i32 & 0xFFFFFFFF
            base = ctypes.addressof(raw.memory_data(ctx, ctypes.byref(memory.of.memory)).contents)
            raw.memmove(base + ptr, request, len(request))
            args[0].i32, args[1].i32 = ptr, len(request)
            if _call(ctx, ctypes.byref(hook.of.func), args, 2, ctypes.byref(trap)) or trap:
                raise RuntimeError("the call failed")
            result = args[0].i64
            base = ctypes.addressof(raw.memory_data(ctx, ctypes.byref(memory.of.memory)).contents)
            return ctypes.string_at(base + ((result >> 32) & 0xFFFFFFFF), result & 0xFFFFFFFF)
        finally:
            raw.store_delete(store)
            self._sandbox_engine.done(token)
