"""Extism modules run in a worker process: start-up under the call's deadline, a bounded cache of
compiled plugins, failure classes from what the host observed, and no worker left behind.

The hostile guests loop on WASI ``random_get`` of 8 MiB, which Extism cannot interrupt: in a start
function or ``_initialize`` (both run when Extism creates a plugin, before its timer starts).
"""

from __future__ import annotations

import gc
import os
import re
import signal
import subprocess
import sys
import textwrap
from collections.abc import Callable, Iterator
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

import pytest
import wasmtime

from modelserving.plugins.exports import plugin_sandbox
from modelserving.sandbox import CallFailure, Sandbox, SandboxError, SandboxSettings
from modelserving.sandbox.cache import CompiledModule
from modelserving.sandbox.extism import call as extism_call
from modelserving.sandbox.structure import cap_growth
from tests.processes import mentioning, wait_until_gone
from tests.wasm.guests import extism_copy_out, extism_function, extism_guest, extism_responding

RANDOM_GET = (
    '(import "wasi_snapshot_preview1" "random_get" (func $random_get (param i32 i32) (result i32)))'
)
OK = extism_responding(b"\x80")  # an empty response map
FINITE = 20  # loops of about 40 ms each: far past a 20 ms deadline, well within a load's
REPO = Path(__file__).resolve().parents[2]


def spin(times: int | None) -> str:
    """WAT: grow the memory past 8 MiB, then fill 8 MiB with random bytes ``times`` times (or
    forever)."""
    stop = f"(br_if $done (i32.ge_u (local.get $n) (i32.const {times})))" if times else ""
    return f"""(drop (memory.grow (i32.const 129)))
    (block $done (loop $again {stop}
      (drop (call $random_get (i32.const 65536) (i32.const 8388608)))
      (local.set $n (i32.add (local.get $n) (i32.const 1)))
      (br $again)))"""


def start_spinning(times: int | None) -> bytes:
    body = f"(start $spin) (func $spin (local $n i32) {spin(times)})"
    return extism_guest(extism_function("on_pod_create", "i32.const 0"), extra=RANDOM_GET + body)


def initialize_spinning(times: int | None) -> bytes:
    body = f'(func (export "_initialize") (local $n i32) {spin(times)})'
    return extism_guest(extism_function("on_pod_create", "i32.const 0"), extra=RANDOM_GET + body)


def erring(text: bytes) -> bytes:
    body = extism_copy_out(1024, len(text)) + "(call $error_set (local.get $out)) i32.const 1"
    return extism_guest(extism_function("on_pod_create", body), data=text)


_RUNNER = ThreadPoolExecutor(max_workers=1, thread_name_prefix="extism-bounds")
"""One long-lived thread: a thread that ends takes the compile worker it started ahead with it
(PR_SET_PDEATHSIG follows the thread that started the process)."""


def finished(action: Callable[[], Any]) -> Any:
    """Run ``action`` in another thread, wait for it generously, and return what it returned
    or raised (as the exception): the test fails if it never ends."""

    def run() -> Any:
        try:
            return action()
        except Exception as exc:  # handed to the test
            return exc

    return _RUNNER.submit(run).result(timeout=90)


def call_failure(sandbox: Sandbox, compiled: CompiledModule, **limits: int) -> CallFailure:
    outcome = finished(
        lambda: sandbox.call(compiled, "on_pod_create", b"", sandbox.limits(**limits))
    )
    assert isinstance(outcome, CallFailure), outcome
    return outcome


@pytest.fixture
def own(tmp_path: Path) -> Iterator[Callable[..., Sandbox]]:
    """New sandboxes (closed at the end), with settings changed from the defaults."""
    made: list[Sandbox] = []

    def make(**settings: Any) -> Sandbox:
        sandbox = plugin_sandbox(
            SandboxSettings(cache_dir=tmp_path / f"cache-{len(made)}", **settings)
        )
        made.append(sandbox)
        return sandbox

    yield make
    for sandbox in made:
        sandbox.close()


@pytest.mark.parametrize("guest", [start_spinning, initialize_spinning])
def test_a_slow_start_up_fails_the_call_at_its_deadline(
    own: Callable[..., Sandbox], guest: Callable[[int | None], bytes]
) -> None:
    """Extism starts the module before its own timer; the call's deadline still holds."""
    sandbox = own()
    compiled = sandbox.load(guest(FINITE))
    failure = call_failure(sandbox, compiled, timeout_ms=20)
    assert failure.failure_class == "Timeout"
    assert failure.message == "the call passed its deadline (20 ms)"
    # the next call gets a new worker
    assert call_failure(sandbox, compiled, timeout_ms=20).failure_class == "Timeout"
    ok = sandbox.load(OK)
    assert sandbox.call(ok, "on_pod_create", b"", sandbox.limits()).response == b"\x80"


