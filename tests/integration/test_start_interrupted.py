"""Starting the real control plane on a busy machine, interrupted at each phase, leaves nothing.

Each test runs ``python -m modelserving.devcluster up`` (what ``make cluster-up`` runs) starved
of CPU, signals it when its progress line shows the phase was reached, then checks that no
process whose argv names the cluster folder is alive and that the next ``up`` (still starved)
brings a healthy cluster. Starved is a CPU cgroup's quota (``tests.processes.starved``): the
start and everything it runs share ``START_CORES``, as beside other work, without busy loops
taking the machine from the tests running beside these; where no cgroup can be made, busy
loops on every core stand in.
"""

from __future__ import annotations

import signal
import subprocess
import sys
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

from modelserving import devcluster
from modelserving.devcluster import procs
from tests.processes import (
    CpuQuota,
    default_signals,
    kill_all,
    mentioning,
    starved,
    wait_until_gone,
)

START_CORES = 0.66
"""The CPU a start and all its processes share: what they got beside one busy loop per core on
this two-core machine (a third of it), before the quota replaced the loops."""

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


def _both(*steps: Callable[[], None]) -> Callable[[], None]:
    def run() -> None:
        for step in steps:
            step()

    return run


def _up_until(
    directory: Path, phase: str, signum: signal.Signals, limit: CpuQuota
) -> tuple[int, str]:
    """Run ``up`` within ``limit``, send ``signum`` when it reports ``phase``; its exit code
    and output."""
    starter = subprocess.Popen(
        [sys.executable, "-m", "modelserving.devcluster", "--dir", str(directory), "up"],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
        text=True,
        # signals as from a terminal, whatever this process inherited
        preexec_fn=_both(default_signals, limit.join),
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


def _next_up_works(directory: Path, limit: CpuQuota) -> None:
    with limit.holding():  # this process and the cluster it starts
        state = devcluster.up(directory, die_with_parent=True, timeout=150)
    assert devcluster.is_healthy(state)
    assert len(state.processes) == len(devcluster.cluster.PROGRAMS)


@pytest.mark.parametrize("phase", PHASES)
@pytest.mark.timeout(300)  # under contention, on a machine that may be busy already
def test_a_start_terminated_at_each_phase_stops_everything(directory: Path, phase: str) -> None:
    with starved(START_CORES) as limit:
        returncode, output = _up_until(directory, phase, signal.SIGTERM, limit)
        assert returncode == -signal.SIGTERM, output
        assert "devcluster: interrupted by SIGTERM" in output
        assert wait_until_gone(str(directory)) == [], output
        # What a stopped start leaves (logs, state.json, half a pki/) differs little between
        # phases; the next start is tried after the earliest and the latest (8 s each here).
        if phase in (PHASES[0], PHASES[-1]):
            _next_up_works(directory, limit)
            devcluster.down(directory)


@pytest.mark.parametrize("signum", [signal.SIGINT, signal.SIGHUP])
def test_ctrl_c_or_a_closed_terminal_stop_everything(
    directory: Path, signum: signal.Signals
) -> None:
    with starved(START_CORES) as limit:
        returncode, output = _up_until(directory, "waiting for 2 Ready kwok Nodes", signum, limit)
        assert returncode != 0, output
        assert f"devcluster: interrupted by {signum.name}; stopping etcd" in output
        assert wait_until_gone(str(directory)) == [], output


def test_after_a_killed_start_the_next_one_stops_the_leftovers(directory: Path) -> None:
    with starved(START_CORES) as limit:
        returncode, output = _up_until(
            directory, "waiting for kube-apiserver /readyz", signal.SIGKILL, limit
        )
        assert returncode == -signal.SIGKILL, output
        leftovers = {pid for pid, _argv in mentioning(str(directory))}
        assert leftovers  # SIGKILL cannot be caught: etcd and kube-apiserver are still running
        _next_up_works(directory, limit)
        devcluster.down(directory)
    assert leftovers.isdisjoint(pid for pid, _argv in mentioning(str(directory)))
    assert all(procs.read_start_time(pid) is None for pid in leftovers)
