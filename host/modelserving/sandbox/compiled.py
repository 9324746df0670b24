"""A checked module, ready to call: what the module cache hands out and both runtimes take.

``CompiledModule`` is the handle chains keep: the module's description (``ModuleInfo``), its
bytes (zlib-compressed, so it can be compiled again; compressed once, when the module is
compiled, and kept in its disk artifact, so a restart does not compress them again), for the
Extism runtime an ``ExtismModule`` (the bytes the worker compiles itself), and ``native``: the
wasmtime module and, for the core runtime, its ``InstancePre``, set only while the module cache
holds it in memory. The cache drops ``native`` when it evicts the module (the memory is then
freed, whoever keeps the handle) and sets it again, from its disk artifact or by compiling the
kept bytes, when the module is next needed (``ModuleCache.native``). Neither runtime imports
the other: both import this.
"""

from __future__ import annotations

import hashlib
import zlib
from dataclasses import dataclass

import wasmtime

from modelserving.sandbox.module import ModuleInfo

SOURCE_LEVEL = 1
"""zlib level of the kept module bytes, paid once per compile: a 2 MB Go module keeps 0.7 MB
(35%) and takes 30 to 90 ms; a Rust built-in keeps 45 KB of 107 KB in 3 to 10 ms."""


def compress_source(data: bytes) -> bytes:
    """The module bytes as ``CompiledModule`` keeps them."""
    return zlib.compress(data, SOURCE_LEVEL)


class ExtismModule:
    """One Extism-flavoured module: its bytes (a worker is given them whenever it compiles the
    module), their digest, and whether it uses WASI."""

    def __init__(self, data: bytes, wasi: bool) -> None:
        self.data = data
        self.wasi = wasi
        self.digest = hashlib.sha256(data).hexdigest()


@dataclass(frozen=True)
class Native:
    """A module's part in native memory: the wasmtime module, its InstancePre (core runtime),
    and ``size``, the length of its serialized artifact (what the memory bound counts)."""

    module: wasmtime.Module
    pre: wasmtime.InstancePre | None
    size: int


class CompiledModule:
    """A checked module; instantiated many times from ``native`` (its InstancePre) while the
    module cache holds it, loaded again by the cache when it was evicted."""

    def __init__(
        self,
        info: ModuleInfo,
        native: Native | None,
        source: bytes,
        extism: ExtismModule | None = None,
    ) -> None:
        """``source``: the module's bytes compressed by ``compress_source``."""
        self.info = info
        self.native = native
        self.extism = extism
        self._source = source

    @property
    def digest(self) -> str:
        return self.info.sha256

    @property
    def source_bytes(self) -> int:
        """What the kept (compressed) module bytes take."""
        return len(self._source)

    @property
    def compressed_source(self) -> bytes:
        """The kept module bytes, compressed (as ``compress_source`` gave them)."""
        return self._source

    def source(self, max_bytes: int) -> bytes:
        """The module's bytes, as loaded (ValueError when they do not decompress to at most
        ``max_bytes`` bytes)."""
        inflate = zlib.decompressobj()
        try:
            data = inflate.decompress(self._source, max_bytes + 1)
        except zlib.error as exc:
            raise ValueError(f"the kept module bytes do not decompress: {exc}") from None
        if len(data) > max_bytes or not inflate.eof:
            raise ValueError(f"the kept module bytes do not decompress to at most {max_bytes}")
        return data

    @property
    def module(self) -> wasmtime.Module:
        """The wasmtime module while the cache holds it (LookupError once evicted): for checks
        and tests right after a load; calls go through ``ModuleCache.native``."""
        native = self.native
        if native is None:
            raise LookupError(f"module {self.digest} is not in memory (evicted)")
        return native.module
