"""Where the compiled built-in plugins (``plugins-wasm/*.wasm``) are found.

They are package data (``modelserving/data/plugins-wasm``), so ``runtime: Wasm`` works from an
installed package; in a source checkout that folder links to the repository's ``plugins-wasm/``.
"""

from __future__ import annotations

from importlib import resources
from pathlib import Path


class ArtifactMissing(Exception):
    """A built-in's compiled module is not in this installation."""


def builtin_wasm(filename: str) -> bytes:
    """The bytes of a compiled built-in, by file name (``demo-pod-tweaks.wasm``)."""
    path = builtin_wasm_path(filename)
    return path.read_bytes()


def builtin_wasm_path(filename: str) -> Path:
    folder = resources.files("modelserving").joinpath("data", "plugins-wasm")
    candidate = Path(str(folder)) / filename
    if not candidate.is_file():
        raise ArtifactMissing(
            f"the compiled module {filename} is not installed (expected {candidate}; "
            "run `make wasm` in a source checkout)"
        )
    return candidate
