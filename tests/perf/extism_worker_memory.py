"""What one Extism worker costs in memory (VmRSS): idle (Python and Extism loaded, one tiny module
compiled and called), then after the TinyGo and the Go Extism examples of examples/wasm/ were
loaded and called once each. Median of N (default 5) new sandboxes.

    .venv/bin/python tests/perf/extism_worker_memory.py [N]
"""

from __future__ import annotations

import contextlib
import statistics
import sys
import tempfile
from pathlib import Path

from modelserving.plugins.exports import plugin_sandbox
from modelserving.sandbox import SandboxError, SandboxSettings

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
from tests.wasm.guests import extism_responding  # noqa: E402

EXAMPLES = ["tinygo-team-label-extism.wasm", "go-team-label-extism.wasm"]


def rss_mib(pid: int) -> float:
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1]) / 1024
    raise RuntimeError(f"no VmRSS for {pid}")


def one_run(cache: Path) -> list[float]:
    sandbox = plugin_sandbox(SandboxSettings(cache_dir=cache, extism_workers=1))
    try:
        tiny = sandbox.load(extism_responding(b"\x80"))
        sandbox.call(tiny, "on_pod_create", b"", sandbox.limits())
        (pid,) = sandbox.extism.pids()
        figures = [rss_mib(pid)]
        for name in EXAMPLES:
            module = sandbox.load((ROOT / "examples/wasm" / name).read_bytes())
            with contextlib.suppress(SandboxError):  # the figure is the memory, not the answer
                sandbox.call(module, "on_pod_create", b"\x80", sandbox.limits(timeout_ms=5000))
            figures.append(rss_mib(pid))
        return figures
    finally:
        sandbox.close()


def main() -> None:
    runs = int(sys.argv[1]) if len(sys.argv) > 1 else 5
    with tempfile.TemporaryDirectory() as tmp:
        rows = [one_run(Path(tmp)) for _ in range(runs)]
    idle, tinygo, go = (statistics.median(column) for column in zip(*rows, strict=True))
    print(
        f"Extism worker VmRSS, median of {runs}: idle {idle:.1f} MiB; after the TinyGo example "
        f"+{tinygo - idle:.1f} MiB; after the Go example +{go - tinygo:.1f} MiB more"
    )


if __name__ == "__main__":
    main()
