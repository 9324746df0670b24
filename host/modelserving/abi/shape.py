"""What a module must look like, whatever hooks it serves: the ABI markers, the exports the host
needs besides the hooks, and the imports it may use.

The sandbox checks modules against these names and uses nothing else of the ABI (no hook, no
request or response key: those are in ``modelserving.abi.contract``). The markers derive from
the versions declared in ``modelserving.abi.versions``. The full text is ``abi/README.md`` at the
top of the repository.
"""

from __future__ import annotations

from modelserving.abi.versions import MARKER_PREFIX, MARKERS

__all__ = ["MARKERS", "MARKER_PREFIX"]

MEMORY = "memory"
ALLOC = "ms_alloc"
FREE = "ms_free"
INITIALIZE = "_initialize"

LOG_MODULE = "modelserving"
LOG_FUNC = "log"
WASI_MODULE = "wasi_snapshot_preview1"
EXTISM_MODULE = "extism:host/env"
