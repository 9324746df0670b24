"""``rdma-network``: what a Pod needs to use RDMA (InfiniBand / RoCE) for multi-node inference.

The RDMA device, locked memory, hugepages and a secondary network, on one container of every Pod
(entry and worker alike). Config (camelCase, unknown fields refused):

  resourceName  the device plugin's resource (a qualified name with a prefix), default
                ``rdma/rdma_shared_device_a`` (the NVIDIA Network Operator's example name)
  devices       how many of it, 1..64, default 1
  container     the container to configure, by name; default the first one
  ipcLock       add the ``IPC_LOCK`` capability (RDMA registers locked memory), default true
  hugepages     ``{pageSize: 2Mi | 1Gi, amount: <quantity>}``: the limit and a hugepages mount
  networks      Multus NetworkAttachmentDefinitions (``name`` or ``namespace/name``), unique

The changes, in this order: ``resources.limits[resourceName]`` (and ``requests`` when the
container already requests it); ``resources.limits["hugepages-<pageSize>"]`` (same rule), a
``hugepages`` emptyDir volume and its mount at ``/dev/hugepages`` (kept when there already is a
volume of that name or a mount at that path); ``IPC_LOCK`` appended to
``securityContext.capabilities.add`` unless listed (as ``IPC_LOCK`` or ``CAP_IPC_LOCK``); the
networks merged into the ``k8s.v1.cni.cncf.io/networks`` annotation in its comma form (a Pod
whose annotation is in Multus's JSON form is refused with a HookError). Every change goes through
``PodEdit``; the Rust twin in ``plugins-src/builtins/rdma-network`` gives byte-identical
responses.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any, Literal

from pydantic import Field, field_validator

from modelserving.api.hook import HookRequest, PatchOperation
from modelserving.api.names import (
    is_dns1123_label,
    is_dns1123_subdomain,
    is_qualified_name,
    is_quantity,
)
from modelserving.plugins.base import Builtin, HookError, PluginConfig
from modelserving.plugins.podedit import Path, PodEdit, type_name

NAME = "rdma-network"
DEFAULT_RESOURCE = "rdma/rdma_shared_device_a"
MAX_DEVICES = 64
IPC_LOCK = "IPC_LOCK"
NETWORKS_ANNOTATION = "k8s.v1.cni.cncf.io/networks"
HUGEPAGES_VOLUME = "hugepages"
HUGEPAGES_MOUNT = "/dev/hugepages"
BLANKS = " \t\n\r\x0b\x0c"
"""What is stripped around the entries of the networks annotation (ASCII whitespace)."""


def network_problem(item: str) -> str | None:
    """Why ``item`` cannot name a NetworkAttachmentDefinition (None when it can): it is ``name``
    or ``namespace/name``, the namespace a DNS-1123 label, the name a DNS-1123 subdomain."""
    name = item
    if "/" in item:
        namespace, _, name = item.partition("/")
        if not is_dns1123_label(namespace):
            return f"'{item}': the namespace '{namespace}' is not a DNS-1123 label"
    if not is_dns1123_subdomain(name):
        return f"'{item}': the name '{name}' is not a DNS-1123 subdomain"
    return None


class Hugepages(PluginConfig):
    """Hugepages for the container: the page size and how much memory in such pages."""

    page_size: Literal["2Mi", "1Gi"]
    amount: str

    @field_validator("amount")
    @classmethod
    def _amount(cls, amount: str) -> str:
        if not is_quantity(amount):
            raise ValueError(f"'{amount}' is not a resource quantity (e.g. 4Gi)")
        return amount


class RdmaNetworkConfig(PluginConfig):
    resource_name: str = DEFAULT_RESOURCE
    devices: int = Field(default=1, ge=1, le=MAX_DEVICES)
    container: str | None = None
    ipc_lock: bool = True
    hugepages: Hugepages | None = None
    networks: list[str] | None = Field(default=None, min_length=1)

    @field_validator("resource_name")
    @classmethod
    def _resource_name(cls, name: str) -> str:
        if "/" not in name or not is_qualified_name(name):
            raise ValueError(
                f"'{name}' is not a resource name with a prefix (e.g. rdma/rdma_shared_device_a)"
            )
        return name

    @field_validator("networks")
    @classmethod
    def _networks(cls, networks: list[str] | None) -> list[str] | None:
        for i, item in enumerate(networks or []):
            problem = network_problem(item)
            if problem is not None:
                raise ValueError(f"item {i}: {problem}")
            if item in (networks or [])[:i]:
                raise ValueError(f"item {i}: '{item}' is listed twice")
        return networks


def add_hugepages(edit: PodEdit, container: int, hugepages: Hugepages) -> None:
    """The hugepages limit, an emptyDir of that medium and its mount at ``/dev/hugepages``."""
    edit.set_amount(container, f"hugepages-{hugepages.page_size}", hugepages.amount)
    volume = {"name": HUGEPAGES_VOLUME, "emptyDir": {"medium": f"HugePages-{hugepages.page_size}"}}
    edit.add_volume(container, volume, HUGEPAGES_MOUNT)


def add_ipc_lock(edit: PodEdit, container: int) -> None:
    """``IPC_LOCK`` in the container's added capabilities, unless it is there (with or without
    ``CAP_``)."""
    path: Path = ["spec", "containers", container, "securityContext", "capabilities", "add"]
    edit.append_unless(path, IPC_LOCK, lambda cap: cap in (IPC_LOCK, "CAP_" + IPC_LOCK))


def merged_networks(current: str | None, networks: Sequence[str]) -> str | None:
    """The annotation's new value (None when it stays as it is): its entries, then the networks
    it lacks, joined by ",". HookError for an annotation in Multus's JSON form."""
    if current is not None and current.strip(BLANKS).startswith("["):
        raise HookError(
            f"the Pod's annotation {NETWORKS_ANNOTATION} is in Multus's JSON form, but this "
            "plugin adds networks in the comma form: list the networks in one form (all in the "
            "Pod's JSON list and none in the plugin's config, or all as names)"
        )
    entries = [e.strip(BLANKS) for e in (current or "").split(",")]
    entries = [e for e in entries if e]
    missing = [n for n in networks if n not in entries]
    return ",".join(entries + missing) if missing else None


