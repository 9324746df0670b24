"""``make bench``, render part, then the others: prints measured performance figures.

First the CLI start-up figure (``bench.startup``: ``--version`` and ``render --help`` against the
0.3 s target).

Render of a 1,000-Pod ModelServing (125 ServingGroups x 1 role x (1 entry + 7 workers)) with
three native plugins (demo-pod-tweaks, lws-standard-labels, inference-engine): parse + chain
build + generation + OnPodCreate, YAML output, reading the
rendered 1,000-Pod stream back (all the input checks), the whole ``modelserving render`` command
in-process, and then as a user runs it: a new process (Python start-up, imports, render), with the
start-up and import cost alone (``modelserving --version``) beside it. Each figure is the median
(and minimum) of several runs. Then the plugin benchmark (``bench.plugins``), the pass
benchmark (``bench.passes``: one reconcile decision over 1k, 5k and 10k Pods), the controller
benchmark (``bench.controller``: 800 Pods created against a local control plane, without plugins
and with three WASM plugins) and the fleet benchmark (``bench.fleet``: 1k, 5k and 10k Pods).
"""

from __future__ import annotations

import contextlib
import io
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from modelserving.api.validation import parse_model_serving
from modelserving.bench import controller as bench_controller
from modelserving.bench import fleet as bench_fleet
from modelserving.bench import passes as bench_passes
from modelserving.bench import plugins as bench_plugins
from modelserving.bench import startup as bench_startup
from modelserving.chain import build_chain
from modelserving.chain.render import render
from modelserving.cli.main import main as cli_main
from modelserving.cli.manifests import dump_stream, read_documents

RUNS = 7


def thousand_pod_manifest() -> dict[str, Any]:
    container = {
        "name": "engine",
        "image": "vllm/vllm-openai:v0.10.0",
        "args": ["--model", "meta-llama/Llama-3.1-70B", "--tensor-parallel-size", "8"],
        "env": [{"name": f"VAR_{i}", "value": "x" * 20} for i in range(10)],
        "resources": {"limits": {"nvidia.com/gpu": "8"}},
    }
    template = {"spec": {"containers": [container]}}
    return {
        "apiVersion": "workload.serving.volcano.sh/v1alpha1",
        "kind": "ModelServing",
        "metadata": {"name": "bench", "namespace": "default", "uid": "u", "generation": 1},
        "spec": {
            "replicas": 125,
            "plugins": [
                {
                    "name": "demo-pod-tweaks",
                    "config": {
                        "runtimeClassName": "nvidia",
                        "annotations": {"example.com/a": "b"},
                        "env": [{"name": "VAR_3", "value": "y"}, {"name": "NEW", "value": "z"}],
                    },
                },
                {"name": "lws-standard-labels"},
                {"name": "inference-engine", "config": {"engine": "vllm"}},
            ],
            "template": {
                "roles": [
                    {
                        "name": "leader",
                        "replicas": 1,
                        "entryTemplate": template,
                        "workerReplicas": 7,
                        "workerTemplate": template,
                    }
                ]
            },
        },
    }


def median_ms(fn: Callable[[], object]) -> tuple[float, float]:
    times = []
    for _ in range(RUNS):
        start = time.perf_counter()
        fn()
        times.append((time.perf_counter() - start) * 1000)
    return statistics.median(times), min(times)


def line(label: str, figures: tuple[float, float]) -> None:
    print(f"  {label:<49} median {figures[0]:7.1f} ms, min {figures[1]:7.1f} ms")


def run_process(argv: list[str]) -> None:
    subprocess.run(argv, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, check=True)


def main() -> None:
    bench_startup.main()
    print()
    doc = thousand_pod_manifest()

    def objects() -> list[dict[str, Any]]:
        ms = parse_model_serving(doc)
        return render(ms, build_chain(ms)).objects

    out = objects()
    pods = sum(1 for o in out if o["kind"] == "Pod")
    plugins = len(doc["spec"]["plugins"])
    print(
        f"render benchmark: {pods} Pods, {len(out) - pods} Services, {plugins} plugins, {RUNS} runs"
    )
    line("generate + plugins (parse, chain, OnPodCreate):", median_ms(objects))
    line("YAML output:", median_ms(lambda: dump_stream(out)))
    script = Path(sys.executable).with_name("modelserving")
    with tempfile.TemporaryDirectory() as tmp:
        path = Path(tmp) / "bench.yaml"
        # Written out in full: yaml.safe_dump would share the two templates through an anchor
        # and an alias, which render refuses.
        path.write_text(dump_stream([doc]))
        stream = Path(tmp) / "pods.yaml"
        stream.write_text(dump_stream(out))
        size = stream.stat().st_size / 1e6
        line(
            f"read back the rendered stream ({size:.1f} MB):",
            median_ms(lambda: list(read_documents(str(stream)))),
        )

        def command() -> None:
            with contextlib.redirect_stdout(io.StringIO()):
                cli_main(["render", "-f", str(path)])

        line("modelserving render (in-process, whole command):", median_ms(command))
        if not script.exists():
            print(f"  (no {script}: process figures skipped; install the package in this venv)")
        else:
            line(
                "python start-up alone (python -c pass):",
                median_ms(lambda: run_process([sys.executable, "-c", "pass"])),
            )
            line(
                "start-up + imports (modelserving --version):",
                median_ms(lambda: run_process([str(script), "--version"])),
            )
            line(
                "modelserving render -f FILE (new process):",
                median_ms(lambda: run_process([str(script), "render", "-f", str(path)])),
            )
    print("  target: whole command under 1000 ms")
    print()
    bench_plugins.main()
    print()
    bench_passes.main([])
    print()
    bench_controller.main([])
    print()
    bench_fleet.main([])


if __name__ == "__main__":
    main()
