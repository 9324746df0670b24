"""ready-reporter, native and WebAssembly side by side: on generated configs and Pods (valid and
malformed timestamps, with fractions and offsets; Ready conditions True, False, missing or of
the wrong type) both accept the same configs and give the same response bytes, the same
(level, message) log records and the same observations."""

from __future__ import annotations

import logging
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from modelserving.abi.codec import encode_request
from modelserving.api.errors import PluginFailure
from modelserving.api.hook import Hook, HookRequest
from modelserving.api.place import PodPlace
from modelserving.api.validation import parse_model_serving
from modelserving.plugins.artifacts import builtin_wasm
from modelserving.plugins.base import Observation
from modelserving.plugins.builtins.ready_reporter import BUILTIN, NAME
from modelserving.plugins.wasm import WasmPlugin
from modelserving.sandbox import Sandbox
from tests.vectors import MODEL_SERVING, native_response

DIFF = settings(
    max_examples=200, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
)
MS = parse_model_serving(MODEL_SERVING)
Records = list[tuple[int, str]]
Outcome = tuple[bytes, Records, list[Observation]]

# --- strategies -----------------------------------------------------------------------------


def rarely(usual: st.SearchStrategy[Any], odd: st.SearchStrategy[Any]) -> Any:
    """``usual`` nineteen times in twenty, else ``odd`` (not on 0, which hypothesis favours)."""
    return st.integers(0, 19).flatmap(lambda n: odd if n == 7 else usual)


configs = rarely(
    st.fixed_dictionaries({"warnAfterSeconds": st.integers(1, 120)})
    | st.sampled_from([None, {}, {"warnAfterSeconds": None}]),
    st.fixed_dictionaries(
        {},
        optional={
            "warnAfterSeconds": st.integers(-2, 0)
            | st.integers(2**63 - 2, 2**64 - 1)
            | st.booleans()
            | st.floats(-1, 100, allow_nan=False)
            | st.just("30"),
            "warn_after_seconds": st.integers(1, 5),
            "extra": st.just(1),
        },
    ),
)


@st.composite
def stamps(draw: st.DrawFn, date: tuple[int, int, int]) -> str:
    """A time on ``date``: fields now and then out of range, fractions, offsets."""
    year, month, day = date
    hour = draw(rarely(st.integers(0, 23), st.just(24)))
    minute = draw(rarely(st.integers(0, 59), st.just(60)))
    second = draw(rarely(st.integers(0, 59), st.just(60)))
    fraction = draw(st.none() | st.text("0123456789", min_size=1, max_size=7))
    zone = draw(
        st.just("Z")
        | st.builds(
            lambda sign, h, m: f"{sign}{h:02d}:{m:02d}",
            st.sampled_from("+-"),
            rarely(st.integers(0, 23), st.just(24)),
            rarely(st.sampled_from([0, 30, 45]), st.just(60)),
        )
    )
    text = f"{year:04d}-{month:02d}-{day:02d}T{hour:02d}:{minute:02d}:{second:02d}"
    return text + (f".{fraction}" if fraction is not None else "") + zone


MALFORMED = st.sampled_from(
    [
        "",
        "yesterday",
        "2025-03-01",
        "2025-03-01T09:00:00",
        "2025-03-01 09:00:00Z",
        "2025-03-01t09:00:00z",
        "2025-03-01T09:00:00.Z",
        "2025-03-01T09:00:00+0100",
        "2025-03-01T09:00:00Z ",
        "2025-02-29T09:00:00Z",
        "\uff12025-03-01T09:00:00Z",
        "x" * 80,
    ]
) | st.text(max_size=24)
WRONG_TYPES = st.sampled_from([None, 5, 1.5, True, ["2025-03-01T09:00:00Z"], {"t": 1}])
dates = st.tuples(
    st.integers(0, 9999) | st.sampled_from([1970, 2000, 2024, 2025]),
    rarely(st.integers(1, 12), st.sampled_from([0, 13])),
    rarely(st.integers(1, 28), st.sampled_from([0, 29, 30, 31, 32])),
)


def times(date: tuple[int, int, int]) -> Any:
    """Mostly a time on ``date``, else a malformed string or not a string."""
    return rarely(stamps(date), MALFORMED | WRONG_TYPES)


