"""Extism-flavoured modules: the same request and response bytes, limits and failure classes."""

from __future__ import annotations

import time

import msgpack
import pytest
import wasmtime

from modelserving.api.errors import PluginFailure
from modelserving.api.hook import Hook
from modelserving.plugins.exports import module_hooks
from modelserving.plugins.wasm import WasmPlugin
from modelserving.sandbox import Sandbox, SandboxError
from tests.wasm.guests import (
    EXTISM_IMPORTS,
    LOG_IMPORT,
    MARKER,
    extism_copy_out,
    extism_function,
    extism_guest,
    extism_responding,
)

LABEL = msgpack.packb({"patch": [{"op": "add", "path": "/metadata/labels/x", "value": "y"}]})
LOOP = extism_function("on_pod_create", "(loop $l (br $l)) i32.const 0")


def plugin(sandbox: Sandbox, module: bytes, **limits: int) -> WasmPlugin:
    return WasmPlugin("ext", None, sandbox.load(module), sandbox, sandbox.limits(**limits))


def failure_class(sandbox: Sandbox, module: bytes, request: bytes, **limits: int) -> str:
    with pytest.raises(PluginFailure) as info:
        plugin(sandbox, module, **limits).run(Hook.ON_POD_CREATE, request, "pod-0")
    assert (info.value.plugin, info.value.pod) == ("ext", "pod-0")
    return str(info.value.failure_class)


def test_an_extism_plugin_is_recognised_and_runs(sandbox: Sandbox, request_bytes: bytes) -> None:
    module = extism_responding(LABEL)
    info = sandbox.load(module).info
    assert (info.flavour, module_hooks(info)) == ("extism", (Hook.ON_POD_CREATE,))
    outcome = plugin(sandbox, module).run(Hook.ON_POD_CREATE, request_bytes)
    assert outcome.response.patch == [{"op": "add", "path": "/metadata/labels/x", "value": "y"}]


def test_extism_endless_loop_runs_out_of_fuel(sandbox: Sandbox, request_bytes: bytes) -> None:
    module = extism_guest(LOOP)
    assert failure_class(sandbox, module, request_bytes, fuel=1_000_000) == "FuelExhausted"


def test_extism_endless_loop_hits_the_deadline(sandbox: Sandbox, request_bytes: bytes) -> None:
    module = extism_guest(LOOP)
    assert failure_class(sandbox, module, request_bytes, fuel=2_000_000_000, timeout_ms=50) == (
        "Timeout"
    )


def test_extism_error_is_a_plugin_error(sandbox: Sandbox, request_bytes: bytes) -> None:
    text = b"no GPUs left"
    body = extism_copy_out(1024, len(text)) + "(call $error_set (local.get $out)) i32.const 1"
    module = extism_guest(extism_function("on_pod_create", body), data=text)
    with pytest.raises(PluginFailure) as info:
        plugin(sandbox, module).run(Hook.ON_POD_CREATE, request_bytes)
    assert info.value.failure_class == "PluginError"
    assert info.value.detail == "no GPUs left"


def test_extism_trap(sandbox: Sandbox, request_bytes: bytes) -> None:
    module = extism_guest(extism_function("on_pod_create", "unreachable"))
    assert failure_class(sandbox, module, request_bytes) == "Trap"


def test_extism_bad_response_is_invalid(sandbox: Sandbox, request_bytes: bytes) -> None:
    module = extism_responding(msgpack.packb({"verdict": "ok"}))
    assert failure_class(sandbox, module, request_bytes) == "InvalidResponse"


def test_extism_state_does_not_survive_between_calls(
    sandbox: Sandbox, request_bytes: bytes
) -> None:
    counter = "(global $n (mut i32) (i32.const 0))"
    body = (
        "(global.set $n (i32.add (global.get $n) (i32.const 1)))"
        "(i32.store8 (i32.const 1032) (i32.add (i32.const 48) (global.get $n)))"
        + extism_copy_out(1024, 9)
        + "(call $output_set (local.get $out) (i64.const 9)) i32.const 0"
    )
    module = extism_guest(
        extism_function("on_pod_create", body), data=b"\x81\xa5error\xa1?", extra=counter
    )
    p = plugin(sandbox, module)
    for _ in range(3):
        with pytest.raises(PluginFailure) as info:
            p.run(Hook.ON_POD_CREATE, request_bytes)
        assert info.value.detail == "1"


def test_extism_plugin_may_not_import_the_native_log(sandbox: Sandbox) -> None:
    module = bytes(
        wasmtime.wat2wasm(
            f"(module {EXTISM_IMPORTS} {LOG_IMPORT} {MARKER} "
            '(func (export "on_pod_create") (result i32) i32.const 0))'
        )
    )
    with pytest.raises(SandboxError) as info:
        sandbox.load(module)
    assert "logs through extism:host/env" in info.value.message


def test_extism_wasi_sleep_is_refused_at_once(sandbox: Sandbox, request_bytes: bytes) -> None:
    """An Extism module may import WASI poll_oneoff (language runtimes such as Go's import it
    whether they sleep or not); the host serves it, as for native modules: ENOTSUP (58), at
    once. The guest reports the errno as its Extism error."""
    poll = (
        '(import "wasi_snapshot_preview1" "poll_oneoff" '
        "(func $poll (param i32 i32 i32 i32) (result i32)))"
    )
    body = (
        "(i64.store (i32.const 3024) (i64.const 10000000000))"  # a 10 s clock subscription
        "(local.set $i (call $poll (i32.const 3000) (i32.const 3100) (i32.const 1) "
        "(i32.const 3200)))"
        "(i32.store8 (i32.const 1024) (i32.add (i32.const 48) (i32.div_u (local.get $i) "
        "(i32.const 10))))"
        "(i32.store8 (i32.const 1025) (i32.add (i32.const 48) (i32.rem_u (local.get $i) "
        "(i32.const 10))))"
        "(local.set $i (i32.const 0))"
        + extism_copy_out(1024, 2)
        + "(call $error_set (local.get $out)) i32.const 1"
    )
    module = extism_guest(extism_function("on_pod_create", body), extra=poll)
    assert sandbox.load(module).info.wasi
    started = time.monotonic()
    with pytest.raises(PluginFailure) as info:
        plugin(sandbox, module).run(Hook.ON_POD_CREATE, request_bytes)
    assert time.monotonic() - started < 1
    assert (info.value.failure_class, info.value.detail) == ("PluginError", "58")
