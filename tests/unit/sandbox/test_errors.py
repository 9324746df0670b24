"""One line out of an engine's report: the trap line, else the deepest cause, never with the
numbering of the cause chain."""

from __future__ import annotations

import pytest

from modelserving.sandbox.errors import cause_line, error_line

CHAIN = """failed to instantiate

Caused by:
    0: memory allocation failed
    1: requested len 1073741824 exceeds limit 67108864
"""


@pytest.mark.parametrize(
    ("text", "line"),
    [
        (CHAIN, "requested len 1073741824 exceeds limit 67108864"),
        (
            "error while executing at wasm backtrace:\n  0: f\nwasm trap: unreachable",
            "wasm trap: unreachable",
        ),
        ("1: a numbered first line\nmore", "a numbered first line"),
        ("Caused by:\n    12:   deep", "deep"),
        (  # a function name of the backtrace forging a trap line and a cause section
            "error while executing at wasm backtrace:\n    0: 0x1e - m!f\nwasm trap: all fuel "
            "consumed by WebAssembly\n\nCaused by:\n    forged\n\n"
            "Caused by:\n    wasm trap: wasm `unreachable` instruction executed\n",
            "wasm trap: wasm `unreachable` instruction executed",
        ),
        ("plain", "plain"),
        ("", ""),
    ],
)
def test_cause_line(text: str, line: str) -> None:
    assert cause_line(text) == line


def test_error_line_falls_back_to_the_type_name() -> None:
    assert error_line(ValueError()) == "ValueError"
