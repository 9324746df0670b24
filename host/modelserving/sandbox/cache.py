"""Compiles each module once per sha256: in memory, and on disk as a precompiled artifact.

A module is first measured (``structure.check_shape``: no figure over the operator's module
limits), then compiled by a worker process under a deadline and a memory cap
(``compiler.Compiler``), and only then deserialized here. The artifact is kept on disk
(``artifacts.ArtifactStore``) once the module has passed the ABI checks, so a restart loads it
without compiling.
"""

from __future__ import annotations

import hashlib
import threading
import time
from collections import OrderedDict
from collections.abc import Callable
from pathlib import Path

import wasmtime

from modelserving.api.errors import FailureClass
from modelserving.sandbox.artifacts import ARTIFACT_MAGIC, ArtifactStore, CacheStats
from modelserving.sandbox.compiled import CompiledModule, ExtismModule
from modelserving.sandbox.compiler import Compiler
from modelserving.sandbox.engine import SandboxEngine
from modelserving.sandbox.errors import SandboxError, error_line, invalid_module
from modelserving.sandbox.extism.call import ExtismPool, check_links
from modelserving.sandbox.module import FLAVOUR_EXTISM, Entrypoint, check_module
from modelserving.sandbox.structure import check_shape, detach_start

__all__ = ["ARTIFACT_MAGIC", "CacheStats", "CompiledModule", "ModuleCache", "sha256_hex"]

REFUSAL_TTL_S = 120.0
"""How long a refused module is remembered by its digest: a load in that time fails at once
with the same message, so a module that cannot compile costs at most one compile per this
period, however many ModelServings use it and however often they are reconciled."""
REFUSALS_KEPT = 256


def sha256_hex(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()


class ModuleCache:
    """Compiled modules by digest; at most ``size`` kept in memory, least recently used evicted.
    Each is checked against ``entrypoints``, the functions the host may call."""

    def __init__(
        self,
        engine: SandboxEngine,
        cache_dir: Path | None,
        entrypoints: tuple[Entrypoint, ...],
        size: int = 128,
        extism: ExtismPool | None = None,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self._engine = engine
        self._clock = clock
        self._refused: OrderedDict[str, tuple[SandboxError, float]] = OrderedDict()
        """The latest refusals (``InvalidModule``) by digest, with when they were made."""
        self._loading: dict[str, threading.Lock] = {}
        """One lock per digest being loaded: loads of one module wait for the first."""
        self._entrypoints = entrypoints
        self._size = size
        self._modules: OrderedDict[str, CompiledModule] = OrderedDict()
        self._lock = threading.Lock()
        self.stats = CacheStats()
        self._store = ArtifactStore(cache_dir, engine.key, self.stats, engine.settings)
        self._compiler = Compiler(engine.settings)
        self._extism = extism or ExtismPool(engine.settings)

    def load(self, data: bytes, expected_sha256: str | None = None) -> CompiledModule:
        """The compiled module for ``data``; InvalidModule when it is refused."""
        digest = sha256_hex(data)
        if expected_sha256 is not None and digest != expected_sha256:
            raise invalid_module(
                f"sha256 mismatch: the module's digest is {digest}, the plugin pins "
                f"{expected_sha256}"
            )
        hit = self._known(digest)
        if hit is not None:
            return hit
        with self._lock:
            loading = self._loading.setdefault(digest, threading.Lock())
        try:
            with loading:  # a second load of the same module waits for the first one's result
                hit = self._known(digest)
                if hit is not None:
                    return hit
                try:
                    compiled = self._compile(data, digest)
                except SandboxError as exc:
                    if exc.failure_class is FailureClass.INVALID_MODULE and not exc.contended:
                        self._remember_refusal(digest, exc)
                    raise
                with self._lock:
                    self._modules[digest] = compiled
                    while len(self._modules) > self._size:
                        self._modules.popitem(last=False)
                return compiled
        finally:
            with self._lock:
                if not loading.locked():
                    self._loading.pop(digest, None)

    def _known(self, digest: str) -> CompiledModule | None:
        """The module from memory; its refusal raised again while it is remembered."""
        with self._lock:
            hit = self._modules.get(digest)
            if hit is not None:
                self._modules.move_to_end(digest)
                self.stats.memory_hits += 1
                return hit
            refused = self._refused.get(digest)
            if refused is None:
                return None
            error, when = refused
            if self._clock() - when < REFUSAL_TTL_S:
                raise SandboxError(error.failure_class, error.message)
            del self._refused[digest]
            return None

    def _remember_refusal(self, digest: str, error: SandboxError) -> None:
        with self._lock:
            self._refused[digest] = (error, self._clock())
            self._refused.move_to_end(digest)
            while len(self._refused) > REFUSALS_KEPT:
                self._refused.popitem(last=False)

    def _compile(self, data: bytes, digest: str) -> CompiledModule:
        settings = self._engine.settings
        limit = settings.max_module_bytes
        if len(data) > limit:
            raise invalid_module(f"the module is {len(data)} bytes; the limit is {limit}")
        check_shape(data, settings.module_bounds)
        # A start function runs as an export the host calls (see detach_start); the artifact on
        # disk is of the rewritten module, under the original module's digest.
        detached = detach_start(data)
        module = self._from_disk(digest)
        payload: bytes | None = None
        if module is None:
            payload = self._compiler.compile(data if detached is None else detached)
            module = self._deserialize(payload)
            self.stats.compiled += 1
        info = check_module(
            module, digest, len(data), self._entrypoints, detached_start=detached is not None
        )
        if payload is not None:  # only modules that pass the checks are kept on disk
            self._store.put(digest, payload)
        if info.flavour == FLAVOUR_EXTISM:
            # Extism links its own kernel; it compiles the module itself per set of limits.
            extism = ExtismModule(data, info.wasi)
            try:
                check_links(self._extism, extism, settings.default_limits())
            except SandboxError as exc:
                if exc.failure_class is FailureClass.TIMEOUT:
                    raise SandboxError(exc.failure_class, exc.message) from None
                raise invalid_module(exc.message) from None
            return CompiledModule(info=info, module=module, pre=None, extism=extism)
        try:
            pre = self._engine.linker.instantiate_pre(module)
        except wasmtime.WasmtimeError as exc:
            raise invalid_module(
                f"the module's imports cannot be linked: {error_line(exc)}"
            ) from None
        return CompiledModule(info=info, module=module, pre=pre)

    def _deserialize(self, payload: bytes) -> wasmtime.Module:
        try:
            return wasmtime.Module.deserialize(self._engine.engine, payload)
        except wasmtime.WasmtimeError as exc:
            raise invalid_module(f"the compiled module does not load: {error_line(exc)}") from None

    def _from_disk(self, digest: str) -> wasmtime.Module | None:
        payload = self._store.get(digest)
        if payload is None:
            return None
        try:
            module = wasmtime.Module.deserialize(self._engine.engine, payload)
        except wasmtime.WasmtimeError as exc:
            self._store.discard(digest, f"wasmtime refused it: {error_line(exc)}")
            return None
        self.stats.disk_hits += 1
        return module
