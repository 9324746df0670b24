"""Start-up runs under the call's limits: a start function (moved to an export the host calls
right after instantiating) and ``_initialize`` are bounded by fuel and the deadline and
classified like hook code; host functions that can take long stop at the deadline."""

from __future__ import annotations

import pytest

from modelserving.api.errors import FailureClass
from modelserving.plugins.exports import plugin_sandbox
from modelserving.sandbox import CallFailure, Sandbox, SandboxError, SandboxSettings
from modelserving.sandbox.settings import MIB
from modelserving.sandbox.structure import START_EXPORT, detach_start
from tests.wasm.guests import guest, hook, returns

RANDOM = '(import "wasi_snapshot_preview1" "random_get" (func $rand (param i32 i32) (result i32)))'
FOREVER = "(loop $l (br $l))"
RESPONSE_AT_0 = hook(returns(0, 1))


def _call(sandbox: Sandbox, data: bytes, **limits: int) -> bytes:
    compiled = sandbox.load(data)
    return sandbox.call(compiled, "ms_on_pod_create", b"\x80", sandbox.limits(**limits)).response


def _failure(sandbox: Sandbox, data: bytes, **limits: int) -> CallFailure:
    with pytest.raises(CallFailure) as caught:
        _call(sandbox, data, **limits)
    return caught.value


def _with_start(body: str, *fields: str, memory: str = '(memory (export "memory") 2)') -> bytes:
    return guest(
        "(func $start " + body + ")",
        "(start $start)",
        RESPONSE_AT_0,
        *fields,
        memory=memory,
    )


def test_a_start_function_runs_once_before_the_hook(sandbox: Sandbox) -> None:
    data = _with_start(
        "(i32.store8 (i32.const 0) (i32.add (i32.load8_u (i32.const 0)) (i32.const 0x81)))"
    )
    assert _call(sandbox, data) == b"\x81"
    assert sandbox.load(data).info.start
    assert START_EXPORT not in sandbox.load(data).info.exports


def test_a_start_function_runs_before_initialize(sandbox: Sandbox) -> None:
    data = _with_start(
        "(i32.store8 (i32.const 0) (i32.const 0x90))",
        '(func (export "_initialize") '
        "(i32.store8 (i32.const 0) (i32.add (i32.load8_u (i32.const 0)) (i32.const 1))))",
    )
    assert _call(sandbox, data) == b"\x91"


def test_an_endless_start_function_times_out(sandbox: Sandbox) -> None:
    failure = _failure(sandbox, _with_start(FOREVER), timeout_ms=20, fuel=10**15 // 10**6)
    assert failure.failure_class is FailureClass.TIMEOUT
    assert failure.message == "the call passed its deadline (20 ms)"


def test_a_start_function_runs_out_of_fuel(sandbox: Sandbox) -> None:
    failure = _failure(sandbox, _with_start(FOREVER), fuel=10_000, timeout_ms=5_000)
    assert failure.failure_class is FailureClass.FUEL_EXHAUSTED


def test_a_start_function_failing_at_the_memory_limit_is_memory_limit(sandbox: Sandbox) -> None:
    grow_until_refused = (
        "(loop $l (br_if $l (i32.ne (memory.grow (i32.const 16)) (i32.const -1)))) unreachable"
    )
    failure = _failure(sandbox, _with_start(grow_until_refused), memory_mib=4)
    assert failure.failure_class is FailureClass.MEMORY_LIMIT
    assert "memory at the limit" in failure.message


def test_an_initialize_failing_at_the_memory_limit_is_memory_limit(sandbox: Sandbox) -> None:
    data = guest(
        '(func (export "_initialize") (loop $l (br_if $l (i32.ne (memory.grow (i32.const 16)) '
        "(i32.const -1)))) unreachable)",
        RESPONSE_AT_0,
    )
    assert _failure(sandbox, data, memory_mib=4).failure_class is FailureClass.MEMORY_LIMIT


def test_a_plain_trap_in_a_start_function_is_a_trap(sandbox: Sandbox) -> None:
    failure = _failure(sandbox, _with_start("unreachable"))
    assert failure.failure_class is FailureClass.TRAP


# One random_get of 128 MiB: wasmtime's own WASI would fill it all (hundreds of ms) and the call
# would then succeed; the host's random_get stops at the deadline, so the call is a Timeout.
_HUGE = 128 * MIB
_BIG_MEMORY = f'(memory (export "memory") {_HUGE // 65536 + 2})'


@pytest.mark.parametrize("where", ["hook", "start", "initialize"])
def test_one_huge_random_get_is_stopped_at_the_deadline(where: str) -> None:
    sandbox = plugin_sandbox(SandboxSettings(cache_dir=None))
    fill = f"(drop (call $rand (i32.const 65536) (i32.const {_HUGE})))"
    if where == "hook":
        data = guest(hook(fill + returns(0, 1)), imports=RANDOM, memory=_BIG_MEMORY)
    elif where == "start":
        data = guest(
            "(func $start " + fill + ")",
            "(start $start)",
            RESPONSE_AT_0,
            imports=RANDOM,
            memory=_BIG_MEMORY,
        )
    else:
        data = guest(
            '(func (export "_initialize") ' + fill + ")",
            RESPONSE_AT_0,
            imports=RANDOM,
            memory=_BIG_MEMORY,
        )
    failure = _failure(sandbox, data, timeout_ms=1, memory_mib=256)
    assert failure.failure_class is FailureClass.TIMEOUT, failure.message
    assert failure.message == "the call passed its deadline (1 ms)"


def test_random_get_within_the_deadline_fills_the_buffer() -> None:
    sandbox = plugin_sandbox(SandboxSettings(cache_dir=None))
    # 300 KiB (two chunks) of randomness, then the response is its first byte or'ed with 0x80
    # and the status of random_get (0) is checked.
    body = (
        "(if (call $rand (i32.const 65536) (i32.const 307200)) (then unreachable))"
        "(i32.store8 (i32.const 0) (i32.or (i32.load8_u (i32.const 65536)) (i32.const 0x80)))"
        + returns(0, 1)
    )
    data = guest(hook(body), imports=RANDOM, memory='(memory (export "memory") 8)')
    first = {_call(sandbox, data) for _ in range(8)}
    assert all(b[0] & 0x80 for b in first) and len(first) > 1  # random, not a constant


def test_random_get_outside_the_memory_is_efault() -> None:
    sandbox = plugin_sandbox(SandboxSettings(cache_dir=None))
    body = "(i32.store8 (i32.const 0) (call $rand (i32.const 131000) (i32.const 1000)))" + returns(
        0, 1
    )
    data = guest(hook(body), imports=RANDOM)
    assert _call(sandbox, data) == bytes([21])  # WASI errno EFAULT


def test_the_reserved_start_export_name_is_refused(sandbox: Sandbox) -> None:
    data = guest(f'(func (export "{START_EXPORT}"))', RESPONSE_AT_0)
    with pytest.raises(SandboxError) as caught:
        sandbox.load(data)
    assert caught.value.failure_class is FailureClass.INVALID_MODULE
    assert START_EXPORT in caught.value.message


def test_detach_start_leaves_modules_without_one_alone() -> None:
    assert detach_start(guest(RESPONSE_AT_0)) is None
