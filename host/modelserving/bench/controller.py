"""``make bench``, controller part: time until the Pods of a big ModelServing are all created,
and until it is available, with the controller's CPU and memory.

A ModelServing of 100 ServingGroups x 2 roles x (1 entry + 3 workers) = 800 Pods (and 200
headless Services) in three variants: without plugins (``none``), with three WebAssembly plugins
(``wasm``: the compiled demo-pod-tweaks built-in from a ConfigMap, three entries with different
configs) and with the native built-in making the same changes (``native``: one entry with the
three configs merged), whose Pods come out as with ``wasm``. ``native`` against ``none`` is what
the plugins' changes cost (bigger Pods for every component to store, schedule and watch), ``wasm``
against ``native`` what running them in the sandbox costs.

Every run gets a fresh local control plane (``modelserving.devcluster``: etcd, kube-apiserver,
scheduler, controller-manager and kwok Nodes, so every Pod is also scheduled and "runs") and a
fresh controller in a Python process of its own (kopf, the watches and the reconcile workers in
threads, as ``modelserving run`` has them, and the benchmark's Pod watch), so no run inherits
another's garbage (deleted objects, watch caches, etcd history, the process's memory). The
module's compiled artifact is on disk after the first run, as for a restarted controller. Once
both are up and the machine is quiet, the clock starts when the ModelServing is created and stops
when a watch on its Pods (name label) has seen the last one. The variants
rotate (none, native, wasm; then wasm, none, native; ...) for ``--rounds`` rounds (default 3).
Printed: every run (time, CPU of the controller and of the control plane, reconcile passes, hook
calls; then the time until the ModelServing's Available condition is True, the controller's CPU
until then per Pod, and the run's process's peak resident memory), the medians
of each variant and the plugins' overhead (target: WASM at most 5 % on the time), the same
comparisons made within each round (the variants of a round run back to back, which cancels the
machine's slow drift), and from the controller's metrics where the plugin time went. Figures are
printed, never asserted. Without the cluster binaries (and no Go to build them) or without the
compiled module the benchmark is skipped with a message.

The control plane shares the machine with the controller: on a small machine the figures measure
a CPU-saturated system (every CPU-second the plugins use delays something), and other load on the
machine shows as spread between runs of the same variant.
"""

from __future__ import annotations

import argparse
import base64
import dataclasses
import datetime
import hashlib
import json
import logging
import os
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager, suppress
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from modelserving import devcluster
from modelserving.api import labels
from modelserving.api.crd import model_serving_crd
from modelserving.api.operator import OperatorConfig
from modelserving.controller.kube import (
    CONFIG_MAPS,
    METADATA,
    MODEL_SERVINGS,
    PODS,
    ApiError,
    Kube,
    Resource,
    api_client,
)
from modelserving.controller.manager import Controller
from modelserving.plugins.artifacts import ArtifactMissing, builtin_wasm

GROUPS = 100
ROLES = ("prefill", "decode")
WORKERS = 3
POD_COUNT = GROUPS * len(ROLES) * (1 + WORKERS)
ROUNDS = 3
"""Runs per variant; the order rotates (none, native, wasm; wasm, none, native; ...)."""
VARIANTS = ("none", "native", "wasm")
KTHENA = "kthena"
"""The same ModelServing (no plugins) made by Kthena's Go controller instead of ours: run only
when a ``kthena-controller-manager`` binary is given (``--kthena`` or ``$KTHENA_CONTROLLER``)."""
KTHENA_FLAGS = (
    "--enable-webhook=false",
    "--controllers=modelserving",
    "--kube-api-qps=10000",
    "--kube-api-burst=10000",
)
"""Kthena's controller without its webhook server (it needs in-cluster TLS), only the
ModelServing controller, and with client-go's rate limit (5 per second by default) lifted, so
both controllers go as fast as the API server lets them."""
NODES = 8
"""kwok Nodes of 110 Pods each: room for all 800, so none stays unschedulable (and retried)."""
RUN_TIMEOUT_S = 300.0
SETTLE_TIMEOUT_S = 60.0
SETTLE_BUSY = 0.2
"""Between runs, wait for a second in which the controller and the control plane used less than
0.2 CPU-seconds (at most 60 s)."""
MODULE_FILE = "demo-pod-tweaks.wasm"
MODULE_CONFIG_MAP = "bench-tweaks"
PLUGIN_CONFIGS: dict[str, dict[str, Any]] = {
    "tweaks-a": {
        "annotations": {"example.com/team": "llm"},
        "env": [{"name": "NCCL_DEBUG", "value": "INFO"}],
    },
    "tweaks-b": {
        "annotations": {"example.com/cost-center": "1234"},
        "env": [{"name": "VAR_3", "value": "overridden"}],
    },
    "tweaks-c": {
        "annotations": {"example.com/tier": "gold", "example.com/owner": "bench"},
        "env": [{"name": "HF_HUB_OFFLINE", "value": "1"}, {"name": "TIER", "value": "gold"}],
    },
}
"""No ``runtimeClassName``: admission would refuse Pods naming a RuntimeClass that is absent."""

NAMESPACES = Resource("", "v1", "namespaces")
SERVICE_ACCOUNTS = Resource("", "v1", "serviceaccounts")
CRDS = Resource("apiextensions.k8s.io", "v1", "customresourcedefinitions")


