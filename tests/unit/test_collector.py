"""The collector's thresholds while a big job runs (``modelserving.collector``): set while any
controller or render of the process runs, put back after the last one."""

from __future__ import annotations

import gc
from pathlib import Path
from typing import Any

import pytest
import yaml

from modelserving import collector
from modelserving.chain import render as chain_render
from modelserving.cli import render_cmd
from modelserving.cli.main import main
from tests.unit.conftest import manifest


def test_the_collector_is_tuned_while_any_job_runs_and_restored_after_the_last() -> None:
    before = gc.get_threshold()
    first, second = collector.tuned(), collector.tuned()
    first.__enter__()
    second.__enter__()
    first.__exit__(None, None, None)  # the first job ends, the second still runs
    assert gc.get_threshold() == collector.GC_THRESHOLDS
    second.__exit__(None, None, None)
    assert gc.get_threshold() == before != collector.GC_THRESHOLDS


def test_a_render_runs_with_the_tuned_collector(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    seen: list[tuple[int, int, int]] = []
    real = chain_render.render

    def recording(*args: Any, **kwargs: Any) -> Any:
        seen.append(gc.get_threshold())
        return real(*args, **kwargs)

    monkeypatch.setattr(render_cmd, "render", recording)
    path = tmp_path / "ms.yaml"
    path.write_text(yaml.safe_dump(manifest()))
    before = gc.get_threshold()
    assert main(["render", "-f", str(path)]) == 0
    assert "kind: Pod" in capsys.readouterr().out
    assert seen == [collector.GC_THRESHOLDS]
    assert gc.get_threshold() == before
