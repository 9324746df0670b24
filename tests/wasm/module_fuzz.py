"""The module fuzz campaign: random modules through load, call, the plugin adapter and the policy.

Each module comes from its own random bytes (derived from the campaign's seed and the module's
index, so any one module can be made again alone) in one of five shapes:

- ``abi``: ``ms-smith`` (wasm-smith, ``tests/wasm/smith``) with ``--exports`` of a template that
  has the exports of ABI v1
  (marker, ``memory``, ``ms_alloc``, some hooks, at times ``_initialize`` and ``ms_free``) and
  ``--available-imports`` of ``modelserving.log`` and some WASI functions: random code that loads
  and really gets called, with random proposals, traps allowed or not, loops ended or not;
- ``broken``: the same with one rule of ABI v1 broken in the template (a missing or mistyped
  export, a 64-bit or shared memory, a forbidden import): must be refused as ``InvalidModule``;
- ``extism``: the Extism flavour (hooks ``() -> (i32)``, imports of ``extism:host/env``);
- ``random``: smith with no template at all: whatever it makes (mostly refused at load);
- ``response``: a fixed guest whose hook returns random msgpack (patches of random operations,
  bin, extension types, NaN, deep nesting) or random bytes.

Every module is loaded into a sandbox with small limits and every hook it exports is called with
several limit sets, through the WASM plugin adapter (``WasmPlugin.run``: response decoding) and
the patch policy (``PatchValidator.apply_patch``). The sandbox's own outcome is recorded too, and
checked:

- a load ends in a module or in ``InvalidModule``; a call in a ``CallResult`` or a
  ``CallFailure`` of a call's class (never ``InvalidModule``, ``PluginError`` only for Extism);
  nothing else is raised; messages are one line, without wasmtime's chain numbering, and so is
  every guest log record;
- ``FuelExhausted`` only when the fuel used reached the limit (native modules: Extism reports no
  fuel), never more fuel used than the limit; ``Timeout`` only after the deadline (native
  modules: an Extism call's deadline is kept by its worker process, on a clock of its own);
  ``MemoryLimit`` only when the memory could be near its limit (initial memory over the limit,
  or a maximum, if any, within the top quarter of the limit; for Extism, whose limit counts its
  own kernel's memory too, always); and ``MemoryLimit``, not ``Trap``, for a trap (or for
  ``ms_alloc`` returning 0) when the initial memory already lies in the top quarter of the limit;
- the adapter reports the sandbox's class, or for a result ``InvalidResponse``/``PluginError``;
  an applied patch ends in a Pod or ``ForbiddenPatch``, and the request's Pod is never changed.

Run by ``tests/wasm/test_fuzz_modules.py`` in a child process (a crash kills the child, not
pytest) and by ``make fuzz``::

    python -m tests.wasm.module_fuzz --smith PATH --seed 7 --count 150
    python -m tests.wasm.module_fuzz --smith PATH --seed 7 --only 42 --save DIR

It prints JSON lines as it goes (``{"make": i}`` before module i is generated, ``{"start": i,
...}`` before it is run), so the parent can name the module that crashed or hung, then
``{"findings": [...], "summary": {...}}`` at the end.
"""

from __future__ import annotations

import argparse
import copy
import hashlib
import json
import math
import random
import re
import subprocess
import sys
import tempfile
import time
import traceback
from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import msgpack
import wasmtime

from modelserving.abi.codec import RequestEncoder
from modelserving.api.errors import FailureClass, PatchRejected, PluginFailure
from modelserving.api.hook import Hook
from modelserving.api.place import PodPlace
from modelserving.chain.policy import PatchValidator
from modelserving.plugins.exports import ENTRYPOINTS, module_hooks
from modelserving.plugins.wasm import WasmPlugin
from modelserving.sandbox import (
    CallFailure,
    CallResult,
    CompiledModule,
    Limits,
    Sandbox,
    SandboxError,
    SandboxSettings,
)
from modelserving.sandbox.module import FLAVOUR_EXTISM
from modelserving.sandbox.settings import MIB, WASM_PAGE
from tests.wasm.conftest import sample_pod
from tests.wasm.guests import responding

