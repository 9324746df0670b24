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
    assert re.search(r"python -c pass \(the floor\):\s+median\s+[\d.]+ ms, min\s+[\d.]+ ms", out)
    for command in ("--version", "render --help"):
        assert re.search(
            rf"modelserving {command}:\s+median\s+[\d.]+ ms, min\s+[\d.]+ ms"
            r"  target 300 ms: (ok|OVER)",
            out,
        ), out


def test_a_failing_command_is_an_error_not_a_figure() -> None:
    with pytest.raises(subprocess.CalledProcessError, match="exit status 2"):
        startup.time_process([sys.executable, "-c", "raise SystemExit(2)"], runs=1)
