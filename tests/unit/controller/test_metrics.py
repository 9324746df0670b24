"""Each Metrics method shows in the exposition text; serve() answers over HTTP."""

from __future__ import annotations

import urllib.request
from dataclasses import dataclass
from typing import Any, cast

import pytest
from prometheus_client.parser import text_string_to_metric_families

from modelserving.chain import CallRecord
from modelserving.controller.manager import _Reports
from modelserving.controller.metrics import Metrics
from modelserving.sandbox.cache import CacheStats


def samples(metrics: Metrics) -> dict[tuple[str, tuple[tuple[str, str], ...]], float]:
    """Every sample of the rendered text, by name and sorted labels."""
    text = metrics.render().decode()
    return {
        (s.name, tuple(sorted(s.labels.items()))): s.value
        for family in text_string_to_metric_families(text)
        for s in family.samples
    }


def value(metrics: Metrics, name: str, **labels: str) -> float | None:
    return samples(metrics).get((name, tuple(sorted(labels.items()))))


@pytest.fixture
def metrics() -> Metrics:
    return Metrics()


def test_fresh_instances_do_not_share_counters() -> None:
    first, second = Metrics(), Metrics()
    first.pod_created()
    assert value(first, "modelserving_pods_created_total") == 1
    assert value(second, "modelserving_pods_created_total") == 0


def test_observe_hook_counts_times_and_fuel(metrics: Metrics) -> None:
    metrics.observe_hook("gpu-env", "OnPodCreate", "Wasm", "ok", 0.0003, fuel=20_000)
    metrics.observe_hook("gpu-env", "OnPodCreate", "Wasm", "Timeout", 2.0, fuel=5_000_000)
    metrics.observe_hook("tweaks", "OnPodReady", "Native", "ok", 0.00002)

    calls = "modelserving_plugin_hook_calls_total"
    wasm = {"plugin": "gpu-env", "hook": "OnPodCreate", "runtime": "Wasm"}
    assert value(metrics, calls, **wasm, result="ok") == 1
    assert value(metrics, calls, **wasm, result="Timeout") == 1
    native = {"plugin": "tweaks", "hook": "OnPodReady", "runtime": "Native"}
    assert value(metrics, calls, **native, result="ok") == 1

    duration = "modelserving_plugin_hook_duration_seconds"
    assert value(metrics, f"{duration}_count", **wasm) == 2
    assert value(metrics, f"{duration}_sum", **wasm) == pytest.approx(2.0003)
    assert value(metrics, f"{duration}_bucket", **wasm, le="0.0005") == 1
    assert value(metrics, f"{duration}_bucket", **native, le="2.5e-05") == 1
    assert value(metrics, f"{duration}_bucket", **native, le="1e-05") == 0

    fuel = "modelserving_plugin_fuel_used"
    assert value(metrics, f"{fuel}_count", plugin="gpu-env", hook="OnPodCreate") == 2
    assert value(metrics, f"{fuel}_bucket", plugin="gpu-env", hook="OnPodCreate", le="1e+10") == 2
    assert value(metrics, f"{fuel}_bucket", plugin="gpu-env", hook="OnPodCreate", le="30000.0") == 1
    # A native call has no fuel: no series for it.
    assert value(metrics, f"{fuel}_count", plugin="tweaks", hook="OnPodReady") is None


def test_module_loads_by_result(metrics: Metrics) -> None:
    metrics.observe_module_load("compiled")
    metrics.observe_module_load("failed")
    metrics.observe_module_load("failed")
    assert value(metrics, "modelserving_module_loads_total", result="compiled") == 1
    assert value(metrics, "modelserving_module_loads_total", result="failed") == 2
    with pytest.raises(ValueError, match="'hit' is not one of"):
        metrics.observe_module_load("hit")


@dataclass
class Stats:
    compiled: int = 0
    memory_hits: int = 0
    disk_hits: int = 0
    disk_rejected: int = 0
    disk_evicted: int = 0
    disk_evicted_bytes: int = 0
    disk_bytes: int = 0
    memory_evicted: int = 0


def test_sync_module_cache_adds_only_the_growth(metrics: Metrics) -> None:
    stats = Stats(compiled=2, memory_hits=5)
    metrics.sync_module_cache(stats)
    stats.memory_hits += 3
    stats.disk_hits += 1
    metrics.sync_module_cache(stats)
    metrics.sync_module_cache(stats)  # nothing new
    loads = "modelserving_module_loads_total"
    assert value(metrics, loads, result="compiled") == 2
    assert value(metrics, loads, result="memory_cache") == 8
    assert value(metrics, loads, result="disk_cache") == 1
    # A new cache (counts went down) is counted from zero.
    metrics.sync_module_cache(Stats(compiled=1))
    assert value(metrics, loads, result="compiled") == 3
    assert value(metrics, loads, result="memory_cache") == 8


def test_sync_module_cache_reads_the_real_cache_stats(metrics: Metrics) -> None:
    metrics.sync_module_cache(CacheStats(compiled=1, disk_hits=2, memory_hits=3))
    assert value(metrics, "modelserving_module_loads_total", result="disk_cache") == 2


