"""``make bench``'s plugin rows (modelserving.bench.plugins): each OnPodCreate built-in timed in
turn with the floor of its WebAssembly call (modelserving.bench.floor), which must patch the Pod
exactly as the chain does. Figures are printed, never asserted; here the calls are few."""

from __future__ import annotations

import re

import pytest

from modelserving.api.labels import PLUGINS_APPLIED_ANNOTATION
from modelserving.bench import floor, plugins
from modelserving.sandbox import Sandbox

CREATE_BUILTINS = ["demo-pod-tweaks", "accelerator", "inference-engine", "rdma-network"]


@pytest.mark.parametrize("name", CREATE_BUILTINS)
def test_the_floor_patches_as_the_chain_does(sandbox: Sandbox, name: str) -> None:
    wasm, desired = plugins.chain_for(name, "Wasm", sandbox)
    expected = wasm.on_pod_create(desired).pod
    got = floor.Floor(wasm, desired)(desired.pod)
    annotations = dict(expected["metadata"]["annotations"])
    del annotations[PLUGINS_APPLIED_ANNOTATION]
    metadata = {**expected["metadata"], "annotations": annotations}
    if not annotations and "annotations" not in desired.pod["metadata"]:
        del metadata["annotations"]
    assert got == {**expected, "metadata": metadata}


@pytest.mark.parametrize("name", CREATE_BUILTINS)
def test_the_rows_print_the_floor_beside_the_call(
    sandbox: Sandbox,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
    name: str,
) -> None:
    monkeypatch.setattr(plugins, "ITERATIONS", 5)
    monkeypatch.setattr(plugins, "WARMUP", 1)
    plugins.bench_builtin(name, sandbox)
    out = capsys.readouterr().out
    for row in ("native", "wasm", "wasm floor", "native hook"):
        assert re.search(rf"^    {row}\s+p50\s+[\d.]+ us", out, re.M), row
    assert re.search(r"wasm/floor\s+p50 [\d.]+x \(target <= 1.5x\)", out)
    assert re.search(r"native chain overhead \(native - hook\) p50 -?[\d.]+ us", out)
    assert re.search(r"overhead / hook p50 -?[\d.]+ \(", out)


def test_interleaved_runs_every_call_once_per_round() -> None:
    order: list[str] = []
    times = floor.interleaved(
        {"a": lambda: order.append("a"), "b": lambda: order.append("b")}, 3, 1
    )
    assert order == ["a", "b"] * 4
    assert [len(v) for v in times.values()] == [3, 3]
    assert times["a"] == sorted(times["a"])
