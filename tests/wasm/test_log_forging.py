"""A guest cannot forge the controller's log: every guest text (log lines through
``modelserving.log`` and WASI stdout/stderr, error texts, names in refusals) reaches the log with
its control characters escaped, one record per line."""

from __future__ import annotations

import logging

import msgpack
import pytest

from modelserving.api.errors import PluginFailure
from modelserving.api.hook import Hook
from modelserving.api.text import CONTROLS, escape_controls
from modelserving.plugins.wasm import WasmPlugin
from modelserving.sandbox import Sandbox, SandboxError
from modelserving.sandbox.logs import LogSink, fit
from tests.wasm.guests import (
    LOG_IMPORT,
    extism_copy_out,
    extism_function,
    extism_guest,
    guest,
    hook,
    responding,
    returns,
    wat_bytes,
)

CONTROLLER_FORMAT = "%(asctime)s %(levelname)s %(name)s: %(message)s"  # as `modelserving run`
FORGED = "\nERROR modelserving.controller: \x1b[31mleader lost, deleting every Pod\x1b[0m"

HOSTILE: list[tuple[str, bytes, str]] = [
    ("newline", b"ok" + FORGED.encode(), "ok" + escape_controls(FORGED)),
    ("carriage return", b"done\rERROR forged", "done\\rERROR forged"),
    ("escape sequences", "\x1b[2J\x1b]0;t\x07\x9b".encode(), "\\x1b[2J\\x1b]0;t\\x07\\x9b"),
    ("line separator", "a\u2028b\u2029c".encode(), "a\\u2028b\\u2029c"),
    ("C1 and DEL", "x\u0085y\x7fz".encode(), "x\\x85y\\x7fz"),
    ("bidi override", "user \u202egnp.exe".encode(), "user \\u202egnp.exe"),
    ("tab and NUL", b"a\tb\x00c", "a\\tb\\x00c"),
    ("invalid UTF-8", b"bad \xff\xfe\xc3 end", "bad \ufffd\ufffd\ufffd end"),
]
"""A guest's line, and its text as logged."""

FD_WRITE = (
    '(import "wasi_snapshot_preview1" "fd_write" '
    "(func $fd_write (param i32 i32 i32 i32) (result i32)))"
)


def logger_of(lines: list[bytes]) -> bytes:
    """A guest calling ``modelserving.log`` once per line, at error level."""
    fields, body, offset = [], "", 1024
    for line in lines:
        fields.append(f'(data (i32.const {offset}) "{wat_bytes(line)}")')
        body += f"(call $log (i32.const 3) (i32.const {offset}) (i32.const {len(line)})) "
        offset += len(line) + 1
    return guest(*fields, hook(body + returns(0, 0)), imports=LOG_IMPORT)


def writer_of(stream: bytes, fd: int = 1) -> bytes:
    """A WASI guest writing ``stream`` to stdout (1) or stderr (2) with one fd_write."""
    return guest(
        f'(data (i32.const 1024) "{wat_bytes(stream)}")',
        hook(
            f"(i32.store (i32.const 3000) (i32.const 1024)) "
            f"(i32.store (i32.const 3004) (i32.const {len(stream)})) "
            f"(drop (call $fd_write (i32.const {fd}) (i32.const 3000) (i32.const 1) "
            "(i32.const 3008)))" + returns(0, 0)
        ),
        imports=FD_WRITE,
        memory=f'(memory (export "memory") {2 + len(stream) // 65536})',
    )


def controller_lines(caplog: pytest.LogCaptureFixture) -> list[str]:
    """The plugin records as the controller writes them, split into physical lines the way a
    log reader (a terminal, ``kubectl logs``, a collector) splits them."""
    formatter = logging.Formatter(CONTROLLER_FORMAT)
    text = "\n".join(formatter.format(r) for r in caplog.records if r.name == "modelserving.plugin")
    return text.splitlines()  # splits at \r, \x1c-\x1e, \x85, \u2028 and \u2029 too


def run_plugin(sandbox: Sandbox, module: bytes, request_bytes: bytes) -> None:
    plugin = WasmPlugin("hostile", None, sandbox.load(module), sandbox, sandbox.limits())
    plugin.run(Hook.ON_POD_CREATE, request_bytes, pod="sample-0-server-0-0")


def assert_one_safe_line_each(lines: list[str], expected: list[str]) -> None:
    assert len(lines) == len(expected), lines
    for line, text in zip(lines, expected, strict=True):
        assert CONTROLS.search(line) is None, line
        assert line.endswith(f"plugin 'hostile' OnPodCreate on Pod sample-0-server-0-0: {text}")


