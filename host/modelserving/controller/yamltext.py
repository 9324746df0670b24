"""Reading YAML text that may be hostile: our own limits first, then the objects.

Used by the CLI's manifest reader (``cli.manifests``) and the operator configuration
(``controller.config``). :func:`load_all` refuses, before any object is built, alias bombs,
recursive aliases and nesting deeper than ``MAX_DEPTH``, each with a :class:`YamlRefused`
message of ours; text that is not YAML at all raises :class:`YamlInvalid` with the parser's
explanation.

The limits are ours whatever the YAML library does. libyaml (PyYAML's C parser) has limits of
its own that differ between releases: since PyYAML 6.0.4 it stops at 1,000 levels of nesting
with its own wording, before handing over a single event; older releases had no limit and
recursed until the interpreter crashed. So when the C parser refuses the text, the same
checks run again over the pure-Python parser's events, which has no nesting limit of its own
(it keeps a stack, not a recursion): deep text is then refused by our check, in our words, and
only text the pure-Python parser refuses too is reported as invalid YAML.

Timestamp-like scalars stay the strings they were written as, as Kubernetes' own YAML-to-JSON
conversion (sigs.k8s.io/yaml over go-yaml v2) keeps them.
"""

from __future__ import annotations

import errno
import os
import select
import stat
import sys
from collections.abc import Iterable
from pathlib import Path
from typing import Any

import yaml
from yaml.nodes import ScalarNode

MAX_DEPTH = 100
"""Deepest nesting of maps and lists accepted; real Kubernetes objects stay well under 30."""

MAX_ALIAS_NODES = 100_000
"""How many nodes aliases may add to one document once expanded."""

MAX_TEXT_BYTES = 16 * 1024 * 1024
"""The largest file of YAML read. The API server stores no object over 1.5 MiB; a file of many
objects fits, and the text's parse stays within about 600 MB at worst (short scalars)."""

IDLE_SECONDS = 10.0
"""How long a FIFO or device may give no data (or have no writer) before reading it stops."""

_CHUNK = 1024 * 1024

_TIMESTAMP_TAG = "tag:yaml.org,2002:timestamp"
_INT_TAG = "tag:yaml.org,2002:int"


class YamlRefused(ValueError):
    """Valid YAML over one of our limits; the message says which, and in which document."""


class YamlInvalid(ValueError):
    """Text that is not YAML; the message is the parser's explanation, on one line."""

    @classmethod
    def from_error(cls, error: yaml.YAMLError) -> YamlInvalid:
        problem = getattr(error, "problem", None)
        mark = getattr(error, "problem_mark", None)
        if problem is None or mark is None:
            return cls(" ".join(str(error).split()))
        context = getattr(error, "context", None)
        text = f"{context}: {problem}" if context else str(problem)
        return cls(f"{text} (line {mark.line + 1}, column {mark.column + 1})")


def _timestamp_as_text(loader: Any, node: ScalarNode) -> str:
    return str(node.value)


def _bounded_int(loader: Any, node: ScalarNode) -> int:
    """YAML's int, refused in our words when Python will not read it (more than 4300 digits,
    ``sys.get_int_max_str_digits``): far outside any range a field or a plugin takes."""
    try:
        return int(yaml.SafeLoader.construct_yaml_int(loader, node))
    except ValueError:
        mark = node.start_mark
        raise YamlRefused(
            f"an integer of {len(str(node.value))} characters (line {mark.line + 1}, column "
            f"{mark.column + 1}) is far outside the 64-bit range"
        ) from None


class _PureLoader(yaml.SafeLoader):
    """The pure-Python safe loader, except that timestamps stay text (``2024-01-02``)."""


_PureLoader.add_constructor(_TIMESTAMP_TAG, _timestamp_as_text)
_PureLoader.add_constructor(_INT_TAG, _bounded_int)

_FastLoader: Any = _PureLoader
if hasattr(yaml, "CSafeLoader"):

    class _CLoader(yaml.CSafeLoader):
        """libyaml's safe loader, except that timestamps stay text."""

    _CLoader.add_constructor(_TIMESTAMP_TAG, _timestamp_as_text)
    _CLoader.add_constructor(_INT_TAG, _bounded_int)
    _FastLoader = _CLoader

LOADERS: tuple[Any, ...] = (
    (_FastLoader,) if _FastLoader is _PureLoader else (_FastLoader, _PureLoader)
)
"""The loaders tried in turn: libyaml's when PyYAML has it, then the pure-Python one."""


