"""The ABI v1 codec: request bytes are exactly msgpack's, and every response rule is enforced
with its own message (the texts abi/README.md quotes)."""

from __future__ import annotations

from typing import Any

import msgpack
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from modelserving.abi.codec import (
    RequestEncoder,
    Response,
    _pack_str,
    decode_response,
    encode_request,
)
from modelserving.abi.contract import ResponseError
from modelserving.api.hook import HOOK_SPECS, Hook, PatchOperation
from modelserving.api.place import PodPlace
from tests.unit.abi.samples import MODEL_SERVING, WHERE, pod

POD = pod(args=20)
CONFIGS: list[Any] = [
    None,
    {},
    {"team": "llm", "n": 3, "ratio": 0.5, "on": True, "list": [1, -(2**40), 2**64 - 1]},
    {f"key{i}": i for i in range(40)},
    "plain string",
    ["a", None, {"nested": {"deeper": ["ü", "漢字"]}}],
    {"long": "x" * 70_000},
]


def pack(value: Any) -> bytes:
    return msgpack.packb(value, use_bin_type=True)  # type: ignore[no-any-return]


def full_request(hook: Hook, config: Any, pod: dict[str, Any]) -> dict[str, Any]:
    request: dict[str, Any] = {
        "abiVersion": 1,
        "hook": str(hook),
        "plugin": {"name": "team-label", "config": config},
    }
    if hook is Hook.VALIDATE_CONFIG:
        return request
    return {
        **request,
        "modelServing": MODEL_SERVING,
        "servingGroup": WHERE.serving_group,
        "roleName": WHERE.role_name,
        "roleId": WHERE.role_id,
        "isEntry": WHERE.is_entry,
        "pod": pod,
    }


# --- requests -------------------------------------------------------------------------------


@pytest.mark.parametrize("config", CONFIGS)
@pytest.mark.parametrize("hook", [s.hook for s in HOOK_SPECS if not s.per_group])
def test_a_request_is_byte_identical_to_msgpack_of_the_whole_map(hook: Hook, config: Any) -> None:
    encoded = encode_request(hook, "team-label", config, MODEL_SERVING, WHERE, POD)
    assert encoded == pack(full_request(hook, config, POD))


def test_the_encoder_splices_the_same_bytes_for_every_pod() -> None:
    encoder = RequestEncoder("team-label", {"team": "llm"}, MODEL_SERVING)
    for i in range(3):
        pod = {**POD, "metadata": {"name": f"pod-{i}"}}
        where = PodPlace(f"llama-{i}", "decode", f"decode-{i}", i == 0)
        for hook in (Hook.ON_POD_CREATE, Hook.ON_POD_READY):
            expected = {
                **full_request(hook, {"team": "llm"}, pod),
                "servingGroup": f"llama-{i}",
                "roleName": "decode",
                "roleId": f"decode-{i}",
                "isEntry": i == 0,
            }
            assert encoder.pod_hook(hook, where, pod) == pack(expected)
    assert encoder.validate_config() == pack(
        full_request(Hook.VALIDATE_CONFIG, {"team": "llm"}, POD)
    )


def test_a_request_keeps_its_key_order() -> None:
    decoded = msgpack.unpackb(
        encode_request(Hook.ON_POD_READY, "p", None, MODEL_SERVING, WHERE, POD)
    )
    assert list(decoded) == [
        "abiVersion",
        "hook",
        "plugin",
        "modelServing",
        "servingGroup",
        "roleName",
        "roleId",
        "isEntry",
        "pod",
    ]
    assert list(decoded["plugin"]) == ["name", "config"]


def test_validate_config_needs_no_model_serving() -> None:
    assert RequestEncoder("p", 1, None).validate_config() == pack(
        {"abiVersion": 1, "hook": "ValidateConfig", "plugin": {"name": "p", "config": 1}}
    )


