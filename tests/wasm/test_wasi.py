"""WASI preview 1 as a guest sees it: stdout and stderr become log lines, and there is nothing
else: no arguments, no environment, no preopened directories. ``_initialize`` runs once per
instance, before the hook."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import msgpack

from modelserving.sandbox import Sandbox
from tests.wasm.guests import guest, hook, returns, wat_bytes

WASI = "\n".join(
    f'(import "wasi_snapshot_preview1" "{name}" (func ${alias} (param {params}) (result i32)))'
    for name, alias, params in [
        ("fd_write", "fd_write", "i32 i32 i32 i32"),
        ("environ_sizes_get", "environ_sizes", "i32 i32"),
        ("args_sizes_get", "args_sizes", "i32 i32"),
        ("fd_prestat_get", "prestat", "i32 i32"),
    ]
)


def write(fd: int, offset: int, length: int) -> str:
    """fd_write of memory[offset:offset+length] through an iovec at 3000; result dropped."""
    return (
        f"(i32.store (i32.const 3000) (i32.const {offset})) "
        f"(i32.store (i32.const 3004) (i32.const {length})) "
        f"(drop (call $fd_write (i32.const {fd}) (i32.const 3000) (i32.const 1) (i32.const 3008)))"
    )


def test_stdout_and_stderr_become_log_lines(sandbox: Sandbox, request_bytes: bytes) -> None:
    text = b"hello from stdout\nsecond line\npartial"
    module = guest(
        f'(data (i32.const 2048) "{wat_bytes(text)}")',
        '(data (i32.const 2200) "oops\\n")',
        hook(write(1, 2048, len(text)) + write(2, 2200, 5) + returns(0, 0)),
        imports=WASI,
    )
    compiled = sandbox.load(module)
    assert compiled.info.wasi
    result = sandbox.call(compiled, "ms_on_pod_create", request_bytes, sandbox.limits())
    lines = [(r.source, r.level, r.message) for r in result.logs]
    assert lines == [
        ("stdout", "info", "hello from stdout"),
        ("stdout", "info", "second line"),
        ("stderr", "warn", "oops"),
        ("stdout", "info", "partial"),
    ]


def test_no_arguments_environment_or_directories(sandbox: Sandbox, request_bytes: bytes) -> None:
    """The hook answers {"error": "<argc><envc><prestat errno>"} as three digits."""
    module = guest(
        '(data (i32.const 2048) "\\81\\a5error\\a3000")',
        hook(
            "(drop (call $args_sizes (i32.const 2100) (i32.const 2104)))"
            "(drop (call $environ_sizes (i32.const 2108) (i32.const 2112)))"
            "(i32.store8 (i32.const 2056) (i32.add (i32.const 48) (i32.load (i32.const 2100))))"
            "(i32.store8 (i32.const 2057) (i32.add (i32.const 48) (i32.load (i32.const 2108))))"
            "(i32.store8 (i32.const 2058) (i32.add (i32.const 48) "
            "  (i32.ne (call $prestat (i32.const 3) (i32.const 2116)) (i32.const 0))))"
            + returns(2048, 11)
        ),
        imports=WASI,
    )
    result = sandbox.call(sandbox.load(module), "ms_on_pod_create", request_bytes, sandbox.limits())
    # no arguments, no environment variables, and fd 3 is not a preopened directory
    assert msgpack.unpackb(result.response) == {"error": "001"}


def test_initialize_runs_once_before_the_hook(sandbox: Sandbox, request_bytes: bytes) -> None:
    """_initialize sets a flag the hook reports; a second call sees a fresh instance again."""
    module = guest(
        "(global $init (mut i32) (i32.const 0))",
        (
            '(func (export "_initialize") '
            "(global.set $init (i32.add (global.get $init) (i32.const 1))))"
        ),
        '(data (i32.const 2048) "\\81\\a5error\\a10")',
        hook(
            "(i32.store8 (i32.const 2056) (i32.add (i32.const 48) (global.get $init)))"
            + returns(2048, 9)
        ),
    )
    compiled = sandbox.load(module)
    assert compiled.info.preinitialized  # the flag is in the snapshot, set once
    for _ in range(2):
        result = sandbox.call(compiled, "ms_on_pod_create", request_bytes, sandbox.limits())
        assert msgpack.unpackb(result.response) == {"error": "1"}


def test_writing_to_a_file_descriptor_other_than_stdout_or_stderr_fails(
    sandbox: Sandbox, request_bytes: bytes
) -> None:
    """fd_write on fd 3 answers EBADF (8): the guest has no files."""
    module = guest(
        '(data (i32.const 2048) "\\81\\a5error\\a10")',
        hook(
            "(i32.store (i32.const 3000) (i32.const 2048))"
            "(i32.store (i32.const 3004) (i32.const 1))"
            "(i32.store8 (i32.const 2056) (i32.add (i32.const 48) "
            "  (call $fd_write (i32.const 3) (i32.const 3000) (i32.const 1) (i32.const 3008))))"
            + returns(2048, 9)
        ),
        imports=WASI,
    )
    result = sandbox.call(sandbox.load(module), "ms_on_pod_create", request_bytes, sandbox.limits())
    assert msgpack.unpackb(result.response) == {"error": "8"}
    assert result.logs == []


EXIT_SCRIPT = """
from modelserving.plugins.exports import plugin_sandbox
from modelserving.sandbox import SandboxSettings
from tests.wasm.guests import guest, hook, returns
from tests.wasm.test_wasi import WASI, write

module = guest('(data (i32.const 2048) "hi\\\\0a")', hook(write(1, 2048, 3) + returns(0, 0)),
               imports=WASI)
sandbox = plugin_sandbox(SandboxSettings())
compiled = sandbox.load(module)
for _ in range(20):
    sandbox.call(compiled, "ms_on_pod_create", b"\\x80", sandbox.limits())
"""


def test_a_process_whose_guests_wrote_output_exits_cleanly() -> None:
    """Guest output must not reach back into Python while the interpreter shuts down."""
    root = Path(__file__).resolve().parents[2]
    for _ in range(3):
        done = subprocess.run(
            [sys.executable, "-c", EXIT_SCRIPT],
            cwd=root,
            capture_output=True,
            text=True,
            timeout=60,
            check=False,
        )
        assert (done.returncode, "panic" in done.stderr) == (0, False), done.stderr