def read_bytes(
    path: str | Path, limit: int = MAX_TEXT_BYTES, idle_seconds: float = IDLE_SECONDS
) -> bytes:
    """The bytes of ``path`` (``-``: standard input), at most ``limit`` of them.

    Raises OSError, whose ``strerror`` says why in a few words: the file cannot be opened, is
    a directory, holds more than ``limit`` bytes (``/dev/zero`` among them), or is a FIFO or
    device that gave nothing for ``idle_seconds`` (a FIFO nobody writes to: opening it the
    usual way waits for a writer forever). Standard input is read as it comes, to its end."""
    if str(path) == "-":
        return _capped(sys.stdin.buffer.read(limit + 1), limit)
    fd = os.open(path, os.O_RDONLY | os.O_NONBLOCK | os.O_CLOEXEC)  # a FIFO: no wait here
    try:
        info = os.fstat(fd)
        if stat.S_ISDIR(info.st_mode):
            raise IsADirectoryError(errno.EISDIR, os.strerror(errno.EISDIR))
        if stat.S_ISREG(info.st_mode):
            if info.st_size > limit:
                raise _too_big(limit)
            os.set_blocking(fd, True)
            with os.fdopen(fd, "rb", closefd=False) as file:
                return _capped(file.read(limit + 1), limit)
        return _read_stream(fd, limit, idle_seconds)
    finally:
        os.close(fd)


def _read_stream(fd: int, limit: int, idle_seconds: float) -> bytes:
    """A FIFO, socket or device, read without blocking: at most ``limit`` bytes, each wait for
    data at most ``idle_seconds``."""
    poller = select.poll()
    poller.register(fd, select.POLLIN)
    chunks: list[bytes] = []
    size = 0
    while True:
        if not poller.poll(idle_seconds * 1000):
            raise OSError(
                errno.ETIMEDOUT,
                f"no data for {idle_seconds:g} s (a FIFO nobody writes to?)",
            )
        try:
            chunk = os.read(fd, min(_CHUNK, limit + 1 - size))
        except BlockingIOError:
            continue
        if not chunk:
            return b"".join(chunks)
        chunks.append(chunk)
        size += len(chunk)
        if size > limit:
            raise _too_big(limit)


def _capped(data: bytes, limit: int) -> bytes:
    if len(data) > limit:
        raise _too_big(limit)
    return data


def _too_big(limit: int) -> OSError:
    return OSError(errno.EFBIG, f"larger than the limit of {limit:,} bytes")


def load_all(text: str, loaders: Iterable[Any] = LOADERS) -> list[Any]:
    """Every document of ``text``, once its parser's events were found within our limits.

    Each loader is tried in turn until one reads the text; when none does, the first one's
    explanation is given.
    """
    first: yaml.YAMLError | None = None
    for loader in loaders:
        try:
            _check_events(yaml.parse(text, Loader=loader))
            return list(yaml.load_all(text, Loader=loader))
        except yaml.YAMLError as exc:
            first = first or exc
    assert first is not None, "no loader to try"
    raise YamlInvalid.from_error(first) from None


def _check_events(events: Iterable[yaml.Event]) -> None:
    """Refuse alias bombs, recursive aliases and deep nesting from the parser's events.

    Aliases are accepted (kubectl accepts them) while they add at most ``MAX_ALIAS_NODES`` nodes
    to a document: a few hundred bytes of nested aliases would otherwise expand to gigabytes.
    The composers recurse once per level, so deep nesting must be refused before composing.
    """
    document = depth = 0
    nodes = written = 0  # nodes with aliases expanded, and as written
    open_anchors: dict[str, int] = {}  # anchor -> node count when its node started
    stack: list[str | None] = []  # anchors of the open maps and lists
    sizes: dict[str, int] = {}  # anchor -> expanded size of its node
    for event in events:
        cls = type(event)
        anchor: str | None = getattr(event, "anchor", None)
        if cls is yaml.ScalarEvent:
            nodes += 1
            written += 1
            if anchor:
                sizes[anchor] = 1
        elif cls is yaml.MappingStartEvent or cls is yaml.SequenceStartEvent:
            depth += 1
            if depth > MAX_DEPTH:
                raise YamlRefused(
                    f"maps and lists nested more than {MAX_DEPTH} levels deep (document {document})"
                )
            nodes += 1
            written += 1
            stack.append(anchor)
            if anchor:
                open_anchors[anchor] = nodes - 1
        elif cls is yaml.MappingEndEvent or cls is yaml.SequenceEndEvent:
            depth -= 1
            closed = stack.pop()
            if closed is not None:
                sizes[closed] = nodes - open_anchors.pop(closed)
        elif cls is yaml.DocumentStartEvent:
            document += 1
            nodes = written = 0
            sizes.clear()
        elif cls is yaml.AliasEvent:
            if anchor in open_anchors:
                raise YamlRefused(
                    f"alias *{anchor} refers to a node that contains it (document {document})"
                )
            nodes += sizes.get(anchor or "", 1)
            if nodes - written > MAX_ALIAS_NODES:
                raise YamlRefused(
                    f"YAML aliases expand to more than {MAX_ALIAS_NODES} extra nodes "
                    f"(document {document}); write the repeated parts out"
                )
