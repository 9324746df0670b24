"""``make bench``'s toolchain rows (modelserving.bench.toolchains): the same plugin built with
Rust, TinyGo and standard Go, measured from the committed modules. The builds and cold loads
are stubbed here (the bench runs them); the sizes, fuel and calls are real."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from modelserving.bench import plugins, toolchains
from modelserving.sandbox import Sandbox

ROW = re.compile(
    r"^    (?P<label>.+?)\s+(?P<size>\d+)\s+(?P<gz>\d+)\s+(?P<build>[\d.]+s|n/a)\s+"
    r"(?P<cold>[\d.]+)ms\s+(?P<fuel>\d+)\s+(?P<p50>[\d.]+)us\s+(?P<p99>[\d.]+)us$"
)


def test_one_row_per_toolchain(
    sandbox: Sandbox, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    built: list[str] = []

    def stub(toolchain: toolchains.Toolchain) -> tuple[float | None, str]:
        built.append(toolchain.label)
        return (None, "no toolchain") if "Rust" in toolchain.label else (1.5, "same bytes")

    monkeypatch.setattr(toolchains, "build_seconds", stub)
    monkeypatch.setattr(toolchains, "CALLS", 5)
    monkeypatch.setattr(plugins, "WARMUP", 2)
    monkeypatch.setattr(toolchains, "median_us", lambda fn, n=20: 1000.0)  # cold loads: slow
    toolchains.main(sandbox)
    out = capsys.readouterr().out
    rows = {m["label"]: m for line in out.splitlines() if (m := ROW.match(line))}
    assert list(rows) == ["Rust 1.63", "TinyGo 0.37.0", "Go 1.26.8"] == built
    assert rows["Rust 1.63"]["build"] == "n/a" and rows["TinyGo 0.37.0"]["build"] == "1.50s"
    for label, toolchain in zip(rows, toolchains.TOOLCHAINS, strict=True):
        assert int(rows[label]["size"]) == len(toolchain.module.read_bytes())
    tiny, go = rows["TinyGo 0.37.0"], rows["Go 1.26.8"]
    assert int(tiny["size"]) * 10 < int(go["size"])
    assert int(tiny["fuel"]) < int(go["fuel"])  # both runtimes started at load (preinit)
    assert "    build of Rust 1.63: no toolchain" in out
    per_call = re.search(r"Go 1.26.8 with _initialize in every call .*: fuel (\d+),", out)
    assert per_call is not None and int(per_call[1]) > int(go["fuel"]) + 900_000


def test_the_builds_it_times_are_build_go_sh_and_build_sh() -> None:
    commands = [toolchains._command(t) for t in toolchains.TOOLCHAINS]
    src = str(Path(toolchains.ROOT) / "plugins-src")
    assert commands == [
        ["bash", f"{src}/build.sh", "build", "demo-pod-tweaks"],
        ["bash", f"{src}/build-go.sh", "build", "tinygo", "demo-pod-tweaks"],
        ["bash", f"{src}/build-go.sh", "build", "go", "demo-pod-tweaks"],
    ]
