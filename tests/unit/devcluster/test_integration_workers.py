"""The integration tests' conftest under pytest-xdist: the logs a worker kept after a failure
reach the controlling process's summary (each worker runs a control plane of its own)."""

from __future__ import annotations

from pathlib import Path
from types import SimpleNamespace
from typing import Any

import pytest

from tests.integration import conftest


class _Reporter:
    def __init__(self) -> None:
        self.lines: list[str] = []

    def write_line(self, line: str) -> None:
        self.lines.append(line)


def _config() -> Any:
    return SimpleNamespace(stash=pytest.Stash())


def _session(config: Any) -> Any:
    return SimpleNamespace(config=config)


def test_a_workers_kept_logs_are_printed_by_the_controlling_process() -> None:
    worker = _config()
    worker.workeroutput = {}
    worker.stash[conftest._KEPT_LOGS] = Path("/tmp/gw0/devcluster/logs")
    conftest.pytest_sessionfinish(_session(worker))

    controller = _config()
    conftest.pytest_testnodedown(
        SimpleNamespace(config=controller, workeroutput=worker.workeroutput), None
    )
    conftest.pytest_testnodedown(SimpleNamespace(config=controller, workeroutput={}), None)
    reporter = _Reporter()
    conftest.pytest_terminal_summary(reporter, controller)
    assert reporter.lines == ["devcluster: control plane logs kept in /tmp/gw0/devcluster/logs"]


def test_without_workers_the_sessions_own_kept_logs_are_printed() -> None:
    session = _config()  # no workeroutput: not an xdist worker
    session.stash[conftest._KEPT_LOGS] = Path("/tmp/devcluster/logs")
    conftest.pytest_sessionfinish(_session(session))
    reporter = _Reporter()
    conftest.pytest_terminal_summary(reporter, session)
    assert reporter.lines == ["devcluster: control plane logs kept in /tmp/devcluster/logs"]


def test_nothing_is_printed_when_no_logs_were_kept() -> None:
    worker = _config()
    worker.workeroutput = {}
    conftest.pytest_sessionfinish(_session(worker))
    assert worker.workeroutput == {}
    reporter = _Reporter()
    conftest.pytest_terminal_summary(reporter, _config())
    assert reporter.lines == []
