"""Compiles each module once per sha256: in memory, and on disk as a precompiled artifact.

A module is first measured (``structure.check_shape``: no figure over the operator's module
limits), then compiled by a worker process under a deadline and a memory cap
(``compiler.Compiler``), and only then deserialized here. The artifact is kept on disk
(``artifacts.ArtifactStore``) once the module has passed the ABI checks, so a restart loads it
without compiling.

In memory, compiled modules are bounded by bytes (``SandboxSettings.memory_cache_max_bytes``,
each counted by the length of its serialized artifact) and by count, least recently used
evicted first; the module just loaded or reloaded stays even when it alone is over the bound.
Eviction drops the module's native part from its handle (``CompiledModule.native``), so the
memory is freed even while chains keep the handle; ``native`` loads it again when the handle is
next called: from disk, else by compiling the bytes the handle keeps. One handle per digest is
live at a time (``_handles``), so a load finds the handle chains already use.
"""

from __future__ import annotations

import contextlib
import hashlib
import threading
import time
import weakref
from collections import OrderedDict
from collections.abc import Callable, Iterator
from pathlib import Path

import wasmtime

from modelserving.api.errors import FailureClass
from modelserving.sandbox.artifacts import ARTIFACT_MAGIC, ArtifactStore, CacheStats
from modelserving.sandbox.compiled import CompiledModule, ExtismModule, Native
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
MODULES_KEPT = 1024
"""At most this many compiled modules in memory, whatever their bytes: each costs more than its
artifact (its InstancePre, mappings rounded up to pages), which matters only for tiny ones."""


