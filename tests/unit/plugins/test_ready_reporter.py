"""ready-reporter (native): its config, the RFC 3339 grammar, what it logs and observes for a
Ready Pod, why it cannot measure some Pods, and how the chain passes its observation on."""

from __future__ import annotations

import copy
import logging
from typing import Any

import pytest
from pydantic import ValidationError

from modelserving.api import parse_model_serving
from modelserving.api.hook import Hook, HookRequest
from modelserving.api.place import PodPlace
from modelserving.chain import CallRecord, build_chain
from modelserving.plugins import default_registry
from modelserving.plugins.base import Observation
from modelserving.plugins.builtins.ready_reporter import (
    BUILTIN,
    NAME,
    ReadyReporter,
    ReadyReporterConfig,
    format_seconds,
    parse_rfc3339_ms,
    ready_latency_ms,
)
from tests.unit.chain.conftest import desired_pods, two_role_manifest
from tests.unit.plugins.conftest import model_serving

DAY = 86_400_000
POD = "llm-0-server-0-0"


def make(config: dict[str, Any] | None = None) -> ReadyReporter:
    instance = BUILTIN.factory(NAME, ReadyReporterConfig.model_validate(config or {}))
    assert isinstance(instance, ReadyReporter)
    return instance


def ready(at: Any) -> dict[str, Any]:
    return {"type": "Ready", "status": "True", "lastTransitionTime": at}


def pod(created: Any = "2025-03-01T09:00:00Z", conditions: Any = None) -> dict[str, Any]:
    metadata: dict[str, Any] = {"name": POD, "namespace": "team-a"}
    if created is not None:
        metadata["creationTimestamp"] = created
    out: dict[str, Any] = {"metadata": metadata, "spec": {"containers": []}}
    if conditions is not None:
        out["status"] = {"phase": "Running", "conditions": conditions}
    return out


def request(pod: dict[str, Any], is_entry: bool = True) -> HookRequest:
    where = PodPlace("llm-0", "server", "server-0", is_entry)
    return HookRequest(Hook.ON_POD_READY, model_serving(), where, pod)


def run(
    caplog: pytest.LogCaptureFixture,
    pod: dict[str, Any],
    config: dict[str, Any] | None = None,
    is_entry: bool = True,
) -> tuple[list[Observation], list[tuple[int, str]]]:
    """The observations and the (level, message) records of one call."""
    caplog.clear()
    before = copy.deepcopy(pod)
    with caplog.at_level(logging.DEBUG, "modelserving.plugin"):
        observations = make(config).on_pod_ready(request(pod, is_entry))
    assert pod == before, "an observer changes nothing"
    return observations, [(r.levelno, r.getMessage()) for r in caplog.records]


PREFIX = f"plugin 'ready-reporter' OnPodReady on Pod {POD}: "

# --- the definition and its config ----------------------------------------------------------


def test_it_is_registered_as_an_on_pod_ready_builtin_with_a_wasm_twin() -> None:
    assert default_registry().get(NAME) is BUILTIN
    assert BUILTIN.hooks == frozenset({"on_pod_ready"})
    assert BUILTIN.wasm_module == "ready-reporter.wasm"


@pytest.mark.parametrize(
    ("config", "expected"),
    [
        ({}, None),
        ({"warnAfterSeconds": None}, None),
        ({"warnAfterSeconds": 1}, 1),
        ({"warn_after_seconds": 300}, 300),
        ({"warnAfterSeconds": 2**64 - 1}, 2**64 - 1),
    ],
)
def test_accepted_configs(config: dict[str, Any], expected: int | None) -> None:
    assert ReadyReporterConfig.model_validate(config).warn_after_seconds == expected


@pytest.mark.parametrize(
    ("config", "why"),
    [
        ({"warnAfterSeconds": 0}, "must be at least 1"),
        ({"warnAfterSeconds": -5}, "must be at least 1"),
        ({"warnAfterSeconds": True}, "valid integer"),
        ({"warnAfterSeconds": 3.0}, "valid integer"),
        ({"warnAfterSeconds": "3"}, "valid integer"),
        ({"other": 1}, "Extra inputs are not permitted"),
    ],
)
def test_refused_configs(config: dict[str, Any], why: str) -> None:
    with pytest.raises(ValidationError, match=why):
        ReadyReporterConfig.model_validate(config)


