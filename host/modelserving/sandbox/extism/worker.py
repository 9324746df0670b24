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
limit) in a bounded LRU; when it is missing, it asks the controller for the module's bytes and
for what Extism's compile cache held for that module (``Stage``), and compiles it; it answers
``ready`` (with the cache files Extism wrote, if it wrote any), then creates a fresh plugin,
calls the function under a watchdog that cancels the call at the deadline (repeatedly: a cancel
sent before Extism's timer has started is lost; the manifest sets no timeout of Extism's own, so
a new deadline needs no new compiled plugin), and answers with facts: whether the plugin could be
created, the function's status, Extism's own error text, the guest's error text, the output, the
time taken and whether the watchdog fired. It never classifies; the controller does, from these
facts.

Two host functions are defined for every plugin:

- ``extism:host/env.error_set`` shadows Extism's kernel function, so the guest's error text is
  read here (at most ``MAX_GUEST_ERROR`` bytes) and never reaches Extism: every error text Extism
  reports is then its own (fuel, timeout, memory, traps), which a guest cannot imitate;
- ``wasi_snapshot_preview1.poll_oneoff`` (WASI modules) answers ENOTSUP at once, as for
  native-flavour modules: a sleep in native code would outlast the call's deadline.

Extism's compile cache (wasmtime's, which reads a file by path, through symlinks, blocking on a
FIFO, and loads it as native code without checking its owner or mode) reads only from this
worker's own stage directory (``Stage``): the controller creates it (mode 0700, in its private
cache directory) and passes its path; before each compile the worker empties it and writes
there, itself, the files the controller read under the artifact rules
(``modelserving.sandbox.artifacts``) for that module. Without a stage directory,
``EXTISM_CACHE_CONFIG`` is empty: Extism caches nothing and reads no configuration file.

The worker exits when its request stream ends or when the liveness pipe it is given closes (the
controller process ended, however it ended). Its standard output is the reply stream only: file
descriptor 1 is pointed at standard error before Extism is loaded.

