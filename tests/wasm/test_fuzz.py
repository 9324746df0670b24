"""Fuzzing the way back from a guest: whatever a module returns (pointers, bytes, msgpack values,
patch operations), the host ends in success or in exactly one failure class, never in an
unhandled exception, and the Pod it was given is never changed. Random modules, and random
responses returned by them, are ``test_fuzz_modules.py``'s."""

from __future__ import annotations

import copy
import os
import struct
from typing import Any

import msgpack
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from modelserving.abi.codec import decode_response
from modelserving.abi.contract import ResponseError
from modelserving.api.errors import PatchRejected, PluginFailure
from modelserving.api.hook import Hook
from modelserving.chain.policy import PatchValidator
from modelserving.plugins.wasm import WasmPlugin
from modelserving.sandbox import Sandbox
from tests.wasm.conftest import sample_pod
from tests.wasm.guests import MIRROR

FUZZ = settings(
    max_examples=int(os.environ.get("FUZZ_EXAMPLES") or 300),
    deadline=None,
    suppress_health_check=[HealthCheck.function_scoped_fixture],
)
"""300 examples a test in ``make test``; ``make fuzz`` sets FUZZ_EXAMPLES (and hypothesis' seed)."""
VALIDATOR = PatchValidator()

json_scalars = st.none() | st.booleans() | st.integers(-(2**63), 2**64 - 1) | st.text(max_size=8)
json_values = st.recursive(
    json_scalars | st.floats() | st.binary(max_size=4),
    lambda inner: (
        st.lists(inner, max_size=4) | st.dictionaries(st.text(max_size=6), inner, max_size=4)
    ),
    max_leaves=20,
)
POINTERS = st.sampled_from(
    [
        "",
        "/metadata/labels/x",
        "/metadata/annotations",
        "/spec/containers/0/env",
        "/spec/containers/-",
        "/spec/containers/0/securityContext/privileged",
        "/metadata/name",
        "/spec/hostNetwork",
        "/spec/volumes/0/hostPath",
        "/status",
        "/spec/containers/9/image",
        "/metadata/labels/a~1b",
    ]
) | st.text(max_size=12)
operations = st.fixed_dictionaries(
    {"op": st.sampled_from(["add", "remove", "replace", "test", "move", 7]), "path": POINTERS},
    optional={"value": json_values, "from": POINTERS},
)
responses = (
    st.fixed_dictionaries(
        {}, optional={"patch": st.lists(operations, max_size=5) | json_values, "error": json_values}
    )
    | json_values
)


def run_mirror(plugin: WasmPlugin, response: bytes) -> str:
    """Send ``response`` through the mirror guest and the chain's checks; the outcome's name."""
    pod = sample_pod()
    before = copy.deepcopy(pod)
    try:
        outcome = plugin.run(Hook.ON_POD_CREATE, response)
        VALIDATOR.apply_patch(pod, outcome.response.patch)
    except PluginFailure as failure:
        return str(failure.failure_class)
    except PatchRejected:
        return "ForbiddenPatch"
    finally:
        assert pod == before
    return "ok"


@FUZZ
@given(data=st.binary(max_size=64))
def test_random_bytes_as_a_response(sandbox: Sandbox, data: bytes) -> None:
    plugin = WasmPlugin("fuzz", None, sandbox.load(MIRROR), sandbox, sandbox.limits())
    assert run_mirror(plugin, b"\x01" + data) in {"ok", "InvalidResponse", "PluginError"} | {
        "ForbiddenPatch"
    }


@FUZZ
@given(value=responses)
def test_random_msgpack_values_and_patches(sandbox: Sandbox, value: Any) -> None:
    plugin = WasmPlugin("fuzz", None, sandbox.load(MIRROR), sandbox, sandbox.limits())
    outcome = run_mirror(plugin, b"\x01" + msgpack.packb(value, use_bin_type=True))
    assert outcome in {"ok", "InvalidResponse", "PluginError", "ForbiddenPatch"}


@FUZZ
@given(pointer=st.integers(0, 2**32 - 1), length=st.integers(0, 2**32 - 1))
def test_random_response_pointers(sandbox: Sandbox, pointer: int, length: int) -> None:
    plugin = WasmPlugin("fuzz", None, sandbox.load(MIRROR), sandbox, sandbox.limits())
    request = b"\x00" + struct.pack("<Q", (pointer << 32) | length) + b"\x00" * 7
    assert run_mirror(plugin, request) in {"ok", "InvalidResponse", "PluginError", "ForbiddenPatch"}


@FUZZ
@given(value=responses)
def test_decoder_ends_in_a_response_or_a_response_error(value: Any) -> None:
    data = msgpack.packb(value, use_bin_type=True)
    for hook in Hook:
        try:
            decoded = decode_response(data, hook)
        except ResponseError:
            continue
        assert hook is Hook.ON_POD_CREATE or not decoded.patch


def test_the_mirror_really_returns_what_it_is_given(sandbox: Sandbox) -> None:
    """The fuzz tests above rely on it: a patch sent through the mirror applies."""
    plugin = WasmPlugin("fuzz", None, sandbox.load(MIRROR), sandbox, sandbox.limits())
    op = {"op": "add", "path": "/metadata/labels/x", "value": "y"}
    assert run_mirror(plugin, b"\x01" + msgpack.packb({"patch": [op]})) == "ok"
    assert plugin.last is not None
    assert plugin.last.response.patch == [op]
