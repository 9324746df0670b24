"""Which wasmtime C calls keep the GIL: the short ones that run no guest code, and only those."""

from __future__ import annotations

import ctypes
import dataclasses
import threading
import time

import pytest
from wasmtime import _bindings

from modelserving.api.errors import FailureClass
from modelserving.sandbox import CallFailure, Sandbox
from modelserving.sandbox.core import call
from tests.wasm.guests import guest, hook

PYTHONAPI: int = ctypes._FUNCFLAG_PYTHONAPI  # type: ignore[attr-defined]
"""ctypes' flag of a foreign function that keeps the GIL (a PyDLL function)."""
HELD = [
    call._export_get,
    call._memory_data_size,
    call._memory_data,
    call._get_fuel,
    call._set_fuel,
    call._set_epoch_deadline,
    call._store_limiter,
    call._memmove,
    call._instantiate,
]


def test_short_calls_keep_the_gil() -> None:
    for function in HELD:
        assert function._flags_ & PYTHONAPI, function.__name__


def test_calls_that_run_guest_code_let_it_go() -> None:
    """A guest may run until its deadline: the controller's other threads must go on."""
    assert not _bindings._wasmtime_func_call_unchecked._flags_ & PYTHONAPI


LOOP = "(loop $l (br $l)) unreachable"
ENDLESS = {
    "hook": guest(hook(LOOP)),
    # instantiation keeps the GIL: a start function must not run there, only as the export
    # the host calls after it
    "start function": guest(f"(func $s {LOOP}) (start $s)", hook("(i64.const 0)")),
}


@pytest.mark.parametrize("where", ENDLESS)
def test_a_slow_guest_does_not_hold_other_threads(
    sandbox: Sandbox, request_bytes: bytes, where: str
) -> None:
    """An endless loop until its deadline: a Python thread keeps running meanwhile."""
    module = sandbox.load(ENDLESS[where])
    # fuel enough for seconds: if the loop held the GIL, the deadline could not stop it
    limits = dataclasses.replace(sandbox.limits(), timeout_ms=300, fuel=5 * 10**9)
    ticks = 0
    done = threading.Event()

    def count() -> None:
        nonlocal ticks
        while not done.is_set():
            ticks += 1
            time.sleep(0.01)

    counter = threading.Thread(target=count)
    counter.start()
    try:
        with pytest.raises(CallFailure) as failure:
            sandbox.call(module, "ms_on_pod_create", request_bytes, limits)
    finally:
        done.set()
        counter.join()
    assert failure.value.failure_class is FailureClass.TIMEOUT
    assert ticks >= 10  # 300 ms of 10 ms sleeps, less scheduling slack