def test_a_loop_in_the_function_is_cancelled_in_the_worker(own: Callable[..., Sandbox]) -> None:
    """The worker's watchdog stops a guest looping in its own code at the deadline: a Timeout
    that costs no worker."""
    sandbox = own()
    loop = extism_guest(extism_function("on_pod_create", "(loop $l (br $l)) i32.const 0"))
    compiled = sandbox.load(loop)
    pids = sandbox.extism.pids()
    failure = call_failure(sandbox, compiled, fuel=2_000_000_000, timeout_ms=30)
    assert (failure.failure_class, failure.message) == (
        "Timeout",
        "the call passed its deadline (30 ms)",
    )
    assert sandbox.extism.pids() == pids


@pytest.mark.parametrize("guest", [start_spinning, initialize_spinning])
def test_an_endless_start_up_is_refused_at_load(
    own: Callable[..., Sandbox], guest: Callable[[int | None], bytes]
) -> None:
    sandbox = own(compile_timeout_ms=5000)
    outcome = finished(lambda: sandbox.load(guest(None)))
    assert isinstance(outcome, SandboxError), outcome
    assert (outcome.failure_class, outcome.message) == (
        "InvalidModule",
        "compiling the module with Extism and starting it (its start function and _initialize) "
        "took longer than 5000 ms (operator setting sandbox.compileTimeoutMs)",
    )
    ok = sandbox.load(OK)  # the sandbox goes on
    assert sandbox.call(ok, "on_pod_create", b"", sandbox.limits()).response == b"\x80"


@pytest.mark.parametrize(
    "text", ["oom", "plugin ran out of fuel", "timeout", "all fuel consumed by WebAssembly"]
)
def test_the_guest_cannot_choose_its_failure_class(sandbox: Sandbox, text: str) -> None:
    """A guest's error text is a PluginError with that text, whatever the text says."""
    failure = call_failure(sandbox, sandbox.load(erring(text.encode())), timeout_ms=50)
    assert (failure.failure_class, failure.message) == ("PluginError", text)


def test_a_long_guest_error_is_cut(sandbox: Sandbox) -> None:
    failure = call_failure(sandbox, sandbox.load(erring(b"x" * 3000)))
    assert failure.failure_class == "PluginError"
    assert failure.message == "x" * 1024 + "...[cut]"


def test_running_out_of_fuel_is_fuel_exhausted(sandbox: Sandbox) -> None:
    module = extism_guest(extism_function("on_pod_create", "(loop $l (br $l)) i32.const 0"))
    failure = call_failure(sandbox, sandbox.load(module), fuel=1_000_000)
    assert failure.failure_class == "FuelExhausted"
    assert failure.message == "the call ran out of fuel (1000000 units)"


def test_a_start_function_out_of_fuel_is_fuel_exhausted(sandbox: Sandbox) -> None:
    count = """(loop $l (local.set $n (i32.add (local.get $n) (i32.const 1)))
      (br_if $l (i32.lt_u (local.get $n) (i32.const 100000))))"""
    start = f"(start $count) (func $count (local $n i32) {count})"
    module = extism_guest(extism_function("on_pod_create", "i32.const 0"), extra=start)
    compiled = sandbox.load(module)  # within the default fuel
    failure = call_failure(sandbox, compiled, fuel=10_000)
    assert failure.failure_class == "FuelExhausted"
    assert failure.message == "the call ran out of fuel (10000 units)"


def test_growing_past_the_memory_limit_is_memory_limit(sandbox: Sandbox) -> None:
    grow = "(loop $l (br_if $l (i32.ne (memory.grow (i32.const 16)) (i32.const -1)))) i32.const 0"
    module = extism_guest(extism_function("on_pod_create", grow))
    failure = call_failure(sandbox, sandbox.load(module), memory_mib=4)
    assert failure.failure_class == "MemoryLimit"
    assert failure.message == f"the call hit its memory limit ({4 * 1024 * 1024} bytes)"


@pytest.mark.parametrize(
    "body", ["unreachable", "(drop (i32.div_u (i32.const 1) (i32.const 0))) i32.const 0"]
)
def test_a_trap_is_one_line_without_chain_numbering(sandbox: Sandbox, body: str) -> None:
    failure = call_failure(
        sandbox, sandbox.load(extism_guest(extism_function("on_pod_create", body)))
    )
    assert failure.failure_class == "Trap"
    assert failure.message.startswith("the module trapped at 0x")
    assert "\n" not in failure.message
    assert not re.search(r"(^|\s)\d+:\s", failure.message), failure.message


