"""Start, inspect and stop a local control plane in one folder (``.cluster/`` for ``make``).

Called by ``python -m modelserving.devcluster up|down|status|env``, by ``modelserving run
--local-cluster``, by the controller benchmark and by the integration tests' session fixture
(with a temporary folder). ``up`` runs etcd, kube-apiserver (TLS, RBAC, an admin client
certificate in ``system:masters``), kube-controller-manager, kube-scheduler and kwok on free
loopback ports, writes ``<folder>/kubeconfig``, registers fake kwok Nodes and waits
until ``/readyz`` is ok, the Nodes are Ready and the ``default`` ServiceAccount exists. Every
started process is recorded in ``<folder>/state.json`` as it starts, so ``down`` (or the next
``up`` after a crash) stops exactly those PIDs. A start that fails, or is interrupted by a signal
(``interrupts``), stops every process it started before the error propagates; while it runs,
whether a component exited is the kernel's answer to its parent (``procs.Child``), never a guess
from ``/proc``.

Volcano (vc-scheduler, vc-controller-manager) starts once its CRDs (from the build cache) are
established, and the cluster is ready when its default Queue is open.

Folder layout: ``state.json``, ``kubeconfig``, ``pki/``, ``etcd/`` (data), ``logs/<name>.log``,
``bin/kubectl`` (a symlink into the build cache).
"""

from __future__ import annotations

import base64
import json
import os
import shutil
import ssl
import time
import urllib.error
import urllib.request
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import yaml

from modelserving.devcluster.build import ASSET_CRDS, build_all, bundle_assets
from modelserving.devcluster.certs import Pki, make_pki
from modelserving.devcluster.interrupts import Interrupted, SignalGuard
from modelserving.devcluster.procs import (
    Child,
    ProcessRecord,
    find_strays,
    free_ports,
    is_ours,
    kill_stray,
    spawn,
    stop,
)
from modelserving.devcluster.versions import KUBERNETES_VERSION, VOLCANO_BUNDLE, bundle_dir

STATE_FILE = "state.json"
STATE_VERSION = 1
SERVICE_CIDR = "10.0.0.0/24"
NODE_ANNOTATION = ("kwok.x-k8s.io/node", "fake")
NODE_LABEL = ("type", "kwok")
NODE_LEASE_SECONDS = 40
SERVICE_ACCOUNT_PATH = "/api/v1/namespaces/default/serviceaccounts/default"
PORT_NAMES = (
    "etcd",
    "etcd-peer",
    "kube-apiserver",
    "kube-controller-manager",
    "kube-scheduler",
    "kwok",
)
PROGRAMS = (
    "etcd",
    "kube-apiserver",
    "kube-controller-manager",
    "kube-scheduler",
    "kwok",
    "vc-scheduler",
    "vc-controller-manager",
)
VOLCANO_SCHEDULER_CONF = "volcano-scheduler.conf"
VOLCANO_SCHEDULER_CONF_TEXT = """\
actions: "enqueue, allocate, backfill"
tiers:
- plugins:
  - name: priority
  - name: gang
  - name: conformance
- plugins:
  - name: overcommit
  - name: drf
  - name: predicates
  - name: proportion
  - name: nodeorder
"""
"""vc-scheduler's configuration: its built-in default, written out (without a file it logs an
error before using the default). ``gang`` holds a PodGroup's Pods until ``minMember`` fit."""
VOLCANO_QUEUE_PATH = "/apis/scheduling.volcano.sh/v1beta1/queues/default"
"""The default Queue: vc-scheduler creates it, vc-controller-manager opens it."""
DEFAULT_TIMEOUT = 300.0
"""Seconds per wait: a loaded 2-core machine (compiling, say) can need minutes to start."""

Log = Callable[[str], None]


class ClusterError(RuntimeError):
    """The control plane did not come up; the message names the component and its log."""


