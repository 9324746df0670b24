"""Compiles each module once per sha256: in memory, and on disk as a precompiled artifact.

A disk artifact is ``<sha256>.<engine key>.cwasm``: a header (magic, engine key, the source
module's digest, the payload's length and sha256) and wasmtime's serialized module. The header
is checked before wasmtime ever sees the payload, so a corrupt, truncated or foreign file (another
wasmtime version or engine configuration, another module) is deleted and the module recompiled;
nothing is deserialized blindly. The cache directory must be writable only by the controller.
"""

from __future__ import annotations

import contextlib
import hashlib
import os
import stat
import tempfile
import threading
from collections import OrderedDict
from dataclasses import dataclass, field
from pathlib import Path

import wasmtime

from modelserving.sandbox.engine import SandboxEngine
from modelserving.sandbox.errors import SandboxError, error_line, invalid_module
from modelserving.sandbox.extism_call import ExtismModule, check_links
from modelserving.sandbox.module import FLAVOUR_EXTISM, ModuleInfo, check_module

WASM_MAGIC = b"\0asm"
ARTIFACT_MAGIC = b"MSCWASM1"
_KEY_BYTES = 8  # the engine key: 16 hex digits
_MAX_ARTIFACT_BYTES = 512 * 1024 * 1024
_HEADER_LEN = len(ARTIFACT_MAGIC) + _KEY_BYTES + 32 + 8 + 32


@dataclass
class CompiledModule:
    """A checked module, ready to instantiate many times (InstancePre)."""

    info: ModuleInfo
    module: wasmtime.Module
    pre: wasmtime.InstancePre | None
    extism: ExtismModule | None = None


@dataclass
class CacheStats:
    compiled: int = 0
    disk_hits: int = 0
    memory_hits: int = 0
    disk_rejected: int = 0
    disk_errors: list[str] = field(default_factory=list)


