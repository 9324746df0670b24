"""The built-in plugin library on a real control plane: the API server accepts the Pods the
plugins make (native and Wasm), LeaderWorkerSet labels and engine ports land on the right Pods,
and ready-reporter's readiness latency reaches the controller's metrics. Also a Go plugin,
delivered gzip-compressed by ConfigMap."""

from __future__ import annotations

import hashlib
import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import yaml

from modelserving.api import labels
from modelserving.controller.manager import Controller
from modelserving.plugins.modules import CONFIG_MAP_MAX_BYTES, gzip_module
from tests.integration import controller_env
from tests.integration.conftest import Cluster, wait_for
from tests.integration.controller_env import (
    Objects,
    install_crd,
    model_serving,
    module_config_map,
    running_controller,
    sha256,
    wasm_plugin,
)

ROOT = Path(__file__).resolve().parents[2]
LWS = "leaderworkerset.sigs.k8s.io/"


@pytest.fixture(scope="module")
def controller(cluster: Cluster) -> Iterator[Controller]:
    """A controller whose patch policy lets plugins add IPC_LOCK (examples/operator-rdma.yaml)."""
    install_crd(cluster)
    rdma = yaml.safe_load((ROOT / "examples" / "operator-rdma.yaml").read_text())
    with running_controller(cluster, controller_env.test_config(**rdma)) as ctl:
        yield ctl


@pytest.fixture
def objs(cluster: Cluster, namespace: str, controller: Controller) -> Objects:
    return Objects(cluster, namespace)


def observed(ctl: Controller, namespace: str, plugin: str, role: str) -> float:
    """How many observations of ``plugin`` for ``role`` the controller's histogram counted."""
    for family in ctl.metrics.registry.collect():
        for sample in family.samples:
            if (
                sample.name == "modelserving_plugin_observation_seconds_count"
                and sample.labels.get("plugin") == plugin
                and sample.labels.get("role") == role
                and sample.labels.get("namespace") == namespace
            ):
                return sample.value
    return 0.0


def test_labels_ports_and_readiness_latency(objs: Objects, controller: Controller) -> None:
    plugins: list[dict[str, Any]] = [
        {"name": "lws-standard-labels", "runtime": "Wasm"},
        {"name": "inference-engine", "config": {"engine": "sglang"}},
        {"name": "ready-reporter", "runtime": "Wasm", "config": {"warnAfterSeconds": 600}},
    ]
    objs.create(model_serving("lws", replicas=2, workers=1, plugins=plugins))
    pods = {p["metadata"]["name"]: p for p in objs.wait_pods("lws", 4)}
    assert sorted(pods) == [
        "lws-0-server-0-0",
        "lws-0-server-0-1",
        "lws-1-server-0-0",
        "lws-1-server-0-1",
    ]
    for name, pod in pods.items():
        group, worker = name.rsplit("-server-0-", 1)
        key = hashlib.sha1(f"{objs.namespace}/{group}".encode()).hexdigest()
        labels = pod["metadata"]["labels"]
        assert {k: v for k, v in labels.items() if k.startswith(LWS)} == {
            LWS + "name": "lws",
            LWS + "group-index": group.rsplit("-", 1)[1],
            LWS + "worker-index": worker,
            LWS + "group-key": key,
        }
        container = pod["spec"]["containers"][0]
        if worker == "0":
            assert container["ports"][0]["containerPort"] == 30000
            assert container["readinessProbe"]["httpGet"]["path"] == "/health"
        else:
            assert "ports" not in container and "readinessProbe" not in container
    wait_for(
        "a readiness latency per Pod",
        lambda: observed(controller, objs.namespace, "ready-reporter", "server") >= 4,
        timeout=90,
    )
    assert observed(controller, objs.namespace, "ready-reporter", "server") == 4


def test_the_multi_node_vllm_example_is_accepted_by_the_api_server(
    objs: Objects, cluster: Cluster
) -> None:
    """Every field the three plugins add passes the API server's Pod validation."""
    doc = yaml.safe_load((ROOT / "examples" / "multinode-vllm-rdma.yaml").read_text())
    doc["metadata"].pop("namespace")
    objs.create(doc)
    pods = {p["metadata"]["name"]: p for p in objs.wait_pods("llama-405b", 2)}
    entry = pods["llama-405b-0-leader-0-0"]["spec"]
    assert entry["containers"][0]["securityContext"]["capabilities"]["add"] == ["IPC_LOCK"]
    assert entry["containers"][0]["startupProbe"]["failureThreshold"] == 360
    assert {"name": "dshm", "emptyDir": {"medium": "Memory", "sizeLimit": "16Gi"}} in entry[
        "volumes"
    ]
    worker = pods["llama-405b-0-leader-0-1"]
    assert worker["metadata"]["annotations"]["k8s.v1.cni.cncf.io/networks"] == "rdma-net"


def test_a_go_plugin_delivered_gzip_compressed_by_config_map(
    objs: Objects, controller: Controller
) -> None:
    """The Go port of demo-pod-tweaks (2 MB, so gzip-compressed to fit a ConfigMap) deployed
    like a team would deploy it, next to the native original: the same changes on every Pod."""
    module = (ROOT / "examples" / "wasm" / "go-demo-pod-tweaks.wasm").read_bytes()
    packed = gzip_module(module)
    assert len(packed) < CONFIG_MAP_MAX_BYTES < len(module)
    objs.core.create_namespaced_config_map(
        objs.namespace, module_config_map(objs.namespace, "go-tweaks", packed)
    )
    config = {"annotations": {"example.com/go": "yes"}, "env": [{"name": "FROM_GO", "value": "1"}]}
    plugins = [
        {"name": "demo-pod-tweaks", "config": {"annotations": {"example.com/native": "yes"}}},
        wasm_plugin("go-tweaks", "go-tweaks", module, config=config),
    ]
    objs.create(model_serving("go", replicas=1, workers=1, plugins=plugins))
    pods = objs.wait_pods("go", 2, timeout=90)
    for pod in pods:
        annotations = pod["metadata"]["annotations"]
        assert annotations["example.com/go"] == "yes"
        assert annotations["example.com/native"] == "yes"
        env = {e["name"]: e.get("value") for e in pod["spec"]["containers"][0]["env"]}
        assert env["FROM_GO"] == "1"
        applied = json.loads(annotations[labels.PLUGINS_APPLIED_ANNOTATION])
        assert applied[1] == {"name": "go-tweaks", "runtime": "Wasm", "sha256": sha256(module)}
    assert objs.wait_condition("go", "PluginsReady", "True")["reason"] == "PluginsLoaded"
