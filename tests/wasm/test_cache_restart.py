"""A restart's load from the disk cache: the checked file mapped by wasmtime (or a copy where
there is no descriptor path), the module's shape and interface taken from the artifact (still
held to the current bounds and ABI rules), its compressed bytes kept from it and checked against
the module's digest before they are compiled again."""

from __future__ import annotations

import dataclasses
from pathlib import Path
from typing import Any

import msgpack
import pytest
import wasmtime

from modelserving.plugins.exports import ENTRYPOINTS, plugin_sandbox
from modelserving.sandbox import Sandbox, SandboxError, SandboxSettings, artifacts
from modelserving.sandbox.cache import _SHAPE
from modelserving.sandbox.module import Interface, check_module, describe
from modelserving.sandbox.settings import ModuleBounds
from tests.wasm.guests import responding

ANSWER: bytes = msgpack.packb({"patch": []})
ROOT = Path(__file__).resolve().parents[2]
REAL_MODULES = sorted((ROOT / "plugins-wasm").glob("*.wasm")) + sorted(
    (ROOT / "examples" / "wasm").glob("*.wasm")
)


def restart(cache_dir: Path | None, **settings: Any) -> Sandbox:
    """A new sandbox over ``cache_dir``, as after a restart."""
    return plugin_sandbox(SandboxSettings(cache_dir=cache_dir, **settings))


def calls(sandbox: Sandbox, module: bytes, request: bytes) -> bytes:
    compiled = sandbox.load(module)
    return sandbox.call(compiled, "ms_on_pod_create", request, sandbox.limits()).response


@pytest.mark.parametrize("fd_paths", [artifacts.FD_PATHS, None], ids=["mapped", "copied"])
def test_a_restart_loads_the_artifact_mapped_or_copied(
    tmp_path: Path, request_bytes: bytes, monkeypatch: pytest.MonkeyPatch, fd_paths: str | None
) -> None:
    module = responding(ANSWER)
    restart(tmp_path).load(module)
    monkeypatch.setattr(artifacts, "FD_PATHS", fd_paths)
    maps: list[str] = []
    real = artifacts.ArtifactStore._check

    def spy(self: artifacts.ArtifactStore, *args: object) -> artifacts.Artifact | None:
        found = real(self, *args)  # type: ignore[arg-type]
        maps.append(str(None if found is None else found.path))
        return found

    monkeypatch.setattr(artifacts.ArtifactStore, "_check", spy)
    restarted = restart(tmp_path)
    assert calls(restarted, module, request_bytes) == ANSWER
    stats = restarted.modules.stats
    assert (stats.compiled, stats.disk_hits) == (0, 1)
    assert maps == ([f"{fd_paths}/" + maps[0].rsplit("/", 1)[-1]] if fd_paths else ["None"])


