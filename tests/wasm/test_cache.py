"""The compile cache: once per digest in memory, precompiled on disk, bad files never loaded."""

from __future__ import annotations

from pathlib import Path

import msgpack
import pytest

from modelserving.api.hook import Hook
from modelserving.sandbox import Sandbox, SandboxError, SandboxSettings
from modelserving.sandbox.cache import ARTIFACT_MAGIC
from tests.wasm.guests import guest, hook, responding, returns

ANSWER: bytes = msgpack.packb({"patch": []})


def fresh(cache_dir: Path) -> Sandbox:
    """A new sandbox (empty memory cache) over ``cache_dir``, as after a restart."""
    return Sandbox(SandboxSettings(cache_dir=cache_dir))


def artifacts(cache_dir: Path) -> list[Path]:
    return sorted(cache_dir.glob("*.cwasm"))


def works(sandbox: Sandbox, module: bytes, request: bytes) -> bool:
    compiled = sandbox.load(module)
    result = sandbox.call(compiled, Hook.ON_POD_CREATE, request, sandbox.limits())
    return result.response == ANSWER


def test_a_module_is_compiled_once_then_served_from_memory(tmp_path: Path) -> None:
    sandbox = fresh(tmp_path)
    module = responding(ANSWER)
    first = sandbox.load(module)
    assert sandbox.load(module) is first
    assert (sandbox.modules.stats.compiled, sandbox.modules.stats.memory_hits) == (1, 1)


def test_a_restart_loads_the_precompiled_artifact(tmp_path: Path, request_bytes: bytes) -> None:
    module = responding(ANSWER)
    fresh(tmp_path).load(module)
    (path,) = artifacts(tmp_path)
    assert path.name.startswith(f"{fresh(tmp_path).load(module).info.sha256}.")
    restarted = fresh(tmp_path)
    assert works(restarted, module, request_bytes)
    assert (restarted.modules.stats.compiled, restarted.modules.stats.disk_hits) == (0, 1)


@pytest.mark.parametrize(
    "damage",
    [
        lambda blob: blob[: len(blob) // 2],
        lambda blob: blob[:-1] + bytes([blob[-1] ^ 0xFF]),
        lambda blob: b"garbage" + blob[7:],
        lambda blob: b"",
        lambda blob: ARTIFACT_MAGIC + b"\0" * 200,
    ],
    ids=["truncated", "payload bit flip", "bad magic", "empty", "forged header"],
)
def test_a_damaged_artifact_is_detected_deleted_and_recompiled(
    tmp_path: Path, request_bytes: bytes, damage: object
) -> None:
    module = responding(ANSWER)
    fresh(tmp_path).load(module)
    (path,) = artifacts(tmp_path)
    path.write_bytes(damage(path.read_bytes()))  # type: ignore[operator]
    restarted = fresh(tmp_path)
    assert works(restarted, module, request_bytes)
    stats = restarted.modules.stats
    assert (stats.disk_rejected, stats.disk_hits, stats.compiled) == (1, 0, 1)
    assert artifacts(tmp_path) == [path]  # rewritten, good this time
    assert fresh(tmp_path).load(module) is not None


def test_an_artifact_of_another_module_is_not_loaded(tmp_path: Path, request_bytes: bytes) -> None:
    """A file renamed to another digest (a foreign file) fails the header check."""
    first, second = responding(ANSWER), responding(msgpack.packb({"patch": None}))
    fresh(tmp_path).load(first)
    (path,) = artifacts(tmp_path)
    other = fresh(tmp_path)
    target_digest = other.modules.load(second).info.sha256
    (tmp_path / f"{target_digest}.{other.engine.key}.cwasm").write_bytes(path.read_bytes())
    restarted = fresh(tmp_path)
    compiled = restarted.load(second)
    assert restarted.modules.stats.disk_rejected == 1
    result = restarted.call(compiled, Hook.ON_POD_CREATE, request_bytes, restarted.limits())
    assert result.response == msgpack.packb({"patch": None})


def test_artifacts_of_another_engine_configuration_are_ignored(tmp_path: Path) -> None:
    module = responding(ANSWER)
    fresh(tmp_path).load(module)
    other = Sandbox(SandboxSettings(cache_dir=tmp_path, max_wasm_stack_bytes=256 * 1024))
    other.load(module)
    assert other.modules.stats.compiled == 1
    assert len(artifacts(tmp_path)) == 2


def test_an_unwritable_cache_does_not_fail_a_load(tmp_path: Path, request_bytes: bytes) -> None:
    blocker = tmp_path / "file"
    blocker.write_text("not a directory")
    sandbox = fresh(blocker / "wasm")
    assert works(sandbox, responding(ANSWER), request_bytes)
    assert sandbox.modules.stats.disk_errors


def test_no_disk_cache_when_none_is_configured(request_bytes: bytes) -> None:
    sandbox = Sandbox(SandboxSettings(cache_dir=None))
    assert works(sandbox, responding(ANSWER), request_bytes)


def test_a_cache_directory_others_can_write_is_not_used(
    tmp_path: Path, request_bytes: bytes
) -> None:
    shared = tmp_path / "shared"
    shared.mkdir()
    shared.chmod(0o777)
    sandbox = fresh(shared)
    assert works(sandbox, responding(ANSWER), request_bytes)
    assert artifacts(shared) == []
    assert "writable by others" in sandbox.modules.stats.disk_errors[0]


def test_an_artifact_reached_through_a_symlink_is_not_read(
    tmp_path: Path, request_bytes: bytes
) -> None:
    module = responding(ANSWER)
    fresh(tmp_path).load(module)
    (path,) = artifacts(tmp_path)
    target = tmp_path / "elsewhere.bin"
    path.rename(target)
    path.symlink_to(target)
    restarted = fresh(tmp_path)
    assert works(restarted, module, request_bytes)
    assert (restarted.modules.stats.disk_hits, restarted.modules.stats.compiled) == (0, 1)


def test_a_refused_module_leaves_no_artifact(tmp_path: Path) -> None:
    sandbox = fresh(tmp_path)
    with pytest.raises(SandboxError):
        sandbox.load(guest(hook(returns(0, 0)), marker=False))
    assert artifacts(tmp_path) == []
