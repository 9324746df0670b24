"""Request parts shared by the ABI codec and schema tests."""

from __future__ import annotations

from typing import Any

from modelserving.api.place import PodPlace

MODEL_SERVING: dict[str, Any] = {
    "apiVersion": "workload.serving.volcano.sh/v1alpha1",
    "kind": "ModelServing",
    "metadata": {"name": "llama", "namespace": "serving"},
    "spec": {"replicas": 1, "template": {"roles": []}},
}
WHERE = PodPlace("llama-0", "prefill", "prefill-0", True)


def pod(args: int = 0) -> dict[str, Any]:
    container: dict[str, Any] = {"name": "engine", "image": "vllm"}
    if args:
        container["args"] = ["x"] * args
    return {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {"name": "llama-0-prefill-0-0", "labels": {"a": "b"}},
        "spec": {"containers": [container]},
    }
