"""Pre-initialisation: a module's ``_initialize`` run once when it is compiled, not in every call.

A module that exports ``_initialize`` (a WASI reactor: standard Go, TinyGo, Rust's cdylibs)
has it called in every fresh instance before the hook; for standard Go that is the Go runtime's
start, about a million fuel units and most of the call. Here it is run once, at load, and the
instance it leaves becomes the module every call starts from (what Wizer does):

1. ``instrument``: the module with each of its own globals and tables exported
   (``SNAPSHOT_EXPORT``, ``TABLE_EXPORT`` + index), so the host can read them afterwards;
   compiled by the compile worker like any module. It is the module calls run when no snapshot
   is taken (the added exports change nothing a call can see), so the module is compiled twice,
   not three times.
2. ``run_initialize``: a fresh instance of it, in its own store, under the limits of a call
   with the sandbox's default limits (fuel, memory, epoch deadline, a slot of the instance
   pool, the host's own imports and an empty WASI), ``_initialize`` called; then its globals
   and its memory read.
3. ``snapshot``: the original module with those globals' values as their initialisers, the
   memory's current size as its minimum, the memory's non-zero bytes as its data segments, and
   no ``_initialize`` export; checked (``check_shape``), compiled and checked again by the
   module cache like the module itself.

Each call is still a fresh instance, now of the snapshot, so nothing a call does is seen by the
next. Nothing of the guest runs outside a call's bounds; the snapshot is just another module.
The module is used as it is (``_initialize`` in every call) when any step does not apply or
fails: a start function, imported globals, tables or memories, an initialiser that is not a
constant, a global of a reference type or a NaN, passive data segments (``memory.init`` could
still copy from them), a table that grew, ``_initialize`` trapping, running out of fuel or memory or
time, writing a log line (a call would no longer show it) or exiting, or a snapshot over the
module bounds. ``Refused`` says which, and whether the busy host may be the cause (``transient``:
the module cache then does not keep the module on disk, so a later load tries again).

What differs from running ``_initialize`` in the call: the fuel and time it took are no longer
part of each call's; the memory starts at the size ``_initialize`` left (so a call's memory limit
is compared with that); whatever ``_initialize`` drew from ``random_get`` or read from the
clocks is the same in every call (Go's runtime seeds its map hashing and ``math/rand`` there;
``crypto/rand`` still asks the host each time). Tables are not snapshotted: Go, TinyGo and Rust
do not change one in ``_initialize``; a table that grew is refused, one whose elements were
changed would not be seen.
"""

from __future__ import annotations

import ctypes
import functools
import math
import re
import struct
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, ParamSpec, TypeVar

import wasmtime

from modelserving.abi.shape import INITIALIZE, MEMORY
from modelserving.sandbox.engine import CallScope, SandboxEngine, current_scope, set_current_scope
from modelserving.sandbox.errors import error_line
from modelserving.sandbox.logs import LogSink
from modelserving.sandbox.settings import WASM_PAGE, Limits
from modelserving.sandbox.structure import _Malformed, _Reader, encode_section, leb128

SNAPSHOT_EXPORT = "modelserving:snapshot:global:"
"""The exports ``instrument`` adds, one per global defined by the module (its index follows)."""
TABLE_EXPORT = "modelserving:snapshot:table:"
"""And one per table, so that a table ``_initialize`` grew is seen."""
MERGE_GAP = 64
"""Non-zero runs of memory closer than this many zero bytes share one data segment."""

_IMPORT, _TABLE, _MEMORY, _GLOBAL, _EXPORT = 2, 4, 5, 6, 7
_START, _CODE, _DATA, _DATA_COUNT = 8, 10, 11, 12
_I32, _I64, _F32, _F64 = 0x7F, 0x7E, 0x7D, 0x7C
_CONSTS = {0x41: _I32, 0x42: _I64, 0x43: _F32, 0x44: _F64}
_END = 0x0B
_NON_ZERO_BYTE = re.compile(rb"[^\x00]")
_GAP = b"\x00" * MERGE_GAP
_CHUNK = 1 << 20
_FIRST_PIECE = 4096
P = ParamSpec("P")
R = TypeVar("R")
_RESERVED = b"modelserving:snapshot:"


