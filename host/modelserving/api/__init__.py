"""The API of modelserving: CRD models, hook request and patches, patch policy, errors.

Imports only pydantic and the standard library; every other layer builds on it.
"""

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
