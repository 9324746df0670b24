"""Hostile and broken modules: each is refused with the right failure class, the host unharmed."""

from __future__ import annotations

import msgpack
import pytest

from modelserving.api.errors import FailureClass, PluginFailure
from modelserving.api.hook import Hook
from modelserving.plugins.wasm import WasmPlugin
from modelserving.sandbox import Sandbox, SandboxError
from tests.wasm.conftest import unhurried
from tests.wasm.guests import (
    LOG_IMPORT,
    MEMORY,
    guest,
    hook,
    responding,
    returns,
)

NO_CHANGE = msgpack.packb({"patch": []})


def failure_of(
    sandbox: Sandbox,
    module: bytes,
    request: bytes,
    hook_name: Hook = Hook.ON_POD_CREATE,
    **limits: int,
) -> FailureClass:
    """Load and call ``module``; the failure class it ends with (the test fails on success)."""
    try:
        compiled = sandbox.load(module)
    except SandboxError as error:
        return error.failure_class
    plugin = WasmPlugin("hostile", None, compiled, sandbox, sandbox.limits(**limits))
    with pytest.raises(PluginFailure) as info:
        plugin.run(hook_name, request, "pod-0")
    failure = info.value
    assert (failure.plugin, failure.hook, failure.pod) == ("hostile", hook_name, "pod-0")
    return failure.failure_class


@pytest.fixture(autouse=True)
def host_unharmed(sandbox: Sandbox, request_bytes: bytes) -> object:
    """After every hostile module, a well-behaved one still runs normally."""
    yield None
    good = sandbox.load(responding(NO_CHANGE))
    assert sandbox.call(good, "ms_on_pod_create", request_bytes, sandbox.limits()).response == (
        NO_CHANGE
    )


LOOP = hook("(loop $l (br $l)) unreachable")

CASES = {
    "endless loop runs out of fuel": (guest(LOOP), {"timeout_ms": 5000}, "FuelExhausted"),
    "endless loop hits the deadline": (
        guest(LOOP),
        {"fuel": 2_000_000_000, "timeout_ms": 20},
        "Timeout",
    ),
    "memory bomb": (
        guest(
            hook(
                "(loop $l (br_if $l (i32.ne (memory.grow (i32.const 16)) (i32.const -1)))) "
                "unreachable"
            )
        ),
        {"memory_mib": 4},
        "MemoryLimit",
    ),
    "huge initial memory": (
        guest(hook(returns(0, 0)), memory='(memory (export "memory") 1000)'),
        {"memory_mib": 16},
        "MemoryLimit",
    ),
    "alloc returns 0": (
        guest(
            hook(returns(0, 0)),
            alloc='(func (export "ms_alloc") (param i32) (result i32) i32.const 0)',
        ),
        {},
        "InvalidResponse",
    ),
    "alloc returns a pointer past the memory": (
        guest(
            hook(returns(0, 0)),
            alloc='(func (export "ms_alloc") (param i32) (result i32) i32.const 131000)',
        ),
        {},
        "InvalidResponse",
    ),
    "response outside memory": (guest(hook(returns(131000, 4096))), {}, "InvalidResponse"),
    "response pointer wraps": (guest(hook(returns(0xFFFFFFFF, 2))), {}, "InvalidResponse"),
    "oversize response": (guest(hook(returns(0, 0xFFFFFFFF))), {}, "InvalidResponse"),
    "malformed msgpack": (responding(b"\xc1\xc1"), {}, "InvalidResponse"),
    "truncated msgpack": (responding(b"\x81\xa5patch\x92\x80"), {}, "InvalidResponse"),
    "response is not a map": (responding(msgpack.packb([1, 2])), {}, "InvalidResponse"),
    "unknown response key": (
        responding(msgpack.packb({"patch": [], "status": "ok"})),
        {},
        "InvalidResponse",
    ),
    "binary data in the patch": (
        responding(msgpack.packb({"patch": [{"op": "add", "path": "/a", "value": b"\0"}]})),
        {},
        "InvalidResponse",
    ),
    "unknown patch op": (
        responding(msgpack.packb({"patch": [{"op": "move", "path": "/a", "from": "/b"}]})),
        {},
        "InvalidResponse",
    ),
    "guest error": (responding(msgpack.packb({"error": "no GPUs for you"})), {}, "PluginError"),
    "trap": (guest(hook("unreachable")), {}, "Trap"),
    "integer division by zero": (
        guest(hook("(drop (i32.div_u (i32.const 1) (i32.const 0))) i64.const 0")),
        {},
        "Trap",
    ),
    "stack overflow": (
        guest(
            "(func $f (param i32) (result i32) (i32.add (call $f (local.get 0)) (i32.const 1)))",
            hook("(drop (call $f (i32.const 0))) i64.const 0"),
        ),
        {},
        "Trap",
    ),
    "start function traps at instantiation": (
        guest("(func $s unreachable) (start $s)", hook(returns(0, 0))),
        {},
        "Trap",
    ),
    "WASI proc_exit": (
        guest(
            hook("(call $exit (i32.const 3)) i64.const 0"),
            imports='(import "wasi_snapshot_preview1" "proc_exit" (func $exit (param i32)))',
        ),
        {},
        "Trap",
    ),
}


