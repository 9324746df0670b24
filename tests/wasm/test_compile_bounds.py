"""Compiling is bounded: a module's shape is checked against the operator's module limits before
anything compiles it, and compilation itself runs in a worker process under a deadline and a
memory cap. Every refusal is InvalidModule naming the setting and the module's figure."""

from __future__ import annotations

import dataclasses
import gc
import gzip
import json
import os
import signal
import subprocess
import sys
import threading
import time
import tracemalloc
from pathlib import Path

import pytest
import wasmtime

from modelserving.api.errors import FailureClass
from modelserving.frames import frame
from modelserving.plugins.exports import plugin_sandbox
from modelserving.sandbox import (
    Sandbox,
    SandboxError,
    SandboxSettings,
    cache,
    compile_worker,
    compiler,
)
from modelserving.sandbox.compiler import _Spare, cpu_seconds
from modelserving.sandbox.errors import MAX_MESSAGE
from modelserving.sandbox.settings import ModuleBounds
from tests.processes import mentioning
from tests.wasm.guests import MIRROR, responding
from tests.wasm.modules import HEADER, leb, many_functions, one_megabyte_bomb, section

SMALL = ModuleBounds(
    max_functions=20,
    max_function_body_bytes=200,
    max_code_bytes=2_000,
    max_locals_per_function=50,
    max_local_declarations=8,
    max_types=10,
    max_imports=3,
    max_exports=12,
    max_globals=5,
    max_tables=1,
    max_table_elements=100,
    max_data_segments=4,
    max_data_bytes=1_000,
    max_element_segments=3,
    max_element_section_bytes=400,
)


def _sandbox(**changes: object) -> Sandbox:
    return plugin_sandbox(dataclasses.replace(SandboxSettings(cache_dir=None), **changes))  # type: ignore[arg-type]


def _refusal(sandbox: Sandbox, data: bytes) -> str:
    with pytest.raises(SandboxError) as caught:
        sandbox.load(data)
    assert caught.value.failure_class is FailureClass.INVALID_MODULE
    return caught.value.message


@pytest.fixture
def blamed(monkeypatch: pytest.MonkeyPatch) -> None:
    """A late worker is blamed whatever CPU time it had: for the tests of what a late compile
    does, on a machine whose other work may starve the worker."""
    monkeypatch.setattr(compiler, "_STARVED_SHARE", 0.0)


def _wat(*fields: str) -> bytes:
    return bytes(wasmtime.wat2wasm("(module\n" + "\n".join(fields) + "\n)"))


def test_the_one_megabyte_bomb_is_refused_by_its_shape_before_any_compile() -> None:
    data = one_megabyte_bomb()
    assert len(data) > 750_000 and len(gzip.compress(data)) < 4_000
    sandbox = _sandbox()
    message = _refusal(sandbox, data)
    assert message == (
        "the module has 150000 functions; the limit is 30000 "
        "(operator setting sandbox.moduleLimits.maxFunctions)"
    )
    assert sandbox.modules.stats.compiled == 0


_PLAIN = ('(memory (export "memory") 1)',)


