"""The one wasmtime Engine of a sandbox: fuel, epoch interruption, bounded stack, and the ticker.

Fuel bounds the instructions a call may run and the epoch deadline its wall-clock time: a daemon
thread advances the engine's epoch every ``epoch_tick_ms`` while any store may run code. The
``Linker`` defines the only host imports a module may use: ``modelserving.log`` and WASI
preview 1 (configured per call with no preopened directories, environment or arguments).
"""

from __future__ import annotations

import ctypes
import hashlib
import os
import queue
import threading
import time
import weakref
from importlib.metadata import version
from typing import Any

import wasmtime
from wasmtime import _ffi as ffi

from modelserving.abi.shape import LOG_FUNC, LOG_MODULE, WASI_MODULE
from modelserving.sandbox.compile_worker import engine_config
from modelserving.sandbox.logs import LogSink, level_name
from modelserving.sandbox.settings import SandboxSettings

WASMTIME_VERSION = version("wasmtime")


class CallScope:
    """What the host functions of the call running on this thread need: its log sink, its
    deadline (``time.monotonic``), and whether a host function stopped it at that deadline."""

    __slots__ = ("deadline", "late", "sink")

    def __init__(self, sink: LogSink | None, deadline: float) -> None:
        self.sink = sink
        self.deadline = deadline
        self.late = False


_current = threading.local()


def current_scope() -> CallScope | None:
    """The scope of the call running on this thread, if any."""
    return getattr(_current, "scope", None)


def set_current_scope(scope: CallScope | None) -> None:
    _current.scope = scope


def current_sink() -> LogSink | None:
    """The log sink of the call running on this thread, if any."""
    scope = current_scope()
    return scope.sink if scope is not None else None


class _Ticker(threading.Thread):
    """Advances an engine's epoch on a fixed period while any store of the engine may run code
    (``running``, ``done``), until the engine is gone. With nothing running it sleeps: a
    controller without WebAssembly calls under way spends no CPU on ticks (a 5 ms tick cost
    about 1.3 % of a core, and a wake-up of the interpreter every tick)."""

    def __init__(self, engine: wasmtime.Engine, period_s: float) -> None:
        super().__init__(name="wasm-epoch-ticker", daemon=True)
        self._engine = weakref.ref(engine)
        self._period = period_s
        self._halt = threading.Event()  # not _stop: Thread has its own
        self._running: set[object] = set()
        self._asleep = False
        self._wake = threading.Event()
        self.ticks = 0
        """Epoch increments so far (for tests)."""

    def running(self, token: object) -> None:
        """A store (``token``) may run code from now until ``done(token)``."""
        self._running.add(token)
        if self._asleep:
            self._wake.set()

    def done(self, token: object) -> None:
        self._running.discard(token)

    def run(self) -> None:
        # Set operations and attribute writes are atomic under the GIL. Going to sleep, the
        # flag is set and the wake-up cleared before the set is looked at again, so a store
        # that starts meanwhile is either seen here or wakes the wait.
        while not self._halt.is_set():
            if not self._running:
                self._asleep = True
                self._wake.clear()
                if not self._running:
                    self._wake.wait()
                self._asleep = False
                continue
            if self._halt.wait(self._period):
                return
            engine = self._engine()
            if engine is None:
                return
            engine.increment_epoch()
            self.ticks += 1
            del engine

    def stop(self) -> None:
        self._halt.set()
        self._wake.set()


def _log_import(caller: wasmtime.Caller, level: int, ptr: int, length: int) -> None:
    """``modelserving.log(level, ptr, len)``: never traps; a bad range is noted instead."""
    sink = current_sink()
    if sink is None:
        return
    memory = caller.get("memory")
    if not isinstance(memory, wasmtime.Memory):
        sink.add("warn", b"log call from a module without an exported memory", "host")
        return
    if sink.full:
        sink.dropped += 1
        return
    size = memory.data_len(caller)
    start, count = ptr & 0xFFFFFFFF, length & 0xFFFFFFFF
    if start + count > size:
        sink.add("warn", f"log call with out-of-range text ({start}+{count})".encode(), "host")
        return
    # At most one line's worth plus one byte is copied (enough for the sink to mark the cut).
    take = min(count, sink.max_line_bytes + 1)
    raw = ctypes.string_at(ctypes.addressof(memory.data_ptr(caller).contents) + start, take)
    sink.add(level_name(level), raw, cut=count > take)


