"""The defaults Kthena's CRD declares inside a role's Pod templates, and how to apply them.

Kthena's ModelServing CRD carries the full core/v1 PodSpec schema, and with it the defaults
Kubernetes declares on its types (a container port's ``protocol: TCP``, a gRPC probe's
``service: ""``, an RBD volume's ``pool: rbd``, ...). The API server fills them in before any
controller reads the object, and Kthena's revision hashes cover them, so a manifest that spells
one out has the same revision as one that leaves it out. Our CRD keeps the PodSpec open
(unknown fields preserved) but declares these same defaults on a skeleton of the paths that
lead to them (``pod_spec_schema``, read by the CRD generator through ``modelserving.api.
modelserving``), so the API server stores what Kthena's would; the API models apply them too
(``apply_pod_spec_defaults``), for objects that never went through an API server
(``modelserving render``) and for older stored objects.

The tree below lists every default under ``entryTemplate.spec``/``workerTemplate.spec`` in
Kthena's CRD at commit 3cc0572 (k8s.io/api v0.34): a dict is an object's properties, a
one-item list an array's items, ``EMPTIED`` an object whose fields the API server prunes, and
anything else a leaf's default. The one emptied object is an ephemeral volume's claim template
``metadata``: Kthena's schema declares it as a bare object, so its labels and annotations are
dropped on the way into storage, and its revisions never see them.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any


class _Emptied:
    """Marks an object the CRD declares without fields: stored as ``{}``."""


EMPTIED = _Emptied()
_NAME = {"name": ""}
_PROBE = {"grpc": {"service": ""}}
_CONTAINER: dict[str, Any] = {
    "env": [
        {
            "valueFrom": {
                "configMapKeyRef": _NAME,
                "fileKeyRef": {"optional": False},
                "secretKeyRef": _NAME,
            }
        }
    ],
    "envFrom": [{"configMapRef": _NAME, "secretRef": _NAME}],
    "ports": [{"protocol": "TCP"}],
    "livenessProbe": _PROBE,
    "readinessProbe": _PROBE,
    "startupProbe": _PROBE,
}
_SECRET_REF = {"secretRef": _NAME}

POD_SPEC_DEFAULTS: dict[str, Any] = {
    "containers": [_CONTAINER],
    "initContainers": [_CONTAINER],
    "ephemeralContainers": [_CONTAINER],
    "imagePullSecrets": [_NAME],
    "volumes": [
        {
            "ephemeral": {"volumeClaimTemplate": {"metadata": EMPTIED}},
            "azureDisk": {"fsType": "ext4", "readOnly": False},
            "cephfs": _SECRET_REF,
            "cinder": _SECRET_REF,
            "configMap": _NAME,
            "csi": {"nodePublishSecretRef": _NAME},
            "flexVolume": _SECRET_REF,
            "iscsi": {"iscsiInterface": "default", **_SECRET_REF},
            "projected": {"sources": [{"configMap": _NAME, "secret": _NAME}]},
            "rbd": {"keyring": "/etc/ceph/keyring", "pool": "rbd", "user": "admin", **_SECRET_REF},
            "scaleIO": {"fsType": "xfs", "storageMode": "ThinProvisioned", **_SECRET_REF},
            "storageos": _SECRET_REF,
        }
    ],
}


def _is_node(tree: object) -> bool:
    return isinstance(tree, dict) or (isinstance(tree, list) and len(tree) == 1)


def _apply(value: Any, tree: Any) -> Any:
    """Structural defaulting (the API server's algorithm) along ``tree``: a missing or null
    property gets its default; objects and arrays present are walked. Returns a new value
    where something changed and shares what did not."""
    if isinstance(tree, dict) and isinstance(value, Mapping):
        out: dict[str, Any] | None = None
        for key, sub in tree.items():
            current = value.get(key)
            if sub is EMPTIED:
                if not isinstance(current, Mapping) or not current:
                    continue
                new = {}
            elif _is_node(sub):
                if current is None:
                    continue
                new = _apply(current, sub)
            elif current is None:
                new = sub
            else:
                continue
            if new is not current:
                if out is None:
                    out = dict(value)
                out[key] = new
        return value if out is None else out
    if isinstance(tree, list) and isinstance(value, list):
        items = [_apply(item, tree[0]) for item in value]
        return value if all(a is b for a, b in zip(items, value, strict=True)) else items
    return value


def apply_pod_spec_defaults(spec: Mapping[str, Any]) -> Any:
    """A PodSpec (JSON) with Kthena's CRD defaults filled in, as the API server stores it."""
    return _apply(spec, POD_SPEC_DEFAULTS)


def _schema(tree: Any) -> dict[str, Any]:
    if tree is EMPTIED:
        return {"type": "object"}
    if isinstance(tree, dict):
        return {
            "type": "object",
            "x-kubernetes-preserve-unknown-fields": True,
            "properties": {key: _schema(sub) for key, sub in tree.items()},
        }
    if isinstance(tree, list):
        return {"type": "array", "items": _schema(tree[0])}
    kind = "boolean" if isinstance(tree, bool) else "string"
    return {"type": kind, "default": tree}


def pod_spec_schema() -> dict[str, Any]:
    """The PodSpec's CRD schema: open (unknown fields kept), with the paths to the defaults."""
    return _schema(POD_SPEC_DEFAULTS)
