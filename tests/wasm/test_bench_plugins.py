"""``make bench``'s plugin rows (modelserving.bench.plugins): each OnPodCreate built-in timed in
turn with the floor of its WebAssembly call (modelserving.bench.floor), which must patch the Pod
exactly as the chain does. Figures are printed, never asserted; here the calls are few."""

from __future__ import annotations

import re

import pytest

from modelserving.api.hook import Hook
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


def test_hook_requests_hand_each_plugin_the_pod_the_chain_does() -> None:
    chain, pods = plugins.chain_pods(plugins.SHARED, "Native", None, 2)
    for desired, requests in zip(pods, plugins.hook_requests(chain, pods), strict=True):
        outcomes = chain.on_pod_create(desired).outcomes
        assert [plugin.name for plugin, _ in requests] == plugins.SHARED
        assert requests[0][1].pod is desired.pod
        for (plugin, request), outcome in zip(requests, outcomes, strict=True):
            reply = plugin.call(Hook.ON_POD_CREATE, request)
            assert reply.patch == outcome.patch, outcome.plugin
        # each next plugin is handed what the one before made of the Pod
        for (_, request), outcome in zip(requests[1:], outcomes, strict=False):
            assert request.pod == outcome.pod


def test_the_shared_chain_row_prints_the_overhead_per_plugin(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.setattr(plugins, "ITERATIONS", 5)
    monkeypatch.setattr(plugins, "WARMUP", 1)
    plugins.bench_shared_chain()
    out = capsys.readouterr().out
    count = len(plugins.SHARED)
    assert re.search(
        rf"one chain of {count}\s+p50\s+[\d.]+ us\s+its hooks\s+[\d.]+ us\s+overhead per plugin"
        r"\s+-?[\d.]+ us \(target <= 25 us\)",
        out,
    )
    assert re.search(rf"{count} chains of one p50\s+[\d.]+ us.*overhead per plugin\s+-?[\d.]+", out)
    assert re.search(r"overhead / hooks p50: one chain -?[\d.]+, chains of one -?[\d.]+", out)
