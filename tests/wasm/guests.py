"""Tiny guest modules written in WAT, so the host is tested without any guest toolchain.

``guest(...)`` assembles a module from the standard parts (marker, memory, bump allocator) and
whatever the test adds; ``responding(data)`` is a guest whose OnPodCreate returns ``data``.
"""

from __future__ import annotations

import wasmtime

MARKER = '(func (export "modelserving_abi_v1"))'
MEMORY = '(memory (export "memory") 2)'
BUMP_ALLOC = """
  (global $top (mut i32) (i32.const 4096))
  (func $alloc (export "ms_alloc") (param $n i32) (result i32)
    (local $p i32)
    global.get $top
    local.set $p
    global.get $top
    local.get $n
    i32.add
    global.set $top
    local.get $p)
"""
LOG_IMPORT = '(import "modelserving" "log" (func $log (param i32 i32 i32)))'


def wat_bytes(data: bytes) -> str:
    """``data`` as a WAT string literal."""
    return "".join(f"\\{b:02x}" for b in data)


def guest(
    *fields: str,
    marker: bool = True,
    memory: str | None = MEMORY,
    alloc: str | None = BUMP_ALLOC,
    imports: str = "",
) -> bytes:
    parts = [imports, memory or "", alloc or "", MARKER if marker else "", *fields]
    return bytes(wasmtime.wat2wasm("(module\n" + "\n".join(parts) + "\n)"))


def returns(offset: int, length: int) -> str:
    """A hook body returning the (pointer, length) pair packed into an i64."""
    return f"(i64.or (i64.shl (i64.const {offset}) (i64.const 32)) (i64.const {length}))"


def hook(body: str, name: str = "ms_on_pod_create") -> str:
    return f'(func (export "{name}") (param $ptr i32) (param $len i32) (result i64) {body})'


def responding(data: bytes, hooks: tuple[str, ...] = ("ms_on_pod_create",)) -> bytes:
    """A guest whose hooks all return ``data`` (a data segment at 1024, or at 1 MiB when it
    would not fit below the allocator's start at 4096)."""
    offset = 1024 if len(data) <= 3000 else 1 << 20
    pages = max(2, (offset + len(data)) // 65536 + 1)
    fields = [f'(data (i32.const {offset}) "{wat_bytes(data)}")']
    fields += [hook(returns(offset, len(data)), name) for name in hooks]
    return guest(*fields, memory=f'(memory (export "memory") {pages})')


MIRROR = guest(
    hook(
        """
    (if (result i64) (i32.eqz (i32.load8_u (local.get $ptr)))
      (then (i64.load (i32.add (local.get $ptr) (i32.const 1))))
      (else (i64.or
        (i64.shl (i64.extend_i32_u (i32.add (local.get $ptr) (i32.const 1))) (i64.const 32))
        (i64.extend_i32_u (i32.sub (local.get $len) (i32.const 1))))))"""
    )
)
"""Answers with its request minus the first byte; or, when that byte is zero, returns the
little-endian i64 of bytes 1-8 as its (pointer, length) result: the test controls both."""


EXTISM_IMPORTS = """
  (import "extism:host/env" "alloc" (func $alloc (param i64) (result i64)))
  (import "extism:host/env" "store_u8" (func $store_u8 (param i64 i32)))
  (import "extism:host/env" "output_set" (func $output_set (param i64 i64)))
  (import "extism:host/env" "error_set" (func $error_set (param i64)))
"""


def extism_copy_out(offset: int, length: int) -> str:
    """WAT that copies memory[offset:offset+length] into an Extism block; leaves its offset in
    the local $out."""
    return f"""
    (local.set $out (call $alloc (i64.const {length})))
    (block $done (loop $copy
      (br_if $done (i32.ge_u (local.get $i) (i32.const {length})))
      (call $store_u8 (i64.add (local.get $out) (i64.extend_i32_u (local.get $i)))
                      (i32.load8_u (i32.add (i32.const {offset}) (local.get $i))))
      (local.set $i (i32.add (local.get $i) (i32.const 1)))
      (br $copy)))"""


def extism_guest(*functions: str, data: bytes = b"", extra: str = "") -> bytes:
    """An Extism-flavoured module: the marker, Extism's kernel imports, ``data`` at 1024."""
    parts = [
        EXTISM_IMPORTS,
        extra,
        '(memory (export "memory") 1)',
        f'(data (i32.const 1024) "{wat_bytes(data)}")',
        MARKER,
        *functions,
    ]
    return bytes(wasmtime.wat2wasm("(module\n" + "\n".join(parts) + "\n)"))


def extism_function(name: str, body: str) -> str:
    return f'(func (export "{name}") (result i32) (local $out i64) (local $i i32) {body})'


def extism_responding(data: bytes, name: str = "on_pod_create") -> bytes:
    """An Extism guest whose ``name`` outputs ``data``."""
    body = extism_copy_out(1024, len(data)) + (
        f"(call $output_set (local.get $out) (i64.const {len(data)})) i32.const 0"
    )
    return extism_guest(extism_function(name, body), data=data)
