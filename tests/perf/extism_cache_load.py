"""Load times of the Extism examples in a new sandbox (so a new Extism worker), with Extism's
compile cache empty (Extism compiles) and kept (the worker is given the kept files). The
controller's own compiled module is on disk in both cases, so the difference is Extism's
compile; each figure includes starting the worker. Median of N (default 5) runs; prints one
line per module and case.

    .venv/bin/python tests/perf/extism_cache_load.py [N]
"""

from __future__ import annotations

import shutil
import statistics
import sys
import tempfile
import time
from pathlib import Path

from modelserving.plugins.exports import plugin_sandbox
from modelserving.sandbox import SandboxSettings

EXAMPLES = Path(__file__).resolve().parents[1] / "examples" / "wasm"
MODULES = ["tinygo-team-label-extism.wasm", "go-team-label-extism.wasm"]


def load_ms(settings: SandboxSettings, data: bytes) -> float:
    sandbox = plugin_sandbox(settings)
    try:
        start = time.monotonic()
        sandbox.load(data)
        return (time.monotonic() - start) * 1000
    finally:
        sandbox.close()


def main() -> None:
    runs = int(sys.argv[1]) if len(sys.argv) > 1 else 5
    for name in MODULES:
        data = (EXAMPLES / name).read_bytes()
        with tempfile.TemporaryDirectory() as tmp:
            cache = Path(tmp) / "cache"
            settings = SandboxSettings(cache_dir=cache, compile_timeout_ms=60_000)
            load_ms(settings, data)  # the controller's compiled module and Extism's files kept
            figures: dict[str, list[float]] = {"empty": [], "kept": []}
            for _ in range(runs):
                shutil.rmtree(cache / "extism")
                figures["empty"].append(load_ms(settings, data))
                figures["kept"].append(load_ms(settings, data))
            for case, values in figures.items():
                spread = f"{min(values):.0f}-{max(values):.0f}"
                print(
                    f"{name:32} Extism cache {case:5}: median {statistics.median(values):6.0f} ms"
                    f" ({spread} ms, {runs} runs)",
                    flush=True,
                )


if __name__ == "__main__":
    main()
