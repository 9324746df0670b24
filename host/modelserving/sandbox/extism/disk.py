"""Extism's compile cache on disk, kept under the same rules as the sandbox's own artifacts.

Compiling a standard Go module with Extism takes seconds; loading it from wasmtime's compile
cache, tens of milliseconds. But wasmtime's cache reads its files by path (through a symlink,
blocking on a FIFO) and loads them as native code without checking owner or mode, so Extism never
reads a shared cache directory. Instead (``ExtismDisk``):

- what Extism's cache wrote for a module (its cache files, by their names relative to the cache
  directory) is kept as one artifact per module digest in ``<cacheDir>/extism/``, written and
  read by ``artifacts.ArtifactStore`` (a private directory checked on its descriptor at every
  access, ``O_NOFOLLOW|O_NONBLOCK``, a regular file of this user that no one else can write, a
  header with the payload's checksum), at most a quarter of ``cacheMaxBytes``;
- each Extism worker gets a stage directory of its own (``.stage-<controller pid>-<random>``,
  mode 0700, created in that directory once it and ``cacheDir`` were checked on their
  descriptors: wasmtime reaches it by path); before compiling a module the worker empties
  it and writes there the files read from the module's artifact (``worker.Stage``), so Extism's
  cache can only find what passed these checks; after the compile the worker hands back what
  Extism wrote, and it is kept (``keep``) when the module was accepted.

The engine key of these artifacts is the extism-sys version, so an upgrade does not read the
previous version's files. Without a cache directory, or when it is refused, workers get no stage
directory and Extism caches nothing.
"""

from __future__ import annotations

import contextlib
import functools
import hashlib
import importlib.metadata
import json
import os
import re
import secrets
import shutil
from dataclasses import replace
from pathlib import Path

from modelserving.frames import frame
from modelserving.sandbox.artifacts import (
    ArtifactStore,
    CacheStats,
    DirectoryRefused,
    open_private_dir,
)
from modelserving.sandbox.extism.worker import listing, split_files
from modelserving.sandbox.settings import SandboxSettings

STAGE_PREFIX = ".stage-"
_STAGE = re.compile(r"\.stage-(?P<pid>\d+)-[0-9a-f]+")
_MAX_LISTING = 64 * 1024


@functools.cache
def engine_key() -> str:
    """16 hex digits naming the Extism build whose cache files an artifact holds."""
    version = importlib.metadata.version("extism_sys")
    return hashlib.sha256(f"extism-sys {version}".encode()).hexdigest()[:16]


class ExtismDisk:
    """The Extism cache artifacts of one sandbox, and its workers' stage directories."""

    def __init__(self, settings: SandboxSettings) -> None:
        self.directory = None if settings.cache_dir is None else settings.cache_dir / "extism"
        self.stats = CacheStats()
        quarter = replace(settings, cache_max_bytes=max(1, settings.cache_max_bytes // 4))
        self._store = ArtifactStore(self.directory, engine_key(), self.stats, quarter)
        self._remove_stale_stages()

    def files(self, digest: str) -> list[tuple[str, bytes]]:
        """The cache files kept for the module ``digest`` (none when missing or refused)."""
        payload = self._store.get(digest)
        if payload is None:
            return []
        files = _unpack(payload)
        if files is None:
            self._store.discard(digest, "not a list of Extism cache files")
            return []
        return files

    def keep(self, digest: str, files: list[tuple[str, bytes]]) -> None:
        """Keep what Extism's cache wrote when compiling the module ``digest``."""
        if files:
            self._store.put(digest, _pack(files))

    def new_stage(self) -> str:
        """A new, empty stage directory for one worker (mode 0700), or "" for none."""
        if self.directory is None:
            return ""
        try:
            # wasmtime reaches the stage by path: the cache directory too must be private
            parent = open_private_dir(self.directory.parent, create=True)
            if parent is not None:
                os.close(parent)
            dfd = open_private_dir(self.directory, create=True)
        except DirectoryRefused as exc:
            self.stats.note(f"{self.directory}: Extism cache not used: {exc}")
            return ""
        if dfd is None:
            return ""
        try:
            name = f"{STAGE_PREFIX}{os.getpid()}-{secrets.token_hex(8)}"
            os.mkdir(name, 0o700, dir_fd=dfd)
        except OSError as exc:
            self.stats.note(f"{self.directory}: no stage directory: {exc.strerror or exc}")
            return ""
        finally:
            os.close(dfd)
        return str(self.directory / name)

    def _remove_stale_stages(self) -> None:
        """Delete the stage directories of controllers that are gone (killed before they could)."""
        if self.directory is None or not self.directory.is_dir():
            return
        with contextlib.suppress(OSError):
            for entry in os.scandir(self.directory):
                match = _STAGE.fullmatch(entry.name)
                if match is not None and not _alive(int(match["pid"])):
                    remove_stage(str(self.directory / entry.name))


def remove_stage(path: str) -> None:
    """Delete a stage directory and what is in it (never following a symlink)."""
    if path and _STAGE.fullmatch(Path(path).name):
        shutil.rmtree(path, ignore_errors=True)


def _alive(pid: int) -> bool:
    if pid == os.getpid():
        return True
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True


def _pack(files: list[tuple[str, bytes]]) -> bytes:
    return frame(json.dumps(listing(files)).encode()) + b"".join(data for _, data in files)


def _unpack(payload: bytes) -> list[tuple[str, bytes]] | None:
    size = int.from_bytes(payload[:4], "big")
    if len(payload) < 4 or size > min(_MAX_LISTING, len(payload) - 4):
        return None
    try:
        names = json.loads(payload[4 : 4 + size])
    except ValueError:
        return None
    return split_files(names, payload, 4 + size)
