"""The histogram of what plugins measure (``modelserving_plugin_observation_seconds``): its
labels and buckets, the bound on names per plugin, and the controller feeding it from the
chain's call records."""

from __future__ import annotations

import logging
from typing import Any, cast

import pytest

from modelserving.chain import CallRecord
from modelserving.controller.manager import _Reports
from modelserving.controller.metrics import MAX_OBSERVATION_NAMES, OBSERVATION_BUCKETS, Metrics
from modelserving.plugins.base import Observation

HISTOGRAM = "modelserving_plugin_observation_seconds"


def sample(metrics: Metrics, suffix: str, **labels: str) -> float | None:
    """One sample read from the registry."""
    return metrics.registry.get_sample_value(HISTOGRAM + suffix, labels)


def test_observations_are_counted_by_plugin_name_and_role() -> None:
    metrics = Metrics()
    assert metrics.observe_plugin_value(
        "ns", "ready-reporter", "pod_ready_seconds", "prefill", 42.5
    )
    metrics.observe_plugin_value("ns", "ready-reporter", "pod_ready_seconds", "prefill", 700.0)
    metrics.observe_plugin_value("ns", "ready-reporter", "pod_ready_seconds", "decode", 0.2)
    prefill = {
        "namespace": "ns",
        "plugin": "ready-reporter",
        "name": "pod_ready_seconds",
        "role": "prefill",
    }
    assert sample(metrics, "_count", **prefill) == 2
    assert sample(metrics, "_sum", **prefill) == pytest.approx(742.5)
    assert sample(metrics, "_bucket", **prefill, le="30.0") == 0
    assert sample(metrics, "_bucket", **prefill, le="60.0") == 1
    assert sample(metrics, "_bucket", **prefill, le="600.0") == 1
    assert sample(metrics, "_bucket", **prefill, le="1200.0") == 2
    decode = {**prefill, "role": "decode"}
    assert sample(metrics, "_bucket", **decode, le="1.0") == 1
    assert b"# TYPE modelserving_plugin_observation_seconds histogram" in metrics.render()


def test_the_buckets_span_seconds_to_an_hour() -> None:
    assert OBSERVATION_BUCKETS[0] == 1.0 and OBSERVATION_BUCKETS[-1] == 3600.0
    assert list(OBSERVATION_BUCKETS) == sorted(set(OBSERVATION_BUCKETS))
    metrics = Metrics()
    metrics.observe_plugin_value("ns", "p", "a_seconds", "r", 1.0)
    labels = {"namespace": "ns", "plugin": "p", "name": "a_seconds", "role": "r"}
    for bound in OBSERVATION_BUCKETS:
        assert sample(metrics, "_bucket", **labels, le=str(float(bound))) == 1
    assert sample(metrics, "_bucket", **labels, le="+Inf") == 1


def test_names_are_bounded_per_plugin(caplog: pytest.LogCaptureFixture) -> None:
    metrics = Metrics()
    names = [f"n{i}_seconds" for i in range(MAX_OBSERVATION_NAMES + 3)]
    with caplog.at_level(logging.WARNING, "modelserving.controller.metrics"):
        kept = [metrics.observe_plugin_value("ns", "p", name, "r", 1.0) for name in names]
        # a known name still counts, another plugin has its own budget
        assert metrics.observe_plugin_value("ns", "p", names[0], "other-role", 1.0)
        assert metrics.observe_plugin_value("ns", "q", names[-1], "r", 1.0)
        # the same plugin name in another namespace has its own budget too
        assert metrics.observe_plugin_value("other", "p", names[-1], "r", 1.0)
    assert kept == [True] * MAX_OBSERVATION_NAMES + [False] * 3
    assert sample(metrics, "_count", namespace="ns", plugin="p", name=names[-1], role="r") is None
    assert (
        sample(metrics, "_count", namespace="ns", plugin="p", name=names[0], role="other-role") == 1
    )
    assert sample(metrics, "_count", namespace="ns", plugin="q", name=names[-1], role="r") == 1
    assert sample(metrics, "_count", namespace="other", plugin="p", name=names[-1], role="r") == 1
    warnings = [r.getMessage() for r in caplog.records]
    assert warnings == [
        f"plugin 'p' in namespace ns reported more than {MAX_OBSERVATION_NAMES} observation "
        f"names; dropping '{names[MAX_OBSERVATION_NAMES]}' and every further new name"
    ]


def test_the_controller_feeds_observations_from_call_records() -> None:
    metrics = Metrics()
    reports = _Reports(cast(Any, None), metrics, cast(Any, None))
    reports.hook(
        CallRecord(
            "ready-reporter",
            "OnPodReady",
            "Wasm",
            "ok",
            0.001,
            fuel=10_000,
            role="decode",
            namespace="serving",
            observations=(
                Observation("pod_ready_seconds", 12.0),
                Observation("pod_ready_seconds", 14.0),
            ),
        )
    )
    reports.hook(CallRecord("other", "OnPodCreate", "Native", "ok", 0.001, role="decode"))
    labels = {
        "namespace": "serving",
        "plugin": "ready-reporter",
        "name": "pod_ready_seconds",
        "role": "decode",
    }
    assert sample(metrics, "_count", **labels) == 2
    assert sample(metrics, "_sum", **labels) == 26.0
    calls = "modelserving_plugin_hook_calls_total"
    hook = {"plugin": "ready-reporter", "hook": "OnPodReady", "runtime": "Wasm", "result": "ok"}
    assert metrics.registry.get_sample_value(calls, hook) == 1
