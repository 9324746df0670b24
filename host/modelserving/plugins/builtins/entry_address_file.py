"""``entry-address-file``: the address of its role replica's entry Pod, as files in every Pod.

Some inference engines read the entry (leader) address from a file rather than from the
``ENTRY_ADDRESS`` environment variable. The address is the entry Pod's DNS name, known when the
Pod is made, and its IP, known once it runs; so the ServingGroup hook writes them to a ConfigMap
and every Pod mounts its own role replica's keys:

* **OnServingGroupChange** writes the ConfigMap ``<servingGroup>-<configMapSuffix>`` with two
  keys per role replica that has a Pod in the plugin's scope: ``<roleId>``, the address as one
  line without a newline (the entry Pod's IP once it has one, else its DNS name), and
  ``<roleId>.json``, ``{"dns":"<name>","ip":"<ip or empty>"}`` (compact, keys in this order).
  The DNS name is ``<entry Pod>.<namespace>``, the value of ``ENTRY_ADDRESS``; the entry Pod
  is ``<servingGroup>-<roleId>-0``, so it is known from any Pod of the replica.
* **OnPodCreate** mounts that ConfigMap (an optional volume named ``configMapSuffix``: the Pod
  starts before it exists) at ``mountPath``, with the Pod's ``<roleId>`` key as the file
  ``address`` and ``<roleId>.json`` as ``address.json``.

An IP is taken only when it is 2 to 45 of ``0-9 a-f A-F . :``; another value counts as none.

Config (camelCase, unknown fields refused):
  mountPath        the folder of the files; default ``/etc/modelserving/entry``
  configMapSuffix  the ConfigMap is ``<servingGroup>-<suffix>``, the volume ``<suffix>``;
                   default ``entry-address``
  container        the container to mount it in, by name; default the first one
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from typing import Any

from modelserving.api.group import GroupRequest
from modelserving.api.hook import HookRequest, PatchOperation
from modelserving.plugins.base import Builtin
from modelserving.plugins.builtins.group_files import GroupFileConfig, GroupFilePlugin, is_ip
from modelserving.plugins.podedit import PodEdit

NAME = "entry-address-file"
ADDRESS_FILE = "address"
JSON_FILE = "address.json"


class EntryAddressFileConfig(GroupFileConfig):
    mount_path: str = "/etc/modelserving/entry"
    config_map_suffix: str = "entry-address"


def entry_addresses(request: GroupRequest) -> dict[str, str]:
    """The ConfigMap's data: two keys per role replica with a Pod in the request."""
    namespace = request.model_serving.namespace
    ips: dict[str, str] = {}
    replicas: list[str] = []
    for pod in request.pods:
        role_id = pod.place.role_id
        if role_id not in ips:
            replicas.append(role_id)
            ips[role_id] = ""
        if pod.place.is_entry and is_ip(pod.pod_ip):
            ips[role_id] = pod.pod_ip
    data: dict[str, str] = {}
    for role_id in replicas:
        dns = f"{request.serving_group}-{role_id}-0.{namespace}"
        ip = ips[role_id]
        data[role_id] = ip or dns
        data[role_id + ".json"] = json.dumps({"dns": dns, "ip": ip}, separators=(",", ":"))
    return data


class EntryAddressFile(GroupFilePlugin):
    """The plugin instance for one PluginSpec entry."""

    def on_pod_create(self, request: HookRequest) -> Sequence[PatchOperation]:
        edit = PodEdit(request.pod)
        role_id = request.role_id
        files = [(role_id, ADDRESS_FILE), (role_id + ".json", JSON_FILE)]
        self.mount(edit, request.serving_group, files)
        return edit.ops

    def on_serving_group_change(self, request: GroupRequest) -> list[dict[str, Any]]:
        return self.owned(request.serving_group, entry_addresses(request))


def _make(name: str, config: Any) -> EntryAddressFile:
    return EntryAddressFile(name, config)


BUILTIN = Builtin(
    name=NAME,
    config_model=EntryAddressFileConfig,
    factory=_make,
    summary="Writes each role replica's entry address (DNS name and IP) to a file in its Pods.",
    hooks=frozenset({"on_pod_create", "on_serving_group_change"}),
    wasm_module="entry-address-file.wasm",
    reads_pod_only=True,
)
