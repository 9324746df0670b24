"""The built-ins that ship with the controller compile in its own process; every other module,
one byte different included, compiles in a compile worker under its deadline and memory cap."""

from __future__ import annotations

import hashlib
from pathlib import Path

import pytest

from modelserving.api.errors import FailureClass
from modelserving.plugins.artifacts import builtin_digests, builtin_wasm, builtin_wasm_path
from modelserving.plugins.exports import ENTRYPOINTS, plugin_sandbox
from modelserving.sandbox import Sandbox, SandboxError, SandboxSettings
from modelserving.sandbox.compiler import Compiler
from modelserving.sandbox.structure import encode_section, leb128
from tests.wasm.guests import responding

BUILTIN = "demo-pod-tweaks.wasm"


@pytest.fixture
def worker_compiles(monkeypatch: pytest.MonkeyPatch) -> list[int]:
    """The sizes of the modules handed to a compile worker (which still compiles them)."""
    sizes: list[int] = []
    real = Compiler.compile

    def counted(self: Compiler, module: bytes) -> bytearray:
        sizes.append(len(module))
        return real(self, module)

    monkeypatch.setattr(Compiler, "compile", counted)
    return sizes


@pytest.fixture
def fresh(tmp_path: Path) -> Sandbox:
    return plugin_sandbox(SandboxSettings(cache_dir=tmp_path / "cache"))


def _custom_section(name: bytes, payload: bytes) -> bytes:
    return encode_section(0, leb128(len(name)) + name + payload)


def test_every_shipped_built_in_is_trusted() -> None:
    folder = builtin_wasm_path(BUILTIN).parent
    shipped = {hashlib.sha256(p.read_bytes()).hexdigest() for p in folder.glob("*.wasm")}
    assert shipped and builtin_digests() == frozenset(shipped)


def test_a_built_in_compiles_in_the_controllers_process(
    fresh: Sandbox, worker_compiles: list[int]
) -> None:
    compiled = fresh.load(builtin_wasm(BUILTIN))
    assert worker_compiles == []
    assert (fresh.modules.stats.compiled, fresh.modules.stats.compiled_here) == (1, 1)
    assert "ms_on_pod_create" in compiled.info.entrypoints


def test_a_module_one_section_longer_than_a_built_in_goes_to_a_worker(
    fresh: Sandbox, worker_compiles: list[int]
) -> None:
    changed = builtin_wasm(BUILTIN) + _custom_section(b"x", b"1")
    fresh.load(changed)
    assert worker_compiles == [len(changed)]
    assert fresh.modules.stats.compiled_here == 0


def test_any_other_module_goes_to_a_worker(fresh: Sandbox, worker_compiles: list[int]) -> None:
    fresh.load(responding(b"\x80"))
    assert len(worker_compiles) == 1
    assert fresh.modules.stats.compiled_here == 0


def test_a_sandbox_trusts_nothing_unless_told(tmp_path: Path, worker_compiles: list[int]) -> None:
    plain = Sandbox(SandboxSettings(cache_dir=tmp_path / "cache"), ENTRYPOINTS)
    plain.load(builtin_wasm(BUILTIN))
    assert len(worker_compiles) == 1


def test_a_trusted_module_is_still_checked(tmp_path: Path) -> None:
    """Trust skips the worker, not the checks: a trusted module without the ABI's exports is
    refused as any other."""
    empty = b"\x00asm\x01\x00\x00\x00"
    sandbox = Sandbox(
        SandboxSettings(cache_dir=tmp_path / "cache"),
        ENTRYPOINTS,
        trusted=[hashlib.sha256(empty).hexdigest()],
    )
    with pytest.raises(SandboxError) as info:
        sandbox.load(empty)
    assert info.value.failure_class is FailureClass.INVALID_MODULE