def test_a_pod_hook_request_needs_the_model_serving_and_the_pod() -> None:
    with pytest.raises(ValueError, match="needs the ModelServing"):
        RequestEncoder("p", None, None).pod_hook(Hook.ON_POD_CREATE, WHERE, POD)
    with pytest.raises(ValueError, match="needs the Pod and where it sits"):
        encode_request(Hook.ON_POD_CREATE, "p", None, MODEL_SERVING)


# --- responses: what is accepted ------------------------------------------------------------

ADD: PatchOperation = {"op": "add", "path": "/metadata/labels/team", "value": "llm"}


@pytest.mark.parametrize("hook", list(Hook))
def test_an_empty_response_means_no_change(hook: Hook) -> None:
    assert decode_response(b"", hook) == Response()


@pytest.mark.parametrize("hook", list(Hook))
@pytest.mark.parametrize(
    "value", [{}, {"patch": []}, {"patch": None}, {"error": ""}, {"error": None}]
)
def test_empty_forms_mean_no_change(hook: Hook, value: dict[str, Any]) -> None:
    assert decode_response(pack(value), hook) == Response()


def test_a_patch_is_returned_in_order() -> None:
    ops: list[PatchOperation] = [
        ADD,
        {"op": "remove", "path": "/metadata/labels/old"},
        {"op": "replace", "path": "/spec/priorityClassName", "value": None},
        {"op": "test", "path": "/kind", "value": "Pod"},
    ]
    assert decode_response(pack({"patch": ops}), Hook.ON_POD_CREATE) == Response(patch=ops)


def test_an_error_wins_over_a_well_formed_patch() -> None:
    response = decode_response(pack({"patch": [ADD], "error": "no"}), Hook.ON_POD_CREATE)
    assert response == Response(error="no")


def test_an_empty_error_leaves_the_patch() -> None:
    response = decode_response(pack({"patch": [ADD], "error": ""}), Hook.ON_POD_CREATE)
    assert response == Response(patch=[ADD])


@pytest.mark.parametrize("hook", [Hook.ON_POD_READY, Hook.VALIDATE_CONFIG])
def test_other_hooks_may_return_an_error(hook: Hook) -> None:
    assert decode_response(pack({"error": "bad config"}), hook) == Response(error="bad config")


def test_any_msgpack_width_is_accepted() -> None:
    # str8 for a short key, float32 for a value
    data = b"\x81\xd9\x05patch\x91\x83\xa2op\xa3add\xa4path\xa2/a\xa5value\xca\x3f\x80\x00\x00"
    assert decode_response(data, Hook.ON_POD_CREATE) == Response(
        patch=[{"op": "add", "path": "/a", "value": 1.0}]
    )


def test_a_repeated_key_counts_once_the_last_wins() -> None:
    data = b"\x82\xa5error\xa1x\xa5error\xa0"
    assert decode_response(data, Hook.ON_POD_CREATE) == Response()


# --- responses: every rule and its message --------------------------------------------------


def deep(levels: int) -> Any:
    value: Any = 0
    for _ in range(levels):
        value = [value]
    return value