@pytest.mark.parametrize(("module", "limits", "expected"), CASES.values(), ids=CASES.keys())
def test_hostile_call_fails_with_its_class(
    sandbox: Sandbox, request_bytes: bytes, module: bytes, limits: dict[str, int], expected: str
) -> None:
    assert failure_of(sandbox, module, request_bytes, Hook.ON_POD_CREATE, **limits) == expected


def test_a_patch_in_an_on_pod_ready_response_is_refused(
    sandbox: Sandbox, request_bytes: bytes
) -> None:
    module = responding(
        msgpack.packb({"patch": [{"op": "add", "path": "/a", "value": 1}]}), ("ms_on_pod_ready",)
    )
    assert failure_of(sandbox, module, request_bytes, Hook.ON_POD_READY) == "InvalidResponse"


REFUSED_AT_LOAD = {
    "not wasm": b"\x7fELF\x02\x01\x01",
    "truncated wasm": b"\0asm\x01\0\0\0\x01",
    "missing marker": guest(hook(returns(0, 0)), marker=False),
    "only a newer marker": guest(
        '(func (export "modelserving_abi_v4"))', hook(returns(0, 0)), marker=False
    ),
    "marker with the wrong type": guest(
        '(func (export "modelserving_abi_v1") (param i32))', hook(returns(0, 0)), marker=False
    ),
    "no hooks": guest(),
    "only ValidateConfig": guest(hook(returns(0, 0), "ms_validate_config")),
    "no memory": guest(hook(returns(0, 0)), memory=None),
    "imported memory": guest(
        hook(returns(0, 0)), memory=None, imports='(import "env" "memory" (memory 1))'
    ),
    "64-bit memory": guest(hook(returns(0, 0)), memory='(memory (export "memory") i64 1)'),
    "no ms_alloc": guest(hook(returns(0, 0)), alloc=None),
    "ms_alloc with the wrong type": guest(
        hook(returns(0, 0)), alloc='(func (export "ms_alloc") (param i64) (result i64) i64.const 0)'
    ),
    "hook with the wrong type": guest(
        '(func (export "ms_on_pod_create") (param i32 i32) (result i32) i32.const 0)'
    ),
    "unknown import": guest(
        hook(returns(0, 0)), imports='(import "env" "get_secret" (func (result i32)))'
    ),
    "log import with the wrong type": guest(
        hook(returns(0, 0)), imports='(import "modelserving" "log" (func (param i32)))'
    ),
    "unknown WASI function": guest(
        hook(returns(0, 0)),
        imports='(import "wasi_snapshot_preview1" "open_the_pod_bay_doors" (func))',
    ),
    # Exception objects would live on a heap outside the memory limit: a call could hold its
    # limit in linear memory and as much again in exceptions kept in a table.
    "exceptions": guest("(tag $t)", hook("(throw $t)")),
    "a table of exception references": guest("(table 1 exnref)", hook(returns(0, 0))),
    "typed function references": guest(
        "(type $v (func))", hook("(local (ref null $v)) " + returns(0, 0))
    ),
}


@pytest.mark.parametrize("module", REFUSED_AT_LOAD.values(), ids=REFUSED_AT_LOAD.keys())
def test_broken_module_is_refused_at_load(sandbox: Sandbox, module: bytes) -> None:
    with pytest.raises(SandboxError) as info:
        sandbox.load(module)
    assert info.value.failure_class == "InvalidModule"