@dataclass(frozen=True)
class ClusterState:
    """What ``state.json`` records about one cluster folder."""

    directory: Path
    ports: Mapping[str, int]
    processes: tuple[ProcessRecord, ...] = ()
    ready: bool = False
    started_at: float = field(default_factory=time.time)

    @property
    def kubeconfig(self) -> Path:
        return self.directory / "kubeconfig"

    @property
    def server(self) -> str:
        return f"https://127.0.0.1:{self.ports['kube-apiserver']}"

    @property
    def pki(self) -> Pki:
        return Pki(self.directory / "pki")

    @property
    def logs(self) -> Path:
        return self.directory / "logs"

    @property
    def kubectl(self) -> Path:
        return self.directory / "bin" / "kubectl"

    def to_json(self) -> dict[str, Any]:
        return {
            "version": STATE_VERSION,
            "directory": str(self.directory),
            "ports": dict(self.ports),
            "processes": [record.to_json() for record in self.processes],
            "ready": self.ready,
            "started_at": self.started_at,
            "kubernetes": KUBERNETES_VERSION,
        }

    @classmethod
    def from_json(cls, data: Mapping[str, Any]) -> ClusterState:
        if data.get("version") != STATE_VERSION:
            raise ValueError(f"unknown state version {data.get('version')!r}")
        return cls(
            directory=Path(data["directory"]),
            ports={str(k): int(v) for k, v in data["ports"].items()},
            processes=tuple(ProcessRecord.from_json(p) for p in data["processes"]),
            ready=bool(data.get("ready", False)),
            started_at=float(data.get("started_at", 0.0)),
        )

    def with_process(self, record: ProcessRecord) -> ClusterState:
        return ClusterState(
            self.directory, self.ports, (*self.processes, record), self.ready, self.started_at
        )

    def as_ready(self) -> ClusterState:
        return ClusterState(self.directory, self.ports, self.processes, True, self.started_at)


def save_state(state: ClusterState) -> None:
    """Write ``state.json`` atomically (a crash never leaves half a file)."""
    path = state.directory / STATE_FILE
    tmp = path.with_suffix(".tmp")
    tmp.write_text(json.dumps(state.to_json(), indent=2) + "\n")
    tmp.replace(path)


def load_state(directory: Path) -> ClusterState | None:
    """The recorded state of ``directory``, or None when there is none (or it is unreadable)."""
    try:
        data = json.loads((directory / STATE_FILE).read_text())
        return ClusterState.from_json(data)
    except (OSError, ValueError, KeyError, TypeError):
        return None


# --- talking to the API server with the standard library -------------------------------------


class Api:
    """A tiny JSON client authenticated as the admin (enough to bootstrap and probe)."""

    def __init__(self, state: ClusterState) -> None:
        self.server = state.server
        self._context = ssl.create_default_context(cafile=str(state.pki.ca_crt))
        self._context.load_cert_chain(str(state.pki.admin_crt), str(state.pki.admin_key))

    def request(
        self, method: str, path: str, body: Any = None, timeout: float = 5.0
    ) -> tuple[int, Any]:
        """(HTTP status, decoded JSON or text); connection errors give status 0."""
        data = None if body is None else json.dumps(body).encode()
        request = urllib.request.Request(self.server + path, data=data, method=method)
        request.add_header("Accept", "application/json")
        if data is not None:
            request.add_header("Content-Type", "application/json")
        try:
            with urllib.request.urlopen(request, timeout=timeout, context=self._context) as resp:
                return resp.status, _decode(resp.read())
        except urllib.error.HTTPError as error:
            return error.code, _decode(error.read())
        except (urllib.error.URLError, OSError):
            return 0, None


def _decode(raw: bytes) -> Any:
    try:
        return json.loads(raw)
    except ValueError:
        return raw.decode(errors="replace")


# --- configuration files ---------------------------------------------------------------------


def kubeconfig_text(server: str, pki: Pki, name: str = "devcluster") -> str:
    """A self-contained kubeconfig (certificates embedded) for the admin user."""

    def b64(path: Path) -> str:
        return base64.b64encode(path.read_bytes()).decode()

    config = {
        "apiVersion": "v1",
        "kind": "Config",
        "clusters": [
            {
                "name": name,
                "cluster": {"server": server, "certificate-authority-data": b64(pki.ca_crt)},
            }
        ],
        "users": [
            {
                "name": "admin",
                "user": {
                    "client-certificate-data": b64(pki.admin_crt),
                    "client-key-data": b64(pki.admin_key),
                },
            }
        ],
        "contexts": [{"name": name, "context": {"cluster": name, "user": "admin"}}],
        "current-context": name,
        "preferences": {},
    }
    return yaml.safe_dump(config, sort_keys=False)