def test_a_wasi_exit_is_a_trap_naming_the_status(sandbox: Sandbox) -> None:
    """Also after the guest set an error: what the host saw wins over the guest's text."""
    exit_ = '(import "wasi_snapshot_preview1" "proc_exit" (func $exit (param i32)))'
    for body in [
        "(call $exit (i32.const 3)) i32.const 0",
        extism_copy_out(1024, 2) + "(call $error_set (local.get $out)) (call $exit (i32.const 3)) "
        "i32.const 1",
    ]:
        module = extism_guest(extism_function("on_pod_create", body), data=b"hi", extra=exit_)
        failure = call_failure(sandbox, sandbox.load(module))
        assert (failure.failure_class, failure.message) == (
            "Trap",
            "the module exited (WASI proc_exit with status 3)",
        )


def test_the_guest_cannot_write_an_error_into_extisms_kernel(sandbox: Sandbox) -> None:
    """store_u64 over the start of the kernel's memory, where Extism keeps its error offset,
    with the offset of an "oom" block: Extism ignores stores there."""
    store = '(import "extism:host/env" "store_u64" (func $store_u64 (param i64 i64)))'
    body = (
        extism_copy_out(1024, 3)
        + """
      (local.set $i (i32.const 0))
      (block $done (loop $again
        (br_if $done (i32.ge_u (local.get $i) (i32.const 4096)))
        (call $store_u64 (i64.extend_i32_u (local.get $i)) (local.get $out))
        (local.set $i (i32.add (local.get $i) (i32.const 8)))
        (br $again)))
      i32.const 1"""
    )
    module = extism_guest(extism_function("on_pod_create", body), data=b"oom", extra=store)
    failure = call_failure(sandbox, sandbox.load(module))
    assert (failure.failure_class, failure.message) == (
        "PluginError",
        "the Extism function returned status 1",
    )


def test_a_start_function_trap_is_one_line(sandbox: Sandbox) -> None:
    trap = "(start $trap) (func $trap unreachable)"
    module = extism_guest(extism_function("on_pod_create", "i32.const 0"), extra=trap)
    with pytest.raises(SandboxError) as info:
        sandbox.load(module)
    assert info.value.failure_class == "InvalidModule"
    assert info.value.message == (
        "Extism cannot link the module: wasm trap: wasm `unreachable` instruction executed"
    )


def test_the_compiled_plugins_are_a_bounded_lru(own: Callable[..., Sandbox]) -> None:
    """Each distinct fuel or memory limit is a compiled plugin; the worker keeps only the newest
    few."""
    sandbox = own(extism_compiled_plugins=3)
    compiled = sandbox.load(OK)
    for fuel in range(1_000_000, 1_000_020):
        result = sandbox.call(compiled, "on_pod_create", b"", sandbox.limits(fuel=fuel))
        assert result.response == b"\x80"
    assert sandbox.extism.stats() == [{"compiled": 3}]
    for timeout_ms in range(100, 110):  # the deadline is not compiled in
        limits = sandbox.limits(fuel=1_000_019, timeout_ms=timeout_ms)
        assert sandbox.call(compiled, "on_pod_create", b"", limits).response == b"\x80"
    assert sandbox.extism.stats() == [{"compiled": 3}]
    others = [sandbox.load(erring(f"module {i}".encode())) for i in range(5)]
    assert sandbox.extism.stats() == [{"compiled": 3}]
    # a module the worker forgot is given to it again
    assert call_failure(sandbox, others[0]).message == "module 0"
    assert sandbox.call(compiled, "on_pod_create", b"", sandbox.limits()).response == b"\x80"


def test_a_response_over_the_limit_is_invalid(own: Callable[..., Sandbox]) -> None:
    sandbox = own(max_response_bytes=8)
    failure = call_failure(sandbox, sandbox.load(extism_responding(b"\x81\xa1a" + b"\xa5" * 10)))
    assert failure.failure_class == "InvalidResponse"
    assert failure.message == "the response is 13 bytes; the limit is 8"