SHAPES = {"abi": 50, "broken": 12, "extism": 8, "random": 10, "response": 20}
"""How often each shape is drawn (weights)."""

LIMIT_SETS = (
    Limits(fuel=20_000, memory_bytes=1 * MIB, timeout_ms=50),
    Limits(fuel=5_000_000, memory_bytes=2 * MIB, timeout_ms=50),
    Limits(fuel=2_000_000_000, memory_bytes=4 * MIB, timeout_ms=10),
)
"""Every hook is called under each: little fuel, more fuel and memory, a short deadline."""

CALL_CLASSES = frozenset(
    {
        FailureClass.FUEL_EXHAUSTED,
        FailureClass.TIMEOUT,
        FailureClass.MEMORY_LIMIT,
        FailureClass.TRAP,
        FailureClass.INVALID_RESPONSE,
    }
)
EXTISM_CALL_CLASSES = CALL_CLASSES | {FailureClass.PLUGIN_ERROR}
DECODE_CLASSES = frozenset({FailureClass.INVALID_RESPONSE, FailureClass.PLUGIN_ERROR})

SMITH_BASE = ["--max-funcs", "12", "--max-types", "20", "--max-imports", "12"]
"""Keep modules small: compiling is most of the campaign's time."""

HOST_PROPOSALS = [
    "--gc-enabled=false",
    "--threads-enabled=false",
    "--shared-everything-threads-enabled=false",
    "--memory64-enabled=false",
    "--compact-imports-enabled=false",
    "--custom-descriptors-enabled=false",
    "--custom-page-sizes-enabled=false",
    "--wide-arithmetic-enabled=false",
    "--max-memories=0",
]
"""Proposals this host's engine refuses (abi/README.md section 2), off for the shapes meant to
load; ``--max-memories=0``: no memory besides the exported one (the host allows exactly one)."""

WASI_IMPORTS = {
    "fd_write": "(param i32 i32 i32 i32) (result i32)",
    "fd_read": "(param i32 i32 i32 i32) (result i32)",
    "fd_close": "(param i32) (result i32)",
    "random_get": "(param i32 i32) (result i32)",
    "clock_time_get": "(param i32 i64 i32) (result i32)",
    "poll_oneoff": "(param i32 i32 i32 i32) (result i32)",
    "environ_sizes_get": "(param i32 i32) (result i32)",
    "args_sizes_get": "(param i32 i32) (result i32)",
    "sched_yield": "(result i32)",
    "proc_exit": "(param i32)",
}
EXTISM_IMPORTS = {
    "input_length": "(result i64)",
    "input_load_u8": "(param i64) (result i32)",
    "input_load_u64": "(param i64) (result i64)",
    "alloc": "(param i64) (result i64)",
    "length": "(param i64) (result i64)",
    "free": "(param i64)",
    "store_u8": "(param i64 i32)",
    "store_u64": "(param i64 i64)",
    "load_u8": "(param i64) (result i32)",
    "load_u64": "(param i64) (result i64)",
    "output_set": "(param i64 i64)",
    "error_set": "(param i64)",
    "log_info": "(param i64)",
}
HOOK = "(param i32 i32) (result i64)"

