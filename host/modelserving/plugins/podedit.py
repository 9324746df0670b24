"""PodEdit: changes to a working copy of a Pod, each recorded as the JSON Patch operation it is.

The built-ins that reach deep into a Pod (``accelerator``, ``inference-engine``, ``rdma-network``)
edit through this class: every change is applied to the copy at once, so the next change sees
the Pod as the patch leaves it (an index after an append, a map just created). The Rust crate
``builtins-kit`` (``plugins-src/builtins-kit``) implements the same edits with the same operations
and error texts, so a built-in's native and WebAssembly forms patch identically.

Paths are sequences of map keys (``str``) and list indexes (``int``). The rules:

* ``put`` sets a value; when a map on the way is missing (absent or null), the one ``add``
  creates it with everything below it, so a patch never refers to a member that does not exist;
* ``put_if_absent`` sets a value only when there is none (a value the user wrote is kept);
* ``merge_map`` sets keys of a map, creating the whole map in one ``add`` when it is missing;
* ``append_unless`` appends to a list (creating it when missing) unless an item matches.

On top of them, the edits the built-ins share (one container, by index in ``spec.containers``):

* ``set_amount`` sets ``resources.limits[resource]``, and ``resources.requests[resource]`` only
  when the container already requests it (Kubernetes defaults a missing request to the limit);
* ``add_volume`` appends a volume unless one of that name exists, then its mount unless a mount
  at that path exists (what the user wrote is kept);
* ``add_shared_memory`` is ``add_volume`` of the ``dshm`` memory ``emptyDir`` at ``/dev/shm``;
* ``add_env`` appends an env var unless the container has one of that name;
* ``add_config_map_files`` is ``add_volume`` of an optional ConfigMap volume that shows the
  given keys as files (a ServingGroup hook's owned ConfigMap, which may not exist yet).

A value of the wrong type on the way (a ``resources`` that is a string) raises ``HookError`` with
a message naming the place: ``pod spec.containers[0].resources is a str, not a map``.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from typing import Any

from modelserving.api.hook import PatchOperation
from modelserving.api.jsondata import json_copy
from modelserving.plugins.base import HookError
from modelserving.plugins.patch import escape

Key = str | int
Path = Sequence[Key]

SHM_VOLUME = "dshm"
"""The shared-memory volume's name."""
SHM_PATH = "/dev/shm"
"""Where the shared-memory volume is mounted."""


def type_name(value: Any) -> str:
    """A value's type in the ABI's words (nil, bool, int, float, str, array, map)."""
    if value is None:
        return "nil"
    if isinstance(value, bool):
        return "bool"
    if isinstance(value, int):
        return "int"
    if isinstance(value, float):
        return "float"
    if isinstance(value, str):
        return "str"
    if isinstance(value, list):
        return "array"
    return "map" if isinstance(value, dict) else type(value).__name__


def pointer(path: Path) -> str:
    """The JSON Pointer of ``path``: ``/metadata/labels/a~1b`` for metadata, labels, a/b."""
    return "".join("/" + escape(str(key)) for key in path)


def dotted(path: Path) -> str:
    """``path`` as error messages show it: ``spec.containers[0].resources``."""
    out = ""
    for key in path:
        out += f"[{key}]" if isinstance(key, int) else (f".{key}" if out else key)
    return out


def str_field(item: Any, key: str) -> str | None:
    """``item[key]`` when ``item`` is a map and the value a string, else None."""
    value = item.get(key) if isinstance(item, dict) else None
    return value if isinstance(value, str) else None


def int_field(item: Any, key: str) -> int | None:
    """``item[key]`` when ``item`` is a map and the value an integer (not a bool), else None."""
    value = item.get(key) if isinstance(item, dict) else None
    return value if isinstance(value, int) and not isinstance(value, bool) else None


