"""The compile worker: a short-lived process that compiles one module and prints the artifact.

The controller never compiles untrusted code itself. ``modelserving.sandbox.compiler`` starts
this file as a script (it imports only the standard library, wasmtime and
``modelserving.frames``, so it starts in about 0.2 s), hands it one module on stdin and reads
the serialized module back from stdout. The worker caps its own address space (``RLIMIT_AS``:
what it has mapped at start plus the operator's compile memory), exits when its parent dies, and
exits after one module, so no compilation can use more than its share or outlive its deadline
(the parent kills it then).

``engine_config`` is the one definition of the engine's compile settings: the controller's
engine and the worker's are built from it, so an artifact always matches the engine that loads
it (wasmtime checks that again when it deserializes).

Wire format: frames (``modelserving.frames``). Request: a JSON frame
(``stack``, ``memory``, ``moduleBytes``) and the module's frame. Reply: a status byte (``OK`` or
``REFUSED``) and a frame with the artifact or the error text. A worker out of memory exits with
status 3.
"""

from __future__ import annotations

import json
import os
import resource
import sys
import threading
import time
from typing import Any

import wasmtime

from modelserving.frames import frame, read_frame
from modelserving.sandbox.oom import first_to_go

OK, REFUSED = b"0", b"1"
EXIT_NO_MEMORY = 3
_WATCH_PERIOD_S = 0.2


def engine_config(stack_bytes: int) -> wasmtime.Config:
    """The compile-relevant settings every engine of the sandbox shares."""
    config = wasmtime.Config()
    config.consume_fuel = True
    config.epoch_interruption = True
    config.max_wasm_stack = stack_bytes
    config.cranelift_opt_level = "speed"
    config.wasm_threads = False
    config.wasm_component_model = False
    # Objects on a GC heap (GC structs and arrays, and exception objects, which wasmtime keeps
    # there too) would not count against the plugin's memory limit: a call could hold its
    # linear memory's limit and as much again in exceptions. No proposal that needs that heap
    # is on, nor typed function references, which only they use.
    config.wasm_gc = False
    config.wasm_exceptions = False
    config.wasm_function_references = False
    config.wasm_stack_switching = False
    return config


def _die_with_parent(parent: int) -> None:
    """Exit as soon as the controller is gone. A thread watches the parent's pid (the kernel's
    parent-death signal would follow the thread that started this process, and the
    controller's threads come and go); waiting for a request, the closed stdin ends it too."""

    def watch() -> None:
        while os.getppid() == parent:
            time.sleep(_WATCH_PERIOD_S)
        os._exit(1)

    if os.getppid() != parent:
        os._exit(1)
    threading.Thread(target=watch, name="parent-watch", daemon=True).start()


def _mapped_bytes() -> int:
    try:
        with open("/proc/self/statm") as statm:
            return int(statm.read().split()[0]) * os.sysconf("SC_PAGE_SIZE")
    except OSError:
        return 0


def _cap_memory(extra: int) -> None:
    mapped = _mapped_bytes()
    if mapped:
        resource.setrlimit(resource.RLIMIT_AS, (mapped + extra, mapped + extra))


_WARM_UP = """(module
  (type $binary (func (param i64 i64) (result i64)))
  (memory 1)
  (table 2 funcref)
  (global $g (mut i64) (i64.const 7))
  (elem (i32.const 0) $mix $floats)
  (func $mix (type $binary) (local $i i32)
    (loop $next
      (local.set $i (i32.add (local.get $i) (i32.const 1)))
      (i64.store (i32.and (local.get $i) (i32.const 255)) (i64.mul (local.get 0) (local.get 1)))
      (br_if $next (i32.lt_u (local.get $i) (i32.wrap_i64 (local.get 1)))))
    (block $a (block $b (br_table $a $b (i32.load8_u (i32.const 3)))))
    (memory.fill (i32.const 16) (i32.const 0) (i32.const 8))
    (memory.copy (i32.const 32) (i32.const 16) (i32.const 8))
    (drop (memory.grow (i32.const 0)))
    (global.set $g (i64.rotl (global.get $g) (i64.load (i32.const 8))))
    (select (i64.div_u (local.get 0) (i64.const 3)) (i64.rem_s (local.get 1) (i64.const 5))
      (i64.eqz (global.get $g))))
  (func $floats (type $binary)
    (i64.trunc_sat_f64_s (f64.sqrt (f64.add (f64.convert_i64_s (local.get 0))
      (f64.promote_f32 (f32.mul (f32.convert_i64_u (local.get 1)) (f32.const 1.5)))))))
  (func (export "run") (param i64) (result i64)
    (call_indirect (type $binary) (local.get 0) (i64.const 2) (i32.wrap_i64 (local.get 0)))))"""
"""Compiled while the worker waits for its module (off the caller's time): it starts the
compiler's thread pool, before the memory cap, and brings in the compiler's code for the common
instructions, which the first compile in a new process would otherwise page in."""


WARM_STACK = 512 * 1024
"""The stack size of the engine built ahead (the sandbox's default ``max_wasm_stack_bytes``): a
request with another one gets an engine of its own (building one takes about 0.1 ms)."""


def _warm_up() -> wasmtime.Engine:
    """The engine for a request of the default stack size, after a compile with it."""
    engine = wasmtime.Engine(engine_config(WARM_STACK))
    wasmtime.Module(engine, bytes(wasmtime.wat2wasm(_WARM_UP))).serialize()
    return engine


_NO_MEMORY = "Cannot allocate memory (os error 12)"
"""The last cause of an error whose allocation the address-space cap refused."""


def _compile(params: dict[str, Any], module: bytes, warm: wasmtime.Engine) -> tuple[bytes, bytes]:
    stack = int(params["stack"])
    engine = warm if stack == WARM_STACK else wasmtime.Engine(engine_config(stack))
    # Functions compile in parallel. The thread pool (its threads and their stacks) was started
    # before the cap, by ``_warm_up``, so the cap is what the untrusted module's compile may
    # add. An allocation the cap refuses then aborts the process, whichever thread asked
    # (reported as out of memory); measured: no refusal waits for the deadline.
    _cap_memory(int(params["memory"]))
    try:
        compiled = wasmtime.Module(engine, module)
        return OK, bytes(compiled.serialize())
    except wasmtime.WasmtimeError as exc:
        text = str(exc)
        if text.rstrip().endswith(_NO_MEMORY):  # e.g. the artifact's buffer, mmap refused
            os._exit(EXIT_NO_MEMORY)
        return REFUSED, text.encode("utf-8", errors="replace")


def main() -> None:
    _die_with_parent(int(sys.argv[1]))
    first_to_go()
    warm = _warm_up()
    stdin, stdout = sys.stdin.buffer, sys.stdout.buffer
    try:
        header = read_frame(stdin, 4096)
        if header is None:
            return
        params = json.loads(header)
        module = read_frame(stdin, int(params["moduleBytes"]))
        if module is None:
            return
        status, body = _compile(params, module, warm)
    except MemoryError:
        os._exit(EXIT_NO_MEMORY)
    stdout.write(status + frame(body))
    stdout.flush()
    # The reply is complete: end now. The controller waits for the end of both pipes, which
    # the interpreter's shutdown (freeing the compiled module, the engine, its threads) would
    # hold for 4 to 44 ms (measured); closing them first ends that wait at once.
    os.close(1)
    os.close(2)
    os._exit(0)


if __name__ == "__main__":
    main()
