"""The ModelServing status the controller writes: Kthena's counts and conditions plus PluginsReady.

``build`` turns a pass's ``SyncStatus`` and plugin state into the status object; a condition
keeps its lastTransitionTime while its status stays the same, so an unchanged ModelServing gets
an identical status and the reconciler skips the write. Called by the reconciler.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from datetime import UTC, datetime
from typing import Any

from modelserving.api.errors import PluginConfigError, PluginFailure
from modelserving.api.modelserving import ModelServing
from modelserving.api.text import bounded
from modelserving.workload.plan import label_selector
from modelserving.workload.sync import SyncStatus

AVAILABLE = "Available"
PROGRESSING = "Progressing"
UPDATE_IN_PROGRESS = "UpdateInProgress"
PLUGINS_READY = "PluginsReady"


def _time(now: float) -> str:
    return datetime.fromtimestamp(now, UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


MAX_CONDITION_MESSAGE = 4096
"""Characters of a condition's message (the API's Condition allows 32,768; a plugin's error
can quote a module's names or a guest's text at any length)."""


def plugins_condition(
    ms: ModelServing,
    error: PluginConfigError | None,
    failures: Sequence[PluginFailure],
) -> tuple[str, str, str]:
    """(status, reason, message) of PluginsReady: False with the failure class as the reason
    when the plugin list could not be loaded or a Fail-policy plugin failed on a Pod."""
    if error is not None:
        reason = str(error.failure_class) if error.failure_class else "InvalidConfig"
        return "False", reason, bounded(str(error), MAX_CONDITION_MESSAGE)
    if failures:
        first = failures[0]
        return "False", str(first.failure_class), bounded(str(first), MAX_CONDITION_MESSAGE)
    count = len(ms.spec.plugins or [])
    if count == 0:
        return "True", "NoPlugins", "no plugins are configured"
    return "True", "PluginsLoaded", f"{count} plugin(s) loaded and running"


def build(
    ms: ModelServing,
    old: Mapping[str, Any],
    counts: SyncStatus,
    plugins: tuple[str, str, str],
    now: float,
) -> dict[str, Any]:
    """The complete status object."""
    previous = {c.get("type"): c for c in old.get("conditions") or []}
    generation = ms.metadata.generation

    def condition(type_: str, status: str, reason: str, message: str) -> dict[str, Any]:
        before = previous.get(type_) or {}
        since = before.get("lastTransitionTime") if before.get("status") == status else None
        out = {
            "type": type_,
            "status": status,
            "reason": reason,
            "message": message,
            "lastTransitionTime": since or _time(now),
        }
        if generation is not None:
            out["observedGeneration"] = generation
        return out

    ready = f"{counts.available_replicas}/{ms.spec.replicas} ServingGroups ready"
    updated = f"{counts.updated_replicas}/{counts.replicas} ServingGroups at the new revision"
    conditions = [
        condition(
            AVAILABLE,
            "True" if counts.available else "False",
            "AllGroupsReady" if counts.available else "GroupsNotReady",
            ready,
        ),
        condition(
            PROGRESSING,
            "True" if counts.progressing else "False",
            "GroupProgressing" if counts.progressing else "NotProgressing",
            ready,
        ),
        condition(
            UPDATE_IN_PROGRESS,
            "True" if counts.updating else "False",
            "GroupsUpdating" if counts.updating else "NoUpdate",
            updated,
        ),
        condition(PLUGINS_READY, *plugins),
    ]
    status: dict[str, Any] = {
        "replicas": counts.replicas,
        "currentReplicas": counts.current_replicas,
        "updatedReplicas": counts.updated_replicas,
        "availableReplicas": counts.available_replicas,
        "currentRevision": counts.current_revision,
        "updateRevision": counts.update_revision,
        "conditions": conditions,
        "labelSelector": label_selector(ms),
    }
    if generation is not None:
        status["observedGeneration"] = generation
    return status
