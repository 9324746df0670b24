"""Hook calls of Extism-flavoured modules (they import ``extism:host/env``), in worker processes.

The module's ``on_pod_create`` / ``on_pod_ready`` / ``validate_config`` take the same request
bytes as Extism input and give the same response bytes as Extism output, under the same fuel,
memory (``max_pages``) and deadline limits as native-flavour modules. Extism does not report the
fuel used (reported as 0), nor does it pass the guest's WASI output on (it is dropped).

Extism runs in worker processes (``worker``), never in the controller: nothing in-process can
interrupt what Extism does before a call (the module's start function and ``_initialize`` run
when a plugin is created) nor a host function such as ``random_get``. Each sandbox has a pool
(``ExtismPool``) of at most ``SandboxSettings.extism_workers`` workers, each started on first
use and serving one request at a time, so calls of different ModelServings run in parallel; a
request takes a free worker (one that already holds its compiled plugin first), and waiting for
one counts against the call's deadline (a Timeout naming that all are busy). Each worker keeps a
bounded LRU of compiled plugins by (module, fuel, memory limit)
(``SandboxSettings.extism_compiled_plugins``; the deadline is the worker's watchdog's, not
compiled in) and is given the module's bytes, with what Extism's compile cache kept for it
(``disk``), whenever it compiles. Every step is waited for at most its deadline: starting the
worker and compiling (and, at load, creating the plugin once) ``compile_timeout_ms``, a call its
own deadline plus ``GRACE_MS``. A worker that is late is killed (SIGKILL, then reaped), and its
slot starts a new one on its next use; a worker that dies by itself fails the request it was
serving the same way. No worker outlives its sandbox: the pool's workers are killed when the
sandbox is closed (a busy one when its request ends) or collected, and each exits by itself
when the controller process ends (``worker`` watches a liveness pipe).

Failure classes come only from facts the host observed (``_judge``): a killed call is a Timeout;
Extism's own texts (the worker shadows ``error_set``, so Extism never holds guest text) give
FuelExhausted, MemoryLimit, Timeout (only when the time has really passed) or Trap; the guest's
own error text is a PluginError, whatever it says. Messages are one line, without the engine's
chain numbering.
"""

from __future__ import annotations

import contextlib
import json
import os
import re
import selectors
import signal
import subprocess
import sys
import threading
import time
import weakref
from collections import OrderedDict
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from modelserving.api.errors import FailureClass
from modelserving.sandbox.compiled import ExtismModule
from modelserving.sandbox.errors import cause_line
from modelserving.sandbox.extism.disk import ExtismDisk, remove_stage
from modelserving.sandbox.extism.worker import listing, split_files
from modelserving.sandbox.results import CallFailure, CallResult
from modelserving.sandbox.settings import WASM_PAGE, Limits, SandboxSettings, setting_name

_WORKER = Path(__file__).with_name("worker.py")
GRACE_MS = 100
"""How long past a call's deadline the worker may take to answer before it is killed: the
worker's watchdog cancels a running call at the deadline itself, so only a start-up or a host
function that cannot be interrupted costs a worker."""
_MAX_HEADER = 64 * 1024
_STDERR_KEEP = 4096
_CUT = "...[cut]"
_OUT_OF_FUEL = "plugin ran out of fuel"  # Extism, when a call used all its fuel
_WASM_OUT_OF_FUEL = "all fuel consumed by WebAssembly"  # wasmtime, when starting the plugin did
_CREATE = "Unable to create Extism plugin: "
_NUMBERED = re.compile(r"^\d+:\s*")
_SIGABRT_STATUS = 134  # what Extism returns for a trap


class _Late(Exception):
    """The worker did not answer in time (it has been killed); ``compiling``: while it was
    compiling (or, at load, starting) the module, else during the call."""

    def __init__(self, compiling: bool = False) -> None:
        super().__init__()
        self.compiling = compiling


class _Gone(Exception):
    """The worker ended, or sent what it never sends (it has been killed)."""

    def __init__(self, why: str) -> None:
        super().__init__(why)
        self.why = why