BREAKS: dict[str, dict[str, str | None]] = {
    "no marker": {"marker": None},
    "marker typed (i32) -> ()": {"marker": "(param i32)"},
    "no memory": {"memory": None},
    "memory is a global": {"memory": "global"},
    "64-bit memory": {"memory": '(memory (export "memory") i64 1 16)'},
    "shared memory": {"memory": '(memory (export "memory") 1 16 shared)'},
    "no ms_alloc": {"alloc": None},
    "ms_alloc typed (i64) -> (i64)": {"alloc": "(param i64) (result i64)"},
    "hook returns i32": {"hook": "(param i32 i32) (result i32)"},
    "no hook": {"hook": None},
    "ms_free typed (i32) -> ()": {"free": "(param i32)"},
    "_initialize typed () -> (i32)": {"initialize": "(result i32)"},
    "import env.get_secret": {"import": '(import "env" "get_secret" (func (result i32)))'},
    "log typed (i32) -> ()": {"import": '(import "modelserving" "log" (func (param i32)))'},
}
"""One broken ABI rule each; ``tests/wasm/test_hostile.py`` has the exact messages."""


@dataclass
class Module:
    """One generated module: how it was made and its bytes (None: smith gave up)."""

    index: int
    shape: str
    detail: str
    wasm: bytes | None


@dataclass
class Campaign:
    """What the campaign saw: outcome counts and findings (broken invariants)."""

    seed: int
    outcomes: Counter[str] = field(default_factory=Counter)
    findings: list[dict[str, Any]] = field(default_factory=list)

    def count(self, key: str) -> None:
        self.outcomes[key] += 1

    def finding(self, module: Module, what: str, **details: Any) -> None:
        self.findings.append(
            {"index": module.index, "shape": module.shape, "detail": module.detail, "what": what}
            | details
        )


class RecordingSandbox(Sandbox):
    """A sandbox that keeps the raw outcome of its last call (what the adapter wraps)."""

    last: CallResult | CallFailure | BaseException | None = None

    def call(
        self, compiled: CompiledModule, export: str, request: bytes, limits: Limits
    ) -> CallResult:
        self.last = None
        try:
            result = super().call(compiled, export, request, limits)
        except BaseException as exc:
            self.last = exc
            raise
        self.last = result
        return result


# --- generation ---


class Generator:
    """Makes module ``i`` of a campaign from the seed alone; templates are written to ``work``."""

    def __init__(self, smith_binary: str, seed: int, work: Path) -> None:
        self.smith_binary = smith_binary
        self.seed = seed
        self.work = work

    def module(self, index: int) -> Module:
        rng = random.Random(f"{self.seed}:{index}")
        shape = rng.choices(list(SHAPES), weights=list(SHAPES.values()))[0]
        if shape == "response":
            detail, data = random_response(rng)
            return Module(index, shape, detail, responding(data, response_hooks(rng)))
        args, detail = getattr(self, f"_{shape}")(rng)
        seed_bytes = rng.randbytes(rng.choice([64, 256, 1024, 4096]))
        wasm = self.smith(args + SMITH_BASE + random_config(rng), seed_bytes)
        return Module(index, shape, detail, wasm)

    def smith(self, args: list[str], seed_bytes: bytes) -> bytes | None:
        config, fuel = smith_config(args)
        path = (
            self.work
            / f"config-{hashlib.sha256(json.dumps(config).encode()).hexdigest()[:16]}.json"
        )
        if not path.exists():
            path.write_text(json.dumps(config))
        run = subprocess.run(
            [self.smith_binary, "generate", str(path), *([str(fuel)] if fuel is not None else [])],
            input=seed_bytes,
            capture_output=True,
            check=False,
            timeout=60,
        )
        if run.returncode == 2:  # the seed was too short to make a module: rare
            return None
        if run.returncode != 0:
            raise RuntimeError(f"ms-smith {args}: {run.stderr.decode(errors='replace')}")
        return run.stdout

    def file(self, wat: str) -> str:
        path = self.work / f"{hashlib.sha256(wat.encode()).hexdigest()[:16]}.wat"
        if not path.exists():
            path.write_text(wat)
        return str(path)

    def _abi(self, rng: random.Random) -> tuple[list[str], str]:
        parts = abi_template(rng, {})
        imports = self.file(available_imports(rng))
        exports = self.file(parts)
        return ["--exports", exports, "--available-imports", imports, *HOST_PROPOSALS], "abi"

    def _broken(self, rng: random.Random) -> tuple[list[str], str]:
        name = rng.choice(sorted(BREAKS))
        brk = BREAKS[name]
        proposals = [p for p in HOST_PROPOSALS if not p.startswith(("--threads", "--memory64"))]
        template = abi_template(rng, brk)
        if "import" in brk:  # the module has exactly the template's imports and exports
            template = template.replace("(module", f"(module {brk['import']}", 1)
            return ["--module-shape", self.file(template), *proposals], name
        args = ["--exports", self.file(template)]
        args += ["--available-imports", self.file(available_imports(rng)), *proposals]
        return args, name

    def _extism(self, rng: random.Random) -> tuple[list[str], str]:
        hooks = rng.sample(["on_pod_create", "on_pod_ready", "validate_config"], rng.randint(1, 3))
        if "on_pod_create" not in hooks and "on_pod_ready" not in hooks:
            hooks.append("on_pod_create")
        exports = ['(func (export "modelserving_abi_v1"))']
        exports += [f'(func (export "{h}") (result i32) unreachable)' for h in hooks]
        if rng.random() < 0.7:
            exports.append('(memory (export "memory") 1 16)')
        imports = [
            f'(import "extism:host/env" "{name}" (func {ty}))'
            for name, ty in EXTISM_IMPORTS.items()
        ]
        args = ["--exports", self.file(f"(module {' '.join(exports)})")]
        args += ["--available-imports", self.file(f"(module {' '.join(imports)})")]
        args += ["--min-imports", "1", *HOST_PROPOSALS]
        return args, "extism " + ",".join(sorted(hooks))

    def _random(self, rng: random.Random) -> tuple[list[str], str]:
        return [], "no template"


