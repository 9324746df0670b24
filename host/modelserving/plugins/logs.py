"""Plugin log lines and observation lines, the same for native and WebAssembly plugins.

``emit`` writes one line of a plugin to the ``modelserving.plugin`` logger as
``plugin '<name>' <hook> on Pod <pod>: <text>`` with the extra attributes ``plugin``, ``hook``,
``pod`` and ``source``; the WebAssembly adapter sends guest lines through it and native
built-ins their own, so both produce identical records. The text's control characters are
escaped (guest lines come escaped already, native lines may quote a Pod's fields): each line is
one record on one line.

``parse_observation`` reads the observation convention of ABI v1 (``abi/README.md`` section
7.1): an info line ``observe <name> <value>`` of an OnPodReady call is a measurement, not a
log line.
"""

from __future__ import annotations

import logging
import re

from modelserving.api.hook import Hook
from modelserving.api.text import escape_controls
from modelserving.plugins.base import Observation, observation_name_problem

log = logging.getLogger("modelserving.plugin")

LEVELS = {
    "debug": logging.DEBUG,
    "info": logging.INFO,
    "warn": logging.WARNING,
    "error": logging.ERROR,
}
"""The guest's level names and the logging levels they map to (others count as info)."""

OBSERVE_PREFIX = "observe "
MAX_VALUE_CHARS = 20
_VALUE = re.compile(r"[0-9]+(?:\.[0-9]+)?", re.ASCII)


def emit(
    plugin: str, hook: Hook | str, pod: str | None, level: str, message: str, source: str = "log"
) -> None:
    """Log one line of ``plugin`` during ``hook`` on ``pod`` (None: no Pod, as ValidateConfig).

    ``level`` is a guest level name (debug, info, warn, error); ``source`` is where the line
    came from (``log``, ``stdout``, ``stderr``, or ``host`` for the host's own notes).
    """
    on_pod = f" on Pod {pod}" if pod else ""
    log.log(
        LEVELS.get(level, logging.INFO),
        "plugin '%s' %s%s: %s",
        plugin,
        hook,
        on_pod,
        escape_controls(message),
        extra={"plugin": plugin, "hook": str(hook), "pod": pod, "source": source},
    )


def parse_observation(message: str) -> Observation | None:
    """The observation a line ``observe <name> <value>`` carries; None when the line does not
    start with ``observe ``. ValueError saying why when it starts so but does not parse.

    ``<name>`` matches ``[a-z][a-z0-9_]{0,62}`` and ends in ``_seconds``; ``<value>`` is a
    non-negative decimal ``[0-9]+(.[0-9]+)?`` of at most 20 characters; the three parts are
    separated by single spaces, with nothing before or after.
    """
    if not message.startswith(OBSERVE_PREFIX):
        return None
    parts = message[len(OBSERVE_PREFIX) :].split(" ")
    if len(parts) != 2 or not all(parts):
        raise ValueError("expected 'observe <name> <value>' with single spaces")
    name, value = parts
    problem = observation_name_problem(name)
    if problem is not None:
        raise ValueError(problem)
    if len(value) > MAX_VALUE_CHARS:
        raise ValueError(f"the value is longer than {MAX_VALUE_CHARS} characters")
    if not _VALUE.fullmatch(value):
        raise ValueError(f"the value '{value}' is not a non-negative decimal like 1 or 2.5")
    return Observation(name, float(value))