def fake_node(name: str) -> dict[str, Any]:
    """A Node that kwok manages (annotation) with room for many Pods and GPUs."""
    resources = {"cpu": "32", "memory": "256Gi", "pods": "110", "nvidia.com/gpu": "8"}
    return {
        "apiVersion": "v1",
        "kind": "Node",
        "metadata": {
            "name": name,
            "annotations": {
                NODE_ANNOTATION[0]: NODE_ANNOTATION[1],
                "node.alpha.kubernetes.io/ttl": "0",
            },
            "labels": {
                NODE_LABEL[0]: NODE_LABEL[1],
                "kubernetes.io/hostname": name,
                "kubernetes.io/os": "linux",
                "kubernetes.io/arch": "amd64",
                "node-role.kubernetes.io/agent": "",
            },
        },
        "spec": {},
        "status": {
            "allocatable": resources,
            "capacity": resources,
            "nodeInfo": {
                "architecture": "amd64",
                "operatingSystem": "linux",
                "kubeletVersion": "fake",
                "kubeProxyVersion": "fake",
            },
        },
    }


def command_lines(state: ClusterState, binaries: Mapping[str, Path]) -> dict[str, list[str]]:
    """The argv of every component, in start order."""
    d, p, pki = state.directory, state.ports, state.pki
    kubeconfig = str(state.kubeconfig)
    etcd_url = f"http://127.0.0.1:{p['etcd']}"
    peer_url = f"http://127.0.0.1:{p['etcd-peer']}"
    delegated = [
        f"--kubeconfig={kubeconfig}",
        f"--authentication-kubeconfig={kubeconfig}",
        f"--authorization-kubeconfig={kubeconfig}",
        "--bind-address=127.0.0.1",
        "--leader-elect=false",
    ]
    return {
        "etcd": [
            str(binaries["etcd"]),
            "--name=devcluster",
            f"--data-dir={d / 'etcd'}",
            f"--listen-client-urls={etcd_url}",
            f"--advertise-client-urls={etcd_url}",
            f"--listen-peer-urls={peer_url}",
            f"--initial-advertise-peer-urls={peer_url}",
            f"--initial-cluster=devcluster={peer_url}",
            "--unsafe-no-fsync=true",
            "--log-level=warn",
        ],
        "kube-apiserver": [
            str(binaries["kube-apiserver"]),
            f"--etcd-servers={etcd_url}",
            f"--cert-dir={d / 'pki' / 'apiserver'}",
            f"--tls-cert-file={pki.serving_crt}",
            f"--tls-private-key-file={pki.serving_key}",
            f"--client-ca-file={pki.ca_crt}",
            f"--secure-port={p['kube-apiserver']}",
            "--bind-address=127.0.0.1",
            "--advertise-address=127.0.0.1",
            f"--service-cluster-ip-range={SERVICE_CIDR}",
            "--allow-privileged=true",
            "--authorization-mode=RBAC",
            "--endpoint-reconciler-type=none",
            f"--service-account-issuer={state.server}",
            f"--service-account-key-file={pki.sa_pub}",
            f"--service-account-signing-key-file={pki.sa_key}",
            "--profiling=false",
        ],
        "kube-controller-manager": [
            str(binaries["kube-controller-manager"]),
            *delegated,
            f"--secure-port={p['kube-controller-manager']}",
            "--controllers=*",
            f"--service-account-private-key-file={pki.sa_key}",
            f"--root-ca-file={pki.ca_crt}",
            f"--cluster-signing-cert-file={pki.ca_crt}",
            f"--cluster-signing-key-file={pki.ca_key}",
            f"--service-cluster-ip-range={SERVICE_CIDR}",
            "--profiling=false",
        ],
        "kube-scheduler": [
            str(binaries["kube-scheduler"]),
            *delegated,
            f"--secure-port={p['kube-scheduler']}",
            "--profiling=false",
        ],
        "kwok": [
            str(binaries["kwok"]),
            f"--kubeconfig={kubeconfig}",
            "--manage-all-nodes=false",
            f"--manage-nodes-with-annotation-selector={NODE_ANNOTATION[0]}={NODE_ANNOTATION[1]}",
            f"--server-address=127.0.0.1:{p['kwok']}",
            "--cidr=10.244.0.1/16",
            "--node-ip=10.0.0.2",
            # Node Leases, renewed every quarter of this: without them kwok's only heartbeat is a
            # Node status patch about once a minute, later than the node lifecycle controller's
            # grace period (50 s), which then marks every Node NotReady and every Pod not Ready.
            f"--node-lease-duration-seconds={NODE_LEASE_SECONDS}",
        ],
        # Volcano schedules Pods whose schedulerName is ``volcano`` (Kthena's default); no
        # health or metrics port (none is needed, and two clusters must not collide).
        "vc-scheduler": [
            str(binaries["vc-scheduler"]),
            f"--kubeconfig={kubeconfig}",
            f"--scheduler-conf={d / VOLCANO_SCHEDULER_CONF}",
            "--leader-elect=false",
            "--cache-dumper=false",
            "--logtostderr",
        ],
        "vc-controller-manager": [
            str(binaries["vc-controller-manager"]),
            f"--kubeconfig={kubeconfig}",
            "--leader-elect=false",
            "--logtostderr",
        ],
    }


