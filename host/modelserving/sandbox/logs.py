"""Guest log lines of one call: ``modelserving.log`` and WASI stdout/stderr, bounded and escaped.

Each line becomes a record whose text is safe to write as one line: invalid UTF-8 is replaced
(never fatal) and control characters are escaped (``\\n``, ``\\x1b``, ``\\u2028``, see
``modelserving.api.text``), once, here, so every consumer (the controller's log, the CLI, events)
gets the same safe text. A call keeps at most ``log_max_lines`` lines of at most
``log_max_line_bytes`` bytes each and ``log_max_bytes`` in all, counted on the text as kept
(escaped, UTF-8): longer lines are cut (marked ``...[cut]``, never inside a character or an
escape), further lines are counted and reported by one closing line.
"""

from __future__ import annotations

from dataclasses import dataclass

from modelserving.api.text import CONTROLS, escape_controls, escape_one

LEVELS = ("debug", "info", "warn", "error")
CUT_MARK = "...[cut]"


@dataclass(frozen=True)
class LogRecord:
    """One guest log line: its level, text and source (``log``, ``stdout`` or ``stderr``)."""

    level: str
    message: str
    source: str = "log"

    def to_json(self) -> dict[str, str]:
        return {"level": self.level, "message": self.message, "source": self.source}


def level_name(level: int) -> str:
    """0 debug, 1 info, 2 warn, 3 error; any other number counts as info."""
    return LEVELS[level] if 0 <= level < len(LEVELS) else "info"


class LogSink:
    """Collects the bounded log lines of one call."""

    def __init__(self, max_lines: int, max_line_bytes: int, max_bytes: int) -> None:
        self.records: list[LogRecord] = []
        self.dropped = 0
        self._max_lines = max_lines
        self._max_line = max_line_bytes
        self._budget = max_bytes
        self._max_bytes = max_bytes
        self._partial: dict[str, bytearray] = {}

    @property
    def max_line_bytes(self) -> int:
        return self._max_line

    def add(self, level: str, data: bytes, source: str = "log", cut: bool = False) -> None:
        """One line of guest bytes (``cut``: the guest's line was longer than ``data``)."""
        if len(self.records) >= self._max_lines or self._budget <= 0:
            self.dropped += 1
            return
        # Escaping never makes text shorter, so the first max_line bytes are enough.
        text, over = fit(data[: self._max_line].decode("utf-8", errors="replace"), self._max_line)
        self._budget -= len(text.encode())
        if cut or over or len(data) > self._max_line:
            text += CUT_MARK
        self.records.append(LogRecord(level, text, source))

    @property
    def full(self) -> bool:
        """Whether every further line would be dropped."""
        return len(self.records) >= self._max_lines or self._budget <= 0

    def write_stream(self, source: str, data: bytes) -> None:
        """Bytes written to WASI stdout or stderr: complete lines are logged as they arrive
        (linear in the data: lines are found by index, never by copying the rest)."""
        buf = self._partial.setdefault(source, bytearray())
        buf += data
        start = 0
        level = _stream_level(source)
        while True:
            end = buf.find(b"\n", start)
            if end < 0:
                break
            if self.full:
                self.dropped += buf.count(b"\n", start)
                start = len(buf)
                break
            stop = end - 1 if end > start and buf[end - 1] == 0x0D else end  # \r\n ends a line too
            self.add(level, bytes(buf[start : min(stop, start + self._max_line + 1)]), source)
            start = end + 1
        del buf[:start]
        if len(buf) > self._max_line:
            self.add(level, bytes(buf), source)
            buf.clear()

    def close(self) -> list[LogRecord]:
        """Flush unterminated stream output; the records, plus a note of what was dropped."""
        for source, buf in self._partial.items():
            if buf:
                self.add(_stream_level(source), bytes(buf), source)
        self._partial.clear()
        if self.dropped:
            note = (
                f"{self.dropped} more log line(s) dropped (limits per call: {self._max_lines} "
                f"lines, {self._max_bytes} bytes)"
            )
            self.records.append(LogRecord("warn", note, "host"))
            self.dropped = 0
        return self.records


def fit(text: str, limit: int) -> tuple[str, bool]:
    """``escape_controls(text)`` cut to at most ``limit`` bytes of UTF-8, never inside a
    character or an escape; and whether it was cut."""
    escaped = escape_controls(text)
    if len(escaped) <= limit and (escaped.isascii() or len(escaped.encode()) <= limit):
        return escaped, False
    pieces: list[str] = []
    used = 0
    plain_from = 0
    for match in CONTROLS.finditer(text):
        plain = text[plain_from : match.start()]
        size = len(plain.encode())
        if used + size > limit:
            break
        escape = escape_one(match.group())
        pieces.append(plain)
        used += size
        plain_from = match.end()
        if used + len(escape) > limit:
            return "".join(pieces), True
        pieces.append(escape)
        used += len(escape)
    rest = text[plain_from:].encode()
    if used + len(rest) <= limit:
        return "".join(pieces) + text[plain_from:], False
    pieces.append(rest[: limit - used].decode("utf-8", errors="ignore"))
    return "".join(pieces), True


def _stream_level(source: str) -> str:
    return "warn" if source == "stderr" else "info"
