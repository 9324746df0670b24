"""Helpers for the controller's integration tests: running the controller (in-process or as a
process), creating ModelServings and module ConfigMaps, and reading back what happened."""

from __future__ import annotations

import base64
import copy
import hashlib
import os
import signal
import subprocess
import sys
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import yaml
from kubernetes import client
from kubernetes.client.exceptions import ApiException

from modelserving.api import labels
from modelserving.api.operator import OperatorConfig
from modelserving.controller.manager import Controller
from tests.integration.conftest import Cluster, wait_for

ROOT = Path(__file__).resolve().parents[2]
CRD = ROOT / "crds" / "workload.serving.volcano.sh_modelservings.yaml"


def install_crd(cluster: Cluster) -> None:
    api = client.ApiextensionsV1Api(cluster.api_client)
    body = yaml.safe_load(CRD.read_text())
    try:
        api.create_custom_resource_definition(body)
    except ApiException as error:
        if error.status != 409:
            raise

    def established() -> bool:
        got = api.read_custom_resource_definition(body["metadata"]["name"])
        conditions = (got.status.conditions if got.status else None) or []
        return any(c.type == "Established" and c.status == "True" for c in conditions)

    wait_for("the ModelServing CRD to be established", established, timeout=30)


def test_config(**changes: Any) -> OperatorConfig:
    base: dict[str, Any] = {"leaderElection": {"enabled": False}, "resyncSeconds": 30}
    base.update(changes)
    return OperatorConfig.model_validate(base)


@contextmanager
def running_controller(
    cluster: Cluster, config: OperatorConfig | None = None
) -> Iterator[Controller]:
    """The controller in this process (kopf in a thread) until the block ends."""
    ctl = Controller(config or test_config(), cluster.api_client, identity="test", serve_http=False)
    stop = threading.Event()
    ready = threading.Event()
    thread = threading.Thread(target=ctl.run, args=(stop, ready.set), daemon=True)
    thread.start()
    if not ready.wait(60):
        stop.set()
        raise AssertionError("the controller did not start within 60s")
    try:
        yield ctl
    finally:
        stop.set()
        thread.join(60)


@contextmanager
def controller_process(
    cluster: Cluster, log: Path, *extra: str, config: Path | None = None
) -> Iterator[subprocess.Popen[bytes]]:
    """``modelserving run`` as a separate process; killed (SIGKILL) when the block ends."""
    args = [sys.executable, "-m", "modelserving.cli.main", "run", "--kubeconfig"]
    args.append(str(cluster.kubeconfig))
    if config is not None:
        args += ["--config", str(config)]
    args += list(extra)
    env = {**os.environ, "PYTHONUNBUFFERED": "1"}
    with log.open("ab") as out:
        proc = subprocess.Popen(args, stdout=out, stderr=subprocess.STDOUT, env=env)
    try:
        yield proc
    finally:
        if proc.poll() is None:
            proc.send_signal(signal.SIGKILL)
        proc.wait(30)


def module_config_map(namespace: str, name: str, module: bytes, key: str = "plugin.wasm") -> Any:
    return client.V1ConfigMap(
        metadata=client.V1ObjectMeta(name=name, namespace=namespace),
        binary_data={key: base64.b64encode(module).decode()},
    )