def model_serving(name: str, plugins: list[dict[str, Any]], groups: int = GROUPS) -> dict[str, Any]:
    def template(kind: str) -> dict[str, Any]:
        container = {
            "name": "engine",
            "image": "vllm/vllm-openai:v0.10.0",
            "args": ["--model", "meta-llama/Llama-3.1-70B", "--role", kind],
            "env": [{"name": f"VAR_{i}", "value": "x" * 20} for i in range(10)],
            "resources": {"requests": {"cpu": "100m", "memory": "128Mi"}},
        }
        return {"metadata": {"labels": {"app": "bench"}}, "spec": {"containers": [container]}}

    roles = [
        {
            "name": role,
            "replicas": 1,
            "entryTemplate": template(f"{role}-entry"),
            "workerReplicas": WORKERS,
            "workerTemplate": template(f"{role}-worker"),
        }
        for role in ROLES
    ]
    spec: dict[str, Any] = {
        "replicas": groups,
        "schedulerName": "default-scheduler",
        "template": {"roles": roles},
    }
    if plugins:
        spec["plugins"] = plugins
    return {
        "apiVersion": labels.API_VERSION,
        "kind": labels.KIND,
        "metadata": {"name": name},
        "spec": spec,
    }


def wasm_plugins(module: bytes) -> list[dict[str, Any]]:
    digest = hashlib.sha256(module).hexdigest()
    return [
        {
            "name": name,
            "type": "Wasm",
            "module": {
                "configMapRef": {"name": MODULE_CONFIG_MAP, "key": "plugin.wasm"},
                "sha256": digest,
            },
            "failurePolicy": "Fail",
            "config": config,
        }
        for name, config in PLUGIN_CONFIGS.items()
    ]


def native_plugins() -> list[dict[str, Any]]:
    """The native built-in with the three configs of :func:`wasm_plugins` merged (a built-in
    entry is named after the built-in, so it can be listed once): the same annotations and env
    on every Pod; only the plugins-applied annotation is shorter (one entry, no digest)."""
    annotations: dict[str, str] = {}
    env: list[dict[str, str]] = []
    for config in PLUGIN_CONFIGS.values():
        annotations.update(config["annotations"])
        env += config["env"]
    name = MODULE_FILE.removesuffix(".wasm")
    config = {"annotations": annotations, "env": env}
    return [{"name": name, "failurePolicy": "Fail", "config": config}]


def module_config_map(module: bytes) -> dict[str, Any]:
    return {
        "apiVersion": "v1",
        "kind": "ConfigMap",
        "metadata": {"name": MODULE_CONFIG_MAP},
        "binaryData": {"plugin.wasm": base64.b64encode(module).decode()},
    }


# --- the cluster side ------------------------------------------------------------------------


def wait(what: str, check: Any, timeout: float, interval: float = 0.1) -> bool:
    """Poll ``check()`` until truthy; False (after a note) when ``timeout`` passes."""
    deadline = time.monotonic() + timeout
    while not check():
        if time.monotonic() > deadline:
            print(f"  (gave up waiting for {what} after {timeout:.0f}s)")
            return False
        time.sleep(interval)
    return True


def install_crd(kube: Kube) -> None:
    body = model_serving_crd()
    try:
        kube.request("POST", CRDS.path(None), body)
    except ApiError as exc:
        if not exc.conflict:
            raise

    def established() -> bool:
        got = kube.get(CRDS, None, body["metadata"]["name"]) or {}
        conditions = (got.get("status") or {}).get("conditions") or []
        return any(c.get("type") == "Established" and c.get("status") == "True" for c in conditions)

    def served() -> bool:
        try:
            kube.request("GET", MODEL_SERVINGS.path(None), query={"limit": "1"})
        except ApiError:
            return False  # 429 while the new resource's storage initializes
        return True

    if not (
        wait("the ModelServing CRD to be established", established, 30)
        and wait("ModelServings to be served", served, 30)
    ):
        raise RuntimeError("the ModelServing CRD was not established")
    # A fresh API server answers the first create of a custom resource soon after its CRD is
    # established about 2 s late (measured 2.005-2.011 s: in 4 of 4 creates made at once, and
    # in about half of the runs' ModelServings before this warm-up; later creates take 5-10 ms).
    # A ModelServing of no groups, created and deleted before the controller starts, takes that
    # one-off delay out of the measured runs.
    kube.create(MODEL_SERVINGS, "default", model_serving("bench-warm-up", [], groups=0))
    kube.delete(MODEL_SERVINGS, "default", "bench-warm-up")


def create_namespace(kube: Kube, name: str) -> None:
    kube.request("POST", NAMESPACES.path(None), {"metadata": {"name": name}})
    # Pods are refused until the ServiceAccount admission finds the namespace's default account.
    wait(
        f"ServiceAccount default in {name}",
        lambda: kube.get(SERVICE_ACCOUNTS, name, "default") is not None,
        30,
    )


