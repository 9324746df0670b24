"""Precompiled modules on disk: one artifact per module digest and engine key, the total capped.

``cache.ModuleCache`` keeps a module's compiled form here once it passed the ABI checks and asks
for it before compiling. An artifact is ``<sha256>.<engine key>.cwasm``: the payload (wasmtime's
serialized module), the caller's extra bytes (the module cache keeps the module's shape there),
its tail (the module cache keeps the module's compressed bytes there), then a trailer: magic,
engine key, the source module's digest, the three lengths, and the sha256 of the payload, the
extra bytes and the trailer's own fields (so the checksum binds them to the digest and the
engine key). The tail is not covered: whoever uses it checks it itself (the module cache
compares the decompressed bytes with the module's digest before compiling them, and compiles
them as the untrusted input they are). The trailer comes last so the file starts with the
payload: wasmtime can map it as it is (``Artifact.path``) instead of copying it. ``read`` yields
an artifact only when its trailer and checksum match, so a corrupt, truncated or foreign file
(another wasmtime version or engine configuration, another module) is deleted and never handed
to wasmtime.

The checksum guards against accidents (a torn or partly lost write, a damaged disk, a file put
there by hand). It is no defence against someone who can write the file: they could compute the
checksum too (it was never keyed). That defence is the ownership and mode checks below: only
this user (or root) can write an artifact, and such a process can already change the controller
itself (ptrace, /proc/<pid>/mem).

A payload is native code, so nothing here trusts a path or an earlier check. Every ``read``,
``get``, ``put`` and ``discard`` opens the directory itself without following a symlink and
checks that descriptor (a directory of this user that no one else can write); the artifact is
opened relative to it with ``O_NOFOLLOW|O_NONBLOCK`` (a symlink is refused, a FIFO does not
block) and the descriptor that is read must be a regular file of this user that no one else can
write, of a plausible size. The bytes checked are read from that descriptor; wasmtime is given
the same open file through ``/proc/self/fd/<n>`` (where there is one; elsewhere a copy of the
bytes read), never the path again, and maps it. Artifacts are only ever written as a new file
renamed into place, never changed in place, so the file wasmtime maps is the one that was
checked (only a process of this user or root could change it, see above). A refused artifact
is deleted; a refused directory is not used at all, until a later access finds it fixed.

After each ``put`` the ``*.cwasm`` files are trimmed to ``SandboxSettings.cache_max_bytes``:
artifacts of other engine keys first (dead weight after an upgrade), then the least recently
used (modification time, set when written and refreshed on every disk hit); the artifact just
written goes only when it alone exceeds the cap. Temporary files of interrupted writes are
deleted once a minute old.
"""

from __future__ import annotations

import contextlib
import errno
import hashlib
import os
import re
import secrets
import stat
import threading
import time
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path

from modelserving.sandbox.settings import SandboxSettings

ARTIFACT_MAGIC = b"MSCWASM3"
"""The trailer's first field; a new one whenever what an artifact keeps changes (3: the module
shape's count of local declarations), so an artifact of another layout is foreign and deleted."""
_KEY_BYTES = 8  # the engine key: 16 hex digits
_FIELDS_LEN = len(ARTIFACT_MAGIC) + _KEY_BYTES + 32 + 3 * 8
TRAILER_LEN = _FIELDS_LEN + 32
FD_PATHS: str | None = "/proc/self/fd" if os.path.isdir("/proc/self/fd") else None
"""Where an open descriptor can be reached by path (Linux); None: wasmtime gets the bytes."""
ARTIFACT_NAME = re.compile(r"[0-9a-f]{64}\.(?P<key>[0-9a-f]{16})\.cwasm")
TMP_PREFIX = ".tmp-"
STALE_TMP_SECONDS = 60
MAX_NOTES = 64
"""``CacheStats.disk_errors`` keeps the latest this many messages."""

_DIR_FLAGS = os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW | os.O_CLOEXEC
_READ_FLAGS = os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK | os.O_CLOEXEC
_WRITE_FLAGS = os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW | os.O_CLOEXEC


