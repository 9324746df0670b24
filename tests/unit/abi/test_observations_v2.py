"""ABI v2's structured observations: an OnPodReady response may carry ``observations``, each
``{name, seconds}`` under the rules of ``Observation``; every broken rule is an InvalidResponse
naming the entry and the rule, and v1 responses keep refusing the key."""

from __future__ import annotations

import math
from typing import Any

import msgpack
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from modelserving.abi.codec import decode_response, encode_request
from modelserving.abi.contract import MAX_OBSERVATIONS, ResponseError
from modelserving.api.hook import Hook
from modelserving.api.observation import MAX_OBSERVATION_SECONDS, Observation
from tests.unit.abi.samples import MODEL_SERVING, WHERE, pod

READY = Hook.ON_POD_READY


def pack(value: Any) -> bytes:
    return msgpack.packb(value, use_bin_type=True)  # type: ignore[no-any-return]


def v2(value: Any, hook: Hook = READY) -> list[Observation]:
    return decode_response(pack(value), hook, version=2).observations


def refused(value: Any, hook: Hook = READY, version: int = 2) -> str:
    with pytest.raises(ResponseError) as info:
        decode_response(pack(value), hook, version=version)
    return str(info.value)


def test_a_v2_ready_response_carries_observations() -> None:
    got = v2(
        {
            "observations": [
                {"name": "pod_ready_seconds", "seconds": 61.25},
                {"name": "a_seconds", "seconds": 3},
            ]
        }
    )
    assert got == [Observation("pod_ready_seconds", 61.25), Observation("a_seconds", 3.0)]
    assert all(type(o.seconds) is float for o in got)


@pytest.mark.parametrize("value", [{}, {"observations": None}, {"observations": []}])
def test_nil_and_empty_observations_are_none(value: dict[str, Any]) -> None:
    assert v2(value) == []


def test_v1_responses_still_refuse_the_key() -> None:
    message = refused({"observations": []}, version=1)
    assert message == "unknown response key(s) 'observations' (v1 has patch, error)"


def test_v2_names_its_keys_when_refusing_another() -> None:
    assert refused({"status": 1}) == (
        "unknown response key(s) 'status' (v2 has patch, error, observations)"
    )


def test_the_default_version_is_v1() -> None:
    with pytest.raises(ResponseError, match="v1 has patch, error"):
        decode_response(pack({"observations": []}), READY)


@pytest.mark.parametrize("hook", [Hook.ON_POD_CREATE, Hook.VALIDATE_CONFIG])
def test_only_on_pod_ready_may_observe(hook: Hook) -> None:
    entry = {"name": "a_seconds", "seconds": 1}
    assert refused({"observations": [entry]}, hook) == (
        f"{hook} responses may not carry observations (only OnPodReady may)"
    )
    assert v2({"observations": []}, hook) == []  # empty is nothing, in any hook


@pytest.mark.parametrize(
    ("observations", "message"),
    [
        ({"a": 1}, "observations must be an array, not a map"),
        ("x", "observations must be an array, not a string"),
        ([1], "observations[0] must be a map, not an integer"),
        (
            [{"name": "a_seconds", "seconds": 1}, ["x"]],
            "observations[1] must be a map, not an array",
        ),
        (
            [{"name": "a_seconds", "seconds": 1, "unit": "s"}],
            "observations[0] has unknown key(s) 'unit'",
        ),
        ([{"seconds": 1}], "observations[0] needs a name"),
        ([{"name": "a_seconds"}], "observations[0] needs a seconds"),
        ([{"name": 7, "seconds": 1}], "observations[0].name must be a string, not an integer"),
        (
            [{"name": "latency", "seconds": 1}],
            "observations[0].name: the name 'latency' does not end in _seconds",
        ),
        (
            [{"name": "Pod_seconds", "seconds": 1}],
            "observations[0].name: the name 'Pod_seconds' does not match [a-z][a-z0-9_]{0,62}",
        ),
        (
            [{"name": "a" * 60 + "_seconds", "seconds": 1}],
            "does not match [a-z][a-z0-9_]{0,62}",
        ),
        (
            [{"name": "a_seconds", "seconds": "1"}],
            "observations[0].seconds must be a number, not a string",
        ),
        (
            [{"name": "a_seconds", "seconds": True}],
            "observations[0].seconds must be a number, not a bool",
        ),
        (
            [{"name": "a_seconds", "seconds": None}],
            "observations[0].seconds must be a number, not nil",
        ),
        (
            [{"name": "a_seconds", "seconds": -0.5}],
            "observations[0].seconds must be between 0 and 604800 (7 days), not -0.5",
        ),
        (
            [{"name": "a_seconds", "seconds": MAX_OBSERVATION_SECONDS + 1}],
            "observations[0].seconds must be between 0 and 604800 (7 days), not 604801",
        ),
        (
            [{"name": "a_seconds", "seconds": math.inf}],
            "the response holds inf at '/observations/0/seconds', which JSON cannot express",
        ),
        (
            [{"name": "a_seconds", "seconds": math.nan}],
            "the response holds nan at '/observations/0/seconds', which JSON cannot express",
        ),
    ],
)
def test_every_rule_is_named(observations: Any, message: str) -> None:
    assert message in refused({"observations": observations})