def smith_config(args: list[str]) -> tuple[dict[str, Any], int | None]:
    """``wasm-tools smith``-style switches as ms-smith's JSON configuration (the same names),
    and the fuel of ``--ensure-termination`` (None: loops may run forever)."""
    config: dict[str, Any] = {}
    fuel: int | None = None
    terminate = False
    items = iter(args)
    for item in items:
        name, _, value = item.removeprefix("--").partition("=")
        if name == "ensure-termination":
            terminate = True
            continue
        if not value:
            value = next(items)
        if name == "fuel":
            fuel = int(value)
        elif value in ("true", "false"):
            config[name] = value == "true"
        elif value.isdigit():
            config[name] = int(value)
        else:
            config[name] = value
    return config, (fuel if fuel is not None else 100) if terminate else None


def abi_template(rng: random.Random, brk: dict[str, str | None]) -> str:
    """A module with the exports of ABI v1 (bodies do not matter: smith writes its own), with
    the hooks, ``ms_free`` and ``_initialize`` drawn at random, and ``brk`` applied."""
    # pages: mostly 1 to start with; 20 is over the smallest memory limit (1 MiB), 28 within a
    # quarter of the next (2 MiB); no maximum at times, so memory.grow can reach the limit
    least = rng.choice([1, 1, 1, 2, 20, 28])
    most = rng.choice(["", str(least), str(max(least, 16)), str(max(least, 64))])
    memory = brk.get("memory", f'(memory (export "memory") {least} {most})')
    if memory == "global":
        memory = '(global (export "memory") i32 (i32.const 0))'
    hooks = rng.sample(["ms_on_pod_create", "ms_on_pod_ready", "ms_validate_config"], 2)
    if "ms_on_pod_create" not in hooks and "ms_on_pod_ready" not in hooks:
        hooks[0] = "ms_on_pod_create"
    hook_type = brk.get("hook", HOOK)
    if hook_type is None:
        hooks = ["ms_validate_config"]
        hook_type = HOOK
    exports = {
        "modelserving_abi_v1": brk.get("marker", ""),
        "ms_alloc": brk.get("alloc", "(param i32) (result i32)"),
        **dict.fromkeys(hooks, hook_type),
    }
    if rng.random() < 0.3 or "free" in brk:
        exports["ms_free"] = brk.get("free", "(param i32 i32)")
    if rng.random() < 0.3 or "initialize" in brk:
        exports["_initialize"] = brk.get("initialize", "")
    funcs = [
        f'(func (export "{name}") {ty} unreachable)'
        for name, ty in exports.items()
        if ty is not None
    ]
    return "(module " + (memory or "") + " " + " ".join(funcs) + ")"


