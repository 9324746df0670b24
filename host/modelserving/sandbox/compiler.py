"""Compiles modules in worker processes, under a deadline and a memory cap.

``Compiler.compile`` hands a module (already measured by ``structure.check_shape``) to a fresh
``compile_worker`` process and returns the serialized module it prints. The worker caps its own
memory; this side waits at most ``compile_timeout_ms`` for the whole reply and kills the worker
when it is late, so neither a slow nor a memory-hungry module can stall or grow the controller.
Every way it can fail is an InvalidModule naming the setting that decides it.

A late compile is the module's fault only when the worker had the CPU to finish: one that ran
beside another compile of the sandbox, or whose worker got less than half the deadline in CPU
time (the host was busy with other work), is marked ``contended`` and not remembered as the
module's refusal.

A worker takes about 0.2 s to start, so one is kept started ahead, shared by every sandbox of
the process: the first compile starts two, each later one takes the waiting worker and starts the
next (it is stopped when the process exits). At most ``compile_workers`` compiles of one sandbox
run at once.
"""

from __future__ import annotations

import atexit
import contextlib
import json
import os
import selectors
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path

from modelserving.api.errors import FailureClass
from modelserving.frames import frame
from modelserving.sandbox import compile_worker
from modelserving.sandbox.errors import SandboxError, cause_line, invalid_module
from modelserving.sandbox.settings import MIB, SandboxSettings, setting_name

_WORKER = Path(compile_worker.__file__)
_STDERR_KEEP = 4096
_STARVED_SHARE = 0.5
"""A late worker that used less CPU time than this share of the deadline was starved."""


class _Spare:
    """The one worker started ahead, for the whole process. The next one is started when a
    compile has finished, not while it runs: its start-up (Python, wasmtime, the warm-up
    compile) would take CPU from the compile, which uses every core."""

    lock = threading.Lock()
    worker: subprocess.Popen[bytes] | None = None

    @classmethod
    def take(cls) -> subprocess.Popen[bytes]:
        with cls.lock:
            worker, cls.worker = cls.worker, None
        if worker is not None and worker.poll() is None:
            return worker
        if worker is not None:
            _reap(worker)
        return _start()

    @classmethod
    def refill(cls) -> None:
        with cls.lock:
            if cls.worker is None:
                cls.worker = _start()

    @classmethod
    def close(cls) -> None:
        with cls.lock:
            worker, cls.worker = cls.worker, None
        if worker is not None:
            _reap(worker)


atexit.register(_Spare.close)


def _start() -> subprocess.Popen[bytes]:
    return subprocess.Popen(
        [sys.executable, "-I", str(_WORKER), str(os.getpid())],
        # One malloc arena for every compiler thread: each further arena would reserve its
        # address space when the thread first allocates, before the cap, and let that thread
        # grow its heap uncounted (measured: a compile the cap should refuse ran on instead).
        env={**os.environ, "MALLOC_ARENA_MAX": "1"},
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        close_fds=True,
        start_new_session=True,  # a terminal's Ctrl-C is the controller's to handle
    )


class Compiler:
    """Runs the compiles of one sandbox in workers, with its settings."""

    def __init__(self, settings: SandboxSettings) -> None:
        self._settings = settings
        self._slots = threading.BoundedSemaphore(settings.compile_workers)
        self._lock = threading.Lock()
        self._running = 0
        self._overlaps = 0
        """Compiles started while another ran: a late compile that overlapped one may have been
        slowed by it."""

    def compile(self, module: bytes) -> bytearray:
        """The serialized module; InvalidModule when it does not compile within the limits,
        Timeout when no worker became free within the compile deadline (the host was busy: the
        module is not to blame, and a later load tries again)."""
        wait_s = self._settings.compile_timeout_ms / 1000
        if not self._slots.acquire(timeout=wait_s):
            raise SandboxError(
                FailureClass.TIMEOUT,
                f"all {self._settings.compile_workers} compile workers stayed busy for "
                f"{self._settings.compile_timeout_ms} ms (operator setting "
                f"{setting_name('compile_workers')}); the module was not compiled",
            )
        with self._lock:
            self._running += 1
            shared = self._running > 1
            if shared:
                self._overlaps += 1
            overlaps_before = self._overlaps
        try:
            worker = _Spare.take()
            try:
                return self._run(worker, module)
            except _LateCompile as late:
                with self._lock:
                    shared = shared or self._overlaps != overlaps_before
                # passed its deadline beside another compile, or starved of CPU by other work:
                # perhaps only slowed by the host
                raise SandboxError(
                    late.failure_class, late.message, contended=shared or late.starved
                ) from None
            finally:
                _reap(worker)
                _Spare.refill()
        finally:
            with self._lock:
                self._running -= 1
            self._slots.release()

    def _run(self, worker: subprocess.Popen[bytes], module: bytes) -> bytearray:
        settings = self._settings
        params = json.dumps(
            {
                "stack": settings.max_wasm_stack_bytes,
                "memory": settings.compile_memory_mib * MIB,
                "moduleBytes": len(module),
            }
        ).encode()
        cpu_before = cpu_seconds(worker.pid)
        deadline = time.monotonic() + settings.compile_timeout_ms / 1000
        request = frame(params) + frame(module)
        reply, errors, cpu_late = _collect(worker, request, deadline, settings.max_artifact_bytes)
        if cpu_late is None:
            return _parse(worker, reply, errors, settings)
        message = (
            f"compiling the module took longer than {settings.compile_timeout_ms} ms "
            f"(operator setting {setting_name('compile_timeout_ms')})"
        )
        used = cpu_late - cpu_before if cpu_late >= 0 and cpu_before >= 0 else None
        starved = used is not None and used < _STARVED_SHARE * settings.compile_timeout_ms / 1000
        if starved and used is not None:
            message += (
                f"; the compile worker had only {used * 1000:.0f} ms of CPU time in it: "
                "the host was busy, and a later load tries again"
            )
        raise _LateCompile(FailureClass.INVALID_MODULE, message, starved=starved)