def sha256_hex(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()


class ModuleCache:
    """Compiled modules by digest; in memory at most ``settings.memory_cache_max_bytes`` of
    artifacts and ``size`` modules, least recently used evicted. Each is checked against
    ``entrypoints``, the functions the host may call."""

    def __init__(
        self,
        engine: SandboxEngine,
        cache_dir: Path | None,
        entrypoints: tuple[Entrypoint, ...],
        size: int = MODULES_KEPT,
        extism: ExtismPool | None = None,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self._engine = engine
        self._clock = clock
        self._refused: OrderedDict[str, tuple[SandboxError, float]] = OrderedDict()
        """The latest refusals (``InvalidModule``) by digest, with when they were made."""
        self._loading: dict[str, tuple[threading.Lock, int]] = {}
        """One lock per digest being loaded (loads of one module wait for the first), and how
        many threads hold or wait for it."""
        self._entrypoints = entrypoints
        self._size = size
        self._max_bytes = engine.settings.memory_cache_max_bytes
        self._modules: OrderedDict[str, tuple[CompiledModule, int]] = OrderedDict()
        """The modules held in memory (their ``native`` set) with the bytes counted for each,
        least recently used first."""
        self._bytes = 0
        self._handles: weakref.WeakValueDictionary[str, CompiledModule] = (
            weakref.WeakValueDictionary()
        )
        """Every handle still referenced (by chains, callers), in memory or not."""
        self._lock = threading.Lock()
        self.stats = CacheStats()
        self._store = ArtifactStore(cache_dir, engine.key, self.stats, engine.settings)
        self._compiler = Compiler(engine.settings)
        self._extism = extism or ExtismPool(engine.settings)

    def load(self, data: bytes, expected_sha256: str | None = None) -> CompiledModule:
        """The compiled module for ``data``, in memory; InvalidModule when it is refused."""
        digest = sha256_hex(data)
        if expected_sha256 is not None and digest != expected_sha256:
            raise invalid_module(
                f"sha256 mismatch: the module's digest is {digest}, the plugin pins "
                f"{expected_sha256}"
            )
        hit = self._known(digest)
        if hit is not None:
            return hit
        with self._loading_lock(digest):
            hit = self._known(digest)
            if hit is not None:
                return hit
            with self._lock:
                handle = self._handles.get(digest)
            if handle is not None:  # evicted, but still in use: the same handle, reloaded
                self._attach(handle)
                return handle
            try:
                compiled = self._compile(data, digest)
            except SandboxError as exc:
                if exc.failure_class is FailureClass.INVALID_MODULE and not exc.contended:
                    self._remember_refusal(digest, exc)
                raise
            native = compiled.native
            assert native is not None  # a fresh compile holds its native part
            with self._lock:
                self._handles[digest] = compiled
            self._keep(compiled, native)
            return compiled

    def native(self, compiled: CompiledModule) -> Native:
        """What a call of ``compiled`` runs: its native part, loaded again (from disk, else
        compiled from the bytes it keeps) when it was evicted; SandboxError when that fails."""
        digest = compiled.digest
        held = self._held(compiled)
        if held is not None:
            return held
        with self._loading_lock(digest):
            held = self._held(compiled)
            return held if held is not None else self._attach(compiled)

    def _held(self, compiled: CompiledModule) -> Native | None:
        """``compiled``'s native part when memory holds it (now the most recently used)."""
        with self._lock:
            native = compiled.native
            entry = self._modules.get(compiled.digest)
            if native is None or entry is None or entry[0] is not compiled:
                return None
            self._modules.move_to_end(compiled.digest)
            return native

    def memory_bytes(self) -> int:
        """Bytes of the artifacts of the modules held in memory."""
        with self._lock:
            return self._bytes

    @contextlib.contextmanager
    def _loading_lock(self, digest: str) -> Iterator[None]:
        """Held while ``digest`` is loaded: a second load of one module waits for the first."""
        with self._lock:
            loading, users = self._loading.get(digest, (threading.Lock(), 0))
            self._loading[digest] = (loading, users + 1)
        try:
            with loading:
                yield
        finally:
            with self._lock:
                users = self._loading[digest][1] - 1
                if users:
                    self._loading[digest] = (loading, users)
                else:  # no thread waits for it: the next load makes a new one
                    del self._loading[digest]

    def _keep(self, compiled: CompiledModule, native: Native) -> None:
        """Hold ``compiled`` with ``native`` as its native part, the most recently used; evict
        the least recently used others until the rest fit both bounds. ``native`` is set here,
        under the lock: set before, another thread's eviction could take it in between."""
        digest = compiled.digest
        with self._lock:
            compiled.native = native
            previous = self._modules.pop(digest, None)
            if previous is not None:
                self._bytes -= previous[1]
            self._modules[digest] = (compiled, native.size)
            self._bytes += native.size
            while len(self._modules) > 1 and (
                self._bytes > self._max_bytes or len(self._modules) > self._size
            ):
                _, (old, size) = self._modules.popitem(last=False)
                self._bytes -= size
                self.stats.memory_evicted += 1
                self.stats.memory_evicted_bytes += size
                old.native = None  # a call under way keeps what it took; nothing else does
            self.stats.memory_bytes = self._bytes
            self.stats.memory_modules = len(self._modules)

    def _attach(self, compiled: CompiledModule) -> Native:
        """Load an evicted module's native part again and hold it; the caller holds its
        loading lock."""
        digest = compiled.digest
        found = self._from_disk(digest)
        if found is None:
            data = compiled.source()
            detached = detach_start(data)
            payload = self._compiler.compile(data if detached is None else detached)
            found = self._deserialize(payload), len(payload)
            self.stats.compiled += 1
            self._store.put(digest, payload)
        module, size = found
        pre = None
        if compiled.info.flavour != FLAVOUR_EXTISM:
            pre = self._link(module)
        native = Native(module, pre, size)
        self._keep(compiled, native)
        return native

    def _known(self, digest: str) -> CompiledModule | None:
        """The module from memory; its refusal raised again while it is remembered."""
        with self._lock:
            entry = self._modules.get(digest)
            if entry is not None:
                self._modules.move_to_end(digest)
                self.stats.memory_hits += 1
                return entry[0]
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
        found = self._from_disk(digest)
        payload: bytes | None = None
        if found is None:
            payload = self._compiler.compile(data if detached is None else detached)
            found = self._deserialize(payload), len(payload)
            self.stats.compiled += 1
        module, size = found
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
            return CompiledModule(info, Native(module, None, size), data, extism)
        return CompiledModule(info, Native(module, self._link(module), size), data)

    def _link(self, module: wasmtime.Module) -> wasmtime.InstancePre:
        try:
            return self._engine.linker.instantiate_pre(module)
        except wasmtime.WasmtimeError as exc:
            raise invalid_module(
                f"the module's imports cannot be linked: {error_line(exc)}"
            ) from None

    def _deserialize(self, payload: bytes) -> wasmtime.Module:
        try:
            return wasmtime.Module.deserialize(self._engine.engine, payload)
        except wasmtime.WasmtimeError as exc:
            raise invalid_module(f"the compiled module does not load: {error_line(exc)}") from None

    def _from_disk(self, digest: str) -> tuple[wasmtime.Module, int] | None:
        """The module from its disk artifact, with the artifact's length; None when absent."""
        payload = self._store.get(digest)
        if payload is None:
            return None
        try:
            module = wasmtime.Module.deserialize(self._engine.engine, payload)
        except wasmtime.WasmtimeError as exc:
            self._store.discard(digest, f"wasmtime refused it: {error_line(exc)}")
            return None
        self.stats.disk_hits += 1
        return module, len(payload)
