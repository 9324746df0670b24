"""``modelserving crd``: writes the CRD and detects a stale copy."""

from __future__ import annotations

from pathlib import Path

import pytest
import yaml

from modelserving.cli.crd_cmd import CRD_FILE
from modelserving.cli.main import main


def test_write_then_check(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["crd", "--output-dir", str(tmp_path)]) == 0
    assert main(["crd", "--output-dir", str(tmp_path), "--check"]) == 0
    target = tmp_path / CRD_FILE
    assert yaml.safe_load(target.read_text())["spec"]["names"]["kind"] == "ModelServing"
    target.write_text(target.read_text() + "# edited\n")
    capsys.readouterr()
    assert main(["crd", "--output-dir", str(tmp_path), "--check"]) == 1
    assert "is stale" in capsys.readouterr().err


def test_check_fails_when_missing(tmp_path: Path) -> None:
    assert main(["crd", "--output-dir", str(tmp_path), "--check"]) == 1


def test_prints_to_stdout(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["crd"]) == 0
    assert yaml.safe_load(capsys.readouterr().out)["kind"] == "CustomResourceDefinition"
