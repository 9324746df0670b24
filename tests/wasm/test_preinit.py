"""Pre-initialisation (``sandbox.preinit``): a module's ``_initialize`` runs once at load, under
a call's default limits, and every call is a fresh instance of the snapshot it left. The Go
examples answer every ABI vector exactly as they do with ``_initialize`` in each call (responses,
logs, failure classes); the runtime's start leaves the call's fuel; a restart loads the snapshot
from disk; what cannot be snapshotted runs as before."""

from __future__ import annotations

import base64
import json
import re
from pathlib import Path
from typing import Any

import msgpack
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from modelserving.api.errors import FailureClass
from modelserving.plugins.exports import plugin_sandbox
from modelserving.sandbox import CallFailure, Sandbox, SandboxError, preinit
from modelserving.sandbox import cache as cache_module
from modelserving.sandbox.structure import encode_section
from tests.wasm.conftest import roomy, unhurried
from tests.wasm.guests import guest, hook, returns

ROOT = Path(__file__).resolve().parents[2]
VECTORS = sorted((ROOT / "abi" / "vectors").glob("*.json"))
DEMO_VECTORS = [v for v in VECTORS if v.name.startswith(("create-", "validate-"))]
FLAVOURS = ("go", "tinygo")
ANSWER_FLAG = '(data (i32.const 2048) "\\81\\a5error\\a10")'


def sandbox_with(cache: Path | None, on: bool, **settings: object) -> Sandbox:
    return plugin_sandbox(roomy(cache_dir=cache, preinitialize=on, **settings))


@pytest.fixture(scope="module")
def both(tmp_path_factory: pytest.TempPathFactory) -> tuple[Sandbox, Sandbox]:
    """A sandbox that runs _initialize in every call, and one that pre-initialises."""
    return (
        sandbox_with(tmp_path_factory.mktemp("per-call"), False),
        sandbox_with(tmp_path_factory.mktemp("preinit"), True),
    )


def outcome(sandbox: Sandbox, module: bytes, export: str, request: bytes) -> tuple[object, ...]:
    try:
        result = sandbox.call(sandbox.load(module), export, request, unhurried(sandbox))
    except CallFailure as failure:
        return ("failure", failure.failure_class, failure.message, failure.logs)
    return ("response", result.response, result.logs)


@pytest.mark.parametrize("flavour", FLAVOURS)
def test_a_go_module_answers_every_vector_as_it_does_without_a_snapshot(
    both: tuple[Sandbox, Sandbox], flavour: str
) -> None:
    module = (ROOT / "examples" / "wasm" / f"{flavour}-demo-pod-tweaks.wasm").read_bytes()
    per_call, preinitialized = both
    assert preinitialized.load(module).info.preinitialized
    assert not per_call.load(module).info.preinitialized
    for vector in DEMO_VECTORS:
        request = base64.b64decode(json.loads(vector.read_text())["request"])
        export = "ms_validate_config" if vector.name.startswith("validate-") else "ms_on_pod_create"
        for _ in range(2):  # each call a fresh instance of the snapshot
            expected = outcome(per_call, module, export, request)
            assert outcome(preinitialized, module, export, request) == expected, vector.name


def test_the_go_runtime_start_is_off_the_call(both: tuple[Sandbox, Sandbox]) -> None:
    """Standard Go's _initialize is about a million fuel units of every call without a
    snapshot; with one, none of it."""
    module = (ROOT / "examples" / "wasm" / "go-demo-pod-tweaks.wasm").read_bytes()
    request = base64.b64decode(json.loads(DEMO_VECTORS[0].read_text())["request"])
    fuel = [
        sb.call(sb.load(module), "ms_on_pod_create", request, unhurried(sb)).fuel_consumed
        for sb in both
    ]
    assert fuel[0] - fuel[1] > 900_000


def test_a_restart_loads_the_snapshot(tmp_path: Path, request_bytes: bytes) -> None:
    module = counting_reactor()
    first = sandbox_with(tmp_path, True)
    assert first.load(module).info.preinitialized
    assert first.modules.stats.preinitialized == 1
    restarted = sandbox_with(tmp_path, True)
    compiled = restarted.load(module)
    assert compiled.info.preinitialized and not compiled.info.initialize
    stats = restarted.modules.stats
    assert (stats.compiled, stats.disk_hits, stats.preinitialized) == (0, 1, 0)
    assert answer(restarted, compiled, request_bytes) == {"error": "1"}


