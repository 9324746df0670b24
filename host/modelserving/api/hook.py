"""What a plugin hook receives (HookRequest) and returns (RFC 6902 JSON Patch operations).

Shared by native plugins, the ABI codec and the chain, so both kinds of plugin see the same
request and are judged by the same patch rules.
"""

from __future__ import annotations

import enum
from dataclasses import dataclass
from typing import Any, Literal, NotRequired, TypedDict

from modelserving.api.modelserving import ModelServing


class Hook(enum.StrEnum):
    """The hook points; values are the names used on the wire and in messages."""

    ON_POD_CREATE = "OnPodCreate"
    ON_POD_READY = "OnPodReady"
    VALIDATE_CONFIG = "ValidateConfig"


PatchOpName = Literal["add", "remove", "replace", "test"]
PATCH_OPS: frozenset[str] = frozenset({"add", "remove", "replace", "test"})


class PatchOperation(TypedDict):
    """One RFC 6902 operation; ``value`` is present for add, replace and test."""

    op: PatchOpName
    path: str
    value: NotRequired[Any]


@dataclass(frozen=True, slots=True)
class HookRequest:
    """The context of one hook call for one Pod (Kthena's HookRequest, plus the hook name).

    ``pod`` is a JSON-compatible dict. Plugins must not modify it: they return patches.
    """

    hook: Hook
    model_serving: ModelServing
    serving_group: str
    role_name: str
    role_id: str
    is_entry: bool
    pod: dict[str, Any]

    @property
    def pod_name(self) -> str:
        name = self.pod.get("metadata", {}).get("name", "")
        return str(name)
