"""``make bench``, guest toolchains: the same plugin (demo-pod-tweaks) built with Rust, TinyGo
and standard Go, side by side (called by ``bench.plugins.main``).

For each module: its size (and gzip-compressed), the time its toolchain takes to rebuild it
with the toolchain's caches warm (an edit-build cycle: Rust recompiles the plugin's crate with
the SDK cached; Go and TinyGo run ``plugins-src/build-go.sh build FLAVOUR demo-pod-tweaks``, and
TinyGo compiles the whole program through LLVM and wasm-opt each time), a cold load (checks and
compile in the compile worker, no cache), and OnPodCreate on a Pod of about 10 KB with the
bench's config through the sandbox (fuel and deadline on, a fresh instance per call): fuel and
p50. The Go and TinyGo modules are pre-initialised (``sandbox.preinit``: their runtime started
once at load); a last line gives standard Go's call with ``_initialize`` in every call. Builds
run only when the toolchain is there (Debian's Rust 1.63; `make tinygo`); otherwise the column
says why not. Figures are printed, never asserted.
"""

from __future__ import annotations

import dataclasses
import gzip
import os
import shutil
import subprocess
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path

from modelserving.abi.codec import encode_request
from modelserving.api.hook import Hook
from modelserving.api.place import PodPlace
from modelserving.bench.plugins import CONFIGS, chain_for, median_us, percentiles
from modelserving.plugins.exports import ENTRYPOINTS, plugin_sandbox
from modelserving.sandbox import Sandbox
from modelserving.sandbox.cache import ModuleCache

ROOT = Path(__file__).resolve().parents[3]
NAME = "demo-pod-tweaks"
CALLS = 1000


@dataclass(frozen=True)
class Toolchain:
    """One way to build the plugin: where its committed module is and how to rebuild it."""

    label: str
    module: Path  # the committed module
    built: str  # the rebuilt module's file name in the output folder


TOOLCHAINS = (
    Toolchain("Rust 1.63", ROOT / "plugins-wasm" / f"{NAME}.wasm", f"{NAME}.wasm"),
    Toolchain(
        "TinyGo 0.37.0", ROOT / "examples" / "wasm" / f"tinygo-{NAME}.wasm", f"tinygo-{NAME}.wasm"
    ),
    Toolchain("Go 1.26.8", ROOT / "examples" / "wasm" / f"go-{NAME}.wasm", f"go-{NAME}.wasm"),
)


def _missing(toolchain: Toolchain) -> str | None:
    """Why the toolchain cannot rebuild the module here, or None."""
    if toolchain.label.startswith("Rust"):
        return None if Path("/usr/bin/cargo").is_file() else "no /usr/bin/cargo (make wasm)"
    if shutil.which("go") is None:
        return "no go on PATH"
    if toolchain.label.startswith("TinyGo"):
        done = subprocess.run(
            ["bash", str(ROOT / "plugins-src" / "install-tinygo.sh"), "--root"],
            capture_output=True,
            check=False,
        )
        return None if done.returncode == 0 else "TinyGo is not installed (make tinygo)"
    return None


def _command(toolchain: Toolchain) -> list[str]:
    if toolchain.label.startswith("Rust"):
        return ["bash", str(ROOT / "plugins-src" / "build.sh"), "build", NAME]
    flavour = "tinygo" if toolchain.label.startswith("TinyGo") else "go"
    return ["bash", str(ROOT / "plugins-src" / "build-go.sh"), "build", flavour, NAME]


