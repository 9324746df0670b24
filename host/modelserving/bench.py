"""``make bench``: prints measured performance figures (never asserted by tests).

Render of a 1,000-Pod ModelServing (125 ServingGroups x 1 role x (1 entry + 7 workers)) with a
demo-pod-tweaks plugin: parse + chain build + generation + OnPodCreate, YAML output, and the
whole ``modelserving render`` command in-process. Each figure is the median of several runs.
"""

from __future__ import annotations

import contextlib
import io
import statistics
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import yaml

from modelserving.api.validation import parse_model_serving
from modelserving.chain.chain import build_chain
from modelserving.chain.render import render
from modelserving.cli.main import main as cli_main
from modelserving.cli.manifests import dump_stream

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
                }
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


def main() -> None:
    doc = thousand_pod_manifest()

    def objects() -> list[dict[str, Any]]:
        ms = parse_model_serving(doc)
        return render(ms, build_chain(ms)).objects

    out = objects()
    pods = sum(1 for o in out if o["kind"] == "Pod")
    print(f"render benchmark: {pods} Pods, {len(out) - pods} Services, 1 plugin, {RUNS} runs")
    med, best = median_ms(objects)
    print(
        f"  generate + plugins (parse, chain, OnPodCreate): median {med:.1f} ms, min {best:.1f} ms"
    )
    med, best = median_ms(lambda: dump_stream(out))
    print(
        f"  YAML output:                                    median {med:.1f} ms, min {best:.1f} ms"
    )
    with tempfile.TemporaryDirectory() as tmp:
        path = Path(tmp) / "bench.yaml"
        path.write_text(yaml.safe_dump(doc))

        def command() -> None:
            with contextlib.redirect_stdout(io.StringIO()):
                cli_main(["render", "-f", str(path)])

        med, best = median_ms(command)
    print(
        f"  modelserving render (in-process, whole command): median {med:.1f} ms, min {best:.1f} ms"
    )
    print("  target: whole command under 1000 ms")


if __name__ == "__main__":
    main()
