"""The workers' wire: length-prefixed frames (modelserving.frames)."""

from __future__ import annotations

import io
import subprocess
import sys

import pytest

from modelserving.frames import frame, read_frame


def test_frames_round_trip_in_order() -> None:
    stream = io.BytesIO(frame(b'{"op": "run"}') + frame(b"") + frame(b"\x00" * 70000))
    assert read_frame(stream, 100) == b'{"op": "run"}'
    assert read_frame(stream, 0) == b""
    assert read_frame(stream, 70000) == b"\x00" * 70000
    assert read_frame(stream, 100) is None  # the end of the stream


def test_a_frame_is_its_big_endian_length_then_its_bytes() -> None:
    assert frame(b"abc") == b"\x00\x00\x00\x03abc"
    assert frame(b"x" * 258)[:4] == b"\x00\x00\x01\x02"


@pytest.mark.parametrize("cut", [0, 2, 4, 9])
def test_a_stream_that_ends_inside_a_frame_ends_the_reading(cut: int) -> None:
    assert read_frame(io.BytesIO(frame(b"0123456789")[:cut]), 100) is None


def test_a_frame_over_the_limit_is_refused_before_its_body_is_read() -> None:
    stream = io.BytesIO(frame(b"x" * 101))
    with pytest.raises(ValueError, match=r"^frame of 101 bytes, limit 100$"):
        read_frame(stream, 100)
    assert stream.tell() == 4


def test_a_worker_started_as_a_script_imports_nothing_heavy_with_it() -> None:
    # The workers run `python -I <file>` and import this module: it must not pull the
    # package's layers (or their libraries) in with it.
    probe = (
        "import sys, modelserving.frames; "
        "print(sorted(m for m in sys.modules if m.startswith(('modelserving.', 'wasmtime', "
        "'pydantic', 'msgpack'))))"
    )
    out = subprocess.run(
        [sys.executable, "-I", "-c", probe], capture_output=True, text=True, check=True
    ).stdout
    assert out.strip() == "['modelserving.frames']"