def control_plane_cpu(pids: tuple[int, ...]) -> float | None:
    """CPU seconds used so far by the control plane's processes (from /proc; None without)."""
    if not pids:
        return None
    total = 0.0
    tick = os.sysconf("SC_CLK_TCK")
    for pid in pids:
        try:
            fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
        except (OSError, IndexError):
            return None
        total += (int(fields[11]) + int(fields[12])) / tick
    return total


def settle(pids: tuple[int, ...]) -> None:
    """Wait until this process and the control plane are quiet (the previous run's events
    handled by the controller's watches, the garbage collector and the scheduler) so that runs
    do not overlap: a second in which they used less than SETTLE_BUSY CPU-seconds."""

    def used() -> float | None:
        others = control_plane_cpu(pids)
        return None if others is None else others + time.process_time()

    deadline = time.monotonic() + SETTLE_TIMEOUT_S
    before = used()
    while before is not None and time.monotonic() < deadline:
        time.sleep(1.0)
        after = used()
        if after is None or after - before < SETTLE_BUSY:
            return
        before = after
    if before is None:
        time.sleep(5.0)


class PodWatch:
    """Counts the distinct Pods of one ModelServing that a watch reports as added.

    Opened before the ModelServing is created, from the resourceVersion of an (empty) list,
    so no Pod is missed; metadata only, so the watch costs this process little. The API server
    may end a watch early (a busy server drops a watcher that falls behind); then it is resumed
    from the last resourceVersion seen, or re-listed when that is too old (``restarts``).
    """

    def __init__(
        self, kube: Kube, namespace: str, name: str, want: int, selector: str | None = None
    ) -> None:
        self.kube = kube
        self.namespace = namespace
        self.selector = selector or f"{labels.NAME_LABEL}={name}"
        self.want = want
        self.names: set[str] = set()
        self.first: float | None = None
        self.last: float | None = None
        self.error: str | None = None
        self.restarts = 0
        self.done = threading.Event()
        self._response: Any = self._open(self._list())
        self._thread = threading.Thread(target=self._read, name="bench-watch", daemon=True)
        self._thread.start()

    def _list(self) -> str:
        """Note the Pods there are; the list's resourceVersion. The list comes from the API
        server's watch cache (resourceVersion 0), so a watch from its resourceVersion starts at
        once: from a newer one (a consistent list from etcd) the server first waits, up to
        seconds, for its cache to catch up, and the first Pods would be seen late."""
        query = {"labelSelector": self.selector, "resourceVersion": "0"}
        listed = self.kube.request("GET", PODS.path(self.namespace), query=query)
        for pod in listed.get("items") or []:
            self._seen(pod["metadata"]["name"])
        return str(listed["metadata"]["resourceVersion"])

    def _open(self, resource_version: str) -> Any:
        query = {
            "labelSelector": self.selector,
            "watch": "1",
            "resourceVersion": resource_version,
            "timeoutSeconds": str(int(RUN_TIMEOUT_S) + 30),
            "allowWatchBookmarks": "false",
        }
        return self.kube.stream(PODS, self.namespace, query, RUN_TIMEOUT_S + 60, accept=METADATA)

    def _seen(self, name: str) -> None:
        now = time.perf_counter()
        self.names.add(name)
        if self.first is None:
            self.first = now
        if self.last is None and len(self.names) >= self.want:
            self.last = now

    def _read(self) -> None:
        resource_version: str | None = None
        try:
            while not self.done.is_set() and self.last is None:
                for line in self._response:
                    if not line.strip():
                        continue
                    event = json.loads(line)
                    meta = (event.get("object") or {}).get("metadata") or {}
                    if event.get("type") == "ERROR":
                        resource_version = None  # 410 Gone: too old; list again
                        break
                    resource_version = meta.get("resourceVersion") or resource_version
                    if event.get("type") == "ADDED":
                        self._seen(meta["name"])
                        if self.last is not None:
                            return
                if self.done.is_set():
                    return
                self._response.release_conn()
                self.restarts += 1
                self._response = self._open(resource_version or self._list())
        except Exception as exc:  # a closed connection when the run timed out
            if not self.done.is_set():
                self.error = f"{type(exc).__name__}: {exc}"
        finally:
            self.done.set()
            self._response.release_conn()

    def wait(self, timeout: float) -> bool:
        return self.done.wait(timeout) and self.last is not None

    def close(self) -> None:
        if not self.done.is_set():
            self.done.set()
            self._response.shutdown()


# --- the controller's metrics ----------------------------------------------------------------


