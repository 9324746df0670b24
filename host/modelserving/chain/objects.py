"""Enforces the operator's ObjectPolicy on the objects a ServingGroup hook returns: the one path
for native and WebAssembly plugins (ABI v3, section 15.4).

``ObjectValidator.check`` takes a reply's objects, whose shape is already checked
(``modelserving.api.group.objects_shape_problem``), and refuses the first one that breaks a
rule: its kind, namespace, name (a DNS subdomain prefixed by the ServingGroup's name, listed
once), labels and annotations (valid keys and values, none under a protected prefix), the
number of objects and each one's size. ``ObjectRejected`` names the entry and the rule; the
chain reports it as ``ForbiddenObject``. What it returns is what the controller applies once it
has added its own labels, annotation and owner reference.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from typing import Any

from modelserving.api.errors import ObjectRejected
from modelserving.api.names import is_dns1123_subdomain, is_label_value, is_qualified_name
from modelserving.api.policy import PROTECTED_PREFIXES, ObjectPolicy

API_VERSIONS = {"ConfigMap": "v1"}
"""The apiVersion of each kind an owned object may have."""


class ObjectValidator:
    """Checks owned objects under one ObjectPolicy and the protected prefixes of the patch
    policy (the controller's own labels and annotations)."""

    def __init__(
        self,
        policy: ObjectPolicy | None = None,
        protected_prefixes: Sequence[str] = PROTECTED_PREFIXES,
    ) -> None:
        self.policy = policy or ObjectPolicy()
        self._prefixes = tuple(protected_prefixes)

    def check(
        self, objects: Sequence[dict[str, Any]], serving_group: str, namespace: str
    ) -> list[dict[str, Any]]:
        """The objects, each with only the keys an owned object has; ObjectRejected for the
        first that the policy refuses."""
        policy = self.policy
        if len(objects) > policy.max_objects:
            raise ObjectRejected(
                f"the response has {len(objects)} objects; objectPolicy.maxObjects is "
                f"{policy.max_objects}"
            )
        seen: set[str] = set()
        out: list[dict[str, Any]] = []
        for i, obj in enumerate(objects):
            where = f"objects[{i}]"
            out.append(self._one(where, obj, serving_group, namespace))
            name = obj["metadata"]["name"]
            if name in seen:
                raise ObjectRejected(f"{where}: name '{name}' is listed twice")
            seen.add(name)
        return out

    def _one(
        self, where: str, obj: dict[str, Any], serving_group: str, namespace: str
    ) -> dict[str, Any]:
        kind = obj["kind"]
        allowed = ", ".join(self.policy.kinds) or "none"
        if kind not in self.policy.kinds:
            raise ObjectRejected(
                f"{where}: kind {kind} is not allowed (objectPolicy.kinds: {allowed})"
            )
        if obj["apiVersion"] != API_VERSIONS[kind]:
            raise ObjectRejected(
                f"{where}: apiVersion {obj['apiVersion']} is not {API_VERSIONS[kind]} ({kind})"
            )
        meta = obj["metadata"]
        given = meta.get("namespace")
        if given is not None and given != namespace:
            raise ObjectRejected(
                f"{where}: namespace {given} is not the ModelServing's namespace ({namespace})"
            )
        name = meta["name"]
        if not is_dns1123_subdomain(name):
            raise ObjectRejected(
                f"{where}: name '{name[:80]}' is not a valid object name (lower-case letters, "
                "digits, '-' and '.', at most 253 characters)"
            )
        if not name.startswith(serving_group + "-"):
            raise ObjectRejected(f"{where}: name '{name}' must start with '{serving_group}-'")
        labels = dict(meta.get("labels") or {})
        annotations = dict(meta.get("annotations") or {})
        for key, value in labels.items():
            self._key(where, "label", key)
            if not is_label_value(value):
                raise ObjectRejected(f"{where}: label '{key}' has an invalid value '{value[:70]}'")
        for key in annotations:
            self._key(where, "annotation", key)
        clean: dict[str, Any] = {
            "apiVersion": obj["apiVersion"],
            "kind": kind,
            "metadata": {"name": name, "labels": labels, "annotations": annotations},
            "data": dict(obj.get("data") or {}),
        }
        size = len(json.dumps(clean, separators=(",", ":"), ensure_ascii=False).encode("utf-8"))
        if size > self.policy.max_object_bytes:
            raise ObjectRejected(
                f"{where}: {size} bytes; objectPolicy.maxObjectBytes is "
                f"{self.policy.max_object_bytes}"
            )
        return clean

    def _key(self, where: str, what: str, key: str) -> None:
        if not is_qualified_name(key):
            raise ObjectRejected(f"{where}: {what} key '{key[:80]}' is not a valid key")
        for prefix in self._prefixes:
            if key.startswith(prefix):
                raise ObjectRejected(
                    f"{where}: {what} '{key}' belongs to the controller "
                    f"(patchPolicy.protectedPrefixes: {', '.join(self._prefixes)})"
                )
