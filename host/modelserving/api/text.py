"""Text from a guest made safe for one log line: control characters escaped, readably.

A guest chooses its log lines and its error texts; written as they are, a ``\\n`` or an escape
sequence in them starts a forged record of the controller's log or repaints a terminal. The
sandbox escapes every guest text it keeps (log records, failure messages) with
:func:`escape_controls`, and the error tree escapes the messages of plugin failures, so each
guest record is exactly one line wherever it is written.
"""

from __future__ import annotations

import re

CONTROLS = re.compile(
    "["
    "\x00-\x1f\x7f-\x9f"  # C0 (with \n, \r, \t, ESC), DEL and C1 (with NEL, CSI)
    "\u061c\u200e\u200f\u202a-\u202e\u2066-\u2069"  # bidirectional marks and overrides
    "\u2028\u2029"  # line and paragraph separators
    "\ud800-\udfff"  # lone surrogates (no UTF-8 stream can write them)
    "]"
)
"""The characters :func:`escape_controls` escapes."""

_NAMED = {"\n": "\\n", "\r": "\\r", "\t": "\\t"}


def escape_one(char: str) -> str:
    """The escape of one character of :data:`CONTROLS`: ``\\n``, ``\\r``, ``\\t``, else
    ``\\xNN`` below U+0100 and ``\\uNNNN`` above."""
    named = _NAMED.get(char)
    if named is not None:
        return named
    code = ord(char)
    return f"\\x{code:02x}" if code < 0x100 else f"\\u{code:04x}"


def _escape_match(match: re.Match[str]) -> str:
    return escape_one(match.group())


def escape_controls(text: str) -> str:
    """``text`` with every character of :data:`CONTROLS` escaped (``a\\nb`` for a, newline,
    b). Backslashes are left as they are, so escaping twice changes nothing; the escape is for
    safe reading, not a reversible encoding."""
    if CONTROLS.search(text) is None:
        return text
    return CONTROLS.sub(_escape_match, text)


def bounded(text: str, limit: int) -> str:
    """``text`` cut to ``limit`` characters, ending with how many more there were."""
    if len(text) <= limit:
        return text
    more = f"... ({len(text) - limit} more characters)"
    return text[: max(0, limit - len(more))] + more
