"""Where the compiled built-in plugins (``plugins-wasm/*.wasm``) are found.

They are package data (``modelserving/data/plugins-wasm``), so ``runtime: Wasm`` works from an
installed package; in a source checkout that folder links to the repository's ``plugins-wasm/``.
"""

from __future__ import annotations

import functools
import hashlib
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


@functools.cache
def builtin_digests() -> frozenset[str]:
    """The sha256 of every compiled built-in in this installation (none when they are not
    built): modules that ship with the controller, which its sandbox compiles in its own
    process (``Sandbox(trusted=...)``). A ConfigMap module with the very same bytes is the same
    module."""
    folder = Path(str(resources.files("modelserving").joinpath("data", "plugins-wasm")))
    if not folder.is_dir():
        return frozenset()
    return frozenset(
        hashlib.sha256(path.read_bytes()).hexdigest()
        for path in sorted(folder.glob("*.wasm"))
        if path.is_file()
    )
