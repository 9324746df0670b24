"""``hccl-ranktable``: each ServingGroup's HCCL rank table, written and mounted for Ascend NPUs.

Ascend's collective communication library (HCCL) starts from a *rank table*: a JSON file listing
every server of the job, its NPUs and their IPs. The Pods' IPs and devices are known only once
they are scheduled, so the table is written by the ServingGroup hook and mounted from a
ConfigMap the Pods see as a file, created before the table is complete:

* **OnPodCreate** mounts the ServingGroup's ConfigMap ``<servingGroup>-<configMapSuffix>``
  (an optional volume named ``configMapSuffix``: the Pod starts before it exists) so that the
  key ``fileName`` is the file ``<mountPath>/<fileName>`` in the container, and sets
  ``RANK_TABLE_FILE`` to that path unless the container sets it.
* **OnServingGroupChange** writes that ConfigMap: the rank table (format version 1.0) of the
  group's Pods in the plugin's scope, in the request's order (role, role replica, entry first).

The table, as compact JSON with its keys in this order::

    {"status":"completed","version":"1.0","server_count":"2","server_list":[
      {"server_id":"10.0.0.5","container_ip":"10.244.1.7","device":[
        {"device_id":"0","device_ip":"192.168.100.1","rank_id":"0"}, ...]}, ...]}

A Pod is *known* once it has a Pod IP and a valid device annotation (``deviceAnnotation``, by
default the one the Ascend device plugin writes): a JSON object whose ``devices`` is a non-empty
array of ``{"device_id": "<digits>", "device_ip": "<IP>"}`` objects (other keys ignored), with
an optional ``server_id`` (an IP). ``server_id`` is the annotation's, else the Pod's host IP,
else the Pod is not known. Devices are listed by ``device_id`` (numerically); ``rank_id`` counts
every listed device from 0 in the table's order. Only known Pods are listed; ``status`` is
``completed`` when every Pod the group should have in scope (``expectedPods``) is known, else
``initializing``; ``server_count`` is the number of Pods listed.

The annotation is read as strict JSON: NaN and infinities, a key twice in one object, more than
65,536 bytes and arrays or objects nested more than 32 deep make it invalid, as do a
``device_id`` that is not 1 to 4 digits, an IP that is not 2 to 45 of ``0-9 a-f A-F . :``, and
two devices with the same ``device_id``. The Rust twin (``plugins-src/builtins/hccl-ranktable``)
reads it by the same rules, so both write the same bytes.

Config (camelCase, unknown fields refused):
  mountPath         the folder the table appears in; default ``/user/serverid/devindex/config``
  fileName          the table's file name and ConfigMap key; default ``hccl.json``
  configMapSuffix   the ConfigMap is ``<servingGroup>-<suffix>``, the volume ``<suffix>``;
                    default ``ranktable``
  container         the container to mount it in, by name; default the first one
  deviceAnnotation  the Pod annotation with the NPUs; default
                    ``ascend.kubectl.kubernetes.io/ascend-910-configuration``
"""

from __future__ import annotations

import json
import re
from collections.abc import Sequence
from typing import Any

from pydantic import field_validator

from modelserving.api.group import GroupPod, GroupRequest
from modelserving.api.hook import HookRequest, PatchOperation
from modelserving.api.names import is_qualified_name
from modelserving.plugins.base import Builtin
from modelserving.plugins.builtins.group_files import (
    GroupFileConfig,
    GroupFilePlugin,
    file_name_problem,
    is_ip,
)
from modelserving.plugins.podedit import PodEdit

NAME = "hccl-ranktable"
DEFAULT_ANNOTATION = "ascend.kubectl.kubernetes.io/ascend-910-configuration"
RANK_TABLE_ENV = "RANK_TABLE_FILE"
MAX_ANNOTATION_BYTES = 65_536
MAX_NESTING = 32
"""Most arrays and objects nested in one another the annotation may have (the device plugin's
is 3 deep); Python's json has no bound of its own but the interpreter's recursion limit."""
TABLE_VERSION = "1.0"

_DEVICE_ID = re.compile(r"[0-9]{1,4}", re.ASCII)


class HcclRanktableConfig(GroupFileConfig):
    mount_path: str = "/user/serverid/devindex/config"
    file_name: str = "hccl.json"
    config_map_suffix: str = "ranktable"
    device_annotation: str = DEFAULT_ANNOTATION

    @field_validator("file_name")
    @classmethod
    def _file_name(cls, name: str) -> str:
        problem = file_name_problem(name)
        if problem is not None:
            raise ValueError(problem)
        return name

    @field_validator("device_annotation")
    @classmethod
    def _annotation(cls, key: str) -> str:
        if not is_qualified_name(key):
            raise ValueError(f"'{key}' is not an annotation key")
        return key


def _no_constants(name: str) -> Any:
    raise ValueError(f"{name} is not JSON")