def test_an_evicted_snapshot_whose_artifact_is_gone_is_taken_again(
    tmp_path: Path, request_bytes: bytes
) -> None:
    sandbox = sandbox_with(tmp_path, True, memory_cache_max_bytes=1)
    compiled = sandbox.load(counting_reactor())
    sandbox.load(counting_reactor(extra="(global $other i32 (i32.const 7))"))  # evicts it
    for path in tmp_path.glob(f"{compiled.digest}.*.cwasm"):
        path.unlink()
    assert compiled.native is None
    assert answer(sandbox, compiled, request_bytes) == {"error": "1"}
    assert sandbox.modules.stats.preinitialized == 3


def counting_reactor(body: str = "", extra: str = "") -> bytes:
    """A reactor whose _initialize adds one to a global (after ``body``), and whose hook
    reports the global: {"error": "1"} when _initialize ran once in its instance."""
    return guest(
        "(global $init (mut i32) (i32.const 0))",
        extra,
        f'(func (export "_initialize") {body} '
        "(global.set $init (i32.add (global.get $init) (i32.const 1))))",
        ANSWER_FLAG,
        hook(
            "(i32.store8 (i32.const 2056) (i32.add (i32.const 48) (global.get $init)))"
            + returns(2048, 9)
        ),
    )


def answer(sandbox: Sandbox, compiled: object, request: bytes) -> object:
    result = sandbox.call(compiled, "ms_on_pod_create", request, sandbox.limits())  # type: ignore[arg-type]
    return msgpack.unpackb(result.response)


LOG = '(import "modelserving" "log" (func $log (param i32 i32 i32)))'


@pytest.mark.parametrize(
    ("module", "why"),
    [
        (counting_reactor("(loop $l (br $l))"), "_initialize failed"),
        (counting_reactor("unreachable"), "_initialize failed"),
        (
            guest(
                '(func (export "_initialize") '
                "(call $log (i32.const 0) (i32.const 2048) (i32.const 3)))",
                ANSWER_FLAG,
                hook(returns(2048, 9)),
                imports=LOG,
            ),
            "wrote log lines",
        ),
        (
            guest(
                '(func (export "_initialize"))',
                hook(returns(2048, 9)),
                imports='(global $g (import "env" "g") i32)',
            ),
            None,  # refused at load anyway: the import is not allowed
        ),
        (
            guest(
                "(table $t 1 10 funcref)",
                '(func (export "_initialize") '
                "(drop (table.grow $t (ref.null func) (i32.const 1))))",
                ANSWER_FLAG,
                hook(returns(2048, 9)),
            ),
            "grew a table",
        ),
        (
            guest(
                '(data $p "abc")',
                '(func (export "_initialize"))',
                ANSWER_FLAG,
                hook(returns(2048, 9)),
            ),
            "passive",
        ),
        (
            guest(
                "(func $s) (start $s)",
                '(func (export "_initialize"))',
                ANSWER_FLAG,
                hook(returns(2048, 9)),
            ),
            None,  # a start function: never instrumented, so nothing to note
        ),
    ],
    ids=["endless", "trap", "logs", "imported global", "table", "passive", "start"],
)
def test_what_cannot_be_snapshotted_runs_initialize_in_every_call(
    tmp_path: Path, module: bytes, why: str | None
) -> None:
    sandbox = sandbox_with(tmp_path, True, default_memory_mib=16)
    try:
        compiled = sandbox.load(module)
    except Exception:
        assert why is None
        return
    assert not compiled.info.preinitialized and compiled.info.initialize
    notes = sandbox.modules.stats.not_preinitialized
    if why is None:
        assert notes == []
    else:
        assert len(notes) == 1 and why in notes[0], notes


def test_the_snapshot_run_is_bounded_by_the_default_limits(tmp_path: Path) -> None:
    """An endless _initialize is stopped at the default fuel, like a call's."""
    sandbox = sandbox_with(tmp_path, True, default_fuel=1_000_000)
    compiled = sandbox.load(counting_reactor("(loop $l (br $l))"))
    assert not compiled.info.preinitialized
    assert "fuel" in sandbox.modules.stats.not_preinitialized[0]


def test_layout_refuses_a_module_without_initialize() -> None:
    with pytest.raises(preinit.Refused, match="does not export _initialize"):
        preinit.layout(guest(hook(returns(0, 0))))