def _find_gap(memory: Any, start: int, size: int) -> int:
    """Where the first ``MERGE_GAP`` zero bytes from ``start`` begin in ``memory`` (-1: none).
    ``bytes.find`` is linear whatever the bytes (a regular expression tried the gap again at
    every zero byte: 2 s for 64 MiB of 63 zeros and a one, found by a red-team helper); the
    bytes are copied in pieces that start at 4 KiB and double up to ``_CHUNK``, so a gap near
    ``start`` costs little and one far away at most twice the distance (a piece of 1 MiB for
    each of 100,000 runs took 7.8 s, found by a review helper)."""
    pos, piece = start, _FIRST_PIECE
    while pos < size:
        stop = min(size, pos + piece)
        found = bytes(memory[pos : min(size, stop + MERGE_GAP - 1)]).find(_GAP)
        if found >= 0:
            return pos + found
        pos = stop
        piece = min(piece * 2, _CHUNK)
    return -1


class Refused(Exception):
    """The module is not pre-initialised; the text says why. ``transient``: the busy host's
    doing, maybe (no free slot, the deadline passed): another load may take the snapshot."""

    def __init__(self, message: str, transient: bool = False) -> None:
        super().__init__(message)
        self.transient = transient


class NoInitialize(Refused):
    """The module exports no ``_initialize``: there is nothing to pre-initialise."""


@dataclass(frozen=True)
class Layout:
    """What ``snapshot`` needs of the module: its sections (id and body, in order) and the
    value types of the globals it defines."""

    sections: tuple[tuple[int, bytes], ...]
    globals: tuple[tuple[int, int], ...]  # (value type, mutability) of each defined global
    tables: int


@dataclass(frozen=True)
class Snapshot:
    """What ``_initialize`` left: each defined global's value, the memory's size, and its
    non-zero runs (start, bytes), runs closer than ``MERGE_GAP`` zero bytes merged."""

    globals: tuple[int | float, ...]
    size: int
    runs: tuple[tuple[int, bytes], ...]

    @classmethod
    def of(
        cls, values: tuple[int | float, ...], memory: Any, max_segments: int, max_bytes: int
    ) -> Snapshot:
        """From ``memory`` (any bytes-like object, read in place); Refused as soon as its runs
        pass ``max_segments`` or their bytes ``max_bytes``, so a hostile memory costs at most
        scans in C and copies of about twice the memory and 4 KiB a run (``_find_gap``), whatever
        its pattern."""
        runs: list[tuple[int, bytes]] = []
        total = 0
        size = len(memory)
        pos = 0
        while (found := _NON_ZERO_BYTE.search(memory, pos)) is not None:
            start = found.start()
            gap = _find_gap(memory, start, size)
            end = size if gap < 0 else gap
            while memory[end - 1] == 0:  # fewer than MERGE_GAP zeros end the memory
                end -= 1
            total += end - start
            if len(runs) == max_segments:
                raise Refused(f"its memory would take more than {max_segments} data segments")
            if total > max_bytes:
                raise Refused(f"its memory would take more than {max_bytes} bytes of data")
            runs.append((start, bytes(memory[start:end])))
            pos = end
        return cls(values, size, tuple(runs))


