"""The names and shapes ABI v1 fixes: marker, exports, allowed imports, request and response keys.

The full text is ``abi/README.md`` at the top of the repository; this module is its
machine-checked half.
"""

from __future__ import annotations

from modelserving.api.hook import HOOK_SPECS, Hook

ABI_VERSION = 1

MARKERS: dict[str, int] = {"modelserving_abi_v1": 1}
"""Exported marker function -> the ABI version it selects (every version this host supports)."""

MEMORY = "memory"
ALLOC = "ms_alloc"
FREE = "ms_free"
INITIALIZE = "_initialize"

HOOK_EXPORTS: dict[Hook, str] = {spec.hook: spec.export for spec in HOOK_SPECS}
"""Each hook's export in a core module (from the hook table, ``api.hook.HOOK_SPECS``)."""

LOG_MODULE = "modelserving"
LOG_FUNC = "log"
WASI_MODULE = "wasi_snapshot_preview1"
EXTISM_MODULE = "extism:host/env"

EXTISM_FUNCS: dict[Hook, str] = {spec.hook: spec.extism for spec in HOOK_SPECS}
"""Each hook's function in an Extism module."""


def export_name(hook: Hook, extism: bool) -> str:
    """The export that serves ``hook`` in a module of either flavour."""
    return (EXTISM_FUNCS if extism else HOOK_EXPORTS)[hook]


RESPONSE_KEYS = frozenset({"patch", "error"})
OP_KEYS = frozenset({"op", "path", "value"})
OPS_WITH_VALUE = frozenset({"add", "replace", "test"})
OPS = frozenset({"add", "remove", "replace", "test"})

MAX_PATCH_OPS = 1024
"""Most operations one response may carry."""

MAX_ERROR_TEXT = 1024
"""A guest's error message is cut to this many characters (marked ``...[cut]``)."""

MAX_RESPONSE_DEPTH = 100
"""Deepest nesting a response may have; the patch policy then bounds the patched Pod."""


class ResponseError(Exception):
    """A response that breaks the contract (failure class InvalidResponse)."""