@dataclass
class Snapshot:
    """Sums of the controller's metrics at one moment."""

    hook_calls: dict[tuple[str, str, str], float] = field(default_factory=dict)
    """(plugin, hook, result) -> calls."""
    hook_seconds: dict[tuple[str, str], float] = field(default_factory=dict)
    """(plugin, hook) -> summed wall time."""
    reconciles: float = 0.0
    reconcile_seconds: float = 0.0
    pods_created: float = 0.0

    @classmethod
    def of(cls, ctl: Controller) -> Snapshot:
        snap = cls()
        for family in ctl.metrics.registry.collect():
            for s in family.samples:
                lab = s.labels
                if s.name == "modelserving_plugin_hook_calls_total":
                    snap.hook_calls[(lab["plugin"], lab["hook"], lab["result"])] = s.value
                elif s.name == "modelserving_plugin_hook_duration_seconds_sum":
                    snap.hook_seconds[(lab["plugin"], lab["hook"])] = s.value
                elif s.name == "modelserving_reconcile_duration_seconds_count":
                    snap.reconciles += s.value
                elif s.name == "modelserving_reconcile_duration_seconds_sum":
                    snap.reconcile_seconds += s.value
                elif s.name == "modelserving_pods_created_total":
                    snap.pods_created = s.value
        return snap

    def minus(self, other: Snapshot) -> Snapshot:
        def sub(a: dict[Any, float], b: dict[Any, float]) -> dict[Any, float]:
            return {k: v - b.get(k, 0.0) for k, v in a.items() if v - b.get(k, 0.0)}

        return Snapshot(
            sub(self.hook_calls, other.hook_calls),
            sub(self.hook_seconds, other.hook_seconds),
            self.reconciles - other.reconciles,
            self.reconcile_seconds - other.reconcile_seconds,
            self.pods_created - other.pods_created,
        )

    def plus(self, other: Snapshot) -> Snapshot:
        def add(a: dict[Any, float], b: dict[Any, float]) -> dict[Any, float]:
            return {k: a.get(k, 0.0) + b.get(k, 0.0) for k in a.keys() | b.keys()}

        return Snapshot(
            add(self.hook_calls, other.hook_calls),
            add(self.hook_seconds, other.hook_seconds),
            self.reconciles + other.reconciles,
            self.reconcile_seconds + other.reconcile_seconds,
            self.pods_created + other.pods_created,
        )

    @property
    def create_hook_seconds(self) -> float:
        return sum(v for (_p, hook), v in self.hook_seconds.items() if hook == "OnPodCreate")


# --- runs ------------------------------------------------------------------------------------


@dataclass
class Run:
    variant: str
    seconds: float | None
    """From creating the ModelServing until the watch saw its last Pod (None: not all came)."""
    first_pod: float | None
    metrics: Snapshot
    """The controller's metrics over the run (and the second after it)."""
    cpu: float
    """CPU seconds this process (the controller, and the watch) used in ``seconds``."""
    control_plane_cpu: float | None
    """CPU seconds the control plane's processes used in ``seconds``."""
    watch_restarts: int = 0
    available: float | None = None
    """From creating the ModelServing until its Available condition was True."""
    cpu_available: float | None = None
    """CPU seconds this process used until then."""
    peak_rss_mb: float | None = None
    """This process's peak resident memory during the run (VmHWM, reset before it)."""
    idle_rss_mb: float | None = None
    """Its resident memory before the ModelServing was created."""
    ready_last: float | None = None
    """From the ModelServing's creation until its last Pod's Ready condition turned True, as the
    API server and the Nodes stamped them (whole seconds): ``available`` minus this is how late
    the controller reported what the Pods showed."""


@contextmanager
def running_controller(client: Any, config: OperatorConfig) -> Iterator[Controller]:
    """The controller in this process (kopf and the workers in threads) until the block ends."""
    ctl = Controller(config, client, identity="bench", serve_http=False)
    stop = threading.Event()
    ready = threading.Event()
    thread = threading.Thread(target=ctl.run, args=(stop, ready.set), daemon=True)
    thread.start()
    try:
        if not ready.wait(60):
            raise RuntimeError("the controller did not start within 60s")
        yield ctl
    finally:
        stop.set()
        thread.join(60)


@contextmanager
def fresh_cluster(
    binaries: dict[str, Path], nodes: int = NODES
) -> Iterator[tuple[Path, tuple[int, ...]]]:
    """A new control plane (kubeconfig, process ids) for one run; gone when the block ends."""
    with tempfile.TemporaryDirectory(prefix="modelserving-bench-") as tmp:
        directory = Path(tmp) / "cluster"
        try:
            state = devcluster.up(
                directory, nodes=nodes, binaries=binaries, die_with_parent=True, timeout=120
            )
            yield state.kubeconfig, tuple(p.pid for p in state.processes)
        finally:
            devcluster.down(directory)


def _status_kb(field: str, pid: int | str = "self") -> float | None:
    """A size from /proc/PID/status, in kB (None where there is no /proc)."""
    try:
        with open(f"/proc/{pid}/status") as f:
            for line in f:
                if line.startswith(field + ":"):
                    return float(line.split()[1])
    except OSError:
        return None
    return None


def reset_peak_rss(pid: int | str = "self") -> None:
    """Start VmHWM (the peak resident memory) over from the current resident memory."""
    try:
        with open(f"/proc/{pid}/clear_refs", "w") as f:
            f.write("5")
    except OSError:
        pass


def wait_available(kube: Kube, namespace: str, name: str, timeout: float) -> float | None:
    """perf_counter() when the ModelServing's Available condition is True (None: not in time)."""
    deadline = time.perf_counter() + timeout
    while time.perf_counter() < deadline:
        got = kube.get(MODEL_SERVINGS, namespace, name) or {}
        for cond in (got.get("status") or {}).get("conditions") or []:
            if cond.get("type") == "Available" and cond.get("status") == "True":
                return time.perf_counter()
        time.sleep(0.1)
    return None


