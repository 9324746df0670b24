"""``make bench`` prints the CLI start-up figure: ``--version`` and ``render --help`` in a new
process, median and minimum, beside the 0.3 s target and the ``python -c pass`` floor. Only the
report's shape is checked here; the figures are the benchmark's to judge."""

from __future__ import annotations

import re
import subprocess
import sys

import pytest

from modelserving.bench import startup


def test_the_figure_names_each_command_its_times_and_the_target(
    capsys: pytest.CaptureFixture[str],
) -> None:
    startup.main(runs=1)
    out = capsys.readouterr().out
    assert "target: each under 300 ms" in out
    figure = r"median\s+[\d.]+ ms, min\s+[\d.]+ ms, CPU\s+[\d.]+ ms"
    assert re.search(rf"python -c pass \(the floor\):\s+{figure}\n", out), out
    for command in ("--version", "render --help"):
        assert re.search(rf"modelserving {command}:\s+{figure}  target 300 ms: (ok|OVER)", out), out


def test_cpu_time_is_the_command_s_own() -> None:
    """The CPU figure is measured per process: a command that burns CPU shows it."""
    busy = [sys.executable, "-c", "sum(range(3_000_000))"]
    idle = [sys.executable, "-c", "pass"]
    assert startup.time_process(busy, runs=1).cpu > startup.time_process(idle, runs=1).cpu


def test_a_failing_command_is_an_error_not_a_figure() -> None:
    with pytest.raises(subprocess.CalledProcessError, match="exit status 2"):
        startup.time_process([sys.executable, "-c", "raise SystemExit(2)"], runs=1)