def test_log_import_lines_are_one_escaped_record_each(
    sandbox: Sandbox, request_bytes: bytes, caplog: pytest.LogCaptureFixture
) -> None:
    module = logger_of([line for _, line, _ in HOSTILE])
    with caplog.at_level(logging.DEBUG, "modelserving.plugin"):
        run_plugin(sandbox, module, request_bytes)
    assert_one_safe_line_each(controller_lines(caplog), [text for _, _, text in HOSTILE])


@pytest.mark.parametrize("fd", [1, 2], ids=["stdout", "stderr"])
def test_wasi_output_lines_are_one_escaped_record_each(
    sandbox: Sandbox, request_bytes: bytes, caplog: pytest.LogCaptureFixture, fd: int
) -> None:
    """stdout and stderr are split at ``\\n`` (a ``\\r\\n`` ends a line too); whatever else a
    line holds is escaped."""
    stream = b"\n".join(line for _, line, _ in HOSTILE) + b"\r\nlast\r"
    with caplog.at_level(logging.DEBUG, "modelserving.plugin"):
        run_plugin(sandbox, writer_of(stream, fd), request_bytes)
    expected = [text for _, _, text in HOSTILE]
    # "newline" holds a \n of its own: on a stream that is a line break, the rest its own line
    first, forged = escape_controls(FORGED).split("\\n", 1)
    expected[0:1] = ["ok" + first, forged]
    assert_one_safe_line_each(controller_lines(caplog), [*expected, "last\\r"])


def test_a_cut_line_keeps_whole_escapes_and_the_budget_counts_what_is_logged() -> None:
    sink = LogSink(max_lines=8, max_line_bytes=10, max_bytes=25)
    sink.add("info", b"\x1b\x1b\x1b")  # 12 characters escaped: cut after two whole escapes
    sink.add("info", "é\u2028".encode())  # 2 + 6 bytes: fits
    sink.add("info", b"abcdefghi\x1b")  # the escape would end past 10 bytes: left out
    sink.add("info", b"more")  # 8 + 8 + 9 bytes already kept: over the 25 in all
    records = sink.close()
    assert [r.message for r in records[:3]] == [
        "\\x1b\\x1b...[cut]",
        "é\\u2028",
        "abcdefghi...[cut]",
    ]
    assert records[3].message.startswith("1 more log line(s) dropped")
    assert fit("ab\u00e9\u00e9", 5) == ("ab\u00e9", True)  # never half a character


def test_the_default_line_limit_holds_for_a_line_of_escapes(
    sandbox: Sandbox, request_bytes: bytes
) -> None:
    limit = sandbox.settings.log_max_line_bytes
    module = logger_of([b"\x1b" * limit])
    result = sandbox.call(sandbox.load(module), "ms_on_pod_create", request_bytes, sandbox.limits())
    (record,) = result.logs
    assert record.message == "\\x1b" * (limit // 4) + "...[cut]"


def test_a_response_error_text_is_escaped(sandbox: Sandbox, request_bytes: bytes) -> None:
    module = responding(msgpack.packb({"error": "refused" + FORGED}))
    plugin = WasmPlugin("hostile", None, sandbox.load(module), sandbox, sandbox.limits())
    with pytest.raises(PluginFailure) as info:
        plugin.run(Hook.ON_POD_CREATE, request_bytes)
    assert info.value.detail == "refused" + escape_controls(FORGED)
    assert CONTROLS.search(str(info.value)) is None


def test_an_extism_error_text_is_escaped(sandbox: Sandbox, request_bytes: bytes) -> None:
    text = ("no GPUs" + FORGED + "\u2028").encode()
    body = extism_copy_out(1024, len(text)) + "(call $error_set (local.get $out)) i32.const 1"
    module = extism_guest(extism_function("on_pod_create", body), data=text)
    plugin = WasmPlugin("hostile", None, sandbox.load(module), sandbox, sandbox.limits())
    with pytest.raises(PluginFailure) as info:
        plugin.run(Hook.ON_POD_CREATE, request_bytes)
    assert info.value.failure_class == "PluginError"
    assert info.value.detail == "no GPUs" + escape_controls(FORGED) + "\\u2028"
    assert CONTROLS.search(str(info.value)) is None


def test_a_guest_chosen_import_name_is_escaped_in_the_refusal(sandbox: Sandbox) -> None:
    module = guest(
        hook(returns(0, 0)),
        imports='(import "evil\\0aERROR modelserving.controller: \\1b[31m" "f" (func))',
    )
    with pytest.raises(SandboxError) as info:
        sandbox.load(module)
    assert info.value.failure_class == "InvalidModule"
    assert "evil\\nERROR modelserving.controller: \\x1b[31m.f" in info.value.message
    assert CONTROLS.search(str(info.value)) is None
