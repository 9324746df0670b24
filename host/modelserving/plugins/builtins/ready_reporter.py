"""``ready-reporter``: how long each Pod took to become Ready, as a metric and a log line.

An OnPodReady plugin that changes nothing. Its latency is the Pod's Ready condition's
``lastTransitionTime`` minus ``metadata.creationTimestamp``, in whole milliseconds (a negative
difference counts as 0). It reports it as the observation ``pod_ready_seconds`` (the controller's
histogram ``modelserving_plugin_observation_seconds``) and logs
``Pod <pod> (role <role>, entry|worker) became Ready <s.mmm> s after creation`` at info, or at
warn past ``warnAfterSeconds``. When the latency cannot be measured it logs why at warn and
reports nothing; it never fails the hook.

Config (camelCase, unknown fields refused):
  warnAfterSeconds  optional int >= 1: log at warn when the latency is above it

Timestamps are read with one strict RFC 3339 grammar, the one the Rust twin
(``plugins-src/builtins/ready-reporter``) implements: ``YYYY-MM-DDTHH:MM:SS``, an optional
fraction ``.d+`` (milliseconds kept, the rest cut), then ``Z`` or ``+HH:MM`` / ``-HH:MM``.
"""

from __future__ import annotations

import re
from typing import Any

from pydantic import field_validator

from modelserving.api.hook import Hook, HookRequest
from modelserving.plugins.base import MAX_OBSERVATION_SECONDS, Builtin, Observation, PluginConfig
from modelserving.plugins.logs import emit

NAME = "ready-reporter"
OBSERVATION = "pod_ready_seconds"
MAX_QUOTED_CHARS = 64

_RFC3339 = re.compile(
    r"([0-9]{4})-([0-9]{2})-([0-9]{2})T([0-9]{2}):([0-9]{2}):([0-9]{2})"
    r"(?:\.([0-9]+))?(?:(Z)|([+-])([0-9]{2}):([0-9]{2}))",
    re.ASCII,
)
_DAYS_BEFORE_MONTH = (0, 31, 59, 90, 120, 151, 181, 212, 243, 273, 304, 334)
_MS_PER_DAY = 86_400_000


class ReadyReporterConfig(PluginConfig):
    warn_after_seconds: int | None = None

    @field_validator("warn_after_seconds")
    @classmethod
    def _at_least_one(cls, value: int | None) -> int | None:
        if value is not None and value < 1:
            raise ValueError("must be at least 1")
        return value


def _is_leap(year: int) -> bool:
    return year % 4 == 0 and (year % 100 != 0 or year % 400 == 0)


def _days_in_month(year: int, month: int) -> int:
    if month == 2:
        return 29 if _is_leap(year) else 28
    return 30 if month in (4, 6, 9, 11) else 31


def _days_before(year: int, month: int, day: int) -> int:
    """Days from 0000-01-01 (proleptic Gregorian; year 0 is a leap year) to the date."""
    leaps = (year + 3) // 4 - (year + 99) // 100 + (year + 399) // 400
    days = 365 * year + leaps + _DAYS_BEFORE_MONTH[month - 1] + day - 1
    return days + 1 if month > 2 and _is_leap(year) else days


def parse_rfc3339_ms(text: str) -> int | None:
    """Milliseconds since 0000-01-01T00:00:00Z of an RFC 3339 time; None when ``text`` is not
    one (the grammar of the module docstring, fields in range, no leap second)."""
    match = _RFC3339.fullmatch(text)
    if match is None:
        return None
    year, month, day, hour, minute, second = (int(g) for g in match.groups()[:6])
    fraction, zulu, sign, off_hour, off_minute = match.groups()[6:]
    if not 1 <= month <= 12 or not 1 <= day <= _days_in_month(year, month):
        return None
    if hour > 23 or minute > 59 or second > 59:
        return None
    offset_ms = 0
    if zulu is None:
        if int(off_hour) > 23 or int(off_minute) > 59:
            return None
        offset_ms = (int(off_hour) * 60 + int(off_minute)) * 60_000
        if sign == "-":
            offset_ms = -offset_ms
    millis = int((fraction or "")[:3].ljust(3, "0"))
    clock = ((hour * 60 + minute) * 60 + second) * 1000 + millis
    return _days_before(year, month, day) * _MS_PER_DAY + clock - offset_ms


