"""WASI reactors (Go's -buildmode=c-shared, C's -mexec-model=reactor): every call sees a fresh
instance on which ``_initialize`` ran once, before ``ms_alloc`` and the hook. Each test runs
twice: with the host calling ``_initialize`` in every call, under the call's limits (a failure
there is the call's failure), and with the module pre-initialised at load (``preinit``: calls
start from a snapshot taken after ``_initialize``; a module whose ``_initialize`` fails is not
pre-initialised, so it fails each call as before)."""

from __future__ import annotations

from pathlib import Path

import msgpack
import pytest

from modelserving.plugins.exports import plugin_sandbox
from modelserving.sandbox import CallFailure, Sandbox, SandboxError
from tests.wasm.conftest import roomy
from tests.wasm.guests import guest, hook, returns

# Like a Go reactor: allocating before the runtime has started traps. The hook answers
# {"error": "<I><A>"}: I = how often _initialize ran in this instance, A = how often it had run
# when ms_alloc was called.
REACTOR_ALLOC = """
  (global $inits (mut i32) (i32.const 0))
  (global $inits_at_alloc (mut i32) (i32.const 0))
  (global $top (mut i32) (i32.const 4096))
  (func (export "ms_alloc") (param $n i32) (result i32)
    (local $p i32)
    (if (i32.eqz (global.get $inits)) (then unreachable))
    (global.set $inits_at_alloc (global.get $inits))
    (local.set $p (global.get $top))
    (global.set $top (i32.add (global.get $top) (local.get $n)))
    (local.get $p))
"""
COUNT_INITS = "(global.set $inits (i32.add (global.get $inits) (i32.const 1)))"
REPORT = (
    "(i32.store8 (i32.const 2056) (i32.add (i32.const 48) (global.get $inits)))"
    "(i32.store8 (i32.const 2057) (i32.add (i32.const 48) (global.get $inits_at_alloc)))"
    + returns(2048, 10)
)
ERROR_XX = '(data (i32.const 2048) "\\81\\a5error\\a2XX")'


@pytest.fixture(scope="module", params=[False, True], ids=["per-call", "preinitialized"])
def sandbox(request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory) -> Sandbox:
    cache = Path(tmp_path_factory.mktemp("reactor-cache"))
    return plugin_sandbox(roomy(cache_dir=cache, preinitialize=request.param))


def reactor(initialize_body: str = COUNT_INITS, initialize_type: str = "") -> bytes:
    return guest(
        f'(func (export "_initialize") {initialize_type} {initialize_body})',
        ERROR_XX,
        hook(REPORT),
        hook(REPORT, "ms_validate_config"),
        alloc=REACTOR_ALLOC,
    )


def test_initialize_runs_once_per_instance_before_ms_alloc_and_the_hook(
    sandbox: Sandbox, request_bytes: bytes
) -> None:
    compiled = sandbox.load(reactor())
    pre = sandbox.settings.preinitialize
    assert (compiled.info.initialize, compiled.info.preinitialized) == (not pre, pre)
    validate = b"\x83\xaaabiVersion\x01\xa4hook\xaeValidateConfig\xa6plugin\x81\xa4name\xa1p"
    for export, request in [("ms_on_pod_create", request_bytes)] * 3 + [
        ("ms_validate_config", validate)
    ]:
        result = sandbox.call(compiled, export, request, sandbox.limits())
        # once in this instance, and already when ms_alloc ran: every call is a fresh instance
        assert msgpack.unpackb(result.response) == {"error": "11"}


def test_without_initialize_the_reactor_guard_traps(sandbox: Sandbox, request_bytes: bytes) -> None:
    """The same module without the export: nothing starts it, so its ms_alloc traps (what makes
    the test above meaningful)."""
    compiled = sandbox.load(guest(ERROR_XX, hook(REPORT), alloc=REACTOR_ALLOC))
    assert not compiled.info.initialize
    with pytest.raises(CallFailure) as info:
        sandbox.call(compiled, "ms_on_pod_create", request_bytes, sandbox.limits())
    assert info.value.failure_class == "Trap"


def test_initialize_uses_the_calls_fuel_unless_preinitialized(
    sandbox: Sandbox, request_bytes: bytes
) -> None:
    spin = (
        "(local $i i32) (loop $l (local.set $i (i32.add (local.get $i) (i32.const 1))) "
        "(br_if $l (i32.lt_u (local.get $i) (i32.const 100000)))) " + COUNT_INITS
    )
    plain = sandbox.call(
        sandbox.load(reactor()), "ms_on_pod_create", request_bytes, sandbox.limits()
    )
    spinning = sandbox.call(
        sandbox.load(reactor(spin)), "ms_on_pod_create", request_bytes, sandbox.limits()
    )
    assert spinning.response == plain.response
    if sandbox.settings.preinitialize:  # the loop ran once, at load
        assert spinning.fuel_consumed == plain.fuel_consumed
    else:
        assert spinning.fuel_consumed - plain.fuel_consumed > 100_000


@pytest.mark.parametrize(
    ("body", "limits", "failure_class", "message"),
    [
        ("unreachable", {}, "Trap", "wasm trap: wasm `unreachable` instruction executed"),
        ("(loop $l (br $l))", {"fuel": 1_000_000}, "FuelExhausted", "ran out of fuel"),
        (
            "(loop $l (br $l))",
            {"fuel": 2_000_000_000, "timeout_ms": 50},
            "Timeout",
            "passed its deadline (50 ms)",
        ),
    ],
)
def test_a_failure_in_initialize_fails_the_call(
    sandbox: Sandbox,
    request_bytes: bytes,
    body: str,
    limits: dict[str, int],
    failure_class: str,
    message: str,
) -> None:
    with pytest.raises(CallFailure) as info:
        sandbox.call(
            sandbox.load(reactor(body)), "ms_on_pod_create", request_bytes, sandbox.limits(**limits)
        )
    assert info.value.failure_class == failure_class
    assert message in info.value.message


def test_initialize_must_take_and_return_nothing(sandbox: Sandbox) -> None:
    with pytest.raises(SandboxError) as info:
        sandbox.load(reactor("", "(param i32)"))
    assert info.value.failure_class == "InvalidModule"
    assert info.value.message == "export '_initialize' has type (i32) -> (); it must be () -> ()"