REFUSED: dict[str, tuple[bytes, Hook, str]] = {
    "trailing bytes": (
        pack({}) + b"\x00",
        Hook.ON_POD_CREATE,
        "trailing bytes after the msgpack response",
    ),
    "truncated": (
        b"\x81\xa5patch",
        Hook.ON_POD_CREATE,
        "not a msgpack value: ValueError: Unpack failed: incomplete input",
    ),
    "extension type": (
        pack({"error": msgpack.ExtType(5, b"x")}),
        Hook.ON_POD_CREATE,
        "msgpack extension type 5 is not JSON",
    ),
    "timestamp": (
        pack({"error": msgpack.Timestamp(1)}),
        Hook.ON_POD_CREATE,
        "the response holds a Timestamp at '/error', which is not JSON",
    ),
    "an array": (
        pack([1, 2]),
        Hook.ON_POD_CREATE,
        "the response must be a msgpack map, not an array",
    ),
    "a string": (pack("x"), Hook.ON_POD_CREATE, "the response must be a msgpack map, not a string"),
    "an integer": (
        pack(1),
        Hook.ON_POD_CREATE,
        "the response must be a msgpack map, not an integer",
    ),
    "a float": (pack(1.5), Hook.ON_POD_CREATE, "the response must be a msgpack map, not a float"),
    "a bool": (pack(True), Hook.ON_POD_CREATE, "the response must be a msgpack map, not a bool"),
    "nil": (pack(None), Hook.ON_POD_CREATE, "the response must be a msgpack map, not nil"),
    "binary": (
        pack(b"x"),
        Hook.ON_POD_CREATE,
        "the response must be a msgpack map, not binary data",
    ),
    "binary value": (
        pack({"patch": [{"op": "add", "path": "/a", "value": b"\x00"}]}),
        Hook.ON_POD_CREATE,
        "the response holds a bytes at '/patch/0/value', which is not JSON",
    ),
    "non-string key": (
        pack({1: "x"}),
        Hook.ON_POD_CREATE,
        "the response has a non-string key 1 at ''",
    ),
    "nested non-string key": (
        pack({"patch": [{"op": "add", "path": "/a", "value": {2: 1}}]}),
        Hook.ON_POD_CREATE,
        "the response has a non-string key 2 at '/patch/0/value'",
    ),
    "nan": (
        pack({"patch": [{"op": "add", "path": "/a", "value": float("nan")}]}),
        Hook.ON_POD_CREATE,
        "the response holds nan at '/patch/0/value', which JSON cannot express",
    ),
    "infinity": (
        pack({"patch": [{"op": "add", "path": "/a", "value": float("-inf")}]}),
        Hook.ON_POD_CREATE,
        "the response holds -inf at '/patch/0/value', which JSON cannot express",
    ),
    "nested too deep": (
        pack({"patch": [{"op": "add", "path": "/a", "value": deep(98)}]}),
        Hook.ON_POD_CREATE,
        "the response is nested more than 100 levels deep (at '/patch/0/value" + "/0" * 97 + "')",
    ),
    "too many values": (  # a million empty maps would have taken a second to check
        pack({"patch": [{"op": "add", "path": "/a", "value": [{}] * 50_000 + [[]] * 50_000}]}),
        Hook.ON_POD_CREATE,
        "the response holds more than 100000 values",
    ),
    "unknown keys": (
        pack({"patch": [], "status": "ok", "extra": 1}),
        Hook.ON_POD_CREATE,
        "unknown response key(s) 'extra', 'status' (v1 has patch, error)",
    ),
    "error not a string": (
        pack({"error": 1}),
        Hook.ON_POD_CREATE,
        "error must be a string, not an integer",
    ),
    "error an array": (
        pack({"error": ["x"]}),
        Hook.ON_POD_READY,
        "error must be a string, not an array",
    ),
    "patch not an array": (
        pack({"patch": {}}),
        Hook.ON_POD_CREATE,
        "patch must be an array, not a map",
    ),
    "patch a string": (
        pack({"patch": "x"}),
        Hook.ON_POD_READY,
        "patch must be an array, not a string",
    ),
    "patch in OnPodReady": (
        pack({"patch": [ADD]}),
        Hook.ON_POD_READY,
        "OnPodReady responses may not carry a patch (only OnPodCreate may)",
    ),
    "patch in ValidateConfig": (
        pack({"patch": [ADD], "error": "x"}),
        Hook.VALIDATE_CONFIG,
        "ValidateConfig responses may not carry a patch (only OnPodCreate may)",
    ),
    "op not a map": (
        pack({"patch": [ADD, 1]}),
        Hook.ON_POD_CREATE,
        "patch[1] must be a map, not an integer",
    ),
    "unknown op key": (
        pack({"patch": [{"op": "move", "path": "/a", "from": "/b"}]}),
        Hook.ON_POD_CREATE,
        "patch[0] has unknown key(s) 'from'",
    ),
    "bad op": (
        pack({"patch": [{"op": "copy", "path": "/a"}]}),
        Hook.ON_POD_CREATE,
        "patch[0].op must be one of add, remove, replace, test, not 'copy'",
    ),
    "missing op": (
        pack({"patch": [{"path": "/a"}]}),
        Hook.ON_POD_CREATE,
        "patch[0].op must be one of add, remove, replace, test, not None",
    ),
    "path not a string": (
        pack({"patch": [{"op": "remove", "path": 7}]}),
        Hook.ON_POD_CREATE,
        "patch[0].path must be a string, not an integer",
    ),
    "missing path": (
        pack({"patch": [{"op": "remove"}]}),
        Hook.ON_POD_CREATE,
        "patch[0].path must be a string, not nil",
    ),
    "add without value": (
        pack({"patch": [{"op": "add", "path": "/a"}]}),
        Hook.ON_POD_CREATE,
        "patch[0] (add) needs a value",
    ),
    "replace without value": (
        pack({"patch": [ADD, {"op": "replace", "path": "/a"}]}),
        Hook.ON_POD_CREATE,
        "patch[1] (replace) needs a value",
    ),
    "test without value": (
        pack({"patch": [{"op": "test", "path": "/a"}]}),
        Hook.ON_POD_CREATE,
        "patch[0] (test) needs a value",
    ),
    "remove with value": (
        pack({"patch": [{"op": "remove", "path": "/a", "value": None}]}),
        Hook.ON_POD_CREATE,
        "patch[0] (remove) takes no value",
    ),
    "error does not excuse a bad patch": (
        pack({"error": "no", "patch": [{"op": "move", "path": "/a"}]}),
        Hook.ON_POD_CREATE,
        "patch[0].op must be one of add, remove, replace, test, not 'move'",
    ),
}


