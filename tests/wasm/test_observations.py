"""Observation lines of WebAssembly plugins: in an OnPodReady call, an info line
``observe <name> <value>`` from ``modelserving.log`` becomes an observation returned by
``WasmPlugin.on_pod_ready`` instead of a log record; everything else is logged as before."""

from __future__ import annotations

import logging
from collections.abc import Iterator
from contextlib import contextmanager

import msgpack
import pytest

from modelserving.api.errors import FailureClass, PluginFailure
from modelserving.api.hook import Hook, HookRequest
from modelserving.api.place import PodPlace
from modelserving.api.validation import parse_model_serving
from modelserving.plugins.base import Observation
from modelserving.plugins.wasm import WasmPlugin
from modelserving.sandbox import Sandbox
from tests.vectors import MODEL_SERVING
from tests.wasm.conftest import sample_pod
from tests.wasm.guests import LOG_IMPORT, guest, hook, returns, wat_bytes

DEBUG, INFO, WARN = 0, 1, 2


def logging_guest(
    lines: list[tuple[int, str]],
    hooks: tuple[str, ...] = ("ms_on_pod_ready",),
    response: bytes = b"",
    trap: bool = False,
) -> bytes:
    """A guest whose hooks log ``lines`` (level, text) through modelserving.log, then answer
    ``response`` (empty: no error) or trap."""
    fields, calls, offset = [], [], 1024
    for level, text in lines:
        data = text.encode()
        fields.append(f'(data (i32.const {offset}) "{wat_bytes(data)}")')
        calls.append(
            f"(call $log (i32.const {level}) (i32.const {offset}) (i32.const {len(data)}))"
        )
        offset += len(data)
    fields.append(f'(data (i32.const {offset}) "{wat_bytes(response)}")')
    body = "".join(calls) + ("unreachable" if trap else returns(offset, len(response)))
    fields += [hook(body, name) for name in hooks]
    return guest(*fields, imports=LOG_IMPORT)


def plugin_for(sandbox: Sandbox, module: bytes) -> WasmPlugin:
    return WasmPlugin("meter", None, sandbox.load(module), sandbox, sandbox.limits())


def request(hook: Hook) -> HookRequest:
    where = PodPlace("g-0", "prefill", "prefill-0", True)
    return HookRequest(hook, parse_model_serving(MODEL_SERVING), where, sample_pod())


@contextmanager
def plugin_records() -> Iterator[list[logging.LogRecord]]:
    """The records of the ``modelserving.plugin`` logger at every level, while inside."""
    records: list[logging.LogRecord] = []
    logger = logging.getLogger("modelserving.plugin")

    class Keep(logging.Handler):
        def emit(self, record: logging.LogRecord) -> None:
            records.append(record)

    handler, level = Keep(logging.DEBUG), logger.level
    logger.addHandler(handler)
    logger.setLevel(logging.DEBUG)
    try:
        yield records
    finally:
        logger.removeHandler(handler)
        logger.setLevel(level)


def texts(records: list[logging.LogRecord]) -> list[tuple[int, str, str]]:
    prefix = "plugin 'meter' OnPodReady on Pod sample-0-server-0-0: "
    return [
        (r.levelno, r.getMessage().removeprefix(prefix), r.source)  # type: ignore[attr-defined]
        for r in records
    ]


def test_an_observation_line_is_an_observation_not_a_log_record(sandbox: Sandbox) -> None:
    plugin = plugin_for(
        sandbox,
        logging_guest(
            [
                (INFO, "observe pod_ready_seconds 12.345"),
                (INFO, "hello"),
                (INFO, "observe other_seconds 0"),
            ]
        ),
    )
    with plugin_records() as records:
        observations = plugin.on_pod_ready(request(Hook.ON_POD_READY))
    assert observations == [
        Observation("pod_ready_seconds", 12.345),
        Observation("other_seconds", 0.0),
    ]
    assert texts(records) == [(logging.INFO, "hello", "log")]
    assert plugin.last is not None and plugin.last.observations == observations


def test_lines_that_are_not_observations_stay_log_lines(sandbox: Sandbox) -> None:
    plugin = plugin_for(
        sandbox,
        logging_guest(
            [
                (WARN, "observe a_seconds 1"),  # not info
                (DEBUG, "observe a_seconds 1"),
                (INFO, "observe latency 1"),  # malformed: logged, with one warning
                (INFO, "observe a_seconds -2"),  # malformed too: no second warning
                (INFO, "observe b_seconds 2"),
            ]
        ),
    )
    with plugin_records() as records:
        observations = plugin.on_pod_ready(request(Hook.ON_POD_READY))
        again = plugin.on_pod_ready(request(Hook.ON_POD_READY))
    assert observations == again == [Observation("b_seconds", 2.0)]
    warning = (
        "a line starting with 'observe ' is not an observation: the name 'latency' does not "
        "end in _seconds (said once)"
    )
    logged = [
        (logging.WARNING, "observe a_seconds 1", "log"),
        (logging.DEBUG, "observe a_seconds 1", "log"),
        (logging.INFO, "observe latency 1", "log"),
        (logging.WARNING, warning, "host"),
        (logging.INFO, "observe a_seconds -2", "log"),
    ]
    assert texts(records) == logged + [r for r in logged if r[2] != "host"]


def test_other_hooks_have_no_observations(sandbox: Sandbox) -> None:
    plugin = plugin_for(
        sandbox, logging_guest([(INFO, "observe a_seconds 1")], hooks=("ms_on_pod_create",))
    )
    with plugin_records() as records:
        assert plugin.on_pod_create(request(Hook.ON_POD_CREATE)) == []
    assert [r.getMessage() for r in records] == [
        "plugin 'meter' OnPodCreate on Pod sample-0-server-0-0: observe a_seconds 1"
    ]


@pytest.mark.parametrize(
    ("trap", "failure_class"), [(False, FailureClass.PLUGIN_ERROR), (True, FailureClass.TRAP)]
)
def test_a_failed_call_reports_no_observation(
    sandbox: Sandbox, trap: bool, failure_class: FailureClass
) -> None:
    error = msgpack.packb({"error": "not today"})
    lines = [(INFO, "observe a_seconds 1"), (INFO, "x")]
    plugin = plugin_for(sandbox, logging_guest(lines, response=error, trap=trap))
    with plugin_records() as records, pytest.raises(PluginFailure) as info:
        plugin.on_pod_ready(request(Hook.ON_POD_READY))
    assert info.value.failure_class is failure_class
    assert texts(records) == [(logging.INFO, "x", "log")]