@dataclass
class CacheStats:
    """What the module cache did: compiles, hits in memory and on disk, refused and evicted
    artifacts, and the bytes its directory held after the last write; what it holds in memory
    (modules, their artifacts' bytes) and evicted from memory; modules pre-initialised and why
    others were not."""

    compiled: int = 0
    compiled_here: int = 0
    """Of ``compiled``, those of trusted modules, compiled in this process (no worker)."""
    disk_hits: int = 0
    memory_hits: int = 0
    disk_rejected: int = 0
    disk_evicted: int = 0
    disk_evicted_bytes: int = 0
    disk_bytes: int = 0
    memory_bytes: int = 0
    memory_modules: int = 0
    memory_evicted: int = 0
    memory_evicted_bytes: int = 0
    disk_errors: list[str] = field(default_factory=list)
    preinitialized: int = 0
    not_preinitialized: list[str] = field(default_factory=list)
    """Why modules with ``_initialize`` were not pre-initialised (the latest ``MAX_NOTES``)."""

    def note(self, message: str) -> None:
        """Keep ``message`` among the latest ``MAX_NOTES`` disk problems."""
        self.disk_errors.append(message)
        del self.disk_errors[:-MAX_NOTES]


@dataclass(frozen=True)
class Artifact:
    """A checked artifact, valid while ``ArtifactStore.read`` holds it open: its payload, the
    extra bytes and the (unchecked) tail stored with it, and a path that reaches the very file
    that was checked (None where descriptors have no path)."""

    payload: memoryview
    extra: bytes
    tail: bytes
    path: str | None


class DirectoryRefused(Exception):
    """The cache directory cannot be trusted (or opened); the text says why."""


