"""The compile cache: once per digest in memory, precompiled on disk, bad files never loaded."""

from __future__ import annotations

import hashlib
import os
import threading
import time
from pathlib import Path

import msgpack
import pytest

from modelserving.controller.metrics import Metrics
from modelserving.plugins.exports import plugin_sandbox
from modelserving.sandbox import Sandbox, SandboxError, SandboxSettings
from modelserving.sandbox.artifacts import TRAILER_LEN, ArtifactStore, CacheStats
from modelserving.sandbox.cache import ARTIFACT_MAGIC
from tests.wasm.guests import guest, hook, responding, returns

ANSWER: bytes = msgpack.packb({"patch": []})
OTHER_ANSWERS: tuple[bytes, ...] = (
    msgpack.packb({"patch": None}),
    msgpack.packb({"patch": [], "observations": []}),
)
KEY = "00112233aabbccdd"
OTHER_KEY = "ffeeddcc00112233"


def fresh(cache_dir: Path) -> Sandbox:
    """A new sandbox (empty memory cache) over ``cache_dir``, as after a restart."""
    return plugin_sandbox(SandboxSettings(cache_dir=cache_dir))


def artifacts(cache_dir: Path) -> list[Path]:
    return sorted(cache_dir.glob("*.cwasm"))


def works(sandbox: Sandbox, module: bytes, request: bytes, answer: bytes = ANSWER) -> bool:
    compiled = sandbox.load(module)
    result = sandbox.call(compiled, "ms_on_pod_create", request, sandbox.limits())
    return result.response == answer


def age(path: Path, seconds: float) -> None:
    """Set ``path``'s modification time ``seconds`` into the past (negative: the future)."""
    then = time.time() - seconds
    os.utime(path, (then, then), follow_symlinks=False)


def digest(n: int) -> str:
    return hashlib.sha256(str(n).encode()).hexdigest()


def names(cache_dir: Path) -> set[str]:
    return {p.name for p in cache_dir.iterdir()}


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
        lambda blob: blob[:100] + bytes([blob[100] ^ 0x01]) + blob[101:],
        lambda blob: b"garbage" + blob[7:],
        lambda blob: b"",
        lambda blob: ARTIFACT_MAGIC + b"\0" * 200,
    ],
    ids=["truncated", "checksum bit flip", "payload bit flip", "bad magic", "empty", "forged"],
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
    result = restarted.call(compiled, "ms_on_pod_create", request_bytes, restarted.limits())
    assert result.response == msgpack.packb({"patch": None})


def test_artifacts_of_another_engine_configuration_are_ignored(tmp_path: Path) -> None:
    module = responding(ANSWER)
    fresh(tmp_path).load(module)
    other = plugin_sandbox(SandboxSettings(cache_dir=tmp_path, max_wasm_stack_bytes=256 * 1024))
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
    sandbox = plugin_sandbox(SandboxSettings(cache_dir=None))
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
    """The link's target is a good artifact of this user: only O_NOFOLLOW keeps it out."""
    module = responding(ANSWER)
    fresh(tmp_path).load(module)
    (path,) = artifacts(tmp_path)
    target = tmp_path / "elsewhere.bin"
    path.rename(target)
    path.symlink_to(target)
    restarted = fresh(tmp_path)
    assert works(restarted, module, request_bytes)
    stats = restarted.modules.stats
    assert (stats.disk_hits, stats.compiled, stats.disk_rejected) == (0, 1, 1)
    assert "a symbolic link" in stats.disk_errors[0]
    assert target.is_file()  # the link was deleted, not what it points to
    assert not path.is_symlink()
    assert path.is_file()  # and replaced by a good artifact


def test_a_fifo_at_the_artifact_path_does_not_block_the_load(
    tmp_path: Path, request_bytes: bytes
) -> None:
    """Opened without O_NONBLOCK, a FIFO nobody writes to holds the load until a writer comes."""
    module = responding(ANSWER)
    fresh(tmp_path).load(module)
    (path,) = artifacts(tmp_path)
    path.unlink()
    os.mkfifo(path, 0o600)
    restarted = fresh(tmp_path)
    outcome: list[bool] = []
    loader = threading.Thread(
        target=lambda: outcome.append(works(restarted, module, request_bytes)), daemon=True
    )
    loader.start()
    loader.join(timeout=30)
    try:
        assert not loader.is_alive(), "the load blocked on the FIFO"
    finally:
        if loader.is_alive():  # let the blocked open return, so the thread ends
            os.close(os.open(path, os.O_WRONLY | os.O_NONBLOCK))
    assert outcome == [True]
    stats = restarted.modules.stats
    assert (stats.disk_hits, stats.compiled, stats.disk_rejected) == (0, 1, 1)
    assert "not a regular file (a FIFO)" in stats.disk_errors[0]
    assert path.is_file()  # replaced by a good artifact


