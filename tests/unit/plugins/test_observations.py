"""Observations: the ``Observation`` type, the ``observe <name> <value>`` line convention, the
shared plugin log helper, and the chain handing what OnPodReady hooks return to its observer
with the plugin's name and the Pod's role."""

from __future__ import annotations

import logging
from collections.abc import Callable
from typing import Any

import pytest

from modelserving.api import FailureClass, HookRequest, parse_model_serving
from modelserving.api.hook import Hook
from modelserving.chain import CallRecord, build_chain
from modelserving.plugins import Builtin, Registry
from modelserving.plugins.base import EmptyConfig, Observation, observation_name_problem
from modelserving.plugins.logs import emit, parse_observation
from tests.unit.chain.conftest import desired_pods, two_role_manifest

# --- Observation and its name ---------------------------------------------------------------


@pytest.mark.parametrize(
    "name",
    ["a_seconds", "pod_ready_seconds", "x" * 55 + "_seconds", "a1_b2_seconds", "a__seconds"],
)
def test_valid_names(name: str) -> None:
    assert observation_name_problem(name) is None
    assert Observation(name, 1.5).name == name


@pytest.mark.parametrize(
    ("name", "why"),
    [
        ("", "does not match"),
        ("Pod_seconds", "does not match"),
        ("1a_seconds", "does not match"),
        ("_a_seconds", "does not match"),
        ("a-b_seconds", "does not match"),
        ("a.b_seconds", "does not match"),
        ("é_seconds", "does not match"),
        ("x" * 56 + "_seconds", "does not match"),  # 64 characters: one too many
        ("latency", "does not end in _seconds"),
        ("latency_ms", "does not end in _seconds"),
        ("seconds", "does not end in _seconds"),
    ],
)
def test_invalid_names(name: str, why: str) -> None:
    problem = observation_name_problem(name)
    assert problem is not None and why in problem
    with pytest.raises(ValueError, match="invalid observation"):
        Observation(name, 1.0)


def test_the_longest_name_is_63_characters() -> None:
    assert observation_name_problem("x" * 55 + "_seconds") is None
    assert len("x" * 55 + "_seconds") == 63


@pytest.mark.parametrize("seconds", [-0.001, float("nan"), float("inf"), True, "1", None])
def test_invalid_seconds(seconds: Any) -> None:
    with pytest.raises(ValueError, match="seconds must be"):
        Observation("a_seconds", seconds)


def test_observations_are_frozen_values() -> None:
    assert Observation("a_seconds", 0) == Observation("a_seconds", 0)
    with pytest.raises(AttributeError):
        Observation("a_seconds", 0).seconds = 1  # type: ignore[misc]


# --- the line convention --------------------------------------------------------------------


@pytest.mark.parametrize(
    ("line", "expected"),
    [
        ("observe pod_ready_seconds 12.345", Observation("pod_ready_seconds", 12.345)),
        ("observe a_seconds 0", Observation("a_seconds", 0.0)),
        ("observe a_seconds 007.50", Observation("a_seconds", 7.5)),
        ("observe a_seconds 604800", Observation("a_seconds", 604800.0)),
        ("observe a_seconds " + "1." + "0" * 18, Observation("a_seconds", 1.0)),
    ],
)
def test_observation_lines(line: str, expected: Observation) -> None:
    assert parse_observation(line) == expected


@pytest.mark.parametrize("line", ["", "observe", "observed a_seconds 1", "Observe a_seconds 1"])
def test_other_lines_are_not_observations(line: str) -> None:
    assert parse_observation(line) is None


@pytest.mark.parametrize(
    ("line", "why"),
    [
        ("observe ", "single spaces"),
        ("observe a_seconds", "single spaces"),
        ("observe a_seconds  1", "single spaces"),
        ("observe  a_seconds 1", "single spaces"),
        ("observe a_seconds 1 ", "single spaces"),
        ("observe a_seconds 1 2", "single spaces"),
        ("observe a_seconds\t1", "single spaces"),
        ("observe A_seconds 1", "does not match"),
        ("observe latency 1", "does not end in _seconds"),
        ("observe a_seconds -1", "not a non-negative decimal"),
        ("observe a_seconds 1.", "not a non-negative decimal"),
        ("observe a_seconds .5", "not a non-negative decimal"),
        ("observe a_seconds 1e3", "not a non-negative decimal"),
        ("observe a_seconds +1", "not a non-negative decimal"),
        ("observe a_seconds nan", "not a non-negative decimal"),
        ("observe a_seconds \u0661", "not a non-negative decimal"),  # an Arabic-Indic digit
        ("observe a_seconds " + "9" * 21, "longer than 20 characters"),
        ("observe a_seconds " + "9" * 20, "between 0 and 604800"),
        ("observe a_seconds 604800.001", "between 0 and 604800"),
    ],
)
def test_malformed_observation_lines(line: str, why: str) -> None:
    with pytest.raises(ValueError, match=why):
        parse_observation(line)


