"""Helpers that turn intentions ("set the runtime class", "upsert this env") into JSON Patch ops.

Native plugins use ``PodPatch``; the Rust and Go guest SDKs implement the same semantics, so a
built-in produces byte-identical patches in either runtime.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import Any

from modelserving.api.hook import PatchOperation


def escape(token: str) -> str:
    """One JSON Pointer reference token (RFC 6901): ``~`` -> ``~0``, ``/`` -> ``~1``."""
    return token.replace("~", "~0").replace("/", "~1")


class PodPatch:
    """Builds a patch against one Pod, reading it but never changing it."""

    def __init__(self, pod: Mapping[str, Any]) -> None:
        self._pod = pod
        self.ops: list[PatchOperation] = []
        self._maps_created: set[str] = set()
        # Env var names of each env list as this builder's ops leave it, by JSON pointer, so
        # that a second upsert_env builds on the first instead of clobbering or duplicating.
        self._env_names: dict[str, list[Any]] = {}

    def add(self, path: str, value: Any) -> PodPatch:
        """An ``add``: creates the member or replaces it (RFC 6902)."""
        self.ops.append({"op": "add", "path": path, "value": value})
        return self

    def set_runtime_class_name(self, name: str) -> PodPatch:
        return self.add("/spec/runtimeClassName", name)

    def merge_annotations(self, values: Mapping[str, str]) -> PodPatch:
        """Add or overwrite annotations (same keys get the new value)."""
        return self._merge_map("annotations", values)

    def merge_labels(self, values: Mapping[str, str]) -> PodPatch:
        """Add or overwrite labels (same keys get the new value)."""
        return self._merge_map("labels", values)

    def _merge_map(self, field: str, values: Mapping[str, str]) -> PodPatch:
        if not values:
            return self
        existing = self._pod.get("metadata", {}).get(field)
        if existing is None and field not in self._maps_created:
            self._maps_created.add(field)
            return self.add(f"/metadata/{field}", dict(values))
        for key, value in values.items():
            self.add(f"/metadata/{field}/{escape(key)}", value)
        return self

    def upsert_env(self, env: Iterable[Mapping[str, Any]]) -> PodPatch:
        """Set env vars in every container and initContainer, replacing same-named entries.

        Unlike Kthena's demo plugin (which appends and so duplicates names), the first entry of
        a name is replaced in place, any later entries of that name are removed (the kubelet
        would let the last one win), and a new name is appended; later entries of ``env`` win
        over earlier ones.
        """
        wanted = [dict(e) for e in env]
        if not wanted:
            return self
        spec = self._pod.get("spec", {})
        for kind in ("containers", "initContainers"):
            for i, container in enumerate(spec.get(kind) or []):
                base = f"/spec/{kind}/{i}/env"
                current = container.get("env")
                if current is None and base not in self._env_names:
                    merged: list[dict[str, Any]] = []
                    for var in wanted:
                        names = [e["name"] for e in merged]
                        if var["name"] in names:
                            merged[names.index(var["name"])] = var
                        else:
                            merged.append(var)
                    self.add(base, merged)
                    self._env_names[base] = [e["name"] for e in merged]
                    continue
                names = self._env_names.setdefault(base, [e.get("name") for e in current or []])
                for var in wanted:
                    self._upsert_one(base, names, var)
        return self

    def _upsert_one(self, base: str, names: list[Any], var: dict[str, Any]) -> None:
        """One env var into the list at ``base`` whose names (as our ops leave it) are ``names``."""
        name = var["name"]
        if name not in names:
            names.append(name)
            self.add(f"{base}/-", var)
            return
        first = names.index(name)
        self.ops.append({"op": "replace", "path": f"{base}/{first}", "value": var})
        for later in reversed([j for j, n in enumerate(names) if n == name and j != first]):
            self.ops.append({"op": "remove", "path": f"{base}/{later}"})
            del names[later]