@pytest.mark.parametrize(
    ("change", "problem"),
    [
        ("owner", "owned by uid 12345"),
        ("group-writable", "writable by others (mode 620)"),
        ("world-writable", "writable by others (mode 602)"),
    ],
)
def test_an_artifact_of_another_user_or_writable_by_others_is_not_loaded(
    tmp_path: Path, request_bytes: bytes, change: str, problem: str
) -> None:
    """The artifact is intact: only the owner and mode checks on the descriptor refuse it."""
    module = responding(ANSWER)
    fresh(tmp_path).load(module)
    (path,) = artifacts(tmp_path)
    if change == "owner":
        if os.geteuid() != 0:
            pytest.skip("giving a file to another user needs root")
        os.chown(path, 12345, -1)
    else:
        path.chmod(0o620 if change == "group-writable" else 0o602)
    restarted = fresh(tmp_path)
    assert works(restarted, module, request_bytes)
    stats = restarted.modules.stats
    assert (stats.disk_hits, stats.compiled, stats.disk_rejected) == (0, 1, 1)
    assert problem in stats.disk_errors[0]
    rewritten = path.stat()
    assert (rewritten.st_uid, rewritten.st_mode & 0o777) == (os.geteuid(), 0o600)


def test_a_directory_opened_to_others_after_first_use_is_no_longer_trusted(
    tmp_path: Path, request_bytes: bytes
) -> None:
    cache = tmp_path / "wasm"
    first, second, third = responding(ANSWER), *(responding(a) for a in OTHER_ANSWERS)
    fresh(cache).load(first)  # the artifact of `first` is on disk
    sandbox = fresh(cache)
    sandbox.load(second)  # this sandbox has checked and used the directory
    cache.chmod(0o777)
    assert works(sandbox, first, request_bytes)
    stats = sandbox.modules.stats
    assert (stats.disk_hits, stats.compiled) == (0, 2)
    assert "disk cache not used: writable by others (mode 777)" in stats.disk_errors[-1]
    assert len(artifacts(cache)) == 2  # `first` was not written again either
    cache.chmod(0o700)  # fixed: used again
    sandbox.load(third)
    assert len(artifacts(cache)) == 3


def test_a_directory_replaced_by_a_symlink_after_first_use_is_no_longer_trusted(
    tmp_path: Path, request_bytes: bytes
) -> None:
    """The link points to a directory that passes the owner and mode checks and holds a good
    artifact: only opening the directory itself with O_NOFOLLOW, every time, keeps it out."""
    cache = tmp_path / "wasm"
    first, second, third = responding(ANSWER), *(responding(a) for a in OTHER_ANSWERS)
    fresh(cache).load(first)
    sandbox = fresh(cache)
    sandbox.load(second)
    elsewhere = tmp_path / "elsewhere"
    cache.rename(elsewhere)
    cache.symlink_to(elsewhere, target_is_directory=True)
    before = names(elsewhere)
    assert works(sandbox, first, request_bytes)
    sandbox.load(third)
    stats = sandbox.modules.stats
    assert (stats.disk_hits, stats.compiled) == (0, 3)
    assert "disk cache not used: a symbolic link" in stats.disk_errors[-1]
    assert names(elsewhere) == before  # nothing written through the link


def artifact_of(cache_dir: Path, module: bytes) -> Path:
    (path,) = cache_dir.glob(f"{hashlib.sha256(module).hexdigest()}.*.cwasm")
    return path


def test_the_least_recently_used_artifact_is_evicted_first(
    tmp_path: Path, request_bytes: bytes
) -> None:
    """A disk hit makes an artifact recent again: the older write goes, not the one just read."""
    a, b, c = responding(ANSWER), *(responding(x) for x in OTHER_ANSWERS)
    scratch = fresh(tmp_path / "scratch")
    for module in (a, b, c):
        scratch.load(module)
    size = {m: artifact_of(tmp_path / "scratch", m).stat().st_size for m in (a, b, c)}
    cache = tmp_path / "wasm"
    cap = max(size[a] + size[b], size[a] + size[c])  # two fit, three do not
    settings = SandboxSettings(cache_dir=cache, cache_max_bytes=cap)
    first = plugin_sandbox(settings)
    first.load(a)
    first.load(b)
    age(artifact_of(cache, a), 300)  # `a` written long ago ...
    age(artifact_of(cache, b), 200)
    restarted = plugin_sandbox(settings)
    assert works(restarted, a, request_bytes)  # ... but read from disk just now
    restarted.load(c)
    stats = restarted.modules.stats
    assert (stats.disk_hits, stats.compiled) == (1, 1)
    assert artifacts(cache) == sorted([artifact_of(cache, a), artifact_of(cache, c)])
    assert (stats.disk_evicted, stats.disk_evicted_bytes) == (1, size[b])
    assert stats.disk_bytes == size[a] + size[c]
    metrics = Metrics()
    metrics.sync_module_cache(stats)
    text = metrics.render().decode()
    assert "modelserving_module_cache_evictions_total 1.0" in text
    assert f"modelserving_module_cache_evicted_bytes_total {float(size[b])}" in text


