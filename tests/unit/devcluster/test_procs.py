"""Ports, detached processes and PID verification of the dev cluster (real short processes)."""

from __future__ import annotations

import socket
import sys
import time
from collections.abc import Iterator
from dataclasses import replace
from pathlib import Path

import pytest

from modelserving.devcluster import procs

SLEEPER = [sys.executable, "-c", "import time; time.sleep(60)"]


@pytest.fixture
def sleeper(tmp_path: Path) -> Iterator[procs.ProcessRecord]:
    record = procs.spawn("sleeper", [*SLEEPER, str(tmp_path)], tmp_path / "s.log", cwd=tmp_path)
    # Until the child has exec'd, /proc shows the parent's command line: wait for the new one.
    deadline = time.monotonic() + 10
    while procs.read_cmdline(record.pid) != record.argv and time.monotonic() < deadline:
        time.sleep(0.01)
    yield record
    procs.stop(record, timeout=2)


def test_free_ports_are_distinct_and_bindable() -> None:
    ports = procs.free_ports(6)
    assert len(set(ports)) == 6
    for port in ports:
        with socket.socket() as sock:
            sock.bind(("127.0.0.1", port))


def test_spawned_process_is_recognised_and_stopped(sleeper: procs.ProcessRecord) -> None:
    assert procs.read_cmdline(sleeper.pid) == sleeper.argv
    assert procs.is_ours(sleeper)
    assert procs.stop(sleeper, timeout=5)
    assert not procs.is_ours(sleeper)
    assert not procs.stop(sleeper)  # idempotent


def test_a_reused_pid_is_left_alone(sleeper: procs.ProcessRecord) -> None:
    other_program = replace(sleeper, argv=("/usr/bin/etcd", "--data-dir=/elsewhere"))
    other_start = replace(sleeper, start_time=sleeper.start_time + 1)
    for impostor in (other_program, other_start):
        assert not procs.is_ours(impostor)
        assert not procs.stop(impostor)
    assert procs.is_ours(sleeper)


def test_record_round_trips_through_json(sleeper: procs.ProcessRecord) -> None:
    assert procs.ProcessRecord.from_json(sleeper.to_json()) == sleeper


def test_strays_are_found_by_folder_marker(tmp_path: Path, sleeper: procs.ProcessRecord) -> None:
    name = Path(sys.executable).name
    strays = procs.find_strays(str(tmp_path), [name])
    assert [pid for pid, _argv in strays] == [sleeper.pid]
    assert procs.find_strays(str(tmp_path / "other"), [name]) == []
    assert procs.find_strays(str(tmp_path), ["etcd"]) == []
    procs.kill_stray(*strays[0])
    assert not procs.is_ours(sleeper)


def test_stat_parsing_copes_with_odd_command_names(tmp_path: Path) -> None:
    (tmp_path / "42").mkdir()
    fields = ["S", *[str(n) for n in range(4, 22)], "123456", "0"]
    (tmp_path / "42" / "stat").write_text("42 (a (b) c) " + " ".join(fields) + "\n")
    (tmp_path / "42" / "cmdline").write_bytes(b"/bin/x\0--flag=a b\0")
    assert procs.read_start_time(42, tmp_path) == 123456
    assert procs.read_cmdline(42, tmp_path) == ("/bin/x", "--flag=a b")
    (tmp_path / "42" / "stat").write_text("42 (x) Z " + " ".join(fields[1:]) + "\n")
    assert procs.read_start_time(42, tmp_path) is None
    assert procs.read_cmdline(43, tmp_path) is None
