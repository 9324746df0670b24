"""What a ServingGroup hook (a hook whose target is "group", such as OnServingGroupChange)
receives and may return.

``GroupRequest`` is one call's input: the ServingGroup, how many Pods in the plugin's scope it
should have, and the facts of those it has (``GroupPod``: where each sits, its node, IPs, phase,
readiness and annotations). ``group_pod`` reads them from a Pod as the API returns it.
``group_input_digest`` is the SHA-256 the controller compares to decide whether the input
changed. What a call may return, owned objects (ConfigMaps), is checked for its shape by
``object_shape_problem`` here, whichever runtime returned it, and then by the operator's object
policy (``modelserving.chain.objects``).
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Mapping
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from modelserving.api.hook import Hook
from modelserving.api.place import PodPlace

if TYPE_CHECKING:
    from modelserving.api.modelserving import ModelServing

OBJECT_KEYS = ("apiVersion", "kind", "metadata", "data")
METADATA_KEYS = ("name", "namespace", "labels", "annotations")
MAX_OBJECTS = 16
"""Most objects one response may list, whatever the operator allows (ABI v3, 15.4)."""


@dataclass(frozen=True, slots=True)
class GroupPod:
    """One existing Pod of a ServingGroup as the group hook sees it."""

    name: str
    place: PodPlace
    node: str = ""
    host_ip: str = ""
    pod_ip: str = ""
    phase: str = ""
    ready: bool = False
    annotations: Mapping[str, str] | None = None

    def to_wire(self) -> dict[str, Any]:
        """The Pod's entry in a request (ABI v3, 15.3), keys in the order of the table."""
        return {
            "name": self.name,
            "roleName": self.place.role_name,
            "roleId": self.place.role_id,
            "isEntry": self.place.is_entry,
            "node": self.node,
            "hostIP": self.host_ip,
            "podIP": self.pod_ip,
            "phase": self.phase,
            "ready": self.ready,
            "annotations": dict(self.annotations or {}),
        }


def group_pod(pod: Mapping[str, Any], place: PodPlace) -> GroupPod:
    """The facts of ``pod`` (an API object) the group hook is given."""
    meta = pod.get("metadata") or {}
    spec = pod.get("spec") or {}
    status = pod.get("status") or {}
    phase = str(status.get("phase") or "")
    conditions = {c.get("type"): c.get("status") for c in status.get("conditions") or []}
    annotations = {str(k): str(v) for k, v in (meta.get("annotations") or {}).items()}
    return GroupPod(
        name=str(meta.get("name", "")),
        place=place,
        node=str(spec.get("nodeName") or ""),
        host_ip=str(status.get("hostIP") or ""),
        pod_ip=str(status.get("podIP") or ""),
        phase=phase,
        ready=phase == "Running" and conditions.get("Ready") == "True",
        annotations=annotations,
    )


@dataclass(frozen=True, slots=True)
class GroupRequest:
    """The context of one call of the ServingGroup hook ``hook``: the ServingGroup, the number
    of Pods in the plugin's scope it has when complete, and those of them that exist (not
    terminating), in order: role (spec order), role replica, the entry first, then the
    workers."""

    model_serving: ModelServing
    serving_group: str
    expected_pods: int
    pods: tuple[GroupPod, ...]
    hook: Hook = Hook.ON_SERVING_GROUP_CHANGE

    @property
    def pod_name(self) -> str:
        """No single Pod: failures name the ServingGroup instead."""
        return ""

    def wire_pods(self) -> list[dict[str, Any]]:
        return [p.to_wire() for p in self.pods]


def group_input_digest(
    plugin: str,
    config: Any,
    generation: int | None,
    request: GroupRequest,
    context: Mapping[str, Any] | None = None,
) -> str:
    """The SHA-256 (hex) of what a call for ``request`` depends on: the plugin and its config,
    the ModelServing's generation, the ServingGroup, ``expectedPods``, the Pods' facts, and
    ``context`` (the ModelServing's labels and annotations, the module's digest)."""
    body = {
        "plugin": plugin,
        "config": config,
        "generation": generation,
        "servingGroup": request.serving_group,
        "expectedPods": request.expected_pods,
        "pods": request.wire_pods(),
        "context": dict(context or {}),
    }
    text = json.dumps(body, sort_keys=True, separators=(",", ":"), default=str)
    return hashlib.sha256(text.encode("utf-8")).hexdigest()


def kind_of(value: Any) -> str:
    """What a decoded msgpack value is, as messages say it ("a map", "nil", ...)."""
    if value is None:
        return "nil"
    return {
        dict: "a map",
        list: "an array",
        str: "a string",
        bytes: "binary data",
        bool: "a bool",
        int: "an integer",
        float: "a float",
    }.get(type(value), type(value).__name__)


def _string_map_problem(where: str, value: Any) -> str | None:
    if not isinstance(value, dict):
        return f"{where} must be a map, not {kind_of(value)}"
    for key, item in value.items():
        if not isinstance(key, str):
            return f"{where} has a key that is {kind_of(key)}, not a string"
        if not isinstance(item, str):
            return f"{where}.{key} must be a string, not {kind_of(item)}"
    return None


def objects_shape_problem(raw: Any) -> str | None:
    """Why ``raw`` is not a list of owned objects as ABI v3 states it (None when it is): the
    first broken rule of 15.4's shape, naming the entry."""
    if not isinstance(raw, list):
        return f"objects must be an array, not {kind_of(raw)}"
    if len(raw) > MAX_OBJECTS:
        return f"the response has {len(raw)} objects; the limit is {MAX_OBJECTS}"
    for i, obj in enumerate(raw):
        problem = object_shape_problem(f"objects[{i}]", obj)
        if problem is not None:
            return problem
    return None


def object_shape_problem(where: str, obj: Any) -> str | None:
    """Why ``obj`` is not one owned object's shape (apiVersion, kind, metadata, data)."""
    if not isinstance(obj, dict):
        return f"{where} must be a map, not {kind_of(obj)}"
    unknown = sorted(str(k) for k in set(obj) - set(OBJECT_KEYS))
    if unknown:
        return f"{where} has unknown key(s) {', '.join(map(repr, unknown))}"
    for key in ("apiVersion", "kind"):
        if not isinstance(obj.get(key), str):
            return f"{where}.{key} must be a string, not {kind_of(obj.get(key))}"
    meta = obj.get("metadata")
    if not isinstance(meta, dict):
        return f"{where}.metadata must be a map, not {kind_of(meta)}"
    unknown = sorted(str(k) for k in set(meta) - set(METADATA_KEYS))
    if unknown:
        return f"{where}.metadata has unknown key(s) {', '.join(map(repr, unknown))}"
    for key in ("name", "namespace"):
        if key in meta and not isinstance(meta[key], str):
            return f"{where}.metadata.{key} must be a string, not {kind_of(meta[key])}"
    if "name" not in meta:
        return f"{where}.metadata needs a name"
    for key in ("labels", "annotations"):
        if meta.get(key) is not None:
            problem = _string_map_problem(f"{where}.metadata.{key}", meta[key])
            if problem is not None:
                return problem
    if obj.get("data") is not None:
        return _string_map_problem(f"{where}.data", obj["data"])
    return None