class PodEdit:
    """Edits a working copy of one Pod; ``ops`` is the patch that leads from the Pod to it.

    The copy is made on write: it shares with the given Pod everything no edit has touched,
    and a map or list is copied (shallowly, once) when an edit changes it or something below
    it, so the given Pod never changes. Treat ``pod`` as read-only.
    """

    def __init__(self, pod: Mapping[str, Any]) -> None:
        self.pod: dict[str, Any] = dict(pod)
        self.ops: list[PatchOperation] = []
        # The maps and lists this edit made (by id; kept alive here so no id is reused).
        self._owned: dict[int, Any] = {id(self.pod): self.pod}

    def get(self, path: Path) -> Any:
        """The value at ``path``; None when it or anything on the way is missing or of another
        type."""
        node: Any = self.pod
        for key in path:
            if isinstance(key, int):
                node = node[key] if isinstance(node, list) and key < len(node) else None
            else:
                node = node.get(key) if isinstance(node, dict) else None
            if node is None:
                return None
        return node

    def container(self, name: str | None) -> int:
        """The index in ``spec.containers`` of the container ``name``, or of the first one."""
        containers = self.get(["spec", "containers"])
        if not isinstance(containers, list) or not containers:
            raise HookError("the Pod has no containers")
        if name is None:
            return 0
        for i, container in enumerate(containers):
            if str_field(container, "name") == name:
                return i
        raise HookError(f"the Pod has no container named '{name}'")

    def put(self, path: Path, value: Any) -> None:
        """Set ``path`` to ``value``, creating the missing maps on the way in the same ``add``."""
        node: Any = self.pod
        for depth in range(len(path) - 1):
            child = self._child(node, path, depth)
            if child is None:  # add the missing member, holding the rest of the path
                for key in reversed(path[depth + 1 :]):
                    if isinstance(key, int):
                        raise HookError(f"pod {dotted(path[: depth + 1])} has no item {key}")
                    value = {key: value}
                self._set(path[: depth + 1], value)
                return
            node = child
        self._set(path, value)

    def put_if_absent(self, path: Path, value: Any) -> bool:
        """``put`` when ``path`` holds nothing (absent or null); whether it did."""
        if self.get(path) is not None:
            return False
        self.put(path, value)
        return True

    def merge_map(self, path: Path, values: Mapping[str, Any]) -> None:
        """Set each key of ``values`` in the map at ``path`` (the whole map in one ``add`` when
        there is none)."""
        if not values:
            return
        current = self.get(path)
        if current is None:
            self.put(path, dict(values))
            return
        if not isinstance(current, dict):
            raise HookError(f"pod {dotted(path)} is a {type_name(current)}, not a map")
        for key, value in values.items():
            self.put([*path, key], value)

    def append_unless(self, path: Path, item: Any, matches: Callable[[Any], bool]) -> bool:
        """Append ``item`` to the list at ``path`` (created when missing) unless an item there
        ``matches``; whether it appended."""
        current = self._list(path)
        if current is None:
            self.put(path, [item])
            return True
        for existing in current:
            if matches(existing):
                return False
        self._record("add", pointer(path) + "/-", item)
        self._writable(path).append(self._own(json_copy(item)))
        return True

    def set_amount(self, container: int, resource: str, amount: str) -> None:
        """``resources.limits[resource] = amount`` in the container, and the request too when the
        container already has one for ``resource``."""
        resources: Path = ["spec", "containers", container, "resources"]
        self.put([*resources, "limits", resource], amount)
        if self.get([*resources, "requests", resource]) is not None:
            self.put([*resources, "requests", resource], amount)

    def add_volume(self, container: int, volume: dict[str, Any], mount_path: str) -> None:
        """Append ``volume`` to ``spec.volumes`` unless a volume of its name exists, then its
        mount at ``mount_path`` to the container unless a mount at that path exists."""
        name = str_field(volume, "name")
        if name is None:
            raise HookError("add_volume: the volume has no name")
        self.append_unless(["spec", "volumes"], volume, lambda v: str_field(v, "name") == name)
        self.append_unless(
            ["spec", "containers", container, "volumeMounts"],
            {"name": name, "mountPath": mount_path},
            lambda m: str_field(m, "mountPath") == mount_path,
        )

    def add_shared_memory(self, container: int, size: str | None) -> None:
        """The memory ``emptyDir`` ``dshm`` (``sizeLimit`` when ``size`` is given) mounted at
        ``/dev/shm``, through ``add_volume``."""
        empty_dir: dict[str, Any] = {"medium": "Memory"}
        if size is not None:
            empty_dir["sizeLimit"] = size
        self.add_volume(container, {"name": SHM_VOLUME, "emptyDir": empty_dir}, SHM_PATH)

    def add_env(self, container: int, var: dict[str, Any]) -> None:
        """Append ``var`` to the container's ``env`` unless a var of its name is there (what the
        user wrote wins)."""
        name = str_field(var, "name")
        if name is None:
            raise HookError("add_env: the env var has no name")
        self.append_unless(
            ["spec", "containers", container, "env"],
            var,
            lambda e: str_field(e, "name") == name,
        )

    def add_config_map_files(
        self,
        container: int,
        volume: str,
        config_map: str,
        files: Sequence[tuple[str, str]],
        mount_path: str,
    ) -> None:
        """``add_volume`` of the optional ConfigMap ``config_map`` as the volume ``volume``,
        each (key, file) of ``files`` shown as that file under ``mount_path``."""
        items = [{"key": key, "path": path} for key, path in files]
        source = {"name": config_map, "optional": True, "items": items}
        self.add_volume(container, {"name": volume, "configMap": source}, mount_path)

    def _list(self, path: Path) -> list[Any] | None:
        current = self.get(path)
        if current is None:
            return None
        if not isinstance(current, list):
            raise HookError(f"pod {dotted(path)} is a {type_name(current)}, not an array")
        return current

    def _child(self, node: Any, path: Path, depth: int) -> Any:
        """The member ``path[depth]`` of ``node`` (None when missing or null), checked to be a
        container ``path[depth + 1]`` can index."""
        key = path[depth]
        if isinstance(key, int):
            if not isinstance(node, list) or key >= len(node):
                raise HookError(f"pod {dotted(path[:depth])} has no item {key}")
            child = node[key]
        else:
            child = node.get(key)
        if child is None:
            return None
        wanted, noun = (list, "an array") if isinstance(path[depth + 1], int) else (dict, "a map")
        if not isinstance(child, wanted):
            raise HookError(f"pod {dotted(path[: depth + 1])} is a {type_name(child)}, not {noun}")
        return child

    def _set(self, path: Path, value: Any) -> None:
        """``add`` ``value`` at ``path``, whose parent exists and is a map."""
        key = path[-1]
        if isinstance(key, int):
            raise HookError(f"pod {dotted(path)}: put cannot set a list item")
        self._record("add", pointer(path), value)
        self._writable(path[:-1])[key] = self._own(json_copy(value))

    def _writable(self, path: Path) -> Any:
        """The existing map or list at ``path``, made this edit's own on the way down (each map
        or list there copied shallowly the first time)."""
        node: Any = self.pod
        for key in path:
            child = node[key]
            if id(child) not in self._owned:
                child = self._own(dict(child) if isinstance(child, dict) else list(child))
                node[key] = child
            node = child
        return node

    def _own(self, value: Any) -> Any:
        if isinstance(value, dict | list):
            self._owned[id(value)] = value
        return value

    def _record(self, op: str, path: str, value: Any) -> None:
        # The operation holds ``value`` itself (as PodPatch does; the chain copies what a plugin
        # returns); the working copy always gets its own copy, since later edits change it.
        self.ops.append({"op": op, "path": path, "value": value})  # type: ignore[typeddict-item]