def _layout(data: bytes) -> Layout:
    """The sections and defined globals of ``data`` (a module ``check_shape`` accepted);
    Refused when the module has no ``_initialize`` or cannot be pre-initialised."""
    view = memoryview(data)
    sections: list[tuple[int, bytes]] = []
    pos = 8
    while pos < len(data):
        head = _Reader(view, pos, len(data))
        sid = head.byte()
        size = head.u32()
        sections.append((sid, bytes(view[head.pos : head.pos + size])))
        pos = head.pos + size
    ids = {sid for sid, _ in sections}
    if _START in ids:
        raise Refused("it has a start function")
    globals_: tuple[tuple[int, int], ...] = ()
    tables = 0
    names = [name for sid, body in sections if sid == _EXPORT for name, _, _ in _exports(body)]
    if INITIALIZE.encode() not in names:
        raise NoInitialize(f"it does not export {INITIALIZE}")
    if any(name.startswith(_RESERVED) for name in names):
        raise Refused(f"it exports a name that starts with {_RESERVED.decode()}")
    for sid, body in sections:
        if sid == _TABLE:
            tables = _Reader(body, 0, len(body)).u32()
        if sid == _IMPORT:
            _check_imports(body)
        elif sid == _GLOBAL:
            globals_ = _globals(body)
        elif sid == _MEMORY and _memory(body)[0] not in (0, 1):
            raise Refused("its memory is 64-bit or shared")
        elif sid == _DATA:
            _check_data(body)
    return Layout(tuple(sections), globals_, tables)


def is_instrumentation(name: str) -> bool:
    """Whether an export is one ``instrument`` added."""
    return name.startswith(_RESERVED.decode())


def _instrument(module: Layout) -> bytes:
    """The module with each defined global exported as ``SNAPSHOT_EXPORT<index>`` and each
    table as ``TABLE_EXPORT<index>``."""
    added = [(f"{SNAPSHOT_EXPORT}{i}".encode(), 3, i) for i in range(len(module.globals))]
    added += [(f"{TABLE_EXPORT}{i}".encode(), 1, i) for i in range(module.tables)]
    out = [b"\0asm\x01\0\0\0"]
    if not any(sid == _EXPORT for sid, _ in module.sections):
        raise Refused("it exports nothing")
    for sid, body in module.sections:
        if sid == _EXPORT:
            body = _encode_exports(_exports(body) + added)
        out.append(encode_section(sid, body))
    return b"".join(out)


def run_initialize(
    engine: SandboxEngine, module: wasmtime.Module, shape: Layout, limits: Limits
) -> Snapshot:
    """Call ``_initialize`` in a fresh instance of the instrumented ``module`` under ``limits``
    (as a call would run it) and read what it left; Refused when it does not end well."""
    settings = engine.settings
    outer = current_scope()
    sink = LogSink(settings.log_max_lines, settings.log_max_line_bytes, settings.log_max_bytes)
    scope = CallScope(sink, time.monotonic() + limits.timeout_ms / 1000)
    if not engine.slots.acquire(timeout=limits.timeout_ms / 1000):
        raise Refused("no instance slot became free", transient=True)
    try:
        store = wasmtime.Store(engine.engine)
    except BaseException:
        engine.slots.release()
        raise
    engine.running(store)  # the epoch advances: the deadline holds
    try:
        store.set_fuel(limits.fuel)
        store.set_epoch_deadline(engine.deadline_ticks(limits.timeout_ms))
        store.set_limits(
            memory_size=limits.memory_bytes,
            table_elements=settings.max_table_elements,
            instances=1,
            tables=4,
            memories=1,
        )
        store.set_wasi(wasmtime.WasiConfig())
        set_current_scope(scope)
        instance = engine.linker.instantiate_pre(module).instantiate(store)
        exports = instance.exports(store)
        tables = [_table(exports[f"{TABLE_EXPORT}{i}"]) for i in range(shape.tables)]
        initialize = exports[INITIALIZE]
        if not isinstance(initialize, wasmtime.Func):
            raise Refused(f"{INITIALIZE} is not a function")
        sizes = [t.size(store) for t in tables]
        initialize(store)
        if scope.late:
            raise Refused("_initialize passed its deadline", transient=True)
        if sink.close():
            raise Refused("_initialize wrote log lines (a call would no longer show them)")
        if [t.size(store) for t in tables] != sizes:
            raise Refused("_initialize grew a table")
        count = len(shape.globals)
        values = tuple(_value(exports[f"{SNAPSHOT_EXPORT}{i}"], store) for i in range(count))
        memory = exports[MEMORY]
        if not isinstance(memory, wasmtime.Memory):
            raise Refused("it exports no memory")
        size = memory.data_len(store)
        bounds = settings.module_bounds
        view = (
            (ctypes.c_char * size).from_address(ctypes.addressof(memory.data_ptr(store).contents))
            if size
            else b""
        )
        return Snapshot.of(
            values, memoryview(view).cast("B"), bounds.max_data_segments, bounds.max_data_bytes
        )
    except (wasmtime.Trap, wasmtime.WasmtimeError, wasmtime.ExitTrap) as exc:
        late = scope.late or (
            isinstance(exc, wasmtime.Trap) and exc.trap_code == wasmtime.TrapCode.INTERRUPT
        )
        raise Refused(f"_initialize failed: {error_line(exc)}", transient=late) from None
    except KeyError as exc:
        raise Refused(f"the instance has no export {exc}") from None
    finally:
        set_current_scope(outer)
        store.close()
        engine.done(store)
        engine.slots.release()