# --- lifecycle ---------------------------------------------------------------------------------


def _wait(
    what: str,
    owner: str,
    check: Callable[[], bool],
    timeout: float,
    children: Sequence[Child],
    interrupted: Callable[[], None] = lambda: None,
) -> None:
    """Poll ``check`` until true; fail when a started process exits, or after ``timeout``;
    ``interrupted`` before each poll (the start's ``SignalGuard.raise_if_due``).

    Whether a process exited is the kernel's answer to its parent (``Child``), so a slow one is
    waited for, never taken for dead. Errors name the component and quote its log (``owner``'s
    for a timeout).
    """
    deadline = time.monotonic() + timeout
    while True:
        interrupted()  # raises for a signal whose exception was lost (``raise_if_due``)
        if check():
            return
        for child in children:
            status = child.exit_status()
            if status is not None:
                raise ClusterError(
                    f"{child.record.name} {status} while waiting for {what}; {_tail(child.record)}"
                )
        if time.monotonic() >= deadline:
            records = [child.record for child in children if child.record.name == owner]
            detail = _tail(records[0]) if records else f"{owner} was not started"
            raise ClusterError(
                f"{owner}: timed out after {timeout:.0f}s waiting for {what}; {detail}"
            )
        time.sleep(0.2)


def _tail(record: ProcessRecord, lines: int = 15) -> str:
    try:
        text = Path(record.log).read_text(errors="replace").splitlines()[-lines:]
    except OSError:
        return f"no log at {record.log}"
    return f"last lines of {record.log}:\n" + "\n".join(text)


def _etcd_healthy(port: int) -> bool:
    try:
        with urllib.request.urlopen(f"http://127.0.0.1:{port}/health", timeout=5) as resp:
            return bool(json.loads(resp.read()).get("health") == "true")
    except (OSError, ValueError):
        return False


def _nodes_ready(api: Api, count: int) -> bool:
    status, body = api.request("GET", "/api/v1/nodes?labelSelector=type%3Dkwok")
    if status != 200:
        return False
    ready = 0
    for node in body.get("items", []):
        conditions = node.get("status", {}).get("conditions", [])
        taints = node.get("spec", {}).get("taints", [])
        if any(c["type"] == "Ready" and c["status"] == "True" for c in conditions) and not any(
            t["key"].startswith("node.kubernetes.io/") for t in taints
        ):
            ready += 1
    return ready >= count


def _register_nodes(api: Api, count: int) -> None:
    for index in range(count):
        status, body = api.request("POST", "/api/v1/nodes", fake_node(f"kwok-node-{index}"))
        if status not in (201, 409):
            raise ClusterError(f"could not create Node kwok-node-{index}: {status} {body}")


def is_healthy(state: ClusterState) -> bool:
    """Every recorded process is still ours and the API server answers ``/readyz`` with ok."""
    if not state.ready or len(state.processes) != len(PROGRAMS):
        return False
    if not all(is_ours(record) for record in state.processes):
        return False
    try:
        status, body = Api(state).request("GET", "/readyz")
    except (OSError, ssl.SSLError):
        return False
    return status == 200 and body == "ok"


