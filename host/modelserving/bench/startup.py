"""``make bench``, CLI start-up part: how long ``modelserving --version`` and
``modelserving render --help`` take as a user runs them (a new process: Python start-up, the
imports the parser needs, argparse), median and minimum of ``RUNS`` runs, beside the 0.3 s target
and beside ``python -c pass`` (the floor no import work can go under).

Run alone: ``python -m modelserving.bench.startup [RUNS]``. Called first by
``modelserving.bench.render.main``.
"""

from __future__ import annotations

import statistics
import subprocess
import sys
import time
from collections.abc import Sequence
from pathlib import Path

RUNS = 11
TARGET_MS = 300.0
COMMANDS: tuple[tuple[str, ...], ...] = (("--version",), ("render", "--help"))


def time_process(argv: Sequence[str], runs: int) -> tuple[float, float]:
    """Median and minimum wall time in ms of ``argv`` run ``runs`` times (it must exit 0)."""
    times = []
    for _ in range(runs):
        start = time.perf_counter()
        subprocess.run(argv, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, check=True)
        times.append((time.perf_counter() - start) * 1000)
    return statistics.median(times), min(times)


def main(runs: int = RUNS) -> None:
    script = Path(sys.executable).with_name("modelserving")
    print(
        f"CLI start-up: new process each run, {runs} runs (target: each under {TARGET_MS:.0f} ms)"
    )
    if not script.exists():
        print(f"  (no {script}: skipped; install the package in this venv)")
        return
    median, low = time_process([sys.executable, "-c", "pass"], runs)
    print(f"  {'python -c pass (the floor):':<36} median {median:6.1f} ms, min {low:6.1f} ms")
    for args in COMMANDS:
        median, low = time_process([str(script), *args], runs)
        verdict = "ok" if median <= TARGET_MS else "OVER"
        label = f"modelserving {' '.join(args)}:"
        print(
            f"  {label:<36} median {median:6.1f} ms, min {low:6.1f} ms"
            f"  target {TARGET_MS:.0f} ms: {verdict}"
        )


if __name__ == "__main__":
    main(int(sys.argv[1]) if len(sys.argv) > 1 else RUNS)