def _snapshot(module: Layout, state: Snapshot) -> bytes:
    """The module as ``_initialize`` left it (see the module's docstring)."""
    runs = state.runs
    data = leb128(len(runs)) + b"".join(
        b"\x00\x41" + _sleb(start) + bytes([_END]) + leb128(len(run)) + run for start, run in runs
    )
    pages = state.size // WASM_PAGE
    out = [b"\0asm\x01\0\0\0"]
    has_data = any(sid == _DATA for sid, _ in module.sections)
    for sid, body in module.sections:
        if sid == _GLOBAL:
            body = _encode_globals(module.globals, state.globals)
        elif sid == _MEMORY:
            flags, _, rest = _memory(body)
            body = leb128(1) + bytes([flags]) + leb128(pages) + rest
        elif sid == _EXPORT:
            body = _encode_exports([e for e in _exports(body) if e[0] != INITIALIZE.encode()])
        elif sid == _DATA:
            body = data
        elif sid == _DATA_COUNT:
            body = leb128(len(runs))
        out.append(encode_section(sid, body))
        if sid == _CODE and not has_data and runs:
            out.append(encode_section(_DATA, data))
    return b"".join(out)


def _check_imports(body: bytes) -> None:
    reader = _Reader(body, 0, len(body))
    for _ in range(reader.u32()):
        reader.skip(reader.u32())
        reader.skip(reader.u32())
        kind = reader.byte()
        if kind == 0:
            reader.u32()
        elif kind == 1:
            raise Refused("it imports a table")
        elif kind == 2:
            raise Refused("it imports a memory")
        elif kind == 3:
            raise Refused("it imports a global")
        else:
            raise Refused(f"it imports an extern of kind {kind}")


def _globals(body: bytes) -> tuple[tuple[int, int], ...]:
    reader = _Reader(body, 0, len(body))
    found = []
    for _ in range(reader.u32()):
        kind, mutable = reader.byte(), reader.byte()
        op = reader.byte()
        if kind not in (_I32, _I64, _F32, _F64) or _CONSTS.get(op) != kind:
            raise Refused("a global is not a number set by a constant")
        if kind in (_I32, _I64):
            _skip_leb(reader, 5 if kind == _I32 else 10)
        else:
            reader.skip(4 if kind == _F32 else 8)
        if reader.byte() != _END:
            raise Refused("a global's initialiser is not a single constant")
        found.append((kind, mutable))
    return tuple(found)


def _skip_leb(reader: _Reader, most: int) -> None:
    """Skip a LEB128 constant of at most ``most`` bytes (5 for an i32, 10 for an i64); a longer
    one is malformed (a constant of 10 MB of continuation bytes took 1.3 s of the controller's
    CPU to skip a byte at a time): Refused, and the compiler says what is wrong with it."""
    for _ in range(most):
        if not reader.byte() & 0x80:
            return
    raise Refused("a constant's encoding is longer than its type allows")


