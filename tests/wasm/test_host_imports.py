"""What a guest can make the host do: every host-side effort is bounded per call, so no guest can
stall the host past its deadline, grow the host's memory, or starve other plugins."""

from __future__ import annotations

import threading
import time

import msgpack
import pytest

from modelserving.api.errors import PatchRejected, PluginFailure
from modelserving.api.hook import Hook
from modelserving.chain.policy import PatchValidator
from modelserving.plugins.exports import plugin_sandbox
from modelserving.plugins.wasm import WasmPlugin
from modelserving.sandbox import CallFailure, Sandbox, SandboxSettings
from tests.wasm.conftest import sample_pod
from tests.wasm.guests import LOG_IMPORT, guest, hook, responding, returns

POLL = (
    '(import "wasi_snapshot_preview1" "poll_oneoff" '
    "(func $poll (param i32 i32 i32 i32) (result i32)))"
)
FD_WRITE = (
    '(import "wasi_snapshot_preview1" "fd_write" '
    "(func $fd_write (param i32 i32 i32 i32) (result i32)))"
)


def test_a_wasi_sleep_is_refused_at_once(sandbox: Sandbox, request_bytes: bytes) -> None:
    """poll_oneoff answers ENOTSUP (58): a sleep in native code would outlast any deadline."""
    module = guest(
        '(data (i32.const 2048) "\\81\\a5error\\a200")',
        # a relative clock subscription of 10 s at 3000 (the layout does not matter: refused)
        hook(
            "(i64.store (i32.const 3024) (i64.const 10000000000))"
            "(local.set $len (call $poll (i32.const 3000) (i32.const 3100) (i32.const 1) "
            "(i32.const 3200)))"
            "(i32.store8 (i32.const 2056) (i32.add (i32.const 48) (i32.div_u (local.get $len) "
            "(i32.const 10))))"
            "(i32.store8 (i32.const 2057) (i32.add (i32.const 48) (i32.rem_u (local.get $len) "
            "(i32.const 10))))" + returns(2048, 10)
        ),
        imports=POLL,
    )
    started = time.monotonic()
    result = sandbox.call(sandbox.load(module), "ms_on_pod_create", request_bytes, sandbox.limits())
    assert time.monotonic() - started < 1
    assert msgpack.unpackb(result.response) == {"error": "58"}


def test_a_flood_of_write_vectors_is_cut_short(sandbox: Sandbox, request_bytes: bytes) -> None:
    """fd_write with millions of zero-length vectors: the host looks at a bounded number."""
    module = guest(
        hook(
            "(drop (call $fd_write (i32.const 1) (i32.const 0) (i32.const 8000000) "
            "(i32.const 64)))" + returns(0, 0)
        ),
        imports=FD_WRITE,
        memory='(memory (export "memory") 1024)',
    )
    started = time.monotonic()
    sandbox.call(sandbox.load(module), "ms_on_pod_create", request_bytes, sandbox.limits())
    assert time.monotonic() - started < 1


def test_a_huge_log_line_is_not_copied_whole(sandbox: Sandbox, request_bytes: bytes) -> None:
    module = guest(
        hook(
            "(local $i i32) (loop $l (call $log (i32.const 1) (i32.const 0) (i32.const 60000000)) "
            "(local.set $i (i32.add (local.get $i) (i32.const 1))) "
            "(br_if $l (i32.lt_u (local.get $i) (i32.const 200)))) " + returns(0, 0)
        ),
        imports=LOG_IMPORT,
        memory='(memory (export "memory") 1000)',
    )
    started = time.monotonic()
    result = sandbox.call(sandbox.load(module), "ms_on_pod_create", request_bytes, sandbox.limits())
    assert time.monotonic() - started < 1
    assert result.logs[0].message.endswith("...[cut]")


def test_a_busy_pool_times_the_call_out_instead_of_failing_it(request_bytes: bytes) -> None:
    sandbox = plugin_sandbox(SandboxSettings(pool_slots=1))
    busy = sandbox.load(guest(hook("(loop $l (br $l)) unreachable")))
    quick = sandbox.load(responding(b""))
    failures: list[str] = []

    def hold_the_only_slot() -> None:
        try:
            sandbox.call(
                busy,
                "ms_on_pod_create",
                request_bytes,
                sandbox.limits(fuel=2_000_000_000, timeout_ms=600),
            )
        except CallFailure as failure:
            failures.append(str(failure.failure_class))

    holder = threading.Thread(target=hold_the_only_slot)
    holder.start()
    slots = sandbox.engine.slots
    while slots.free:  # until the holder has the only slot
        time.sleep(0.005)
    with pytest.raises(CallFailure) as info:
        sandbox.call(quick, "ms_on_pod_create", request_bytes, sandbox.limits(timeout_ms=20))
    holder.join()
    assert failures == ["Timeout"]
    assert info.value.failure_class == "Timeout"
    assert "no instance slot became free" in info.value.message
    assert sandbox.call(quick, "ms_on_pod_create", request_bytes, sandbox.limits()).response == b""


def test_a_guest_error_message_is_cut(sandbox: Sandbox, request_bytes: bytes) -> None:
    module = responding(msgpack.packb({"error": "x" * 100_000}))
    plugin = WasmPlugin("p", None, sandbox.load(module), sandbox, sandbox.limits())
    with pytest.raises(PluginFailure) as info:
        plugin.run(Hook.ON_POD_CREATE, request_bytes)
    assert info.value.detail == "x" * 1024 + "...[cut]"


def test_too_many_operations_are_refused(sandbox: Sandbox, request_bytes: bytes) -> None:
    op = {"op": "test", "path": "/kind", "value": "Pod"}
    module = responding(msgpack.packb({"patch": [op] * 1025}))
    plugin = WasmPlugin("p", None, sandbox.load(module), sandbox, sandbox.limits())
    with pytest.raises(PluginFailure) as info:
        plugin.run(Hook.ON_POD_CREATE, request_bytes)
    assert info.value.failure_class == "InvalidResponse"
    assert "the limit is 1024" in info.value.detail


def test_an_absurdly_long_pointer_is_refused_before_it_is_split() -> None:
    path = "/" * 4_000_000
    with pytest.raises(PatchRejected) as info:
        PatchValidator().apply(sample_pod(), [{"op": "add", "path": path, "value": 1}])
    assert len(str(info.value)) < 300
