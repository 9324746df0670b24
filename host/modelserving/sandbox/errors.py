"""The sandbox's one error: a failure class of the ABI contract and a message.

The sandbox knows nothing of plugins or Pods; the plugin adapter adds the plugin name, the hook
and the Pod when it turns a ``SandboxError`` into a ``PluginFailure``. A message may quote the
guest (an Extism error text, a trap message, an import's name), so its control characters are
escaped (``modelserving.api.text``): every message is one line wherever it is written.
"""

from __future__ import annotations

import re

from modelserving.api.errors import FailureClass
from modelserving.api.text import bounded, escape_controls

MAX_MESSAGE = 2000
"""Characters of a message; a longer one is cut (a module's names can make one of megabytes:
9,990 ABI-like export names of 3 KB each made a refusal of 30 million characters)."""


class SandboxError(Exception):
    """A module was refused or a call failed, with exactly one failure class; ``message`` is
    one line (control characters escaped) of at most ``MAX_MESSAGE`` characters."""

    def __init__(self, failure_class: FailureClass, message: str, contended: bool = False) -> None:
        self.failure_class = failure_class
        self.message = bounded(escape_controls(message), MAX_MESSAGE)
        self.contended = contended
        """The failure may be the busy host's, not the module's (a compile that passed its
        deadline while another compile ran, or with its worker starved of CPU): it is not
        remembered as the module's refusal."""
        super().__init__(f"{failure_class}: {self.message}")


def invalid_module(message: str) -> SandboxError:
    return SandboxError(FailureClass.INVALID_MODULE, message)


_CHAIN_NUMBER = re.compile(r"^\d+:\s*")


def cause_line(text: str) -> str:
    """An engine's multi-line report in one line: the last line of its last ``Caused by:``
    section, else its ``wasm trap: ...`` line, else its first line; never with the chain
    numbering of an error's causes (``1: ...``). The cause comes last in the engine's report,
    after the backtrace, whose function names are the module's: a name can hold line breaks and
    a forged ``wasm trap:`` or ``Caused by:`` line, but not the report's end."""
    lines = [line.strip() for line in text.strip().splitlines() if line.strip()]
    if not lines:
        return ""
    if "Caused by:" in lines:
        last = len(lines) - 1 - lines[::-1].index("Caused by:")
        if last + 1 < len(lines):
            return _CHAIN_NUMBER.sub("", lines[-1])
    for line in lines:
        if line.startswith("wasm trap:"):
            return line
    return _CHAIN_NUMBER.sub("", lines[0])


def error_line(exc: BaseException) -> str:
    """``cause_line`` of an exception, or its type's name when it says nothing."""
    return cause_line(str(exc)) or type(exc).__name__