class Probe:
    """How a run reads the controller it measures: ours runs in this process (its CPU, memory
    and metrics), :class:`ChildProbe` reads another process's from /proc."""

    pids: tuple[int, ...] = ()
    """Processes besides this one that ``settle`` waits for."""

    def __init__(self, ctl: Controller | None = None) -> None:
        self.ctl = ctl

    def cpu(self) -> float:
        return time.process_time()

    def snapshot(self) -> Snapshot:
        return Snapshot.of(self.ctl) if self.ctl is not None else Snapshot()

    def reset_peak(self) -> None:
        reset_peak_rss()

    def status_kb(self, field: str) -> float | None:
        return _status_kb(field)


class ChildProbe(Probe):
    """A controller in a process of its own (Kthena's): no metrics of ours."""

    def __init__(self, pid: int) -> None:
        super().__init__()
        self.pid = pid
        self.pids = (pid,)

    def cpu(self) -> float:
        return control_plane_cpu(self.pids) or 0.0

    def reset_peak(self) -> None:
        reset_peak_rss(self.pid)

    def status_kb(self, field: str) -> float | None:
        return _status_kb(field, self.pid)


def _stamp(text: str | None) -> float | None:
    if not text:
        return None
    return datetime.datetime.fromisoformat(text.replace("Z", "+00:00")).timestamp()


def last_ready(kube: Kube, namespace: str, name: str) -> float | None:
    """Seconds from the ModelServing's creation to the latest Ready transition of its Pods
    (None unless every Pod is Ready), from the objects' own timestamps."""
    ms = kube.get(MODEL_SERVINGS, namespace, name) or {}
    created = _stamp((ms.get("metadata") or {}).get("creationTimestamp"))
    query = {"labelSelector": f"{labels.NAME_LABEL}={name}"}
    pods = kube.request("GET", PODS.path(namespace), query=query).get("items") or []
    latest: float | None = None
    for pod in pods:
        ready = [
            c
            for c in (pod.get("status") or {}).get("conditions") or []
            if c.get("type") == "Ready" and c.get("status") == "True"
        ]
        stamp = _stamp(ready[0].get("lastTransitionTime")) if ready else None
        if stamp is None:
            return None
        latest = stamp if latest is None else max(latest, stamp)
    return None if created is None or latest is None else latest - created


def measure(
    kube: Kube, probe: Probe, pids: tuple[int, ...], variant: str, module: bytes, groups: int
) -> Run:
    """One ModelServing; the seconds until all its Pods were created."""
    namespace, name = f"bench-{variant}", f"llm-{variant}"
    create_namespace(kube, namespace)
    plugins: list[dict[str, Any]] = []
    if variant == "wasm":
        kube.create(CONFIG_MAPS, namespace, module_config_map(module))
        plugins = wasm_plugins(module)
    elif variant == "native":
        plugins = native_plugins()
    want = groups * len(ROLES) * (1 + WORKERS)
    body = model_serving(name, plugins, groups)
    body["metadata"]["namespace"] = namespace
    settle(pids + probe.pids)
    watch = PodWatch(kube, namespace, name, want)
    before = probe.snapshot()
    probe.reset_peak()
    idle = probe.status_kb("VmRSS")
    cpu_start, others = probe.cpu(), control_plane_cpu(pids)
    started = time.perf_counter()
    kube.create(MODEL_SERVINGS, namespace, body)
    finished = watch.wait(RUN_TIMEOUT_S)
    cpu, others_after = probe.cpu() - cpu_start, control_plane_cpu(pids)
    others = None if others is None or others_after is None else others_after - others
    watch.close()
    ready_at = wait_available(kube, namespace, name, RUN_TIMEOUT_S) if finished else None
    cpu_available = probe.cpu() - cpu_start if ready_at is not None else None
    peak = probe.status_kb("VmHWM")
    # The pass that created the Pods ends with a status write; let it finish so its metrics
    # (hook calls are counted as they happen, Pods and reconciles at the end) are this run's.
    time.sleep(1.0)
    metrics = probe.snapshot().minus(before)
    ready_last = last_ready(kube, namespace, name) if ready_at is not None else None
    if not finished:
        why = watch.error or f"{len(watch.names)} of {want} Pods after {RUN_TIMEOUT_S:.0f}s"
        print(f"  {namespace}/{name} did not finish: {why}")
    return Run(
        variant,
        (watch.last - started) if finished and watch.last is not None else None,
        (watch.first - started) if watch.first is not None else None,
        metrics,
        cpu,
        others,
        watch.restarts,
        (ready_at - started) if ready_at is not None else None,
        cpu_available,
        peak / 1024 if peak is not None else None,
        idle / 1024 if idle is not None else None,
        ready_last,
    )


@contextmanager
def kthena_controller(binary: Path, kubeconfig: Path, grace: float = 1.0) -> Iterator[ChildProbe]:
    """Kthena's controller manager against the run's API server until the block ends (its log
    beside the kubeconfig; its last lines are shown if it exits within ``grace`` seconds)."""
    log_path = kubeconfig.parent / "kthena-controller-manager.log"
    command = [str(binary), f"--kubeconfig={kubeconfig}", *KTHENA_FLAGS]
    with open(log_path, "wb") as log:
        process = subprocess.Popen(command, stdout=log, stderr=subprocess.STDOUT)
    try:
        with suppress(subprocess.TimeoutExpired):
            process.wait(grace)
        if process.poll() is not None:
            tail = log_path.read_text(errors="replace").strip().splitlines()[-5:]
            raise RuntimeError(
                f"{binary} exited with {process.returncode} at start: " + " | ".join(tail)
            )
        yield ChildProbe(process.pid)
    finally:
        process.terminate()
        try:
            process.wait(30)
        except subprocess.TimeoutExpired:
            process.kill()
            process.wait()


