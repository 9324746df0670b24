"""What a call in the sandbox comes back with, whichever runtime ran it: ``CallResult`` (the
response bytes, the fuel and time used, the guest's log lines) or ``CallFailure`` (a
``SandboxError`` with the same usage and the lines logged up to the failure).

Both runtimes (``sandbox.core`` and ``sandbox.extism``) and the module cache import these from
here, so neither runtime imports the other.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from modelserving.api.errors import FailureClass
from modelserving.sandbox.errors import SandboxError
from modelserving.sandbox.logs import LogRecord


@dataclass
class CallResult:
    """A finished call: the response bytes, what it used and what it logged."""

    response: bytes
    fuel_consumed: int
    duration_us: float
    logs: list[LogRecord] = field(default_factory=list)


class CallFailure(SandboxError):
    """A failed call, with what it used and logged up to the failure."""

    def __init__(
        self,
        failure_class: FailureClass,
        message: str,
        fuel_consumed: int = 0,
        duration_us: float = 0.0,
        logs: list[LogRecord] | None = None,
    ) -> None:
        super().__init__(failure_class, message)
        self.fuel_consumed = fuel_consumed
        self.duration_us = duration_us
        self.logs = logs or []