def _memory(body: bytes) -> tuple[int, int, bytes]:
    """A memory section's one memory: its flags, its minimum, and what follows (its maximum)."""
    reader = _Reader(body, 0, len(body))
    if reader.u32() != 1:
        raise Refused("it does not define exactly one memory")
    flags = reader.byte()
    minimum = reader.u32()
    return flags, minimum, body[reader.pos :]


def _check_data(body: bytes) -> None:
    reader = _Reader(body, 0, len(body))
    for _ in range(reader.u32()):
        flags = reader.byte()
        if flags != 0:
            raise Refused("it has passive or explicitly placed data segments")
        if reader.byte() != 0x41:
            raise Refused("a data segment's offset is not a constant")
        _skip_leb(reader, 5)
        if reader.byte() != _END:
            raise Refused("a data segment's offset is not a single constant")
        reader.skip(reader.u32())


def _exports(body: bytes) -> list[tuple[bytes, int, int]]:
    reader = _Reader(body, 0, len(body))
    found = []
    for _ in range(reader.u32()):
        length = reader.u32()
        name = body[reader.pos : reader.pos + length]
        reader.skip(length)
        kind = reader.byte()
        found.append((name, kind, reader.u32()))
    return found


def _encode_exports(exports: list[tuple[bytes, int, int]]) -> bytes:
    return leb128(len(exports)) + b"".join(
        leb128(len(name)) + name + bytes([kind]) + leb128(index) for name, kind, index in exports
    )


def _encode_globals(types: tuple[tuple[int, int], ...], values: tuple[int | float, ...]) -> bytes:
    out = [leb128(len(types))]
    for (kind, mutable), value in zip(types, values, strict=True):
        if kind == _I32:
            number = int(value) & 0xFFFFFFFF
            init = b"\x41" + _sleb(number - (1 << 32) if number >= 1 << 31 else number)
        elif kind == _I64:
            number = int(value) & 0xFFFFFFFFFFFFFFFF
            init = b"\x42" + _sleb(number - (1 << 64) if number >= 1 << 63 else number)
        elif kind == _F32:
            init = b"\x43" + struct.pack("<f", value)
        else:
            init = b"\x44" + struct.pack("<d", value)
        out.append(bytes([kind, mutable]) + init + bytes([_END]))
    return b"".join(out)


def _table(item: object) -> wasmtime.Table:
    if not isinstance(item, wasmtime.Table):
        raise Refused("a table export is not a table")
    return item


def _value(item: object, store: wasmtime.Store) -> int | float:
    if not isinstance(item, wasmtime.Global):
        raise Refused("a snapshot export is not a global")
    value = item.value(store)
    if isinstance(value, float) and math.isnan(value):
        raise Refused("a global holds a NaN (its bits would not survive)")
    if not isinstance(value, (int, float)):
        raise Refused("a global is not a number")
    return value


def _sleb(value: int) -> bytes:
    """``value`` as signed LEB128."""
    out = bytearray()
    while True:
        byte, value = value & 0x7F, value >> 7
        if (value == 0 and not byte & 0x40) or (value == -1 and byte & 0x40):
            out.append(byte)
            return bytes(out)
        out.append(byte | 0x80)


def _refusing_malformed(step: Callable[P, R]) -> Callable[P, R]:
    """``step``, with a section it cannot read (``check_shape`` reads only the counts of some)
    refused like any other reason the module cannot be pre-initialised."""

    @functools.wraps(step)
    def run(*args: P.args, **kwargs: P.kwargs) -> R:
        try:
            return step(*args, **kwargs)
        except _Malformed as exc:
            raise Refused(f"a section cannot be read: {exc}") from None

    return run


layout = _refusing_malformed(_layout)
instrument = _refusing_malformed(_instrument)
snapshot = _refusing_malformed(_snapshot)