# One module per bound, over it by a little; each refusal names its setting and the figure.
OVER = {
    "maxFunctions": (_wat(*["(func)"] * 21), "21 functions"),
    "maxFunctionBodyBytes": (_wat("(func " + "nop " * 300 + ")"), "bytes in one function body"),
    "maxCodeBytes": (
        _wat(*["(func " + "nop " * 150 + ")"] * 15),
        "bytes of code",
    ),
    "maxLocalsPerFunction": (_wat("(func " + "(local i32) " * 51 + ")"), "51 locals"),
    "maxLocalDeclarations": (
        _wat(*["(func (local i32) (local i64) (local i32))"] * 3),
        "9 local declarations",
    ),
    "maxTypes": (
        _wat(*[f"(type (func (param {' '.join(['i32'] * n)})))" for n in range(11)]),
        "11 types",
    ),
    "maxImports": (
        _wat(
            *[f'(import "modelserving" "log" (func $l{n} (param i32 i32 i32)))' for n in range(4)]
        ),
        "4 imports",
    ),
    "maxExports": (_wat(*[f'(func (export "f{n}"))' for n in range(13)]), "13 exports"),
    "maxGlobals": (_wat(*["(global i32 (i32.const 0))"] * 6), "6 globals"),
    "maxTables": (_wat("(table 1 funcref)", "(table 1 funcref)"), "2 tables"),
    "maxTableElements": (_wat("(table 101 funcref)"), "101 initial elements"),
    "maxDataSegments": (_wat(*_PLAIN, *['(data (i32.const 0) "a")'] * 5), "5 data segments"),
    "maxDataBytes": (_wat(*_PLAIN, '(data (i32.const 0) "' + "a" * 1001 + '")'), "data segments"),
    "maxElementSegments": (
        _wat("(table 10 funcref)", "(func $f)", *["(elem (i32.const 0) $f)"] * 4),
        "4 element segments",
    ),
    "maxElementSectionBytes": (
        _wat("(table 100 funcref)", "(func $f)", "(elem (i32.const 0) " + "$f " * 450 + ")"),
        "bytes of element segments",
    ),
}


@pytest.mark.parametrize("setting", sorted(OVER))
def test_each_module_limit_refuses_a_module_over_it(setting: str) -> None:
    data, figure = OVER[setting]
    message = _refusal(_sandbox(module_bounds=SMALL), data)
    assert f"(operator setting sandbox.moduleLimits.{setting})" in message
    assert figure in message and "the limit is" in message


@pytest.mark.parametrize("setting", sorted(OVER))
def test_a_module_at_the_default_limits_is_not_refused_by_its_shape(setting: str) -> None:
    """The same modules are within the default limits: they fail later (no ABI marker), not at
    the shape check, so every SMALL limit above is what refused them."""
    data, _ = OVER[setting]
    assert "moduleLimits" not in _refusal(_sandbox(), data)


@pytest.mark.parametrize(
    ("data", "words"),
    [
        pytest.param(HEADER + b"\x01\x80", "malformed type section", id="cut-size"),
        pytest.param(HEADER + section(10, leb(5)), "malformed code section", id="short-vector"),
        pytest.param(HEADER + b"\x0a\x10\x01", "code section: it runs past the end", id="past-end"),
        pytest.param(HEADER + section(42, b""), "unknown section id 42", id="unknown-id"),
        pytest.param(
            HEADER + section(1, b"\xff\xff\xff\xff\xff\x01"), "integer", id="overlong-leb"
        ),
        pytest.param(b"\0asm\x0d\0\x01\0", "unsupported binary version", id="component"),
    ],
)
def test_broken_framing_is_refused_before_compiling(data: bytes, words: str) -> None:
    sandbox = _sandbox()
    assert words in _refusal(sandbox, data)
    assert sandbox.modules.stats.compiled == 0


# Typed reference types (0x63 / 0x64) carry a heap type after their first byte: read as one
# byte, they shifted the count of what followed (49,001 locals were counted as 113).
_TYPED_REF = b"\x63\x70"  # (ref null func)


def _one_function(body: bytes) -> bytes:
    return (
        HEADER
        + section(1, b"\x01\x60\x00\x00")
        + section(3, b"\x01\x00")
        + section(10, b"\x01" + leb(len(body)) + body)
    )


@pytest.mark.parametrize(
    "data",
    [
        # locals: 1 (ref null func), then 51 i32; an empty body
        _one_function(b"\x02\x01" + _TYPED_REF + b"\x33\x7f\x0b"),
        # tables: a (ref null func) table of 1 element, then a funcref table of 101
        HEADER + section(4, b"\x02" + _TYPED_REF + b"\x00\x01" + b"\x70\x00\x65"),
    ],
    ids=["locals", "tables"],
)
def test_typed_reference_types_do_not_hide_what_follows_them(data: bytes) -> None:
    bounds = dataclasses.replace(SMALL, max_tables=2)
    message = _refusal(_sandbox(module_bounds=bounds), data)
    assert "52 locals" in message or "101 initial elements" in message