class _Process:
    """One running worker: its pipes, and what it printed but was not read yet."""

    def __init__(self, size: int, stage: str) -> None:
        # Extism reads EXTISM_* settings; the worker sets EXTISM_CACHE_CONFIG itself (Stage).
        env = {k: v for k, v in os.environ.items() if not k.startswith("EXTISM_")}
        self.stage = stage
        liveness, self._alive = os.pipe()
        try:
            self.popen = subprocess.Popen(
                [sys.executable, "-I", str(_WORKER), str(liveness), str(size), stage],
                stdin=subprocess.PIPE,
                stdout=subprocess.PIPE,
                stderr=subprocess.PIPE,
                pass_fds=(liveness,),
                close_fds=True,
                start_new_session=True,  # a terminal's Ctrl-C is the controller's to handle
                env=env,
            )
        except BaseException:
            os.close(self._alive)
            remove_stage(stage)
            raise
        finally:
            os.close(liveness)
        self.owner = os.getpid()
        assert self.popen.stdout is not None and self.popen.stderr is not None
        self._out, self._err = self.popen.stdout.fileno(), self.popen.stderr.fileno()
        self._selector = selectors.DefaultSelector()
        for fd in (self._out, self._err):
            os.set_blocking(fd, False)
            self._selector.register(fd, selectors.EVENT_READ)
        self._buffer = bytearray()
        self.errors = bytearray()
        self._ended = False

    @property
    def pid(self) -> int:
        return self.popen.pid

    def send(self, header: dict[str, Any], payload: bytes = b"") -> None:
        header = {**header, "payloadBytes": len(payload)}
        head = json.dumps(header).encode()
        stdin = self.popen.stdin
        assert stdin is not None
        try:
            stdin.write(len(head).to_bytes(4, "big") + head + len(payload).to_bytes(4, "big"))
            stdin.write(payload)
            stdin.flush()
        except OSError:
            raise _Gone(self._end_status()) from None

    def receive(self, deadline: float, payload_limit: int) -> tuple[dict[str, Any], bytes]:
        """The next reply, waited for until ``deadline`` (then the worker is killed)."""
        while True:
            reply = self._take(payload_limit)
            if reply is not None:
                return reply
            if self._ended:
                raise _Gone(self._end_status())
            left = deadline - time.monotonic()
            if left <= 0:
                self.kill()
                raise _Late
            for key, _ in self._selector.select(left):
                self._read(key.fd)

    def _read(self, fd: int) -> None:
        try:
            chunk = os.read(fd, 1 << 20)
        except BlockingIOError:
            return
        if not chunk:
            self._selector.unregister(fd)
            self._ended = self._ended or fd == self._out
        elif fd == self._out:
            self._buffer += chunk
        else:
            self.errors = (self.errors + chunk)[-_STDERR_KEEP:]

    def _take(self, payload_limit: int) -> tuple[dict[str, Any], bytes] | None:
        buffer = self._buffer
        if len(buffer) < 4:
            return None
        head_size = int.from_bytes(buffer[:4], "big")
        if head_size > _MAX_HEADER:
            raise self._malformed(f"a reply header of {head_size} bytes")
        if len(buffer) < 8 + head_size:
            return None
        size = int.from_bytes(buffer[4 + head_size : 8 + head_size], "big")
        if size > payload_limit:
            raise self._malformed(f"a reply of {size} bytes")
        end = 8 + head_size + size
        if len(buffer) < end:
            return None
        try:
            header = json.loads(bytes(buffer[4 : 4 + head_size]))
        except ValueError:
            raise self._malformed("a reply that is not JSON") from None
        if not isinstance(header, dict):
            raise self._malformed("a reply that is not a JSON object")
        payload = bytes(buffer[8 + head_size : end])
        del buffer[:end]
        return header, payload

    def _malformed(self, what: str) -> _Gone:
        self.kill()
        return _Gone(f"it sent {what}")

    def _end_status(self) -> str:
        """How the worker ended (it is reaped first; killed if it had not ended yet)."""
        self.kill()
        status = self.popen.returncode
        why = f"signal {signal.Signals(-status).name}" if status < 0 else f"exit status {status}"
        detail = cause_line(self.errors.decode("utf-8", errors="replace"))
        return f"{why}: {detail}" if detail else why

    def alive(self) -> bool:
        return self.popen.poll() is None and not self._ended

    def kill(self) -> None:
        """SIGKILL and reap; idempotent, and a no-op in a forked child of the controller."""
        if os.getpid() != self.owner:
            return
        with contextlib.suppress(OSError):
            self.popen.kill()
        for stream in (self.popen.stdin, self.popen.stdout, self.popen.stderr):
            if stream is not None:
                with contextlib.suppress(OSError):
                    stream.close()
        self.popen.wait()
        self._selector.close()
        self._ended = True
        alive, self._alive = self._alive, -1
        if alive >= 0:  # once: the number may belong to another file afterwards
            os.close(alive)
            remove_stage(self.stage)


