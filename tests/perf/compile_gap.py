"""Where the time of a compile through the compile worker goes, next to compiling in this process.

For each built-in under plugins-wasm/ and one Go example of examples/wasm/, median of N
(default 5) compiles each way:

- ``here, hot``: in this process, back to back (what ``make bench`` calls in-process);
- ``here, idle``: in this process, each after a second of idling (caches and the compiler's
  threads as cold as a spare worker's when a module arrives);
- ``worker``: through ``Compiler.compile`` with the spare worker ready (a second of idling
  before each);
- ``worker, back to back``: one compile right after the other, so each may wait for the spare
  started after the previous one to finish starting.

    .venv/bin/python tests/perf/compile_gap.py [N]
"""

from __future__ import annotations

import statistics
import sys
import time
from collections.abc import Callable
from pathlib import Path

import wasmtime

from modelserving.sandbox.compile_worker import engine_config
from modelserving.sandbox.compiler import Compiler, _Spare
from modelserving.sandbox.settings import SandboxSettings

ROOT = Path(__file__).resolve().parents[1]
GO_EXAMPLE = ROOT / "examples/wasm/go-demo-pod-tweaks.wasm"
MODULES = [*sorted((ROOT / "plugins-wasm").glob("*.wasm")), GO_EXAMPLE]
IDLE_S = 1.0


def median_ms(action: Callable[[], object], runs: int, idle: float = 0.0) -> float:
    times = []
    for _ in range(runs):
        if idle:
            time.sleep(idle)
        start = time.perf_counter()
        action()
        times.append((time.perf_counter() - start) * 1000)
    return statistics.median(times)


def main() -> None:
    runs = int(sys.argv[1]) if len(sys.argv) > 1 else 5
    settings = SandboxSettings(compile_timeout_ms=60_000)
    engine = wasmtime.Engine(engine_config(settings.max_wasm_stack_bytes))
    compiler = Compiler(settings)
    print(
        f"{'module':28} {'here hot':>9} {'here idle':>10} {'worker':>8} {'back to back':>13}  (ms)"
    )
    for path in MODULES:
        print(f"{path.name:28} {row(path.read_bytes(), engine, compiler, runs)}", flush=True)


def row(data: bytes, engine: wasmtime.Engine, compiler: Compiler, runs: int) -> str:
    wasmtime.Module(engine, data)  # this process's compiler warmed up
    hot = median_ms(lambda: wasmtime.Module(engine, data), runs)
    idle = median_ms(lambda: wasmtime.Module(engine, data), runs, IDLE_S)
    _Spare.refill()
    worker = median_ms(lambda: compiler.compile(data), runs, IDLE_S)
    time.sleep(IDLE_S)
    back = median_ms(lambda: compiler.compile(data), runs)
    return f"{hot:9.0f} {idle:10.0f} {worker:8.0f} {back:13.0f}"


if __name__ == "__main__":
    main()
