"""abi/schema agrees with the host's codec, and abi/README.md's WAT example really runs.

The request schema must accept what ``encode_request`` produces for every hook and refuse broken
requests; the response schema must accept exactly what ``decode_response`` accepts (for JSON
values, which is all a schema can judge); the module in the README's first ```wat block must
load in the sandbox and return the patch the README shows.
"""

from __future__ import annotations

import json
import re
from functools import cache
from pathlib import Path
from typing import Any

import msgpack
import pytest
import wasmtime
from hypothesis import given, settings
from hypothesis import strategies as st
from jsonschema import Draft202012Validator

from modelserving.abi.codec import decode_response, encode_request
from modelserving.abi.contract import ResponseError
from modelserving.abi.versions import since
from modelserving.api.hook import HOOK_SPECS, Hook
from modelserving.chain.policy import PatchValidator
from modelserving.plugins.exports import module_hooks, plugin_sandbox
from modelserving.sandbox import Sandbox, SandboxSettings
from tests.unit.abi.samples import MODEL_SERVING, WHERE, pod

ABI = Path(__file__).resolve().parents[3] / "abi"
README = ABI / "README.md"


def schema(name: str) -> dict[str, Any]:
    return json.loads((ABI / "schema" / f"{name}.schema.json").read_text())  # type: ignore[no-any-return]


@cache
def validator(name: str, definition: str | None = None) -> Draft202012Validator:
    """The validator of one schema, or of one of its ``$defs`` (resolved inside the schema)."""
    root = schema(name)
    Draft202012Validator.check_schema(root)
    if definition is not None:
        root = {**root, "$ref": f"#/$defs/{definition}"}
    return Draft202012Validator(root)


# --- requests -------------------------------------------------------------------------------

POD = pod()
READY_POD: dict[str, Any] = {**POD, "status": {"phase": "Running"}}


def request(hook: Hook, config: Any = None, pod: dict[str, Any] = POD) -> dict[str, Any]:
    data = encode_request(hook, "team-label", config, MODEL_SERVING, WHERE, pod)
    return msgpack.unpackb(data)  # type: ignore[no-any-return]


V1_HOOKS = [spec.hook for spec in HOOK_SPECS if since(spec.hook) == 1]


@pytest.mark.parametrize("config", [None, {"team": "llm"}, [1, 2.5, "x"], "text"])
@pytest.mark.parametrize("hook", V1_HOOKS)
def test_the_hosts_requests_validate(hook: Hook, config: Any) -> None:
    pod = READY_POD if hook is Hook.ON_POD_READY else POD
    errors = list(validator("request").iter_errors(request(hook, config, pod)))
    assert errors == []


def without(value: dict[str, Any], key: str) -> dict[str, Any]:
    return {k: v for k, v in value.items() if k != key}


BROKEN_REQUESTS: dict[str, dict[str, Any]] = {
    "pod hook without pod": without(request(Hook.ON_POD_CREATE), "pod"),
    "pod hook without modelServing": without(request(Hook.ON_POD_READY), "modelServing"),
    "pod hook without isEntry": without(request(Hook.ON_POD_CREATE), "isEntry"),
    "unknown hook": {**request(Hook.ON_POD_CREATE), "hook": "OnPodDelete"},
    "wrong abiVersion": {**request(Hook.VALIDATE_CONFIG), "abiVersion": 2},
    "abiVersion true": {**request(Hook.VALIDATE_CONFIG), "abiVersion": True},
    "no abiVersion": without(request(Hook.VALIDATE_CONFIG), "abiVersion"),
    "no plugin": without(request(Hook.VALIDATE_CONFIG), "plugin"),
    "plugin without config": {**request(Hook.VALIDATE_CONFIG), "plugin": {"name": "p"}},
    "ValidateConfig with a pod": {**request(Hook.VALIDATE_CONFIG), "pod": POD},
    "unknown key": {**request(Hook.ON_POD_CREATE), "namespace": "serving"},
    "isEntry not a bool": {**request(Hook.ON_POD_CREATE), "isEntry": "true"},
    "pod not a Pod": {**request(Hook.ON_POD_CREATE), "pod": {**POD, "kind": "Service"}},
}


@pytest.mark.parametrize("value", BROKEN_REQUESTS.values(), ids=BROKEN_REQUESTS.keys())
def test_broken_requests_do_not_validate(value: dict[str, Any]) -> None:
    assert not validator("request").is_valid(value)


