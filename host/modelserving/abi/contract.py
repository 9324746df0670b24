"""The request and response keys and bounds the ABI fixes (the module's shape, its marker,
exports and imports, is in ``modelserving.abi.shape``).

The full text is ``abi/README.md`` at the top of the repository; this module is its
machine-checked half.
"""

from __future__ import annotations

from modelserving.abi.versions import RESPONSE_KEYS
from modelserving.api.hook import PATCH_OP_KEYS, PATCH_OPS

__all__ = ["RESPONSE_KEYS"]

ABI_VERSION = 1
"""The version of a request whose module is not known (tests, the CLI's raw requests); a
plugin's requests carry the version its module's marker selects."""

OBSERVATION_KEYS = ("name", "seconds")
MAX_OBSERVATIONS = 64
"""Most observations one response may carry (as many as a call may write log lines)."""
OP_KEYS = PATCH_OP_KEYS
OPS_WITH_VALUE = frozenset({"add", "replace", "test"})
OPS = PATCH_OPS

MAX_PATCH_OPS = 1024
"""Most operations one response may carry."""

MAX_ERROR_TEXT = 1024
"""A guest's error message is cut to this many characters (marked ``...[cut]``)."""

MAX_RESPONSE_DEPTH = 100
"""Deepest nesting a response may have; the patch policy then bounds the patched Pod."""

MAX_RESPONSE_VALUES = 100_000
"""Most values (map entries and array items, at every level together) a response may hold. A
response of the largest size could otherwise decode into a million empty maps, which would take
the host a second to check."""


class ResponseError(Exception):
    """A response that breaks the contract (failure class InvalidResponse)."""