class ArtifactStore:
    """The artifacts of one engine key in one directory (or none: ``directory`` is None)."""

    def __init__(
        self,
        directory: Path | None,
        engine_key: str,
        stats: CacheStats,
        settings: SandboxSettings | None = None,
        max_extra_bytes: int = 0,
    ) -> None:
        """``max_extra_bytes``: how long the extra bytes and tail of an artifact may be."""
        settings = settings or SandboxSettings()
        self._dir = directory
        self._key = engine_key
        self._stats = stats
        self._max_bytes = settings.cache_max_bytes
        self._max_file_bytes = TRAILER_LEN + settings.max_artifact_bytes + max_extra_bytes
        self._trim_lock = threading.Lock()
        self._dir_problem: str | None = None

    def name(self, digest: str) -> str:
        """The artifact's file name in the directory."""
        return f"{digest}.{self._key}.cwasm"

    def get(self, digest: str) -> bytes | None:
        """The payload stored for ``digest``, or None (missing, or refused and deleted)."""
        with self.read(digest) as artifact:
            return None if artifact is None else bytes(artifact.payload)

    @contextlib.contextmanager
    def read(self, digest: str) -> Iterator[Artifact | None]:
        """The artifact stored for ``digest``, checked, held open while the context lasts; None
        when it is missing, or refused (and deleted)."""
        name = self.name(digest)
        with self._directory(create=False) as dfd:
            if dfd is None:
                yield None
                return
            opened = self._open(dfd, name)
            if opened is None:
                yield None
                return
            fd, blob = opened
            try:
                artifact = self._check(dfd, name, digest, fd, blob)
                if artifact is not None:
                    with contextlib.suppress(OSError):  # recency for the eviction order
                        os.utime(name, dir_fd=dfd, follow_symlinks=False)
                yield artifact
            finally:
                os.close(fd)

    def _check(self, dfd: int, name: str, digest: str, fd: int, blob: bytes) -> Artifact | None:
        """The artifact in ``blob`` when its trailer and checksum match; else refused."""
        fields = blob[-TRAILER_LEN:-32]
        payload_len, extra_len, tail_len = (
            int.from_bytes(fields[at : at + 8], "big")
            for at in range(_FIELDS_LEN - 24, _FIELDS_LEN, 8)
        )
        checked = payload_len + extra_len
        view = memoryview(blob)
        if (
            fields != self._fields(digest, payload_len, extra_len, tail_len)
            or checked + tail_len + TRAILER_LEN != len(blob)
            or self._checksum(view[:checked], b"", fields) != blob[-32:]
        ):
            self._refuse(dfd, name, "trailer, engine key or checksum does not match")
            return None
        path = None if FD_PATHS is None else f"{FD_PATHS}/{fd}"
        return Artifact(
            view[:payload_len], blob[payload_len:checked], blob[checked : checked + tail_len], path
        )

    def put(
        self, digest: str, payload: bytes | bytearray, extra: bytes = b"", tail: bytes = b""
    ) -> None:
        """Store ``payload``, ``extra`` and ``tail`` atomically, then trim the directory to its
        cap; a failure is noted, never raised (the cache is an optimisation: a read-only or full
        disk must not fail a load)."""
        name = self.name(digest)
        size = len(payload) + len(extra) + len(tail) + TRAILER_LEN
        if size > self._max_file_bytes:  # a read would refuse (and delete) it
            self._stats.note(
                f"{name}: not kept ({size} bytes; a read takes at most {self._max_file_bytes})"
            )
            return
        fields = self._fields(digest, len(payload), len(extra), len(tail))
        trailer = fields + self._checksum(payload, extra, fields)
        with self._directory(create=True) as dfd:
            if dfd is not None and self._write(dfd, name, (payload, extra, tail, trailer)):
                self._trim(dfd, keep=name)

    def discard(self, digest: str, why: str) -> None:
        """Delete the artifact of ``digest``, noting why."""
        with self._directory(create=False) as dfd:
            if dfd is not None:
                self._refuse(dfd, self.name(digest), why)

    @contextlib.contextmanager
    def _directory(self, create: bool) -> Iterator[int | None]:
        """A descriptor of the checked directory, or None (no disk cache, missing, refused)."""
        dfd = None if self._dir is None else self._open_dir(self._dir, create)
        try:
            yield dfd
        finally:
            if dfd is not None:
                os.close(dfd)

    def _open_dir(self, directory: Path, create: bool) -> int | None:
        try:
            dfd = open_private_dir(directory, create)
        except DirectoryRefused as exc:
            if str(exc) != self._dir_problem:  # noted once while it lasts, not on every load
                self._stats.note(f"{directory}: disk cache not used: {exc}")
            self._dir_problem = str(exc)
            return None
        self._dir_problem = None
        return dfd

    def _open(self, dfd: int, name: str) -> tuple[int, bytes] | None:
        """The open descriptor of the artifact ``name`` and its bytes, read from the descriptor
        that was checked; None when it is missing or refused."""
        try:
            fd = os.open(name, _READ_FLAGS, dir_fd=dfd)
        except FileNotFoundError:
            return None
        except OSError as exc:
            self._refuse(dfd, name, _open_problem(exc))
            return None
        try:
            st = os.fstat(fd)
            problem = _file_problem(st, self._max_file_bytes)
            if problem is not None:
                self._refuse(dfd, name, problem)
            else:
                blob = _read_all(fd, st.st_size)
                if blob is not None:
                    return fd, blob
                self._stats.note(f"{name}: not read: it changed size while read")
        except OSError as exc:
            self._stats.note(f"{name}: not read: {exc.strerror or exc}")
        os.close(fd)
        return None

    def _write(self, dfd: int, name: str, parts: tuple[bytes | bytearray, ...]) -> bool:
        """Write a new file beside ``name`` (created 0600, never through a link) and rename it
        into place, so a reader sees the old artifact or the whole new one."""
        tmp = f"{TMP_PREFIX}{secrets.token_hex(8)}"
        created = False
        try:
            fd = os.open(tmp, _WRITE_FLAGS, 0o600, dir_fd=dfd)
            created = True
            with os.fdopen(fd, "wb") as out:
                for part in parts:
                    out.write(part)
            os.replace(tmp, name, src_dir_fd=dfd, dst_dir_fd=dfd)
        except OSError as exc:
            if created:
                with contextlib.suppress(OSError):
                    os.unlink(tmp, dir_fd=dfd)
            self._stats.note(f"{name}: not written: {exc.strerror or exc}")
            return False
        return True

    def _refuse(self, dfd: int, name: str, why: str) -> None:
        self._stats.disk_rejected += 1
        self._stats.note(f"{name}: {why}")
        with contextlib.suppress(OSError):
            os.unlink(name, dir_fd=dfd)

    def _trim(self, dfd: int, keep: str) -> None:
        """Delete stale temporary files, then artifacts until their total fits the cap: other
        engine keys first, then the least recently used; ``keep`` last."""
        with self._trim_lock:
            artifacts = _artifacts(dfd)
            total = sum(size for _, _, size in artifacts)
            kept = [a for a in artifacts if a[0] == keep]

            def order(artifact: tuple[str, int, int]) -> tuple[bool, int]:
                match = ARTIFACT_NAME.fullmatch(artifact[0])
                return (match is not None and match["key"] == self._key, artifact[1])

            victims = sorted((a for a in artifacts if a[0] != keep), key=order) + kept
            for name, _, size in victims:
                if total <= self._max_bytes:
                    break
                try:
                    os.unlink(name, dir_fd=dfd)
                except FileNotFoundError:  # another process trimmed it first
                    total -= size
                    continue
                except OSError as exc:
                    self._stats.note(f"{name}: not evicted: {exc.strerror or exc}")
                    continue
                total -= size
                self._stats.disk_evicted += 1
                self._stats.disk_evicted_bytes += size
            self._stats.disk_bytes = total

    def _fields(self, digest: str, payload_len: int, extra_len: int, tail_len: int) -> bytes:
        """The trailer before its checksum."""
        return b"".join(
            (
                ARTIFACT_MAGIC,
                bytes.fromhex(self._key),
                bytes.fromhex(digest),
                payload_len.to_bytes(8, "big"),
                extra_len.to_bytes(8, "big"),
                tail_len.to_bytes(8, "big"),
            )
        )

    @staticmethod
    def _checksum(payload: bytes | bytearray | memoryview, extra: bytes, fields: bytes) -> bytes:
        checksum = hashlib.sha256(payload)
        checksum.update(extra)
        checksum.update(fields)
        return checksum.digest()


