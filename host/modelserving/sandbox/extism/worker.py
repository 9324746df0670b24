"""The Extism worker: a long-lived process that runs the Extism-flavoured plugins of one sandbox.

The controller never runs Extism itself. Nothing in-process can interrupt what Extism does
before a call: creating a plugin instantiates the module (its start function and ``_initialize``
run), and a call instantiates it again, both before Extism's timer starts, and a host function
such as WASI ``random_get`` cannot be interrupted at all. So
``modelserving.sandbox.extism.call`` starts this file as a script (standard library,
``modelserving.frames`` and extism-sys's cffi binding only, so it starts in about 0.1 s), waits
for each answer at most as long as the request's deadline allows, and kills the worker when it
is late.

What the worker does for a call: it finds the compiled plugin for (module digest, fuel, memory
limit) in a bounded LRU (asking the controller for the module's bytes when it has forgotten
them), compiles it when missing, answers ``ready``, then creates a fresh plugin, calls the
function under a watchdog that cancels the call at the deadline (repeatedly: a cancel sent before
Extism's timer has started is lost; the manifest sets no timeout of Extism's own, so a new
deadline needs no new compiled plugin), and answers with facts: whether the plugin could be
created, the function's status, Extism's own error text, the guest's error text, the output, the
time taken and whether the watchdog fired. It never classifies; the controller does, from these
facts.

Two host functions are defined for every plugin:

- ``extism:host/env.error_set`` shadows Extism's kernel function, so the guest's error text is
  read here (at most ``MAX_GUEST_ERROR`` bytes) and never reaches Extism: every error text Extism
  reports is then its own (fuel, timeout, memory, traps), which a guest cannot imitate;
- ``wasi_snapshot_preview1.poll_oneoff`` (WASI modules) answers ENOTSUP at once, as for
  native-flavour modules: a sleep in native code would outlast the call's deadline.

The worker exits when its request stream ends or when the liveness pipe it is given closes (the
controller process ended, however it ended). Its standard output is the reply stream only: file
descriptor 1 is pointed at standard error before Extism is loaded.

Wire format: frames (``modelserving.frames``). A request is a JSON frame
and a payload frame (the call's input, the module's bytes, or empty); so is a reply. Requests:
``{"op": "run", ...}`` (the ``function`` is null to create the plugin only), ``{"op": "module",
"digest": ...}`` (only after a ``module`` reply), ``{"op": "stats"}``.
"""

from __future__ import annotations

import base64
import json
import os
import sys
import threading
import time
from collections import OrderedDict
from typing import Any, BinaryIO

from modelserving.frames import frame, read_frame

MAX_HEADER = 64 * 1024
MAX_GUEST_ERROR = 1024  # the guest sets this text and may make it huge
MAX_EXTISM_ERROR = 4096
_ENOTSUP = 58
_I32, _I64 = 0, 1  # ExtismValType
_HOST_FUNCTION = (
    "void(ExtismCurrentPlugin*, const ExtismVal*, ExtismSize, ExtismVal*, ExtismSize, void*)"
)
_CANCEL_EVERY = 0.002
_U64 = (1 << 64) - 1


class _GuestError:
    """What the guest last gave ``error_set`` during the current call."""

    def __init__(self) -> None:
        self.text: str | None = None
        self.cut = False

    def clear(self) -> None:
        self.text, self.cut = None, False


class _Watchdog:
    """Cancels the running call once its deadline has passed, every ``_CANCEL_EVERY`` seconds
    until the call returns (a cancel Extism's timer gets before the call started is dropped)."""

    def __init__(self, ffi: Any, lib: Any) -> None:
        self._ffi, self._lib = ffi, lib
        self._cond = threading.Condition()
        self._handle: Any = None
        self._deadline = 0.0
        self._fired = False
        threading.Thread(target=self._run, name="extism-watchdog", daemon=True).start()

    def arm(self, handle: Any, deadline: float) -> None:
        with self._cond:
            self._handle, self._deadline, self._fired = handle, deadline, False
            self._cond.notify()

    def disarm(self) -> bool:
        """Stop watching (before the plugin is freed); whether a cancel was sent."""
        with self._cond:
            self._handle = None
            return self._fired

    def _run(self) -> None:
        with self._cond:
            while True:
                if self._handle is None:
                    self._cond.wait()
                    continue
                left = self._deadline - time.monotonic()
                if left > 0:
                    self._cond.wait(left)
                    continue
                self._fired = True
                self._lib.extism_plugin_cancel(self._handle)
                self._cond.wait(_CANCEL_EVERY)


