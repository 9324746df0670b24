"""Guest log lines of one call: ``modelserving.log`` and WASI stdout/stderr, bounded.

A call keeps at most ``log_max_lines`` lines of at most ``log_max_line_bytes`` bytes each and
``log_max_bytes`` in all; longer lines are cut (marked ``...[cut]``), further lines are counted
and reported by one closing line. Invalid UTF-8 is replaced, never fatal.
"""

from __future__ import annotations

from dataclasses import dataclass

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
        cut = cut or len(data) > self._max_line
        text = data[: self._max_line].decode("utf-8", errors="replace")
        if cut:
            text += CUT_MARK
        self._budget -= min(len(data), self._max_line)
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
            self.add(level, bytes(buf[start : min(end, start + self._max_line + 1)]), source)
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


def _stream_level(source: str) -> str:
    return "warn" if source == "stderr" else "info"