def test_an_artifact_wasmtime_cannot_map_is_given_as_a_copy_and_kept(
    tmp_path: Path, request_bytes: bytes, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A directory wasmtime cannot map code from (a noexec mount): the checked artifact is
    deserialized from a copy instead, not deleted and compiled again."""
    module = responding(ANSWER)
    restart(tmp_path).load(module)

    def refused(engine: object, path: str) -> wasmtime.Module:
        raise wasmtime.WasmtimeError("failed to mmap: permission denied")

    monkeypatch.setattr(wasmtime.Module, "deserialize_file", staticmethod(refused))
    restarted = restart(tmp_path)
    assert calls(restarted, module, request_bytes) == ANSWER
    stats = restarted.modules.stats
    assert (stats.compiled, stats.disk_hits, stats.disk_rejected) == (0, 1, 0)


def test_wasmtime_accepts_an_artifact_with_the_trailer_after_the_payload(tmp_path: Path) -> None:
    """The mapped file is the whole artifact: wasmtime must ignore what follows its payload."""
    module = responding(ANSWER)
    restart(tmp_path).load(module)
    (path,) = tmp_path.glob("*.cwasm")
    import wasmtime

    engine = restart(tmp_path).engine.engine
    assert wasmtime.Module.deserialize_file(engine, str(path)) is not None


def test_a_restart_holds_the_kept_shape_to_the_current_bounds(tmp_path: Path) -> None:
    module = responding(ANSWER)
    restart(tmp_path).load(module)
    strict = restart(tmp_path, module_bounds=ModuleBounds(max_functions=1))
    with pytest.raises(SandboxError, match=r"functions; the limit is 1 "):
        strict.load(module)
    stats = strict.modules.stats
    assert (stats.compiled, stats.disk_hits) == (0, 1), "refused from the kept shape"


def test_a_restart_runs_the_abi_checks_on_the_kept_interface(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    module = responding(ANSWER)
    restart(tmp_path).load(module)
    from modelserving.sandbox import cache

    seen: list[object] = []
    real = check_module

    def spy(module: object, *args: object, **kwargs: object) -> object:
        seen.append(module)
        return real(module, *args, **kwargs)  # type: ignore[arg-type]

    monkeypatch.setattr(cache, "check_module", spy)
    restart(tmp_path).load(module)
    assert len(seen) == 1 and isinstance(seen[0], Interface)


@pytest.mark.parametrize("path", REAL_MODULES, ids=lambda p: p.name)
def test_the_kept_interface_gives_the_checks_what_the_module_gives(path: Path) -> None:
    import wasmtime

    sandbox = restart(None)
    data = path.read_bytes()
    from modelserving.sandbox.structure import detach_start

    detached = detach_start(data)
    module = wasmtime.Module(sandbox.engine.engine, data if detached is None else detached)
    interface = describe(module)
    assert Interface.from_bytes(interface.to_bytes()) == interface
    start = detached is not None
    assert check_module(interface, "0" * 64, len(data), ENTRYPOINTS, start) == check_module(
        module, "0" * 64, len(data), ENTRYPOINTS, start
    )


@pytest.mark.parametrize(
    "extra", [b"", b"\0" * (_SHAPE.size - 1), b"\0" * _SHAPE.size + b"{not json"]
)
def test_an_artifact_without_a_readable_shape_or_interface_is_deleted_and_recompiled(
    tmp_path: Path, request_bytes: bytes, extra: bytes
) -> None:
    module = responding(ANSWER)
    first = restart(tmp_path)
    digest = first.load(module).digest
    store = first.modules._store
    payload = store.get(digest)
    assert payload is not None
    store.put(digest, payload, extra)  # a good checksum over a bad extra
    restarted = restart(tmp_path)
    assert calls(restarted, module, request_bytes) == ANSWER
    stats = restarted.modules.stats
    assert (stats.disk_rejected, stats.compiled) == (1, 1)
    assert "no module shape and interface" in stats.disk_errors[0]


def test_kept_bytes_that_do_not_match_the_digest_are_never_compiled(tmp_path: Path) -> None:
    """The tail (the module's compressed bytes) is outside the checksum: a restart uses it only
    after an eviction with the artifact gone, and then checks it against the digest first."""
    module, other = responding(ANSWER), responding(msgpack.packb({"patch": None}))
    first = restart(tmp_path)
    digest = first.load(module).digest
    store = first.modules._store
    with store.read(digest) as artifact:
        assert artifact is not None
        payload, extra = bytes(artifact.payload), artifact.extra
    from modelserving.sandbox.compiled import compress_source

    store.put(digest, payload, extra, compress_source(other))
    restarted = restart(tmp_path, memory_cache_max_bytes=1)
    compiled = restarted.load(module)
    restarted.load(other)  # evicts module
    for path in tmp_path.glob(f"{digest}.*.cwasm"):
        path.unlink()
    assert compiled.native is None
    with pytest.raises(SandboxError, match="do not match the module's digest"):
        restarted.modules.native(compiled)


def test_a_shape_is_kept_field_by_field() -> None:
    from modelserving.sandbox.structure import ModuleShape

    shape = ModuleShape(*range(1, len(dataclasses.fields(ModuleShape)) + 1))
    *figures, flag = _SHAPE.unpack(_SHAPE.pack(*dataclasses.astuple(shape), True))
    assert (ModuleShape(*figures), flag) == (shape, True)
