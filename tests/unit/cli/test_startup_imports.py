"""``modelserving --version`` and every ``--help`` import no heavy library.

Each case runs the command in a fresh interpreter with ``-X importtime`` and reads the modules
it imported: building the parser must import only argparse-level code (the ``cli/*_args``
modules and light modules of ``api``); a command's implementation is imported when it runs.
The start-up time itself is measured by ``make bench``, not asserted here.
"""

from __future__ import annotations

import argparse
import subprocess
import sys

import pytest

import modelserving.api
from modelserving.cli.main import build_parser

HEAVY = frozenset(
    [
        *("kopf", "kubernetes", "aiohttp", "requests", "urllib3"),  # the controller's I/O
        *("wasmtime", "extism", "msgpack"),  # the sandbox and the ABI codec
        *("pydantic", "yaml", "jsonpatch", "prometheus_client"),  # models, manifests, metrics
    ]
)
"""Libraries that each cost from 20 ms (msgpack) to over a second (kopf) to import."""

IMPLEMENTATIONS = frozenset(
    [
        *("modelserving.chain", "modelserving.controller", "modelserving.plugins"),
        *("modelserving.sandbox", "modelserving.abi", "modelserving.workload"),
        "modelserving.api.modelserving",
    ]
)
"""Layers below the command line that no ``--help`` needs."""


def _subcommands(
    parser: argparse.ArgumentParser, prefix: tuple[str, ...] = ()
) -> list[tuple[str, ...]]:
    """Every command path of the parser (``render``, ``plugin``, ``plugin run``, ...)."""
    found: list[tuple[str, ...]] = []
    for action in parser._actions:
        if isinstance(action, argparse._SubParsersAction):
            for name, child in action.choices.items():
                found.append((*prefix, name))
                found.extend(_subcommands(child, (*prefix, name)))
    return found


COMMANDS = [["--version"], ["--help"]] + [
    [*path, "--help"] for path in _subcommands(build_parser())
]


def imported_modules(argv: list[str]) -> set[str]:
    """The modules ``python -m modelserving.cli.main ARGV`` imports (it must exit 0)."""
    result = subprocess.run(
        [sys.executable, "-X", "importtime", "-m", "modelserving.cli.main", *argv],
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    assert result.returncode == 0, result.stderr[-2000:]
    assert result.stdout, "printed nothing"
    return {
        line.rsplit("|", 1)[1].strip()
        for line in result.stderr.splitlines()
        if line.startswith("import time:") and "|" in line
    }


def test_every_subcommand_is_checked() -> None:
    names = {" ".join(argv[:-1]) for argv in COMMANDS}
    assert {"render", "crd", "run", "plugin", "plugin run", "plugin new"} <= names


@pytest.mark.parametrize("argv", COMMANDS, ids=" ".join)
def test_version_and_help_import_no_heavy_library(argv: list[str]) -> None:
    modules = imported_modules(argv)
    assert "argparse" in modules, "-X importtime output not understood"
    heavy = sorted(m for m in modules if m.split(".")[0] in HEAVY)
    assert not heavy, f"`modelserving {' '.join(argv)}` imports {heavy}"
    layers = sorted(
        m for m in modules if any(m == p or m.startswith(p + ".") for p in IMPLEMENTATIONS)
    )
    assert not layers, f"`modelserving {' '.join(argv)}` imports {layers}"
    commands = sorted(
        m for m in modules if m.startswith("modelserving.cli.") and m.endswith("_cmd")
    )
    assert not commands, f"`modelserving {' '.join(argv)}` imports {commands}"


def test_a_command_still_imports_its_implementation() -> None:
    """The check above sees imports: a command that runs loads what --help leaves out."""
    modules = imported_modules(["crd"])
    assert "modelserving.cli.crd_cmd" in modules
    assert "pydantic" in modules
    assert "yaml" in modules


def test_the_api_facade_loads_every_name_when_first_used() -> None:
    for name in modelserving.api.__all__:
        assert getattr(modelserving.api, name) is not None, name
    assert set(modelserving.api.__all__) <= set(dir(modelserving.api))
    with pytest.raises(AttributeError, match="no attribute 'Nothing'"):
        _ = modelserving.api.Nothing
