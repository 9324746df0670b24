"""What an OnPodReady hook may report: ``Observation``, a named measurement in seconds.

The same value, under the same rules, whichever way it arrives: returned by a native plugin,
in the ``observations`` of an ABI v2 response (``modelserving.abi.codec``), or as an
``observe <name> <value>`` log line (``modelserving.plugins.logs``). The controller adds each to
the histogram ``modelserving_plugin_observation_seconds``.
"""

from __future__ import annotations

import math
import re
from dataclasses import dataclass

_OBSERVATION_NAME = re.compile(r"[a-z][a-z0-9_]{0,62}", re.ASCII)
OBSERVATION_SUFFIX = "_seconds"
MAX_OBSERVATION_SECONDS = 7 * 24 * 3600
"""The largest observation taken: a week (no readiness or step takes longer; a bigger value
would only ruin the histogram's sum)."""


def observation_name_problem(name: str) -> str | None:
    """Why ``name`` cannot name an observation (None when it can): it must match
    ``[a-z][a-z0-9_]{0,62}`` and end in ``_seconds``."""
    if not _OBSERVATION_NAME.fullmatch(name):
        return f"the name '{name[:70]}' does not match [a-z][a-z0-9_]{{0,62}}"
    if not name.endswith(OBSERVATION_SUFFIX):
        return f"the name '{name}' does not end in {OBSERVATION_SUFFIX}"
    return None


@dataclass(frozen=True, slots=True)
class Observation:
    """One measurement an OnPodReady hook reports: ``name`` (ends in ``_seconds``) and a
    non-negative, finite number of seconds. ValueError when either is invalid."""

    name: str
    seconds: float

    def __post_init__(self) -> None:
        if not isinstance(self.name, str):
            raise ValueError(
                f"invalid observation: the name must be a str, not {type(self.name).__name__}"
            )
        problem = observation_name_problem(self.name)
        if problem is not None:
            raise ValueError(f"invalid observation: {problem}")
        seconds = self.seconds
        if isinstance(seconds, bool) or not isinstance(seconds, int | float):
            raise ValueError(
                f"invalid observation {self.name}: seconds must be a number, "
                f"not {type(seconds).__name__}"
            )
        if not math.isfinite(seconds) or not 0 <= seconds <= MAX_OBSERVATION_SECONDS:
            raise ValueError(
                f"invalid observation {self.name}: seconds must be between 0 and "
                f"{MAX_OBSERVATION_SECONDS} (7 days), not {seconds}"
            )
