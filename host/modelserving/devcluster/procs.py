"""Processes of the dev cluster: free ports, detached starts, PID checks and stopping by PID.

Used by ``cluster``. A started process is remembered as a :class:`ProcessRecord` (PID, exact
argv and kernel start time); before any signal is sent, ``/proc/<pid>`` must still show that
argv and start time, so a recycled PID belonging to someone else is never touched.
"""

from __future__ import annotations

import ctypes
import os
import signal
import socket
import subprocess
import time
from collections.abc import Callable, Sequence
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

PROC = Path("/proc")


@dataclass(frozen=True)
class ProcessRecord:
    """One process started by the dev cluster."""

    name: str
    pid: int
    argv: tuple[str, ...]
    start_time: int
    """Field 22 of ``/proc/<pid>/stat`` (clock ticks after boot): tells a reused PID apart."""
    log: str

    def to_json(self) -> dict[str, Any]:
        data = asdict(self)
        data["argv"] = list(self.argv)
        return data

    @classmethod
    def from_json(cls, data: dict[str, Any]) -> ProcessRecord:
        return cls(
            name=str(data["name"]),
            pid=int(data["pid"]),
            argv=tuple(str(a) for a in data["argv"]),
            start_time=int(data["start_time"]),
            log=str(data["log"]),
        )


def free_ports(count: int, host: str = "127.0.0.1") -> list[int]:
    """``count`` distinct ports that are free on ``host`` right now (all held until chosen)."""
    sockets = []
    try:
        for _ in range(count):
            sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
            sock.bind((host, 0))
            sockets.append(sock)
        return [sock.getsockname()[1] for sock in sockets]
    finally:
        for sock in sockets:
            sock.close()


def read_cmdline(pid: int, proc: Path = PROC) -> tuple[str, ...] | None:
    """The argv of a live process, or None when it is gone (or a zombie, whose argv is empty)."""
    try:
        raw = (proc / str(pid) / "cmdline").read_bytes()
    except OSError:
        return None
    if not raw:
        return None
    return tuple(part.decode(errors="replace") for part in raw.rstrip(b"\0").split(b"\0"))


def read_start_time(pid: int, proc: Path = PROC) -> int | None:
    """Field 22 (starttime) of ``/proc/<pid>/stat``, or None when the process is gone."""
    try:
        stat = (proc / str(pid) / "stat").read_text()
    except OSError:
        return None
    # The command name (field 2) may contain spaces and parentheses: split after the last ')'.
    fields = stat.rsplit(")", 1)[1].split()
    if fields[0] in ("Z", "X"):
        return None
    return int(fields[19])


def is_ours(record: ProcessRecord, proc: Path = PROC) -> bool:
    """True when ``record.pid`` is still the very process we started (same argv, same start)."""
    return (
        read_cmdline(record.pid, proc) == record.argv
        and read_start_time(record.pid, proc) == record.start_time
    )


_PR_SET_PDEATHSIG = 1


def _parent_death_signal() -> Callable[[], None]:
    """A ``preexec_fn`` asking the kernel to SIGTERM the child when its parent dies (Linux)."""
    libc = ctypes.CDLL(None, use_errno=True)  # loaded before fork: the child only calls prctl

    def preexec() -> None:  # pragma: no cover - runs in the child
        libc.prctl(_PR_SET_PDEATHSIG, signal.SIGTERM)

    return preexec


def spawn(
    name: str,
    argv: Sequence[str],
    log: Path,
    *,
    cwd: Path,
    die_with_parent: bool = False,
) -> ProcessRecord:
    """Start ``argv`` in its own session, output to ``log``; survive our exit unless told not to.

    With ``die_with_parent`` the kernel sends SIGTERM to the child when this process dies, so
    a test session killed hard does not leave a control plane behind.
    """
    log.parent.mkdir(parents=True, exist_ok=True)
    preexec = _parent_death_signal() if die_with_parent else None
    with log.open("ab") as out:
        child = subprocess.Popen(
            list(argv),
            stdin=subprocess.DEVNULL,
            stdout=out,
            stderr=subprocess.STDOUT,
            cwd=cwd,
            start_new_session=True,
            close_fds=True,
            preexec_fn=preexec,
        )
    # A Popen collected while its child runs emits ResourceWarning; the child is deliberately
    # detached, and is reaped by PID in stop(), so mark the Popen as settled.
    child.returncode = 0
    start_time = None
    for _ in range(100):
        start_time = read_start_time(child.pid)
        if start_time is not None:
            break
        time.sleep(0.01)
    return ProcessRecord(name, child.pid, tuple(argv), start_time or -1, str(log))


def _reap(pid: int, wait: float = 0.0) -> None:
    """Collect the exit status if ``pid`` is our child (waiting up to ``wait`` seconds)."""
    deadline = time.monotonic() + wait
    while True:
        try:
            if os.waitpid(pid, os.WNOHANG)[0] == pid:
                return
        except (ChildProcessError, OSError):  # not our child (started by an earlier CLI run)
            return
        if time.monotonic() >= deadline:
            return
        time.sleep(0.02)


def stop(record: ProcessRecord, timeout: float = 10.0, proc: Path = PROC) -> bool:
    """SIGTERM (then SIGKILL after ``timeout``) the process if it is still ours.

    Returns True when a process was signalled, False when it was already gone or the PID now
    belongs to another program (which is left alone).
    """
    if not is_ours(record, proc):
        _reap(record.pid)
        return False
    os.kill(record.pid, signal.SIGTERM)
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        _reap(record.pid)
        if not is_ours(record, proc):
            _reap(record.pid, wait=2.0)  # its /proc entry empties before it turns zombie
            return True
        time.sleep(0.05)
    if is_ours(record, proc):
        os.kill(record.pid, signal.SIGKILL)
        for _ in range(100):
            _reap(record.pid)
            if not is_ours(record, proc):
                break
            time.sleep(0.05)
        _reap(record.pid, wait=2.0)
    return True


def find_strays(
    marker: str, names: Sequence[str], proc: Path = PROC
) -> list[tuple[int, tuple[str, ...]]]:
    """Live processes whose program is one of ``names`` and whose argv mentions ``marker``.

    ``marker`` is the absolute path of a cluster folder: only processes started for that
    folder carry it in their flags, so this finds leftovers of a crash that lost the state file.
    """
    strays = []
    own = os.getpid()
    for entry in proc.iterdir():
        if not entry.name.isdigit() or int(entry.name) == own:
            continue
        argv = read_cmdline(int(entry.name), proc)
        if not argv or Path(argv[0]).name not in names:
            continue
        if any(marker in arg for arg in argv[1:]):
            strays.append((int(entry.name), argv))
    return strays


def kill_stray(pid: int, argv: tuple[str, ...], proc: Path = PROC) -> None:
    """Stop a stray found by :func:`find_strays` (rechecking its argv first)."""
    start_time = read_start_time(pid, proc)
    if start_time is None:
        return
    stop(ProcessRecord("stray", pid, argv, start_time, ""), proc=proc)