def sha256_hex(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()


class ModuleCache:
    """Compiled modules by digest; at most ``size`` kept in memory, least recently used evicted."""

    def __init__(self, engine: SandboxEngine, cache_dir: Path | None, size: int = 128) -> None:
        self._engine = engine
        self._dir = cache_dir
        self._size = size
        self._modules: OrderedDict[str, CompiledModule] = OrderedDict()
        self._lock = threading.Lock()
        self._private: bool | None = None
        self.stats = CacheStats()

    def load(self, data: bytes, expected_sha256: str | None = None) -> CompiledModule:
        """The compiled module for ``data``; InvalidModule when it is refused."""
        digest = sha256_hex(data)
        if expected_sha256 is not None and digest != expected_sha256:
            raise invalid_module(
                f"sha256 mismatch: the module's digest is {digest}, the plugin pins "
                f"{expected_sha256}"
            )
        with self._lock:
            hit = self._modules.get(digest)
            if hit is not None:
                self._modules.move_to_end(digest)
                self.stats.memory_hits += 1
                return hit
        compiled = self._compile(data, digest)
        with self._lock:
            self._modules[digest] = compiled
            while len(self._modules) > self._size:
                self._modules.popitem(last=False)
        return compiled

    def _compile(self, data: bytes, digest: str) -> CompiledModule:
        limit = self._engine.settings.max_module_bytes
        if len(data) > limit:
            raise invalid_module(f"the module is {len(data)} bytes; the limit is {limit}")
        if data[:4] != WASM_MAGIC:
            raise invalid_module(
                f"not a WebAssembly module (it starts with {data[:4]!r}, not {WASM_MAGIC!r})"
            )
        module = self._from_disk(digest)
        fresh = module is None
        if module is None:
            try:
                module = wasmtime.Module(self._engine.engine, data)
            except wasmtime.WasmtimeError as exc:
                raise invalid_module(f"the module does not compile: {error_line(exc)}") from None
            self.stats.compiled += 1
        info = check_module(module, digest, len(data))
        if fresh:  # only modules that pass the checks are kept on disk
            self._to_disk(digest, module)
        if info.flavour == FLAVOUR_EXTISM:
            # Extism links its own kernel; it compiles the module itself per set of limits.
            extism = ExtismModule(data, info.wasi)
            try:
                check_links(extism, self._engine.settings.default_limits())
            except SandboxError as exc:
                raise invalid_module(exc.message) from None
            return CompiledModule(info=info, module=module, pre=None, extism=extism)
        try:
            pre = self._engine.linker.instantiate_pre(module)
        except wasmtime.WasmtimeError as exc:
            raise invalid_module(
                f"the module's imports cannot be linked: {error_line(exc)}"
            ) from None
        return CompiledModule(info=info, module=module, pre=pre)

    def _path(self, digest: str) -> Path | None:
        if self._dir is None or not self._dir_is_private():
            return None
        return self._dir / f"{digest}.{self._engine.key}.cwasm"

    def _dir_is_private(self) -> bool:
        """The directory is created 0700; an existing one must belong to this user and be
        writable by no one else (a precompiled artifact is native code), or the disk cache is
        not used at all."""
        assert self._dir is not None
        if self._private is None:
            try:
                self._dir.mkdir(mode=0o700, parents=True, exist_ok=True)
                st = os.stat(self._dir, follow_symlinks=False)
                problem = None
                if not stat.S_ISDIR(st.st_mode):
                    problem = "not a directory"
                elif st.st_uid != os.geteuid():
                    problem = f"owned by uid {st.st_uid}, not this process's {os.geteuid()}"
                elif st.st_mode & 0o022:
                    problem = f"writable by others (mode {stat.S_IMODE(st.st_mode):o})"
            except OSError as exc:
                problem = str(exc)
            self._private = problem is None
            if problem is not None:
                self.stats.disk_errors.append(f"{self._dir}: disk cache not used: {problem}")
        return self._private

    def _read(self, path: Path) -> bytes | None:
        """The artifact's bytes: a regular file (never through a symlink) of bounded size."""
        try:
            fd = os.open(path, os.O_RDONLY | os.O_NOFOLLOW)
        except OSError:
            return None
        with os.fdopen(fd, "rb") as file:
            st = os.fstat(file.fileno())
            if not stat.S_ISREG(st.st_mode) or st.st_size > _MAX_ARTIFACT_BYTES:
                self._reject(path, "not a regular file of a plausible size")
                return None
            return file.read()

    def _header(self, digest: str, payload: bytes) -> bytes:
        return b"".join(
            (
                ARTIFACT_MAGIC,
                bytes.fromhex(self._engine.key),
                bytes.fromhex(digest),
                len(payload).to_bytes(8, "big"),
                hashlib.sha256(payload).digest(),
            )
        )

    def _from_disk(self, digest: str) -> wasmtime.Module | None:
        path = self._path(digest)
        if path is None:
            return None
        blob = self._read(path)
        if blob is None:
            return None
        payload = blob[_HEADER_LEN:]
        if blob[:_HEADER_LEN] != self._header(digest, payload):
            self._reject(path, "header, engine key or checksum does not match")
            return None
        try:
            module = wasmtime.Module.deserialize(self._engine.engine, payload)
        except wasmtime.WasmtimeError as exc:
            self._reject(path, f"wasmtime refused it: {error_line(exc)}")
            return None
        self.stats.disk_hits += 1
        return module

    def _reject(self, path: Path, why: str) -> None:
        self.stats.disk_rejected += 1
        self.stats.disk_errors.append(f"{path.name}: {why}")
        with contextlib.suppress(OSError):
            path.unlink()

    def _to_disk(self, digest: str, module: wasmtime.Module) -> None:
        path = self._path(digest)
        if path is None:
            return
        try:
            payload = bytes(module.serialize())
            path.parent.mkdir(mode=0o700, parents=True, exist_ok=True)
            fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=".tmp-", suffix=".cwasm")
            with os.fdopen(fd, "wb") as out:
                out.write(self._header(digest, payload))
                out.write(payload)
            os.replace(tmp, path)
        except (OSError, wasmtime.WasmtimeError) as exc:
            # The cache is an optimisation: a read-only or full disk must not fail a load.
            self.stats.disk_errors.append(f"{path.name}: not written: {exc}")
