"""One carrier of a Pod's place: the plan's ``PodPlace`` reaches the plugin's HookRequest and the
ABI request as it is, under the same names."""

from __future__ import annotations

import dataclasses

import msgpack
import pytest

from modelserving.abi.codec import RequestEncoder
from modelserving.api.hook import Hook
from modelserving.api.place import PodPlace
from modelserving.chain import build_chain
from tests.unit.chain.conftest import MsFactory, desired_pods


def test_the_plan_place_is_the_request_place(two_role_ms: MsFactory) -> None:
    ms = two_role_ms()
    chain = build_chain(ms)
    for desired in desired_pods(ms).values():
        request = chain.request(Hook.ON_POD_CREATE, desired, desired.pod)
        assert request.place is desired.place
        assert (request.serving_group, request.role_name, request.role_id, request.is_entry) == (
            dataclasses.astuple(desired.place)
        )


def test_worker_and_entry_places(two_role_ms: MsFactory) -> None:
    pods = desired_pods(two_role_ms())
    entry, worker = pods["llm-0-decode-0-0"], pods["llm-0-decode-0-1"]
    assert entry.place == PodPlace("llm-0", "decode", "decode-0", True)
    assert worker.place == PodPlace("llm-0", "decode", "decode-0", False)
    assert (entry.worker_index, worker.worker_index) == (0, 1)


def test_the_abi_request_carries_the_place_under_its_wire_names() -> None:
    place = PodPlace("g-1", "prefill", "prefill-3", False)
    request = msgpack.unpackb(RequestEncoder("p", None, {}).pod_hook(Hook.ON_POD_READY, place, {}))
    assert (request["servingGroup"], request["roleName"], request["roleId"]) == (
        "g-1",
        "prefill",
        "prefill-3",
    )
    assert request["isEntry"] is False


def test_a_place_is_frozen() -> None:
    place = PodPlace("g", "r", "r-0", True)
    with pytest.raises(dataclasses.FrozenInstanceError):
        place.role_name = "other"  # type: ignore[misc]