def one_run(
    binaries: dict[str, Path],
    variant: str,
    module: bytes,
    groups: int = GROUPS,
    kthena: Path | None = None,
) -> Run:
    """A fresh control plane and controller, one measured ModelServing, both torn down."""
    config = OperatorConfig.model_validate({"leaderElection": {"enabled": False}})
    with fresh_cluster(binaries) as (kubeconfig, pids):
        client = api_client(str(kubeconfig), pool_size=config.concurrency.api_writes + 8)
        ours = api_client(str(kubeconfig), pool_size=4)
        try:
            kube = Kube(ours)
            install_crd(kube)
            if variant == KTHENA:
                if kthena is None:
                    raise RuntimeError("the kthena variant needs the controller's binary")
                with kthena_controller(kthena, kubeconfig) as probe:
                    return measure(kube, probe, pids, variant, module, groups)
            with running_controller(client, config) as ctl:
                return measure(kube, Probe(ctl), pids, variant, module, groups)
        finally:
            client.close()
            ours.close()


RUN_PREFIX = "bench-run: "


def run_as_json(run: Run) -> str:
    fields = dataclasses.asdict(run)
    fields["metrics"] = {
        "hook_calls": [[*k, v] for k, v in run.metrics.hook_calls.items()],
        "hook_seconds": [[*k, v] for k, v in run.metrics.hook_seconds.items()],
        "reconciles": run.metrics.reconciles,
        "reconcile_seconds": run.metrics.reconcile_seconds,
        "pods_created": run.metrics.pods_created,
    }
    return json.dumps(fields)


def run_from_json(text: str) -> Run:
    fields = json.loads(text)
    m = fields.pop("metrics")
    metrics = Snapshot(
        {(p, h, r): v for p, h, r, v in m["hook_calls"]},
        {(p, h): v for p, h, v in m["hook_seconds"]},
        m["reconciles"],
        m["reconcile_seconds"],
        m["pods_created"],
    )
    return Run(metrics=metrics, **fields)


def run_in_child(variant: str, groups: int = GROUPS, kthena: Path | None = None) -> Run:
    """``one_run`` in a new Python process, so that its CPU and peak memory are the controller's
    alone, not those of the runs before it in this process."""
    command = [sys.executable, "-m", "modelserving.bench.controller", "--one", variant]
    command += ["--groups", str(groups)]
    if kthena is not None:
        command += ["--kthena", str(kthena)]
    done = subprocess.run(
        command, capture_output=True, text=True, timeout=RUN_TIMEOUT_S * 3, check=False
    )
    for line in done.stdout.splitlines():
        if line.startswith(RUN_PREFIX):
            return run_from_json(line[len(RUN_PREFIX) :])
        print(line)
    tail = (done.stderr or "").strip().splitlines()[-5:]
    raise RuntimeError(f"the {variant} run failed (exit {done.returncode}): " + " | ".join(tail))


def report_run(index: int, run: Run) -> None:
    m = run.metrics
    took = f"{run.seconds:6.2f} s" if run.seconds is not None else "   n/a  "
    rate = f"{POD_COUNT / run.seconds:4.0f} Pods/s" if run.seconds else "     n/a"
    first = f"{run.first_pod:4.2f} s" if run.first_pod is not None else " n/a"
    calls = sum(v for (_p, hook, _r), v in m.hook_calls.items() if hook == "OnPodCreate")
    hooks = f"OnPodCreate {calls:.0f} calls {m.create_hook_seconds:4.2f} s" if calls else "no hooks"
    passes = f"{m.reconciles:.0f} reconcile pass{'' if m.reconciles == 1 else 'es'}"
    others = f"{run.control_plane_cpu:4.1f} s" if run.control_plane_cpu is not None else "n/a"
    print(
        f"  run {index}  {run.variant:<6}  {took} ({rate}), first Pod {first}; CPU: controller "
        f"{run.cpu:4.2f} s, control plane {others}; {passes} {m.reconcile_seconds:5.2f} s, "
        f"{hooks}" + (f"; Pod watch resumed {run.watch_restarts}x" if run.watch_restarts else "")
    )
    if run.available is not None and run.cpu_available is not None:
        per_pod = run.cpu_available / POD_COUNT * 1000
        rss = f"{run.peak_rss_mb:.0f} MB" if run.peak_rss_mb is not None else "n/a"
        idle = f"{run.idle_rss_mb:.0f} MB" if run.idle_rss_mb is not None else "n/a"
        ready = f"last Pod Ready after {run.ready_last:.0f} s, " if run.ready_last else ""
        print(
            f"           {ready}available after {run.available:6.2f} s; controller CPU to "
            f"available {run.cpu_available:4.2f} s ({per_pod:.1f} ms per Pod); peak RSS {rss} "
            f"(idle before {idle})"
        )


