"""wasmtime's C functions that a call makes many times, bound once and called holding the GIL.

wasmtime-py's bindings release the GIL around every C call; for these short ones (a store, its
fuel and deadline, an export, the memory's address) that release and re-take costs more than
the call. Used by the call path (``core.call``) and the benchmark's floor (``sandbox.floor``).
"""

from __future__ import annotations

import ctypes
from typing import Any

from wasmtime import _bindings
from wasmtime import _ffi as ffi

_HOLDS_GIL = ctypes.PyDLL(ffi.dll._name)


def held(name: str) -> Any:
    """wasmtime's C function ``name``, with wasmtime-py's signature, called holding the GIL."""
    released = getattr(_bindings, f"_{name}")
    function = getattr(_HOLDS_GIL, name)
    function.restype, function.argtypes = released.restype, released.argtypes
    return function


store_new = held("wasmtime_store_new")
store_context = held("wasmtime_store_context")
store_delete = held("wasmtime_store_delete")
store_limiter = held("wasmtime_store_limiter")
set_wasi = held("wasmtime_context_set_wasi")
set_fuel = held("wasmtime_context_set_fuel")
get_fuel = held("wasmtime_context_get_fuel")
set_epoch_deadline = held("wasmtime_context_set_epoch_deadline")
export_get = held("wasmtime_instance_export_get")
memory_data = held("wasmtime_memory_data")
memory_data_size = held("wasmtime_memory_data_size")
instantiate = held("wasmtime_instance_pre_instantiate")
"""Instantiation runs no guest code: every module's start function is moved to an export the
host calls afterwards (``structure.detach_start``), and pre-initialised snapshots have none."""
memmove = ctypes.PyDLL(None).memmove
"""The C library's ``memmove(dest, src, n)``, called holding the GIL (``ctypes.memmove`` lets it
go): the request's copy into the guest's memory takes microseconds."""
memmove.restype, memmove.argtypes = (
    ctypes.c_void_p,
    [ctypes.c_void_p, ctypes.c_void_p, ctypes.c_size_t],
)

NO_FINALIZER = ctypes.cast(0, ctypes.CFUNCTYPE(None, ctypes.c_void_p))
"""A store's finalizer argument: none (the caller deletes the store)."""
