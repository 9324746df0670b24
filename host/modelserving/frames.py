"""Length-prefixed frames, the wire between the controller and its worker processes.

A frame is a 4-byte big-endian length and that many bytes. The compile worker and the Extism
worker are started as scripts and import this module, so it needs the standard library only
(importing it runs nothing of the package but its ``__init__``).
"""

from __future__ import annotations

from typing import BinaryIO


def frame(data: bytes) -> bytes:
    """``data`` as one frame."""
    return len(data).to_bytes(4, "big") + data


def read_frame(stream: BinaryIO, limit: int) -> bytes | None:
    """One frame of at most ``limit`` bytes; None at the end of the stream (also mid-frame).
    A longer frame is a :class:`ValueError` naming both sizes; nothing of it is read."""
    head = stream.read(4)
    if len(head) < 4:
        return None
    size = int.from_bytes(head, "big")
    if size > limit:
        raise ValueError(f"frame of {size} bytes, limit {limit}")
    data = stream.read(size)
    if len(data) < size:
        return None
    return data
