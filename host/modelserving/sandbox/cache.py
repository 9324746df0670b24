"""Compiles each module once per sha256: in memory, and on disk as a precompiled artifact.

A module is first measured (``structure.check_shape``: no figure over the operator's module
limits), then compiled by a worker process under a deadline and a memory cap
(``compiler.Compiler``), and only then deserialized here. The artifact is kept on disk
(``artifacts.ArtifactStore``) once the module has passed the ABI checks, so a restart loads it
without compiling. With it are kept the module's shape (as ``check_shape`` measured it) and its
interface (imports and exports with their types, ``module.Interface``), both covered by the
artifact's checksum, and its compressed bytes (``compiled.compress_source``; the artifact's
tail, checked against the module's digest whenever they are used). So a restart checks the
shape's figures against the bounds instead of walking the module again, runs the ABI checks on
the kept interface instead of asking wasmtime for it, and does not compress the module again;
and wasmtime maps the checked artifact file itself where it can (``Artifact.path``) rather than
copying its bytes.

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
import dataclasses
import hashlib
import struct
import threading
import time
import weakref
from collections import OrderedDict
from collections.abc import Callable, Iterator
from pathlib import Path

import wasmtime

from modelserving.api.errors import FailureClass
from modelserving.sandbox import preinit
from modelserving.sandbox.artifacts import (
    ARTIFACT_MAGIC,
    MAX_NOTES,
    Artifact,
    ArtifactStore,
    CacheStats,
)
from modelserving.sandbox.compiled import CompiledModule, ExtismModule, Native, compress_source
from modelserving.sandbox.compiler import Compiler
from modelserving.sandbox.engine import SandboxEngine
from modelserving.sandbox.errors import SandboxError, error_line, invalid_module
from modelserving.sandbox.extism.call import ExtismPool, check_links
from modelserving.sandbox.module import (
    FLAVOUR_EXTISM,
    Entrypoint,
    Interface,
    ModuleInfo,
    check_module,
    describe,
)
from modelserving.sandbox.settings import MIB, WASM_PAGE
from modelserving.sandbox.structure import (
    ModuleShape,
    cap_growth,
    check_figures,
    check_shape,
    detach_start,
)

__all__ = ["ARTIFACT_MAGIC", "CacheStats", "CompiledModule", "ModuleCache", "sha256_hex"]

_MAX_PAGES_32 = 65536
"""The most pages a 32-bit memory may declare."""
REFUSAL_TTL_S = 120.0
"""How long a refused module is remembered by its digest: a load in that time fails at once
with the same message, so a module that cannot compile costs at most one compile per this
period, however many ModelServings use it and however often they are reconciled."""
REFUSALS_KEPT = 256
MODULES_KEPT = 1024
"""At most this many compiled modules in memory, whatever their bytes: each costs more than its
artifact (its InstancePre, mappings rounded up to pages), which matters only for tiny ones."""


_SHAPE = struct.Struct(f">{len(dataclasses.fields(ModuleShape))}QB")
"""A module's shape as kept in its artifact: each figure, in the order of its fields; then
whether the artifact is of its pre-initialised snapshot (``preinit``)."""


def sha256_hex(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()


@dataclasses.dataclass(frozen=True)
class _Found:
    """A module loaded from its artifact: the wasmtime module, the payload's length, and what
    was kept with it (the module's shape, interface and compressed bytes)."""

    module: wasmtime.Module
    size: int
    shape: ModuleShape
    interface: Interface
    source: bytes
    preinitialized: bool


class _Transient(Exception):
    """A snapshot was not taken for a reason that may pass (see ``preinit.Refused``)."""


@dataclasses.dataclass(frozen=True)
class _Built:
    """A module compiled: its serialized and loaded forms, its interface, and whether it is
    a snapshot after ``_initialize`` (``preinit``)."""

    payload: bytes | bytearray
    """Serialized (a compile worker's reply as it was read: not copied again)."""
    module: wasmtime.Module
    interface: Interface
    preinitialized: bool = False
    layout: preinit.Layout | None = None
    """Set when ``module`` is instrumented for a snapshot."""


def _interface(module: wasmtime.Module) -> Interface:
    """The module's interface without what ``preinit.instrument`` added."""
    interface = describe(module)
    exports = tuple(e for e in interface.exports if not preinit.is_instrumentation(e[0]))
    return dataclasses.replace(interface, exports=exports)


def _facts(shape: ModuleShape, interface: Interface, preinitialized: bool) -> bytes:
    """What an artifact keeps of a module besides its compiled form (checksummed)."""
    return _SHAPE.pack(*dataclasses.astuple(shape), preinitialized) + interface.to_bytes()


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
        trusted: frozenset[str] = frozenset(),
    ) -> None:
        self._engine = engine
        self._trusted = trusted
        """Digests of modules compiled in this process, without a worker: the controller's own
        built-ins, which ship with it. Every other module is compiled in a compile worker."""
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
        limit = engine.settings.max_module_bytes  # compressed, plus zlib's worst case
        self._store = ArtifactStore(
            cache_dir, engine.key, self.stats, engine.settings, _SHAPE.size + limit * 2 + 4096
        )
        self._compiler = Compiler(engine.settings)
        self._copy_only = False
        """Whether artifacts are given to wasmtime as copies, not mapped (a mapping failed)."""
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
        if found is not None and found.preinitialized != compiled.info.preinitialized:
            # another process (sharing the directory) kept the other form of the module: the
            # handle's calls expect this one (with _initialize in each call, or a snapshot)
            found = None
        if found is None:
            settings = self._engine.settings
            try:
                data = compiled.source(settings.max_module_bytes)
            except ValueError as exc:
                raise invalid_module(str(exc)) from None
            if sha256_hex(data) != digest:
                raise invalid_module("the kept module bytes do not match the module's digest")
            shape = check_shape(data, settings.module_bounds)
            trusted = digest in self._trusted
            built = self._build(data, trusted)
            if compiled.info.preinitialized:
                try:
                    snapshot = self._snapshot(built, trusted) if built.layout is not None else None
                except _Transient:  # the busy host, perhaps: not the module's fault
                    raise SandboxError(
                        FailureClass.TIMEOUT,
                        "the module's pre-initialisation, taken again after its eviction, did "
                        "not finish in time (the host is busy); the next call tries again",
                        contended=True,
                    ) from None
                if snapshot is None:
                    raise invalid_module(
                        "the module was pre-initialised when first loaded and cannot be now: "
                        f"{(self.stats.not_preinitialized or ['?'])[-1]}"
                    )
                built = snapshot
            facts = _facts(shape, built.interface, built.preinitialized)
            self._store.put(digest, built.payload, facts, compiled.compressed_source)
            module, size = built.module, len(built.payload)
        else:
            module, size = found.module, found.size
        pre = None
        if compiled.info.flavour != FLAVOUR_EXTISM:
            pre = self._link(module)
        native = Native(module, pre, size)
        self._keep(compiled, native)
        return native

    def _compiled_form(
        self, target: bytes, trusted: bool
    ) -> tuple[bytes | bytearray, wasmtime.Module]:
        """``target`` compiled: serialized and loaded. In a compile worker, under its deadline
        and memory cap, unless ``trusted`` (made from a module of ``self._trusted``): then in
        this process, as fast as a compile gets (a worker adds 40 to 70 ms to a built-in)."""
        if not trusted:
            payload = self._compiler.compile(target)
            return payload, self._deserialize(payload)
        try:
            module = wasmtime.Module(self._engine.engine, target)
        except wasmtime.WasmtimeError as exc:
            raise invalid_module(f"the module does not compile: {error_line(exc)}") from None
        self.stats.compiled_here += 1
        return bytes(module.serialize()), module

    def _build(self, data: bytes, trusted: bool = False) -> _Built:
        """Compile ``data`` (its start function detached); instrumented for a snapshot
        (``preinit.instrument``) when it exports ``_initialize`` and pre-initialisation is on."""
        detached = detach_start(data)
        layout = None
        target = data if detached is None else detached
        if self._engine.settings.preinitialize and detached is None:
            try:
                layout = preinit.layout(data)
                target = preinit.instrument(layout)
                check_shape(target, self._engine.settings.module_bounds)
            except (preinit.Refused, SandboxError) as exc:
                if not isinstance(exc, preinit.NoInitialize):
                    self._not_preinitialized(str(exc))
                layout, target = None, data
        payload, module = self._compiled_form(target, trusted)
        self.stats.compiled += 1
        return _Built(payload, module, _interface(module), layout=layout)

    def _not_preinitialized(self, why: str) -> None:
        self.stats.not_preinitialized.append(why)
        del self.stats.not_preinitialized[:-MAX_NOTES]

    def _snapshot(self, built: _Built, trusted: bool = False) -> _Built | None:
        """The snapshot of an instrumented module after its ``_initialize``, compiled; None
        (the reason noted) when it cannot be taken; _Transient when that may pass."""
        settings = self._engine.settings
        assert built.layout is not None
        try:
            state = preinit.run_initialize(
                self._engine, built.module, built.layout, settings.default_limits()
            )
            snapshot = preinit.snapshot(built.layout, state)
            check_shape(snapshot, settings.module_bounds)
            payload, module = self._compiled_form(snapshot, trusted)
        except (preinit.Refused, SandboxError) as exc:
            self._not_preinitialized(str(exc))
            transient = exc.transient if isinstance(exc, preinit.Refused) else exc.contended
            if transient:
                raise _Transient from None
            return None
        self.stats.compiled += 1
        self.stats.preinitialized += 1
        return _Built(payload, module, _interface(module), preinitialized=True)

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
        # its class and message only: the error's traceback holds the frames of the load, and
        # they the module's bytes (30 MB each for modules made to be refused)
        kept = SandboxError(error.failure_class, error.message)
        with self._lock:
            self._refused[digest] = (kept, self._clock())
            self._refused.move_to_end(digest)
            while len(self._refused) > REFUSALS_KEPT:
                self._refused.popitem(last=False)

    def _compile(self, data: bytes, digest: str) -> CompiledModule:
        settings = self._engine.settings
        limit = settings.max_module_bytes
        if len(data) > limit:
            raise invalid_module(f"the module is {len(data)} bytes; the limit is {limit}")
        found = self._from_disk(digest)
        if found is not None:
            # the artifact is of these very bytes (its checksum binds it to their digest), which
            # check_shape measured before they were compiled: only the bounds may have changed
            check_figures(found.shape, settings.module_bounds)
            info = self._check(found.interface, data, digest, found.preinitialized)
            module, size, source = found.module, found.size, found.source
        else:
            shape = check_shape(data, settings.module_bounds)
            # A start function runs as an export the host calls (see detach_start); the
            # artifact on disk is of the rewritten module, under the original module's digest.
            trusted = digest in self._trusted
            built = self._build(data, trusted)
            info = self._check(built.interface, data, digest, False)
            keep = True
            if built.layout is not None and info.flavour != FLAVOUR_EXTISM:
                try:
                    snapshot = self._snapshot(built, trusted)
                except _Transient:  # runs as it is; not kept on disk, so a later load retries
                    snapshot, keep = None, False
                if snapshot is not None:
                    try:
                        info = self._check(snapshot.interface, data, digest, True)
                        built = snapshot
                    except SandboxError as exc:
                        self._not_preinitialized(f"the snapshot: {exc}")
            module, size, source = built.module, len(built.payload), compress_source(data)
            if keep:  # only modules that pass the checks are kept on disk
                facts = _facts(shape, built.interface, built.preinitialized)
                self._store.put(digest, built.payload, facts, source)
        if info.flavour == FLAVOUR_EXTISM:
            # Extism links its own kernel; it compiles the module itself per set of limits.
            # Its limiter bounds no table without a maximum, and counts memory grown only
            # after the instance was made: each gets a maximum (``cap_growth``). It refuses a
            # growth that reaches a memory's declared maximum, not only one past it: one page
            # more lets an instance hold exactly ``max_memory_mib``.
            pages = min(settings.max_memory_mib * MIB // WASM_PAGE + 1, _MAX_PAGES_32)
            capped = cap_growth(data, settings.max_table_elements, pages)
            extism = ExtismModule(capped, info.wasi)
            try:
                check_links(self._extism, extism, settings.default_limits())
            except SandboxError as exc:
                if exc.failure_class is FailureClass.TIMEOUT:
                    raise SandboxError(exc.failure_class, exc.message) from None
                raise invalid_module(exc.message) from None
            return CompiledModule(info, Native(module, None, size), source, extism)
        return CompiledModule(info, Native(module, self._link(module), size), source)

    def _check(
        self, interface: Interface, data: bytes, digest: str, preinitialized: bool
    ) -> ModuleInfo:
        """``check_module`` of a module's interface (its snapshot's, when ``preinitialized``)."""
        start = detach_start(data) is not None
        info = check_module(interface, digest, len(data), self._entrypoints, start)
        return dataclasses.replace(info, preinitialized=True) if preinitialized else info

    def _link(self, module: wasmtime.Module) -> wasmtime.InstancePre:
        try:
            return self._engine.linker.instantiate_pre(module)
        except wasmtime.WasmtimeError as exc:
            raise invalid_module(
                f"the module's imports cannot be linked: {error_line(exc)}"
            ) from None

    def _deserialize(self, payload: bytes | bytearray) -> wasmtime.Module:
        try:
            return wasmtime.Module.deserialize(self._engine.engine, payload)
        except wasmtime.WasmtimeError as exc:
            raise invalid_module(f"the compiled module does not load: {error_line(exc)}") from None

    def _from_disk(self, digest: str) -> _Found | None:
        """The module from its disk artifact, with what was kept with it; None when absent."""
        with self._store.read(digest) as artifact:
            if artifact is None:
                return None
            extra = artifact.extra
            try:
                *figures, preinitialized = _SHAPE.unpack_from(extra)
                shape = ModuleShape(*figures)
                interface = Interface.from_bytes(extra[_SHAPE.size :])
            except (struct.error, ValueError) as exc:
                self._store.discard(digest, f"no module shape and interface kept with it: {exc}")
                return None
            try:
                module = self._map(artifact)
            except wasmtime.WasmtimeError as exc:
                self._store.discard(digest, f"wasmtime refused it: {error_line(exc)}")
                return None
            size = len(artifact.payload)
        self.stats.disk_hits += 1
        return _Found(module, size, shape, interface, artifact.tail, bool(preinitialized))

    def _map(self, artifact: Artifact) -> wasmtime.Module:
        """The module of a checked artifact: wasmtime maps the checked file itself (through the
        descriptor's path) where it can, else it is given a copy of the payload."""
        if artifact.path is not None and not self._copy_only:
            try:
                return wasmtime.Module.deserialize_file(self._engine.engine, artifact.path)
            except wasmtime.WasmtimeError:
                # a directory wasmtime cannot map code from (a noexec mount): copies from now on
                self._copy_only = True
        return wasmtime.Module.deserialize(self._engine.engine, bytes(artifact.payload))