def report_hooks(runs: list[Run]) -> None:
    wasm = [r for r in runs if r.variant == "wasm"]
    if not wasm:
        return
    total = Snapshot()
    for r in wasm:
        total = total.plus(r.metrics)
    print(
        f"  where the plugin time went (controller metrics over {len(wasm)} wasm runs; the wall "
        "time of a call includes waiting for the GIL while the API writes run):"
    )
    plugins = sorted({p for (p, hook) in total.hook_seconds if hook == "OnPodCreate"})
    for plugin in plugins:
        calls = sum(
            v for (p, h, _r), v in total.hook_calls.items() if p == plugin and h == "OnPodCreate"
        )
        failed = sum(
            v
            for (p, h, r), v in total.hook_calls.items()
            if p == plugin and h == "OnPodCreate" and r != "ok"
        )
        seconds = total.hook_seconds[(plugin, "OnPodCreate")]
        mean = seconds / calls * 1e6 if calls else 0.0
        note = f", {failed:.0f} failed" if failed else ""
        print(
            f"    {plugin:<10} OnPodCreate {calls:6.0f} calls, mean {mean:6.1f} us, "
            f"total {seconds:5.2f} s{note}"
        )
    timed = [r for r in wasm if r.seconds]
    if timed:
        per_run = statistics.median(r.metrics.create_hook_seconds for r in timed)
        wall = statistics.median(r.seconds or 0.0 for r in timed)
        print(
            f"    per wasm run (median): {per_run:.2f} s in OnPodCreate, in the reconcile thread "
            f"while the write pool creates the ServingGroups already done = "
            f"{per_run / wall * 100:.1f} % of the run's {wall:.2f} s"
        )


COMPARED = (("none", "native"), ("native", "wasm"), ("none", "wasm"), (KTHENA, "none"))
"""(base, other) pairs the summary compares; ``kthena`` against ``none``: ours against Kthena's
controller on the same ModelServing."""


def variants_of(runs: list[Run]) -> list[str]:
    return [v for v in (*VARIANTS, KTHENA) if any(r.variant == v for r in runs)]


def summary(runs: list[Run]) -> None:
    def medians(figure: Callable[[Run], float | None], unit: str, what: str) -> None:
        found: dict[str, float] = {}
        for variant in variants_of(runs):
            values = [v for r in runs if r.variant == variant and (v := figure(r)) is not None]
            if values:
                found[variant] = statistics.median(values)
        if "none" not in found:
            return
        line = f"  {what:<28} median " + ", ".join(
            f"{variant} {value:6.2f} {unit}" for variant, value in found.items()
        )
        changes = [
            f"{b} vs {a} {(found[b] / found[a] - 1) * 100:+5.1f} %"
            for a, b in COMPARED
            if a in found and b in found and found[a]
        ]
        print(line + ("; " + ", ".join(changes) if changes else ""))

    for variant in variants_of(runs):
        times = [r.seconds for r in runs if r.variant == variant and r.seconds is not None]
        if times:
            print(
                f"  {variant:<6} {len(times)} runs: "
                + ", ".join(f"{t:.2f}" for t in times)
                + f" s (median {statistics.median(times):.2f} s)"
            )
    medians(lambda r: r.seconds, "s", f"time to {POD_COUNT} Pods:")
    medians(lambda r: r.cpu, "s", "controller CPU in that time:")
    medians(lambda r: r.control_plane_cpu, "s", "control plane CPU:")
    medians(lambda r: r.ready_last, "s", "time to all Pods Ready:")
    medians(lambda r: r.available, "s", "time to available:")
    medians(
        lambda r: r.cpu_available / POD_COUNT * 1000 if r.cpu_available is not None else None,
        "ms",
        "CPU per Pod to available:",
    )
    medians(lambda r: r.peak_rss_mb, "MB", "peak RSS of the process:")
    print(
        "  targets (issue 21): controller CPU to available at most 5 ms per Pod, peak RSS at "
        "most 100 MB (this process: the controller and the benchmark's Pod watch)"
    )
    if any(r.variant == KTHENA for r in runs):
        print(
            "  target (issue 21): time to available (none) at most Kthena's; Kthena's CPU and "
            "memory are its process's alone, ours include the benchmark's Pod watch"
        )
    paired(runs)
    print(
        "  target: the three WASM plugins add at most 5 % to the time to all Pods "
        "(wasm vs none; wasm vs native is the sandbox's share)"
    )
    report_hooks(runs)


def paired(runs: list[Run]) -> None:
    """Each round's variants ran back to back, so comparing them within a round cancels what
    drifts slowly (this machine's speed: a fixed CPU-bound loop varies by about 10 % here)."""
    size = len(variants_of(runs)) or 1
    rounds = [runs[i : i + size] for i in range(0, len(runs), size)]
    for a, b in COMPARED:
        ratios = []
        for group in rounds:
            by_variant = {r.variant: r.seconds for r in group}
            base, other = by_variant.get(a), by_variant.get(b)
            if base and other:
                ratios.append((other / base - 1) * 100)
        if len(ratios) >= 2:
            print(
                f"  {b} vs {a} within each round: median {statistics.median(ratios):+5.1f} % "
                f"(rounds: {', '.join(f'{x:+.0f}' for x in ratios)} %)"
            )