def _unique_keys(pairs: list[tuple[str, Any]]) -> dict[str, Any]:
    out: dict[str, Any] = {}
    for key, value in pairs:
        if key in out:
            raise ValueError(f"key '{key}' twice")
        out[key] = value
    return out


def nesting(text: str) -> int:
    """The deepest nesting of arrays and objects in ``text``, read as JSON (brackets inside
    strings do not count; what follows an unterminated string is inside it)."""
    deepest = depth = 0
    in_string = escaped = False
    for char in text:
        if in_string:
            if escaped:
                escaped = False
            elif char == "\\":
                escaped = True
            elif char == '"':
                in_string = False
        elif char == '"':
            in_string = True
        elif char in "[{":
            depth += 1
            deepest = max(deepest, depth)
        elif char in "]}":
            depth -= 1
    return deepest


def parse_devices(text: str) -> tuple[str | None, list[tuple[str, str]]] | None:
    """The annotation's (server_id or None, [(device_id, device_ip)] ordered by device id);
    None when it is not a valid device annotation (the module docstring's rules)."""
    if len(text.encode("utf-8")) > MAX_ANNOTATION_BYTES or nesting(text) > MAX_NESTING:
        return None
    try:
        value = json.loads(text, parse_constant=_no_constants, object_pairs_hook=_unique_keys)
    except (ValueError, RecursionError):
        return None
    if not isinstance(value, dict):
        return None
    server = value.get("server_id")
    if server is not None and not (isinstance(server, str) and is_ip(server)):
        return None
    devices = value.get("devices")
    if not isinstance(devices, list) or not devices:
        return None
    found: dict[int, tuple[str, str]] = {}
    for device in devices:
        if not isinstance(device, dict):
            return None
        device_id, device_ip = device.get("device_id"), device.get("device_ip")
        if not (isinstance(device_id, str) and _DEVICE_ID.fullmatch(device_id)):
            return None
        if not (isinstance(device_ip, str) and is_ip(device_ip)):
            return None
        if int(device_id) in found:
            return None
        found[int(device_id)] = (device_id, device_ip)
    return server, [found[k] for k in sorted(found)]


def _server(pod: GroupPod, annotation: str) -> tuple[str, list[tuple[str, str]]] | None:
    """(server_id, devices) of a known Pod; None while it is not known."""
    if not is_ip(pod.pod_ip):
        return None
    parsed = parse_devices((pod.annotations or {}).get(annotation, ""))
    if parsed is None:
        return None
    server, devices = parsed
    if server is None:
        if not is_ip(pod.host_ip):
            return None
        server = pod.host_ip
    return server, devices


def rank_table(request: GroupRequest, annotation: str = DEFAULT_ANNOTATION) -> str:
    """The rank table of the request's Pods, as the compact JSON the module docstring shows."""
    servers: list[dict[str, Any]] = []
    rank = 0
    for pod in request.pods:
        known = _server(pod, annotation)
        if known is None:
            continue
        server_id, devices = known
        listed = []
        for device_id, device_ip in devices:
            listed.append({"device_id": device_id, "device_ip": device_ip, "rank_id": str(rank)})
            rank += 1
        servers.append({"server_id": server_id, "container_ip": pod.pod_ip, "device": listed})
    complete = len(servers) == request.expected_pods and len(request.pods) == request.expected_pods
    table = {
        "status": "completed" if complete else "initializing",
        "version": TABLE_VERSION,
        "server_count": str(len(servers)),
        "server_list": servers,
    }
    return json.dumps(table, separators=(",", ":"))


class HcclRanktable(GroupFilePlugin):
    """The plugin instance for one PluginSpec entry."""

    config: HcclRanktableConfig

    def on_pod_create(self, request: HookRequest) -> Sequence[PatchOperation]:
        config = self.config
        edit = PodEdit(request.pod)
        files = [(config.file_name, config.file_name)]
        container = self.mount(edit, request.serving_group, files)
        path = config.mount_path.rstrip("/") + "/" + config.file_name
        edit.add_env(container, {"name": RANK_TABLE_ENV, "value": path})
        return edit.ops

    def on_serving_group_change(self, request: GroupRequest) -> list[dict[str, Any]]:
        table = rank_table(request, self.config.device_annotation)
        return self.owned(request.serving_group, {self.config.file_name: table})


def _make(name: str, config: Any) -> HcclRanktable:
    return HcclRanktable(name, config)


BUILTIN = Builtin(
    name=NAME,
    config_model=HcclRanktableConfig,
    factory=_make,
    summary="Writes each ServingGroup's HCCL rank table (Ascend NPUs) and mounts it in its Pods.",
    hooks=frozenset({"on_pod_create", "on_serving_group_change"}),
    wasm_module="hccl-ranktable.wasm",
    reads_pod_only=True,
)
