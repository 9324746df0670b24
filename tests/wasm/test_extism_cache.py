"""Extism's compile cache: kept as artifacts under the sandbox's own rules, staged into a worker's
own directory before a compile, and never read from anywhere a hostile file could be planted.
"""

from __future__ import annotations

import os
import threading
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

from modelserving.plugins.exports import plugin_sandbox
from modelserving.sandbox import Sandbox, SandboxSettings
from modelserving.sandbox.extism.disk import STAGE_PREFIX, ExtismDisk, engine_key
from tests.wasm.guests import extism_responding

OK = extism_responding(b"\x80")


@pytest.fixture
def own(tmp_path: Path) -> Iterator[Callable[..., Sandbox]]:
    """New sandboxes on one cache directory (closed at the end)."""
    made: list[Sandbox] = []

    def make(**settings: Any) -> Sandbox:
        settings.setdefault("cache_dir", tmp_path / "cache")
        sandbox = plugin_sandbox(SandboxSettings(**settings))
        made.append(sandbox)
        return sandbox

    yield make
    for sandbox in made:
        sandbox.close()


def works(sandbox: Sandbox) -> bool:
    return sandbox.call(sandbox.load(OK), "on_pod_create", b"", sandbox.limits()).response == (
        b"\x80"
    )


def extism_artifacts(cache: Path) -> list[Path]:
    return sorted((cache / "extism").glob(f"*.{engine_key()}.cwasm"))


def stages(cache: Path) -> list[Path]:
    return sorted((cache / "extism").glob(f"{STAGE_PREFIX}*"))


def loaded_once(own: Callable[..., Sandbox], tmp_path: Path) -> Path:
    """Load OK in a first sandbox; its one Extism artifact."""
    first = own()
    assert works(first)
    first.close()
    (path,) = extism_artifacts(tmp_path / "cache")
    return path


def test_a_new_worker_compiles_from_the_kept_artifact(
    own: Callable[..., Sandbox], tmp_path: Path
) -> None:
    first = own()
    assert works(first)
    assert (first.extism.disk.stats.compiled, first.extism.disk.stats.disk_hits) == (1, 0)
    assert len(stages(tmp_path / "cache")) == 1  # the running worker's
    first.close()
    assert stages(tmp_path / "cache") == []  # removed with its worker
    (path,) = extism_artifacts(tmp_path / "cache")
    assert (path.stat().st_mode & 0o777, path.stat().st_uid) == (0o600, os.geteuid())
    second = own()
    assert works(second)
    assert (second.extism.disk.stats.compiled, second.extism.disk.stats.disk_hits) == (0, 1)


@pytest.mark.parametrize("kind", ["symlink", "fifo", "group-writable", "owner"])
def test_a_hostile_artifact_is_not_read(
    own: Callable[..., Sandbox], tmp_path: Path, kind: str
) -> None:
    """A symlink (to a good artifact), a FIFO nobody writes to, a file others can write or of
    another user: refused on the descriptor, deleted, and the module compiled again."""
    path = loaded_once(own, tmp_path)
    if kind == "symlink":
        target = tmp_path / "elsewhere"
        path.rename(target)
        path.symlink_to(target)
    elif kind == "fifo":
        path.unlink()
        os.mkfifo(path, 0o600)
    elif kind == "group-writable":
        path.chmod(0o620)
    else:
        if os.geteuid() != 0:
            pytest.skip("giving a file to another user needs root")
        os.chown(path, 12345, -1)
    sandbox = own()
    outcome: list[bool] = []
    loader = threading.Thread(target=lambda: outcome.append(works(sandbox)), daemon=True)
    loader.start()
    loader.join(timeout=60)
    try:
        assert not loader.is_alive(), "the load blocked"
    finally:
        if loader.is_alive():
            os.close(os.open(path, os.O_WRONLY | os.O_NONBLOCK))
    assert outcome == [True]
    stats = sandbox.extism.disk.stats
    assert (stats.disk_rejected, stats.disk_hits, stats.compiled) == (1, 0, 1)
    assert not path.is_symlink() and path.is_file()  # replaced by a good artifact


