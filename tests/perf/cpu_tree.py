"""Where a run's CPU went, by process tree, from the kernel's process accounting: every process
that ended while accounting was on, with the CPU of itself and all its descendants, largest
first (subtrees under ``MIN_SECONDS`` left out). Used to measure a cold ``make test``
(docs/local-cluster.md, "Where a cold make test spends its CPU"):

    apt-get install acct                   # accton and dump-acct
    accton /var/log/account/pacct          # as root; `accton off` stops it
    make fresh-check
    accton off
    .venv/bin/python tests/perf/cpu_tree.py /var/log/account/pacct [MIN_SECONDS]

A process still running when accounting stops is not in the file: its children then appear as
roots of their own.
"""

from __future__ import annotations

import subprocess
import sys
from collections import defaultdict
from dataclasses import dataclass

TICKS_PER_SECOND = 100
"""dump-acct prints user and system time in clock ticks (AHZ)."""


@dataclass(frozen=True)
class Ended:
    command: str
    seconds: float
    """User and system CPU of the process itself."""
    parent: int
    started: str
    wall: float


def read(path: str) -> dict[int, Ended]:
    """The accounting file's processes by PID (``dump-acct``'s columns: command, version,
    user, system, elapsed, uid, gid, memory, io, pid, ppid, flags, exit code, tty, start)."""
    listing = subprocess.run(["dump-acct", path], capture_output=True, text=True, check=True)
    ended = {}
    for line in listing.stdout.splitlines():
        fields = [field.strip() for field in line.split("|")]
        if len(fields) < 15:
            continue
        user, system, elapsed = (float(fields[i]) / TICKS_PER_SECOND for i in (2, 3, 4))
        ended[int(fields[9])] = Ended(
            fields[0], user + system, int(fields[10]), fields[14][11:19], elapsed
        )
    return ended


def main() -> None:
    path = sys.argv[1] if len(sys.argv) > 1 else "/var/log/account/pacct"
    least = float(sys.argv[2]) if len(sys.argv) > 2 else 20.0
    ended = read(path)
    children: dict[int, list[int]] = defaultdict(list)
    for pid, process in ended.items():
        children[process.parent].append(pid)
    totals: dict[int, float] = {}

    def total(pid: int) -> float:
        if pid not in totals:
            own = ended[pid].seconds if pid in ended else 0.0
            totals[pid] = own + sum(total(child) for child in children[pid])
        return totals[pid]

    def show(pid: int, depth: int) -> None:
        if total(pid) < least:
            return
        process = ended[pid]
        print(
            f"{'  ' * depth}{total(pid):8.1f} s  {process.command} (pid {pid}, itself "
            f"{process.seconds:.1f} s, started {process.started}, {process.wall:.0f} s)"
        )
        for child in sorted(children[pid], key=total, reverse=True):
            show(child, depth + 1)

    sys.setrecursionlimit(10_000)
    print(f"{sum(p.seconds for p in ended.values()):.0f} s of CPU in {len(ended)} processes")
    for root in sorted((p for p, e in ended.items() if e.parent not in ended), key=total)[::-1]:
        show(root, 0)


if __name__ == "__main__":
    main()
