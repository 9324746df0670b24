"""The request file of ``modelserving plugin run`` and ``bench``: read, checked, defaults filled in.

``read_request`` reads the YAML or JSON request fields (plugin name and config, modelServing,
the Pod and its place; for a ServingGroup hook the ServingGroup and its Pods) with the safe
manifest reader; what is missing comes from the Pod's labels (as the controller sets them) or a
minimal ModelServing. ``Request.hook_request`` is the ``HookRequest`` (or ``GroupRequest``) the
chain's step is given. Bad input is a ``UsageError``; a value no request can
carry (an integer beyond 64 bits) an ``Unencodable``.
"""

from __future__ import annotations

import sys
from dataclasses import dataclass
from typing import Any

from modelserving.api.errors import InvalidManifest
from modelserving.api.group import GroupPod, GroupRequest
from modelserving.api.hook import SPEC, Hook, HookRequest
from modelserving.api.jsondata import find_wide_int, wide_int_reason
from modelserving.api.labels import (
    API_VERSION,
    ENTRY_LABEL,
    GROUP_NAME_LABEL,
    KIND,
    ROLE_ID_LABEL,
    ROLE_LABEL,
)
from modelserving.api.modelserving import ModelServing
from modelserving.api.place import PodPlace
from modelserving.api.validation import format_loc, parse_model_serving
from modelserving.cli.manifests import ManifestError, read_documents

REQUEST_KEYS = ("plugin", "modelServing", "servingGroup", "roleName", "roleId", "isEntry", "pod")
GROUP_REQUEST_KEYS = ("plugin", "modelServing", "servingGroup", "expectedPods", "pods")
"""The fields of a ServingGroup hook's request file (the others take REQUEST_KEYS)."""
GROUP_POD_TYPES: dict[str, type] = {
    "name": str,
    "roleName": str,
    "roleId": str,
    "isEntry": bool,
    "node": str,
    "hostIP": str,
    "podIP": str,
    "phase": str,
    "ready": bool,
    "annotations": dict,
}
"""The keys of an entry of ``pods`` (ServingGroup hooks) and their types."""
IGNORED_KEYS = ("abiVersion", "hook")  # set by the host and --hook; tolerated in the file
PLUGIN_KEYS = ("name", "config")
MINIMAL_NAME = "plugin-test"
MINIMAL_ROLE = "server"


class UsageError(Exception):
    """Bad arguments or input files: printed as ``error: ...``, exit 2."""


class Unencodable(Exception):
    """A request value ABI v1 cannot carry (an integer beyond 64 bits), as the controller
    refuses such a config: ``error: <file>: <field>: ...``, exit 1."""


@dataclass
class Request:
    """The request fields of a file, defaults filled in."""

    name: str
    config: Any
    model_serving: dict[str, Any] | None  # as written (None: not given)
    where: PodPlace | None
    pod: dict[str, Any] | None
    group: tuple[str, int, tuple[GroupPod, ...]] | None = None
    """A ServingGroup hook's: the ServingGroup, expectedPods and the Pods."""

    @property
    def pod_name(self) -> str | None:
        if self.pod is None:
            return None
        meta = self.pod.get("metadata")
        name = meta.get("name") if isinstance(meta, dict) else None
        return name if isinstance(name, str) and name else None

    def hook_request(self, hook: Hook, ms: ModelServing) -> HookRequest | GroupRequest:
        """The request the chain's step is given (ValidateConfig: the plugin alone, no Pod)."""
        if self.group is not None and SPEC[hook].per_group:
            return GroupRequest(ms, *self.group, hook=hook)
        where, pod = self.where, self.pod
        if where is None or pod is None:
            return HookRequest(hook, ms, PodPlace("", "", "", False), {})
        return HookRequest(hook, ms, where, pod)

    def model_serving_api(self) -> dict[str, Any]:
        """modelServing as sent to a WebAssembly module: as written, else the minimal one."""
        if self.model_serving is not None:
            return self.model_serving
        return minimal_model_serving(self._namespace()).to_api()

    def parsed_model_serving(self, note: bool = True) -> ModelServing:
        """modelServing parsed (for HookRequest); the minimal one when absent or invalid (with
        a note on stderr, unless ``note`` is False)."""
        if self.model_serving is not None:
            try:
                return parse_model_serving(self.model_serving)
            except InvalidManifest as exc:
                if not note:
                    return minimal_model_serving(self._namespace())
                first = str(exc).splitlines()
                detail = "; ".join(line.strip(" -") for line in first[1:4]) or first[0]
                print(
                    f"note: the request's modelServing does not parse ({detail}); "
                    "using a minimal ModelServing instead",
                    file=sys.stderr,
                )
        return minimal_model_serving(self._namespace())

    def _namespace(self) -> str:
        meta = (self.pod or {}).get("metadata")
        namespace = meta.get("namespace") if isinstance(meta, dict) else None
        return namespace if isinstance(namespace, str) and namespace else "default"


