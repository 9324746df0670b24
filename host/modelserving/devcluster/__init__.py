"""A real local Kubernetes control plane for tests and ``make run`` (no containers needed).

Used by the Makefile (``make cluster-build|cluster-up|cluster-down|cluster-status``) through
``python -m modelserving.devcluster`` and by ``tests/integration/conftest.py``. A standalone
sibling of the controller: it imports no other ``modelserving`` subpackage.

- ``versions``: pinned versions and the build cache location.
- ``build``: compiles etcd, kube-apiserver, kube-controller-manager, kube-scheduler, kubectl and
  kwok from Go modules into one multi-call binary in the cache (once per set of versions).
- ``certs``: the CA, serving/admin certificates and ServiceAccount keys (``openssl``).
- ``procs``: free ports, detached processes, liveness (as their parent, or by PID from
  ``state.json``), stopping whole process groups.
- ``interrupts``: SIGTERM, SIGHUP and SIGINT during a start become an exception, so it cleans up.
- ``cluster``: up / down / health of one cluster folder.
"""

from modelserving.devcluster.build import BuildError, build_all, cached_binaries
from modelserving.devcluster.certs import CertError
from modelserving.devcluster.cluster import (
    NODE_LEASE_SECONDS,
    ClusterError,
    ClusterState,
    down,
    is_healthy,
    load_state,
    rss_bytes,
    up,
)
from modelserving.devcluster.versions import (
    ETCD_VERSION,
    KUBERNETES_VERSION,
    KWOK_VERSION,
    cache_root,
)

__all__ = [
    "ETCD_VERSION",
    "KUBERNETES_VERSION",
    "KWOK_VERSION",
    "NODE_LEASE_SECONDS",
    "BuildError",
    "CertError",
    "ClusterError",
    "ClusterState",
    "build_all",
    "cache_root",
    "cached_binaries",
    "down",
    "is_healthy",
    "load_state",
    "rss_bytes",
    "up",
]
