"""Reading hostile YAML: our limits decide, in our words, whichever parser (and whichever
PyYAML release, with or without a nesting limit of its own) reads the text."""

from __future__ import annotations

import os
import threading
import time
from pathlib import Path
from typing import Any

import pytest
import yaml

from modelserving.controller import yamltext
from modelserving.controller.yamltext import (
    MAX_DEPTH,
    YamlInvalid,
    YamlRefused,
    load_all,
    read_bytes,
)

PURE: Any = yamltext._PureLoader
FAST: Any = yamltext._FastLoader
DEPTH_MESSAGE = f"maps and lists nested more than {MAX_DEPTH} levels deep (document 1)"


def flow_lists(depth: int) -> str:
    return "a: " + "[" * (depth - 1) + "]" * (depth - 1) + "\n"


def flow_maps(depth: int) -> str:
    return "a: " + "{b: " * (depth - 1) + "1" + "}" * (depth - 1) + "\n"


def block_maps(depth: int) -> str:
    return "".join(" " * i + "k:\n" for i in range(depth - 1)) + " " * (depth - 1) + "x: 1\n"


def block_lists(depth: int) -> str:
    return "- " * depth + "1\n"


def mixed(depth: int) -> str:
    inner = "[" * (depth - 2) + "]" * (depth - 2)
    return f"spec:\n  v: {inner}\n"


SHAPES = [flow_lists, flow_maps, block_maps, block_lists, mixed]


class StrictLoader(yamltext._PureLoader):
    """A parser that, like libyaml since PyYAML 6.0.4, refuses deep nesting itself, in its own
    words, below our limit: the text must still be judged by our check."""

    LIMIT = 10

    def __init__(self, stream: Any) -> None:
        super().__init__(stream)
        self._level = 0

    def get_event(self) -> Any:
        event = super().get_event()  # type: ignore[no-untyped-call]
        if isinstance(event, yaml.CollectionStartEvent):
            self._level += 1
            if self._level > self.LIMIT:
                raise yaml.scanner.ScannerError(None, None, "exceeded maximum nesting depth")
        elif isinstance(event, yaml.CollectionEndEvent):
            self._level -= 1
        return event


@pytest.mark.parametrize("shape", SHAPES)
@pytest.mark.parametrize("loaders", [(FAST, PURE), (PURE,), (StrictLoader, PURE)])
def test_nesting_at_the_limit_is_read(shape: Any, loaders: tuple[Any, ...]) -> None:
    (doc,) = load_all(shape(MAX_DEPTH), loaders)
    assert isinstance(doc, dict | list)


@pytest.mark.parametrize("shape", SHAPES)
@pytest.mark.parametrize("depth", [MAX_DEPTH + 1, 1_001])
@pytest.mark.parametrize("loaders", [(FAST, PURE), (PURE,), (StrictLoader, PURE)])
def test_deeper_nesting_is_refused_in_our_words(
    shape: Any, depth: int, loaders: tuple[Any, ...]
) -> None:
    with pytest.raises(YamlRefused) as info:
        load_all(shape(depth), loaders)
    assert str(info.value) == DEPTH_MESSAGE


@pytest.mark.parametrize("shape", [flow_lists, flow_maps, block_lists])
def test_very_deep_nesting_is_refused_in_our_words(shape: Any) -> None:
    with pytest.raises(YamlRefused) as info:
        load_all(shape(100_000))
    assert str(info.value) == DEPTH_MESSAGE


def test_a_parser_stricter_than_us_does_not_refuse_what_we_accept() -> None:
    text = flow_lists(StrictLoader.LIMIT + 5)
    assert load_all(text, (StrictLoader, PURE)) == load_all(text, (PURE,))


def test_invalid_yaml_gives_the_first_parsers_explanation_on_one_line() -> None:
    with pytest.raises(YamlInvalid) as info:
        load_all("a: [1\nb: 2\n")
    message = str(info.value)
    assert "\n" not in message
    assert message.endswith("(line 2, column 2)")


def test_aliases_and_timestamps() -> None:
    assert load_all("a: &x [1, 2]\nb: *x\nc: 2024-01-02\n") == [
        {"a": [1, 2], "b": [1, 2], "c": "2024-01-02"}
    ]
    with pytest.raises(YamlRefused, match=r"alias \*x refers to a node that contains it"):
        load_all("a: &x [1, *x]\n")


@pytest.mark.parametrize("loader", [PURE, FAST], ids=["pure", "fast"])
def test_an_integer_python_will_not_read_is_refused_in_our_words(loader: Any) -> None:
    digits = "9" * 5000  # past sys.get_int_max_str_digits (4300)
    with pytest.raises(YamlRefused) as info:
        load_all(f"a: 1\nb: {digits}\n", [loader])
    assert str(info.value) == (
        "an integer of 5000 characters (line 2, column 4) is far outside the 64-bit range"
    )
    assert load_all("a: 18446744073709551616\nb: 0x10\n", [loader]) == [{"a": 2**64, "b": 16}]


# --- reading the file ------------------------------------------------------------------------


def test_a_fifo_nobody_writes_to_is_given_up(tmp_path: Path) -> None:
    """``open`` of a FIFO waits for a writer: ``render -f FIFO`` used to hang forever."""
    fifo = tmp_path / "fifo"
    os.mkfifo(fifo)
    started = time.monotonic()
    with pytest.raises(OSError, match=r"no data for 0.2 s"):
        read_bytes(fifo, idle_seconds=0.2)
    assert time.monotonic() - started < 5


def test_a_fifo_is_read_when_its_writer_comes(tmp_path: Path) -> None:
    fifo = tmp_path / "fifo"
    os.mkfifo(fifo)

    def write() -> None:
        time.sleep(0.2)
        with open(fifo, "wb") as f:
            f.write(b"kind: A\n")

    writer = threading.Thread(target=write)
    writer.start()
    assert read_bytes(fifo, idle_seconds=5) == b"kind: A\n"
    writer.join()


def test_an_endless_device_stops_at_the_limit() -> None:
    """``/dev/zero`` used to be read until the process ran out of memory (MemoryError)."""
    with pytest.raises(OSError, match=r"^\[Errno \d+\] larger than the limit of 1,000 bytes$"):
        read_bytes("/dev/zero", limit=1000)


def test_a_file_over_the_limit_is_refused_before_it_is_read(tmp_path: Path) -> None:
    path = tmp_path / "big.yaml"
    path.write_bytes(b"a" * 1001)
    with pytest.raises(OSError, match="limit") as caught:
        read_bytes(path, limit=1000)
    assert caught.value.strerror == "larger than the limit of 1,000 bytes"
    assert read_bytes(path, limit=1001) == b"a" * 1001


def test_a_directory_is_refused(tmp_path: Path) -> None:
    with pytest.raises(IsADirectoryError):
        read_bytes(tmp_path)