def run_order(rounds: int, variants: tuple[str, ...] = VARIANTS) -> list[str]:
    """none, native, wasm; then wasm, none, native; ... (each variant in each place in turn)."""
    order: list[str] = []
    for i in range(rounds):
        shift = i % len(variants)
        order += variants[-shift:] + variants[:-shift] if shift else variants
    return order


def benchmark(
    binaries: dict[str, Path],
    rounds: int = ROUNDS,
    variants: tuple[str, ...] = VARIANTS,
    kthena: Path | None = None,
) -> None:
    """The runs, each on its own control plane."""
    try:
        builtin_wasm(MODULE_FILE)  # the runs load it
    except ArtifactMissing as exc:
        print(f"  skipped: {exc}")
        return
    config = OperatorConfig()
    print(
        f"  controller in a process of its own per run: {config.concurrency.reconciles} "
        "reconcile workers, "
        f"{config.concurrency.api_writes} concurrent API writes "
        f"({config.concurrency.api_writes + 8} connections), the watches in threads; "
        f"{os.cpu_count()} CPUs shared with the control plane; a fresh control plane and "
        "controller for every run"
    )
    warm = run_in_child("wasm", groups=2)
    print(f"  warm-up (2 ServingGroups, wasm: the module compiled): {warm.seconds or 0:.2f} s")
    if kthena is not None:
        print(f"  kthena: {kthena} {' '.join(KTHENA_FLAGS)}")
    runs = []
    for index, variant in enumerate(run_order(rounds, variants), start=1):
        runs.append(run_in_child(variant, kthena=kthena))
        report_run(index, runs[-1])
        sys.stdout.flush()
    summary(runs)


def add_kthena_argument(parser: argparse.ArgumentParser, what: str) -> None:
    """``--kthena BIN`` (default ``$KTHENA_CONTROLLER``): Kthena's controller binary, and
    ``what`` the benchmark does with it."""
    parser.add_argument(
        "--kthena",
        type=Path,
        default=os.environ.get("KTHENA_CONTROLLER") or None,
        help=f"a kthena-controller-manager binary: {what} (default: $KTHENA_CONTROLLER)",
    )


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(prog="python -m modelserving.bench.controller")
    parser.add_argument(
        "--rounds", type=int, default=ROUNDS, help=f"runs per variant (default {ROUNDS})"
    )
    parser.add_argument(
        "--variants",
        default=None,
        help="comma-separated, in the order of the first round (default: none,native,wasm, and "
        "kthena when its binary is given)",
    )
    add_kthena_argument(parser, "also run the ModelServing (no plugins) with Kthena's controller")
    parser.add_argument("--one", choices=(*VARIANTS, KTHENA), help=argparse.SUPPRESS)
    parser.add_argument("--groups", type=int, default=GROUPS, help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    rounds = max(1, args.rounds)
    kthena: Path | None = args.kthena.resolve() if args.kthena else None
    if args.variants:
        variants = tuple(v.strip() for v in args.variants.split(",") if v.strip())
        unknown = [v for v in variants if v not in (*VARIANTS, KTHENA)]
        if unknown or not variants:
            known = ", ".join((*VARIANTS, KTHENA))
            parser.error(f"unknown variants {unknown}: choose from {known}")
    else:
        variants = VARIANTS + ((KTHENA,) if kthena else ())
    if KTHENA in variants and (kthena is None or not kthena.is_file()):
        parser.error("the kthena variant needs --kthena (or $KTHENA_CONTROLLER): its binary")
    # kopf's notes (signals in a thread, retries while the API server starts) are not figures.
    logging.getLogger("kopf").setLevel(logging.ERROR)
    if args.one:  # one run, in a process of its own (run_in_child)
        found = devcluster.cached_binaries()
        if found is None:
            raise SystemExit("no local control plane binaries")
        module = builtin_wasm(MODULE_FILE) if args.one == "wasm" else b""
        run = one_run(found, args.one, module, groups=args.groups, kthena=kthena)
        print(RUN_PREFIX + run_as_json(run), flush=True)
        return
    print(
        f"controller benchmark: ModelServing of {GROUPS} ServingGroups x {len(ROLES)} roles x "
        f"(1 entry + {WORKERS} workers) = {POD_COUNT} Pods: without plugins, with three "
        "WASM plugins (demo-pod-tweaks from a ConfigMap) and with the same three as native Python"
    )
    binaries = devcluster.cached_binaries()
    if binaries is None:
        print("  building the local control plane (first time: minutes)", flush=True)
        try:
            binaries = devcluster.build_all(quiet=True)
        except devcluster.BuildError as exc:
            first = str(exc).splitlines()[0]
            print(f"  skipped: the local control plane could not be built ({first})")
            return
    print(
        f"  control plane: Kubernetes {devcluster.KUBERNETES_VERSION}, kwok "
        f"{devcluster.KWOK_VERSION}, {NODES} fake Nodes; Pods use default-scheduler",
        flush=True,
    )
    try:
        benchmark(binaries, rounds, variants, kthena)
    except (devcluster.ClusterError, OSError) as exc:
        print(f"  stopped: the local control plane failed ({exc})")


if __name__ == "__main__":
    main()
