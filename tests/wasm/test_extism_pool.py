"""The Extism worker pool: calls of different threads run in different workers at once, a call
waits for a free worker at most its deadline, and a closed pool leaves no worker.

A "blocked" call loops in its own code under a deadline of a minute: it holds its worker until
the test kills that worker, so nothing here depends on how fast the machine is.
"""

from __future__ import annotations

import os
import signal
import threading
import time
from collections.abc import Callable, Iterator
from dataclasses import replace
from pathlib import Path
from typing import Any

import pytest

from modelserving.plugins.exports import plugin_sandbox
from modelserving.sandbox import CallFailure, Sandbox, SandboxError, SandboxSettings
from modelserving.sandbox.cache import CompiledModule
from modelserving.sandbox.compiled import ExtismModule
from tests.processes import mentioning, wait_until_gone
from tests.wasm.guests import extism_function, extism_guest, extism_responding

OK = extism_responding(b"\x80")
LOOP = extism_guest(extism_function("on_pod_create", "(loop $l (br $l)) i32.const 0"))
MINUTE = 60_000


@pytest.fixture
def own(tmp_path: Path) -> Iterator[Callable[..., Sandbox]]:
    """New sandboxes whose calls may take a minute (closed at the end)."""
    made: list[Sandbox] = []

    def make(**settings: Any) -> Sandbox:
        sandbox = plugin_sandbox(
            SandboxSettings(
                cache_dir=tmp_path / f"cache-{len(made)}", max_timeout_ms=MINUTE, **settings
            )
        )
        made.append(sandbox)
        return sandbox

    yield make
    for sandbox in made:
        sandbox.close()


class Blocked:
    """A call that holds one worker of ``sandbox`` (looping, deadline a minute) until
    ``release`` kills that worker."""

    def __init__(self, sandbox: Sandbox, module: CompiledModule) -> None:
        self.sandbox = sandbox
        before = set(sandbox.extism.busy_pids())
        limits = sandbox.limits(fuel=2_000_000_000, timeout_ms=MINUTE)
        self.outcome: list[Any] = []
        self.thread = threading.Thread(target=self._run, args=(module, limits), daemon=True)
        self.thread.start()
        deadline = time.monotonic() + 60
        while not (held := set(sandbox.extism.busy_pids()) - before):
            assert time.monotonic() < deadline, "the blocked call never held a worker"
            time.sleep(0.01)
        (self.pid,) = held

    def _run(self, module: CompiledModule, limits: Any) -> None:
        try:
            self.outcome.append(self.sandbox.call(module, "on_pod_create", b"", limits))
        except CallFailure as failure:
            self.outcome.append(failure)

    def release(self) -> Any:
        os.kill(self.pid, signal.SIGKILL)
        self.thread.join(timeout=60)
        assert not self.thread.is_alive()
        return self.outcome[0]


def test_a_call_completes_while_another_worker_is_blocked_in_a_call(
    own: Callable[..., Sandbox],
) -> None:
    """Serialised calls would make the second call wait for the blocked one's minute and fail
    as Timeout after its own 5 s; in the pool it runs in a second worker."""
    sandbox = own()
    loop, ok = sandbox.load(LOOP), sandbox.load(OK)
    blocked = Blocked(sandbox, loop)
    result = sandbox.call(ok, "on_pod_create", b"", sandbox.limits(timeout_ms=5000))
    assert result.response == b"\x80"
    assert blocked.thread.is_alive(), "the blocked call ended before the second one ran"
    pids = sandbox.extism.pids()
    assert len(pids) == 2 and blocked.pid in pids  # two distinct workers used at once
    failure = blocked.release()
    assert isinstance(failure, CallFailure)
    assert failure.message == "the Extism worker ended during the call (signal SIGKILL)"


def test_waiting_for_a_worker_counts_against_the_deadline(own: Callable[..., Sandbox]) -> None:
    sandbox = own(extism_workers=1)
    loop, ok = sandbox.load(LOOP), sandbox.load(OK)
    blocked = Blocked(sandbox, loop)
    with pytest.raises(CallFailure) as info:
        sandbox.call(ok, "on_pod_create", b"", sandbox.limits(timeout_ms=50))
    assert (info.value.failure_class, info.value.message) == (
        "Timeout",
        "no Extism worker became free within the deadline (50 ms): all 1 are busy",
    )
    blocked.release()
    # the killed worker's slot starts a new one
    assert sandbox.call(ok, "on_pod_create", b"", sandbox.limits()).response == b"\x80"
    assert len(sandbox.extism.pids()) == 1 and blocked.pid not in sandbox.extism.pids()


def test_a_load_waits_for_a_worker_at_most_the_compile_deadline(
    own: Callable[..., Sandbox], monkeypatch: pytest.MonkeyPatch
) -> None:
    sandbox = own(extism_workers=1)
    blocked = Blocked(sandbox, sandbox.load(LOOP))
    # a short compile deadline from now on (the blocked module's own load needed a longer one)
    short = replace(sandbox.settings, compile_timeout_ms=100)
    monkeypatch.setattr(sandbox.extism, "_settings", short)
    with pytest.raises(SandboxError) as info:
        sandbox.extism.check(ExtismModule(OK, wasi=False), sandbox.limits())
    busy = (
        "Timeout",
        "all 1 Extism workers were busy for 100 ms (operator setting sandbox.compileTimeoutMs)",
    )
    assert (info.value.failure_class, info.value.message) == busy
    with pytest.raises(SandboxError) as loading:  # through the module cache: the same Timeout
        sandbox.load(OK)
    assert (loading.value.failure_class, loading.value.message) == busy
    blocked.release()
    monkeypatch.undo()
    sandbox.load(OK)  # not remembered as a refusal: the host was busy, not the module bad


def test_sequential_calls_use_one_worker(own: Callable[..., Sandbox]) -> None:
    """A worker starts only when every running one is busy: the pool costs memory under
    concurrency only."""
    sandbox = own(extism_workers=4)
    modules = [sandbox.load(extism_responding(bytes([0x80 + i]))) for i in range(3)]
    for module in modules * 2:
        sandbox.call(module, "on_pod_create", b"", sandbox.limits())
    assert len(sandbox.extism.pids()) == 1


def test_close_stops_idle_workers_at_once_and_a_busy_one_when_its_call_ends(
    own: Callable[..., Sandbox], worker_copy: str
) -> None:
    sandbox = own()
    loop, ok = sandbox.load(LOOP), sandbox.load(OK)
    blocked = Blocked(sandbox, loop)
    sandbox.call(ok, "on_pod_create", b"", sandbox.limits(timeout_ms=5000))
    assert len(mentioning(worker_copy)) == 2
    sandbox.close()
    assert [pid for pid, _ in mentioning(worker_copy)] == [blocked.pid]  # killed and reaped
    blocked.release()
    assert wait_until_gone(worker_copy) == []
    assert sandbox.extism.pids() == []


def test_an_extism_worker_is_the_first_the_kernel_kills_for_memory(
    own: Callable[..., Sandbox],
) -> None:
    sandbox = own()
    ok = sandbox.load(OK)
    assert sandbox.call(ok, "on_pod_create", b"", sandbox.limits()).response == b"\x80"
    pids = sandbox.extism.pids()
    assert pids
    for pid in pids:
        assert Path(f"/proc/{pid}/oom_score_adj").read_text().strip() == "1000"
