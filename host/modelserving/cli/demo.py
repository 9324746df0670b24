"""The demo behind ``make run`` without a cluster: a local control plane, the CRD, and a
ModelServing whose Pods carry built-in plugins' and a ConfigMap-delivered WebAssembly plugin's
changes (and whose readiness ready-reporter measures). Used by ``modelserving run
--local-cluster``.
"""

from __future__ import annotations

import base64
import hashlib
import sys
import time
from pathlib import Path
from typing import Any

from modelserving import devcluster
from modelserving.api import labels
from modelserving.api.crd import model_serving_crd
from modelserving.api.errors import ModelServingError
from modelserving.controller.kube import CONFIG_MAPS, MODEL_SERVINGS, ApiError, Kube, Resource
from modelserving.plugins.artifacts import builtin_wasm

NAMESPACE = "default"
NAME = "demo"
MODULE_CONFIG_MAP = "demo-pod-tweaks-wasm"
MODULE_KEY = "plugin.wasm"
CRDS = Resource("apiextensions.k8s.io", "v1", "customresourcedefinitions")
LWS_LABELS = ",".join(
    f"leaderworkerset.sigs.k8s.io/{key}" for key in ("group-index", "worker-index")
)


class LocalClusterError(ModelServingError):
    """The local control plane could not be built or started (``modelserving run
    --local-cluster``); nothing of it is left running."""


def start_local_cluster(directory: Path) -> Path:
    """Start (or find running) the local control plane in ``directory``; its kubeconfig."""

    def say(message: str) -> None:
        print(f"local cluster: {message}", file=sys.stderr, flush=True)

    try:
        state = devcluster.up(directory, log=say)
    except (
        devcluster.ClusterError,
        devcluster.BuildError,
        devcluster.CertError,
        OSError,
    ) as error:
        raise LocalClusterError(
            f"the local control plane in {directory} did not start: {error}"
        ) from None
    return state.kubeconfig


def module_config_map(module: bytes) -> dict[str, Any]:
    return {
        "apiVersion": "v1",
        "kind": "ConfigMap",
        "metadata": {"name": MODULE_CONFIG_MAP, "namespace": NAMESPACE},
        "binaryData": {MODULE_KEY: base64.b64encode(module).decode()},
    }


def demo_model_serving(module_sha256: str) -> dict[str, Any]:
    """Two ServingGroups of one role (entry + 1 worker); four plugins."""
    container = {"name": "engine", "image": "vllm/vllm-openai:v0.10.0"}
    return {
        "apiVersion": labels.API_VERSION,
        "kind": labels.KIND,
        "metadata": {"name": NAME, "namespace": NAMESPACE},
        "spec": {
            "replicas": 2,
            "plugins": [
                {
                    "name": "demo-pod-tweaks",
                    "type": "BuiltIn",
                    "config": {
                        "annotations": {"demo.modelserving.io/builtin": "applied"},
                        "env": [{"name": "FROM_BUILTIN", "value": "yes"}],
                    },
                },
                {
                    "name": "wasm-tweaks",
                    "type": "Wasm",
                    "module": {
                        "configMapRef": {"name": MODULE_CONFIG_MAP, "key": MODULE_KEY},
                        "sha256": module_sha256,
                    },
                    "config": {
                        "annotations": {"demo.modelserving.io/wasm": "applied"},
                        "env": [{"name": "FROM_WASM", "value": "yes"}],
                    },
                },
                {"name": "lws-standard-labels", "runtime": "Wasm"},
                {"name": "ready-reporter"},
            ],
            "template": {
                "roles": [
                    {
                        "name": "server",
                        "replicas": 1,
                        "entryTemplate": {"spec": {"containers": [container]}},
                        "workerReplicas": 1,
                        "workerTemplate": {"spec": {"containers": [container]}},
                    }
                ]
            },
        },
    }


def _apply(kube: Kube, res: Resource, namespace: str | None, body: dict[str, Any]) -> None:
    """Create, or replace what exists under that name."""
    name = body["metadata"]["name"]
    current = kube.get(res, namespace, name)
    if current is None:
        kube.request("POST", res.path(namespace), body)
        return
    body = {**body, "metadata": {**body["metadata"]}}
    body["metadata"]["resourceVersion"] = current["metadata"]["resourceVersion"]
    kube.request("PUT", res.path(namespace, name), body)


def install(api_client: Any, kubeconfig: Path) -> None:
    """The CRD, the module ConfigMap and the demo ModelServing (idempotent)."""
    kube = Kube(api_client)
    crd = model_serving_crd()
    _apply(kube, CRDS, None, crd)
    deadline = time.monotonic() + 30
    while True:
        got = kube.get(CRDS, None, crd["metadata"]["name"]) or {}
        conditions = (got.get("status") or {}).get("conditions") or []
        if any(c.get("type") == "Established" and c.get("status") == "True" for c in conditions):
            break
        if time.monotonic() > deadline:
            raise ApiError(0, "GET", CRDS.path(None), "the CRD was not established in 30s")
        time.sleep(0.2)
    module = builtin_wasm("demo-pod-tweaks.wasm")
    _apply(kube, CONFIG_MAPS, NAMESPACE, module_config_map(module))
    _apply(kube, MODEL_SERVINGS, NAMESPACE, demo_model_serving(hashlib.sha256(module).hexdigest()))


def how_to_look(kubeconfig: Path) -> str:
    kubectl = kubeconfig.parent / "bin" / "kubectl"
    k = f"{kubectl} --kubeconfig {kubeconfig}"
    return "\n".join(
        [
            "",
            f"The controller is running. ModelServing {NAMESPACE}/{NAME} uses the built-in",
            "demo-pod-tweaks plugin and the same plugin compiled to WebAssembly, delivered by",
            f"ConfigMap {MODULE_CONFIG_MAP}; lws-standard-labels (its WebAssembly twin) labels",
            "the Pods as LeaderWorkerSet would; ready-reporter logs how long each Pod took to",
            "become Ready. Look at the result in another terminal:",
            f"  {k} get modelservings,pods,services",
            f"  {k} get pods -L {LWS_LABELS}",
            f"  {k} get modelserving {NAME} -o jsonpath='{{.status.conditions}}'",
            f"  {k} get pod {NAME}-0-server-0-0 -o jsonpath='{{.metadata.annotations}}'",
            f"  {k} get events --field-selector involvedObject.name={NAME}",
            "Stop with Ctrl-C; `make cluster-down` stops the local control plane.",
            "",
        ]
    )
