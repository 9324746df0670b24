"""The compiled built-ins ship as package data, and are the ones in plugins-wasm/."""

from __future__ import annotations

import tomllib
from importlib import resources
from pathlib import Path

import pytest

from modelserving.plugins.artifacts import ArtifactMissing, builtin_wasm, builtin_wasm_path
from modelserving.plugins.registry import default_registry

ROOT = Path(__file__).resolve().parents[2]


def test_every_wasm_builtin_is_package_data_and_matches_plugins_wasm() -> None:
    package = Path(str(resources.files("modelserving")))
    for builtin in default_registry():
        if builtin.wasm_module is None:
            continue
        path = builtin_wasm_path(builtin.wasm_module)
        assert path.parent == package / "data" / "plugins-wasm"
        assert builtin_wasm(builtin.wasm_module) == (ROOT / "plugins-wasm" / path.name).read_bytes()


def test_the_package_data_rule_covers_the_artifacts() -> None:
    config = tomllib.loads((ROOT / "pyproject.toml").read_text())
    assert "data/**/*" in config["tool"]["setuptools"]["package-data"]["modelserving"]


def test_a_missing_artifact_is_a_clear_error() -> None:
    with pytest.raises(ArtifactMissing, match=r"nope\.wasm is not installed"):
        builtin_wasm("nope.wasm")