_EBADF = 8
_EFAULT = 21
_STD_STREAMS = {1: "stdout", 2: "stderr"}
_MAX_STREAM_WRITE = 64 * 1024
_MAX_IOVECS = 1024
_ENOTSUP = 58


def _fd_write(caller: wasmtime.Caller, fd: int, iovs: int, count: int, written: int) -> int:
    """WASI ``fd_write``, served by the host: stdout and stderr become log lines of the current
    call; every other file descriptor is EBADF, as the guest has no files. The work per call is
    bounded (at most ``_MAX_IOVECS`` vectors and ``_MAX_STREAM_WRITE`` bytes are taken, and
    nothing once the call's log budget is spent); a partial count is reported, as WASI allows."""
    source = _STD_STREAMS.get(fd)
    if source is None:
        return _EBADF
    memory = caller.get("memory")
    if not isinstance(memory, wasmtime.Memory):
        return _EFAULT
    size = memory.data_len(caller)
    iovs, written = iovs & 0xFFFFFFFF, written & 0xFFFFFFFF
    count = min(count & 0xFFFFFFFF, _MAX_IOVECS)
    if iovs + 8 * count > size or written + 4 > size:
        return _EFAULT
    base = ctypes.addressof(memory.data_ptr(caller).contents)
    vectors = memoryview(ctypes.string_at(base + iovs, 8 * count)).cast("I")
    sink = current_sink()
    total, chunks, budget = 0, [], _MAX_STREAM_WRITE
    for i in range(count):
        ptr, length = vectors[2 * i], vectors[2 * i + 1]
        if ptr + length > size:
            return _EFAULT
        take = min(length, budget)
        if sink is not None and not sink.full and take:
            chunks.append(ctypes.string_at(base + ptr, take))
        total += take
        budget -= take
        if budget <= 0:
            break
    ctypes.memmove(base + written, total.to_bytes(4, "little"), 4)
    if sink is not None and chunks:
        sink.write_stream(source, b"".join(chunks))
    return 0


_RANDOM_CHUNK = 256 * 1024
DEADLINE_TRAP = "host function stopped at the call's deadline"


def _random_get(caller: wasmtime.Caller, buf: int, length: int) -> int:
    """WASI ``random_get``, served by the host in chunks, so that a guest asking for hundreds of
    MiB is stopped at the call's deadline (a trap the call reports as Timeout) instead of
    holding the thread past it: the engine's epoch is only checked in guest code."""
    memory = caller.get("memory")
    if not isinstance(memory, wasmtime.Memory):
        return _EFAULT
    start, count = buf & 0xFFFFFFFF, length & 0xFFFFFFFF
    if start + count > memory.data_len(caller):
        return _EFAULT
    scope = current_scope()
    base = ctypes.addressof(memory.data_ptr(caller).contents) + start
    done = 0
    while done < count:
        if scope is not None and time.monotonic() > scope.deadline:
            scope.late = True
            raise wasmtime.Trap(DEADLINE_TRAP)
        take = min(_RANDOM_CHUNK, count - done)
        ctypes.memmove(base + done, os.urandom(take), take)
        done += take
    return 0


def _no_sleep(caller: wasmtime.Caller, subs: int, events: int, count: int, nevents: int) -> int:
    """WASI ``poll_oneoff``, refused: a sleep in native code would outlast every deadline."""
    return _ENOTSUP


class Slots:
    """The instance pool's slots, as tokens in a queue (C code, a fraction of a microsecond when
    one is free: a ``threading.Semaphore`` takes a Python condition on every call)."""

    def __init__(self, count: int) -> None:
        self._free: queue.SimpleQueue[None] = queue.SimpleQueue()
        for _ in range(count):
            self._free.put(None)

    def acquire(self, timeout: float) -> bool:
        """Take a slot, waiting at most ``timeout`` seconds; whether one was taken."""
        try:
            self._free.get(timeout=timeout)
        except queue.Empty:
            return False
        return True

    def release(self) -> None:
        """Give back a slot taken with ``acquire``."""
        self._free.put(None)

    @property
    def free(self) -> int:
        """How many slots are free now."""
        return self._free.qsize()


