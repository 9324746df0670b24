"""Processes of the dev cluster: free ports, detached starts, liveness and stopping.

Used by ``cluster``. Two ways to know whether a started process still runs, for two situations:

- While this process is its parent (during ``up``), :class:`Child` asks the kernel with
  ``waitid(WNOWAIT)``: a process that is merely slow (not yet exec'd, not yet listening, starved
  of CPU) is never taken for a dead one, and the unreaped exit keeps its PID and process group
  ours until :meth:`Child.stop` has signalled the whole group.
- A later command (``down``, the next ``up``) only has the :class:`ProcessRecord` of
  ``state.json`` (PID, exact argv and kernel start time). Before any signal is sent,
  ``/proc/<pid>`` must still show that start time and argv, so a recycled PID belonging to
  someone else is never touched; :func:`is_ours` tells a transient ``/proc`` view (an empty
  argv while a process is between ``exec`` and its new stack, or while it exits) from a
  process that is gone.
"""

from __future__ import annotations

import contextlib
import ctypes
import os
import signal
import socket
import subprocess
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

PROC = Path("/proc")
SETTLE_SECONDS = 2.0
"""How long :func:`is_ours` re-reads an inconclusive ``/proc`` view before deciding."""
_PF_KTHREAD = 0x00200000  # in the flags of /proc/<pid>/stat: a kernel thread


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


# --- reading /proc -----------------------------------------------------------------------------


@dataclass(frozen=True)
class Stat:
    """The fields of ``/proc/<pid>/stat`` the dev cluster uses."""

    state: str
    pgrp: int
    flags: int
    threads: int
    start_time: int

    @property
    def dead(self) -> bool:
        """Exited, not yet reaped (a zombie leader whose other threads still run is alive)."""
        return self.state == "X" or (self.state == "Z" and self.threads <= 1)


def read_stat(pid: int, proc: Path = PROC) -> Stat | None:
    """The parsed ``/proc/<pid>/stat``, or None when there is no such process."""
    try:
        stat = (proc / str(pid) / "stat").read_text()
    except OSError:
        return None
    # The command name (field 2) may contain spaces and parentheses: split after the last ')'.
    fields = stat.rsplit(")", 1)[1].split()
    return Stat(
        state=fields[0],
        pgrp=int(fields[2]),
        flags=int(fields[6]),
        threads=int(fields[17]),
        start_time=int(fields[19]),
    )


def read_cmdline(pid: int, proc: Path = PROC) -> tuple[str, ...] | None:
    """The argv of a process, or None when it is gone or shows none.

    A live process shows an empty argv too: between ``exec`` and the setup of its new stack
    (the parent's ``Popen`` has already returned then), while it exits, and as a kernel thread.
    """
    try:
        raw = (proc / str(pid) / "cmdline").read_bytes()
    except OSError:
        return None
    if not raw:
        return None
    return tuple(part.decode(errors="replace") for part in raw.rstrip(b"\0").split(b"\0"))


def read_start_time(pid: int, proc: Path = PROC) -> int | None:
    """Field 22 (starttime) of ``/proc/<pid>/stat``, or None when the process is gone."""
    stat = read_stat(pid, proc)
    return None if stat is None or stat.dead else stat.start_time


def _identify(record: ProcessRecord, proc: Path) -> bool | None:
    """True: it is the recorded process; False: it is not; None: ``/proc`` cannot tell yet."""
    stat = read_stat(record.pid, proc)
    if stat is None or stat.dead or stat.flags & _PF_KTHREAD:
        return False
    if stat.start_time != record.start_time:
        return False
    return True if read_cmdline(record.pid, proc) == record.argv else None


def is_ours(record: ProcessRecord, proc: Path = PROC, settle: float = SETTLE_SECONDS) -> bool:
    """True when ``record.pid`` is still the very process we started (same start, same argv).

    PID and start time together name one process; the argv check guards against a PID and
    start time met again after a reboot. A live process with that PID and start time that
    shows another or an empty argv is re-read for up to ``settle`` seconds (it may be in the
    middle of ``exec`` or of exiting); one that still shows no argv then is ours, one that shows
    another argv is not.
    """
    deadline = time.monotonic() + settle
    while True:
        verdict = _identify(record, proc)
        if verdict is not None:
            return verdict
        if time.monotonic() >= deadline:  # the same PID and start time all along
            return read_cmdline(record.pid, proc) is None and _identify(record, proc) is not False
        time.sleep(0.01)