def test_a_killed_call_leaves_only_the_current_worker(
    own: Callable[..., Sandbox], worker_copy: str
) -> None:
    sandbox = own()
    slow = sandbox.load(start_spinning(FINITE))
    first = sandbox.extism.pids()
    assert [pid for pid, _ in mentioning(worker_copy)] == first
    assert call_failure(sandbox, slow, timeout_ms=20).failure_class == "Timeout"
    assert sandbox.extism.pids() == []
    assert mentioning(worker_copy) == []  # killed and reaped
    ok = sandbox.load(OK)
    assert sandbox.call(ok, "on_pod_create", b"", sandbox.limits()).response == b"\x80"
    current = sandbox.extism.pids()
    assert len(current) == 1 and current != first
    assert [pid for pid, _ in mentioning(worker_copy)] == current
    sandbox.close()
    assert wait_until_gone(worker_copy) == []


def test_a_collected_sandbox_leaves_no_worker(tmp_path: Path, worker_copy: str) -> None:
    sandbox = plugin_sandbox(SandboxSettings(cache_dir=tmp_path / "cache"))
    sandbox.call(sandbox.load(OK), "on_pod_create", b"", sandbox.limits())
    assert len(mentioning(worker_copy)) == 1
    del sandbox
    gc.collect()
    assert wait_until_gone(worker_copy) == []


def test_a_dead_worker_fails_the_call_and_is_replaced(
    own: Callable[..., Sandbox], worker_copy: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A worker that dies during a call (here: SIGKILLed as the call is sent, as the kernel's
    OOM killer would) fails that call with its exit status; the next call gets a new worker.
    (Killed after the call was sent, a worker that already holds the compiled plugin could
    answer first on a busy machine.)"""
    sandbox = own()
    ok = sandbox.load(OK)
    send = extism_call._Process.send

    def kill_and_send(process: Any, header: dict[str, Any], payload: bytes = b"") -> None:
        if header["op"] == "run":
            os.kill(process.pid, signal.SIGKILL)
            process.popen.wait(10)
        send(process, header, payload)

    monkeypatch.setattr(extism_call._Process, "send", kill_and_send)
    failure = call_failure(sandbox, ok)
    monkeypatch.setattr(extism_call._Process, "send", send)
    assert (failure.failure_class, failure.message) == (
        "Trap",
        "the Extism worker ended during the call (signal SIGKILL)",
    )
    assert sandbox.call(ok, "on_pod_create", b"", sandbox.limits()).response == b"\x80"
    assert [pid for pid, _ in mentioning(worker_copy)] == sandbox.extism.pids()


@pytest.mark.parametrize("ending", ["exit", "sigkill"])
def test_no_worker_outlives_the_controller_process(
    tmp_path: Path, worker_copy: str, ending: str
) -> None:
    """Neither a controller that exits without cleaning up nor one that is killed leaves a
    worker, even the pool's two workers busy in endless start-ups (here: the loads of such
    modules)."""
    script = textwrap.dedent(
        """
        import os, sys, threading, time
        from pathlib import Path
        from modelserving.plugins.exports import plugin_sandbox
        from modelserving.sandbox import SandboxSettings
        from modelserving.sandbox.extism import call as extism_call
        from tests.wasm.test_extism_bounds import OK, initialize_spinning, start_spinning

        extism_call._WORKER = Path(os.environ["TEST_EXTISM_WORKER"])
        sandbox = plugin_sandbox(SandboxSettings(cache_dir=Path(os.environ["TEST_CACHE"])))
        sandbox.call(sandbox.load(OK), "on_pod_create", b"", sandbox.limits())
        for spinning in (start_spinning, initialize_spinning):
            threading.Thread(target=sandbox.load, args=(spinning(None),), daemon=True).start()
        while len(sandbox.extism.pids()) < 2:
            time.sleep(0.05)
        time.sleep(1)  # compiled by now, and starting
        print("busy", flush=True)
        sys.stdin.read()
        os._exit(0)
        """
    )
    child = subprocess.Popen(
        [sys.executable, "-c", script],
        cwd=REPO,
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        env={
            **os.environ,
            "PYTHONPATH": f"{REPO}{os.pathsep}{REPO / 'host'}",
            "TEST_EXTISM_WORKER": str(Path(worker_copy) / "worker.py"),
            "TEST_CACHE": str(tmp_path / "cache"),
        },
    )
    assert child.stdout is not None and child.stdin is not None
    try:
        assert child.stdout.readline() == b"busy\n"
        assert len(mentioning(worker_copy)) == 2
        if ending == "exit":
            child.stdin.close()
        else:
            child.kill()
        child.wait(timeout=60)
    finally:
        child.kill()
        child.wait()
        child.stdin.close()
        child.stdout.close()
    assert wait_until_gone(worker_copy) == []


def test_extism_writes_no_wasmtime_cache(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, own: Callable[..., Sandbox]
) -> None:
    home = tmp_path / "home"
    home.mkdir()
    monkeypatch.setenv("HOME", str(home))
    monkeypatch.setenv("XDG_CACHE_HOME", str(home / ".cache"))
    monkeypatch.setenv("EXTISM_CACHE_CONFIG", str(home / "not-used.toml"))
    sandbox = own()
    sandbox.call(sandbox.load(OK), "on_pod_create", b"", sandbox.limits())
    assert list(home.rglob("*")) == []


def test_a_table_grows_no_further_than_the_store_limit(own: Callable[..., Sandbox]) -> None:
    """Extism's limiter lets a table declared without a maximum grow without bound (one
    table.grow of 250 million elements took 2 GB of the worker's memory under a 4 MiB memory
    limit): the host caps each table at ``max_table_elements``, as the native flavour's store
    limit does, so growing past it gives -1."""
    sandbox = own(max_table_elements=1000)
    grow = """
      (if (i32.ne (table.grow $t (ref.null func) (i32.const 999)) (i32.const 1))
        (then unreachable))
      (if (i32.ne (table.grow $t (ref.null func) (i32.const 1)) (i32.const -1))
        (then unreachable))
      (if (i32.ne (table.grow $u (ref.null func) (i32.const 2000000)) (i32.const -1))
        (then unreachable))"""
    body = (
        extism_copy_out(1024, 1)
        + grow
        + ("(call $output_set (local.get $out) (i64.const 1)) i32.const 0")
    )
    tables = "(table $t 1 funcref) (table $u 1 4000000000 funcref)"
    module = extism_guest(extism_function("on_pod_create", body), data=b"\x80", extra=tables)
    compiled = sandbox.load(module)
    assert sandbox.call(compiled, "on_pod_create", b"", sandbox.limits()).response == b"\x80"


def test_memory_grown_at_start_up_counts_toward_the_most_an_instance_holds(
    own: Callable[..., Sandbox],
) -> None:
    """Extism counts a memory's growth from after the instance was made, so what a start
    function grew came on top of the call's limit (a 64 MiB limit held 128 MiB): the host caps
    the memory's maximum at ``max_memory_mib``, so no instance holds more, however it grew."""
    sandbox = own(default_memory_mib=4, max_memory_mib=4)
    start = "(start $s) (func $s (drop (memory.grow (i32.const 60))))"  # 61 of 64 pages
    grow = """
      (if (i32.ne (memory.grow (i32.const 3)) (i32.const 61)) (then unreachable))
      (drop (memory.grow (i32.const 1)))"""
    body = grow + "(call $output_set (i64.const 0) (i64.const 0)) i32.const 0"
    module = extism_guest(extism_function("on_pod_create", body), extra=start)
    failure = call_failure(sandbox, sandbox.load(module))
    assert failure.failure_class == "MemoryLimit"
    # exactly the limit is still within it
    within = extism_guest(
        extism_function("on_pod_create", grow.rsplit("(drop", 1)[0] + "i32.const 0"), extra=start
    )
    outcome = sandbox.call(sandbox.load(within), "on_pod_create", b"", sandbox.limits())
    assert outcome.response == b""


