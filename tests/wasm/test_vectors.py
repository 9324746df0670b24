"""The shared ABI vectors (abi/vectors) replayed through the native and the WebAssembly built-ins
(each vector through its plugin's twin: demo-pod-tweaks, hccl-ranktable, entry-address-file),
and the check that the committed vectors match their generator (tests/vectors.py)."""

from __future__ import annotations

import base64
import json
from pathlib import Path
from typing import Any

import msgpack
import pytest

from modelserving.api.errors import FailureClass, ObjectRejected, PatchRejected, PluginFailure
from modelserving.api.hook import Hook
from modelserving.chain.objects import ObjectValidator
from modelserving.chain.policy import PatchValidator
from modelserving.plugins.artifacts import builtin_wasm
from modelserving.plugins.exports import HOOK_EXPORTS
from modelserving.plugins.wasm import WasmPlugin
from modelserving.sandbox import Sandbox
from tests import vectors


def load(path: Path) -> dict[str, Any]:
    return json.loads(path.read_text())  # type: ignore[no-any-return]


ALL_FILES = sorted(vectors.VECTORS.glob("*.json"))
FILES = [p for p in ALL_FILES if load(p)["plugin"] == vectors.PLUGIN]
"""The vectors of demo-pod-tweaks, which its ports (Go) replay too."""


def test_the_committed_vectors_match_their_generator() -> None:
    assert vectors.main(["check"]) == 0


def test_there_are_vectors_for_every_outcome() -> None:
    outcomes = {load(p)["expect"].get("failure", "ok") for p in FILES}
    assert outcomes == {"ok", "PluginError", "ForbiddenPatch"}


def test_there_are_vectors_of_every_hook_of_the_group_built_ins() -> None:
    for plugin in ("hccl-ranktable", "entry-address-file"):
        hooks = {load(p)["hook"] for p in ALL_FILES if load(p)["plugin"] == plugin}
        assert {"OnServingGroupChange", "OnPodCreate"} <= hooks, plugin
    group = [load(p) for p in ALL_FILES if load(p)["hook"] == "OnServingGroupChange"]
    assert {msgpack.unpackb(base64.b64decode(v["request"]))["abiVersion"] for v in group} == {3}


def wasm_outcome(
    sandbox: Sandbox, vector: dict[str, Any], module: bytes | None = None
) -> tuple[bytes | None, str | None]:
    """The response bytes a WebAssembly module gives (by default the vector's built-in), and the
    class the host ends with."""
    compiled = sandbox.load(module or builtin_wasm(f"{vector['plugin']}.wasm"))
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
    if outcome.response.objects:
        fields = msgpack.unpackb(request)
        namespace = fields["modelServing"]["metadata"].get("namespace") or "default"
        try:
            ObjectValidator().check(outcome.response.objects, fields["servingGroup"], namespace)
        except ObjectRejected:
            return call.response, str(FailureClass.FORBIDDEN_OBJECT)
    return call.response, None


@pytest.mark.parametrize("path", ALL_FILES, ids=[p.stem for p in ALL_FILES])
def test_vector_through_the_webassembly_builtin(sandbox: Sandbox, path: Path) -> None:
    vector = load(path)
    response, failure = wasm_outcome(sandbox, vector)
    expect = vector["expect"]
    assert failure == expect.get("failure")
    if failure != "PluginError":
        assert response == base64.b64decode(expect["response"])


@pytest.mark.parametrize("path", ALL_FILES, ids=[p.stem for p in ALL_FILES])
def test_vector_through_the_native_builtin(path: Path) -> None:
    vector = load(path)
    response = vectors.native_response(base64.b64decode(vector["request"]))
    if response is None:
        assert vector["expect"]["failure"] == "PluginError"
    else:
        assert response == base64.b64decode(vector["expect"]["response"])