def sha256(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()


def wasm_plugin(
    name: str,
    config_map: str,
    module: bytes,
    policy: str = "Fail",
    config: Any = None,
    **extra: Any,
) -> dict[str, Any]:
    spec: dict[str, Any] = {
        "name": name,
        "type": "Wasm",
        "module": {
            "configMapRef": {"name": config_map, "key": "plugin.wasm"},
            "sha256": sha256(module),
        },
        "failurePolicy": policy,
    }
    if config is not None:
        spec["config"] = config
    spec.update(extra)
    return spec


def model_serving(
    name: str,
    replicas: int = 1,
    workers: int = 1,
    plugins: list[dict[str, Any]] | None = None,
    **spec: Any,
) -> dict[str, Any]:
    container = {"name": "engine", "image": "registry.example/engine:1"}
    role: dict[str, Any] = {
        "name": "server",
        "replicas": 1,
        "entryTemplate": {"spec": {"containers": [container]}},
        "workerReplicas": workers,
    }
    if workers:
        role["workerTemplate"] = {"spec": {"containers": [copy.deepcopy(container)]}}
    body: dict[str, Any] = {
        "apiVersion": labels.API_VERSION,
        "kind": labels.KIND,
        "metadata": {"name": name},
        "spec": {
            "replicas": replicas,
            "template": {"roles": [role]},
            **spec,
        },
    }
    if plugins is not None:
        body["spec"]["plugins"] = plugins
    return body


class Objects:
    """Reads and writes in one namespace."""

    def __init__(self, cluster: Cluster, namespace: str) -> None:
        self.cluster = cluster
        self.namespace = namespace
        self.custom = client.CustomObjectsApi(cluster.api_client)
        self.core = client.CoreV1Api(cluster.api_client)

    def create(self, body: dict[str, Any]) -> dict[str, Any]:
        body = copy.deepcopy(body)
        body["metadata"]["namespace"] = self.namespace
        got: Any = self.custom.create_namespaced_custom_object(
            labels.GROUP, labels.VERSION, self.namespace, labels.PLURAL, body
        )
        return dict(got)

    def get(self, name: str) -> dict[str, Any]:
        got: Any = self.custom.get_namespaced_custom_object(
            labels.GROUP, labels.VERSION, self.namespace, labels.PLURAL, name
        )
        return dict(got)

    def patch(self, name: str, patch: dict[str, Any]) -> None:
        self.custom.patch_namespaced_custom_object(
            labels.GROUP,
            labels.VERSION,
            self.namespace,
            labels.PLURAL,
            name,
            patch,
            _content_type="application/merge-patch+json",
        )

    def delete(self, name: str) -> None:
        self.custom.delete_namespaced_custom_object(
            labels.GROUP, labels.VERSION, self.namespace, labels.PLURAL, name
        )

    def pods(self, ms: str) -> list[dict[str, Any]]:
        got = self.core.list_namespaced_pod(
            self.namespace, label_selector=f"{labels.NAME_LABEL}={ms}"
        )
        items: list[dict[str, Any]] = self.cluster.api_client.sanitize_for_serialization(got)[
            "items"
        ]
        return [p for p in items if not p["metadata"].get("deletionTimestamp")]

    def services(self, ms: str) -> list[str]:
        got = self.core.list_namespaced_service(
            self.namespace, label_selector=f"{labels.NAME_LABEL}={ms}"
        )
        return sorted(str(s.metadata.name) for s in got.items if s.metadata)

    def events(self, reason: str | None = None) -> list[Any]:
        got = self.core.list_namespaced_event(self.namespace)
        return [e for e in got.items if reason is None or e.reason == reason]

    def condition(self, name: str, type_: str) -> dict[str, Any] | None:
        status = self.get(name).get("status") or {}
        for cond in status.get("conditions") or []:
            if cond.get("type") == type_:
                return dict(cond)
        return None

    def wait_pods(self, ms: str, count: int, timeout: float = 60) -> list[dict[str, Any]]:
        def enough() -> list[dict[str, Any]] | None:
            pods = self.pods(ms)
            return pods if len(pods) == count else None

        result: list[dict[str, Any]] = wait_for(f"{count} Pods of {ms}", enough, timeout)
        return result

    def wait_condition(
        self, name: str, type_: str, status: str, timeout: float = 60
    ) -> dict[str, Any]:
        def matches() -> dict[str, Any] | None:
            cond = self.condition(name, type_)
            return cond if cond and cond.get("status") == status else None

        result: dict[str, Any] = wait_for(f"{name} {type_}={status}", matches, timeout)
        return result
