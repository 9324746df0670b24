"""``make bench``, CLI start-up part: how long ``modelserving --version`` and
``modelserving render --help`` take as a user runs them (a new process: Python start-up, the
imports the parser needs, argparse), median and minimum of ``RUNS`` runs, beside the 0.3 s target
and beside ``python -c pass`` (the floor no import work can go under). The median CPU time
(user + system) of the process is printed too: on a busy machine the wall time also counts the
time spent waiting for a core, the CPU time much less so.

Run alone: ``python -m modelserving.bench.startup [RUNS]``. Called first by
``modelserving.bench.render.main``.
"""

from __future__ import annotations

import resource
import statistics
import subprocess
import sys
import time
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

RUNS = 11
TARGET_MS = 300.0
COMMANDS: tuple[tuple[str, ...], ...] = (("--version",), ("render", "--help"))


@dataclass(frozen=True)
class Figure:
    """Of ``runs`` runs of one command, in ms: median and minimum wall time, median CPU time."""

    median: float
    low: float
    cpu: float

    def __str__(self) -> str:
        return f"median {self.median:6.1f} ms, min {self.low:6.1f} ms, CPU {self.cpu:6.1f} ms"


def _children_cpu() -> float:
    usage = resource.getrusage(resource.RUSAGE_CHILDREN)
    return usage.ru_utime + usage.ru_stime


def time_process(argv: Sequence[str], runs: int) -> Figure:
    """``argv`` run ``runs`` times, each in a new process (it must exit 0)."""
    times = []
    cpus = []
    for _ in range(runs):
        cpu = _children_cpu()
        start = time.perf_counter()
        subprocess.run(argv, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, check=True)
        times.append((time.perf_counter() - start) * 1000)
        cpus.append((_children_cpu() - cpu) * 1000)
    return Figure(statistics.median(times), min(times), statistics.median(cpus))


def main(runs: int = RUNS) -> None:
    script = Path(sys.executable).with_name("modelserving")
    print(
        f"CLI start-up: new process each run, {runs} runs (target: each under {TARGET_MS:.0f} ms)"
    )
    if not script.exists():
        print(f"  (no {script}: skipped; install the package in this venv)")
        return
    floor = time_process([sys.executable, "-c", "pass"], runs)
    print(f"  {'python -c pass (the floor):':<30} {floor}")
    for args in COMMANDS:
        figure = time_process([str(script), *args], runs)
        verdict = "ok" if figure.median <= TARGET_MS else "OVER"
        label = f"modelserving {' '.join(args)}:"
        print(f"  {label:<30} {figure}  target {TARGET_MS:.0f} ms: {verdict}")


if __name__ == "__main__":
    main(int(sys.argv[1]) if len(sys.argv) > 1 else RUNS)
