"""The shared ABI vectors (abi/vectors) replayed through the native and the WebAssembly built-in,
and the check that the committed vectors match their generator (tests/vectors.py)."""

from __future__ import annotations

import base64
import json
from pathlib import Path
from typing import Any

import msgpack
import pytest

from modelserving.api.errors import FailureClass, PatchRejected, PluginFailure
from modelserving.api.hook import Hook
from modelserving.chain.policy import PatchValidator
from modelserving.plugins.artifacts import builtin_wasm
from modelserving.plugins.exports import HOOK_EXPORTS
from modelserving.plugins.wasm import WasmPlugin
from modelserving.sandbox import Sandbox
from tests import vectors

FILES = sorted(vectors.VECTORS.glob("*.json"))


def load(path: Path) -> dict[str, Any]:
    return json.loads(path.read_text())  # type: ignore[no-any-return]


def test_the_committed_vectors_match_their_generator() -> None:
    assert vectors.main(["check"]) == 0


def test_there_are_vectors_for_every_outcome() -> None:
    outcomes = {load(p)["expect"].get("failure", "ok") for p in FILES}
    assert outcomes == {"ok", "PluginError", "ForbiddenPatch"}


def wasm_outcome(
    sandbox: Sandbox, vector: dict[str, Any], module: bytes | None = None
) -> tuple[bytes | None, str | None]:
    """The response bytes a WebAssembly module gives (by default the built-in), and the class
    the host ends with."""
    compiled = sandbox.load(module or builtin_wasm("demo-pod-tweaks.wasm"))
    plugin = WasmPlugin(vector["plugin"], vector["config"], compiled, sandbox, sandbox.limits())
    hook = Hook(vector["hook"])
    request = base64.b64decode(vector["request"])
    call = sandbox.call(compiled, HOOK_EXPORTS[hook], request, sandbox.limits())
    try:
        outcome = plugin.run(hook, request)
    except PluginFailure as failure:
        return call.response, str(failure.failure_class)
    if hook is Hook.ON_POD_CREATE and outcome.response.patch:
        pod = msgpack.unpackb(request)["pod"]
        try:
            PatchValidator().apply_patch(pod, outcome.response.patch)
        except PatchRejected:
            return call.response, str(FailureClass.FORBIDDEN_PATCH)
    return call.response, None


@pytest.mark.parametrize("path", FILES, ids=[p.stem for p in FILES])
def test_vector_through_the_webassembly_builtin(sandbox: Sandbox, path: Path) -> None:
    vector = load(path)
    response, failure = wasm_outcome(sandbox, vector)
    expect = vector["expect"]
    assert failure == expect.get("failure")
    if failure != "PluginError":
        assert response == base64.b64decode(expect["response"])


@pytest.mark.parametrize("path", FILES, ids=[p.stem for p in FILES])
def test_vector_through_the_native_builtin(path: Path) -> None:
    vector = load(path)
    response = vectors.native_response(base64.b64decode(vector["request"]))
    if response is None:
        assert vector["expect"]["failure"] == "PluginError"
    else:
        assert response == base64.b64decode(vector["expect"]["response"])