def test_memory_evictions_are_counted_and_the_memory_gauge_reads_the_cache(
    metrics: Metrics,
) -> None:
    stats = CacheStats(memory_evicted=2)
    metrics.sync_module_cache(stats)
    stats.memory_evicted += 1
    metrics.sync_module_cache(stats)
    assert value(metrics, "modelserving_module_memory_evictions_total") == 3
    held = [1000]
    metrics.watch_module_memory(lambda: held[0])
    assert value(metrics, "modelserving_module_memory_cache_bytes") == 1000
    held[0] = 250
    assert value(metrics, "modelserving_module_memory_cache_bytes") == 250


def test_sync_module_cache_exports_the_disk_caches_rejections_evictions_and_size(
    metrics: Metrics,
) -> None:
    stats = CacheStats(disk_rejected=1, disk_evicted=2, disk_evicted_bytes=3000, disk_bytes=9000)
    metrics.sync_module_cache(stats)
    stats.disk_evicted += 1
    stats.disk_evicted_bytes += 500
    stats.disk_bytes = 8500
    metrics.sync_module_cache(stats)
    metrics.sync_module_cache(stats)  # nothing new
    assert value(metrics, "modelserving_module_cache_rejected_total") == 1
    assert value(metrics, "modelserving_module_cache_evictions_total") == 3
    assert value(metrics, "modelserving_module_cache_evicted_bytes_total") == 3500
    assert value(metrics, "modelserving_module_cache_bytes") == 8500
    # A new cache is counted from zero; the size is the new cache's.
    metrics.sync_module_cache(Stats(disk_evicted=1, disk_bytes=100))
    assert value(metrics, "modelserving_module_cache_evictions_total") == 4
    assert value(metrics, "modelserving_module_cache_bytes") == 100


def test_reconciles(metrics: Metrics) -> None:
    metrics.observe_reconcile("ok", 0.02)
    metrics.observe_reconcile("requeue", 0.5)
    metrics.observe_reconcile("ok", 0.03)
    assert value(metrics, "modelserving_reconciles_total", result="ok") == 2
    assert value(metrics, "modelserving_reconciles_total", result="requeue") == 1
    assert value(metrics, "modelserving_reconcile_duration_seconds_count", result="ok") == 2
    assert value(
        metrics, "modelserving_reconcile_duration_seconds_sum", result="ok"
    ) == pytest.approx(0.05)
    with pytest.raises(ValueError, match="'done' is not one of"):
        metrics.observe_reconcile("done", 1.0)


def test_pods_queue_and_leader(metrics: Metrics) -> None:
    assert value(metrics, "modelserving_leader") == 0
    metrics.pod_created()
    metrics.pod_created()
    metrics.pod_deleted()
    metrics.set_queue_depth(7)
    metrics.set_leader(True)
    assert value(metrics, "modelserving_pods_created_total") == 2
    assert value(metrics, "modelserving_pods_deleted_total") == 1
    assert value(metrics, "modelserving_workqueue_depth") == 7
    assert value(metrics, "modelserving_leader") == 1
    metrics.set_queue_depth(0)
    metrics.set_leader(False)
    assert value(metrics, "modelserving_workqueue_depth") == 0
    assert value(metrics, "modelserving_leader") == 0


def test_serve_answers_http_get(metrics: Metrics) -> None:
    metrics.pod_deleted()
    server = metrics.serve(0, addr="127.0.0.1")
    try:
        assert server.port > 0
        url = f"http://127.0.0.1:{server.port}/metrics"
        with urllib.request.urlopen(url, timeout=5) as response:
            assert response.status == 200
            body = response.read().decode()
    finally:
        server.close()
    assert "modelserving_pods_deleted_total 1.0" in body
    assert not server.thread.is_alive()
    server.close()  # idempotent


def test_monitored_calls_and_owned_objects_are_counted(metrics: Metrics) -> None:
    reports = _Reports(cast(Any, None), metrics, cast(Any, None))
    for result, changes in (("ok", 2), ("ok", 0), ("PluginError", 0)):
        record = CallRecord(
            "m", "OnPodCreate", "Native", result, 0.001, monitored=True, changes=changes
        )
        reports.hook(record)
    reports.hook(CallRecord("e", "OnPodCreate", "Native", "ok", 0.001, changes=3))  # enforced
    name = "modelserving_plugin_monitored_calls_total"
    for result in ("change", "no_change", "PluginError"):
        assert value(metrics, name, plugin="m", hook="OnPodCreate", result=result) == 1
    assert value(metrics, name, plugin="e", hook="OnPodCreate", result="change") is None
    reports.objects("p", "applied", 2)
    reports.objects("p", "applied", 0)
    reports.objects("p", "refused", 1)
    assert value(metrics, "modelserving_plugin_objects_total", plugin="p", action="applied") == 2
    assert value(metrics, "modelserving_plugin_objects_total", plugin="p", action="refused") == 1