def store(directory: Path, stats: CacheStats, settings: SandboxSettings) -> ArtifactStore:
    return ArtifactStore(directory, KEY, stats, settings)


def test_other_engine_keys_are_evicted_first_and_stale_temporary_files_deleted(
    tmp_path: Path,
) -> None:
    one = TRAILER_LEN + 100
    stats = CacheStats()
    artifacts_store = store(tmp_path, stats, SandboxSettings(cache_max_bytes=3 * one))
    for n in range(3):
        artifacts_store.put(digest(n), b"x" * 100)
        age(tmp_path / artifacts_store.name(digest(n)), 300 - n)
    upgrade_leftover = f"{digest(9)}.{OTHER_KEY}.cwasm"
    (tmp_path / upgrade_leftover).write_bytes(b"y" * one)  # the most recent of all
    (tmp_path / ".tmp-dead").write_bytes(b"z" * one)
    age(tmp_path / ".tmp-dead", 120)
    (tmp_path / ".tmp-busy").write_bytes(b"z")  # another writer, still at work
    (tmp_path / "notes.txt").write_bytes(b"n" * 4 * one)  # not an artifact: not counted
    artifacts_store.put(digest(3), b"x" * 100)
    assert names(tmp_path) == {
        *(artifacts_store.name(digest(n)) for n in (1, 2, 3)),
        ".tmp-busy",
        "notes.txt",
    }
    assert (stats.disk_evicted, stats.disk_evicted_bytes, stats.disk_bytes) == (
        2,
        2 * one,
        3 * one,
    )


def test_the_artifact_just_written_stays_unless_it_alone_exceeds_the_cap(tmp_path: Path) -> None:
    stats = CacheStats()
    artifacts_store = store(tmp_path, stats, SandboxSettings(cache_max_bytes=TRAILER_LEN + 100))
    artifacts_store.put(digest(0), b"x" * 100)
    age(tmp_path / artifacts_store.name(digest(0)), -60)  # newer than the next write
    artifacts_store.put(digest(1), b"x" * 100)
    assert names(tmp_path) == {artifacts_store.name(digest(1))}
    artifacts_store.put(digest(2), b"x" * 101)
    assert names(tmp_path) == set()
    assert (stats.disk_evicted, stats.disk_bytes) == (3, 0)
    assert artifacts_store.get(digest(2)) is None


def test_an_artifact_larger_than_the_largest_compiled_module_is_refused(tmp_path: Path) -> None:
    stats = CacheStats()
    big = store(tmp_path, stats, SandboxSettings(max_artifact_bytes=200))
    # written under a larger limit (this store would not write it: see the test below)
    store(tmp_path, CacheStats(), SandboxSettings(max_artifact_bytes=1000)).put(
        digest(0), b"x" * 201
    )
    assert big.get(digest(0)) is None
    assert stats.disk_rejected == 1
    assert f"{TRAILER_LEN + 201} bytes, not between" in stats.disk_errors[0]
    assert names(tmp_path) == set()
    big.put(digest(0), b"x" * 200)
    assert big.get(digest(0)) == b"x" * 200


def test_a_refused_module_leaves_no_artifact(tmp_path: Path) -> None:
    sandbox = fresh(tmp_path)
    with pytest.raises(SandboxError):
        sandbox.load(guest(hook(returns(0, 0)), marker=False))
    assert artifacts(tmp_path) == []


def test_an_artifact_a_read_would_refuse_is_not_written(tmp_path: Path) -> None:
    """Longer than a read takes (the extra bytes of a module with a huge interface, say): not
    written, so it is not refused, deleted and written again on every restart."""
    stats = CacheStats()
    artifacts_store = ArtifactStore(
        tmp_path, KEY, stats, SandboxSettings(max_artifact_bytes=1000), max_extra_bytes=10
    )
    artifacts_store.put("a" * 64, b"p" * 1000, b"e" * 11)
    assert list(tmp_path.iterdir()) == []
    assert "not kept" in stats.disk_errors[-1]
    artifacts_store.put("a" * 64, b"p" * 1000, b"e" * 10)
    assert len(list(tmp_path.iterdir())) == 1