@st.composite
def conditions(draw: st.DrawFn, date: tuple[int, int, int]) -> Any:
    def condition(kind: str, status: Any, at: Any) -> dict[str, Any]:
        out = {"type": kind, "status": status}
        if at is not ...:
            out["lastTransitionTime"] = at
        return out

    ready = st.builds(condition, st.just("Ready"), st.just("True"), times(date))
    other: st.SearchStrategy[Any] = st.builds(
        condition,
        st.sampled_from(["Ready", "Initialized", "ContainersReady", "ready"]),
        st.sampled_from(["True", "False", "Unknown", True, None]),
        times(date) | st.just(...),
    ) | st.sampled_from(["Ready", None, 3, []])
    items = st.tuples(
        st.lists(other, max_size=2),
        rarely(st.lists(ready, min_size=1, max_size=1), st.just([])),
        st.lists(other | ready, max_size=2),
    ).map(lambda t: t[0] + t[1] + t[2])
    return draw(rarely(items, st.sampled_from([None, "Ready", {"type": "Ready"}])))


@st.composite
def pods(draw: st.DrawFn) -> dict[str, Any]:
    date = draw(dates)
    metadata: dict[str, Any] = {"namespace": "serving"}
    if draw(st.integers(0, 9)):
        metadata["name"] = draw(st.sampled_from(["llama-0-prefill-0-0", "p", ""]))
    created = draw(rarely(times(date), st.just(...)))
    if created is not ...:
        metadata["creationTimestamp"] = created
    pod: dict[str, Any] = {"apiVersion": "v1", "kind": "Pod", "metadata": metadata}
    pod["spec"] = {"containers": [{"name": "engine", "image": "x"}]}
    status = draw(st.integers(0, 19))
    if status:
        # the Ready condition on the same date as the creation, or on any other (the day
        # arithmetic across months and years; more than a week is unmeasurable)
        ready_date = draw(st.just(date) | dates)
        pod["status"] = {"phase": "Running", "conditions": draw(conditions(ready_date))}
    if status == 1:
        pod["status"] = draw(st.sampled_from([None, "Running", {"phase": "Running"}]))
    return pod


wheres = st.builds(
    PodPlace,
    st.just("llama-0"),
    st.sampled_from(["prefill", "decode"]),
    st.just("prefill-0"),
    st.booleans(),
)

# --- the two runtimes -----------------------------------------------------------------------


@contextmanager
def plugin_records() -> Iterator[Records]:
    """(level, message) of every ``modelserving.plugin`` record while inside."""
    records: Records = []
    logger = logging.getLogger("modelserving.plugin")

    class Keep(logging.Handler):
        def emit(self, record: logging.LogRecord) -> None:
            records.append((record.levelno, record.getMessage()))

    handler, level = Keep(logging.DEBUG), logger.level
    logger.addHandler(handler)
    logger.setLevel(logging.DEBUG)
    try:
        yield records
    finally:
        logger.removeHandler(handler)
        logger.setLevel(level)


def hook_request(where: PodPlace, pod: dict[str, Any]) -> HookRequest:
    return HookRequest(Hook.ON_POD_READY, MS, where, pod)


def native(config: Any, where: PodPlace, pod: dict[str, Any]) -> Outcome | None:
    """Response bytes (the reference ``native_response``), records and observations of the
    native built-in; None when it refuses the config."""
    request = encode_request(Hook.ON_POD_READY, NAME, config, MODEL_SERVING, where, pod, version=2)
    with plugin_records() as records:
        response = native_response(request)
    if response is None:
        return None
    plugin: Any = BUILTIN.factory(NAME, BUILTIN.config_model.model_validate(config or {}))
    with plugin_records():
        observations = list(plugin.on_pod_ready(hook_request(where, pod)) or [])
    return response, records, observations


def wasm(sandbox: Sandbox, config: Any, where: PodPlace, pod: dict[str, Any]) -> Any:
    """The same from the WebAssembly built-in; None when its ValidateConfig refuses the config
    (any other failure is returned as text, to fail the comparison)."""
    compiled = sandbox.load(builtin_wasm(f"{NAME}.wasm"))
    plugin = WasmPlugin(NAME, config, compiled, sandbox, sandbox.limits(), MS)
    try:
        plugin.validate_config()
    except PluginFailure as failure:
        return None if failure.failure_class == "PluginError" else str(failure)
    try:
        with plugin_records() as records:
            observations = plugin.on_pod_ready(hook_request(where, pod))
    except PluginFailure as failure:
        return str(failure)
    assert plugin.last is not None
    return plugin.last.call.response, records, observations