@pytest.mark.parametrize(("data", "hook", "message"), REFUSED.values(), ids=REFUSED.keys())
def test_a_broken_response_is_refused_with_its_message(
    data: bytes, hook: Hook, message: str
) -> None:
    with pytest.raises(ResponseError) as info:
        decode_response(data, hook)
    assert str(info.value) == message


@pytest.mark.parametrize("data", [b"\xc1", b"\x81\xa5error\xa2\xff\xfe", b"\x91" * 5000 + b"\xc0"])
def test_bytes_that_are_not_msgpack_are_refused(data: bytes) -> None:
    with pytest.raises(ResponseError, match=r"^not a msgpack value: "):
        decode_response(data, Hook.ON_POD_CREATE)


def test_the_depth_limit_is_one_hundred_levels() -> None:
    within = pack({"patch": [{"op": "add", "path": "/a", "value": deep(97)}]})
    assert decode_response(within, Hook.ON_POD_CREATE).patch[0]["value"] == deep(97)


@pytest.mark.parametrize(
    ("op", "shown"), [(["add"], "['add']"), ({"a": 1}, "{'a': 1}"), (1, "1"), (True, "True")]
)
def test_an_op_that_is_not_a_string_is_a_bad_op(op: Any, shown: str) -> None:
    with pytest.raises(ResponseError) as info:
        decode_response(pack({"patch": [{"op": op, "path": "/a"}]}), Hook.ON_POD_CREATE)
    assert str(info.value) == (
        f"patch[0].op must be one of add, remove, replace, test, not {shown}"
    )


@given(st.text(max_size=40) | st.integers(0, 70_000).map(lambda n: "é" * (n // 2)))
@settings(max_examples=200, deadline=None)
def test_strings_are_packed_as_msgpack_packs_them(text: str) -> None:
    assert _pack_str(text) == msgpack.packb(text, use_bin_type=True)


def test_string_headers_at_each_size_boundary() -> None:
    for n in (0, 31, 32, 255, 256, 65_535, 65_536):
        text = "a" * n
        assert _pack_str(text) == msgpack.packb(text, use_bin_type=True), n


def test_a_response_of_as_many_values_as_allowed_is_decoded() -> None:
    # 1 (patch) + 1 (the op) + 3 (its keys) + 10 lists + their 99,980 items: 99,995
    value = [[0] * 9_998] * 10
    got = decode_response(
        pack({"patch": [{"op": "add", "path": "/a", "value": value}]}), Hook.ON_POD_CREATE
    )
    assert got.patch[0]["value"] == value