def _declarations_of_nothing(functions: int, declarations: int) -> bytes:
    """``functions`` functions, each declaring ``declarations`` times no i32 (valid, and two
    bytes each: the locals' bound never sees them)."""
    body = leb(declarations) + b"\x00\x7f" * declarations + b"\x0b"
    entry = leb(len(body)) + body
    return (
        HEADER
        + section(1, b"\x01\x60\x00\x00")
        + section(3, leb(functions) + b"\x00" * functions)
        + section(10, leb(functions) + entry * functions)
    )


def test_declarations_of_no_locals_are_counted_before_they_are_read() -> None:
    """Found by a red-team helper: 16 MiB of declarations of no locals (17 KB gzipped) took
    about 4 s of the controller's CPU to read, each new digest again, before any worker."""
    data = _declarations_of_nothing(4, 200_000)
    assert len(data) > 1_600_000
    sandbox = _sandbox()
    assert _refusal(sandbox, data) == (
        "the module has 200000 local declarations; the limit is 100000 "
        "(operator setting sandbox.moduleLimits.maxLocalDeclarations)"
    )
    assert sandbox.modules.stats.compiled == 0
    # counted across the module: each function alone is within the bound
    spread = _declarations_of_nothing(3, 40_000)
    assert "120000 local declarations" in _refusal(_sandbox(), spread)


def test_a_module_of_many_memories_is_refused_at_its_memory_section() -> None:
    """Found by a red-team helper: 8 million memory entries (33 KB gzipped) were each read
    before the engine refused the second."""
    count = 1_000_000
    data = HEADER + section(5, leb(count) + b"\x00\x01" * count)
    sandbox = _sandbox()
    assert _refusal(sandbox, data) == (
        "the module declares 1000000 memories; a plugin has at most one"
    )
    assert sandbox.modules.stats.compiled == 0


def test_custom_sections_are_bounded_and_other_sections_come_once() -> None:
    """Found while fixing the above: two million empty custom sections (6 MB, a few KB
    gzipped) took 2.7 s of the controller's CPU to walk; a section repeated spread its figures
    (each code section's functions checked against the bound alone)."""
    within = HEADER + section(0, b"\x01a") * 1_000
    assert "custom sections" not in _refusal(_sandbox(), within)  # compiled, no ABI marker
    sandbox = _sandbox()
    many = HEADER + section(0, b"\x01a") * 2_000_000
    assert _refusal(sandbox, many) == "the module has more than 1000 custom sections"
    twice = HEADER + section(1, b"\x01\x60\x00\x00") * 2
    assert "malformed type section: it comes twice" in _refusal(sandbox, twice)
    code = many_functions(20_000)
    doubled = code + code[len(HEADER) :]  # 40,000 functions in two code sections
    assert "it comes twice" in _refusal(sandbox, doubled)
    assert sandbox.modules.stats.compiled == 0


def test_a_refusal_is_remembered_without_the_modules_bytes() -> None:
    """Found by a red-team helper: the remembered refusal kept its traceback, whose frames held
    the module's bytes (30 MB modules refused one after another grew the controller by 30 MB
    each, for good). Nor does the plugin's error keep them once raised."""
    sandbox = _sandbox()
    tracemalloc.start()
    try:
        for n in range(3):
            data = HEADER + section(0, b"\x03pad" + bytes([n]) * 4_000_000)  # no ABI marker
            assert "no ABI marker" in _refusal(sandbox, data)
            del data
        gc.collect()
        held, _ = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    assert held < 1_000_000, held
    assert len(sandbox.modules._refused) == 3


def test_a_refusal_that_quotes_the_module_is_cut() -> None:
    """9,990 export names like ABI markers, 3 KB each, made a refusal of 30 million characters
    (found by a red-team helper); every sandbox message is at most MAX_MESSAGE characters."""
    names = [f'(func (export "modelserving_abi_v9_{n}_{"x" * 300}"))' for n in range(40)]
    message = _refusal(_sandbox(), _wat(*names))
    assert message.startswith("unsupported ABI: the module exports modelserving_abi_v9_0_x")
    assert len(message) == MAX_MESSAGE and message.endswith(" more characters)")