def outcome(result: Outcome) -> str:
    """measured, warn (measured, logged at warn) or unmeasurable."""
    _, records, observations = result
    if not observations:
        return "unmeasurable"
    return "warn" if records[-1][0] == logging.WARNING else "measured"


# --- the tests ------------------------------------------------------------------------------


@DIFF
@given(config=configs)
def test_both_accept_and_refuse_the_same_configs(sandbox: Sandbox, config: Any) -> None:
    where = PodPlace("llama-0", "prefill", "prefill-0", True)
    pod = {"metadata": {"name": "p"}}
    assert (native(config, where, pod) is None) == (wasm(sandbox, config, where, pod) is None)


@DIFF
@given(config=configs, where=wheres, pod=pods())
def test_both_report_identically(
    sandbox: Sandbox, config: Any, where: PodPlace, pod: dict[str, Any]
) -> None:
    expected = native(config, where, pod)
    if expected is None:
        return
    assert wasm(sandbox, config, where, pod) == expected


def test_the_generated_cases_reach_every_outcome(sandbox: Sandbox) -> None:
    """A guard that the strategies above produce measured, warn and unmeasurable Pods, and
    that the three really differ."""
    seen: dict[str, int] = {}

    # derandomize: the same examples every run, so the guard cannot fail by chance (a random
    # run of 120 once drew no warn case)
    @settings(max_examples=200, deadline=None, database=None, derandomize=True)
    @given(config=configs, where=wheres, pod=pods())
    def collect(config: Any, where: PodPlace, pod: dict[str, Any]) -> None:
        result = native(config, where, pod)
        if result is not None:
            kind = outcome(result)
            seen[kind] = seen.get(kind, 0) + 1

    collect()
    assert set(seen) == {"measured", "warn", "unmeasurable"}, seen
    where = PodPlace("llama-0", "decode", "decode-0", False)
    pod = {
        "metadata": {"name": "p", "creationTimestamp": "2025-03-01T09:00:00.5+01:00"},
        "status": {"conditions": [{"type": "Ready", "status": "True",
                                   "lastTransitionTime": "2025-03-01T08:00:10.25Z"}]},
    }  # fmt: skip
    late = native({"warnAfterSeconds": 9}, where, pod)
    assert late is not None and outcome(late) == "warn"
    assert late == wasm(sandbox, {"warnAfterSeconds": 9}, where, pod)
    assert late[2] == [Observation("pod_ready_seconds", 9.75)]
    assert late[1] == [
        (
            logging.WARNING,
            "plugin 'ready-reporter' OnPodReady on Pod p: "
            "Pod p (role decode, worker) became Ready 9.750 s after creation",
        )
    ]
    on_time = native({"warnAfterSeconds": 10}, where, pod)
    assert on_time is not None and outcome(on_time) == "measured"
    assert on_time == wasm(sandbox, {"warnAfterSeconds": 10}, where, pod)
    pod["status"] = {"conditions": [{"type": "Ready", "status": "False"}]}
    never = native(None, where, pod)
    assert never is not None and outcome(never) == "unmeasurable"
    assert never == wasm(sandbox, None, where, pod)


@pytest.mark.parametrize(
    ("ready_at", "expected"),
    [
        ("2025-03-08T09:00:00Z", "measured"),  # exactly a week
        ("2025-03-08T09:00:00.001Z", "unmeasurable"),  # a millisecond more
        ("2026-03-01T09:00:00Z", "unmeasurable"),
        ("2024-03-01T09:00:00Z", "measured"),  # before the creation: 0
    ],
)
def test_latencies_up_to_a_week_are_measured(
    sandbox: Sandbox, ready_at: str, expected: str
) -> None:
    where = PodPlace("llama-0", "decode", "decode-0", False)
    pod = {
        "metadata": {"name": "p", "creationTimestamp": "2025-03-01T09:00:00Z"},
        "status": {
            "conditions": [{"type": "Ready", "status": "True", "lastTransitionTime": ready_at}]
        },
    }
    result = native(None, where, pod)
    assert result is not None and outcome(result) == expected
    assert result == wasm(sandbox, None, where, pod)