class SandboxEngine:
    """The engine, its linker and its epoch ticker, shared by every module of one sandbox."""

    def __init__(self, settings: SandboxSettings) -> None:
        self.settings = settings
        config = engine_config(settings.max_wasm_stack_bytes)
        _pooling(config, settings)
        self.engine = wasmtime.Engine(config)
        self.key = engine_key(settings)
        self.linker = wasmtime.Linker(self.engine)
        self.linker.define_wasi()
        i32 = wasmtime.ValType.i32()
        # stdout and stderr become log lines through our own fd_write (wasmtime's custom output
        # callbacks can fire from its own threads, even while the interpreter exits).
        self.linker.allow_shadowing = True
        self.linker.define_func(
            WASI_MODULE,
            "fd_write",
            wasmtime.FuncType([i32, i32, i32, i32], [i32]),
            _fd_write,
            access_caller=True,
        )
        self.linker.define_func(
            WASI_MODULE,
            "random_get",
            wasmtime.FuncType([i32, i32], [i32]),
            _random_get,
            access_caller=True,
        )
        self.linker.define_func(
            WASI_MODULE,
            "poll_oneoff",
            wasmtime.FuncType([i32, i32, i32, i32], [i32]),
            _no_sleep,
            access_caller=True,
        )
        self.linker.allow_shadowing = False
        self.linker.define_func(
            LOG_MODULE,
            LOG_FUNC,
            wasmtime.FuncType([i32, i32, i32], []),
            _log_import,
            access_caller=True,
        )
        self.slots = Slots(settings.pool_slots)
        self._ticker = _Ticker(self.engine, settings.epoch_tick_ms / 1000)
        self._ticker.start()
        weakref.finalize(self, self._ticker.stop)

    def running(self, token: object) -> None:
        """A store of this engine (``token``) may run code from now until ``done(token)``: the
        epoch advances (every store that gets an epoch deadline must say so)."""
        self._ticker.running(token)

    def done(self, token: object) -> None:
        self._ticker.done(token)

    @property
    def ticks(self) -> int:
        """Epoch increments so far (for tests)."""
        return self._ticker.ticks

    def deadline_ticks(self, timeout_ms: int) -> int:
        """Epoch ticks for a timeout; one more, as the current tick may be nearly over."""
        tick = self.settings.epoch_tick_ms
        return -(-timeout_ms // tick) + 1

    def context_set_fuel(self, context: Any, fuel: int) -> None:
        error = ffi.wasmtime_context_set_fuel(context, fuel)
        if error:
            raise wasmtime.WasmtimeError._from_ptr(error)


def _pooling(config: wasmtime.Config, settings: SandboxSettings) -> None:
    """Instances come from a pool of preallocated slots, so a fresh instance per call costs no
    mmap/munmap; a slot's first ``pool_keep_resident_bytes`` of memory are reset with memset, the
    rest is returned to the kernel."""
    pool = ffi.wasmtime_pooling_allocation_config_new()
    ffi.wasmtime_pooling_allocation_config_total_core_instances_set(pool, settings.pool_slots)
    ffi.wasmtime_pooling_allocation_config_total_memories_set(pool, settings.pool_slots)
    ffi.wasmtime_pooling_allocation_config_total_tables_set(pool, settings.pool_slots)
    ffi.wasmtime_pooling_allocation_config_max_memory_size_set(
        pool, settings.max_memory_mib * 1024 * 1024
    )
    ffi.wasmtime_pooling_allocation_config_table_elements_set(pool, settings.max_table_elements)
    ffi.wasmtime_pooling_allocation_config_max_tables_per_module_set(pool, 4)
    ffi.wasmtime_pooling_allocation_config_linear_memory_keep_resident_set(
        pool, settings.pool_keep_resident_bytes
    )
    ffi.wasmtime_pooling_allocation_config_table_keep_resident_set(pool, 64 * 1024)
    ffi.wasmtime_pooling_allocation_config_max_unused_warm_slots_set(pool, settings.pool_slots)
    ffi.wasmtime_pooling_allocation_strategy_set(config.ptr(), pool)
    ffi.wasmtime_pooling_allocation_config_delete(pool)


def engine_key(settings: SandboxSettings) -> str:
    """What a precompiled artifact depends on: wasmtime's version and the engine settings."""
    text = "|".join(
        (
            f"wasmtime={WASMTIME_VERSION}",
            "fuel=1",
            "epoch=1",
            f"stack={settings.max_wasm_stack_bytes}",
            "opt=speed",
            "threads=0",
            "component=0",
            "gc=0",
            "exceptions=0",
            "function-references=0",
            "stack-switching=0",
            "start=export",  # start functions are detached to an export (structure.detach_start)
            f"preinit={int(settings.preinitialize)}",  # an artifact may be of a snapshot (preinit)
        )
    )
    return hashlib.sha256(text.encode()).hexdigest()[:16]