def test_the_shape_check_agrees_with_the_compiler_on_valid_modules() -> None:
    """Modules the engine compiles are measured without a framing complaint: the ABI check is
    what refuses them, with its own words."""
    for data in (
        _wat(*["(func (local i64 f32) nop)"] * 5, "(table 3 funcref)", *_PLAIN),
        _wat(*_PLAIN, '(data (i32.const 8) "xyz")', "(global (mut i32) (i32.const 1))"),
        many_functions(300),
    ):
        assert "no ABI marker" in _refusal(_sandbox(), data)


@pytest.mark.usefixtures("blamed")
def test_a_module_that_compiles_too_slowly_is_refused_and_its_worker_killed() -> None:
    bounds = dataclasses.replace(ModuleBounds(), max_functions=200_000)
    sandbox = _sandbox(module_bounds=bounds, compile_timeout_ms=200)
    message = _refusal(sandbox, many_functions(100_000, b"\x01\x01\x0b"))
    assert message == (
        "compiling the module took longer than 200 ms (operator setting sandbox.compileTimeoutMs)"
    )
    _assert_only_the_spare_worker_left()


def test_a_module_that_needs_too_much_memory_to_compile_is_refused() -> None:
    bounds = dataclasses.replace(ModuleBounds(), max_functions=200_000)
    sandbox = _sandbox(module_bounds=bounds, compile_memory_mib=16)
    message = _refusal(sandbox, many_functions(60_000))
    assert message == (
        "compiling the module needed more than 16 MiB (operator setting sandbox.compileMemoryMiB)"
    )
    _assert_only_the_spare_worker_left()


GO_MODULE = Path(__file__).resolve().parents[2] / "examples" / "wasm" / "go-demo-pod-tweaks.wasm"


@pytest.mark.parametrize(
    ("module", "mib"),
    [
        *(("functions", mib) for mib in (8, 16, 32)),
        # 2 MB of standard Go: at these caps the artifact's buffer is what is refused
        *(("go", mib) for mib in (13, 14, 15)),
    ],
)
def test_every_refused_allocation_is_reported_as_the_memory_limit(module: str, mib: int) -> None:
    """Whichever allocation the cap refuses (a compiler thread's, the artifact's buffer), the
    module compiles or is refused for the memory setting, at once: never as "does not
    compile", never by the deadline."""
    bounds = dataclasses.replace(ModuleBounds(), max_functions=200_000)
    sandbox = _sandbox(module_bounds=bounds, compile_memory_mib=mib, compile_timeout_ms=60_000)
    started = time.monotonic()
    data = many_functions(20_000) if module == "functions" else GO_MODULE.read_bytes()
    failure: SandboxError | None = None
    try:
        sandbox.load(data)
    except SandboxError as error:
        failure = error
    assert time.monotonic() - started < 30
    assert failure is None or failure.failure_class is FailureClass.INVALID_MODULE
    message = "loaded" if failure is None else failure.message
    # compiled (the functions then refused for their missing exports), or refused for memory
    assert (
        message == "loaded"
        or message.startswith("no ABI marker")
        or message
        == (
            f"compiling the module needed more than {mib} MiB "
            "(operator setting sandbox.compileMemoryMiB)"
        )
    )
    _assert_only_the_spare_worker_left()


def test_a_module_the_compiler_refuses_keeps_the_compilers_cause() -> None:
    """A body of a well-framed module holds an opcode that does not exist: only the compiler
    finds it, and its report arrives on one line without wasmtime's chain numbering."""
    message = _refusal(_sandbox(), HEADER + section(10, leb(1) + leb(2) + b"\x00\xff"))
    assert message.startswith("the module does not compile: ")
    assert "\n" not in message and not message.split(": ", 1)[1][:1].isdigit()