def test_a_snapshot_keeps_globals_memory_and_drops_initialize() -> None:
    module = guest(
        "(global $a (mut i32) (i32.const 0)) (global $b (mut i64) (i64.const 0))",
        "(global $c (mut f64) (f64.const 0))",
        '(func (export "_initialize"))',
        hook(returns(0, 0)),
    )
    layout = preinit.layout(module)
    assert len(layout.globals) == 4  # the guest's allocator has one
    memory = bytes(65536 * 2)
    memory = memory[:100] + b"xyz" + memory[103:5000] + b"w" + memory[5001:]
    state = preinit.Snapshot.of((4096, -5, -(1 << 40), 2.5), memory, 100, 1 << 20)
    assert state.runs == ((100, b"xyz"), (5000, b"w"))
    import wasmtime

    snap = preinit.snapshot(layout, state)
    store = wasmtime.Store()
    instance = wasmtime.Instance(store, wasmtime.Module(store.engine, snap), [])
    exports = instance.exports(store)
    assert "_initialize" not in list(exports)
    mem = exports["memory"]
    assert isinstance(mem, wasmtime.Memory)
    assert mem.size(store) == 2
    assert mem.read(store, 100, 103) == b"xyz" and mem.read(store, 5000, 5001) == b"w"


def test_a_snapshot_missed_at_the_deadline_is_not_kept_on_disk(tmp_path: Path) -> None:
    """The deadline may pass because the host is busy: the module runs _initialize in each
    call for now, and no artifact is written, so a later load tries the snapshot again."""
    sandbox = sandbox_with(tmp_path, True, default_fuel=2_000_000_000, default_timeout_ms=20)
    compiled = sandbox.load(counting_reactor("(loop $l (br $l))"))
    assert not compiled.info.preinitialized and compiled.info.initialize
    assert list(tmp_path.glob("*.cwasm")) == []
    fuel_bound = sandbox_with(tmp_path, True, default_fuel=1_000_000)
    fuel_bound.load(counting_reactor("(loop $l (br $l))"))
    assert len(list(tmp_path.glob("*.cwasm"))) == 1, "running out of fuel is the module's own"


def test_a_sparse_memory_is_refused_at_the_segment_limit_without_a_full_scan() -> None:
    """One non-zero byte every MERGE_GAP + 1 bytes: a segment each. The snapshot is refused
    once the runs pass the limit, before the rest of the memory is read or copied."""
    memory = bytearray(16 << 20)
    memory[:: preinit.MERGE_GAP + 1] = b"\x01" * len(memory[:: preinit.MERGE_GAP + 1])
    with pytest.raises(preinit.Refused, match="more than 1000 data segments"):
        preinit.Snapshot.of((), memory, 1000, 16 << 20)


def test_a_memory_with_more_data_than_the_limit_is_refused() -> None:
    memory = b"\x01" * (1 << 20)
    with pytest.raises(preinit.Refused, match="more than 65536 bytes of data"):
        preinit.Snapshot.of((), memory, 1000, 1 << 16)
    assert preinit.Snapshot.of((), memory, 1, 1 << 20).runs == ((0, memory),)


def test_runs_closer_than_the_merge_gap_share_a_segment() -> None:
    gap = preinit.MERGE_GAP
    memory = b"\x01" + bytes(gap - 1) + b"\x02" + bytes(gap) + b"\x03" + bytes(5)
    state = preinit.Snapshot.of((), memory, 10, 1000)
    assert state.size == len(memory)
    assert state.runs == ((0, b"\x01" + bytes(gap - 1) + b"\x02"), (2 * gap + 1, b"\x03"))


def test_a_sparse_memory_left_by_initialize_is_not_pre_initialised(tmp_path: Path) -> None:
    """_initialize that writes a byte every MERGE_GAP + 1 bytes over 10 MiB: the module loads
    and runs as it is (_initialize in each call); the reason is noted."""
    fill = (
        "(local $p i32) (drop (memory.grow (i32.const 160))) (local.set $p (i32.const 65536)) "
        "(loop $l (i32.store8 (local.get $p) (i32.const 1)) "
        f"(local.set $p (i32.add (local.get $p) (i32.const {preinit.MERGE_GAP + 1}))) "
        "(br_if $l (i32.lt_u (local.get $p) (i32.const 10485760))))"
    )
    sandbox = sandbox_with(tmp_path, True)
    compiled = sandbox.load(counting_reactor(fill))
    assert not compiled.info.preinitialized and compiled.info.initialize
    assert any("data segments" in why for why in sandbox.modules.stats.not_preinitialized)


