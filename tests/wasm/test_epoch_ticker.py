"""The epoch ticker advances the engine's epoch while a store may run code, and sleeps otherwise:
no ticks while nothing runs, and every deadline still holds after any idle time, with calls
starting and ending beside each other. (Pre-initialisation's ``_initialize`` at its deadline:
``test_preinit``.)"""

from __future__ import annotations

import re
import threading
import time
from pathlib import Path

import msgpack
import pytest

import modelserving.sandbox
from modelserving.api.errors import FailureClass
from modelserving.plugins.exports import plugin_sandbox
from modelserving.sandbox import Sandbox, SandboxSettings
from modelserving.sandbox.results import CallFailure
from tests.wasm.guests import guest, hook, responding

LOOP = guest(hook("(loop $l (br $l)) unreachable"))
GOOD = responding(msgpack.packb({"patch": []}))
REQUEST = msgpack.packb({"pod": {}})


@pytest.fixture
def own_sandbox(tmp_path: Path) -> Sandbox:
    """A sandbox no other test calls into (the ticks counted are this test's)."""
    return plugin_sandbox(SandboxSettings(cache_dir=tmp_path / "cache"))


def _settled_ticks(sandbox: Sandbox) -> int:
    """The tick count once the ticker has had time to notice that nothing runs."""
    time.sleep(5 * sandbox.settings.epoch_tick_ms / 1000)
    return sandbox.engine.ticks


def _loop_failure(sandbox: Sandbox, timeout_ms: int) -> FailureClass:
    compiled = sandbox.load(LOOP)
    limits = sandbox.limits(fuel=10**15, timeout_ms=timeout_ms)
    with pytest.raises(CallFailure) as info:
        sandbox.call(compiled, "ms_on_pod_create", REQUEST, limits)
    return info.value.failure_class


def test_no_ticks_while_nothing_runs(own_sandbox: Sandbox) -> None:
    good = own_sandbox.load(GOOD)
    own_sandbox.call(good, "ms_on_pod_create", REQUEST, own_sandbox.limits())
    idle = _settled_ticks(own_sandbox)
    time.sleep(20 * own_sandbox.settings.epoch_tick_ms / 1000)
    assert own_sandbox.engine.ticks == idle


def test_the_epoch_advances_while_a_call_runs(own_sandbox: Sandbox) -> None:
    before = _settled_ticks(own_sandbox)
    assert _loop_failure(own_sandbox, timeout_ms=100) == FailureClass.TIMEOUT
    assert own_sandbox.engine.ticks > before


def test_a_deadline_holds_after_the_ticker_slept(own_sandbox: Sandbox) -> None:
    for _ in range(3):  # asleep before each call
        _settled_ticks(own_sandbox)
        assert _loop_failure(own_sandbox, timeout_ms=20) == FailureClass.TIMEOUT


def test_a_call_ending_beside_a_running_one_does_not_stop_the_ticks(own_sandbox: Sandbox) -> None:
    """Short calls start and end on other threads while an endless one runs: it still ends at
    its deadline (the ticker sleeps only when no store at all is running)."""
    good = own_sandbox.load(GOOD)
    stop = threading.Event()

    def short_calls() -> None:
        while not stop.is_set():
            own_sandbox.call(good, "ms_on_pod_create", REQUEST, own_sandbox.limits())

    threads = [threading.Thread(target=short_calls) for _ in range(2)]
    for t in threads:
        t.start()
    try:
        for _ in range(3):
            assert _loop_failure(own_sandbox, timeout_ms=50) == FailureClass.TIMEOUT
    finally:
        stop.set()
        for t in threads:
            t.join(10)


_STORE = re.compile(r"\bwasmtime\.Store\(|store_new\(")
_IN_OTHER_PROCESSES = {"compile_worker.py", "worker.py"}
"""The compile worker and the Extism worker run in processes of their own, with engines of
their own."""


def test_every_store_the_host_makes_tells_the_ticker() -> None:
    """Each module of the sandbox that makes a store in the controller's process also says
    when it may run code (``running``): a store the ticker does not know of has no deadline
    while nothing else runs."""
    package = Path(modelserving.sandbox.__file__).parent
    makers = [
        path
        for path in sorted(package.rglob("*.py"))
        if path.name not in _IN_OTHER_PROCESSES and _STORE.search(path.read_text())
    ]
    assert {p.name for p in makers} >= {"call.py", "preinit.py", "floor.py"}
    for path in makers:
        text = path.read_text()
        assert ".running(" in text and ".done(" in text, path
