"""Ports, detached processes, liveness and stopping of the dev cluster (real short processes)."""

from __future__ import annotations

import os
import signal
import socket
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from dataclasses import replace
from pathlib import Path

import pytest

from modelserving.devcluster import procs
from tests.processes import (
    CFS_PERIOD_US,
    cpu_contention,
    mentioning,
    starved,
    wait_until_exec_done,
    wait_until_gone,
)

SLEEPER = [sys.executable, "-c", "import time; time.sleep(60)"]
SLEEPING = f"{sys.executable} -c 'import time; time.sleep(60)'"


@pytest.fixture
def sleeper(tmp_path: Path) -> Iterator[procs.Child]:
    child = procs.spawn("sleeper", [*SLEEPER, str(tmp_path)], tmp_path / "s.log", cwd=tmp_path)
    yield child
    child.stop(timeout=2)


def test_free_ports_are_distinct_and_bindable() -> None:
    ports = procs.free_ports(6)
    assert len(set(ports)) == 6
    for port in ports:
        with socket.socket() as sock:
            sock.bind(("127.0.0.1", port))


def test_spawned_process_is_recognised_and_stopped(sleeper: procs.Child) -> None:
    record = sleeper.record
    assert procs.is_ours(record)
    assert procs.read_cmdline(record.pid) == record.argv
    assert procs.stop(record, timeout=5)
    assert not procs.is_ours(record)
    assert not procs.stop(record)  # idempotent
    assert sleeper.exit_status() == "exited"  # reaped by stop(): it was our child


def test_a_reused_pid_is_left_alone(sleeper: procs.Child) -> None:
    wait_until_exec_done(sleeper.record)
    other_program = replace(sleeper.record, argv=("/usr/bin/etcd", "--data-dir=/elsewhere"))
    other_start = replace(sleeper.record, start_time=sleeper.record.start_time + 1)
    for impostor in (other_program, other_start):
        assert not procs.is_ours(impostor, settle=0.2)
        assert not procs.stop(impostor)
    assert procs.is_ours(sleeper.record)
    assert sleeper.exit_status() is None


def test_record_round_trips_through_json(sleeper: procs.Child) -> None:
    assert procs.ProcessRecord.from_json(sleeper.record.to_json()) == sleeper.record


def test_strays_are_found_by_folder_marker(tmp_path: Path, sleeper: procs.Child) -> None:
    wait_until_exec_done(sleeper.record)
    name = Path(sys.executable).name
    strays = procs.find_strays(str(tmp_path), [name])
    assert [pid for pid, _argv in strays] == [sleeper.record.pid]
    assert procs.find_strays(str(tmp_path / "other"), [name]) == []
    assert procs.find_strays(str(tmp_path), ["etcd"]) == []
    procs.kill_stray(*strays[0])
    assert not procs.is_ours(sleeper.record)


# --- /proc views that must not pass for "gone" ---------------------------------------------------


def _fake_proc(root: Path, pid: int, state: str, start: int, argv: bytes, threads: int = 1) -> None:
    """Write ``<root>/<pid>/stat`` and ``cmdline`` (each replaced at once, like the kernel's)."""
    (root / str(pid)).mkdir(exist_ok=True)
    fields = [state, "1", str(pid), *["0"] * 3, "4194560", *["0"] * 10, str(threads), "0"]
    stat = f"{pid} (a (b) c) {' '.join(fields)} {start} 0\n".encode()
    for name, content in (("stat", stat), ("cmdline", argv)):
        (root / str(pid) / f"{name}.new").write_bytes(content)
        (root / str(pid) / f"{name}.new").replace(root / str(pid) / name)


def test_stat_parsing_copes_with_odd_command_names(tmp_path: Path) -> None:
    _fake_proc(tmp_path, 42, "S", 123456, b"/bin/x\0--flag=a b\0", threads=7)
    stat = procs.read_stat(42, tmp_path)
    assert stat == procs.Stat(state="S", pgrp=42, flags=4194560, threads=7, start_time=123456)
    assert procs.read_start_time(42, tmp_path) == 123456
    assert procs.read_cmdline(42, tmp_path) == ("/bin/x", "--flag=a b")
    _fake_proc(tmp_path, 42, "Z", 123456, b"")
    assert procs.read_start_time(42, tmp_path) is None
    assert procs.read_cmdline(43, tmp_path) is None


RECORD = procs.ProcessRecord("etcd", 42, ("/bin/etcd", "--data-dir=/c/etcd"), 500, "/c/etcd.log")
ARGV = b"/bin/etcd\0--data-dir=/c/etcd\0"


def test_a_process_between_exec_and_its_argv_is_ours(tmp_path: Path) -> None:
    # Right after Popen returns, the child may still be inside exec: /proc/<pid>/cmdline is
    # empty (the new stack is not set up) or shows the parent's argv. The false "etcd exited
    # while waiting for etcd /health" of a busy machine came from reading that as "gone".
    _fake_proc(tmp_path, 42, "R", 500, b"")
    threading.Timer(0.3, _fake_proc, (tmp_path, 42, "S", 500, ARGV)).start()
    started = time.monotonic()
    assert procs.is_ours(RECORD, tmp_path)
    assert 0.25 < time.monotonic() - started < procs.SETTLE_SECONDS
    _fake_proc(tmp_path, 42, "R", 500, b"/usr/bin/python3\0-m\0modelserving.devcluster\0")
    threading.Timer(0.3, _fake_proc, (tmp_path, 42, "S", 500, ARGV)).start()
    assert procs.is_ours(RECORD, tmp_path)


