"""ABI v3 with real modules: only a v3 module may serve OnServingGroupChange, its request is the
encoder's, and its objects go through the object policy like a native plugin's."""

from __future__ import annotations

from typing import Any

import msgpack
import pytest

from modelserving.api.errors import FailureClass
from modelserving.api.group import GroupPod, GroupRequest
from modelserving.api.hook import Hook
from modelserving.api.modelserving import PluginSpec
from modelserving.api.place import PodPlace
from modelserving.api.validation import parse_model_serving
from modelserving.chain import ChainEntry, invoke
from modelserving.chain.objects import ObjectValidator
from modelserving.plugins.exports import module_hooks
from modelserving.plugins.wasm import WasmPlugin
from modelserving.sandbox import Sandbox, SandboxError
from tests.vectors import MODEL_SERVING
from tests.wasm.guests import guest, hook, returns, wat_bytes

V2 = '(func (export "modelserving_abi_v2"))'
V3 = '(func (export "modelserving_abi_v3"))'
GROUP_EXPORT = "ms_on_serving_group_change"
MS = parse_model_serving(MODEL_SERVING)
GROUP = f"{MS.name}-0"
REQUEST = GroupRequest(
    MS,
    GROUP,
    2,
    (
        GroupPod(f"{GROUP}-a-0-0", PodPlace(GROUP, "a", "a-0", True), "n", "10.0.0.1", "10.1.0.1"),
        GroupPod(f"{GROUP}-a-0-1", PodPlace(GROUP, "a", "a-0", False)),
    ),
)


def group_guest(response: dict[str, Any], marker: str = V3) -> bytes:
    data = msgpack.packb(response)
    fields = [f'(data (i32.const 1024) "{wat_bytes(data)}")', marker]
    fields.append(hook(returns(1024, len(data)), GROUP_EXPORT))
    return guest(*fields, marker=False)


def config_map(name: str, kind: str = "ConfigMap") -> dict[str, Any]:
    return {"apiVersion": "v1", "kind": kind, "metadata": {"name": name}, "data": {"k": "v"}}


def entry(sandbox: Sandbox, module: bytes, name: str = "owner") -> ChainEntry:
    compiled = sandbox.load(module)
    plugin = WasmPlugin(name, None, compiled, sandbox, sandbox.limits(), MS)
    spec = PluginSpec.model_validate({"name": name, "type": "BuiltIn"})
    return ChainEntry(0, spec, plugin)


def test_a_v2_module_may_not_serve_the_group_hook(sandbox: Sandbox) -> None:
    with pytest.raises(SandboxError) as info:
        sandbox.load(group_guest({}, V2))
    assert info.value.failure_class == "InvalidModule"
    assert info.value.message == (
        "export 'ms_on_serving_group_change' needs ABI v3 (the module's highest marker is "
        "modelserving_abi_v2)"
    )


def test_a_v3_module_serving_only_the_group_hook_is_a_plugin(sandbox: Sandbox) -> None:
    info = sandbox.load(group_guest({})).info
    assert info.abi_version == 3
    assert module_hooks(info) == (Hook.ON_SERVING_GROUP_CHANGE,)


def test_the_module_is_given_the_encoders_request(sandbox: Sandbox) -> None:
    plugin = entry(sandbox, group_guest({})).plugin
    assert isinstance(plugin, WasmPlugin)
    sent = msgpack.unpackb(plugin.encode_group(REQUEST))
    assert sent["abiVersion"] == 3
    assert sent["hook"] == "OnServingGroupChange"
    assert (sent["servingGroup"], sent["expectedPods"]) == (GROUP, 2)
    assert [p["name"] for p in sent["pods"]] == [p.name for p in REQUEST.pods]


def test_its_objects_pass_the_object_policy(sandbox: Sandbox) -> None:
    wanted = config_map(f"{GROUP}-table")
    outcome = invoke(entry(sandbox, group_guest({"objects": [wanted]})), REQUEST)
    assert outcome.failure is None
    assert outcome.objects == [
        {**wanted, "metadata": {**wanted["metadata"], "labels": {}, "annotations": {}}}
    ]
    assert outcome.fuel is not None and outcome.fuel > 0


@pytest.mark.parametrize(
    ("objects", "message"),
    [
        ([config_map(f"{GROUP}-s", "Secret")], "objects[0]: kind Secret is not allowed"),
        ([config_map("other-name")], f"objects[0]: name 'other-name' must start with '{GROUP}-'"),
    ],
)
def test_a_forbidden_object_fails_the_call_naming_the_group(
    sandbox: Sandbox, objects: list[dict[str, Any]], message: str
) -> None:
    outcome = invoke(
        entry(sandbox, group_guest({"objects": objects})), REQUEST, objects=ObjectValidator()
    )
    assert outcome.failure is not None
    assert outcome.failure.failure_class is FailureClass.FORBIDDEN_OBJECT
    assert str(outcome.failure).startswith(
        f"ForbiddenObject: plugin 'owner' OnServingGroupChange on ServingGroup {GROUP}: {message}"
    )
    assert outcome.objects == []


def test_a_broken_shape_is_an_invalid_response(sandbox: Sandbox) -> None:
    outcome = invoke(entry(sandbox, group_guest({"objects": [{"kind": 1}]})), REQUEST)
    assert outcome.failure is not None
    assert outcome.failure.failure_class is FailureClass.INVALID_RESPONSE
