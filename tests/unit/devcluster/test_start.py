"""A start that fails or is interrupted stops everything it started (fake components).

The components are small Python scripts standing in for etcd and the API server, so these tests
need no build; ``tests/integration/test_start_interrupted.py`` does the same with the real ones.
"""

from __future__ import annotations

import shutil
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from modelserving.devcluster import cluster, procs
from tests.processes import cpu_contention, default_signals, kill_all, script, wait_until_gone

FAKE_ETCD = """
import http.server, sys
url = next(a.split("=", 1)[1] for a in sys.argv if a.startswith("--listen-client-urls="))

class Health(http.server.BaseHTTPRequestHandler):
    def do_GET(self):
        self.send_response(200)
        self.end_headers()
        self.wfile.write(b'{"health": "true"}')

    def log_message(self, *args):
        pass

print("fake etcd serving", flush=True)
http.server.HTTPServer(("127.0.0.1", int(url.rsplit(":", 1)[1])), Health).serve_forever()
"""
FAKE_REFUSING = """
print("Error: unknown flag: --bogus", flush=True)
raise SystemExit(1)
"""
# Never ready, with a helper process of its own in its process group.
FAKE_HANGING = """
import subprocess, sys, time
helper = "import time; time.sleep(60)"
subprocess.Popen([sys.executable, "-c", helper, *sys.argv[1:]])
print("fake apiserver hanging", flush=True)
time.sleep(60)
"""
needs_openssl = pytest.mark.skipif(shutil.which("openssl") is None, reason="needs openssl")


def _binaries(tmp_path: Path, apiserver: str) -> dict[str, Path]:
    bin_dir = tmp_path / "fakebin"
    bin_dir.mkdir(exist_ok=True)
    hanging = script(bin_dir / "hanging", FAKE_HANGING)
    binaries = dict.fromkeys(cluster.PROGRAMS, hanging)
    binaries["etcd"] = script(bin_dir / "etcd", FAKE_ETCD)
    binaries["kube-apiserver"] = script(bin_dir / "kube-apiserver", apiserver)
    return binaries


def _child(tmp_path: Path, name: str, source: str) -> procs.Child:
    argv = [sys.executable, "-c", source, str(tmp_path)]
    return procs.spawn(name, argv, tmp_path / f"{name}.log", cwd=tmp_path)


# --- waiting ------------------------------------------------------------------------------------


def test_a_slow_process_under_cpu_contention_is_waited_for(tmp_path: Path) -> None:
    ready = tmp_path / "ready"
    slow = (
        f"import pathlib, time; time.sleep(1.5); pathlib.Path({str(ready)!r}).touch(); "
        "time.sleep(60)"
    )
    with cpu_contention():
        child = _child(tmp_path, "slow", slow)
        try:
            cluster._wait("slow /ready", "slow", ready.exists, 60, [child])
        finally:
            child.stop()


def test_a_process_that_exits_fails_the_wait_with_its_log(tmp_path: Path) -> None:
    crashing = "print('panic: listen tcp: address already in use', flush=True); raise SystemExit(2)"
    healthy = _child(tmp_path, "etcd", "import time; time.sleep(60)")
    child = _child(tmp_path, "kube-apiserver", crashing)
    started = time.monotonic()
    try:
        with pytest.raises(cluster.ClusterError) as caught:
            cluster._wait(
                "kube-apiserver /readyz", "kube-apiserver", lambda: False, 60, [healthy, child]
            )
    finally:
        healthy.stop()
        child.stop()
    assert time.monotonic() - started < 30  # at once, not after the timeout
    message = str(caught.value)
    assert message.startswith("kube-apiserver exited with status 2 while waiting for")
    assert "panic: listen tcp: address already in use" in message


def test_a_timeout_names_the_component_and_quotes_its_log(tmp_path: Path) -> None:
    child = _child(
        tmp_path, "kwok", "print('waiting for nodes', flush=True); import time; time.sleep(60)"
    )
    try:
        with pytest.raises(cluster.ClusterError) as caught:
            cluster._wait("2 Ready kwok Nodes", "kwok", lambda: False, 0.5, [child])
    finally:
        child.stop()
    message = str(caught.value)
    assert message.startswith("kwok: timed out after 0s waiting for 2 Ready kwok Nodes;")
    assert "waiting for nodes" in message


# --- failed starts ------------------------------------------------------------------------------


@needs_openssl
def test_a_component_that_exits_fails_the_start_and_nothing_is_left(tmp_path: Path) -> None:
    directory = tmp_path / "cluster"
    messages: list[str] = []
    try:
        with pytest.raises(cluster.ClusterError) as caught:
            cluster.up(directory, binaries=_binaries(tmp_path, FAKE_REFUSING), log=messages.append)
        assert "kube-apiserver exited with status 1 while waiting for" in str(caught.value)
        assert "unknown flag: --bogus" in str(caught.value)
        assert wait_until_gone(str(directory)) == []
        assert "stopping etcd, kube-apiserver" in messages[-1]
        assert (directory / "logs" / "etcd.log").read_text() == "fake etcd serving\n"
    finally:
        kill_all(str(directory))


@needs_openssl
def test_a_start_that_times_out_stops_its_processes_and_their_groups(tmp_path: Path) -> None:
    directory = tmp_path / "cluster"
    try:
        with pytest.raises(cluster.ClusterError, match="kube-apiserver: timed out"):
            cluster.up(directory, binaries=_binaries(tmp_path, FAKE_HANGING), timeout=1)
        assert wait_until_gone(str(directory)) == []
        assert cluster.load_state(directory) is not None  # kept for inspection
    finally:
        kill_all(str(directory))


UP = """
import sys
from pathlib import Path
from modelserving.devcluster import cluster
binaries = {name: Path(path) for name, path in (arg.split("=", 1) for arg in sys.argv[2:])}
say = lambda message: print(message, file=sys.stderr, flush=True)
cluster.up(Path(sys.argv[1]), binaries=binaries, timeout=60, log=say)
"""


@needs_openssl
@pytest.mark.parametrize(
    ("phase", "signum", "returncode"),
    [
        ("starting etcd", signal.SIGTERM, -signal.SIGTERM),
        ("waiting for etcd /health", signal.SIGHUP, -signal.SIGHUP),
        ("starting kube-apiserver", signal.SIGTERM, -signal.SIGTERM),
        ("waiting for kube-apiserver /readyz", signal.SIGTERM, -signal.SIGTERM),
        ("waiting for kube-apiserver /readyz", signal.SIGINT, -signal.SIGINT),
    ],
)
def test_an_interrupted_start_stops_what_it_started(
    tmp_path: Path, phase: str, signum: signal.Signals, returncode: int
) -> None:
    directory = tmp_path / "cluster"
    binaries = _binaries(tmp_path, FAKE_HANGING)
    argv = [sys.executable, "-c", UP, str(directory), *(f"{k}={v}" for k, v in binaries.items())]
    starter = subprocess.Popen(argv, stderr=subprocess.PIPE, text=True, preexec_fn=default_signals)
    try:
        assert starter.stderr is not None
        lines = []
        for line in starter.stderr:
            lines.append(line)
            if line.strip() == phase:
                starter.send_signal(signum)
                break
        rest = starter.communicate(timeout=60)[1]
        assert starter.returncode == returncode, "".join(lines) + rest
        assert f"interrupted by {signum.name}" in rest
        assert wait_until_gone(str(directory)) == []
    finally:
        starter.kill()
        starter.communicate()
        kill_all(str(directory))
