"""Where a restart's load from the disk cache goes: ``ModuleCache.load`` of a module whose
artifact is on disk, in a new cache (as after a restart), timed as a whole and stage by stage.

The stages are timed alone on the same module and artifact, each the median of N runs (default
200): the module's sha256, the shape check (``check_shape``, which a restart no longer runs: the
artifact keeps the shape), reading the artifact, its checksum, deserializing it from a copy of
its bytes (before) or mapping the checked file (now), the ABI checks through wasmtime's
wrappers (before) or on the kept interface (now), compressing the module's bytes for the handle
(before; the artifact keeps them now), linking. Prints one block per module.

    .venv/bin/python tests/perf/cache_load.py [N] [MODULE.wasm...]
"""

from __future__ import annotations

import hashlib
import os
import statistics
import sys
import tempfile
import time
import zlib
from collections.abc import Callable
from pathlib import Path

import wasmtime

from modelserving.plugins.exports import ENTRYPOINTS, plugin_sandbox
from modelserving.sandbox import SandboxSettings
from modelserving.sandbox.cache import ModuleCache
from modelserving.sandbox.module import check_module, describe
from modelserving.sandbox.structure import check_shape

ROOT = Path(__file__).resolve().parents[2]
DEFAULT = [
    ROOT / "plugins-wasm" / "demo-pod-tweaks.wasm",
    ROOT / "plugins-wasm" / "hccl-ranktable.wasm",
    ROOT / "examples" / "wasm" / "go-demo-pod-tweaks.wasm",
]


def median_us(fn: Callable[[], object], runs: int) -> float:
    times = []
    for _ in range(runs):
        start = time.perf_counter_ns()
        fn()
        times.append((time.perf_counter_ns() - start) / 1000)
    return statistics.median(times)


def report(path: Path, runs: int) -> None:
    data = path.read_bytes()
    with tempfile.TemporaryDirectory() as tmp:
        sandbox = plugin_sandbox(SandboxSettings(cache_dir=Path(tmp)))
        engine = sandbox.engine
        ModuleCache(engine, Path(tmp), ENTRYPOINTS).load(data)
        (artifact,) = Path(tmp).glob("*.cwasm")
        caches = [ModuleCache(engine, Path(tmp), ENTRYPOINTS) for _ in range(runs)]
        loads = iter(caches)
        whole = median_us(lambda: next(loads).load(data), runs)
        digest = hashlib.sha256(data).hexdigest()
        with caches[0]._store.read(digest) as found:
            assert found is not None
            payload = bytes(found.payload)
            checked = len(found.payload) + len(found.extra)
        blob = artifact.read_bytes()
        alone = Path(tmp) / "payload-alone"
        alone.write_bytes(payload)
        module = wasmtime.Module.deserialize(engine.engine, payload)
        interface = describe(module)

        def read() -> bytes:
            fd = os.open(artifact, os.O_RDONLY)
            try:
                return os.pread(fd, len(blob) + 1, 0)
            finally:
                os.close(fd)

        stages = {
            "module sha256": lambda: hashlib.sha256(data).digest(),
            "shape check (before only)": lambda: check_shape(data, engine.settings.module_bounds),
            "read the artifact": read,
            "artifact checksum (sha256)": lambda: hashlib.sha256(
                memoryview(blob)[:checked]
            ).digest(),
            "deserialize a copy (before)": lambda: wasmtime.Module.deserialize(
                engine.engine, payload
            ),
            "map the file (now)": lambda: wasmtime.Module.deserialize_file(
                engine.engine, str(alone)
            ),
            "ABI checks via wasmtime (before)": lambda: check_module(
                module, digest, len(data), ENTRYPOINTS
            ),
            "ABI checks on the interface (now)": lambda: check_module(
                interface, digest, len(data), ENTRYPOINTS
            ),
            "compress the module (before only)": lambda: zlib.compress(data, 1),
            "link (InstancePre)": lambda: engine.linker.instantiate_pre(module),
        }
        print(
            f"{path.name}: {len(data)} bytes, artifact {len(blob)} bytes ({len(payload)} payload)"
        )
        print(f"  ModuleCache.load from disk, new cache: {whole:8.0f} us (median of {runs})")
        for label, fn in stages.items():
            print(f"  {label:<36} {median_us(fn, runs):8.0f} us")


def main() -> None:
    runs = int(sys.argv[1]) if len(sys.argv) > 1 else 200
    paths = [Path(a) for a in sys.argv[2:]] or DEFAULT
    for path in paths:
        report(path, runs)


if __name__ == "__main__":
    main()