# --- responses ------------------------------------------------------------------------------


def response_validator(hook: Hook) -> Draft202012Validator:
    return validator("response", None if hook is Hook.ON_POD_CREATE else "otherHooks")


def codec_accepts(value: Any, hook: Hook) -> bool:
    try:
        decode_response(msgpack.packb(value, use_bin_type=True), hook)
    except ResponseError:
        return False
    return True


def assert_agree(value: Any, hook: Hook) -> None:
    by_schema = response_validator(hook).is_valid(value)
    by_codec = codec_accepts(value, hook)
    assert by_schema == by_codec, f"{hook}: schema says {by_schema}, codec {by_codec}: {value!r}"


ADD = {"op": "add", "path": "/metadata/labels/team", "value": "llm"}
RESPONSES: list[Any] = [
    {},
    {"patch": []},
    {"patch": None},
    {"error": ""},
    {"error": None},
    {"error": "no"},
    {"error": 1},
    {"error": ["x"]},
    {"patch": [ADD]},
    {"patch": [ADD], "error": "no"},
    {"patch": [ADD], "error": ""},
    {"patch": {}},
    {"patch": "x"},
    {"patch": [1]},
    {"patch": [None]},
    {"patch": [[ADD]]},
    {"patch": [{"op": "remove", "path": "/a"}]},
    {"patch": [{"op": "remove", "path": "/a", "value": 1}]},
    {"patch": [{"op": "remove", "path": "/a", "value": None}]},
    {"patch": [{"op": "replace", "path": "/a", "value": None}]},
    {"patch": [{"op": "test", "path": "/a", "value": {"k": [1, 2.5]}}]},
    {"patch": [{"op": "test", "path": "/a"}]},
    {"patch": [{"op": "add", "path": "/a"}]},
    {"patch": [{"op": "move", "path": "/a", "from": "/b"}]},
    {"patch": [{"op": "copy", "path": "/a"}]},
    {"patch": [{"op": None, "path": "/a"}]},
    {"patch": [{"op": ["add"], "path": "/a", "value": 1}]},
    {"patch": [{"op": {"add": 1}, "path": "/a", "value": 1}]},
    {"patch": [{"op": 1, "path": "/a", "value": 1}]},
    {"patch": [{"path": "/a", "value": 1}]},
    {"patch": [{"op": "add", "value": 1}]},
    {"patch": [{"op": "add", "path": 7, "value": 1}]},
    {"patch": [{"op": "add", "path": None, "value": 1}]},
    {"patch": [ADD, {"op": "add", "path": "/b", "value": 2, "extra": 0}]},
    {"patch": [], "status": "ok"},
    {"result": None},
    [],
    [ADD],
    "patch",
    1,
    1.5,
    True,
    None,
]


@pytest.mark.parametrize("hook", list(Hook))
@pytest.mark.parametrize("value", RESPONSES, ids=[json.dumps(v)[:60] for v in RESPONSES])
def test_the_response_schema_agrees_with_the_codec(value: Any, hook: Hook) -> None:
    assert_agree(value, hook)


json_scalars = (
    st.none()
    | st.booleans()
    | st.integers(-(2**63), 2**64 - 1)
    | st.floats(allow_nan=False, allow_infinity=False)
    | st.text(max_size=6)
)
json_values = st.recursive(
    json_scalars,
    lambda inner: (
        st.lists(inner, max_size=3) | st.dictionaries(st.text(max_size=5), inner, max_size=3)
    ),
    max_leaves=8,
)
op_names = (
    st.sampled_from(["add", "remove", "replace", "test", "move", "copy", "Add", ""]) | json_values
)
operations = st.fixed_dictionaries(
    {},
    optional={
        "op": op_names,
        "path": st.sampled_from(["", "/a", "/metadata/labels/x"]) | json_scalars,
        "value": json_values,
        "from": st.just("/b"),
    },
)
patches = st.none() | st.lists(operations | json_scalars, max_size=3) | json_values
responses = (
    st.fixed_dictionaries(
        {},
        optional={
            "patch": patches,
            "error": st.none() | st.text(max_size=4) | json_values,
            "status": json_values,
        },
    )
    | json_values
)