def test_at_most_64_observations() -> None:
    entries = [{"name": "a_seconds", "seconds": i} for i in range(MAX_OBSERVATIONS)]
    assert len(v2({"observations": entries})) == MAX_OBSERVATIONS
    assert refused({"observations": [*entries, entries[0]]}) == (
        f"the response has {MAX_OBSERVATIONS + 1} observations; the limit is {MAX_OBSERVATIONS}"
    )


def test_the_bounds_are_inclusive() -> None:
    entries = [{"name": "a_seconds", "seconds": 0}, {"name": "b_seconds", "seconds": 604800}]
    assert [o.seconds for o in v2({"observations": entries})] == [0.0, 604800.0]


def test_an_error_drops_the_observations() -> None:
    response = decode_response(
        pack({"error": "no", "observations": [{"name": "a_seconds", "seconds": 1}]}), READY, 2
    )
    assert (response.error, response.observations) == ("no", [])


def test_an_error_does_not_hide_a_broken_observation() -> None:
    assert "needs a seconds" in refused({"error": "no", "observations": [{"name": "a_seconds"}]})


def test_requests_say_the_module_version() -> None:
    for version in (1, 2):
        data = encode_request(READY, "p", None, MODEL_SERVING, WHERE, pod(), version)
        assert msgpack.unpackb(data)["abiVersion"] == version
    assert (
        msgpack.unpackb(encode_request(Hook.VALIDATE_CONFIG, "p", None, version=2))["abiVersion"]
        == 2
    )


NAMES = st.from_regex(r"[a-z][a-z0-9_]{0,54}_seconds", fullmatch=True)
SECONDS = st.one_of(
    st.integers(0, MAX_OBSERVATION_SECONDS),
    st.floats(0, MAX_OBSERVATION_SECONDS, allow_nan=False, allow_infinity=False),
)


@settings(max_examples=200, deadline=None)
@given(st.lists(st.tuples(NAMES, SECONDS), max_size=MAX_OBSERVATIONS))
def test_valid_observations_decode_as_written(entries: list[tuple[str, float]]) -> None:
    raw = [{"name": name, "seconds": seconds} for name, seconds in entries]
    assert v2({"observations": raw}) == [Observation(n, float(s)) for n, s in entries]


@settings(max_examples=200, deadline=None)
@given(
    NAMES,
    st.one_of(
        st.floats(max_value=-1e-9),
        st.floats(min_value=MAX_OBSERVATION_SECONDS + 1e-6),
        st.integers(-(2**63), -1),
        st.integers(MAX_OBSERVATION_SECONDS + 1, 2**64 - 1),
    ),
)
def test_seconds_out_of_range_are_refused(name: str, seconds: float) -> None:
    if isinstance(seconds, float) and not math.isfinite(seconds):
        return  # refused as not JSON, above
    message = refused({"observations": [{"name": name, "seconds": seconds}]})
    assert "observations[0]" in message