Wire format: frames (``modelserving.frames``). A request is a JSON frame
and a payload frame (the call's input, the module's bytes, or empty); so is a reply. Requests:
``{"op": "run", ...}`` (the ``function`` is null to create the plugin only), ``{"op": "module",
"digest": ..., "moduleBytes": ..., "cacheFiles": [[name, size], ...]}`` (only after a
``module`` reply; the payload is the module and then each cache file), ``{"op": "stats"}``.
The ``ready`` reply names the cache files it carries the same way (none unless Extism wrote
one).
"""

from __future__ import annotations

import base64
import json
import os
import re
import shutil
import stat
import sys
import threading
import time
from collections import OrderedDict
from typing import Any, BinaryIO

from modelserving.frames import frame, read_frame
from modelserving.sandbox.oom import first_to_go

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
CACHE_FILE = re.compile(r"modules/[A-Za-z0-9][A-Za-z0-9._+-]{0,127}/[A-Za-z0-9_-]{43}")
"""The name of a file of wasmtime's compile cache, relative to its directory: the compiler's
version and the base64 of a sha256 (``.stats`` files and unfinished writes do not match)."""
MAX_CACHE_FILES = 16
_WRITE_FLAGS = os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW | os.O_CLOEXEC
_READ_FLAGS = os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK | os.O_CLOEXEC


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
        return {"state": "stats", "compiled": len(self._compiled)}

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


class Stage:
    """The directory Extism's compile cache reads and writes: this worker's own (created by the
    controller, mode 0700), emptied and filled with the controller's checked files before each
    compile; or none (``path`` empty), and then no cache at all."""

    def __init__(self, path: str) -> None:
        # The configuration lies beside the cache directory: wasmtime's cleanup deletes files
        # it does not know from the cache directory.
        self.path = os.path.join(path, "cache") if path else ""
        config = ""
        if path:
            config = os.path.join(path, "wasmtime-cache.toml")
            _write_new(config, f"[cache]\ndirectory = {json.dumps(self.path)}\n".encode())
        # read by Extism at every compile; empty: no cache, and no configuration file read
        os.environ["EXTISM_CACHE_CONFIG"] = config

    def fill(self, files: list[tuple[str, bytes]]) -> None:
        """Empty the cache directory, then write ``files`` (named by ``CACHE_FILE``) into it."""
        if not self.path:
            return
        shutil.rmtree(os.path.join(self.path, "modules"), ignore_errors=True)
        for name, data in files:
            if CACHE_FILE.fullmatch(name):
                path = os.path.join(self.path, name)
                os.makedirs(os.path.dirname(path), mode=0o700, exist_ok=True)
                _write_new(path, data)

    def files(self) -> list[tuple[str, bytes]]:
        """The cache files now in the directory (regular files only, at most
        ``MAX_CACHE_FILES``), by name."""
        found: list[tuple[str, bytes]] = []
        modules = os.path.join(self.path, "modules")
        if not self.path or not os.path.isdir(modules):
            return found
        for folder in sorted(os.listdir(modules)):
            inner = os.path.join(modules, folder)
            if not stat.S_ISDIR(os.lstat(inner).st_mode):
                continue
            for leaf in sorted(os.listdir(inner)):
                name = f"modules/{folder}/{leaf}"
                if CACHE_FILE.fullmatch(name) and len(found) < MAX_CACHE_FILES:
                    data = _read_regular(os.path.join(inner, leaf))
                    if data is not None:
                        found.append((name, data))
        return found


def _write_new(path: str, data: bytes) -> None:
    fd = os.open(path, _WRITE_FLAGS, 0o600)
    with os.fdopen(fd, "wb") as out:
        out.write(data)


def _read_regular(path: str) -> bytes | None:
    try:
        fd = os.open(path, _READ_FLAGS)
    except OSError:
        return None
    with os.fdopen(fd, "rb") as file:
        if not stat.S_ISREG(os.fstat(fd).st_mode):
            return None
        return file.read()


def split_files(listing: Any, payload: bytes, offset: int = 0) -> list[tuple[str, bytes]] | None:
    """The files a ``cacheFiles`` listing names, cut from ``payload`` after ``offset``; None when
    the listing is malformed, does not add up, or names a file ``CACHE_FILE`` does not match."""
    if not isinstance(listing, list) or len(listing) > MAX_CACHE_FILES:
        return None
    files = []
    for entry in listing:
        if not (isinstance(entry, list) and len(entry) == 2):
            return None
        name, size = entry
        if not (isinstance(name, str) and CACHE_FILE.fullmatch(name)):
            return None
        if not (isinstance(size, int) and 0 <= size <= len(payload) - offset):
            return None
        files.append((name, payload[offset : offset + size]))
        offset += size
    return files if offset == len(payload) else None


def listing(files: list[tuple[str, bytes]]) -> list[list[Any]]:
    return [[name, len(data)] for name, data in files]


def _serve(worker: _Worker, stage: Stage, stdin: BinaryIO, stdout: BinaryIO) -> None:
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
        written: list[tuple[str, bytes]] = []
        compiled = worker.cached(request)
        if compiled is None:
            _reply(stdout, {"state": "module"})
            module_header = read_frame(stdin, MAX_HEADER)
            if module_header is None:
                return
            given = json.loads(module_header)
            data = read_frame(stdin, int(given["payloadBytes"]))
            if data is None:
                return
            size = int(given["moduleBytes"])
            staged = split_files(given.get("cacheFiles", []), data, size) or []
            stage.fill(staged)
            compiled, error = worker.compiled(request, data[:size])
            if compiled is None:
                _reply(stdout, {"state": "refused", "extismError": error})
                continue
            after = stage.files()
            if after != staged:  # Extism compiled and wrote what it compiled
                written = after
        _reply(stdout, {"state": "ready", "cacheFiles": listing(written)}, _joined(written))
        facts, output = worker.run(compiled, request, payload)
        _reply(stdout, facts, output)


def _joined(files: list[tuple[str, bytes]]) -> bytes:
    return b"".join(data for _, data in files)


def _reply(stdout: BinaryIO, header: dict[str, Any], payload: bytes = b"") -> None:
    stdout.write(frame(json.dumps(header).encode()) + frame(payload))
    stdout.flush()


def main() -> None:
    liveness, size, stage = int(sys.argv[1]), int(sys.argv[2]), sys.argv[3]
    _exit_with_parent(liveness)
    first_to_go()
    # The replies get their own descriptor; whatever else writes to stdout goes to stderr.
    replies = os.fdopen(os.dup(1), "wb")
    os.dup2(2, 1)
    cache = Stage(stage)  # before Extism is loaded
    from extism_sys import ffi, lib  # type: ignore[import-untyped]

    _serve(_Worker(ffi, lib, size), cache, sys.stdin.buffer, replies)


if __name__ == "__main__":
    main()