def minimal_model_serving(namespace: str = "default") -> ModelServing:
    """A minimal valid ModelServing: ``plugin-test`` with one role ``server`` of one entry Pod.

    Used when the request file gives no modelServing (or, for bench, one that does not parse).
    """
    manifest = {
        "apiVersion": API_VERSION,
        "kind": KIND,
        "metadata": {"name": MINIMAL_NAME, "namespace": namespace},
        "spec": {
            "replicas": 1,
            "template": {
                "roles": [
                    {
                        "name": MINIMAL_ROLE,
                        "replicas": 1,
                        "entryTemplate": {
                            "spec": {"containers": [{"name": "main", "image": "busybox"}]}
                        },
                        "workerReplicas": 0,
                    }
                ]
            },
        },
    }
    try:
        return parse_model_serving(manifest)
    except InvalidManifest:
        if namespace == "default":
            raise
        return minimal_model_serving("default")


def read_map(path: str, what: str) -> dict[str, Any]:
    """The one map of a YAML or JSON file, read with the safe manifest reader."""
    try:
        docs = list(read_documents(path))
    except ManifestError as exc:
        raise UsageError(str(exc)) from None
    if len(docs) != 1:
        raise UsageError(f"{path}: the {what} file must hold exactly one map, found {len(docs)}")
    return docs[0]


def read_request(
    path: str, hook: Hook, default_name: str, name: str | None, config_path: str | None
) -> Request:
    doc = read_map(path, "request")
    known = GROUP_REQUEST_KEYS if SPEC[hook].per_group else REQUEST_KEYS
    unknown = sorted(set(doc) - set(known) - set(IGNORED_KEYS))
    if unknown:
        raise UsageError(
            f"{path}: unknown request field(s) {', '.join(unknown)} (known: {', '.join(known)})"
        )
    plugin = doc.get("plugin")
    if plugin is None:
        plugin = {}
    if not isinstance(plugin, dict):
        raise UsageError(f"{path}: plugin must be a map with name and config")
    extra = sorted(set(plugin) - set(PLUGIN_KEYS))
    if extra:
        raise UsageError(
            f"{path}: unknown field(s) of plugin: {', '.join(extra)} (known: name, config)"
        )
    given_name = plugin.get("name")
    if given_name is not None and (not isinstance(given_name, str) or not given_name):
        raise UsageError(f"{path}: plugin.name must be a non-empty string")
    config = read_map(config_path, "config") if config_path else plugin.get("config")
    _refuse_wide_ints(config_path or path, "config" if config_path else "plugin.config", config)
    request = Request(
        name=name or given_name or default_name,
        config=config,
        model_serving=None,
        where=None,
        pod=None,
    )
    if SPEC[hook].target == "plugin":  # ValidateConfig: the plugin alone
        return request
    if SPEC[hook].per_group:
        return _group_request(path, hook, doc, request)
    pod = doc.get("pod")
    if pod is None:
        raise UsageError(f"{path}: pod is missing: {hook} needs the Pod")
    if not isinstance(pod, dict):
        raise UsageError(f"{path}: pod must be a map (a Pod object)")
    ms = doc.get("modelServing")
    if ms is not None and not isinstance(ms, dict):
        raise UsageError(f"{path}: modelServing must be a map (a ModelServing object)")
    _refuse_wide_ints(path, "pod", pod)
    _refuse_wide_ints(path, "modelServing", ms)
    request.pod = pod
    request.model_serving = ms
    request.where = _where(path, doc, pod, ms)
    return request


