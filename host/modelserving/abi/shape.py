"""What a module must look like, whatever hooks it serves: the ABI markers, the exports the host
needs besides the hooks, and the imports it may use.

The sandbox checks modules against these names and knows nothing else of the ABI (no hook, no
request or response key: those are in ``modelserving.abi.contract``). The full text is
``abi/README.md`` at the top of the repository.
"""

from __future__ import annotations

MARKER_PREFIX = "modelserving_abi_v"

MARKERS: dict[str, int] = {
    "modelserving_abi_v1": 1,
    "modelserving_abi_v2": 2,
    "modelserving_abi_v3": 3,
}
"""Exported marker function -> the ABI version it selects (every version this host supports).
A module that exports several markers runs under the highest version this host supports."""

MEMORY = "memory"
ALLOC = "ms_alloc"
FREE = "ms_free"
INITIALIZE = "_initialize"

LOG_MODULE = "modelserving"
LOG_FUNC = "log"
WASI_MODULE = "wasi_snapshot_preview1"
EXTISM_MODULE = "extism:host/env"