def test_a_module_within_the_limits_still_loads_and_runs(request_bytes: bytes) -> None:
    sandbox = _sandbox()
    compiled = sandbox.load(responding(b"\x80"))
    assert sandbox.modules.stats.compiled == 1
    result = sandbox.call(compiled, "ms_on_pod_create", request_bytes, sandbox.limits())
    assert result.response == b"\x80"


def test_a_stack_size_other_than_the_warm_engines_gets_an_engine_of_its_own(
    request_bytes: bytes,
) -> None:
    sandbox = plugin_sandbox(SandboxSettings(cache_dir=None, max_wasm_stack_bytes=256 * 1024))
    compiled = sandbox.load(responding(b"\x80"))
    result = sandbox.call(compiled, "ms_on_pod_create", request_bytes, sandbox.limits())
    assert result.response == b"\x80"


def test_the_worker_ends_right_after_its_reply(tmp_path: Path) -> None:
    """No interpreter shutdown after the reply (the controller would wait for it): an exit
    handler registered before the worker runs is never called, and the reply is complete."""
    flag = tmp_path / "shutdown-ran"
    script = (
        "import atexit, runpy, sys\n"
        f"atexit.register(lambda: open({str(flag)!r}, 'w').close())\n"
        f"sys.argv = ['compile_worker', sys.argv[1]]\n"
        f"runpy.run_path({compile_worker.__file__!r}, run_name='__main__')\n"
    )
    module = responding(b"\x80")
    params = json.dumps(
        {"stack": 512 * 1024, "memory": 512 * 1024 * 1024, "moduleBytes": len(module)}
    )
    worker = subprocess.run(
        [sys.executable, "-c", script, str(os.getpid())],
        input=frame(params.encode()) + frame(module),
        capture_output=True,
        timeout=60,
    )
    assert worker.returncode == 0, worker.stderr
    reply = worker.stdout
    assert reply[:1] == compile_worker.OK
    assert int.from_bytes(reply[1:5], "big") == len(reply) - 5 > 0
    assert not flag.exists()


def test_the_compiled_module_is_kept_on_disk_and_reloaded_without_a_worker(
    tmp_path: Path,
) -> None:
    first = plugin_sandbox(SandboxSettings(cache_dir=tmp_path))
    first.load(MIRROR)
    again = plugin_sandbox(SandboxSettings(cache_dir=tmp_path))
    again.load(MIRROR)
    assert (first.modules.stats.compiled, again.modules.stats.compiled) == (1, 0)
    assert again.modules.stats.disk_hits == 1


def _assert_only_the_spare_worker_left() -> None:
    # Workers of this process only (their last argument is their parent's pid): other test runs
    # may be compiling on the same machine.
    workers = _workers_of(str(os.getpid()))
    spare = _Spare.worker.pid if _Spare.worker is not None else None
    assert [pid for pid in workers if pid != spare] == []


def test_a_worker_started_by_a_thread_that_ended_still_compiles() -> None:
    """The waiting worker is started by whichever thread compiled last; it must outlive that
    thread (loads run on the controller's executor threads)."""
    sandbox = _sandbox()
    loader = threading.Thread(target=sandbox.load, args=(responding(b"\x81"),))
    loader.start()
    loader.join(60)
    assert not loader.is_alive()
    assert sandbox.load(responding(b"\x82")).info.entrypoints  # by the worker that thread started


def test_no_worker_outlives_its_controller(tmp_path: Path) -> None:
    script = (
        "import os\n"
        "from modelserving.plugins.exports import plugin_sandbox\n"
        "from modelserving.sandbox import SandboxSettings\n"
        "from tests.wasm.guests import responding\n"
        "plugin_sandbox(SandboxSettings(cache_dir=None)).load(responding(b'\\x80'))\n"
        "print(os.getpid(), flush=True)\n"
        "os._exit(0)\n"  # no atexit: the waiting worker must notice on its own
    )
    child = subprocess.run(
        [sys.executable, "-c", script], capture_output=True, text=True, timeout=120, check=True
    )
    pid = child.stdout.strip()
    deadline = time.monotonic() + 30
    while (left := _workers_of(pid)) and time.monotonic() < deadline:
        time.sleep(0.05)
    assert left == []