def _group_request(path: str, hook: Hook, doc: dict[str, Any], request: Request) -> Request:
    """modelServing, servingGroup, expectedPods and pods of a ServingGroup hook's request;
    servingGroup defaults to the ModelServing's first, expectedPods to the number of Pods."""
    ms = doc.get("modelServing")
    if ms is not None and not isinstance(ms, dict):
        raise UsageError(f"{path}: modelServing must be a map (a ModelServing object)")
    _refuse_wide_ints(path, "modelServing", ms)
    raw = doc.get("pods")
    if not isinstance(raw, list):
        raise UsageError(f"{path}: pods is missing or not a list: {hook} needs them")
    ms_meta = (ms or {}).get("metadata")
    ms_name = ms_meta.get("name") if isinstance(ms_meta, dict) else None
    group = doc.get("servingGroup") or f"{ms_name or MINIMAL_NAME}-0"
    if not isinstance(group, str):
        raise UsageError(f"{path}: servingGroup must be a string")
    pods = tuple(_group_pod(path, i, group, item) for i, item in enumerate(raw))
    expected = doc.get("expectedPods", len(pods))
    if isinstance(expected, bool) or not isinstance(expected, int) or expected < 0:
        raise UsageError(f"{path}: expectedPods must be a whole number of Pods")
    request.model_serving = ms
    request.group = (group, expected, pods)
    return request


def _group_pod(path: str, i: int, group: str, item: Any) -> GroupPod:
    where = f"{path}: pods[{i}]"
    if not isinstance(item, dict):
        raise UsageError(f"{where} must be a map")
    unknown = sorted(set(item) - set(GROUP_POD_TYPES))
    if unknown:
        raise UsageError(
            f"{where}: unknown field(s) {', '.join(unknown)} (known: {', '.join(GROUP_POD_TYPES)})"
        )
    for key, kind in GROUP_POD_TYPES.items():
        if key in item and not isinstance(item[key], kind):
            raise UsageError(f"{where}.{key} must be a {kind.__name__}")
    if not item.get("name"):
        raise UsageError(f"{where} needs a name")
    annotations = item.get("annotations") or {}
    if not all(isinstance(v, str) for v in annotations.values()):
        raise UsageError(f"{where}.annotations: every value must be a string")
    role = item.get("roleName", MINIMAL_ROLE)
    place = PodPlace(group, role, item.get("roleId", f"{role}-0"), item.get("isEntry", True))
    return GroupPod(
        item["name"],
        place,
        item.get("node", ""),
        item.get("hostIP", ""),
        item.get("podIP", ""),
        item.get("phase", ""),
        item.get("ready", False),
        annotations,
    )


def _refuse_wide_ints(path: str, field: str, value: Any) -> None:
    """Unencodable naming the file and the field of the first integer beyond 64 bits."""
    found = find_wide_int(value)
    if found is not None:
        where, number = found
        raise Unencodable(f"{path}: {format_loc((field, *where))}: {wide_int_reason(number)}")


def _where(
    path: str, doc: dict[str, Any], pod: dict[str, Any], ms: dict[str, Any] | None
) -> PodPlace:
    """servingGroup, roleName, roleId and isEntry: as given, else from the Pod's labels (as the
    controller sets them), else from the ModelServing's name and first role."""
    for key in ("servingGroup", "roleName", "roleId"):
        if key in doc and not isinstance(doc[key], str):
            raise UsageError(f"{path}: {key} must be a string")
    if "isEntry" in doc and not isinstance(doc["isEntry"], bool):
        raise UsageError(f"{path}: isEntry must be true or false")
    meta = pod.get("metadata")
    raw_labels = meta.get("labels") if isinstance(meta, dict) else None
    labels = (
        {k: v for k, v in raw_labels.items() if isinstance(v, str)}
        if isinstance(raw_labels, dict)
        else {}
    )
    ms_meta = (ms or {}).get("metadata")
    ms_name = ms_meta.get("name") if isinstance(ms_meta, dict) else None
    ms_name = ms_name if isinstance(ms_name, str) and ms_name else MINIMAL_NAME
    role = doc.get("roleName") or labels.get(ROLE_LABEL) or _first_role(ms) or MINIMAL_ROLE
    group = doc.get("servingGroup") or labels.get(GROUP_NAME_LABEL) or f"{ms_name}-0"
    role_id = doc.get("roleId") or labels.get(ROLE_ID_LABEL) or f"{role}-0"
    if "isEntry" in doc:
        entry = bool(doc["isEntry"])
    elif GROUP_NAME_LABEL in labels:
        entry = labels.get(ENTRY_LABEL) == "true"
    else:
        entry = True
    return PodPlace(group, role, role_id, entry)


def _first_role(ms: dict[str, Any] | None) -> str | None:
    try:
        name = (ms or {})["spec"]["template"]["roles"][0]["name"]
    except (KeyError, IndexError, TypeError):
        return None
    return name if isinstance(name, str) and name else None
