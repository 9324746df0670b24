"""ABI v3: the OnServingGroupChange request's bytes and the response's ``objects`` (shape only;
the object policy is tests/unit/chain/test_objects.py)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import msgpack
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from jsonschema import Draft202012Validator

from modelserving.abi.codec import RequestEncoder, decode_response, encode_request
from modelserving.abi.contract import ResponseError
from modelserving.api import parse_model_serving
from modelserving.api.group import MAX_OBJECTS, GroupPod, GroupRequest, group_pod
from modelserving.api.hook import Hook
from modelserving.api.place import PodPlace
from tests.unit.abi.samples import MODEL_SERVING
from tests.unit.conftest import manifest

HOOK = Hook.ON_SERVING_GROUP_CHANGE
PODS = (
    GroupPod(
        "llama-0-prefill-0-0",
        PodPlace("llama-0", "prefill", "prefill-0", True),
        "node-1",
        "10.0.0.1",
        "10.244.1.5",
        "Running",
        True,
        {"a": "ü", "b": ""},
    ),
    GroupPod("llama-0-prefill-0-1", PodPlace("llama-0", "prefill", "prefill-0", False)),
)
REQUEST = GroupRequest(parse_model_serving(manifest()), "llama-0", 3, PODS)


def pack(value: Any) -> bytes:
    return msgpack.packb(value, use_bin_type=True)  # type: ignore[no-any-return]


def wire_pod(p: GroupPod) -> dict[str, Any]:
    return {
        "name": p.name,
        "roleName": p.place.role_name,
        "roleId": p.place.role_id,
        "isEntry": p.place.is_entry,
        "node": p.node,
        "hostIP": p.host_ip,
        "podIP": p.pod_ip,
        "phase": p.phase,
        "ready": p.ready,
        "annotations": dict(p.annotations or {}),
    }


@pytest.mark.parametrize("config", [None, {"fileName": "x"}, ["a", 1]])
def test_the_request_is_msgpack_of_the_whole_map_in_the_tables_order(config: Any) -> None:
    encoded = encode_request(HOOK, "p", config, MODEL_SERVING, version=3, group=REQUEST)
    expected = {
        "abiVersion": 3,
        "hook": "OnServingGroupChange",
        "plugin": {"name": "p", "config": config},
        "modelServing": MODEL_SERVING,
        "servingGroup": "llama-0",
        "expectedPods": 3,
        "pods": [wire_pod(p) for p in PODS],
    }
    assert encoded == pack(expected)
    assert list(msgpack.unpackb(encoded)) == list(expected)
    assert list(msgpack.unpackb(encoded)["pods"][0]) == list(wire_pod(PODS[0]))


def test_a_group_request_needs_the_model_serving_and_the_pods() -> None:
    with pytest.raises(ValueError, match="needs the ModelServing"):
        RequestEncoder("p", None, None, 3).group_hook(REQUEST)
    with pytest.raises(ValueError, match="needs the ServingGroup's Pods"):
        encode_request(HOOK, "p", None, MODEL_SERVING, version=3)


def test_a_pods_facts_come_from_its_spec_and_status() -> None:
    raw: dict[str, Any] = {
        "metadata": {"name": "x", "annotations": {"k": "v"}},
        "spec": {"nodeName": "n"},
        "status": {
            "phase": "Running",
            "hostIP": "10.0.0.9",
            "podIP": "10.1.0.9",
            "conditions": [{"type": "Ready", "status": "True"}],
        },
    }
    place = PodPlace("g", "r", "r-0", True)
    assert group_pod(raw, place) == GroupPod(
        "x", place, "n", "10.0.0.9", "10.1.0.9", "Running", True, {"k": "v"}
    )
    unscheduled = group_pod({"metadata": {"name": "y"}}, place)
    assert (unscheduled.node, unscheduled.pod_ip, unscheduled.phase) == ("", "", "")
    assert unscheduled.ready is False
    not_running = {**raw, "status": {**raw["status"], "phase": "Pending"}}
    assert group_pod(not_running, place).ready is False


CM: dict[str, Any] = {
    "apiVersion": "v1",
    "kind": "ConfigMap",
    "metadata": {"name": "llama-0-x"},
    "data": {"k": "v"},
}


def decode(value: Any, hook: Hook = HOOK, version: int = 3) -> Any:
    return decode_response(pack(value), hook, version)


def test_objects_are_decoded() -> None:
    full = {**CM, "metadata": {**CM["metadata"], "labels": {"a": "b"}, "annotations": {}}}
    assert decode({"objects": [CM, full]}).objects == [CM, full]
    assert decode({"objects": []}).objects == []
    assert decode({"objects": None}).objects == []
    assert decode({}).objects == []
    assert decode_response(b"", HOOK, 3).objects == []
    assert decode({"error": "no", "objects": [CM]}).error == "no"


def test_objects_only_in_v3_and_only_in_the_group_hook() -> None:
    with pytest.raises(ResponseError, match=r"unknown response key\(s\) 'objects' \(v2 has"):
        decode({"objects": [CM]}, version=2)
    with pytest.raises(
        ResponseError,
        match=r"^OnPodCreate responses may not carry objects \(only OnServingGroupChange may\)$",
    ):
        decode({"objects": [CM]}, Hook.ON_POD_CREATE)
    with pytest.raises(ResponseError, match="may not carry a patch"):
        decode({"patch": [{"op": "remove", "path": "/x"}]})
    with pytest.raises(ResponseError, match="may not carry observations"):
        decode({"observations": [{"name": "a_seconds", "seconds": 1}]})


BAD_OBJECTS: dict[str, tuple[Any, str]] = {
    "not an array": ({"k": 1}, "objects must be an array, not a map"),
    "too many": (
        [CM] * (MAX_OBJECTS + 1),
        f"the response has 17 objects; the limit is {MAX_OBJECTS}",
    ),
    "not a map": ([1], r"objects\[0\] must be a map, not an integer"),
    "unknown key": ([{**CM, "binaryData": {}}], r"objects\[0\] has unknown key\(s\) 'binaryData'"),
    "kind missing": (
        [{k: v for k, v in CM.items() if k != "kind"}],
        r"objects\[0\]\.kind must be a string, not nil",
    ),
    "metadata not a map": (
        [{**CM, "metadata": []}],
        r"objects\[0\]\.metadata must be a map, not an array",
    ),
    "no name": ([{**CM, "metadata": {}}], r"objects\[0\]\.metadata needs a name"),
    "name not a string": (
        [{**CM, "metadata": {"name": 5}}],
        r"objects\[0\]\.metadata\.name must be a string",
    ),
    "unknown metadata key": (
        [{**CM, "metadata": {"name": "a", "ownerReferences": []}}],
        r"objects\[0\]\.metadata has unknown key\(s\) 'ownerReferences'",
    ),
    "label value not a string": (
        [{**CM, "metadata": {"name": "a", "labels": {"x": 1}}}],
        r"objects\[0\]\.metadata\.labels\.x must be a string, not an integer",
    ),
    "data value not a string": (
        [CM, {**CM, "data": {"hccl.json": {"a": 1}}}],
        r"objects\[1\]\.data\.hccl\.json must be a string, not a map",
    ),
    "data not a map": ([{**CM, "data": "x"}], r"objects\[0\]\.data must be a map, not a string"),
}


@pytest.mark.parametrize("case", BAD_OBJECTS, ids=list(BAD_OBJECTS))
def test_every_broken_shape_is_refused_naming_the_entry(case: str) -> None:
    value, message = BAD_OBJECTS[case]
    with pytest.raises(ResponseError, match=message):
        decode({"objects": value})


# --- the v3 schemas agree with the codec ------------------------------------------------------

SCHEMAS = Path(__file__).resolve().parents[3] / "abi" / "schema"


def schema_validator(name: str) -> Draft202012Validator:
    root = json.loads((SCHEMAS / f"{name}.schema.json").read_text())
    Draft202012Validator.check_schema(root)
    return Draft202012Validator(root)


def test_the_hosts_group_requests_validate() -> None:
    encoded = encode_request(HOOK, "p", {"a": 1}, MODEL_SERVING, version=3, group=REQUEST)
    assert list(schema_validator("group-request").iter_errors(msgpack.unpackb(encoded))) == []
    wrong = {**msgpack.unpackb(encoded), "pod": {}}
    assert list(schema_validator("group-request").iter_errors(wrong)) != []


ints = st.integers(min_value=-(2**63), max_value=2**63 - 1)
names = st.sampled_from(["llama-0-x", "", "a"])
strings = st.one_of(st.text(max_size=3), ints, st.none(), st.booleans())
string_maps = st.one_of(st.none(), ints, st.dictionaries(st.text(max_size=2), strings, max_size=2))
metadata = st.fixed_dictionaries(
    {},
    optional={
        "name": st.one_of(names, ints, st.none()),
        "namespace": strings,
        "labels": string_maps,
        "annotations": string_maps,
        "uid": st.just("x"),
    },
)
objects_ = st.fixed_dictionaries(
    {},
    optional={
        "apiVersion": st.one_of(st.just("v1"), ints),
        "kind": st.one_of(st.just("ConfigMap"), st.none()),
        "metadata": st.one_of(metadata, st.lists(ints, max_size=1)),
        "data": string_maps,
        "binaryData": st.just({}),
    },
)
responses = st.fixed_dictionaries(
    {},
    optional={
        "objects": st.one_of(st.none(), st.lists(objects_, max_size=3), ints),
        "error": st.one_of(st.none(), st.just(""), st.just("no")),
        "patch": st.one_of(st.none(), st.just([]), st.just([{"op": "remove", "path": "/a"}])),
        "observations": st.one_of(st.none(), st.just([])),
        "status": st.just(1),
    },
)


@settings(max_examples=400, deadline=None)
@given(responses)
def test_the_group_response_schema_and_the_decoder_agree(response: dict[str, Any]) -> None:
    valid = not list(schema_validator("group-response").iter_errors(response))
    try:
        decode_response(pack(response), HOOK, 3)
        decoded = True
    except ResponseError:
        decoded = False
    assert valid == decoded, response
