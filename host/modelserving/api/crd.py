"""Generates the ModelServing CustomResourceDefinition from the pydantic models.

pydantic's JSON Schema is turned into a Kubernetes structural OpenAPI v3 schema: references
inlined, optionals unwrapped, Literals as enums, int-or-string and preserve-unknown-fields
markers honoured, defaults kept. Called by ``modelserving crd`` (``make crds`` / ``crds-check``).
"""

from __future__ import annotations

from typing import Any

from modelserving.api import labels
from modelserving.api.modelserving import ModelServingSpec, ModelServingStatus

_KEEP = {
    "type",
    "format",
    "description",
    "enum",
    "default",
    "minimum",
    "maximum",
    "minLength",
    "maxLength",
    "minItems",
    "maxItems",
    "pattern",
    "x-kubernetes-int-or-string",
    "x-kubernetes-preserve-unknown-fields",
    "x-kubernetes-validations",
}


def _resolve(node: dict[str, Any], defs: dict[str, Any]) -> dict[str, Any]:
    if "$ref" in node:
        target = defs[node["$ref"].rsplit("/", 1)[-1]]
        merged = {**target, **{k: v for k, v in node.items() if k != "$ref"}}
        return _resolve(merged, defs)
    return node


def _convert(node: dict[str, Any], defs: dict[str, Any]) -> dict[str, Any]:
    node = _resolve(node, defs)
    out: dict[str, Any]
    if node.get("x-kubernetes-int-or-string"):
        out = {"x-kubernetes-int-or-string": True}
        if "default" in node and node["default"] is not None:
            out["default"] = node["default"]
        if "description" in node:
            out["description"] = node["description"]
        return out
    if "anyOf" in node:
        options = [o for o in node["anyOf"] if o.get("type") != "null"]
        if len(options) != 1:
            raise ValueError(f"cannot express {node} in a structural schema")
        rest = {k: v for k, v in node.items() if k != "anyOf"}
        return _convert({**_resolve(options[0], defs), **rest}, defs)
    out = {}
    if "const" in node:
        out["type"] = "string"
        out["enum"] = [node["const"]]
    for key, value in node.items():
        if key in _KEEP and not (key == "default" and value is None):
            out[key] = value.replace("``", "") if key == "description" else value
    if node.get("type") == "integer":
        maximum = node.get("maximum")
        out["format"] = "int32" if maximum is not None and maximum <= 2**31 - 1 else "int64"
        if maximum is not None and maximum > 2**53:
            # Beyond float64 precision the API server rounds it past int64 and refuses the CRD.
            del out["maximum"]
        minimum = node.get("minimum")
        if minimum is not None and minimum < -(2**53):
            del out["minimum"]
    if "enum" in node and "type" not in out:
        out["type"] = "string"
    if node.get("type") == "object" or "properties" in node:
        out["type"] = "object"
        props = node.get("properties") or {}
        if props:
            out["properties"] = {name: _convert(p, defs) for name, p in props.items()}
            required = sorted(set(node.get("required") or []))
            if required:
                out["required"] = required
        additional = node.get("additionalProperties")
        if isinstance(additional, dict) and not props:
            out["additionalProperties"] = _convert(additional, defs)
    if node.get("type") == "array":
        out["items"] = _convert(node.get("items") or {}, defs)
    if not out.get("type") and not out.get("x-kubernetes-preserve-unknown-fields"):
        out["x-kubernetes-preserve-unknown-fields"] = True
    return out


def structural_schema(model: type[Any]) -> dict[str, Any]:
    """A pydantic model's schema in the form the API server accepts for a CRD."""
    schema = model.model_json_schema(by_alias=True, mode="validation")
    defs = schema.pop("$defs", {})
    return _convert(schema, defs)


def _condition_column(kind: str) -> str:
    return f'.status.conditions[?(@.type=="{kind}")].status'


