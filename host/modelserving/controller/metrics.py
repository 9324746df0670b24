"""Prometheus metrics of the controller, on a registry of their own.

The reconciler and the plugin chain's caller feed a ``Metrics`` instance: every hook call
(``observe_hook``), what OnPodReady plugins measured (``observe_plugin_value``), module loads
(``observe_module_load``, ``sync_module_cache``, which also carries the disk cache's rejected
and evicted artifacts and its size, and the modules evicted from memory; ``watch_module_memory``
reads the bytes held in memory at each scrape), every reconcile, Pods created and deleted, the
work queue's depth and leadership. ``serve`` exposes the registry over HTTP for scraping. Each
``Metrics`` owns a private ``CollectorRegistry`` (not prometheus_client's global one), so tests
and several controllers in one process do not share counters.
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Callable
from dataclasses import dataclass
from typing import Final, Protocol
from wsgiref.simple_server import WSGIServer

from prometheus_client import (
    CollectorRegistry,
    Counter,
    Gauge,
    Histogram,
    generate_latest,
    start_http_server,
)

log = logging.getLogger(__name__)

PREFIX: Final = "modelserving"

HOOK_BUCKETS: Final = (
    1e-5, 2.5e-5, 5e-5, 1e-4, 2.5e-4, 5e-4, 1e-3, 2.5e-3, 5e-3, 1e-2, 2.5e-2, 0.1, 0.25, 1.0, 5.0,
)  # fmt: skip
"""Seconds: a native hook takes microseconds, a WASM hook up to its timeout (seconds)."""

FUEL_BUCKETS: Final = (
    1e3, 3e3, 1e4, 3e4, 1e5, 3e5, 1e6, 3e6, 1e7, 3e7, 1e8, 3e8, 1e9, 3e9, 1e10,
)  # fmt: skip
"""Fuel units: 1e3, 3e3, 1e4, ... 3e9, 1e10 (powers of ten and half-steps)."""

OBSERVATION_BUCKETS: Final = (
    1.0, 2.5, 5.0, 10.0, 20.0, 30.0, 60.0, 120.0, 300.0, 600.0, 1200.0, 1800.0, 3600.0,
)  # fmt: skip
"""Seconds: what plugins measure (a Pod becoming Ready, say) takes seconds to an hour."""

MAX_OBSERVATION_NAMES: Final = 16
"""Distinct observation names kept per plugin; later names are dropped (one warning)."""

RECONCILE_BUCKETS: Final = (0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0, 30.0)

MODULE_LOAD_RESULTS: Final = frozenset({"compiled", "memory_cache", "disk_cache", "failed"})
RECONCILE_RESULTS: Final = frozenset({"ok", "requeue", "error"})
_CACHE_COUNTS: Final = (
    "compiled", "memory_hits", "disk_hits", "disk_rejected", "disk_evicted", "disk_evicted_bytes",
    "memory_evicted",
)  # fmt: skip
"""The ``CacheCounts`` that only grow; ``sync_module_cache`` adds their growth."""


class CacheCounts(Protocol):
    """What ``sync_module_cache`` reads: ``modelserving.sandbox.cache.CacheStats`` fits."""

    @property
    def compiled(self) -> int: ...
    @property
    def memory_hits(self) -> int: ...
    @property
    def disk_hits(self) -> int: ...
    @property
    def disk_rejected(self) -> int: ...
    @property
    def disk_evicted(self) -> int: ...
    @property
    def disk_evicted_bytes(self) -> int: ...
    @property
    def memory_evicted(self) -> int: ...
    @property
    def disk_bytes(self) -> int: ...


@dataclass(frozen=True)
class MetricsServer:
    """The HTTP server started by ``Metrics.serve`` and its thread."""

    server: WSGIServer
    thread: threading.Thread

    @property
    def port(self) -> int:
        """The port actually bound (the ephemeral one when 0 was asked for)."""
        return int(self.server.server_port)

    def close(self) -> None:
        """Stop serving and release the socket; idempotent."""
        if self.thread.is_alive():
            self.server.shutdown()
            self.thread.join(timeout=5)
        self.server.server_close()


class Metrics:
    """The controller's metrics. Label values are the caller's: keep them to small, fixed sets
    (plugin names from the ModelServing specs, hook and runtime names, failure classes)."""

    def __init__(self) -> None:
        self.registry = CollectorRegistry(auto_describe=True)
        reg = self.registry
        self.hook_calls = Counter(
            "plugin_hook_calls",
            "Plugin hook calls by plugin, hook, runtime and result (ok or a failure class).",
            ["plugin", "hook", "runtime", "result"],
            namespace=PREFIX,
            registry=reg,
        )
        self.hook_duration = Histogram(
            "plugin_hook_duration_seconds",
            "Wall time of one plugin hook call.",
            ["plugin", "hook", "runtime"],
            namespace=PREFIX,
            registry=reg,
            buckets=HOOK_BUCKETS,
        )
        self.fuel_used = Histogram(
            "plugin_fuel_used",
            "WebAssembly fuel consumed by one plugin hook call.",
            ["plugin", "hook"],
            namespace=PREFIX,
            registry=reg,
            buckets=FUEL_BUCKETS,
        )
        self.module_loads = Counter(
            "module_loads",
            "WebAssembly module loads by result: compiled, memory_cache, disk_cache, failed.",
            ["result"],
            namespace=PREFIX,
            registry=reg,
        )
        self.cache_rejected = Counter(
            "module_cache_rejected",
            "Compiled-module files refused by the disk cache and deleted (not a regular file, "
            "a symlink, another owner, writable by others, bad header or checksum).",
            namespace=PREFIX,
            registry=reg,
        )
        self.cache_evictions = Counter(
            "module_cache_evictions",
            "Compiled modules deleted from the disk cache to keep it under its size cap.",
            namespace=PREFIX,
            registry=reg,
        )
        self.cache_evicted_bytes = Counter(
            "module_cache_evicted_bytes",
            "Bytes of the compiled modules evicted from the disk cache.",
            namespace=PREFIX,
            registry=reg,
        )
        self.cache_bytes = Gauge(
            "module_cache_bytes",
            "Bytes of compiled modules in the disk cache after its last write.",
            namespace=PREFIX,
            registry=reg,
        )
        self.memory_cache_bytes = Gauge(
            "module_memory_cache_bytes",
            "Bytes of compiled modules held in the controller's memory (their artifacts' "
            "sizes; sandbox.memoryCacheMaxBytes at most, unless one module alone is larger).",
            namespace=PREFIX,
            registry=reg,
        )
        self.memory_evictions = Counter(
            "module_memory_evictions",
            "Compiled modules evicted from memory to keep within sandbox.memoryCacheMaxBytes "
            "(loaded again from the disk cache when next called).",
            namespace=PREFIX,
            registry=reg,
        )
        self.reconcile_duration = Histogram(
            "reconcile_duration_seconds",
            "Wall time of one reconcile of a ModelServing.",
            ["result"],
            namespace=PREFIX,
            registry=reg,
            buckets=RECONCILE_BUCKETS,
        )
        self.reconciles = Counter(
            "reconciles",
            "Reconciles of ModelServing objects by result: ok, requeue, error.",
            ["result"],
            namespace=PREFIX,
            registry=reg,
        )
        self.pods_created = Counter(
            "pods_created", "Pods created by the controller.", namespace=PREFIX, registry=reg
        )
        self.pods_deleted = Counter(
            "pods_deleted", "Pods deleted by the controller.", namespace=PREFIX, registry=reg
        )
        self.plugin_objects = Counter(
            "plugin_objects",
            "Objects of ServingGroup hooks by plugin and action: applied, deleted, refused (by "
            "the object policy), monitored (what a plugin in Monitor mode would have applied).",
            ["plugin", "action"],
            namespace=PREFIX,
            registry=reg,
        )
        self.plugin_monitored = Counter(
            "plugin_monitored_calls",
            "Calls of plugins in Monitor mode by plugin, hook and what they would have done: "
            "change (a patch or objects), no_change, or the failure class (nothing applied).",
            ["plugin", "hook", "result"],
            namespace=PREFIX,
            registry=reg,
        )
        self.queue_depth = Gauge(
            "workqueue_depth",
            "ModelServing objects waiting for a worker.",
            namespace=PREFIX,
            registry=reg,
        )
        self.leader = Gauge(
            "leader",
            "1 when this replica holds the leader lease, else 0.",
            namespace=PREFIX,
            registry=reg,
        )
        self.api_writes_limit = Gauge(
            "api_writes_limit",
            "API writes allowed in flight now (concurrency.apiWrites at most; lower while the "
            "API server is slow or answers 429).",
            namespace=PREFIX,
            registry=reg,
        )
        self.api_throttled = Counter(
            "api_throttled",
            "API writes answered 429 (Too Many Requests).",
            namespace=PREFIX,
            registry=reg,
        )
        self.pods_starting = Gauge(
            "pods_starting",
            "Pods created by this controller within the start window that have not started "
            "(no Node yet, or not Running).",
            namespace=PREFIX,
            registry=reg,
        )
        self.plugin_observations = Histogram(
            "plugin_observation_seconds",
            "What OnPodReady plugins measured, by namespace, plugin, observation name and Pod "
            "role.",
            ["namespace", "plugin", "name", "role"],
            namespace=PREFIX,
            registry=reg,
            buckets=OBSERVATION_BUCKETS,
        )
        self._cache_lock = threading.Lock()
        self._cache_seen: tuple[int, ...] = (0,) * len(_CACHE_COUNTS)
        self._names_lock = threading.Lock()
        self._observation_names: dict[tuple[str, str], set[str]] = {}
        self._names_refused: set[tuple[str, str]] = set()

    def observe_hook(
        self,
        plugin: str,
        hook: str,
        runtime: str,
        result: str,
        seconds: float,
        fuel: int | None = None,
    ) -> None:
        """One hook call: ``result`` is "ok" or the failure class ("Timeout", ...); ``fuel`` is
        the fuel a WASM call consumed (None for native plugins)."""
        self.hook_calls.labels(plugin, hook, runtime, result).inc()
        self.hook_duration.labels(plugin, hook, runtime).observe(seconds)
        if fuel is not None:
            self.fuel_used.labels(plugin, hook).observe(fuel)

    def observe_plugin_value(
        self, namespace: str, plugin: str, name: str, role: str, seconds: float
    ) -> bool:
        """One observation of ``plugin`` (``name`` ends in ``_seconds``) for a Pod of ``role``
        in ``namespace``.

        Each plugin gets at most ``MAX_OBSERVATION_NAMES`` distinct names per namespace (so one
        team's plugin cannot use up another's budget, nor write into its series); an
        observation under a further name is dropped (False), with one warning per plugin and
        namespace.
        """
        key = (namespace, plugin)
        with self._names_lock:
            names = self._observation_names.setdefault(key, set())
            if name not in names and len(names) >= MAX_OBSERVATION_NAMES:
                if key not in self._names_refused:
                    self._names_refused.add(key)
                    log.warning(
                        "plugin '%s' in namespace %s reported more than %d observation names; "
                        "dropping '%s' and every further new name",
                        plugin,
                        namespace,
                        MAX_OBSERVATION_NAMES,
                        name,
                    )
                return False
            names.add(name)
        self.plugin_observations.labels(namespace, plugin, name, role).observe(seconds)
        return True

    def observe_module_load(self, result: str) -> None:
        """One module load; ``result`` in ``MODULE_LOAD_RESULTS`` (ValueError otherwise)."""
        if result not in MODULE_LOAD_RESULTS:
            raise ValueError(
                f"module load result {result!r} is not one of {sorted(MODULE_LOAD_RESULTS)}"
            )
        self.module_loads.labels(result).inc()

    def sync_module_cache(self, stats: CacheCounts) -> None:
        """Add what a ``ModuleCache``'s stats counted since the last sync: to
        ``module_loads_total`` (compiled, memory_cache, disk_cache) and to the disk cache's
        ``module_cache_rejected_total``, ``module_cache_evictions_total`` and
        ``module_cache_evicted_bytes_total``, and ``module_memory_evictions_total``; set
        ``module_cache_bytes``.

        Safe to call from several workers sharing one cache: only the growth since the previous
        sync is added. Counts lower than the last ones mean a new stats object (a new cache),
        counted from zero. Failed loads are not in the stats: the caller reports them with
        ``observe_module_load("failed")``.
        """
        now = tuple(int(getattr(stats, name)) for name in _CACHE_COUNTS)
        with self._cache_lock:
            before = self._cache_seen
            if any(n < b for n, b in zip(now, before, strict=True)):
                before = (0,) * len(_CACHE_COUNTS)
            self._cache_seen = now
            self.cache_bytes.set(stats.disk_bytes)
        grown = {name: n - b for name, n, b in zip(_CACHE_COUNTS, now, before, strict=True)}
        for result, name in (
            ("compiled", "compiled"),
            ("memory_cache", "memory_hits"),
            ("disk_cache", "disk_hits"),
        ):
            if grown[name] > 0:
                self.module_loads.labels(result).inc(grown[name])
        for counter, name in (
            (self.cache_rejected, "disk_rejected"),
            (self.cache_evictions, "disk_evicted"),
            (self.cache_evicted_bytes, "disk_evicted_bytes"),
            (self.memory_evictions, "memory_evicted"),
        ):
            if grown[name] > 0:
                counter.inc(grown[name])

    def watch_module_memory(self, read: Callable[[], int]) -> None:
        """Have ``module_memory_cache_bytes`` read ``read()`` at each scrape (the module cache's
        ``memory_bytes``: modules are evicted and loaded again by calls too, not only loads)."""
        self.memory_cache_bytes.set_function(read)

    def observe_reconcile(self, result: str, seconds: float) -> None:
        """One reconcile; ``result`` in ``RECONCILE_RESULTS`` (ValueError otherwise)."""
        if result not in RECONCILE_RESULTS:
            raise ValueError(
                f"reconcile result {result!r} is not one of {sorted(RECONCILE_RESULTS)}"
            )
        self.reconciles.labels(result).inc()
        self.reconcile_duration.labels(result).observe(seconds)

    def pod_created(self) -> None:
        self.pods_created.inc()

    def pod_deleted(self) -> None:
        self.pods_deleted.inc()

    def count_monitored(self, plugin: str, hook: str, result: str) -> None:
        self.plugin_monitored.labels(plugin, hook, result).inc()

    def count_objects(self, plugin: str, action: str, n: int = 1) -> None:
        if n:
            self.plugin_objects.labels(plugin, action).inc(n)

    def set_queue_depth(self, n: int) -> None:
        self.queue_depth.set(n)

    def set_leader(self, leading: bool) -> None:
        self.leader.set(1 if leading else 0)

    def render(self) -> bytes:
        """The registry in the Prometheus text exposition format."""
        return generate_latest(self.registry)

    def serve(self, port: int, addr: str = "0.0.0.0") -> MetricsServer:
        """Serve ``/metrics`` (any path, in fact) on ``addr:port`` from a daemon thread; port 0
        binds an ephemeral port (see ``MetricsServer.port``). Close it with ``close()``."""
        server, thread = start_http_server(port, addr=addr, registry=self.registry)
        return MetricsServer(server=server, thread=thread)