class _Slot:
    """One place of the pool: its worker process once started, the compiled plugins that worker
    holds (by key, in the worker's own LRU order, so a call can prefer a worker that has its
    plugin), and whether a request holds it."""

    def __init__(self, size: int) -> None:
        self.process: _Process | None = None
        self.keys: OrderedDict[tuple[Any, ...], None] = OrderedDict()
        self.size = max(1, size)
        self.busy = False
        self.generation = 0

    def has(self, key: tuple[Any, ...]) -> bool:
        return self.process is not None and key in self.keys

    def used(self, key: tuple[Any, ...]) -> None:
        self.keys[key] = None
        self.keys.move_to_end(key)
        while len(self.keys) > self.size:
            self.keys.popitem(last=False)

    def stop(self) -> None:
        process, self.process = self.process, None
        self.keys.clear()
        if process is not None:
            process.kill()


def _stop_all(slots: list[_Slot]) -> None:
    for slot in slots:
        slot.stop()


@dataclass(frozen=True)
class _Request:
    """One run request: what to create and call, and how the answer is judged."""

    module: ExtismModule
    limits: Limits
    function: str | None
    payload: bytes
    max_response: int

    @property
    def key(self) -> tuple[Any, ...]:
        """What the worker's compiled plugin is kept by (as the worker's ``_key``)."""
        return (self.module.digest, self.module.wasi, self.limits.fuel, self.pages)

    @property
    def pages(self) -> int:
        return max(1, self.limits.memory_bytes // WASM_PAGE)

    def header(self, deadline_ms: int) -> dict[str, Any]:
        return {
            "op": "run",
            "digest": self.module.digest,
            "wasi": self.module.wasi,
            "fuel": self.limits.fuel,
            "pages": self.pages,
            "function": self.function,
            "deadlineMs": deadline_ms,
            "maxResponse": self.max_response,
        }


class ExtismPool:
    """Runs the Extism modules of one sandbox in at most ``extism_workers`` worker processes,
    each serving one request at a time; a request waits for a free worker at most its own
    deadline."""

    def __init__(self, settings: SandboxSettings) -> None:
        self._settings = settings
        self.disk = ExtismDisk(settings)
        self._slots = [
            _Slot(settings.extism_compiled_plugins) for _ in range(max(1, settings.extism_workers))
        ]
        self._free = threading.Condition()
        self._generation = 0
        self._finalizer = weakref.finalize(self, _stop_all, self._slots)

    @property
    def size(self) -> int:
        return len(self._slots)

    def pids(self) -> list[int]:
        """The process ids of the running workers, in pool order."""
        processes = [slot.process for slot in self._slots]
        return [p.pid for p in processes if p is not None and p.alive()]

    def busy(self) -> int:
        """How many workers serve a request right now."""
        with self._free:
            return sum(slot.busy for slot in self._slots)

    def busy_pids(self) -> list[int]:
        """The process ids of the workers serving a request right now (once started)."""
        with self._free:
            processes = [slot.process for slot in self._slots if slot.busy]
        return [p.pid for p in processes if p is not None]

    def close(self) -> None:
        """Stop the workers: the idle ones now, a busy one when its request ends (a later use
        starts new ones)."""
        with self._free:
            self._generation += 1
            for slot in self._slots:
                if not slot.busy:
                    slot.stop()

    def stats(self) -> list[dict[str, int]]:
        """How many compiled plugins each idle running worker keeps, in pool order."""
        with self._free:
            idle = [s for s in self._slots if not s.busy and s.process is not None]
            for slot in idle:
                slot.busy = True
        found = []
        try:
            for slot in idle:
                process = self._process(slot)
                try:
                    process.send({"op": "stats"})
                    header, _ = process.receive(time.monotonic() + 10, 0)
                except (_Late, _Gone):
                    raise RuntimeError("an Extism worker did not answer") from None
                found.append({"compiled": int(header["compiled"])})
        finally:
            for slot in idle:
                self._release(slot)
        return found

    def check(self, module: ExtismModule, limits: Limits) -> None:
        """Compile the module and create a plugin once, all within ``compile_timeout_ms``;
        SandboxError(InvalidModule) when Extism refuses it or its start-up does not end."""
        timeout_ms = self._settings.compile_timeout_ms
        deadline = time.monotonic() + timeout_ms / 1000
        request = _Request(module, limits, None, b"", 0)
        slot = self._acquire(request.key, deadline)
        if slot is None:  # the host was busy, not the module bad: a later load tries again
            raise CallFailure(
                FailureClass.TIMEOUT,
                f"all {self.size} Extism workers were busy for {timeout_ms} ms "
                f"({_COMPILE_SETTING})",
            )
        try:
            facts, _, written, _ = self._exchange(slot, request, deadline, deadline)
        except _Late:
            raise _invalid(
                f"compiling the module with Extism and starting it (its start function and "
                f"_initialize) took longer than {timeout_ms} ms ({_COMPILE_SETTING})"
            ) from None
        except _Gone as gone:
            raise _invalid(
                f"the Extism worker ended while loading the module ({gone.why})"
            ) from None
        finally:
            self._release(slot)
        if not facts.get("created"):
            text = _one_line(str(facts.get("extismError") or "")).removeprefix(_CREATE)
            raise _invalid(f"Extism cannot link the module: {text}")
        self.disk.keep(module.digest, written)

    def call(
        self, module: ExtismModule, function: str, request: bytes, limits: Limits
    ) -> CallResult:
        """Run ``function`` on ``request`` in a fresh plugin; CallFailure on any failure."""
        start = time.monotonic()
        deadline = start + limits.timeout_ms / 1000
        run = _Request(module, limits, function, request, self._settings.max_response_bytes)
        slot = self._acquire(run.key, deadline)
        if slot is None:
            raise CallFailure(
                FailureClass.TIMEOUT,
                f"no Extism worker became free within the deadline ({limits.timeout_ms} ms): "
                f"all {self.size} are busy",
                0,
                _micros(start),
            )
        try:
            compile_deadline = time.monotonic() + self._settings.compile_timeout_ms / 1000
            facts, output, written, preparing = self._exchange(
                slot, run, compile_deadline, deadline
            )
        except _Late as late:
            if late.compiling:
                raise _invalid(
                    f"compiling the module with Extism took longer than "
                    f"{self._settings.compile_timeout_ms} ms ({_COMPILE_SETTING})"
                ) from None
            raise CallFailure(
                FailureClass.TIMEOUT,
                f"the call passed its deadline ({limits.timeout_ms} ms)",
                0,
                _micros(start),
            ) from None
        except _Gone as gone:
            raise CallFailure(
                FailureClass.TRAP,
                f"the Extism worker ended during the call ({gone.why})",
                0,
                _micros(start),
            ) from None
        finally:
            self._release(slot)
        self.disk.keep(module.digest, written)
        # starting the worker and compiling are not the call's time
        return _judge(facts, output, run, _micros(start) - preparing * 1e6)

    def _acquire(self, key: tuple[Any, ...], deadline: float) -> _Slot | None:
        """A free slot, waited for until ``deadline`` (then None): one whose worker holds the
        compiled plugin ``key`` first, then one with a running worker, then the first."""
        with self._free:
            while True:
                free = [slot for slot in self._slots if not slot.busy]
                if free:
                    break
                left = deadline - time.monotonic()
                if left <= 0:
                    return None
                self._free.wait(left)
            slot = min(free, key=lambda s: (not s.has(key), s.process is None))
            slot.busy, slot.generation = True, self._generation
            return slot

    def _release(self, slot: _Slot) -> None:
        with self._free:
            if slot.generation != self._generation:  # closed meanwhile
                slot.stop()
            slot.busy = False
            self._free.notify()

    def _process(self, slot: _Slot) -> _Process:
        """The slot's worker, started when it has none (or it has ended)."""
        process = slot.process
        if process is None or not process.alive():
            slot.stop()
            try:
                process = _Process(self._settings.extism_compiled_plugins, self.disk.new_stage())
            except OSError as exc:
                raise _Gone(f"it could not be started: {exc}") from None
            slot.process = process
        return process

    def _exchange(
        self, slot: _Slot, request: _Request, compile_deadline: float, deadline: float
    ) -> tuple[dict[str, Any], bytes, list[tuple[str, bytes]], float]:
        """Send ``request`` to the slot's worker (started if needed), give the module's bytes
        and its cache files when asked, wait for ``ready`` until ``compile_deadline`` and then
        for the facts until ``deadline`` (moved on by the time starting and compiling took)
        plus the grace. The facts, the output, the cache files Extism wrote and the seconds
        until ``ready``; _Late or _Gone when the worker fails that (it has been killed)."""
        begun = time.monotonic()
        try:
            process = self._process(slot)
            process.send(request.header(max(1, int((deadline - begun) * 1000))), request.payload)
            written = self._ready(slot, process, request, compile_deadline)
        except (_Late, _Gone):
            slot.stop()
            raise
        ready = time.monotonic()
        if request.function is not None:
            deadline += ready - begun + GRACE_MS / 1000
        try:
            facts, output = process.receive(deadline, request.max_response)
        except (_Late, _Gone):
            slot.stop()
            raise
        if facts.get("state") != "done":
            slot.stop()
            raise _Gone(f"it answered {facts.get('state')!r} instead of the call's facts")
        return facts, output, written, ready - begun

    def _ready(
        self, slot: _Slot, process: _Process, request: _Request, compile_deadline: float
    ) -> list[tuple[str, bytes]]:
        """Wait for the worker's ``ready`` (giving it the module when it asks); the cache files
        it wrote. _Late(compiling=True) when it is late."""
        limit = self._settings.max_artifact_bytes
        files: list[tuple[str, bytes]] = []
        try:
            header, payload = process.receive(compile_deadline, 0)
            if header.get("state") == "module":
                module = request.module
                files = self.disk.files(module.digest)
                process.send(
                    {
                        "op": "module",
                        "digest": module.digest,
                        "moduleBytes": len(module.data),
                        "cacheFiles": listing(files),
                    },
                    module.data + b"".join(data for _, data in files),
                )
                header, payload = process.receive(compile_deadline, limit)
        except _Late:
            raise _Late(compiling=True) from None
        if header.get("state") == "refused":
            message = _one_line(str(header.get("extismError") or ""))
            raise _invalid(f"Extism refused the module: {message}")
        if header.get("state") != "ready":
            process.kill()
            raise _Gone(f"it answered {header.get('state')!r} instead of 'ready'")
        slot.used(request.key)
        written = split_files(header.get("cacheFiles"), payload) or []
        if written:
            self.disk.stats.compiled += 1
        elif files:  # Extism compiled from the cache files it was given
            self.disk.stats.disk_hits += 1
        return written


_COMPILE_SETTING = f"operator setting {setting_name('compile_timeout_ms')}"


def _invalid(message: str) -> CallFailure:
    return CallFailure(FailureClass.INVALID_MODULE, message)


def _micros(start: float) -> float:
    return (time.monotonic() - start) * 1e6


def check_links(pool: ExtismPool, module: ExtismModule, limits: Limits) -> None:
    """Compile and create the module once, so a module Extism cannot link (an
    ``extism:host/env`` function Extism does not have) or whose start-up does not end within
    the compile deadline is refused at load, not at its first call."""
    pool.check(module, limits)


def call_extism(
    pool: ExtismPool, module: ExtismModule, function: str, request: bytes, limits: Limits
) -> CallResult:
    """Run ``function`` on ``request`` in a fresh Extism plugin; CallFailure on any failure."""
    return pool.call(module, function, request, limits)


def _judge(facts: dict[str, Any], output: bytes, run: _Request, elapsed_us: float) -> CallResult:
    """The call's result, or its failure classified from the facts the worker observed."""
    limits = run.limits

    def fail(failure_class: FailureClass, message: str) -> CallFailure:
        return CallFailure(failure_class, message, 0, elapsed_us)

    extism_error = facts.get("extismError")
    if not facts.get("created"):
        cause = _one_line(str(extism_error or "")).removeprefix(_CREATE)
        if cause.removeprefix("wasm trap: ") == _WASM_OUT_OF_FUEL:
            raise fail(FailureClass.FUEL_EXHAUSTED, _out_of_fuel(limits))
        if cause == "oom":
            raise fail(FailureClass.MEMORY_LIMIT, _out_of_memory(limits))
        raise fail(FailureClass.TRAP, f"the Extism instance could not start: {cause}")
    if extism_error is not None:
        # Extism's own text: the worker keeps the guest's error_set from Extism.
        text = str(extism_error).strip()
        elapsed_ms = float(facts.get("elapsedUs", 0)) / 1000
        if text == _OUT_OF_FUEL:
            raise fail(FailureClass.FUEL_EXHAUSTED, _out_of_fuel(limits))
        if text == "timeout" and (facts.get("cancelled") or elapsed_ms >= limits.timeout_ms * 0.9):
            raise fail(
                FailureClass.TIMEOUT, f"the call passed its deadline ({limits.timeout_ms} ms)"
            )
        if text == "oom":
            raise fail(FailureClass.MEMORY_LIMIT, _out_of_memory(limits))
        raise fail(FailureClass.TRAP, _trap_message(text, int(facts.get("status", -1))))
    guest = facts.get("guestError")
    if guest is not None:
        raise fail(
            FailureClass.PLUGIN_ERROR, str(guest) + (_CUT if facts.get("guestErrorCut") else "")
        )
    status = int(facts.get("status", 0))
    if status != 0:
        raise fail(FailureClass.PLUGIN_ERROR, f"the Extism function returned status {status}")
    size = int(facts.get("outputBytes", 0))
    if size > run.max_response:
        raise fail(
            FailureClass.INVALID_RESPONSE,
            f"the response is {size} bytes; the limit is {run.max_response}",
        )
    if len(output) != size:
        raise fail(FailureClass.TRAP, f"the Extism worker gave {len(output)} of {size} bytes")
    return CallResult(output, 0, elapsed_us, [])


def _out_of_fuel(limits: Limits) -> str:
    return f"the call ran out of fuel ({limits.fuel} units)"


def _out_of_memory(limits: Limits) -> str:
    return f"the call hit its memory limit ({limits.memory_bytes} bytes)"


def _trap_message(text: str, status: int) -> str:
    """Extism gives only the outermost context of a trap or a WASI exit: ``error while
    executing at wasm backtrace:`` and numbered frames; the function's status is 134 for a trap
    and the exit status for an exit. One line: the innermost frame, unnumbered."""
    lines = [line.strip() for line in text.strip().splitlines() if line.strip()]
    if not lines or not lines[0].startswith("error while executing at wasm backtrace"):
        return _one_line(text)
    if status not in (_SIGABRT_STATUS, -1, 0):
        return f"the module exited (WASI proc_exit with status {status})"
    frames = [_NUMBERED.sub("", line) for line in lines[1:] if _NUMBERED.match(line)]
    where = f" at {frames[0]}" if frames else ""
    return f"the module trapped{where} (Extism does not report the trap's cause)"


def _one_line(text: str) -> str:
    """An engine's report in one line (``cause_line``), without chain numbering."""
    return _NUMBERED.sub("", cause_line(text))