def model_serving_crd() -> dict[str, Any]:
    """The full CustomResourceDefinition manifest for ModelServing."""
    spec_schema = structural_schema(ModelServingSpec)
    status_schema = structural_schema(ModelServingStatus)
    return {
        "apiVersion": "apiextensions.k8s.io/v1",
        "kind": "CustomResourceDefinition",
        "metadata": {"name": f"{labels.PLURAL}.{labels.GROUP}"},
        "spec": {
            "group": labels.GROUP,
            "names": {
                "kind": labels.KIND,
                "listKind": f"{labels.KIND}List",
                "plural": labels.PLURAL,
                "singular": labels.KIND.lower(),
                "shortNames": ["ms"],
            },
            "scope": "Namespaced",
            "versions": [
                {
                    "name": labels.VERSION,
                    "served": True,
                    "storage": True,
                    "subresources": {
                        "status": {},
                        "scale": {
                            "specReplicasPath": ".spec.replicas",
                            "statusReplicasPath": ".status.replicas",
                            "labelSelectorPath": ".status.labelSelector",
                        },
                    },
                    "additionalPrinterColumns": [
                        {
                            "name": "Replicas",
                            "type": "integer",
                            "jsonPath": ".status.replicas",
                            "description": "Total number of ServingGroups",
                        },
                        {
                            "name": "Available",
                            "type": "integer",
                            "jsonPath": ".status.availableReplicas",
                            "description": "ServingGroups that are ready",
                        },
                        {
                            "name": "Updated",
                            "type": "integer",
                            "jsonPath": ".status.updatedReplicas",
                            "description": "ServingGroups at the latest revision",
                        },
                        {
                            "name": "Plugins",
                            "type": "string",
                            "jsonPath": _condition_column("PluginsReady"),
                            "description": "Whether every plugin loaded and validated",
                        },
                        {
                            "name": "Age",
                            "type": "date",
                            "jsonPath": ".metadata.creationTimestamp",
                        },
                    ],
                    "schema": {
                        "openAPIV3Schema": {
                            "type": "object",
                            "description": "ModelServing runs a model as ServingGroups of roles, "
                            "each an entry Pod plus workers.",
                            "properties": {
                                "apiVersion": {"type": "string"},
                                "kind": {"type": "string"},
                                "metadata": {"type": "object"},
                                "spec": spec_schema,
                                "status": status_schema,
                            },
                            "required": ["spec"],
                        }
                    },
                }
            ],
        },
    }


def prune(value: Any, schema: dict[str, Any]) -> Any:
    """``value`` with the fields ``schema`` does not declare dropped, as the API server prunes
    an object on its way into storage (objects that preserve unknown fields keep theirs)."""
    if isinstance(value, dict) and schema.get("type") == "object":
        props = schema.get("properties") or {}
        additional = schema.get("additionalProperties")
        keep_unknown = bool(schema.get("x-kubernetes-preserve-unknown-fields"))
        out = {}
        for key, item in value.items():
            if key in props:
                out[key] = prune(item, props[key])
            elif isinstance(additional, dict):
                out[key] = prune(item, additional)
            elif keep_unknown:
                out[key] = item
        return out
    if isinstance(value, list) and isinstance(schema.get("items"), dict):
        return [prune(item, schema["items"]) for item in value]
    return value


def pruned_manifest(manifest: dict[str, Any]) -> dict[str, Any]:
    """A ModelServing manifest as our CRD stores it: unknown fields of ``spec`` and ``status``
    dropped (what Kthena's CRD does too with fields it does not know)."""
    out = dict(manifest)
    for key, model in (("spec", ModelServingSpec), ("status", ModelServingStatus)):
        if isinstance(out.get(key), dict):
            out[key] = prune(out[key], _schema_of(model))
    return out


_SCHEMAS: dict[type[Any], dict[str, Any]] = {}


def _schema_of(model: type[Any]) -> dict[str, Any]:
    if model not in _SCHEMAS:
        _SCHEMAS[model] = structural_schema(model)
    return _SCHEMAS[model]