def format_seconds(ms: int) -> str:
    """Milliseconds as seconds with exactly three decimals: 1500 -> ``1.500``."""
    return f"{ms // 1000}.{ms % 1000:03d}"


def _field(obj: Any, key: str) -> Any:
    """``obj[key]`` when ``obj`` is a map holding it, else None (absent, or not a map)."""
    return obj.get(key) if isinstance(obj, dict) else None


def _quoted(text: str) -> str:
    cut = text[:MAX_QUOTED_CHARS]
    return f"'{cut}...'" if len(text) > MAX_QUOTED_CHARS else f"'{cut}'"


def _time_ms(value: Any, what: str) -> int:
    """The time ``value`` (the field ``what``) in milliseconds; ValueError saying why not."""
    if value is None:
        raise ValueError(f"{what} is not set")
    if not isinstance(value, str):
        raise ValueError(f"{what} is not a string")
    ms = parse_rfc3339_ms(value)
    if ms is None:
        raise ValueError(f"{what} {_quoted(value)} is not an RFC 3339 time")
    return ms


def _ready_since(pod: Any) -> Any:
    """The ``lastTransitionTime`` of the first Ready=True condition; ValueError when none."""
    conditions = _field(_field(pod, "status"), "conditions")
    if conditions is None:
        raise ValueError("status.conditions is not set")
    if not isinstance(conditions, list):
        raise ValueError("status.conditions is not a list")
    for condition in conditions:
        if _field(condition, "type") == "Ready" and _field(condition, "status") == "True":
            return _field(condition, "lastTransitionTime")
    raise ValueError("it has no Ready condition with status True")


MAX_LATENCY_MS = MAX_OBSERVATION_SECONDS * 1000


def ready_latency_ms(pod: Any) -> int:
    """Milliseconds from the Pod's creation to its Ready condition (0 when negative, at most a
    week, the largest observation the host takes); ValueError saying why it cannot be
    measured."""
    created = _time_ms(
        _field(_field(pod, "metadata"), "creationTimestamp"), "metadata.creationTimestamp"
    )
    since = _ready_since(pod)
    ready = _time_ms(since, "the Ready condition's lastTransitionTime")
    if ready - created > MAX_LATENCY_MS:
        raise ValueError("it became Ready more than a week (604800 s) after its creation")
    return max(0, ready - created)


class ReadyReporter:
    """The plugin instance for one PluginSpec entry."""

    def __init__(self, name: str, config: ReadyReporterConfig) -> None:
        self.name = name
        self._warn_after_ms = (
            config.warn_after_seconds * 1000 if config.warn_after_seconds is not None else None
        )

    def on_pod_ready(self, request: HookRequest) -> list[Observation]:
        pod = request.pod
        name = _field(_field(pod, "metadata"), "name")
        pod_name = name if isinstance(name, str) else ""
        try:
            latency = ready_latency_ms(pod)
        except ValueError as exc:
            self._log(request, "warn", f"cannot measure readiness of Pod {pod_name}: {exc}")
            return []
        seconds = format_seconds(latency)
        kind = "entry" if request.is_entry else "worker"
        late = self._warn_after_ms is not None and latency > self._warn_after_ms
        self._log(
            request,
            "warn" if late else "info",
            f"Pod {pod_name} (role {request.role_name}, {kind}) became Ready {seconds} s "
            "after creation",
        )
        return [Observation(OBSERVATION, float(seconds))]

    def _log(self, request: HookRequest, level: str, message: str) -> None:
        emit(self.name, Hook.ON_POD_READY, request.pod_name, level, message)


def _make(name: str, config: Any) -> ReadyReporter:
    return ReadyReporter(name, config)


BUILTIN = Builtin(
    name=NAME,
    config_model=ReadyReporterConfig,
    factory=_make,
    summary="Reports how long each Pod took to become Ready (metric and log line).",
    hooks=frozenset({"on_pod_ready"}),
    wasm_module="ready-reporter.wasm",
    reads_pod_only=True,
)
