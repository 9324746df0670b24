"""The controller benchmark's arithmetic (the runs themselves need a control plane: make bench)."""

from __future__ import annotations

import pytest

from modelserving.bench.controller import Run, Snapshot, paired, run_order


def run(variant: str, seconds: float | None) -> Run:
    return Run(variant, seconds, 0.1, Snapshot(), 1.0, 2.0)


def test_run_order_puts_each_variant_in_each_place() -> None:
    assert run_order(3) == [
        *("none", "native", "wasm"),
        *("wasm", "none", "native"),
        *("native", "wasm", "none"),
    ]


def test_paired_compares_within_rounds(capsys: pytest.CaptureFixture[str]) -> None:
    # round 1 fast, round 2 slow: the medians of the variants mix the two, the pairs do not
    runs = [
        *(run("none", 5.0), run("native", 5.5), run("wasm", 5.25)),
        *(run("wasm", 10.5), run("none", 10.0), run("native", 11.0)),
        *(run("native", 8.8), run("wasm", None), run("none", 8.0)),  # wasm did not finish
    ]
    paired(runs)
    assert capsys.readouterr().out.splitlines() == [
        "  native vs none within each round: median +10.0 % (rounds: +10, +10, +10 %)",
        "  wasm vs native within each round: median  -4.5 % (rounds: -5, -5 %)",
        "  wasm vs none within each round: median  +5.0 % (rounds: +5, +5 %)",
    ]


def test_paired_needs_two_rounds(capsys: pytest.CaptureFixture[str]) -> None:
    paired([run("none", 5.0), run("native", 5.5), run("wasm", 5.25)])
    assert capsys.readouterr().out == ""
