"""Binary modules built byte by byte, for shapes that WAT would make slow or cannot spell: many
thousands of functions, broken section framing."""

from __future__ import annotations

from modelserving.sandbox.structure import encode_section, leb128

leb = leb128
section = encode_section


HEADER = b"\0asm\x01\0\0\0"


def many_functions(count: int, body: bytes = b"\x0b") -> bytes:
    """A module of ``count`` functions ``() -> ()``, each with no locals and ``body``."""
    types = section(1, leb(1) + b"\x60\x00\x00")
    functions = section(3, leb(count) + b"\x00" * count)
    entry = leb(len(body) + 1) + b"\x00" + body
    code = section(10, leb(count) + entry * count)
    return HEADER + types + functions + code


def one_megabyte_bomb() -> bytes:
    """150,000 functions of a few nops each: about 1 MB, about 1.5 KB gzipped."""
    return many_functions(150_000, b"\x01\x01\x0b")