@settings(max_examples=200, deadline=None)
@given(value=responses, hook=st.sampled_from(list(Hook)))
def test_the_response_schema_agrees_with_the_codec_on_generated_responses(
    value: Any, hook: Hook
) -> None:
    assert_agree(value, hook)


# --- the README's WAT example ---------------------------------------------------------------


def fenced_blocks(text: str, language: str) -> list[str]:
    return re.findall(rf"^```{language}\n(.*?)^```$", text, flags=re.M | re.S)


def section(title: str) -> str:
    """The text of the README section whose heading ends with ``title``."""
    text = README.read_text()
    match = re.search(rf"^#+ [\d.]* *{re.escape(title)}\n(.*?)(?=^#)", text, flags=re.M | re.S)
    assert match is not None, f"no section {title!r} in {README}"
    return match.group(1)


def dump_bytes(dump: str) -> bytes:
    """The bytes of an annotated hex dump: per line, the hex pairs before the annotation."""
    return bytes.fromhex(
        "".join(re.split(r"\s{2,}", line.strip())[0] for line in dump.splitlines())
    )


@pytest.fixture(scope="module")
def sandbox() -> Sandbox:
    return plugin_sandbox(SandboxSettings())


def test_the_readme_wat_module_runs_and_returns_the_documented_patch(sandbox: Sandbox) -> None:
    example = section("A complete module in WAT")
    (wat, *_) = fenced_blocks(example, "wat")
    (documented, *_) = fenced_blocks(example, "json")
    compiled = sandbox.load(bytes(wasmtime.wat2wasm(wat)))
    assert set(module_hooks(compiled.info)) == {Hook.ON_POD_CREATE, Hook.VALIDATE_CONFIG}

    pod = {**POD, "metadata": {"name": "llama-0-prefill-0-0", "labels": {"app": "llama"}}}
    data = encode_request(Hook.ON_POD_CREATE, "team-label", None, MODEL_SERVING, WHERE, pod)
    call = sandbox.call(compiled, "ms_on_pod_create", data, sandbox.limits())
    assert msgpack.unpackb(call.response) == json.loads(documented)
    assert [(r.level, r.message) for r in call.logs] == [("info", "labelling the Pod team=llm")]

    patch = decode_response(call.response, Hook.ON_POD_CREATE).patch
    patched = PatchValidator().apply(pod, patch)
    assert patched["metadata"]["labels"] == {"app": "llama", "team": "llm"}

    config = encode_request(Hook.VALIDATE_CONFIG, "team-label", {"team": "llm"})
    assert sandbox.call(compiled, "ms_validate_config", config, sandbox.limits()).response == b""


def test_the_readme_wat_module_takes_a_request_larger_than_its_memory(sandbox: Sandbox) -> None:
    (wat, *_) = fenced_blocks(section("A complete module in WAT"), "wat")
    compiled = sandbox.load(bytes(wasmtime.wat2wasm(wat)))
    pod = {**POD, "spec": {"containers": [{"name": "engine", "args": ["x" * 1000] * 300}]}}
    data = encode_request(Hook.ON_POD_CREATE, "team-label", None, MODEL_SERVING, WHERE, pod)
    assert len(data) > compiled.info.memory_min_bytes
    call = sandbox.call(compiled, "ms_on_pod_create", data, sandbox.limits())
    assert decode_response(call.response, Hook.ON_POD_CREATE).patch == [
        {"op": "add", "path": "/metadata/labels/team", "value": "llm"}
    ]


def test_the_readme_hex_dumps_are_the_real_bytes(sandbox: Sandbox) -> None:
    (request_dump,) = fenced_blocks(section("A request, byte by byte"), "text")
    assert dump_bytes(request_dump) == encode_request(
        Hook.VALIDATE_CONFIG, "team-label", {"team": "llm"}
    )
    (response_dump,) = fenced_blocks(section("A response, byte by byte"), "text")
    (wat, *_) = fenced_blocks(section("A complete module in WAT"), "wat")
    compiled = sandbox.load(bytes(wasmtime.wat2wasm(wat)))
    data = encode_request(Hook.ON_POD_CREATE, "team-label", None, MODEL_SERVING, WHERE, POD)
    call = sandbox.call(compiled, "ms_on_pod_create", data, sandbox.limits())
    assert dump_bytes(response_dump) == call.response