def test_refusal_messages_name_the_rule(sandbox: Sandbox) -> None:
    def message(module: bytes) -> str:
        with pytest.raises(SandboxError) as info:
            sandbox.load(module)
        return info.value.message

    assert message(REFUSED_AT_LOAD["missing marker"]) == (
        "no ABI marker: the module must export one of: modelserving_abi_v1, modelserving_abi_v2, "
        "modelserving_abi_v3"
    )
    assert (
        "exports modelserving_abi_v4; this host supports modelserving_abi_v1, modelserving_abi_v2, "
        "modelserving_abi_v3"
    ) in message(REFUSED_AT_LOAD["only a newer marker"])
    assert "import 'env.get_secret'" in message(REFUSED_AT_LOAD["unknown import"])
    assert "ms_on_pod_create or ms_on_pod_ready or ms_on_serving_group_change" in message(
        REFUSED_AT_LOAD["no hooks"]
    )


def test_digest_mismatch_is_refused(sandbox: Sandbox) -> None:
    with pytest.raises(SandboxError) as info:
        sandbox.load(responding(NO_CHANGE), "0" * 64)
    assert info.value.failure_class == "InvalidModule"
    assert "sha256 mismatch" in info.value.message


def test_no_state_survives_between_calls(sandbox: Sandbox, request_bytes: bytes) -> None:
    """A counter in a global and in memory: every call sees both at their initial value."""
    module = guest(
        "(global $calls (mut i32) (i32.const 0))",
        '(data (i32.const 2048) "\\81\\a5error\\a1\\30")',
        hook(
            """
            (global.set $calls (i32.add (global.get $calls) (i32.const 1)))
            (i32.store8 (i32.const 2056)
              (i32.add (i32.load8_u (i32.const 2056)) (global.get $calls)))
            """
            + returns(2048, 9)
        ),
    )
    compiled = sandbox.load(module)
    limits = sandbox.limits()
    answers = {
        sandbox.call(compiled, "ms_on_pod_create", request_bytes, limits).response for _ in range(3)
    }
    assert answers == {msgpack.packb({"error": "1"})}


def test_log_flood_is_bounded(sandbox: Sandbox, request_bytes: bytes) -> None:
    module = guest(
        '(data (i32.const 2048) "spam")',
        hook(
            "(local $i i32) (loop $l (call $log (i32.const 1) (i32.const 2048) (i32.const 4)) "
            "(local.set $i (i32.add (local.get $i) (i32.const 1))) "
            "(br_if $l (i32.lt_u (local.get $i) (i32.const 10000)))) " + returns(0, 0)
        ),
        imports=LOG_IMPORT,
    )
    # the longest deadline: 10,000 host calls take more than the default 250 ms on a loaded
    # machine, and this test is about what the host keeps, not how fast
    result = sandbox.call(
        sandbox.load(module), "ms_on_pod_create", request_bytes, unhurried(sandbox)
    )
    limit = sandbox.settings.log_max_lines
    assert len(result.logs) == limit + 1
    assert all(r.message == "spam" for r in result.logs[:limit])
    assert result.logs[-1].message.startswith(f"{10000 - limit} more log line(s) dropped")


def test_log_with_an_out_of_range_pointer_is_noted_not_fatal(
    sandbox: Sandbox, request_bytes: bytes
) -> None:
    module = guest(
        hook("(call $log (i32.const 3) (i32.const -16) (i32.const 64)) " + returns(0, 0)),
        imports=LOG_IMPORT,
    )
    result = sandbox.call(sandbox.load(module), "ms_on_pod_create", request_bytes, sandbox.limits())
    assert [r.source for r in result.logs] == ["host"]
    assert "out-of-range" in result.logs[0].message


def test_long_log_lines_are_cut(sandbox: Sandbox, request_bytes: bytes) -> None:
    module = guest(
        hook("(call $log (i32.const 2) (i32.const 0) (i32.const 5000)) " + returns(0, 0)),
        imports=LOG_IMPORT,
    )
    result = sandbox.call(sandbox.load(module), "ms_on_pod_create", request_bytes, sandbox.limits())
    (record,) = result.logs
    assert record.level == "warn"
    assert record.message.endswith("...[cut]")
    assert len(record.message) == sandbox.settings.log_max_line_bytes + len("...[cut]")


def test_memory_limit_refuses_a_module_larger_than_the_plugin_limit(
    sandbox: Sandbox, request_bytes: bytes
) -> None:
    module = guest(hook(returns(0, 0)), memory=MEMORY.replace("2)", "40)"))
    assert failure_of(sandbox, module, request_bytes, memory_mib=2) == "MemoryLimit"
    assert failure_of(sandbox, responding(b"\xc1"), request_bytes, memory_mib=4) != "MemoryLimit"
