"""ABI v2 with real modules: the marker selects the version, requests say it, and an OnPodReady
response's ``observations`` reach the controller's histogram by the same path as a native
plugin's; v1 modules and the log-line form work as before."""

from __future__ import annotations

from typing import Any, cast

import msgpack
import pytest

from modelserving.api.errors import FailureClass, PluginFailure
from modelserving.api.hook import Hook
from modelserving.api.modelserving import PluginSpec
from modelserving.api.observation import Observation
from modelserving.api.validation import parse_model_serving
from modelserving.chain import CallRecord, Chain, ChainEntry, PatchValidator
from modelserving.controller.manager import _Reports
from modelserving.controller.metrics import Metrics
from modelserving.plugins.adapter import NativePlugin
from modelserving.plugins.base import EmptyConfig
from modelserving.plugins.wasm import WasmPlugin
from modelserving.sandbox import Sandbox
from modelserving.workload.plan import plan
from tests.vectors import MODEL_SERVING
from tests.wasm.guests import LOG_IMPORT, guest, hook, returns, wat_bytes
from tests.wasm.test_observations import request

V1 = '(func (export "modelserving_abi_v1"))'
V2 = '(func (export "modelserving_abi_v2"))'
OBSERVED = {
    "observations": [
        {"name": "pod_ready_seconds", "seconds": 61.25},
        {"name": "weights_seconds", "seconds": 12},
    ]
}


def ready_guest(
    response: dict[str, Any], markers: tuple[str, ...] = (V2,), line: str = ""
) -> bytes:
    """A guest whose OnPodReady answers ``response`` (after logging ``line`` at info, if any),
    exporting ``markers``."""
    data = msgpack.packb(response)
    fields = [f'(data (i32.const 1024) "{wat_bytes(data)}")', *markers]
    body = returns(1024, len(data))
    if line:
        fields.append(f'(data (i32.const 3072) "{wat_bytes(line.encode())}")')
        body = f"(call $log (i32.const 1) (i32.const 3072) (i32.const {len(line)})) " + body
    fields.append(hook(body, "ms_on_pod_ready"))
    return guest(*fields, marker=False, imports=LOG_IMPORT)


def plugin(sandbox: Sandbox, module: bytes) -> WasmPlugin:
    return WasmPlugin("meter", None, sandbox.load(module), sandbox, sandbox.limits())


def test_the_v2_marker_selects_v2_and_requests_say_so(sandbox: Sandbox) -> None:
    p = plugin(sandbox, ready_guest(OBSERVED))
    assert p.compiled.info.abi_version == 2
    assert msgpack.unpackb(p.encode(request(Hook.ON_POD_READY)))["abiVersion"] == 2


def test_both_markers_select_the_highest(sandbox: Sandbox) -> None:
    p = plugin(sandbox, ready_guest(OBSERVED, markers=(V1, V2)))
    assert p.compiled.info.abi_version == 2
    assert p.on_pod_ready(request(Hook.ON_POD_READY)) == [
        Observation("pod_ready_seconds", 61.25),
        Observation("weights_seconds", 12.0),
    ]


def test_a_v1_module_still_gets_v1_requests_and_may_not_send_observations(
    sandbox: Sandbox,
) -> None:
    p = plugin(sandbox, ready_guest(OBSERVED, markers=(V1,)))
    assert p.compiled.info.abi_version == 1
    assert msgpack.unpackb(p.encode(request(Hook.ON_POD_READY)))["abiVersion"] == 1
    with pytest.raises(PluginFailure) as info:
        p.on_pod_ready(request(Hook.ON_POD_READY))
    assert info.value.failure_class == FailureClass.INVALID_RESPONSE
    assert "unknown response key(s) 'observations' (v1 has patch, error)" in str(info.value)


def test_a_v1_module_observes_by_log_line(sandbox: Sandbox) -> None:
    p = plugin(sandbox, ready_guest({}, markers=(V1,), line="observe pod_ready_seconds 4.5"))
    assert p.on_pod_ready(request(Hook.ON_POD_READY)) == [Observation("pod_ready_seconds", 4.5)]


def test_v2_reads_both_forms(sandbox: Sandbox) -> None:
    module = ready_guest(OBSERVED, line="observe startup_seconds 2")
    got = plugin(sandbox, module).on_pod_ready(request(Hook.ON_POD_READY))
    assert [o.name for o in got] == ["startup_seconds", "pod_ready_seconds", "weights_seconds"]


def test_an_invalid_entry_fails_the_call_naming_it(sandbox: Sandbox) -> None:
    bad = {"observations": [{"name": "pod_ready_seconds", "seconds": -1}]}
    with pytest.raises(PluginFailure) as info:
        plugin(sandbox, ready_guest(bad)).on_pod_ready(request(Hook.ON_POD_READY))
    assert info.value.failure_class == FailureClass.INVALID_RESPONSE
    assert "observations[0].seconds must be between 0 and 604800" in str(info.value)


def test_a_failed_call_drops_its_observations(sandbox: Sandbox) -> None:
    failing = {**OBSERVED, "error": "not today"}
    reply = plugin(sandbox, ready_guest(failing)).call(
        Hook.ON_POD_READY, request(Hook.ON_POD_READY)
    )
    assert (reply.failure, reply.message, list(reply.observations)) == (
        FailureClass.PLUGIN_ERROR,
        "not today",
        [],
    )


class _Native:
    def on_pod_ready(self, _: Any) -> list[Observation]:
        return [Observation("pod_ready_seconds", 30.0)]


def test_wasm_and_native_observations_reach_the_same_histogram(sandbox: Sandbox) -> None:
    ms = parse_model_serving(MODEL_SERVING)
    spec = PluginSpec.model_construct(name="meter", config=None)
    native = NativePlugin("native", _Native(), frozenset({Hook.ON_POD_READY}), EmptyConfig, None)
    entries = [
        ChainEntry(0, spec, plugin(sandbox, ready_guest(OBSERVED))),
        ChainEntry(1, PluginSpec.model_construct(name="native", config=None), native),
    ]
    chain = Chain(ms, entries, PatchValidator())
    records: list[CallRecord] = []
    chain.observer = records.append
    desired = next(plan(ms)[0].pods())
    assert chain.on_pod_ready(desired, desired.pod) == []
    metrics = Metrics()
    reports = _Reports(cast(Any, None), metrics, cast(Any, None))
    for record in records:
        reports.hook(record)
    role = desired.place.role_name
    count = "modelserving_plugin_observation_seconds_count"
    labels = {"namespace": ms.namespace, "name": "pod_ready_seconds", "role": role}
    sample = metrics.registry.get_sample_value
    assert sample(count, {**labels, "plugin": "meter"}) == 1
    assert sample(count, {**labels, "plugin": "native"}) == 1
    weights = {**labels, "name": "weights_seconds", "plugin": "meter"}
    assert sample("modelserving_plugin_observation_seconds_sum", weights) == 12.0