def _workers_of(pid: str) -> list[int]:
    return [found for found, argv in mentioning("compile_worker.py") if argv[-1] == pid]


# --- what a refused module costs later, and who waits for a worker --------------------------------


def test_a_refused_module_is_compiled_once_per_period_however_often_it_is_loaded() -> None:
    sandbox = _sandbox()
    now = [1000.0]
    sandbox.modules._clock = lambda: now[0]
    unmarked = many_functions(5)  # compiles, then the ABI check refuses it
    first = _refusal(sandbox, unmarked)
    for _ in range(3):
        assert _refusal(sandbox, unmarked) == first
    assert sandbox.modules.stats.compiled == 1
    now[0] += cache.REFUSAL_TTL_S
    assert _refusal(sandbox, unmarked) == first
    assert sandbox.modules.stats.compiled == 2


def test_loads_of_one_module_at_once_compile_it_once() -> None:
    sandbox = _sandbox()
    data = many_functions(3_000)
    errors: list[str] = []

    def load() -> None:
        try:
            sandbox.load(data)
        except SandboxError as error:
            errors.append(error.message)

    threads = [threading.Thread(target=load) for _ in range(4)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(60)
    assert len(errors) == 4 and len(set(errors)) == 1  # the same refusal for each
    assert sandbox.modules.stats.compiled == 1


def test_a_load_waits_for_a_compile_worker_at_most_the_compile_deadline() -> None:
    sandbox = _sandbox(compile_workers=1, compile_timeout_ms=300)
    slots = sandbox.modules._compiler._slots
    assert slots.acquire(timeout=5)  # the only worker, busy with someone else's module
    try:
        with pytest.raises(SandboxError) as busy:
            sandbox.load(responding(b"\x80"))
    finally:
        slots.release()
    assert busy.value.failure_class is FailureClass.TIMEOUT
    assert busy.value.message == (
        "all 1 compile workers stayed busy for 300 ms (operator setting "
        "sandbox.compileWorkers); the module was not compiled"
    )
    sandbox.load(responding(b"\x80"))  # not remembered: the host was busy, not the module bad


@pytest.mark.usefixtures("blamed")
def test_a_compile_late_beside_another_is_not_remembered_one_late_alone_is() -> None:
    """Passing the deadline while another compile ran may be the busy host's fault: such a
    refusal is not remembered; a compile late on its own is."""
    bounds = dataclasses.replace(ModuleBounds(), max_functions=200_000)
    sandbox = _sandbox(module_bounds=bounds, compile_timeout_ms=1_000)
    slow = [many_functions(count, b"\x01\x01\x0b") for count in (100_000, 100_001)]
    compiler = sandbox.modules._compiler
    first = threading.Thread(target=_refusal, args=(sandbox, slow[0]))
    first.start()
    while compiler._running == 0:  # the first compile is under way
        time.sleep(0.005)
    _refusal(sandbox, slow[1])
    first.join(30)
    assert not sandbox.modules._refused  # both overlapped: neither is remembered
    assert _refusal(sandbox, slow[0]).startswith("compiling the module took longer than")
    assert list(sandbox.modules._refused) == [cache.sha256_hex(slow[0])]  # alone: remembered


def test_a_compile_late_because_its_worker_was_starved_is_not_remembered(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """A worker that got less than half the deadline in CPU time (here: stopped mid-compile, as
    a host busy with other work would starve it) is not the module's fault: the refusal says
    so and is not remembered, and the next load compiles again."""
    bounds = dataclasses.replace(ModuleBounds(), max_functions=200_000)
    sandbox = _sandbox(module_bounds=bounds, compile_timeout_ms=2_000)
    slow = many_functions(100_000, b"\x01\x01\x0b")
    _Spare.refill()
    assert _Spare.worker is not None
    worker = _Spare.worker.pid  # the worker the load takes
    before = cpu_seconds(worker)
    messages: list[str] = []
    loader = threading.Thread(target=lambda: messages.append(_refusal(sandbox, slow)))
    loader.start()
    while cpu_seconds(worker) < before + 0.1:  # reading the module, compiling
        time.sleep(0.005)
    os.kill(worker, signal.SIGSTOP)
    loader.join(30)
    assert len(messages) == 1 and messages[0].endswith(
        "the host was busy, and a later load tries again"
    )
    assert not sandbox.modules._refused
    monkeypatch.setattr(compiler, "_STARVED_SHARE", 0.0)
    _refusal(sandbox, slow)  # compiled again, late, and this time blamed
    assert list(sandbox.modules._refused) == [cache.sha256_hex(slow)]
    _assert_only_the_spare_worker_left()


def test_a_worker_too_stopped_to_read_its_input_cannot_hold_the_load() -> None:
    """The module goes to the worker under the compile deadline too: a worker that never reads
    it (stopped before the load, the module larger than a pipe holds) costs the load the
    deadline, not forever, and is no refusal of the module's."""
    sandbox = _sandbox(compile_timeout_ms=2_000)
    padding = b"\x07padding" + b"\0" * (1 << 18)
    module = responding(b"\x80") + section(0, padding)  # a custom section, not compiled
    assert len(module) > 1 << 17  # more than the pipe takes without a reader
    _Spare.refill()
    assert _Spare.worker is not None
    os.kill(_Spare.worker.pid, signal.SIGSTOP)
    messages: list[str] = []
    loader = threading.Thread(target=lambda: messages.append(_refusal(sandbox, module)))
    loader.start()
    loader.join(30)
    assert not loader.is_alive()
    assert messages[0].endswith("the host was busy, and a later load tries again")
    assert not sandbox.modules._refused
    sandbox.load(module)  # the next worker compiles it
    _assert_only_the_spare_worker_left()


def test_a_starved_refusal_names_the_cpu_time_its_worker_had(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    bounds = dataclasses.replace(ModuleBounds(), max_functions=200_000)
    sandbox = _sandbox(module_bounds=bounds, compile_timeout_ms=300)
    monkeypatch.setattr(compiler, "_STARVED_SHARE", 1e9)  # any CPU time is too little
    with pytest.raises(SandboxError) as caught:
        sandbox.load(many_functions(100_000, b"\x01\x01\x0b"))
    assert caught.value.contended and caught.value.failure_class is FailureClass.INVALID_MODULE
    head, tail = caught.value.message.split("; ", 1)
    assert head == (
        "compiling the module took longer than 300 ms (operator setting sandbox.compileTimeoutMs)"
    )
    assert tail.startswith("the compile worker had only ") and tail.endswith(
        " ms of CPU time in it: the host was busy, and a later load tries again"
    )
    assert not sandbox.modules._refused


def test_cpu_seconds_grows_while_a_process_runs_and_is_negative_for_none() -> None:
    spinner = subprocess.Popen([sys.executable, "-c", "while True: pass"])
    try:
        started = time.monotonic()
        while cpu_seconds(spinner.pid) < 0.3:
            assert time.monotonic() - started < 30
            time.sleep(0.01)
    finally:
        spinner.kill()
        spinner.wait()
    assert cpu_seconds(spinner.pid) == -1.0  # reaped


def test_a_compile_worker_is_the_first_the_kernel_kills_for_memory() -> None:
    """The workers share the controller's container: when their caps together pass its limit,
    the kernel's OOM killer takes a worker (one compile fails), not the controller."""
    _Spare.refill()
    assert _Spare.worker is not None
    adj = Path(f"/proc/{_Spare.worker.pid}/oom_score_adj")
    deadline = time.monotonic() + 30
    while adj.read_text().strip() != "1000" and time.monotonic() < deadline:
        time.sleep(0.05)
    assert adj.read_text().strip() == "1000"
    assert Path("/proc/self/oom_score_adj").read_text().strip() != "1000"
