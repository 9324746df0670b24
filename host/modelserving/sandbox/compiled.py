"""A checked module, ready to call: what the module cache hands out and both runtimes take.

``CompiledModule`` holds the module's description (``ModuleInfo``), the wasmtime module and,
for the core runtime, its ``InstancePre``; for the Extism runtime, an ``ExtismModule`` (the bytes
the worker compiles itself). Neither runtime imports the other: both import this.
"""

from __future__ import annotations

import hashlib
from dataclasses import dataclass

import wasmtime

from modelserving.sandbox.module import ModuleInfo


class ExtismModule:
    """One Extism-flavoured module: its bytes (a worker is given them whenever it compiles the
    module), their digest, and whether it uses WASI."""

    def __init__(self, data: bytes, wasi: bool) -> None:
        self.data = data
        self.wasi = wasi
        self.digest = hashlib.sha256(data).hexdigest()


@dataclass
class CompiledModule:
    """A checked module, ready to instantiate many times (InstancePre)."""

    info: ModuleInfo
    module: wasmtime.Module
    pre: wasmtime.InstancePre | None
    extism: ExtismModule | None = None