def add_networks(edit: PodEdit, networks: Sequence[str]) -> None:
    """The networks merged into the ``k8s.v1.cni.cncf.io/networks`` annotation."""
    annotations: Path = ["metadata", "annotations"]
    current = edit.get([*annotations, NETWORKS_ANNOTATION])
    if current is not None and not isinstance(current, str):
        raise HookError(
            f"pod metadata.annotations.{NETWORKS_ANNOTATION} is a {type_name(current)}, not a str"
        )
    value = merged_networks(current, networks)
    if value is not None:
        edit.merge_map(annotations, {NETWORKS_ANNOTATION: value})


class RdmaNetwork:
    """The plugin instance for one PluginSpec entry."""

    def __init__(self, name: str, config: RdmaNetworkConfig) -> None:
        self.name = name
        self.config = config

    def on_pod_create(self, request: HookRequest) -> Sequence[PatchOperation]:
        config = self.config
        edit = PodEdit(request.pod)
        container = edit.container(config.container)
        edit.set_amount(container, config.resource_name, str(config.devices))
        if config.hugepages is not None:
            add_hugepages(edit, container, config.hugepages)
        if config.ipc_lock:
            add_ipc_lock(edit, container)
        if config.networks is not None:
            add_networks(edit, config.networks)
        return edit.ops


def _make(name: str, config: Any) -> RdmaNetwork:
    return RdmaNetwork(name, config)


BUILTIN = Builtin(
    name=NAME,
    config_model=RdmaNetworkConfig,
    factory=_make,
    summary="RDMA device, IPC_LOCK, hugepages and Multus networks for multi-node inference.",
    hooks=frozenset({"on_pod_create"}),
    wasm_module="rdma-network.wasm",
    reads_pod_only=True,
)