def _read_all(fd: int, size: int) -> bytes | None:
    """Exactly ``size`` bytes from the start of ``fd``; None when the file is not that long."""
    blob = os.pread(fd, size + 1, 0)
    return blob if len(blob) == size else None


def open_private_dir(path: Path, create: bool) -> int | None:
    """A descriptor of ``path``, a directory of this user that no one else can write (checked on
    the descriptor); None when it is missing and ``create`` is False. Created 0700 when missing.
    """
    try:
        try:
            dfd = os.open(path, _DIR_FLAGS)
        except FileNotFoundError:
            if not create:
                return None
            path.mkdir(mode=0o700, parents=True, exist_ok=True)
            dfd = os.open(path, _DIR_FLAGS)
    except OSError as exc:
        if exc.errno in (errno.ENOTDIR, errno.ELOOP) and path.is_symlink():
            raise DirectoryRefused("a symbolic link, not a directory") from None
        raise DirectoryRefused(exc.strerror or str(exc)) from None
    try:
        st = os.fstat(dfd)
        problem = "not a directory" if not stat.S_ISDIR(st.st_mode) else _owner_problem(st)
    except OSError as exc:
        problem = exc.strerror or str(exc)
    if problem is not None:
        os.close(dfd)
        raise DirectoryRefused(problem)
    return dfd


def _file_problem(st: os.stat_result, max_bytes: int) -> str | None:
    if not stat.S_ISREG(st.st_mode):
        return f"not a regular file ({_kind(st.st_mode)})"
    if not TRAILER_LEN <= st.st_size <= max_bytes:
        return f"{st.st_size} bytes, not between {TRAILER_LEN} and {max_bytes}"
    return _owner_problem(st)


def _owner_problem(st: os.stat_result) -> str | None:
    if st.st_uid != os.geteuid():
        return f"owned by uid {st.st_uid}, not this process's {os.geteuid()}"
    if st.st_mode & 0o022:
        return f"writable by others (mode {stat.S_IMODE(st.st_mode):o})"
    return None


def _open_problem(exc: OSError) -> str:
    if exc.errno == errno.ELOOP:
        return "a symbolic link, not a regular file"
    return f"cannot be opened: {exc.strerror or exc}"


def _kind(mode: int) -> str:
    for test, kind in (
        (stat.S_ISDIR, "a directory"),
        (stat.S_ISFIFO, "a FIFO"),
        (stat.S_ISSOCK, "a socket"),
        (stat.S_ISCHR, "a character device"),
        (stat.S_ISBLK, "a block device"),
    ):
        if test(mode):
            return kind
    return f"mode {mode:o}"


def _artifacts(dfd: int) -> list[tuple[str, int, int]]:
    """The regular ``*.cwasm`` artifacts in the directory as (name, mtime in ns, size), after
    deleting temporary files older than ``STALE_TMP_SECONDS``."""
    found: list[tuple[str, int, int]] = []
    stale = time.time_ns() - STALE_TMP_SECONDS * 1_000_000_000
    with os.scandir(dfd) as entries:
        for entry in entries:
            is_tmp = entry.name.startswith(TMP_PREFIX)
            if not is_tmp and ARTIFACT_NAME.fullmatch(entry.name) is None:
                continue
            try:
                st = entry.stat(follow_symlinks=False)
                if is_tmp and st.st_mtime_ns < stale:
                    os.unlink(entry.name, dir_fd=dfd)
            except OSError:
                continue
            if not is_tmp and stat.S_ISREG(st.st_mode):
                found.append((entry.name, st.st_mtime_ns, st.st_size))
    return found
