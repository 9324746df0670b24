"""Process helpers for the dev cluster's tests: CPU contention, ``/proc`` scans, exec waits.

Used by ``tests/unit/devcluster`` (short Python children) and by
``tests/integration/test_start_interrupted.py`` (the real control plane).
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from collections.abc import Iterator
from contextlib import contextmanager, suppress
from pathlib import Path

from modelserving.devcluster import procs

BUSY_LOOP = [
    sys.executable,
    "-c",
    # busy until its parent (the test process) is gone, even when that one is killed hard
    "import os\nparent = os.getppid()\nwhile os.getppid() == parent:\n"
    "    for _ in range(200_000):\n        pass",
]


def default_signals() -> None:
    """``preexec_fn`` of a child that must die of SIGINT, SIGHUP and SIGTERM as a terminal's
    would: a non-interactive shell's background job (``make test &``, a CI step) starts with
    SIGINT ignored and passes that on, and the dev cluster's start keeps an ignored signal
    ignored."""
    for signum in (signal.SIGINT, signal.SIGHUP, signal.SIGTERM):
        signal.signal(signum, signal.SIG_DFL)


@contextmanager
def cpu_contention(per_core: int = 2) -> Iterator[None]:
    """``per_core`` busy-loop processes for every core, killed when the block ends."""
    busy = [
        subprocess.Popen(BUSY_LOOP, start_new_session=True)
        for _ in range(per_core * (os.cpu_count() or 1))
    ]
    try:
        yield
    finally:
        for process in busy:
            process.kill()
        for process in busy:
            process.wait()


def mentioning(marker: str) -> list[tuple[int, tuple[str, ...]]]:
    """Every live process (not this one, not a zombie) with ``marker`` in its argv."""
    found = []
    for entry in procs.PROC.iterdir():
        if not entry.name.isdigit() or int(entry.name) == os.getpid():
            continue
        pid = int(entry.name)
        argv = procs.read_cmdline(pid)
        if argv and any(marker in arg for arg in argv) and procs.read_start_time(pid) is not None:
            found.append((pid, argv))
    return found


def wait_until_gone(marker: str, timeout: float = 10.0) -> list[tuple[int, tuple[str, ...]]]:
    """The processes mentioning ``marker`` still alive after ``timeout`` (normally none).

    A SIGKILLed grandchild is re-parented and reaped by PID 1, which may take a moment.
    """
    deadline = time.monotonic() + timeout
    while (alive := mentioning(marker)) and time.monotonic() < deadline:
        time.sleep(0.05)
    return alive


def kill_all(marker: str) -> None:
    """SIGKILL whatever mentions ``marker`` (a failed test's leftovers)."""
    for pid, _argv in mentioning(marker):
        with suppress(ProcessLookupError):
            os.kill(pid, signal.SIGKILL)


def wait_until_exec_done(record: procs.ProcessRecord, timeout: float = 10.0) -> None:
    """Until a new process has finished ``exec``, ``/proc`` shows no argv (or its parent's)."""
    deadline = time.monotonic() + timeout
    while procs.read_cmdline(record.pid) != record.argv:
        assert time.monotonic() < deadline, f"{record.argv} did not show in /proc"
        time.sleep(0.01)


def script(path: Path, source: str) -> Path:
    """An executable Python script at ``path`` (run by this interpreter)."""
    path.write_text(f"#!{sys.executable}\n{source}")
    path.chmod(0o755)
    return path