def available_imports(rng: random.Random) -> str:
    """``modelserving.log`` and a random half of the WASI functions, with their types."""
    names = rng.sample(sorted(WASI_IMPORTS), len(WASI_IMPORTS) // 2)
    imports = ['(import "modelserving" "log" (func (param i32 i32 i32)))']
    imports += [
        f'(import "wasi_snapshot_preview1" "{name}" (func {WASI_IMPORTS[name]}))' for name in names
    ]
    return "(module " + " ".join(imports) + ")"


def random_config(rng: random.Random) -> list[str]:
    """smith's switches that change what code it writes."""
    args = [
        f"--max-instructions={rng.choice([10, 50, 200, 1000])}",
        f"--max-memory32-bytes={rng.choice([1, 16, 64, 256]) * WASM_PAGE}",
        f"--disallow-traps={rng.choice(['true', 'false'])}",
        f"--allow-floats={rng.choice(['true', 'false'])}",
        f"--simd-enabled={rng.choice(['true', 'false'])}",
        f"--exceptions-enabled={rng.choice(['true', 'false'])}",
        f"--tail-call-enabled={rng.choice(['true', 'false'])}",
        f"--max-table-elements={rng.choice([10, 1000, 200_000])}",
    ]
    if rng.random() < 0.5:
        args += ["--ensure-termination", f"--fuel={rng.choice([10, 1000, 100_000])}"]
    if rng.random() < 0.3:
        args += [f"--min-funcs={rng.randint(1, 12)}", f"--min-data-segments={rng.randint(1, 4)}"]
    return args


def response_hooks(rng: random.Random) -> tuple[str, ...]:
    return ("ms_on_pod_create", *rng.sample(["ms_on_pod_ready", "ms_validate_config"], 1))


# --- random responses ---

POINTERS = [
    "",
    "/metadata/labels/x",
    "/metadata/labels/modelserving.volcano.sh~1role",
    "/metadata/annotations",
    "/metadata/name",
    "/spec/containers/0/env",
    "/spec/containers/-",
    "/spec/containers/0/image",
    "/spec/containers/0/securityContext/privileged",
    "/spec/hostNetwork",
    "/spec/volumes",
    "/spec/volumes/0/hostPath",
    "/status",
    "/spec/containers/9/image",
    "/x~2y",
]


def random_value(rng: random.Random, depth: int = 0) -> Any:
    """A msgpack value, JSON-like mostly; bin, floats and deep nesting at times."""
    pick = rng.random()
    if depth > 3 or pick < 0.5:
        return rng.choice(
            [
                None,
                True,
                rng.randint(-(2**63), 2**64 - 1),
                rng.randint(-5, 300),
                "".join(rng.choice("ab/~-_.é\n\x1b\x85\u20280") for _ in range(rng.randint(0, 8))),
                rng.random() * 1e6,
                rng.randbytes(rng.randint(0, 4)),
            ]
        )
    if pick < 0.75:
        return [random_value(rng, depth + 1) for _ in range(rng.randint(0, 4))]
    return {
        rng.choice(["a", "name", "value", "x~1y", ""]): random_value(rng, depth + 1)
        for _ in range(rng.randint(0, 4))
    }


def random_operation(rng: random.Random) -> Any:
    op: dict[Any, Any] = {
        "op": rng.choice(["add", "add", "replace", "remove", "test", "move", 7]),
        "path": rng.choice(POINTERS) if rng.random() < 0.9 else random_value(rng),
    }
    if rng.random() < 0.8:
        op["value"] = random_value(rng)
    if rng.random() < 0.05:
        op[rng.choice(["from", 1])] = rng.choice(POINTERS)
    return op


def random_response(rng: random.Random) -> tuple[str, bytes]:
    """A response to return: (how it was made, its bytes)."""
    kind = rng.choice(["patch", "patch", "error", "value", "bytes", "cut", "ext", "nan", "deep"])
    value: Any
    if kind == "patch":
        value = {"patch": [random_operation(rng) for _ in range(rng.randint(0, 5))]}
    elif kind == "error":
        value = {"error": random_value(rng)}
        if rng.random() < 0.5:
            value["patch"] = [random_operation(rng)]
    elif kind == "value":
        value = random_value(rng)
    elif kind == "bytes":
        return kind, rng.randbytes(rng.randint(1, 64))
    elif kind == "cut":
        data = msgpack.packb({"patch": [random_operation(rng)]}, use_bin_type=True)
        return kind, data[: rng.randint(1, max(1, len(data) - 1))]
    elif kind == "ext":
        value = {"patch": [{"op": "add", "path": "/x", "value": msgpack.ExtType(5, b"1")}]}
    elif kind == "nan":
        value = {"patch": [{"op": "add", "path": "/metadata/labels/x", "value": math.nan}]}
    else:
        value = "leaf"
        for _ in range(rng.choice([50, 99, 100, 101, 300])):
            value = [value]
        value = {"patch": [{"op": "add", "path": "/metadata/annotations", "value": value}]}
    data = msgpack.packb(value, use_bin_type=True)
    if rng.random() < 0.1:
        data += rng.randbytes(rng.randint(1, 4))  # trailing bytes
        kind += "+trailing"
    return kind, data


# --- running ---


CHAIN_NUMBER = re.compile(r"(^|: )\d+: ")
"""wasmtime's error chain numbering (``1: wasm trap: ...``), which messages leave out."""


def single_line(text: str) -> bool:
    """No line break of any kind (``str.splitlines``: \\n, \\r, \\x1c-\\x1e, \\x85, U+2028...)."""
    return text.splitlines() in ([text], [])


def one_line(message: str) -> bool:
    """A message as the host writes them: one line, not empty, no chain numbering."""
    return bool(message) and single_line(message) and not CHAIN_NUMBER.search(message)


def memory_could_near(compiled: CompiledModule, limit: int) -> bool:
    """Whether the module's memory can reach the top quarter of ``limit`` (the host's rule for
    MemoryLimit, abi/README.md 6.1): its initial size is over the limit, or it has no maximum,
    or its maximum lies within max(64 KiB, limit / 4) of the limit."""
    if compiled.info.memory_min_bytes > limit or compiled.info.flavour == FLAVOUR_EXTISM:
        return True  # Extism's limit counts its kernel's memory too (the blocks of ``alloc``)
    for export in compiled.module.exports:
        if isinstance(export.type, wasmtime.MemoryType):
            maximum = export.type.limits.max
            slack = max(WASM_PAGE, limit // 4)
            return maximum is None or maximum * WASM_PAGE + slack > limit
    return True


def memory_near_from_start(compiled: CompiledModule, limit: int) -> bool:
    """Whether the module's initial memory already lies in the top quarter of ``limit`` (but
    within it): then every trap, and an ``ms_alloc`` that returns 0, is MemoryLimit by the
    host's rule, wherever in the call it happens (memories never shrink)."""
    if compiled.info.flavour == FLAVOUR_EXTISM:
        return False
    size = compiled.info.memory_min_bytes
    return limit - max(WASM_PAGE, limit // 4) < size <= limit


def check_call(
    campaign: Campaign,
    module: Module,
    compiled: CompiledModule,
    hook: Hook,
    limits: Limits,
    raw: CallResult | CallFailure | BaseException | None,
) -> str:
    """Check the sandbox's own outcome of one call; its name."""
    extism = compiled.info.flavour == FLAVOUR_EXTISM
    where = {"hook": str(hook), "limits": limits.__dict__}
    logs = raw.logs if isinstance(raw, CallResult | CallFailure) else []
    if not all(single_line(record.message) for record in logs):
        campaign.finding(module, "a guest log record is more than one line", **where)
    if isinstance(raw, CallResult):
        if not 0 <= raw.fuel_consumed <= limits.fuel:
            campaign.finding(module, "result used more fuel than the limit", **where)
        if len(raw.response) > 1 * MIB:
            campaign.finding(module, "result over the response limit", **where)
        return "result"
    if not isinstance(raw, CallFailure):
        text = "".join(traceback.format_exception(raw)) if raw else "no outcome recorded"
        campaign.finding(module, "call raised something else than CallFailure", error=text, **where)
        return "crash"
    cls = raw.failure_class
    where["message"] = raw.message
    if cls not in (EXTISM_CALL_CLASSES if extism else CALL_CLASSES):
        campaign.finding(module, f"a call failed with class {cls}", **where)
    if not one_line(raw.message):
        campaign.finding(module, "a failure message is not one plain line", **where)
    if not extism and raw.fuel_consumed > limits.fuel:
        campaign.finding(module, "a failure used more fuel than the limit", **where)
    if cls is FailureClass.FUEL_EXHAUSTED and not extism and raw.fuel_consumed < limits.fuel:
        campaign.finding(
            module, "FuelExhausted with fuel left", fuel_consumed=raw.fuel_consumed, **where
        )
    # An Extism call's deadline is kept by its worker process; the duration the host reports
    # is its own estimate (the time until the worker was ready taken off), not that clock.
    if cls is FailureClass.TIMEOUT and not extism and raw.duration_us < limits.timeout_ms * 1000:
        campaign.finding(
            module, "Timeout before the deadline", duration_us=raw.duration_us, **where
        )
    if cls is FailureClass.MEMORY_LIMIT and not memory_could_near(compiled, limits.memory_bytes):
        campaign.finding(module, "MemoryLimit with a memory that cannot be near it", **where)
    if memory_near_from_start(compiled, limits.memory_bytes) and (
        (cls is FailureClass.TRAP and not raw.message.startswith("the module exited"))
        or (cls is FailureClass.INVALID_RESPONSE and "returned 0" in raw.message)
    ):
        campaign.finding(module, f"{cls} with the memory near its limit from the start", **where)
    return str(cls)


def run_plugin(
    campaign: Campaign,
    module: Module,
    sandbox: RecordingSandbox,
    compiled: CompiledModule,
    hook: Hook,
    limits: Limits,
) -> None:
    """One call through the adapter and the policy; every invariant of the module docstring."""
    validator = PatchValidator()
    encoder = RequestEncoder("fuzz", {"k": [1, "v"]}, {"apiVersion": "v1", "kind": "ModelServing"})
    pod = sample_pod()
    before = copy.deepcopy(pod)
    if hook is Hook.VALIDATE_CONFIG:
        payload = encoder.validate_config()
    else:
        payload = encoder.pod_hook(hook, PodPlace("fuzz-0", "r", "r-0", True), pod)
    plugin = WasmPlugin("fuzz", None, compiled, sandbox, limits)
    outcome = "ok"
    try:
        response = plugin.run(hook, payload, "fuzz-0-r-0-0")
        target = copy.deepcopy(pod)
        try:
            validator.apply_patch(target, response.response.patch)
        except PatchRejected:
            outcome = "ForbiddenPatch"
    except PluginFailure as failure:
        outcome = str(failure.failure_class)
        if not one_line(failure.detail):  # a guest's error text included
            campaign.finding(module, "the adapter's message is not one plain line", hook=str(hook))
    except Exception as exc:
        campaign.finding(
            module,
            "the adapter raised something else than PluginFailure",
            hook=str(hook),
            error="".join(traceback.format_exception(exc)),
        )
        outcome = "crash"
    raw = sandbox.last
    call = check_call(campaign, module, compiled, hook, limits, raw)
    if isinstance(raw, CallFailure) and outcome != str(raw.failure_class):
        campaign.finding(module, f"the adapter reported {outcome} for {raw.failure_class}")
    if isinstance(raw, CallResult) and outcome not in {"ok", "ForbiddenPatch"} | DECODE_CLASSES:
        campaign.finding(module, f"the adapter reported {outcome} for a result")
    if pod != before:
        campaign.finding(module, "the request's Pod was changed", hook=str(hook))
    campaign.count(f"call {call}")
    campaign.count(f"adapter {outcome}")


def run_module(campaign: Campaign, sandbox: RecordingSandbox, module: Module) -> None:
    if module.wasm is None:
        campaign.count("smith gave up")
        return
    try:
        compiled = sandbox.load(module.wasm)
    except SandboxError as exc:
        campaign.count(f"{module.shape}: refused")
        if exc.failure_class is not FailureClass.INVALID_MODULE:
            campaign.finding(module, f"load refused with class {exc.failure_class}")
        if not one_line(exc.message):
            campaign.finding(module, "a refusal message is not one plain line", message=exc.message)
        return
    except Exception as exc:
        error = "".join(traceback.format_exception(exc))
        campaign.finding(module, "load raised something else than SandboxError", error=error)
        return
    campaign.count(f"{module.shape}: loaded")
    if module.shape == "broken":
        campaign.finding(module, "a module that breaks ABI v1 was accepted")
    for hook in module_hooks(compiled.info):
        for limits in LIMIT_SETS:
            run_plugin(campaign, module, sandbox, compiled, hook, limits)


def emit(line: dict[str, Any]) -> None:
    sys.stdout.write(json.dumps(line) + "\n")
    sys.stdout.flush()


def campaign_main(
    generator: Generator, indices: list[int], save: Path | None, emit_line: Callable[..., None]
) -> Campaign:
    campaign = Campaign(generator.seed)
    sandbox = RecordingSandbox(SandboxSettings(cache_dir=None), ENTRYPOINTS)
    for index in indices:
        emit_line({"make": index})
        module = generator.module(index)
        if save is not None and module.wasm is not None:
            (save / f"module-{generator.seed}-{index}.wasm").write_bytes(module.wasm)
        emit_line({"start": index, "shape": module.shape, "detail": module.detail})
        run_module(campaign, sandbox, module)
    return campaign


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m tests.wasm.module_fuzz")
    parser.add_argument("--smith", required=True, help="the ms-smith binary (make smith)")
    parser.add_argument("--seed", type=int, required=True)
    parser.add_argument("--count", type=int, default=100)
    parser.add_argument("--only", type=int, action="append", help="only module N (repeatable)")
    parser.add_argument("--save", type=Path, help="write each module to DIR/module-SEED-N.wasm")
    parser.add_argument("--generate-only", action="store_true", help="make the modules, no run")
    args = parser.parse_args(argv)
    indices = args.only or list(range(args.count))
    started = time.monotonic()
    with tempfile.TemporaryDirectory(prefix="module-fuzz-") as work:
        generator = Generator(args.smith, args.seed, Path(work))
        if args.generate_only:
            for index in indices:
                module = generator.module(index)
                if args.save is not None and module.wasm is not None:
                    (args.save / f"module-{args.seed}-{index}.wasm").write_bytes(module.wasm)
                emit({"module": index, "shape": module.shape, "detail": module.detail})
            return 0
        campaign = campaign_main(generator, indices, args.save, emit)
    summary = dict(sorted(campaign.outcomes.items()))
    emit(
        {
            "seed": args.seed,
            "modules": len(indices),
            "seconds": round(time.monotonic() - started, 1),
            "summary": summary,
            "findings": campaign.findings,
        }
    )
    return 0


if __name__ == "__main__":
    sys.exit(main())