def up(
    directory: Path,
    *,
    nodes: int = 2,
    binaries: Mapping[str, Path] | None = None,
    die_with_parent: bool = False,
    timeout: float = DEFAULT_TIMEOUT,
    log: Log | None = None,
) -> ClusterState:
    """Bring the cluster of ``directory`` up (or find it running); clean a crashed leftover.

    ``timeout`` bounds each wait (etcd, API server, Nodes, ServiceAccount); a process that
    exits fails the start at once. A start that fails or is interrupted (SIGTERM, SIGHUP or
    SIGINT in the main thread: see ``interrupts``) stops every process it started, and then any
    process whose flags name the folder, before the error propagates; the folder (logs,
    ``state.json``) stays for inspection until the next ``up`` or ``down``.
    """
    say = log or (lambda _message: None)
    directory = directory.resolve()
    existing = load_state(directory)
    if existing is not None and is_healthy(existing):
        say(f"already running: {existing.server}")
        return existing
    if clean(directory):
        say(f"cleaned a leftover cluster in {directory}")
    binaries = dict(binaries) if binaries is not None else build_all()
    started = time.monotonic()
    children: list[Child] = []
    with SignalGuard() as guard:
        try:
            start = _Start(
                _prepare(directory),
                binaries,
                timeout,
                die_with_parent,
                guard,
                say,
                children,
                bundle_assets(VOLCANO_BUNDLE, ASSET_CRDS),
            )
            state = _finish(start.run(nodes), binaries)
        except BaseException as error:
            guard.disarm()
            reason = str(error) if isinstance(error, Interrupted) else "the start failed"
            names = ", ".join(child.record.name for child in children)
            say(f"{reason}; stopping {names}" if names else reason)
            _stop_everything(directory, children)
            raise
    say(f"up in {time.monotonic() - started:.1f}s: {state.server}")
    return state


def _prepare(directory: Path) -> ClusterState:
    """A fresh folder with ports, PKI, kubeconfig and an empty ``state.json``."""
    directory.mkdir(parents=True)
    state = ClusterState(directory, dict(zip(PORT_NAMES, free_ports(len(PORT_NAMES)), strict=True)))
    make_pki(state.pki.directory)
    state.kubeconfig.write_text(kubeconfig_text(state.server, state.pki))
    state.kubeconfig.chmod(0o600)
    (directory / VOLCANO_SCHEDULER_CONF).write_text(VOLCANO_SCHEDULER_CONF_TEXT)
    save_state(state)
    return state


@dataclass
class _Start:
    """One start of the components: it records each process as it starts, for the cleanup."""

    state: ClusterState
    binaries: Mapping[str, Path]
    timeout: float
    die_with_parent: bool
    guard: SignalGuard
    say: Log
    children: list[Child]
    crds: Sequence[Path]
    """Volcano's CRD files (``build.bundle_assets``), installed before Volcano starts."""

    def run(self, nodes: int) -> ClusterState:
        """Start the components in order and wait until the cluster is usable."""
        self.spawn("etcd")
        self.wait("etcd /health", "etcd", lambda: _etcd_healthy(self.state.ports["etcd"]))
        self.spawn("kube-apiserver")
        api = Api(self.state)
        self.wait("kube-apiserver /readyz", "kube-apiserver", lambda: _readyz(api))
        crds = _install_crds(api, self.crds)
        for name in ("kube-controller-manager", "kube-scheduler", "kwok"):
            self.spawn(name)
        _register_nodes(api, nodes)
        self.wait(
            "Volcano's CRDs to be established", "kube-apiserver", lambda: _established(api, crds)
        )
        for name in ("vc-scheduler", "vc-controller-manager"):
            self.spawn(name)
        self.wait(f"{nodes} Ready kwok Nodes", "kwok", lambda: _nodes_ready(api, nodes))
        self.wait(
            "the default ServiceAccount",
            "kube-controller-manager",
            lambda: api.request("GET", SERVICE_ACCOUNT_PATH)[0] == 200,
        )
        self.wait(
            "Volcano's default Queue to open", "vc-controller-manager", lambda: _queue_open(api)
        )
        return self.state

    def spawn(self, name: str) -> None:
        self.say(f"starting {name}")
        with self.guard.held():  # a signal here is raised once the process is in ``children``
            child = spawn(
                name,
                command_lines(self.state, self.binaries)[name],
                self.state.logs / f"{name}.log",
                cwd=self.state.directory,
                die_with_parent=self.die_with_parent,
                # Volcano's device plugins build a second client from $KUBECONFIG (else
                # ~/.kube/config): it must be this cluster, never the user's own.
                env={**os.environ, "KUBECONFIG": str(self.state.kubeconfig)},
            )
            self.children.append(child)
        self.state = self.state.with_process(child.record)
        save_state(self.state)

    def wait(self, what: str, owner: str, check: Callable[[], bool]) -> None:
        self.say(f"waiting for {what}")
        _wait(what, owner, check, self.timeout, self.children, self.guard.raise_if_due)
        self.guard.raise_if_due()