def test_an_unreadable_section_is_a_refusal_not_an_internal_error(tmp_path: Path) -> None:
    """check_shape reads only the counts of some sections; one whose entries are cut short is
    refused by pre-initialisation like any other reason, and the module by the compiler."""
    good = preinit.layout(counting_reactor())
    bad = b"\0asm\x01\0\0\0" + b"".join(
        encode_section(sid, b"\x01\x7f" if sid == 6 else body) for sid, body in good.sections
    )
    with pytest.raises(preinit.Refused, match="cannot be read"):
        preinit.layout(bad)
    with pytest.raises(SandboxError) as info:
        sandbox_with(tmp_path, True).load(bad)
    assert info.value.failure_class is FailureClass.INVALID_MODULE


def test_an_overlong_constant_is_refused_without_reading_it_through(tmp_path: Path) -> None:
    """A global's constant written with 100,000 continuation bytes (10 MB of them took 1.3 s of
    the controller's CPU to skip): pre-initialisation reads no more than the type allows, and
    the compiler refuses the module."""
    good = preinit.layout(counting_reactor())
    plain = b"\x7f\x01\x41\x00\x0b"  # (global (mut i32) (i32.const 0))
    long = b"\x7f\x01\x41" + b"\x80" * 100_000 + b"\x00\x0b"
    sections = [
        (sid, body.replace(plain, long, 1) if sid == 6 else body) for sid, body in good.sections
    ]
    assert sum(len(body) for _, body in sections) > 100_000
    bad = b"\0asm\x01\0\0\0" + b"".join(encode_section(sid, body) for sid, body in sections)
    with pytest.raises(preinit.Refused, match="longer than its type allows"):
        preinit.layout(bad)
    with pytest.raises(SandboxError) as info:
        sandbox_with(tmp_path, True).load(bad)
    assert info.value.failure_class is FailureClass.INVALID_MODULE


def test_a_busy_host_on_a_reload_after_eviction_is_a_timeout_not_an_invalid_module(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """With no disk cache, an evicted pre-initialised module takes its snapshot again when it
    is called; a snapshot the busy host could not finish is Timeout (contended), the module is
    not reported invalid."""
    sandbox = sandbox_with(None, True)
    compiled = sandbox.load(counting_reactor())
    assert compiled.info.preinitialized

    def busy(self: object, built: object, trusted: bool = False) -> None:
        raise cache_module._Transient

    monkeypatch.setattr(cache_module.ModuleCache, "_snapshot", busy)
    with pytest.raises(SandboxError) as info:
        sandbox.modules._attach(compiled)
    assert info.value.failure_class is FailureClass.TIMEOUT and info.value.contended


@settings(max_examples=400, deadline=None)
@given(
    memory=st.lists(st.sampled_from([b"\0", b"\0" * 63, b"\0" * 64, b"\0" * 70, b"\1", b"ab"])),
    start=st.integers(0, 400),
    chunk=st.sampled_from([1, 5, 63, 64, 65, 1 << 20]),
)
def test_a_gap_is_found_where_a_regular_expression_finds_it(
    memory: list[bytes], start: int, chunk: int
) -> None:
    data = b"".join(memory)
    start = min(start, len(data))
    found = re.compile(rb"\x00{%d}" % preinit.MERGE_GAP).search(data, start)
    kept = preinit._CHUNK
    preinit._CHUNK = chunk  # pieces of every size: a gap across two of them is found
    try:
        assert preinit._find_gap(memoryview(data), start, len(data)) == (
            -1 if found is None else found.start()
        )
    finally:
        preinit._CHUNK = kept


def test_the_gap_search_copies_at_most_about_the_memory(monkeypatch: pytest.MonkeyPatch) -> None:
    """The gaps are found with pieces of the memory copied out: whatever the runs, the pieces
    come to a few times the memory at most (a mebibyte copied for each run took 7.8 s for
    100,000 runs, found by a review helper). 63 zeros and a one over and over (a regular
    expression tried the gap at every zero byte) is one run, refused at the limit."""
    copied = [0]

    def counting(data: Any) -> bytes:
        out = bytes(data)
        copied[0] += len(out)
        return out

    monkeypatch.setattr(preinit, "bytes", counting, raising=False)
    runs = bytearray((b"\1" + b"\0" * 4096) * 1000)  # 4 MiB
    snapshot = preinit.Snapshot.of((), memoryview(runs), 5000, 1_000_000)
    assert len(snapshot.runs) == 1000
    assert copied[0] <= 3 * len(runs)
    copied[0] = 0
    memory = bytearray((b"\0" * 63 + b"\1") * (1 << 18))  # 16 MiB, no gap at all
    with pytest.raises(preinit.Refused, match="more than 1000000 bytes of data"):
        preinit.Snapshot.of((), memoryview(memory), 1000, 1_000_000)
    assert copied[0] <= 2 * len(memory)