@pytest.mark.parametrize("kind", ["fifo", "symlink"])
def test_what_is_planted_in_a_workers_stage_is_never_read(
    own: Callable[..., Sandbox], tmp_path: Path, kind: str
) -> None:
    """The worker empties its stage directory before each compile: a FIFO (which wasmtime's
    cache would block on) or a symlink at the very paths Extism's cache reads is gone first."""
    path = loaded_once(own, tmp_path)
    disk = ExtismDisk(SandboxSettings(cache_dir=tmp_path / "cache"))
    names = [name for name, _ in disk.files(path.name[:64])]
    assert len(names) == 2  # Extism's kernel and the module
    path.unlink()  # nothing to stage: Extism's cache looks for these files itself
    sandbox = own(extism_workers=1)
    sandbox.load(extism_responding(b"\x81"))  # starts the worker, and its stage directory
    (stage,) = stages(tmp_path / "cache")
    (tmp_path / "elsewhere").write_bytes(b"not a module")
    for name in names:
        planted = stage / "cache" / name
        planted.parent.mkdir(parents=True, exist_ok=True)
        planted.unlink(missing_ok=True)
        if kind == "fifo":
            os.mkfifo(planted, 0o600)
        else:
            planted.symlink_to(tmp_path / "elsewhere")
    outcome: list[bool] = []
    loader = threading.Thread(target=lambda: outcome.append(works(sandbox)), daemon=True)
    loader.start()
    loader.join(timeout=60)
    assert not loader.is_alive(), "the load blocked on what was planted"
    assert outcome == [True]
    assert sandbox.extism.disk.stats.compiled == 2  # b"\x81", then OK again
    assert (tmp_path / "elsewhere").read_bytes() == b"not a module"


def test_no_extism_cache_without_a_private_directory(
    own: Callable[..., Sandbox], tmp_path: Path
) -> None:
    shared = tmp_path / "shared"
    shared.mkdir()
    shared.chmod(0o777)
    sandbox = own(cache_dir=shared)
    assert works(sandbox)
    assert list(shared.glob("extism/*")) == []
    assert any("Extism cache not used" in note for note in sandbox.extism.disk.stats.disk_errors)
    nothing = own(cache_dir=None)
    assert works(nothing)


def test_no_configuration_file_is_read_without_a_cache(
    own: Callable[..., Sandbox], tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Without a cache directory Extism is told there is no cache (an empty
    EXTISM_CACHE_CONFIG): wasmtime's default configuration file, here a FIFO, is not opened."""
    home = tmp_path / "home"
    (home / ".config" / "wasmtime").mkdir(parents=True)
    os.mkfifo(home / ".config" / "wasmtime" / "config.toml", 0o600)
    monkeypatch.setenv("HOME", str(home))
    monkeypatch.setenv("XDG_CONFIG_HOME", str(home / ".config"))
    sandbox = own(cache_dir=None)
    outcome: list[bool] = []
    loader = threading.Thread(target=lambda: outcome.append(works(sandbox)), daemon=True)
    loader.start()
    loader.join(timeout=60)
    try:
        assert not loader.is_alive(), "the load blocked on the configuration FIFO"
    finally:
        if loader.is_alive():
            os.close(os.open(home / ".config/wasmtime/config.toml", os.O_WRONLY | os.O_NONBLOCK))
    assert outcome == [True]


def test_a_dead_controllers_stage_directories_are_removed(tmp_path: Path) -> None:
    extism = tmp_path / "cache" / "extism"
    extism.mkdir(parents=True, mode=0o700)
    (tmp_path / "cache").chmod(0o700)
    dead = extism / f"{STAGE_PREFIX}999999999-00ff"
    (dead / "cache").mkdir(parents=True)
    mine = extism / f"{STAGE_PREFIX}{os.getpid()}-00ff"
    mine.mkdir()
    ExtismDisk(SandboxSettings(cache_dir=tmp_path / "cache"))
    assert not dead.exists() and mine.exists()
