"""Precompiled modules on disk: one artifact per module digest and engine key.

An artifact is ``<sha256>.<engine key>.cwasm``: a header (magic, engine key, the source module's
digest, the payload's length and sha256) and the payload, wasmtime's serialized module. ``get``
returns a payload only when the header matches, so a corrupt, truncated or foreign file (another
wasmtime version or engine configuration, another module) is deleted and never handed to
wasmtime. The directory must be writable only by the controller: a payload is native code.
"""

from __future__ import annotations

import contextlib
import hashlib
import os
import stat
import tempfile
from dataclasses import dataclass, field
from pathlib import Path

ARTIFACT_MAGIC = b"MSCWASM1"
MAX_ARTIFACT_BYTES = 512 * 1024 * 1024
_KEY_BYTES = 8  # the engine key: 16 hex digits
HEADER_LEN = len(ARTIFACT_MAGIC) + _KEY_BYTES + 32 + 8 + 32


@dataclass
class CacheStats:
    """What the module cache did: compiles, hits in memory and on disk, refused artifacts."""

    compiled: int = 0
    disk_hits: int = 0
    memory_hits: int = 0
    disk_rejected: int = 0
    disk_errors: list[str] = field(default_factory=list)


class ArtifactStore:
    """The artifacts of one engine key in one directory (or none: ``directory`` is None)."""

    def __init__(self, directory: Path | None, engine_key: str, stats: CacheStats) -> None:
        self._dir = directory
        self._key = engine_key
        self._stats = stats
        self._private: bool | None = None

    def path(self, digest: str) -> Path | None:
        if self._dir is None or not self._dir_is_private():
            return None
        return self._dir / f"{digest}.{self._key}.cwasm"

    def get(self, digest: str) -> bytes | None:
        """The payload stored for ``digest``, or None (missing, or refused and deleted)."""
        path = self.path(digest)
        if path is None:
            return None
        blob = self._read(path)
        if blob is None:
            return None
        payload = blob[HEADER_LEN:]
        if blob[:HEADER_LEN] != self._header(digest, payload):
            self.discard(digest, "header, engine key or checksum does not match")
            return None
        return payload

    def put(self, digest: str, payload: bytes) -> None:
        """Store ``payload`` atomically; a failure is noted, never raised (the cache is an
        optimisation: a read-only or full disk must not fail a load)."""
        path = self.path(digest)
        if path is None:
            return
        try:
            path.parent.mkdir(mode=0o700, parents=True, exist_ok=True)
            fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=".tmp-", suffix=".cwasm")
            with os.fdopen(fd, "wb") as out:
                out.write(self._header(digest, payload))
                out.write(payload)
            os.replace(tmp, path)
        except OSError as exc:
            self._stats.disk_errors.append(f"{path.name}: not written: {exc}")

    def discard(self, digest: str, why: str) -> None:
        """Delete the artifact of ``digest``, noting why."""
        path = self.path(digest)
        if path is None:
            return
        self._stats.disk_rejected += 1
        self._stats.disk_errors.append(f"{path.name}: {why}")
        with contextlib.suppress(OSError):
            path.unlink()

    def _dir_is_private(self) -> bool:
        """The directory is created 0700; an existing one must belong to this user and be
        writable by no one else, or the disk cache is not used at all."""
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
                self._stats.disk_errors.append(f"{self._dir}: disk cache not used: {problem}")
        return self._private

    def _read(self, path: Path) -> bytes | None:
        """The artifact's bytes: a regular file (never through a symlink) of bounded size."""
        try:
            fd = os.open(path, os.O_RDONLY | os.O_NOFOLLOW)
        except OSError:
            return None
        with os.fdopen(fd, "rb") as file:
            st = os.fstat(file.fileno())
            if not stat.S_ISREG(st.st_mode) or st.st_size > MAX_ARTIFACT_BYTES:
                self._stats.disk_rejected += 1
                self._stats.disk_errors.append(
                    f"{path.name}: not a regular file of a plausible size"
                )
                with contextlib.suppress(OSError):
                    path.unlink()
                return None
            return file.read()

    def _header(self, digest: str, payload: bytes) -> bytes:
        return b"".join(
            (
                ARTIFACT_MAGIC,
                bytes.fromhex(self._key),
                bytes.fromhex(digest),
                len(payload).to_bytes(8, "big"),
                hashlib.sha256(payload).digest(),
            )
        )
