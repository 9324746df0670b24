"""Starting the real control plane on a busy machine, interrupted at each phase, leaves nothing.

Each test runs ``python -m modelserving.devcluster up`` (what ``make cluster-up`` runs) while
busy loops occupy every core, signals it when its progress line shows the phase was reached,
then checks that no process whose argv names the cluster folder is alive and that the next
``up`` (still under contention) brings a healthy cluster.
"""

from __future__ import annotations

import signal
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

from modelserving import devcluster
from modelserving.devcluster import procs
from tests.processes import cpu_contention, default_signals, kill_all, mentioning, wait_until_gone

BUSY_PER_CORE = 1
"""Busy loops per core beside each start: each in a session of its own, so the start gets about
a third of the machine here (two cores, two loops, the start's processes sharing one share).
Two per core made the same starts take about twice as long and checked nothing more."""

PHASES = (
    "starting etcd",
    "waiting for etcd /health",
    "starting kube-apiserver",
    "waiting for kube-apiserver /readyz",
    "starting kube-scheduler",
    "waiting for 2 Ready kwok Nodes",
    "waiting for the default ServiceAccount",
    "waiting for Volcano's default Queue to open",
)


@pytest.fixture
def directory(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[Path]:
    folder = tmp_path / "cluster"
    failed_before = request.session.testsfailed
    yield folder
    # A failed test keeps the components' logs (printed) for the next look.
    keep = request.session.testsfailed > failed_before
    devcluster.down(folder, keep_logs=keep)
    kill_all(str(folder))
    if keep:
        for log in sorted((folder / "logs").glob("*.log")):
            tail = log.read_text(errors="replace").splitlines()[-20:]
            print(f"--- {log}\n" + "\n".join(tail))


def _up_until(directory: Path, phase: str, signum: signal.Signals) -> tuple[int, str]:
    """Run ``up``, send ``signum`` when it reports ``phase``; its exit code and output."""
    starter = subprocess.Popen(
        [sys.executable, "-m", "modelserving.devcluster", "--dir", str(directory), "up"],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
        text=True,
        preexec_fn=default_signals,  # as from a terminal, whatever this process inherited
    )
    try:
        assert starter.stderr is not None
        seen = []
        for line in starter.stderr:
            seen.append(line)
            if line.strip() == f"devcluster: {phase}":
                starter.send_signal(signum)
                break
        rest = starter.communicate(timeout=90)[1]
    finally:
        starter.kill()
        starter.communicate()
    output = "".join(seen) + rest
    assert f"devcluster: {phase}\n" in seen, output
    return starter.returncode, output


def _next_up_works(directory: Path) -> None:
    state = devcluster.up(directory, die_with_parent=True, timeout=150)
    assert devcluster.is_healthy(state)
    assert len(state.processes) == len(devcluster.cluster.PROGRAMS)


@pytest.mark.parametrize("phase", PHASES)
@pytest.mark.timeout(300)  # under contention, on a machine that may be busy already
def test_a_start_terminated_at_each_phase_stops_everything(directory: Path, phase: str) -> None:
    with cpu_contention(BUSY_PER_CORE):
        returncode, output = _up_until(directory, phase, signal.SIGTERM)
        assert returncode == -signal.SIGTERM, output
        assert "devcluster: interrupted by SIGTERM" in output
        assert wait_until_gone(str(directory)) == [], output
        # What a stopped start leaves (logs, state.json, half a pki/) differs little between
        # phases; the next start is tried after the earliest and the latest (8 s each here).
        if phase in (PHASES[0], PHASES[-1]):
            _next_up_works(directory)


@pytest.mark.parametrize("signum", [signal.SIGINT, signal.SIGHUP])
def test_ctrl_c_or_a_closed_terminal_stop_everything(
    directory: Path, signum: signal.Signals
) -> None:
    with cpu_contention(BUSY_PER_CORE):
        returncode, output = _up_until(directory, "waiting for 2 Ready kwok Nodes", signum)
        assert returncode != 0, output
        assert f"devcluster: interrupted by {signum.name}; stopping etcd" in output
        assert wait_until_gone(str(directory)) == [], output


def test_after_a_killed_start_the_next_one_stops_the_leftovers(directory: Path) -> None:
    with cpu_contention(BUSY_PER_CORE):
        returncode, output = _up_until(
            directory, "waiting for kube-apiserver /readyz", signal.SIGKILL
        )
        assert returncode == -signal.SIGKILL, output
        leftovers = {pid for pid, _argv in mentioning(str(directory))}
        assert leftovers  # SIGKILL cannot be caught: etcd and kube-apiserver are still running
        _next_up_works(directory)
    assert leftovers.isdisjoint(pid for pid, _argv in mentioning(str(directory)))
    assert all(procs.read_start_time(pid) is None for pid in leftovers)
