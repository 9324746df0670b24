"""Process helpers for the dev cluster's tests: CPU contention or a CPU quota, ``/proc`` scans,
exec waits.

Used by ``tests/unit/devcluster`` (short Python children) and by
``tests/integration/test_start_interrupted.py`` (the real control plane).
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
import uuid
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


CGROUP_ROOT = Path("/sys/fs/cgroup")
CFS_PERIOD_US = 100_000


class CpuQuota:
    """A CPU cgroup whose processes together get at most ``cores`` of CPU time (the kernel's
    bandwidth control), as on a machine whose other work leaves them that share. Unlike busy
    loops it burns nothing: the CPU it withholds goes to whatever else runs (the other tests).

    ``join`` (a ``preexec_fn``) puts a child and all it starts in the group; ``holding`` puts
    this process in it for a block. With no group (``group`` None: busy loops stand in) both
    do nothing. Made by :func:`starved`."""

    def __init__(self, group: Path | None, home: Path | None) -> None:
        self.group, self.home = group, home

    def join(self) -> None:
        if self.group is not None:
            (self.group / "cgroup.procs").write_text(str(os.getpid()))

    @contextmanager
    def holding(self) -> Iterator[None]:
        self.join()
        try:
            yield
        finally:
            if self.home is not None:
                (self.home / "cgroup.procs").write_text(str(os.getpid()))

    def remove(self) -> None:
        """SIGKILL what is left in the group, then delete it."""
        if self.group is None:
            return
        deadline = time.monotonic() + 10.0
        while True:
            with suppress(OSError):
                self.group.rmdir()
                return
            left = (self.group / "cgroup.procs").read_text().split()
            for pid in left:
                with suppress(ProcessLookupError):
                    os.kill(int(pid), signal.SIGKILL)
            if time.monotonic() > deadline:
                raise RuntimeError(f"cgroup {self.group} still holds {left}")
            time.sleep(0.05)


def _cpu_cgroup(cores: float) -> CpuQuota | None:
    """A new CPU cgroup under this process's own, limited to ``cores``; None where the CPU
    controller cannot be used here (no cgroup file system, not permitted)."""
    quota = max(1000, int(cores * CFS_PERIOD_US))
    lines = Path("/proc/self/cgroup").read_text().splitlines()
    v1 = [line.split(":", 2)[2] for line in lines if "cpu" in line.split(":", 2)[1].split(",")]
    name = f"modelserving-test-{uuid.uuid4().hex[:12]}"
    group: Path | None = None
    try:
        if v1:  # cgroup v1: cpu.cfs_quota_us / cpu.cfs_period_us
            home = CGROUP_ROOT / "cpu" / v1[0].lstrip("/")
            (home / name).mkdir()
            group = home / name
            (group / "cpu.cfs_period_us").write_text(str(CFS_PERIOD_US))
            (group / "cpu.cfs_quota_us").write_text(str(quota))
        else:  # cgroup v2: cpu.max "<quota> <period>"
            path = next(line[3:] for line in lines if line.startswith("0::"))
            home = CGROUP_ROOT / path.lstrip("/")
            if "cpu" not in (home / "cgroup.subtree_control").read_text().split():
                return None
            (home / name).mkdir()
            group = home / name
            (group / "cpu.max").write_text(f"{quota} {CFS_PERIOD_US}")
    except (OSError, StopIteration):
        if group is not None:  # made, but its limit could not be set
            with suppress(OSError):
                group.rmdir()
        return None
    return CpuQuota(group, home)


@contextmanager
def starved(cores: float) -> Iterator[CpuQuota]:
    """What a start gets on a busy machine: a :class:`CpuQuota` of ``cores``; where no CPU
    cgroup can be made, busy loops on every core (:func:`cpu_contention`, one per core) and a
    quota that does nothing."""
    limit = _cpu_cgroup(cores)
    if limit is None:
        with cpu_contention(1):
            yield CpuQuota(None, None)
        return
    try:
        yield limit
    finally:
        limit.remove()


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
