"""The WebAssembly plugin adapter: what a request carries, how a call's logs are attributed."""

from __future__ import annotations

import logging

import msgpack
import pytest

from modelserving.api.hook import Hook, HookRequest
from modelserving.api.place import PodPlace
from modelserving.api.validation import parse_model_serving
from modelserving.plugins.wasm import RESPONSES, WasmPlugin
from modelserving.sandbox import Sandbox
from tests.vectors import MODEL_SERVING
from tests.wasm.conftest import sample_pod
from tests.wasm.guests import LOG_IMPORT, MIRROR, guest, hook, responding, returns

NO_CHANGE = guest(hook(returns(0, 0)))


def pod_request(status: bool) -> HookRequest:
    doc = {**MODEL_SERVING, "status": {"replicas": 1}} if status else MODEL_SERVING
    return HookRequest(
        hook=Hook.ON_POD_CREATE,
        model_serving=parse_model_serving(doc),
        place=PodPlace("llama-0", "prefill", "prefill-0", False),
        pod=sample_pod(),
    )


def test_a_request_carries_the_model_serving_without_its_status(sandbox: Sandbox) -> None:
    request = pod_request(status=True)
    plugin = WasmPlugin("p", {"k": 1}, sandbox.load(NO_CHANGE), sandbox, sandbox.limits())
    decoded = msgpack.unpackb(plugin.encode(request))
    assert sorted(decoded["modelServing"]) == ["apiVersion", "kind", "metadata", "spec"]
    assert decoded["modelServing"]["metadata"]["name"] == "llama"
    assert (decoded["plugin"], decoded["isEntry"], decoded["pod"]) == (
        {"name": "p", "config": {"k": 1}},
        False,
        sample_pod(),
    )


def test_a_newer_model_serving_object_is_encoded_afresh(sandbox: Sandbox) -> None:
    first, second = pod_request(status=False), pod_request(status=False)
    renamed = second.model_serving.model_copy(
        update={"metadata": second.model_serving.metadata.model_copy(update={"name": "other"})}
    )
    plugin = WasmPlugin(
        "p", None, sandbox.load(NO_CHANGE), sandbox, sandbox.limits(), first.model_serving
    )
    plugin.encode(first)
    newer = HookRequest(
        hook=second.hook,
        model_serving=renamed,
        place=PodPlace(second.serving_group, second.role_name, second.role_id, second.is_entry),
        pod=second.pod,
    )
    assert msgpack.unpackb(plugin.encode(newer))["modelServing"]["metadata"]["name"] == "other"


def test_guest_logs_are_attributed_to_the_plugin_hook_and_pod(
    sandbox: Sandbox, caplog: pytest.LogCaptureFixture
) -> None:
    module = guest(
        '(data (i32.const 2048) "ready")',
        hook("(call $log (i32.const 2) (i32.const 2048) (i32.const 5)) " + returns(0, 0)),
        imports=LOG_IMPORT,
    )
    plugin = WasmPlugin("gpu-check", None, sandbox.load(module), sandbox, sandbox.limits())
    with caplog.at_level(logging.DEBUG, logger="modelserving.plugin"):
        plugin.on_pod_create(pod_request(status=False))
    (record,) = caplog.records
    assert record.levelno == logging.WARNING
    assert record.getMessage() == (
        "plugin 'gpu-check' OnPodCreate on Pod sample-0-server-0-0: ready"
    )
    assert (record.plugin, record.pod, record.source) == (  # type: ignore[attr-defined]
        "gpu-check",
        "sample-0-server-0-0",
        "log",
    )


def _answer(value: object) -> bytes:
    """A request MIRROR answers with the msgpack of ``value``."""
    return b"\x01" + bytes(msgpack.packb(value))


ADD = {"op": "add", "path": "/metadata/labels/a", "value": "b"}


def test_the_same_response_bytes_are_decoded_once(sandbox: Sandbox) -> None:
    """By every plugin of the process: the decode reads nothing but the bytes, hook and ABI."""
    RESPONSES.clear()
    module = sandbox.load(MIRROR)
    plugin = WasmPlugin("p", None, module, sandbox, sandbox.limits())
    other_plugin = WasmPlugin("q", None, module, sandbox, sandbox.limits())
    first = plugin.call_bytes(Hook.ON_POD_CREATE, _answer({"patch": [ADD]}))
    again = other_plugin.call_bytes(Hook.ON_POD_CREATE, _answer({"patch": [ADD]}))
    other = plugin.call_bytes(Hook.ON_POD_CREATE, _answer({"patch": [{**ADD, "value": "c"}]}))
    assert first.patch == [ADD] and again.patch is first.patch
    assert other.patch == [{**ADD, "value": "c"}]
    assert len(RESPONSES) == 2


def test_what_is_kept_is_bounded(sandbox: Sandbox) -> None:
    """Responses over the size bound are decoded every time; the kept ones' bytes stay within
    the budget, the newest kept."""
    RESPONSES.clear()
    plugin = WasmPlugin("p", None, sandbox.load(MIRROR), sandbox, sandbox.limits())
    long = {**ADD, "value": "v" * RESPONSES.max_bytes}
    for _ in range(2):
        assert plugin.call_bytes(Hook.ON_POD_CREATE, _answer({"patch": [long]})).failure is None
    assert not RESPONSES
    big = "v" * (RESPONSES.max_bytes - 100)
    for i in range(2 * RESPONSES.budget // RESPONSES.max_bytes):
        answer = _answer({"patch": [{**ADD, "value": f"{i}{big}"}]})
        plugin.call_bytes(Hook.ON_POD_CREATE, answer)
    assert RESPONSES.kept_bytes <= RESPONSES.budget < RESPONSES.kept_bytes + RESPONSES.max_bytes
    again = plugin.call_bytes(Hook.ON_POD_CREATE, answer)
    assert again.patch is plugin.call_bytes(Hook.ON_POD_CREATE, answer).patch


@pytest.mark.parametrize(
    ("answer", "failure"),
    [({"error": "no GPU"}, "PluginError"), ({"patch": "x"}, "InvalidResponse")],
)
def test_a_failed_response_is_decoded_every_time(
    sandbox: Sandbox, answer: dict[str, object], failure: str
) -> None:
    RESPONSES.clear()
    plugin = WasmPlugin("p", None, sandbox.load(MIRROR), sandbox, sandbox.limits())
    for _ in range(2):
        reply = plugin.call_bytes(Hook.ON_POD_CREATE, _answer(answer))
        assert str(reply.failure) == failure
    assert not RESPONSES


def test_an_observing_hooks_response_is_not_kept(sandbox: Sandbox) -> None:
    RESPONSES.clear()
    module = responding(msgpack.packb({}), hooks=("ms_on_pod_ready",))
    plugin = WasmPlugin("p", None, sandbox.load(module), sandbox, sandbox.limits())
    assert plugin.call_bytes(Hook.ON_POD_READY, b"").failure is None
    assert not RESPONSES