def _install_crds(api: Api, files: Sequence[Path]) -> list[str]:
    """Create every CustomResourceDefinition of ``files`` (one already there is kept); their
    names."""
    if not files:
        folder = bundle_dir(VOLCANO_BUNDLE) / ASSET_CRDS
        raise ClusterError(f"Volcano's CRDs are missing from {folder}: run `make cluster-build`")
    names = []
    for path in files:
        for document in yaml.safe_load_all(path.read_text()):
            if not document or document.get("kind") != "CustomResourceDefinition":
                continue
            status, body = api.request(
                "POST", "/apis/apiextensions.k8s.io/v1/customresourcedefinitions", document
            )
            if status not in (201, 409):
                name = document.get("metadata", {}).get("name")
                raise ClusterError(f"could not create the CRD {name} of {path}: {status} {body}")
            names.append(document["metadata"]["name"])
    return names


def _established(api: Api, names: Sequence[str]) -> bool:
    for name in names:
        status, body = api.request(
            "GET", f"/apis/apiextensions.k8s.io/v1/customresourcedefinitions/{name}"
        )
        conditions = (body.get("status") or {}).get("conditions") or [] if status == 200 else []
        if not any(c["type"] == "Established" and c["status"] == "True" for c in conditions):
            return False
    return True


def _queue_open(api: Api) -> bool:
    status, body = api.request("GET", VOLCANO_QUEUE_PATH)
    return status == 200 and (body.get("status") or {}).get("state") == "Open"


def _readyz(api: Api) -> bool:
    return bool(api.request("GET", "/readyz")[1] == "ok")


def _finish(state: ClusterState, binaries: Mapping[str, Path]) -> ClusterState:
    """Link kubectl into the folder and record the cluster as ready."""
    (state.directory / "bin").mkdir(exist_ok=True)
    kubectl = binaries.get("kubectl")
    if kubectl is not None:
        state.kubectl.unlink(missing_ok=True)
        state.kubectl.symlink_to(kubectl)
    state = state.as_ready()
    save_state(state)
    return state


def _stop_everything(directory: Path, children: Sequence[Child]) -> None:
    """Stop the started processes (whole process groups), then any stray naming the folder."""
    for child in reversed(children):
        child.terminate()
    for child in reversed(children):
        child.stop()
    for pid, argv in find_strays(str(directory) + os.sep, PROGRAMS):
        kill_stray(pid, argv)


def clean(directory: Path, *, keep_logs: bool = False) -> bool:
    """Stop every process of ``directory`` (recorded or stray) and remove its state.

    With ``keep_logs`` the ``logs/`` folder (and ``state.json``) stay for inspection. Returns
    True when there was anything to clean.
    """
    directory = directory.resolve()
    found = False
    state = load_state(directory)
    if state is not None:
        for record in reversed(state.processes):
            found = stop(record) or found
    for pid, argv in find_strays(str(directory) + os.sep, PROGRAMS):
        kill_stray(pid, argv)
        found = True
    if not directory.exists():
        return found
    if keep_logs:
        for child in directory.iterdir():
            if child.name not in ("logs", STATE_FILE):
                _remove(child)
    else:
        _remove(directory)
    return True


def _remove(path: Path) -> None:
    if path.is_dir() and not path.is_symlink():
        shutil.rmtree(path, ignore_errors=True)
    else:
        path.unlink(missing_ok=True)


def down(directory: Path, *, keep_logs: bool = False) -> bool:
    """Stop the cluster of ``directory`` and remove its state; True if something was running."""
    return clean(directory, keep_logs=keep_logs)


def rss_bytes(state: ClusterState) -> dict[str, int]:
    """Resident memory of each running component (from ``/proc/<pid>/status``)."""
    usage = {}
    for record in state.processes:
        if not is_ours(record):
            continue
        try:
            status = Path(f"/proc/{record.pid}/status").read_text()
        except OSError:
            continue
        for line in status.splitlines():
            if line.startswith("VmRSS:"):
                usage[record.name] = int(line.split()[1]) * 1024
    return usage
