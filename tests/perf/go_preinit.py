"""demo-pod-tweaks' OnPodCreate (the toolchain bench's 10 KB request, default limits) built with
Rust, TinyGo and standard Go, in sandboxes that pre-initialise reactors (``sandbox.preinit``) or
run ``_initialize`` in every call; with ``--keep-resident MIB...``, standard Go pre-initialised
under those ``pool_keep_resident_bytes`` instead. Interleaved: 5 rounds, each 50 warm-up calls
and 300 timed per case; prints each round's p50, their median and the call's fuel.

    .venv/bin/python tests/perf/go_preinit.py [--keep-resident MIB...]
"""

from __future__ import annotations

import statistics
import sys
import tempfile
import time
from pathlib import Path

from modelserving.bench.toolchains import TOOLCHAINS, _request
from modelserving.plugins.exports import plugin_sandbox
from modelserving.sandbox import CompiledModule, Sandbox, SandboxSettings
from modelserving.sandbox.settings import MIB


def p50(sandbox: Sandbox, compiled: CompiledModule, request: bytes) -> float:
    limits = sandbox.limits()
    for _ in range(50):
        sandbox.call(compiled, "ms_on_pod_create", request, limits)
    times = []
    for _ in range(300):
        start = time.perf_counter_ns()
        sandbox.call(compiled, "ms_on_pod_create", request, limits)
        times.append((time.perf_counter_ns() - start) / 1000)
    return statistics.median(times)


def main() -> None:
    keep = [int(a) for a in sys.argv[2:]] if sys.argv[1:2] == ["--keep-resident"] else []
    with tempfile.TemporaryDirectory() as tmp:
        cases: dict[str, tuple[Sandbox, CompiledModule]] = {}
        if keep:
            data = TOOLCHAINS[-1].module.read_bytes()
            for mib in keep:
                settings = SandboxSettings(cache_dir=Path(tmp), pool_keep_resident_bytes=mib * MIB)
                sandbox = plugin_sandbox(settings)
                cases[f"Go, keep resident {mib} MiB"] = sandbox, sandbox.load(data)
        else:
            for preinit in (True, False):
                sandbox = plugin_sandbox(
                    SandboxSettings(cache_dir=Path(tmp) / str(preinit), preinitialize=preinit)
                )
                for toolchain in TOOLCHAINS:
                    label = f"{toolchain.label}, {'pre-initialised' if preinit else 'per call'}"
                    cases[label] = sandbox, sandbox.load(toolchain.module.read_bytes())
        request = _request(next(iter(cases.values()))[0])
        rounds: dict[str, list[float]] = {label: [] for label in cases}
        for _ in range(5):
            for label, (sandbox, compiled) in cases.items():
                rounds[label].append(p50(sandbox, compiled, request))
        for label, (sandbox, compiled) in cases.items():
            fuel = sandbox.call(compiled, "ms_on_pod_create", request, sandbox.limits())
            print(
                f"{label:<34} p50 {statistics.median(rounds[label]):6.0f} us "
                f"(rounds {[round(x) for x in rounds[label]]}), fuel {fuel.fuel_consumed}"
            )


if __name__ == "__main__":
    main()