# --- timestamps -----------------------------------------------------------------------------


def test_rfc3339_times_in_milliseconds() -> None:
    t = parse_rfc3339_ms
    assert t("0000-01-01T00:00:00Z") == 0
    assert t("0000-03-01T00:00:00Z") == 60 * DAY, "year 0 is a leap year"
    assert t("0001-01-01T00:00:00Z") == 366 * DAY
    assert t("1970-01-01T00:00:00Z") == 719_528 * DAY
    base = t("2024-02-28T23:59:59Z")
    assert base is not None
    assert t("2024-02-29T00:00:00Z") == base + 1000
    assert t("2024-03-01T00:00:00Z") == base + 1000 + DAY
    assert t("2024-02-28T23:59:59.5Z") == base + 500
    assert t("2024-02-28T23:59:59.123999Z") == base + 123, "cut, not rounded"
    assert t("2024-02-28T23:59:59.07Z") == base + 70
    assert t("2024-02-29T01:30:00+01:30") == base + 1000
    assert t("2024-02-28T22:29:59-01:30") == base
    assert t("2024-02-28T23:59:59-00:00") == base
    assert t("2000-02-29T00:00:00Z") is not None


@pytest.mark.parametrize(
    "text",
    [
        "",
        "2024-02-28",
        "2024-02-28T23:59:59",
        "2024-02-28t23:59:59Z",
        "2024-02-28T23:59:59z",
        "2024-02-28 23:59:59Z",
        "2024-02-28T23:59:59.Z",
        "2024-02-28T23:59:59,5Z",
        "2024-02-28T23:59:59Z ",
        " 2024-02-28T23:59:59Z",
        "2024-02-28T23:59:59Z\n",
        "2024-02-28T23:59:59+0100",
        "2024-02-28T23:59:59+01",
        "2024-02-28T23:59:59+24:00",
        "2024-02-28T23:59:59+01:60",
        "2023-02-29T00:00:00Z",
        "1900-02-29T00:00:00Z",
        "2024-13-01T00:00:00Z",
        "2024-00-01T00:00:00Z",
        "2024-04-31T00:00:00Z",
        "2024-01-00T00:00:00Z",
        "2024-01-01T24:00:00Z",
        "2024-01-01T00:60:00Z",
        "2024-01-01T00:00:60Z",
        "24-01-01T00:00:00Z",
        "+2024-01-01T00:00:00Z",
        "2024-1-01T00:00:00Z",
        "\uff12024-01-01T00:00:00Z",  # a fullwidth digit
        "2024-01-01T00:00:00.\u0661Z",  # an Arabic-Indic digit
    ],
)
def test_what_is_not_an_rfc3339_time(text: str) -> None:
    assert parse_rfc3339_ms(text) is None


def test_seconds_have_three_decimals() -> None:
    assert [format_seconds(ms) for ms in (0, 7, 1500, 61_042)] == [
        "0.000",
        "0.007",
        "1.500",
        "61.042",
    ]


# --- what it reports ------------------------------------------------------------------------


def test_a_ready_pod_is_measured_logged_and_observed(caplog: pytest.LogCaptureFixture) -> None:
    conditions = [
        {"type": "Initialized", "status": "True", "lastTransitionTime": "2025-03-01T09:00:01Z"},
        {"type": "Ready", "status": "False", "lastTransitionTime": "2025-03-01T09:00:02Z"},
        ready("2025-03-01T10:01:01.2509+01:00"),
        ready("2025-03-01T12:00:00Z"),
    ]
    observations, records = run(caplog, pod(conditions=conditions))
    assert observations == [Observation("pod_ready_seconds", 61.25)]
    assert records == [
        (
            logging.INFO,
            PREFIX + f"Pod {POD} (role server, entry) became Ready 61.250 s after creation",
        )
    ]
    record = caplog.records[0]
    assert (record.plugin, record.hook, record.pod, record.source) == (  # type: ignore[attr-defined]
        NAME,
        "OnPodReady",
        POD,
        "log",
    )


