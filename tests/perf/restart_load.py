"""A restart's load of modules from the disk cache: ``ModuleCache.load`` in a new cache (made
before the clock starts) with the module's artifact on disk; median of 60 loads (15 for modules
over 1 MB). Uses only what every version of the module cache has, so it also measures an older
tree: ``PYTHONPATH=<tree>/host .venv/bin/python tests/perf/restart_load.py MODULE.wasm...``.

    .venv/bin/python tests/perf/restart_load.py MODULE.wasm...
"""

from __future__ import annotations

import statistics
import sys
import tempfile
import time
from pathlib import Path

import modelserving
from modelserving.plugins.exports import ENTRYPOINTS, plugin_sandbox
from modelserving.sandbox import SandboxSettings
from modelserving.sandbox.cache import ModuleCache


def main() -> None:
    print(f"modelserving from {Path(modelserving.__file__).parent}")
    for path in sys.argv[1:]:
        data = Path(path).read_bytes()
        with tempfile.TemporaryDirectory() as tmp:
            sandbox = plugin_sandbox(SandboxSettings(cache_dir=Path(tmp)))
            ModuleCache(sandbox.engine, Path(tmp), ENTRYPOINTS).load(data)
            runs = 60 if len(data) < 1_000_000 else 15
            caches = [ModuleCache(sandbox.engine, Path(tmp), ENTRYPOINTS) for _ in range(runs)]
            times = []
            for cache in caches:
                start = time.perf_counter_ns()
                cache.load(data)
                times.append((time.perf_counter_ns() - start) / 1000)
        print(f"{Path(path).name}: median {statistics.median(times):.0f} us of {runs}")


if __name__ == "__main__":
    main()
