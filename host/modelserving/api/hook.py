"""The hooks (one table), what a hook receives (HookRequest) and what it may return (RFC 6902
JSON Patch operations).

``HOOK_SPECS`` declares each hook once: its wire name, the method a native plugin implements,
its export in each module flavour, what a call is about and whether it patches the Pod.
Everything else that lists hooks (the ABI's export tables, the registry's method names, the
chain, the CLI's ``--hook``) derives from it; the ABI version that introduced a hook is declared
with that version (``modelserving.abi.versions``). Shared by native plugins, the ABI codec and
the chain, so both kinds of plugin see the same request and are judged by the same patch rules.
"""

from __future__ import annotations

import enum
import re
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Literal, NotRequired, TypedDict

from modelserving.api.place import PodPlace

if TYPE_CHECKING:
    # Only an annotation here: the hook table stays importable without building the pydantic
    # models (the command line's ``--hook`` choices come from it).
    from modelserving.api.modelserving import ModelServing


class Hook(enum.StrEnum):
    """The hook points; values are the names used on the wire and in messages."""

    ON_POD_CREATE = "OnPodCreate"
    ON_POD_READY = "OnPodReady"
    ON_SERVING_GROUP_CHANGE = "OnServingGroupChange"
    VALIDATE_CONFIG = "ValidateConfig"


@dataclass(frozen=True, slots=True)
class HookSpec:
    """One hook point as declared: ``method`` is what a native plugin implements (empty: none,
    a built-in's config model stands in); ``export`` and ``extism`` its names in a core module
    and in an Extism module; ``target`` what one call is about: a Pod (``HookRequest``), a
    ServingGroup (``GroupRequest``) or the plugin itself; ``patches``: its reply is a JSON
    patch of the Pod (else a Pod hook may report observations and a group hook returns owned
    objects)."""

    hook: Hook
    method: str
    export: str
    extism: str
    patches: bool = False
    target: Literal["pod", "group", "plugin"] = "pod"

    @property
    def per_pod(self) -> bool:
        """Whether a call is about one Pod."""
        return self.target == "pod"

    @property
    def per_group(self) -> bool:
        """Whether a call is about one ServingGroup (its reply: owned objects)."""
        return self.target == "group"

    @property
    def observes(self) -> bool:
        """Whether a call may report observations (a Pod hook that does not patch)."""
        return self.per_pod and not self.patches

    @property
    def option(self) -> str:
        """The name on the command line: OnPodCreate -> on-pod-create."""
        return re.sub(r"(?<!^)(?=[A-Z])", "-", self.hook.value).lower()


HOOK_SPECS: tuple[HookSpec, ...] = (
    HookSpec(Hook.ON_POD_CREATE, "on_pod_create", "ms_on_pod_create", "on_pod_create", True),
    HookSpec(Hook.ON_POD_READY, "on_pod_ready", "ms_on_pod_ready", "on_pod_ready"),
    HookSpec(
        Hook.ON_SERVING_GROUP_CHANGE,
        "on_serving_group_change",
        "ms_on_serving_group_change",
        "on_serving_group_change",
        target="group",
    ),
    HookSpec(Hook.VALIDATE_CONFIG, "", "ms_validate_config", "validate_config", target="plugin"),
)
"""Every hook, in the order the controller reports them."""

SPEC: dict[Hook, HookSpec] = {spec.hook: spec for spec in HOOK_SPECS}
POD_HOOKS: tuple[Hook, ...] = tuple(spec.hook for spec in HOOK_SPECS if spec.per_pod)
WORK_HOOKS: tuple[Hook, ...] = tuple(spec.hook for spec in HOOK_SPECS if spec.target != "plugin")
"""The hooks that do a plugin's work (a module must serve one of them): all but
ValidateConfig."""


PatchOpName = Literal["add", "remove", "replace", "test"]
PATCH_OPS: frozenset[str] = frozenset({"add", "remove", "replace", "test"})
PATCH_OP_KEYS: frozenset[str] = frozenset({"op", "path", "value"})
"""The keys a patch operation may have."""


class PatchOperation(TypedDict):
    """One RFC 6902 operation; ``value`` is present for add, replace and test."""

    op: PatchOpName
    path: str
    value: NotRequired[Any]


@dataclass(frozen=True, slots=True, init=False)
class HookRequest:
    """The context of one hook call for one Pod (Kthena's HookRequest, plus the hook name).

    ``place`` is where the Pod sits (its ServingGroup, role, role id, entry or worker; also
    read as ``serving_group``, ``role_name``, ``role_id`` and ``is_entry``). ``pod`` is a
    JSON-compatible dict. Plugins must not modify it: they return patches.
    """

    hook: Hook
    model_serving: ModelServing
    place: PodPlace
    pod: dict[str, Any]

    def __init__(
        self, hook: Hook, model_serving: ModelServing, place: PodPlace, pod: dict[str, Any]
    ) -> None:
        # the frozen dataclass's own ``__init__``, with the setter looked up once: one request
        # is made for every plugin call (0.59 against 0.86 us)
        put = _put
        put(self, "hook", hook)
        put(self, "model_serving", model_serving)
        put(self, "place", place)
        put(self, "pod", pod)

    @property
    def serving_group(self) -> str:
        return self.place.serving_group

    @property
    def role_name(self) -> str:
        return self.place.role_name

    @property
    def role_id(self) -> str:
        return self.place.role_id

    @property
    def is_entry(self) -> bool:
        return self.place.is_entry

    @property
    def pod_name(self) -> str:
        name = self.pod.get("metadata", {}).get("name", "")
        return str(name)


_put = object.__setattr__
