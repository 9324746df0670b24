"""The raw wasmtime store of a call (``sandbox.core.call``): every store a call makes is deleted
exactly once, and the pool slot is given back, whatever way the call ends, including an
exception between the store's creation and the call proper."""

from __future__ import annotations

import contextlib
import ctypes
from typing import Any

import pytest

from modelserving.plugins.exports import plugin_sandbox
from modelserving.sandbox import CallFailure, Sandbox, SandboxSettings
from modelserving.sandbox.core import call
from modelserving.sandbox.engine import set_current_scope
from tests.wasm.guests import guest, hook, responding


class _Stores:
    """Each store made and deleted (by address) while installed."""

    def __init__(self, monkeypatch: pytest.MonkeyPatch) -> None:
        self.made: list[int] = []
        self.deleted: list[int] = []
        new, delete = call._store_new, call._store_delete

        def store_new(*args: Any) -> Any:
            store = new(*args)
            self.made.append(_address(store))
            return store

        def store_delete(store: Any) -> None:
            self.deleted.append(_address(store))
            delete(store)

        monkeypatch.setattr(call, "_store_new", store_new)
        monkeypatch.setattr(call, "_store_delete", store_delete)


def _address(store: Any) -> int:
    return ctypes.cast(store, ctypes.c_void_p).value or 0


@pytest.fixture
def stores(monkeypatch: pytest.MonkeyPatch) -> _Stores:
    return _Stores(monkeypatch)


@pytest.fixture
def small() -> Sandbox:
    return plugin_sandbox(SandboxSettings(pool_slots=2))


@pytest.mark.parametrize("where", ["_set_epoch_deadline", "_store_limiter"])
def test_a_failure_while_the_store_is_set_up_deletes_it(
    small: Sandbox,
    stores: _Stores,
    monkeypatch: pytest.MonkeyPatch,
    request_bytes: bytes,
    where: str,
) -> None:
    module = small.load(responding(b""))

    def broken(*args: Any) -> Any:
        raise RuntimeError("set-up failed")

    monkeypatch.setattr(call, where, broken)
    with pytest.raises(RuntimeError, match="set-up failed"):
        small.call(module, "ms_on_pod_create", request_bytes, small.limits())
    assert stores.made and sorted(stores.deleted) == sorted(stores.made)
    assert small.engine.slots.free == 2


def test_a_failure_before_the_call_starts_deletes_the_store(
    small: Sandbox, stores: _Stores, monkeypatch: pytest.MonkeyPatch, request_bytes: bytes
) -> None:
    """Between the instance's store and the call proper (the call's scope is set there)."""
    module = small.load(responding(b""))

    def broken(scope: Any) -> None:
        set_current_scope(None)
        if scope is not None:
            raise RuntimeError("no scope")

    monkeypatch.setattr(call, "set_current_scope", broken)
    with pytest.raises(RuntimeError, match="no scope"):
        small.call(module, "ms_on_pod_create", request_bytes, small.limits())
    assert stores.made and sorted(stores.deleted) == sorted(stores.made)
    assert small.engine.slots.free == 2


@pytest.mark.parametrize(
    "body",
    [
        "unreachable",  # a trap
        "(loop $l (br $l)) unreachable",  # out of fuel
        "(i64.const 0x7fffffff00000010)",  # a response outside the memory
        "(i64.const 0)",  # an empty response: success
    ],
)
def test_every_call_deletes_its_store_once_and_frees_its_slot(
    small: Sandbox, stores: _Stores, request_bytes: bytes, body: str
) -> None:
    module = small.load(guest(hook(body)))
    for _ in range(3):
        with contextlib.suppress(CallFailure):
            small.call(module, "ms_on_pod_create", request_bytes, small.limits(fuel=100_000))
    assert len(stores.made) == 3 and sorted(stores.deleted) == sorted(stores.made)
    assert small.engine.slots.free == 2