def build_seconds(toolchain: Toolchain) -> tuple[float | None, str]:
    """The rebuild's wall time (a warm-up build first, so the caches are warm) and a note:
    whether the rebuilt module is the committed one byte for byte, or why nothing was built."""
    problem = _missing(toolchain)
    if problem is not None:
        return None, problem
    # cargo decides by modification time: touched, the crate is recompiled, the SDK is not
    rust_source = ROOT / "plugins-src" / "builtins" / NAME / "src" / "lib.rs"
    with tempfile.TemporaryDirectory() as out:
        env = {**os.environ, "WASM_OUT": out, "WASM_GO_OUT": out}
        command = _command(toolchain)
        times = []
        for _ in range(3):
            if toolchain.label.startswith("Rust"):
                rust_source.touch()
            start = time.perf_counter()
            done = subprocess.run(command, env=env, capture_output=True, text=True, check=False)
            times.append(time.perf_counter() - start)
            if done.returncode != 0:
                return None, f"the build failed: {done.stderr.strip()[-200:]}"
        same = (Path(out) / toolchain.built).read_bytes() == toolchain.module.read_bytes()
    return min(times[1:]), "same bytes as committed" if same else "DIFFERENT bytes"


def _request(sandbox: Sandbox) -> bytes:
    """OnPodCreate of the bench's 10 KB Pod with the bench's demo-pod-tweaks config."""
    _, desired = chain_for(NAME, "Native", sandbox)
    ms = {"apiVersion": "workload.serving.volcano.sh/v1alpha1", "kind": "ModelServing"}
    where = PodPlace("bench-0", "leader", "leader-0", True)
    return encode_request(Hook.ON_POD_CREATE, NAME, CONFIGS[NAME], ms, where, desired.pod)


def main(sandbox: Sandbox) -> None:
    request = _request(sandbox)
    print(
        f"  {NAME} by toolchain (OnPodCreate, Pod of {len(request) / 1024:.1f} KB as msgpack, "
        f"{CALLS} calls; build: a rebuild with warm caches, best of two):"
    )
    print(
        f"    {'toolchain':<14} {'module':>10} {'gzipped':>9} {'build':>8} {'cold load':>10} "
        f"{'fuel':>10} {'p50':>10} {'p99':>10}"
    )
    notes = []
    for toolchain in TOOLCHAINS:
        if not toolchain.module.is_file():
            print(f"    {toolchain.label:<14} skipped: no {toolchain.module}")
            continue
        seconds, note = build_seconds(toolchain)
        notes.append(f"{toolchain.label}: {note}")
        figures = row(toolchain.module.read_bytes(), seconds, request, sandbox)
        print(f"    {toolchain.label:<14} {figures}")
    for note in notes:
        print(f"    build of {note}")
    go = TOOLCHAINS[-1]
    if go.module.is_file():
        # the Go rows run pre-initialised modules (sandbox.preinit); for comparison, standard
        # Go with its runtime started in every call, as modules that cannot be snapshotted run
        per_call = plugin_sandbox(
            dataclasses.replace(sandbox.settings, cache_dir=None, preinitialize=False)
        )
        compiled = per_call.load(go.module.read_bytes())
        limits = per_call.limits()
        fuel = per_call.call(compiled, "ms_on_pod_create", request, limits).fuel_consumed
        p50, p99 = percentiles(
            lambda: per_call.call(compiled, "ms_on_pod_create", request, limits), n=CALLS
        )
        print(
            f"    {go.label} with _initialize in every call (not pre-initialised): fuel {fuel}, "
            f"p50 {p50:.1f} us, p99 {p99:.1f} us"
        )


def row(data: bytes, seconds: float | None, request: bytes, sandbox: Sandbox) -> str:
    """One module's figures: size, gzipped, build, cold load, fuel, p50, p99."""
    limits = sandbox.limits()
    packed = len(gzip.compress(data, compresslevel=9, mtime=0))
    cold = median_us(lambda: ModuleCache(sandbox.engine, None, ENTRYPOINTS).load(data), 5)
    compiled = sandbox.load(data)
    fuel = sandbox.call(compiled, "ms_on_pod_create", request, limits).fuel_consumed
    p50, p99 = percentiles(
        lambda: sandbox.call(compiled, "ms_on_pod_create", request, limits), n=CALLS
    )
    build = f"{seconds:7.2f}s" if seconds is not None else f"{'n/a':>8}"
    return (
        f"{len(data):>10} {packed:>9} {build} {cold / 1000:>8.1f}ms {fuel:>10} "
        f"{p50:>8.1f}us {p99:>8.1f}us"
    )
