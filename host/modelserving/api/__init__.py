"""The API of modelserving: CRD models, hook request and patches, patch policy, errors.

Imports only pydantic and the standard library; every other layer builds on it.

The names below are loaded from their modules when first used (PEP 562), so that importing a
light module of this package (``api.errors``, ``api.names``, the hook table of ``api.hook``) does
not build the pydantic models: ``modelserving --version`` and ``--help`` stay fast.
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from modelserving.api.errors import (
        FailureClass,
        FieldError,
        InvalidManifest,
        ModelServingError,
        PatchRejected,
        PluginConfigError,
        PluginFailure,
    )
    from modelserving.api.hook import Hook, HookRequest, PatchOperation
    from modelserving.api.modelserving import (
        ModelServing,
        ModelServingSpec,
        ModelServingStatus,
        PluginSpec,
        PodTemplateSpec,
        Role,
    )
    from modelserving.api.place import PodPlace
    from modelserving.api.policy import PatchPolicy, PathRule
    from modelserving.api.validation import parse_model_serving

__all__ = [
    "FailureClass",
    "FieldError",
    "Hook",
    "HookRequest",
    "InvalidManifest",
    "ModelServing",
    "ModelServingError",
    "ModelServingSpec",
    "ModelServingStatus",
    "PatchOperation",
    "PatchPolicy",
    "PatchRejected",
    "PathRule",
    "PluginConfigError",
    "PluginFailure",
    "PluginSpec",
    "PodPlace",
    "PodTemplateSpec",
    "Role",
    "parse_model_serving",
]

_HOMES: dict[str, str] = {
    **dict.fromkeys(
        [
            "FailureClass",
            "FieldError",
            "InvalidManifest",
            "ModelServingError",
            "PatchRejected",
            "PluginConfigError",
            "PluginFailure",
        ],
        "errors",
    ),
    **dict.fromkeys(["Hook", "HookRequest", "PatchOperation"], "hook"),
    **dict.fromkeys(
        [
            "ModelServing",
            "ModelServingSpec",
            "ModelServingStatus",
            "PluginSpec",
            "PodTemplateSpec",
            "Role",
        ],
        "modelserving",
    ),
    "PodPlace": "place",
    "PatchPolicy": "policy",
    "PathRule": "policy",
    "parse_model_serving": "validation",
}
"""The module of ``modelserving.api`` each exported name comes from."""


def __getattr__(name: str) -> Any:
    home = _HOMES.get(name)
    if home is None:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    value = getattr(importlib.import_module(f"{__name__}.{home}"), name)
    globals()[name] = value
    return value


def __dir__() -> list[str]:
    return sorted({*globals(), *__all__})
