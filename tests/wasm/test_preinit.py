"""Pre-initialisation (``sandbox.preinit``): a module's ``_initialize`` runs once at load, under
a call's default limits, and every call is a fresh instance of the snapshot it left. The Go
examples answer every ABI vector exactly as they do with ``_initialize`` in each call (responses,
logs, failure classes); the runtime's start leaves the call's fuel; a restart loads the snapshot
from disk; what cannot be snapshotted runs as before."""

from __future__ import annotations

import base64
import json
from pathlib import Path

import msgpack
import pytest

from modelserving.plugins.exports import plugin_sandbox
from modelserving.sandbox import CallFailure, Sandbox, SandboxSettings, preinit
from tests.wasm.conftest import unhurried
from tests.wasm.guests import guest, hook, returns

ROOT = Path(__file__).resolve().parents[2]
VECTORS = sorted((ROOT / "abi" / "vectors").glob("*.json"))
DEMO_VECTORS = [v for v in VECTORS if v.name.startswith(("create-", "validate-"))]
FLAVOURS = ("go", "tinygo")
ANSWER_FLAG = '(data (i32.const 2048) "\\81\\a5error\\a10")'


def sandbox_with(cache: Path | None, on: bool, **settings: object) -> Sandbox:
    return plugin_sandbox(SandboxSettings(cache_dir=cache, preinitialize=on, **settings))  # type: ignore[arg-type]


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
    state = preinit.Snapshot((4096, -5, -(1 << 40), 2.5), memory)
    import wasmtime

    snap = preinit.snapshot(layout, state, 100)
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