# --- starting ----------------------------------------------------------------------------------

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
    env: Mapping[str, str] | None = None,
) -> Child:
    """Start ``argv`` in its own session, output to ``log``; survive our exit unless told not to.

    With ``die_with_parent`` the kernel sends SIGTERM to the child when the thread that
    started it ends, so a test session killed hard does not leave a control plane behind.
    """
    log.parent.mkdir(parents=True, exist_ok=True)
    preexec = _parent_death_signal() if die_with_parent else None
    with log.open("ab") as out:
        popen = subprocess.Popen(
            list(argv),
            stdin=subprocess.DEVNULL,
            stdout=out,
            stderr=subprocess.STDOUT,
            cwd=cwd,
            env=None if env is None else dict(env),
            start_new_session=True,
            close_fds=True,
            preexec_fn=preexec,
        )
    # The Popen is dropped: the child is meant to outlive it (and this process), and Child
    # reads its exit by PID. Marked settled, so that collecting the Popen neither warns about a
    # running child nor reaps it behind Child's back.
    popen.returncode = 0
    stat = read_stat(popen.pid)  # there even if it has exited already: we have not reaped it
    start_time = stat.start_time if stat is not None else -1
    return Child(ProcessRecord(name, popen.pid, tuple(argv), start_time, str(log)))


class Child:
    """A process this one started and is the parent of: the kernel says when it has exited.

    The exit is looked at without reaping (``WNOWAIT``): until :meth:`stop` reaps it, its PID,
    and so its process group ID, cannot be given to another process.
    """

    def __init__(self, record: ProcessRecord) -> None:
        self.record = record
        self._reaped = False

    def exit_status(self) -> str | None:
        """None while it runs; how it ended ("exited with status 1", "killed by SIGKILL")."""
        if self._reaped:
            return "stopped"
        try:
            result = os.waitid(os.P_PID, self.record.pid, os.WEXITED | os.WNOHANG | os.WNOWAIT)
        except ChildProcessError:
            # Reaped by someone else (SIGCHLD ignored, a waitpid(-1) elsewhere): ask /proc.
            return None if is_ours(self.record) else "exited"
        if result is None:
            return None
        if result.si_code == os.CLD_EXITED:
            return f"exited with status {result.si_status}"
        try:
            return f"killed by {signal.Signals(result.si_status).name}"
        except ValueError:
            return f"killed by signal {result.si_status}"

    def terminate(self) -> None:
        """SIGTERM its process group if it still runs, without waiting (:meth:`stop` waits)."""
        if not self._reaped and self.exit_status() is None:
            self._signal_group(signal.SIGTERM)

    def stop(self, timeout: float = 10.0) -> None:
        """SIGTERM its process group, SIGKILL after ``timeout``, then reap it (idempotent)."""
        if self._reaped:
            return
        if self.exit_status() is None:
            self._signal_group(signal.SIGTERM)
            if not self._wait_exit(timeout):
                self._signal_group(signal.SIGKILL)
                self._wait_exit(timeout)
        # Whatever else runs in its group: the unreaped leader keeps the group ID ours.
        self._signal_group(signal.SIGKILL)
        self._reap()

    def _signal_group(self, signum: signal.Signals) -> None:
        try:
            os.waitid(os.P_PID, self.record.pid, os.WEXITED | os.WNOHANG | os.WNOWAIT)
        except ChildProcessError:  # reaped elsewhere: the group ID may be someone else's now
            if is_ours(self.record):
                os.kill(self.record.pid, signum)
            return
        with contextlib.suppress(ProcessLookupError):  # the leader exited, its group is empty
            os.killpg(self.record.pid, signum)

    def _wait_exit(self, timeout: float) -> bool:
        deadline = time.monotonic() + timeout
        while self.exit_status() is None:
            if time.monotonic() >= deadline:
                return False
            time.sleep(0.02)
        return True

    def _reap(self) -> None:
        try:
            pid, _status = os.waitpid(self.record.pid, os.WNOHANG)
        except ChildProcessError:
            pid = self.record.pid
        self._reaped = pid == self.record.pid


# --- stopping by record (a later command) --------------------------------------------------------


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


def _signal(record: ProcessRecord, signum: signal.Signals, proc: Path) -> None:
    """Signal the process, and its whole group when it leads one (as every spawned one does)."""
    stat = read_stat(record.pid, proc)
    try:
        if stat is not None and stat.pgrp == record.pid:
            os.killpg(record.pid, signum)
        else:
            os.kill(record.pid, signum)
    except ProcessLookupError:
        pass


def stop(record: ProcessRecord, timeout: float = 10.0, proc: Path = PROC) -> bool:
    """SIGTERM (then SIGKILL after ``timeout``) the process and its group if it is still ours.

    Returns True when a process was signalled, False when it was already gone or the PID now
    belongs to another program (which is left alone).
    """
    if not is_ours(record, proc):
        _reap(record.pid)
        return False
    _signal(record, signal.SIGTERM, proc)
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        _reap(record.pid)
        if read_start_time(record.pid, proc) != record.start_time:  # a zombie, or gone
            _reap(record.pid, wait=2.0)
            return True
        time.sleep(0.05)
    if is_ours(record, proc):
        _signal(record, signal.SIGKILL, proc)
        for _ in range(100):
            _reap(record.pid)
            if read_start_time(record.pid, proc) != record.start_time:
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