@pytest.mark.parametrize(
    ("declared", "expected"),
    [
        ("1", b"\x01\x01\x01\x41"),  # no maximum: the cap
        ("1 8", None),  # below the cap: unchanged
        ("1 65536", b"\x01\x01\x01\x41"),  # above it: the cap
        ("100 200", b"\x01\x01\x64\x64"),  # a minimum above the cap: no growth at all
    ],
)
def test_cap_growth_sets_the_memory_maximum(declared: str, expected: bytes | None) -> None:
    module = bytes(wasmtime.wat2wasm(f"(module (memory {declared}) (table 2 funcref))"))
    capped = cap_growth(module, 10, 65)
    assert capped != module
    memory = _section(capped, 5)
    assert memory == (expected if expected is not None else _section(module, 5))
    assert _section(capped, 4) == b"\x01\x70\x01\x02\x0a"  # the table's cap too
    wasmtime.Module.validate(wasmtime.Engine(), capped)


def _section(module: bytes, wanted: int) -> bytes:
    """The body of ``module``'s section ``wanted`` (small sections: one-byte sizes)."""
    pos = 8
    while pos < len(module):
        sid, size = module[pos], module[pos + 1]
        if sid == wanted:
            return module[pos + 2 : pos + 2 + size]
        pos += 2 + size
    raise AssertionError(f"no section {wanted}")
