"""``lws-standard-labels``: LeaderWorkerSet's well-known labels on every ModelServing Pod.

Tools built for LeaderWorkerSet (LWS) find and place Pods by its labels. Mapped onto Kthena, an
LWS *group* is a ServingGroup (one model instance, gang-scheduled as a whole) and the *leader*
is an entry Pod. Merged into ``metadata.labels``, overwriting same keys, in this order:

  leaderworkerset.sigs.k8s.io/name          the owning LWS's name, else the ModelServing's
  leaderworkerset.sigs.k8s.io/group-index   the ServingGroup's ordinal (``<ms>-<index>``)
  leaderworkerset.sigs.k8s.io/worker-index  "0" for an entry Pod, else k of ``<group>-<roleId>-<k>``
  leaderworkerset.sigs.k8s.io/group-key     hex SHA-1 of ``<lws>-<index>`` with an owning LWS,
                                            else of ``<namespace>/<servingGroup>``

An owning LWS is the first ownerReference of the ModelServing of kind ``LeaderWorkerSet`` with a
name: then the name and key are Kthena's (``plugins/lws_labels_plugin.go`` at 3cc0572). Without
one Kthena adds no labels; this plugin keeps labelling with the ModelServing's own name (it is
only ever listed on purpose; Kthena lists it itself for the ModelServings it makes from an LWS).

Config: none (``null`` or ``{}``). A name that does not follow the controller's naming (see
``modelserving.workload.names``) is refused with a HookError, as is a ModelServing without an
owning LWS and without a namespace, or a name label value that is too long. The Rust twin in
``plugins-src/builtins/lws-standard-labels`` gives byte-identical responses.
"""

from __future__ import annotations

import hashlib
import re
from collections.abc import Sequence
from typing import Any

from modelserving.api.hook import HookRequest, PatchOperation
from modelserving.plugins.base import Builtin, EmptyConfig, HookError
from modelserving.plugins.patch import PodPatch

NAME = "lws-standard-labels"
PREFIX = "leaderworkerset.sigs.k8s.io/"
NAME_LABEL = PREFIX + "name"
GROUP_INDEX_LABEL = PREFIX + "group-index"
WORKER_INDEX_LABEL = PREFIX + "worker-index"
GROUP_KEY_LABEL = PREFIX + "group-key"
MAX_LABEL_VALUE = 63
_INDEX = re.compile(r"0|[1-9][0-9]*")  # an ordinal as Kthena writes it: ASCII, no leading zero


def ordinal(name: str, prefix: str) -> str | None:
    """The digits after ``prefix`` when ``name`` is ``<prefix><ordinal>``, else None."""
    if not name.startswith(prefix):
        return None
    digits = name[len(prefix) :]
    return digits if _INDEX.fullmatch(digits) else None


def group_key(namespace: str, serving_group: str) -> str:
    """LWS's group key: the lowercase hex SHA-1 of ``<namespace>/<leader>``."""
    return hashlib.sha1(f"{namespace}/{serving_group}".encode()).hexdigest()


def owned_group_key(lws: str, index: str) -> str:
    """Kthena's group key under an owning LWS: the hex SHA-1 of ``<lws>-<index>``."""
    return hashlib.sha1(f"{lws}-{index}".encode()).hexdigest()


def owning_lws(owner_references: Any) -> str | None:
    """The name of the first owner of kind ``LeaderWorkerSet`` that has a name."""
    if not isinstance(owner_references, list):
        return None
    for ref in owner_references:
        if isinstance(ref, dict) and ref.get("kind") == "LeaderWorkerSet":
            name = ref.get("name")
            if isinstance(name, str) and name:
                return name
    return None


def _pod_name(pod: dict[str, Any]) -> str | None:
    metadata = pod.get("metadata")
    name = metadata.get("name") if isinstance(metadata, dict) else None
    return name if isinstance(name, str) else None


def _model_serving(request: HookRequest) -> tuple[str, str, str | None]:
    """The ModelServing's name, its namespace ("" with an owning LWS, which needs none) and
    the owning LWS's name, checked."""
    metadata = request.model_serving.metadata
    name = metadata.name
    if not name:
        raise HookError("the ModelServing has no metadata.name")
    lws = owning_lws((metadata.model_extra or {}).get("ownerReferences"))
    namespace = metadata.namespace or ""
    if lws is None and not namespace:
        raise HookError(f"ModelServing '{name}' has no metadata.namespace")
    if lws is not None and len(lws) > MAX_LABEL_VALUE:
        raise HookError(
            f"LeaderWorkerSet name '{lws}' has {len(lws)} characters, more than the "
            f"{MAX_LABEL_VALUE} a label value may have"
        )
    if lws is None and len(name) > MAX_LABEL_VALUE:
        raise HookError(
            f"ModelServing name '{name}' has {len(name)} characters, more than the "
            f"{MAX_LABEL_VALUE} a label value may have"
        )
    return name, namespace, lws


def _group_index(ms_name: str, serving_group: str) -> str:
    index = ordinal(serving_group, f"{ms_name}-")
    if index is None:
        raise HookError(f"serving group '{serving_group}' is not named {ms_name}-<index>")
    return index


def _worker_index(request: HookRequest) -> str:
    if request.is_entry:
        return "0"
    pod_name = _pod_name(request.pod)
    if pod_name is None:
        raise HookError("worker Pod has no metadata.name")
    prefix = f"{request.serving_group}-{request.role_id}-"
    index = ordinal(pod_name, prefix)
    if index is None or index == "0":
        raise HookError(f"worker Pod '{pod_name}' is not named {prefix}<index> with an index >= 1")
    return index


def lws_labels(request: HookRequest) -> dict[str, str]:
    """The four labels for the Pod of ``request``; HookError when a name breaks the naming."""
    ms_name, namespace, lws = _model_serving(request)
    group = request.serving_group
    index = _group_index(ms_name, group)
    return {
        NAME_LABEL: lws or ms_name,
        GROUP_INDEX_LABEL: index,
        WORKER_INDEX_LABEL: _worker_index(request),
        GROUP_KEY_LABEL: owned_group_key(lws, index) if lws else group_key(namespace, group),
    }


class LwsStandardLabels:
    """The plugin instance for one PluginSpec entry (it has no settings)."""

    def __init__(self, name: str) -> None:
        self.name = name

    def on_pod_create(self, request: HookRequest) -> Sequence[PatchOperation]:
        return PodPatch(request.pod).merge_labels(lws_labels(request)).ops


def _make(name: str, config: Any) -> LwsStandardLabels:
    return LwsStandardLabels(name)


BUILTIN = Builtin(
    name=NAME,
    config_model=EmptyConfig,
    factory=_make,
    summary="Labels every Pod with LeaderWorkerSet's name, group-index, worker-index, group-key.",
    hooks=frozenset({"on_pod_create"}),
    wasm_module="lws-standard-labels.wasm",
    reads_pod_only=True,
)