# --- the shared log helper ------------------------------------------------------------------


def test_emit_writes_the_plugin_record(caplog: pytest.LogCaptureFixture) -> None:
    with caplog.at_level(logging.DEBUG, "modelserving.plugin"):
        emit("p", Hook.ON_POD_READY, "pod-0", "warn", "slow")
        emit("p", Hook.VALIDATE_CONFIG, None, "nonsense", "hello", source="stdout")
    first, second = caplog.records
    assert (first.name, first.levelno, first.getMessage()) == (
        "modelserving.plugin",
        logging.WARNING,
        "plugin 'p' OnPodReady on Pod pod-0: slow",
    )
    assert (first.plugin, first.hook, first.pod, first.source) == (  # type: ignore[attr-defined]
        "p",
        "OnPodReady",
        "pod-0",
        "log",
    )
    assert (second.levelno, second.getMessage()) == (
        logging.INFO,
        "plugin 'p' ValidateConfig: hello",
    )
    assert second.source == "stdout"  # type: ignore[attr-defined]


# --- the chain ------------------------------------------------------------------------------


class Measure:
    """OnPodReady returning what its factory was given (observations, or anything else)."""

    def __init__(self, name: str, returned: Any) -> None:
        self.name, self.returned = name, returned

    def on_pod_ready(self, request: HookRequest) -> Any:
        return self.returned(request) if callable(self.returned) else self.returned


def chain_with(plugins: dict[str, Any], specs: list[dict[str, Any]]) -> Any:
    registry = Registry()

    def factory(returned: Any) -> Callable[[str, Any], Measure]:
        return lambda name, _config: Measure(name, returned)

    for name, returned in plugins.items():
        registry.register(
            Builtin(
                name=name,
                config_model=EmptyConfig,
                factory=factory(returned),
                summary="",
                hooks=frozenset({"on_pod_ready"}),
            )
        )
    ms = parse_model_serving(two_role_manifest(specs))
    return ms, build_chain(ms, registry)


def test_the_chain_passes_native_observations_with_plugin_and_role() -> None:
    def by_role(request: HookRequest) -> list[Observation]:
        return [Observation("a_seconds", 1.0), Observation(f"{request.role_name}_seconds", 2.5)]

    ms, chain = chain_with(
        {"measure": by_role, "quiet": None, "empty": ()},
        [{"name": "measure"}, {"name": "quiet"}, {"name": "empty"}],
    )
    records: list[CallRecord] = []
    chain.observer = records.append
    pods = desired_pods(ms)
    assert chain.on_pod_ready(pods["llm-0-decode-0-1"], pods["llm-0-decode-0-1"].pod) == []
    assert chain.on_pod_ready(pods["llm-0-prefill-0-0"], pods["llm-0-prefill-0-0"].pod) == []
    assert [(r.plugin, r.hook, r.result, r.role, r.observations) for r in records] == [
        (
            "measure",
            "OnPodReady",
            "ok",
            "decode",
            (Observation("a_seconds", 1.0), Observation("decode_seconds", 2.5)),
        ),
        ("quiet", "OnPodReady", "ok", "decode", ()),
        ("empty", "OnPodReady", "ok", "decode", ()),
        (
            "measure",
            "OnPodReady",
            "ok",
            "prefill",
            (Observation("a_seconds", 1.0), Observation("prefill_seconds", 2.5)),
        ),
        ("quiet", "OnPodReady", "ok", "prefill", ()),
        ("empty", "OnPodReady", "ok", "prefill", ()),
    ]


@pytest.mark.parametrize(
    ("returned", "kind"),
    [({"a_seconds": 1.0}, "dict"), ([("a_seconds", 1.0)], "list"), (1.5, "float")],
)
def test_a_return_that_is_not_observations_fails_the_call(returned: Any, kind: str) -> None:
    ms, chain = chain_with({"bad": returned}, [{"name": "bad"}])
    records: list[CallRecord] = []
    chain.observer = records.append
    desired = desired_pods(ms)["llm-0-prefill-0-0"]
    (failure,) = chain.on_pod_ready(desired, desired.pod)
    assert failure.failure_class is FailureClass.PLUGIN_ERROR
    assert failure.detail == (
        f"on_pod_ready returned {kind}, not None or a sequence of Observation"
    )
    assert [(r.result, r.observations) for r in records] == [("PluginError", ())]


def test_observations_need_no_observer() -> None:
    ms, chain = chain_with({"m": [Observation("a_seconds", 1.0)]}, [{"name": "m"}])
    desired = desired_pods(ms)["llm-0-prefill-0-0"]
    assert chain.on_pod_ready(desired, desired.pod) == []