def test_argv_that_never_shows_is_judged_by_pid_and_start_time(tmp_path: Path) -> None:
    _fake_proc(tmp_path, 42, "D", 500, b"")  # exiting: its memory is gone, it is not a zombie yet
    assert procs.is_ours(RECORD, tmp_path, settle=0.1)
    _fake_proc(tmp_path, 42, "S", 500, b"/bin/other\0")  # same PID and start, another program
    assert not procs.is_ours(RECORD, tmp_path, settle=0.1)


def test_gone_zombie_reused_and_kernel_thread_are_not_ours(tmp_path: Path) -> None:
    assert not procs.is_ours(RECORD, tmp_path)
    _fake_proc(tmp_path, 42, "Z", 500, b"")
    assert not procs.is_ours(RECORD, tmp_path)
    _fake_proc(tmp_path, 42, "Z", 500, b"", threads=5)  # a leader that exited, threads running
    assert procs.is_ours(RECORD, tmp_path, settle=0.1)
    _fake_proc(tmp_path, 42, "S", 501, ARGV)
    assert not procs.is_ours(RECORD, tmp_path)
    (tmp_path / "42" / "stat").write_text(
        (tmp_path / "42" / "stat")
        .read_text()
        .replace(" 4194560 ", " 2097152 ")
        .replace("501", "500")
    )
    assert not procs.is_ours(RECORD, tmp_path)


def test_a_process_just_started_is_alive_under_cpu_contention(tmp_path: Path) -> None:
    children = []
    try:
        with cpu_contention():
            for index in range(20):
                child = procs.spawn("s", [*SLEEPER, str(index)], tmp_path / "s.log", cwd=tmp_path)
                children.append(child)
                assert child.exit_status() is None
                assert procs.is_ours(child.record)
    finally:
        for child in children:
            child.terminate()
        for child in children:
            child.stop(timeout=2)


# --- the exit of a child, from the kernel -------------------------------------------------------


def test_exit_status_says_how_a_child_ended(tmp_path: Path) -> None:
    code = procs.spawn(
        "c", [sys.executable, "-c", "raise SystemExit(3)"], tmp_path / "c.log", cwd=tmp_path
    )
    killed = procs.spawn("k", SLEEPER, tmp_path / "k.log", cwd=tmp_path)
    assert killed.exit_status() is None
    os.kill(killed.record.pid, signal.SIGKILL)
    deadline = time.monotonic() + 10
    while None in (code.exit_status(), killed.exit_status()) and time.monotonic() < deadline:
        time.sleep(0.01)
    assert code.exit_status() == "exited with status 3"
    assert killed.exit_status() == "killed by SIGKILL"
    # Not reaped yet: /proc still has the zombie, so its PID cannot be reused meanwhile.
    assert procs.read_stat(killed.record.pid) is not None
    for child in (code, killed):
        child.stop()
        assert child.exit_status() == "stopped"
        assert procs.read_stat(child.record.pid) is None


def _group(tmp_path: Path, sleepers: int) -> tuple[procs.Child, str]:
    """A shell (its own process group) with ``sleepers`` children, once all of them run."""
    marker = str(tmp_path / "group")
    shell = f"{SLEEPING} {marker} & " * sleepers + "wait"
    child = procs.spawn("sh", ["sh", "-c", shell, marker], tmp_path / "sh.log", cwd=tmp_path)
    deadline = time.monotonic() + 10
    while len(mentioning(marker)) < sleepers + 1:
        assert time.monotonic() < deadline
        time.sleep(0.02)
    return child, marker


def test_stop_kills_the_whole_process_group(tmp_path: Path) -> None:
    child, marker = _group(tmp_path, sleepers=2)
    child.stop(timeout=5)
    assert wait_until_gone(marker) == []


def test_stop_kills_what_ignores_sigterm(tmp_path: Path) -> None:
    stubborn = "import signal, time; signal.signal(signal.SIGTERM, signal.SIG_IGN); time.sleep(60)"
    child = procs.spawn("s", [sys.executable, "-c", stubborn], tmp_path / "s.log", cwd=tmp_path)
    wait_until_exec_done(child.record)
    time.sleep(0.3)  # the interpreter has installed SIG_IGN
    child.stop(timeout=0.5)
    # Gone now, not after its 60 s sleep: SIGKILL followed the ignored SIGTERM.
    assert procs.read_stat(child.record.pid) is None


def test_stop_by_record_kills_the_process_group(tmp_path: Path) -> None:
    child, marker = _group(tmp_path, sleepers=1)
    assert procs.stop(child.record, timeout=5)  # as a later command does, from state.json
    assert wait_until_gone(marker) == []
    child.stop()


def test_a_cpu_quota_holds_what_joins_it_and_goes_with_its_leftovers() -> None:
    """``tests.processes.starved``: the CPU cgroup the interrupted starts run in (where this
    machine lets a test make one)."""
    with starved(0.5) as limit:
        if limit.group is None:
            pytest.skip("no CPU cgroup can be made here (busy loops stand in)")
        group = limit.group
        quota = group / ("cpu.cfs_quota_us" if (group / "cpu.cfs_quota_us").exists() else "cpu.max")
        assert quota.read_text().split()[0] == str(CFS_PERIOD_US // 2)
        child = subprocess.Popen(SLEEPER, preexec_fn=limit.join)
        with limit.holding():
            assert str(os.getpid()) in (group / "cgroup.procs").read_text().split()
        assert str(os.getpid()) not in (group / "cgroup.procs").read_text().split()
        assert str(child.pid) in (group / "cgroup.procs").read_text().split()
    assert child.wait(timeout=10) == -signal.SIGKILL  # left in the group: killed with it
    assert not group.exists()
