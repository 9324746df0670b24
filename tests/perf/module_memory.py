"""What compiled modules cost the controller in memory (VmRSS), and how that relates to the size of
their compiled artifacts, which ``sandbox.memoryCacheMaxBytes`` counts.

Each run loads COUNT distinct modules of one kind the way the controller does: one ModelServing per
module, its chain built through a ``ChainCache`` (the controller's size, 1024) that keeps it, so the
chains of live ModelServings hold their plugins; then calls each chain's plugin once more after all
were built (a live ModelServing's next pass). Kinds:

- ``builtin``: plugins-wasm/demo-pod-tweaks.wasm (Rust, 107 KB), made distinct by a custom section;
- ``go``: examples/wasm/go-demo-pod-tweaks.wasm (standard Go, 2.1 MB), the same way;
- ``hostile``: small modules that compile to large artifacts (``FUNCS`` functions of ``REPEAT``
  ``memory.fill`` each; 2000 x 100 is about 6 KB gzipped and a 5 MiB artifact);
- ``tiny``: the smallest module the ABI accepts.

    .venv/bin/python -m tests.perf.module_memory KIND COUNT [--bound BYTES] [--funcs F --repeat R]

It prints VmRSS after every tenth module, the growth per module, the artifacts' mean size, and
what the memory cache holds at the end.
"""

from __future__ import annotations

import argparse
import gc
import gzip
import statistics
import tempfile
from pathlib import Path
from typing import Any

from modelserving.api import parse_model_serving
from modelserving.api.hook import Hook
from modelserving.chain import ChainCache
from modelserving.plugins.exports import plugin_sandbox
from modelserving.plugins.wasm import WasmPlugin
from modelserving.sandbox import SandboxSettings, assemble_wat
from modelserving.sandbox.structure import encode_section, leb128
from tests.wasm.test_memory_cache import manifest, resolver

ROOT = Path(__file__).resolve().parents[2]
SOURCES = {
    "builtin": ROOT / "plugins-wasm" / "demo-pod-tweaks.wasm",
    "go": ROOT / "examples" / "wasm" / "go-demo-pod-tweaks.wasm",
}
ABI = """
  (memory (export "memory") 1)
  (func (export "modelserving_abi_v1"))
  (func (export "ms_alloc") (param i32) (result i32) (i32.const 1024))
  (func (export "ms_on_pod_create") (param i32 i32) (result i64) (i64.const 0))
"""


def rss_mib() -> float:
    for line in Path("/proc/self/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1]) / 1024
    raise RuntimeError("no VmRSS")


def tagged(module: bytes, index: int) -> bytes:
    """``module`` with a custom section naming ``index``: a distinct module, compiled anew."""
    name = b"copy"
    payload = leb128(len(name)) + name + str(index).encode()
    return module + encode_section(0, payload)


def hostile(index: int, funcs: int, repeat: int) -> bytes:
    """``funcs`` functions of ``repeat`` memory.fill each: little after gzip, much compiled."""
    body = (
        f"(func (local i32) (local.set 0 (i32.const {index % 64}))"
        + " (memory.fill (local.get 0) (local.get 0) (local.get 0))" * repeat
        + ")"
    )
    text = f'(module {ABI} {body * funcs} (func (export "copy{index}")))'
    return assemble_wat(text.encode())


def module_of(kind: str, index: int, args: argparse.Namespace) -> bytes:
    if kind == "hostile":
        return hostile(index, args.funcs, args.repeat)
    if kind == "tiny":
        return tagged(assemble_wat(f"(module {ABI})".encode()), index)
    return tagged(SOURCES[kind].read_bytes(), index)


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("kind", choices=["builtin", "go", "hostile", "tiny"])
    parser.add_argument("count", type=int)
    parser.add_argument("--bound", type=int, default=None, help="sandbox.memoryCacheMaxBytes")
    parser.add_argument("--funcs", type=int, default=2000)
    parser.add_argument("--repeat", type=int, default=100)
    args = parser.parse_args()
    extra: dict[str, Any] = {}
    if args.bound is not None:
        extra["memory_cache_max_bytes"] = args.bound
    with tempfile.TemporaryDirectory() as tmp:
        cache = Path(tmp) / "wasm"
        sandbox = plugin_sandbox(SandboxSettings(cache_dir=cache, **extra))
        chains = ChainCache(sandbox=sandbox, size=1024)
        first = module_of(args.kind, 0, args)
        print(
            f"{args.kind}: module {len(first)} bytes, {len(gzip.compress(first, 9))} gzipped",
            flush=True,
        )
        gc.collect()
        start = rss_mib()
        kept = []
        for i in range(args.count):
            data = first if i == 0 else module_of(args.kind, i, args)
            ms = parse_model_serving(manifest(i, data))
            kept.append(ms)
            chains.get(ms, modules=resolver(data))
            del data
            if (i + 1) % 10 == 0 or i + 1 == args.count:
                gc.collect()
                print(f"  {i + 1} modules: VmRSS +{rss_mib() - start:.0f} MiB", flush=True)
        grown = rss_mib() - start
        for ms in kept:  # every ModelServing's next pass: its chain's plugin called again
            entry = chains.get(ms).entries[0]
            assert isinstance(entry.plugin, WasmPlugin)
            entry.plugin.call_bytes(Hook.ON_POD_CREATE, b"\x80")
        gc.collect()
        again = rss_mib() - start
        sizes = [p.stat().st_size for p in cache.glob("*.cwasm")]
        stats = sandbox.modules.stats
        print(
            f"{args.kind} x{args.count}: VmRSS +{grown:.0f} MiB after loading "
            f"({grown / args.count:.2f} MiB per module), +{again:.0f} MiB after calling each once "
            f"more; artifacts on disk: {len(sizes)}, "
            f"mean {statistics.mean(sizes) / 2**20:.2f} MiB; "
            f"in memory: {getattr(stats, 'memory_modules', '?')} modules, "
            f"{getattr(stats, 'memory_bytes', 0) / 2**20:.1f} MiB; "
            f"compiled {stats.compiled}, disk hits {stats.disk_hits}"
        )
        sandbox.close()


if __name__ == "__main__":
    main()