class _Worker:
    def __init__(self, ffi: Any, lib: Any, size: int) -> None:
        self._ffi, self._lib = ffi, lib
        self._size = max(1, size)
        self._compiled: OrderedDict[tuple[Any, ...], Any] = OrderedDict()
        self._modules: OrderedDict[str, bytes] = OrderedDict()
        self._guest = _GuestError()
        self._watchdog = _Watchdog(ffi, lib)
        self._error_set = ffi.callback(_HOST_FUNCTION, self._on_error_set)
        self._poll_oneoff = ffi.callback(_HOST_FUNCTION, _refuse_sleep)

    # -- host functions -------------------------------------------------------------------

    def _on_error_set(
        self, current: Any, inputs: Any, n_inputs: int, outputs: Any, n_outputs: int, data: Any
    ) -> None:
        """``extism:host/env.error_set``: the guest's text is kept here, never in Extism."""
        try:
            handle = int(inputs[0].v.i64) & _U64
            self._guest.clear()
            if handle == 0:
                return
            length = int(self._lib.extism_current_plugin_memory_length(current, handle))
            if length == 0:
                return
            base = self._lib.extism_current_plugin_memory(current)
            raw = bytes(self._ffi.buffer(base + handle, min(length, MAX_GUEST_ERROR)))
            self._guest.text = raw.decode("utf-8", errors="replace")
            self._guest.cut = length > MAX_GUEST_ERROR
        except Exception:  # a host function must not raise into Extism
            self._guest.text, self._guest.cut = "(the error text could not be read)", False

    def _functions(self, wasi: bool) -> list[Any]:
        """New host functions: Extism moves a function into the first plugin it is given."""
        lib = self._lib
        i32, i64 = [_I32], [_I64]
        error_set = lib.extism_function_new(
            b"error_set", i64, 1, self._ffi.NULL, 0, self._error_set, self._ffi.NULL, self._ffi.NULL
        )
        lib.extism_function_set_namespace(error_set, b"extism:host/env")
        functions = [error_set]
        if wasi:
            poll = lib.extism_function_new(
                b"poll_oneoff",
                i32 * 4,
                4,
                i32,
                1,
                self._poll_oneoff,
                self._ffi.NULL,
                self._ffi.NULL,
            )
            lib.extism_function_set_namespace(poll, b"wasi_snapshot_preview1")
            functions.append(poll)
        return functions

    # -- requests -------------------------------------------------------------------------

    def stats(self) -> dict[str, Any]:
        return {"state": "stats", "compiled": len(self._compiled), "modules": len(self._modules)}

    def remember(self, digest: str, data: bytes) -> None:
        self._modules[digest] = data
        self._modules.move_to_end(digest)
        while len(self._modules) > self._size:
            self._modules.popitem(last=False)

    def module_bytes(self, digest: str) -> bytes | None:
        data = self._modules.get(digest)
        if data is not None:
            self._modules.move_to_end(digest)
        return data

    def compiled(self, request: dict[str, Any], data: bytes) -> tuple[Any, str | None]:
        """The compiled plugin for the request's module and limits (compiled when missing), or
        None and Extism's reason."""
        key = _key(request)
        found = self._compiled.get(key)
        if found is not None:
            self._compiled.move_to_end(key)
            return found, None
        found, error = self._compile(request, data)
        if found is not None:
            self._compiled[key] = found
            while len(self._compiled) > self._size:
                _, evicted = self._compiled.popitem(last=False)
                self._lib.extism_compiled_plugin_free(evicted)
        return found, error

    def cached(self, request: dict[str, Any]) -> Any:
        key = _key(request)
        found = self._compiled.get(key)
        if found is not None:
            self._compiled.move_to_end(key)
        return found

    def _compile(self, request: dict[str, Any], data: bytes) -> tuple[Any, str | None]:
        ffi, lib = self._ffi, self._lib
        manifest = json.dumps(
            {
                "wasm": [{"data": base64.b64encode(data).decode()}],
                "memory": {"max_pages": int(request["pages"])},
            }
        ).encode()
        wasi = bool(request["wasi"])
        functions = self._functions(wasi)
        errmsg = ffi.new("char**")
        try:
            pointer = lib.extism_compiled_plugin_new_with_fuel_limit(
                manifest,
                len(manifest),
                ffi.new("ExtismFunction*[]", functions),
                len(functions),
                wasi,
                int(request["fuel"]),
                errmsg,
            )
        finally:
            for function in functions:
                lib.extism_function_free(function)
        if pointer == ffi.NULL:
            return None, self._take_error(errmsg)
        return pointer, None

    def _take_error(self, errmsg: Any) -> str:
        if errmsg[0] == self._ffi.NULL:
            return ""
        text = self._ffi.string(errmsg[0], MAX_EXTISM_ERROR).decode("utf-8", errors="replace")
        self._lib.extism_plugin_new_error_free(errmsg[0])
        return str(text)

    def run(
        self, compiled: Any, request: dict[str, Any], payload: bytes
    ) -> tuple[dict[str, Any], bytes]:
        """Create a fresh plugin of ``compiled`` and call the request's function (if any)."""
        ffi, lib = self._ffi, self._lib
        start = time.monotonic()
        self._guest.clear()
        errmsg = ffi.new("char**")
        plugin = lib.extism_plugin_new_from_compiled(compiled, errmsg)
        if plugin == ffi.NULL:
            return _facts(start, created=False, extismError=self._take_error(errmsg)), b""
        try:
            function = request.get("function")
            if function is None:
                return _facts(start, created=True), b""
            deadline = start + int(request["deadlineMs"]) / 1000
            self._watchdog.arm(lib.extism_plugin_cancel_handle(plugin), deadline)
            try:
                status = lib.extism_plugin_call(
                    plugin, str(function).encode(), payload, len(payload)
                )
            finally:
                cancelled = self._watchdog.disarm()
            error = lib.extism_plugin_error(plugin)
            extism_error = None
            if error != ffi.NULL:
                raw = ffi.string(error, MAX_EXTISM_ERROR)
                extism_error = raw.decode("utf-8", errors="replace")
            size = int(lib.extism_plugin_output_length(plugin))
            output = b""
            if status == 0 and extism_error is None and size <= int(request["maxResponse"]):
                output = bytes(ffi.buffer(lib.extism_plugin_output_data(plugin), size))
            facts = _facts(
                start,
                created=True,
                status=int(status),
                extismError=extism_error,
                guestError=self._guest.text,
                guestErrorCut=self._guest.cut,
                outputBytes=size,
                cancelled=cancelled,
            )
            return facts, output
        finally:
            lib.extism_plugin_free(plugin)