@pytest.mark.parametrize(
    ("warn_after", "level"),
    [(None, logging.INFO), (61, logging.WARNING), (62, logging.INFO), (1, logging.WARNING)],
)
def test_warn_after_seconds(
    caplog: pytest.LogCaptureFixture, warn_after: int | None, level: int
) -> None:
    """61.250 s is over 61 s, not over 62 s."""
    p = pod(conditions=[ready("2025-03-01T09:01:01.250Z")])
    observations, records = run(caplog, p, {"warnAfterSeconds": warn_after}, is_entry=False)
    assert observations == [Observation("pod_ready_seconds", 61.25)]
    assert records == [
        (level, PREFIX + f"Pod {POD} (role server, worker) became Ready 61.250 s after creation")
    ]


def test_exactly_at_the_threshold_is_not_late(caplog: pytest.LogCaptureFixture) -> None:
    p = pod(conditions=[ready("2025-03-01T09:01:00Z")])
    _, records = run(caplog, p, {"warnAfterSeconds": 60})
    assert records[0][0] == logging.INFO


def test_a_negative_latency_counts_as_zero(caplog: pytest.LogCaptureFixture) -> None:
    observations, records = run(caplog, pod(conditions=[ready("2025-03-01T08:00:00Z")]))
    assert observations == [Observation("pod_ready_seconds", 0.0)]
    assert "became Ready 0.000 s after creation" in records[0][1]


LONG = "x" * 70


@pytest.mark.parametrize(
    ("p", "why"),
    [
        (
            pod(created=None, conditions=[ready("2025-03-01T09:00:00Z")]),
            "metadata.creationTimestamp is not set",
        ),
        (pod(created=1740819600, conditions=[]), "metadata.creationTimestamp is not a string"),
        (
            pod(created="yesterday", conditions=[]),
            "metadata.creationTimestamp 'yesterday' is not an RFC 3339 time",
        ),
        (pod(), "status.conditions is not set"),
        (pod(conditions={"Ready": "True"}), "status.conditions is not a list"),
        (
            pod(
                conditions=[
                    "Ready",
                    {"type": "Ready", "status": "False"},
                    {"type": "Ready", "status": True, "lastTransitionTime": "2025-03-01T09:00:00Z"},
                ]
            ),
            "it has no Ready condition with status True",
        ),
        (
            pod(conditions=[{"type": "Ready", "status": "True"}]),
            "the Ready condition's lastTransitionTime is not set",
        ),
        (
            pod(conditions=[ready(None), ready("2025-03-01T09:00:00Z")]),
            "the Ready condition's lastTransitionTime is not set",
        ),
        (pod(conditions=[ready(5)]), "the Ready condition's lastTransitionTime is not a string"),
        (
            pod(conditions=[ready(LONG)]),
            f"the Ready condition's lastTransitionTime '{'x' * 64}...' is not an RFC 3339 time",
        ),
    ],
)
def test_it_says_why_it_cannot_measure(
    caplog: pytest.LogCaptureFixture, p: dict[str, Any], why: str
) -> None:
    observations, records = run(caplog, p)
    assert observations == []
    assert records == [(logging.WARNING, PREFIX + f"cannot measure readiness of Pod {POD}: {why}")]


def test_odd_pod_shapes_do_not_crash() -> None:
    with pytest.raises(ValueError, match="creationTimestamp is not set"):
        ready_latency_ms({"metadata": "x", "status": {"conditions": []}})
    with pytest.raises(ValueError, match=r"status\.conditions is not set"):
        ready_latency_ms({"metadata": {"creationTimestamp": "2025-03-01T09:00:00Z"}, "status": 1})


# --- in the chain ---------------------------------------------------------------------------


def test_the_chain_reports_its_observation_with_the_role() -> None:
    ms = parse_model_serving(two_role_manifest([{"name": NAME, "runtime": "Native"}]))
    chain = build_chain(ms, default_registry())
    records: list[CallRecord] = []
    chain.observer = records.append
    desired = desired_pods(ms)["llm-0-decode-0-2"]
    running = copy.deepcopy(desired.pod)
    running["metadata"]["creationTimestamp"] = "2025-03-01T09:00:00Z"
    running["status"] = {"conditions": [ready("2025-03-01T09:00:42.5Z")]}
    assert chain.on_pod_ready(desired, running) == []
    assert [(r.plugin, r.runtime, r.result, r.role, r.observations) for r in records] == [
        (NAME, "Native", "ok", "decode", (Observation("pod_ready_seconds", 42.5),))
    ]