class _LateCompile(SandboxError):
    """A compile passed its deadline (``Compiler.compile`` decides whether it was contended)."""

    def __init__(self, failure_class: FailureClass, message: str, starved: bool) -> None:
        super().__init__(failure_class, message)
        self.starved = starved
        """The worker had too little CPU time to be blamed."""


def cpu_seconds(pid: int) -> float:
    """The CPU time (user and system, every thread) process ``pid`` has used; -1 when it cannot
    be read (no ``/proc``, the process gone)."""
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return -1.0
    fields = stat.rsplit(")", 1)[1].split()  # after the command name, which may hold anything
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def _collect(
    worker: subprocess.Popen[bytes], request: bytes, deadline: float, limit: int
) -> tuple[bytearray, bytes, float | None]:
    """Writes ``request`` to the worker and reads everything it prints until it closes stdout,
    all before the deadline (then it is killed: a worker too slow even to read its input, a
    stopped one, cannot hold the caller). Returns stdout, the first bytes of stderr, and, when
    it was late, the CPU time it had used when it was killed (else None)."""
    assert worker.stdin is not None and worker.stdout is not None and worker.stderr is not None
    out, err = bytearray(), bytearray()
    streams = {worker.stdout.fileno(): out, worker.stderr.fileno(): err}
    stdin = worker.stdin.fileno()
    pending = memoryview(request)
    with selectors.DefaultSelector() as selector:
        for fd in (*streams, stdin):
            os.set_blocking(fd, False)
        for fd in streams:
            selector.register(fd, selectors.EVENT_READ)
        selector.register(stdin, selectors.EVENT_WRITE)
        while streams:
            left = deadline - time.monotonic()
            if left <= 0:
                used = cpu_seconds(worker.pid)
                _kill(worker)
                return out, bytes(err), used
            for key, _ in selector.select(left):
                fd = key.fd
                if fd == stdin:
                    try:
                        pending = pending[os.write(fd, pending[: 1 << 16]) :]
                    except BlockingIOError:
                        continue
                    except OSError:
                        pending = pending[:0]  # the worker died; its exit status says why
                    if not pending:
                        selector.unregister(fd)
                        worker.stdin.close()
                    continue
                chunk = os.read(fd, 1 << 20)
                if not chunk:
                    selector.unregister(fd)
                    del streams[fd]
                    continue
                buf = streams[fd]
                if buf is out and len(out) + len(chunk) > limit + 16:
                    _kill(worker)
                    raise invalid_module(
                        f"the compiled module is larger than {limit} bytes "
                        f"(operator setting {setting_name('max_artifact_bytes')})"
                    )
                if buf is out or len(err) < _STDERR_KEEP:
                    buf += chunk
    # the reply as read, not a copy: a small module can compile to tens of megabytes
    return out, bytes(err), None


def _parse(
    worker: subprocess.Popen[bytes], reply: bytearray, errors: bytes, settings: SandboxSettings
) -> bytearray:
    status = worker.wait()
    kind = bytes(reply[:1])
    complete = len(reply) >= 5 and int.from_bytes(reply[1:5], "big") == len(reply) - 5
    del reply[:5]  # in place (a bytearray drops its head without copying the rest)
    body = reply
    if status == 0 and complete and kind == compile_worker.OK:
        return body
    if status == 0 and complete and kind == compile_worker.REFUSED:
        text = cause_line(body.decode("utf-8", errors="replace"))
        raise invalid_module(f"the module does not compile: {text}")
    text = errors.decode("utf-8", errors="replace")
    if status in (compile_worker.EXIT_NO_MEMORY, -signal.SIGABRT) or "memory allocation" in text:
        raise invalid_module(
            f"compiling the module needed more than {settings.compile_memory_mib} MiB "
            f"(operator setting {setting_name('compile_memory_mib')})"
        )
    why = f"signal {signal.Signals(-status).name}" if status < 0 else f"exit status {status}"
    detail = cause_line(text)
    raise invalid_module(f"the compile worker failed ({why}){': ' + detail if detail else ''}")


def _kill(worker: subprocess.Popen[bytes]) -> None:
    with contextlib.suppress(OSError):
        worker.kill()


def _reap(worker: subprocess.Popen[bytes]) -> None:
    _kill(worker)
    for stream in (worker.stdin, worker.stdout, worker.stderr):
        if stream is not None:
            with contextlib.suppress(OSError):
                stream.close()
    worker.wait()