def _key(request: dict[str, Any]) -> tuple[Any, ...]:
    return (
        str(request["digest"]),
        bool(request["wasi"]),
        int(request["fuel"]),
        int(request["pages"]),
    )


def _facts(start: float, **facts: Any) -> dict[str, Any]:
    return {"state": "done", "elapsedUs": (time.monotonic() - start) * 1e6, **facts}


def _refuse_sleep(
    current: Any, inputs: Any, n_inputs: int, outputs: Any, n_outputs: int, data: Any
) -> None:
    """WASI ``poll_oneoff``: ENOTSUP, at once."""
    outputs[0].v.i32 = _ENOTSUP


def _exit_with_parent(liveness: int) -> None:
    """Exit as soon as the controller's end of the liveness pipe closes (the controller ended,
    even while this process is busy in a call). A pipe rather than PR_SET_PDEATHSIG, whose
    signal follows the controller *thread* that started the worker, not the process."""

    def watch() -> None:
        try:
            while os.read(liveness, 64):
                pass
        finally:
            os._exit(0)

    threading.Thread(target=watch, name="extism-liveness", daemon=True).start()


def _serve(worker: _Worker, stdin: BinaryIO, stdout: BinaryIO) -> None:
    while True:
        header = read_frame(stdin, MAX_HEADER)
        if header is None:
            return
        request = json.loads(header)
        payload = read_frame(stdin, int(request.get("payloadBytes", 0)))
        if payload is None:
            return
        if request["op"] == "stats":
            _reply(stdout, worker.stats())
            continue
        compiled = worker.cached(request)
        if compiled is None:
            data = worker.module_bytes(str(request["digest"]))
            if data is None:
                _reply(stdout, {"state": "module"})
                module_header = read_frame(stdin, MAX_HEADER)
                if module_header is None:
                    return
                given = json.loads(module_header)
                data = read_frame(stdin, int(given["payloadBytes"]))
                if data is None:
                    return
                worker.remember(str(given["digest"]), data)
            compiled, error = worker.compiled(request, data)
            if compiled is None:
                _reply(stdout, {"state": "refused", "extismError": error})
                continue
        _reply(stdout, {"state": "ready"})
        facts, output = worker.run(compiled, request, payload)
        _reply(stdout, facts, output)


def _reply(stdout: BinaryIO, header: dict[str, Any], payload: bytes = b"") -> None:
    stdout.write(frame(json.dumps(header).encode()) + frame(payload))
    stdout.flush()


def main() -> None:
    liveness, size = int(sys.argv[1]), int(sys.argv[2])
    _exit_with_parent(liveness)
    # The replies get their own descriptor; whatever else writes to stdout goes to stderr.
    replies = os.fdopen(os.dup(1), "wb")
    os.dup2(2, 1)
    from extism_sys import ffi, lib  # type: ignore[import-untyped]

    _serve(_Worker(ffi, lib, size), sys.stdin.buffer, replies)


if __name__ == "__main__":
    main()
