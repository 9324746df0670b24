"""The running controller: leader election, kopf watches, reconcile workers, metrics and health.

``Controller.run`` is what ``modelserving run`` calls. It serves /healthz at once (a standby
replica is alive too), waits to lead (a Lease), then starts the workers, the Pods', Services'
and Nodes' watches (``controller.watch``; Pods and Services into the ``controller.cache`` the
passes read) and kopf (ModelServings, ConfigMaps). Events only put ModelServing keys in the
work queue; the workers reconcile one key at a time each, and API writes go through a bounded
pool. Losing the lease stops everything, so a replica never acts without leading; Kubernetes
restarts the container and it waits as standby.
"""

from __future__ import annotations

import ctypes
import functools
import logging
import os
import threading
import time
from collections import Counter
from collections.abc import Callable, Mapping
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

from modelserving import collector
from modelserving.api import labels
from modelserving.api.operator import OperatorConfig
from modelserving.chain import CallRecord, ChainCache
from modelserving.chain.objects import ObjectValidator
from modelserving.chain.policy import PatchValidator
from modelserving.controller import handlers
from modelserving.controller.cache import LatestObjects, ObjectCache, owner_of
from modelserving.controller.config import pod_namespace, sandbox_settings
from modelserving.controller.events import EventRecorder
from modelserving.controller.kube import CRDS, NODES, POD_GROUPS, PODS, SERVICES, ApiError, Kube
from modelserving.controller.leader import LeaderElectionConfig, LeaderElector
from modelserving.controller.metrics import Metrics
from modelserving.controller.nodes import NodeStates
from modelserving.controller.pacing import StartBacklog, WritePacer
from modelserving.controller.queue import WorkQueue
from modelserving.controller.reconciler import (
    Key,
    Reconciler,
    ReconcilerSettings,
    Recorder,
    RetryLater,
)
from modelserving.controller.watch import Watch
from modelserving.plugins.exports import plugin_sandbox, set_default_sandbox
from modelserving.sandbox import Sandbox
from modelserving.workload.gang import NO_VOLCANO, POD_GROUP_CRD, VolcanoApi, volcano_api

log = logging.getLogger("modelserving.controller")
GANG_RECHECK_S = 60.0
MALLOC_ARENAS = 2
"""How many malloc arenas the C library may use once a controller runs (glibc: ``M_ARENA_MAX``;
its default is 8 per core). The controller's many threads (API writes, reconcile workers,
watches) each got an arena of their own, and the memory freed in one is not reused by another:
on the 800-Pod benchmark with three WebAssembly plugins, peak RSS was 106 MB with the default and
102 MB with 2 (``MALLOC_ARENA_MAX=2``, docs/performance.md). Python's own objects do not come
from these arenas, so the CPU does not change."""


def limit_malloc_arenas(arenas: int = MALLOC_ARENAS) -> bool:
    """Ask the C library for at most ``arenas`` malloc arenas (threads started after this share
    them). True when it took it: glibc's ``mallopt``; another C library is left as it is, as is
    an operator's own ``MALLOC_ARENA_MAX``."""
    if "MALLOC_ARENA_MAX" in os.environ:
        return False
    try:
        libc = ctypes.CDLL(None)
        mallopt = libc.mallopt
    except (OSError, AttributeError):
        return False
    mallopt.argtypes = [ctypes.c_int, ctypes.c_int]
    return bool(mallopt(M_ARENA_MAX, arenas))


M_ARENA_MAX = -8
"""glibc's ``mallopt`` parameter number for the arena limit (malloc.h)."""


class _Reports(Recorder):
    """Events and metrics of the running controller."""

    def __init__(self, events: EventRecorder, metrics: Metrics, sandbox: Sandbox) -> None:
        self.events = events
        self.metrics = metrics
        self.sandbox = sandbox
        self._lock = threading.Lock()

    def event(self, obj: Mapping[str, Any], type_: str, reason: str, message: str) -> None:
        self.events.record(obj, type_, reason, message)

    def hook(self, record: CallRecord) -> None:
        self.metrics.observe_hook(
            record.plugin, record.hook, record.runtime, record.result, record.seconds, record.fuel
        )
        for observation in record.observations:
            self.metrics.observe_plugin_value(
                record.namespace, record.plugin, observation.name, record.role, observation.seconds
            )
        if record.monitored:
            would = "change" if record.changes else "no_change"
            self.metrics.count_monitored(
                record.plugin, record.hook, would if record.result == "ok" else record.result
            )

    def pods(self, created: int, deleted: int) -> None:
        for _ in range(created):
            self.metrics.pod_created()
        for _ in range(deleted):
            self.metrics.pod_deleted()

    def objects(self, plugin: str, action: str, n: int) -> None:
        self.metrics.count_objects(plugin, action, n)

    def sync_modules(self) -> None:
        with self._lock:
            self.metrics.sync_module_cache(self.sandbox.modules.stats)

    def chain_built(self, failed: bool = False) -> None:
        self.sync_modules()
        if failed:
            self.metrics.observe_module_load("failed")


class _Volcano:
    """What Volcano serves, read from the PodGroup CRD as Kthena reads it (the CRD
    ``podgroups.scheduling.volcano.sh`` exists; its schema has ``spec.subGroupPolicy``),
    re-read every minute."""

    def __init__(self, kube: Kube) -> None:
        self.kube = kube
        self._value = NO_VOLCANO
        self._checked = -GANG_RECHECK_S
        self._lock = threading.Lock()

    def __call__(self) -> VolcanoApi:
        with self._lock:
            if time.monotonic() - self._checked >= GANG_RECHECK_S:
                try:
                    self._value = volcano_api(self.kube.get(CRDS, None, POD_GROUP_CRD))
                except ApiError as exc:
                    log.warning("could not read Volcano's PodGroup CRD: %s", exc)
                self._checked = time.monotonic()
            return self._value


@dataclass
class Health:
    """/healthz answers 200 while the process runs; /readyz once this replica leads."""

    leading: threading.Event

    def serve(self, port: int, addr: str = "0.0.0.0") -> ThreadingHTTPServer:
        leading = self.leading

        class Handler(BaseHTTPRequestHandler):
            def do_GET(self) -> None:
                if self.path == "/healthz":
                    code, body = 200, b"ok\n"
                elif self.path == "/readyz":
                    ok = leading.is_set()
                    code, body = (200, b"leading\n") if ok else (503, b"standby\n")
                else:
                    code, body = 404, b"not found\n"
                self.send_response(code)
                self.send_header("Content-Type", "text/plain")
                self.send_header("Content-Length", str(len(body)))
                self.end_headers()
                self.wfile.write(body)

            def log_message(self, format: str, *args: Any) -> None:
                return

        server = ThreadingHTTPServer((addr, port), Handler)
        threading.Thread(target=server.serve_forever, name="health", daemon=True).start()
        return server


EVENT_BATCH_S = 0.5
"""How long events about a ModelServing's Pods, Services and status gather before its pass, at
least; for a ModelServing whose passes cost more CPU, longer (``PASS_SHARE``, ``DECIDE_SHARE``)."""
PASS_SHARE = 2.0
"""So a ModelServing's event-driven passes take at most a third of a core, however big it is.
A pass's CPU is its worker thread's (deciding, running plugins), not its wall time: a pass that
creates 800 Pods waits for the API server for seconds, and a window twice that long held the
next pass back for 24 s after every Pod was Running."""
DECIDE_SHARE = 20.0
"""The window is also this many times the CPU the last pass spent on what every pass repeats
(``Reconciler.decide_seconds``: reading, deciding, writing the status; not the plugins and
creations, which are per Pod). While a big ModelServing's Pods keep changing (a rolling update
the control plane takes minutes over), its passes then spend at most 1/21 of a core on it:
the events a pass follows grow with its cost, so that CPU per event does not grow with the
ModelServing. A pass that asks to be looked at again later (a grace period, a name still
held) waits at least the window too. A ModelServing whose passes repeat under 25 ms of CPU
keeps the window of ``EVENT_BATCH_S``."""


class Controller:
    """One controller replica."""

    def __init__(
        self,
        config: OperatorConfig,
        api_client: Any,
        identity: str | None = None,
        serve_http: bool = True,
    ) -> None:
        self.config = config
        self.api_client = api_client
        self.metrics = Metrics()
        writes = config.concurrency
        self.pacer = (
            WritePacer(
                writes.api_writes,
                writes.write_latency_factor,
                on_change=self.metrics.api_writes_limit.set,
                on_throttle=self.metrics.api_throttled.inc,
            )
            if writes.adaptive_writes
            else None
        )
        self.kube = Kube(api_client, self.pacer)
        self.identity = identity
        self.serve_http = serve_http
        self.sandbox = plugin_sandbox(sandbox_settings(config))
        set_default_sandbox(self.sandbox)
        self.metrics.watch_module_memory(self.sandbox.modules.memory_bytes)
        self.metrics.api_writes_limit.set(writes.api_writes)
        self.events = EventRecorder(api_client, host=identity)
        self.reports = _Reports(self.events, self.metrics, self.sandbox)
        self.queue: WorkQueue[Key] = WorkQueue()
        self.writes = ThreadPoolExecutor(
            max_workers=config.concurrency.api_writes, thread_name_prefix="api-write"
        )
        chains = ChainCache(
            validator=PatchValidator(config.patch_policy), sandbox=self.sandbox, size=1024
        )
        self.reconciler = Reconciler(
            self.kube,
            chains,
            self.writes,
            ReconcilerSettings(
                plugin_namespaces=frozenset(config.plugin_namespaces),
                max_module_bytes=config.sandbox.max_module_bytes,
                objects=ObjectValidator(
                    config.object_policy, config.patch_policy.protected_prefixes
                ),
                groups_ahead=2 * config.concurrency.api_writes,
                max_pods=config.max_pods_per_model_serving,
            ),
            self.reports,
            gang=_Volcano(self.kube),
        )
        self.known: set[Key] = set()
        self._seen: dict[Key, tuple[Any, Any, Any]] = {}
        """What the last event of each ModelServing showed of its spec and metadata."""
        self._seen_lock = threading.Lock()
        self._deleting: set[Key] = set()
        """ModelServings the watch saw deleted (or being deleted): their passes stop creating."""
        self.reconciler.stopping = self._is_deleting
        self.model_servings = LatestObjects()
        """Each ModelServing as its watch and our status writes last showed it: a pass reads
        it there, and the watch's echo of our own status write queues no pass."""
        self.reconciler.model_servings = self.model_servings
        self.reconciler.pod_groups_watched = self.watch_pod_groups
        self.cache = ObjectCache()
        self.reconciler.cache = self.cache
        self.nodes = NodeStates()
        self.reconciler.lost_nodes = self.nodes.lost
        self.backlog = (
            StartBacklog(writes.max_starting_pods, writes.start_window_seconds)
            if writes.adaptive_writes
            else None
        )
        self.reconciler.backlog = self.backlog
        if self.backlog is not None:
            self.metrics.pods_starting.set_function(self.backlog.count)
        self._pass_seconds: dict[Key, float] = {}
        """The CPU seconds each ModelServing's last pass took in its worker thread."""
        self.passes: Counter[Key] = Counter()
        """Finished reconcile passes by key (for tests and debugging)."""
        self.pass_cpu_seconds = 0.0
        """The CPU seconds of every pass so far, in its worker thread (for benchmarks)."""
        self.watches: list[Watch] = []
        """The Pods', Services' and Nodes' watches while the controller runs (and the
        PodGroups', once Volcano is seen)."""
        self._watching = False
        self._pod_groups_watched = False
        self._watch_lock = threading.Lock()
        self.leading = threading.Event()
        self.lost_leadership = False

    # --- queue feeding (called by kopf handlers) ---------------------------------------------

    def enqueue(self, key: Key, change: bool = False) -> None:
        """Queue ``key`` for a pass. ``change``: the user changed something (the
        ModelServing's spec or metadata, a module's ConfigMap): its backoff starts over and
        the pass runs now. Otherwise (events of its Pods and Services, its status) a key that
        is backing off after a failure waits for its retry."""
        self.known.add(key)
        if change:
            self.queue.forget(key)
        self.queue.add(key, respect_backoff=not change)
        self.metrics.set_queue_depth(len(self.queue))

    def model_serving_event(self, event_type: str | None, obj: Mapping[str, Any]) -> None:
        """A watch event of a ModelServing: a change when it is new, deleted, or its
        generation, labels or annotations moved (not a status write)."""
        meta = obj.get("metadata") or {}
        key = (str(meta.get("namespace", "")), str(meta.get("name", "")))
        seen = (meta.get("generation"), meta.get("labels"), meta.get("annotations"))
        gone = event_type == "DELETED" or bool(meta.get("deletionTimestamp"))
        if event_type == "DELETED":
            self.model_servings.gone(*key, meta.get("uid"))
            new = True
        else:
            new = self.model_servings.offer(obj)
        with self._seen_lock:
            changed = gone or self._seen.get(key) != seen
            if event_type == "DELETED":
                self._seen.pop(key, None)
            else:
                self._seen[key] = seen
            if gone:
                self._deleting.add(key)
            else:
                self._deleting.discard(key)
        if changed:
            self.enqueue(key, change=True)
        elif new:
            self._batched(key)  # a status write (someone else's: ours are kept when answered)

    def owned_event(self, plural: str, event_type: str | None, obj: Mapping[str, Any]) -> None:
        """A watch event of a Pod, Service or PodGroup with the ModelServing name label: kept
        in the cache, and its ModelServing queued."""
        left = self.cache.event(plural, event_type, obj)
        if self.backlog is not None and plural == PODS.plural:
            self.backlog.observed(event_type, obj)
        owner = owner_of(obj)
        if owner:
            namespace = str((obj.get("metadata") or {}).get("namespace", ""))
            self._batched((namespace, owner))
        if left is not None:  # relabelled away from that ModelServing
            self._batched((left[1], left[2]))

    def _window(self, key: Key) -> float:
        """How long events about ``key``'s own objects gather before its next pass."""
        return max(
            EVENT_BATCH_S,
            PASS_SHARE * self._pass_seconds.get(key, 0.0),
            DECIDE_SHARE * self.reconciler.decide_seconds.get(key, 0.0),
        )

    def _batched(self, key: Key) -> None:
        self.known.add(key)
        self.queue.add_batched(key, self._window(key))
        self.metrics.set_queue_depth(len(self.queue))

    def node_event(self, event_type: str | None, obj: Mapping[str, Any]) -> None:
        """A watch event of a Node: when it is lost (deleted, or no longer Ready) or back, every
        ModelServing is looked at (a Pod on a lost Node stops counting as available, one on a
        deleted Node is recovered)."""
        if not self.nodes.event(event_type, obj):
            return
        name = (obj.get("metadata") or {}).get("name")
        state = self.nodes.lost().get(str(name))
        log.info("Node %s: %s", name, f"lost ({state})" if state else "Ready again")
        for key in list(self.known):
            self.enqueue(key)

    def _is_deleting(self, key: Key) -> bool:
        with self._seen_lock:
            return key in self._deleting

    def config_map_changed(self, namespace: str, name: str) -> None:
        for key in self.reconciler.users_of_config_map(namespace, name):
            self.enqueue(key, change=True)

    # --- workers -----------------------------------------------------------------------------

    def _work(self) -> None:
        while True:
            key = self.queue.get()
            if key is None:
                return
            started = time.perf_counter()
            cpu_started = time.thread_time()
            result = "ok"
            try:
                after = self.reconciler.reconcile(key)
                self.queue.forget(key)
                if after is not None:
                    # a look later, gathered with the events meanwhile, no sooner than they
                    result = "requeue"
                    self.queue.add_batched(key, max(after, self._window(key)))
            except RetryLater as exc:
                result = "requeue"
                delay = self.queue.add_rate_limited(key)
                log.warning("ModelServing %s/%s: %s (retry in %.1fs)", *key, exc, delay)
            except Exception as exc:  # a bug or an API outage must not stop the worker
                result = "error"
                delay = self.queue.add_rate_limited(key)
                level = logging.WARNING if isinstance(exc, ApiError) else logging.ERROR
                log.log(
                    level,
                    "ModelServing %s/%s: reconcile failed (retry in %.1fs): %s",
                    *key,
                    delay,
                    exc,
                    exc_info=not isinstance(exc, ApiError),
                )
            finally:
                spent = time.thread_time() - cpu_started
                self._pass_seconds[key] = spent
                self.pass_cpu_seconds += spent
                self.passes[key] += 1
                self.queue.done(key)
                self.metrics.observe_reconcile(result, time.perf_counter() - started)
                self.metrics.set_queue_depth(len(self.queue))
                self.reports.sync_modules()  # calls reload evicted modules, not only builds

    def _resync(self, stop: threading.Event) -> None:
        while not stop.wait(self.config.resync_seconds):
            # from the cache, as an informer's resync: the watch keeps it (and lists again when
            # its resourceVersion is too old); a list of every Pod here cost O(Pods) per resync,
            # so O(Pods^2) over a rolling update of a big ModelServing, and its peak memory
            for key in list(self.known):
                self.queue.add(key, respect_backoff=True)

    # --- lifecycle ---------------------------------------------------------------------------

    def _elector(self) -> LeaderElector | None:
        le = self.config.leader_election
        if not le.enabled:
            return None
        kwargs: dict[str, Any] = {}
        if self.identity:
            kwargs["identity"] = self.identity
        settings = LeaderElectionConfig(
            namespace=le.namespace or pod_namespace(),
            name=le.lease_name,
            lease_duration_s=float(le.lease_duration_seconds),
            renew_deadline_s=float(le.renew_deadline_seconds),
            retry_period_s=float(le.retry_period_seconds),
            **kwargs,
        )
        return LeaderElector(self.api_client, settings)

    def run(self, stop: threading.Event, ready: Callable[[], None] | None = None) -> int:
        """Run until ``stop`` is set or leadership is lost (then exit code 1).

        While it runs, the process's cyclic garbage collector runs less often
        (``collector.GC_THRESHOLDS``); from then on, its threads share at most
        ``MALLOC_ARENAS`` malloc arenas."""
        limit_malloc_arenas()
        with collector.tuned():
            return self._run(stop, ready)

    def _run(self, stop: threading.Event, ready: Callable[[], None] | None) -> int:
        servers: list[Any] = []
        if self.serve_http:
            servers.append(Health(self.leading).serve(self.config.health.port))
            servers.append(
                self.metrics.serve(self.config.metrics.port, self.config.metrics.bind_address)
            )
        elector = self._elector()
        if elector is not None:
            log.info("waiting to lead (Lease %s)", self.config.leader_election.lease_name)
            if not elector.acquire(stop):
                self._close(servers)
                return 0

            def lost() -> None:
                log.error("lost the leader Lease; stopping so that only one replica acts")
                self.lost_leadership = True
                stop.set()

            elector.start_renewing(lost)
        self.leading.set()
        self.metrics.set_leader(True)
        workers = [
            threading.Thread(target=self._work, name=f"reconcile-{i}", daemon=True)
            for i in range(self.config.concurrency.reconciles)
        ]
        for worker in workers:
            worker.start()
        threading.Thread(target=self._resync, args=(stop,), name="resync", daemon=True).start()
        with self._watch_lock:
            self.watches = self._watches()
            self._watching = True
        try:
            handlers.run_kopf(self, stop, ready)
        finally:
            with self._watch_lock:
                self._watching = self._pod_groups_watched = False
                watches = list(self.watches)
            for watch in watches:
                watch.stop()
            self.leading.clear()
            self.metrics.set_leader(False)
            self.queue.shutdown()
            for worker in workers:
                worker.join(timeout=30)
            self.writes.shutdown(wait=True)
            if elector is not None and not self.lost_leadership:
                elector.release()
            self._close(servers)
        return 1 if self.lost_leadership else 0

    @property
    def watch_events(self) -> int:
        """The Pod, Service and PodGroup watch events handled so far (for benchmarks; not the
        Nodes')."""
        return sum(watch.events for watch in self.watches if watch.res != NODES)

    def _watches(self) -> list[Watch]:
        """The Pods' and Services' watches (one per watched namespace, or one for all), and the
        Nodes' (every Node: kwok's and kubelets' heartbeats bring an event per Node every few
        seconds, which kopf's machinery made the idle controller's largest cost)."""
        namespaces: list[str | None] = list(self.config.watch_namespaces) or [None]
        owned = [
            Watch(
                self.kube,
                res,
                labels.NAME_LABEL,
                namespace,
                functools.partial(self.owned_event, res.plural),
                self.cache.forget_all,
            ).start()
            for res in (PODS, SERVICES)
            for namespace in namespaces
        ]
        nodes = Watch(self.kube, NODES, "", None, self.node_event, listed=self._nodes_listed)
        return [*owned, nodes.start()]

    def watch_pod_groups(self) -> bool:
        """Whether the PodGroups are watched into the cache (then a pass reads them there, not
        from a list of its own). The first call starts their watch: a pass calls it once the
        PodGroup CRD is seen, so a cluster without Volcano has no watch failing on it."""
        with self._watch_lock:
            if self._pod_groups_watched:
                return True
            if not self._watching:
                return False
            namespaces: list[str | None] = list(self.config.watch_namespaces) or [None]
            self.watches.extend(
                Watch(
                    self.kube,
                    POD_GROUPS,
                    labels.NAME_LABEL,
                    namespace,
                    functools.partial(self.owned_event, POD_GROUPS.plural),
                    self.cache.forget_all,
                ).start()
                for namespace in namespaces
            )
            self._pod_groups_watched = True
            return True

    def _nodes_listed(self, items: list[dict[str, Any]]) -> None:
        """The Node watch listed again (its resourceVersion was too old), each listed Node
        handled: a Node missing from the list was deleted meanwhile and sent no event. It is
        taken as deleted (a pass reads the Node before it deletes a Pod for it), and every
        ModelServing is looked at."""
        names = {str((node.get("metadata") or {}).get("name", "")) for node in items}
        gone = self.nodes.listed(names)
        if not gone:
            return
        log.info("Nodes deleted while their watch was gone: %s", ", ".join(gone))
        for key in list(self.known):
            self.enqueue(key)

    @staticmethod
    def _close(servers: list[Any]) -> None:
        """Stop each server and release its listening socket (``close()`` does both; an
        ``http.server`` needs ``shutdown()`` then ``server_close()``)."""
        for server in servers:
            names = ("close",) if hasattr(server, "close") else ("shutdown", "server_close")
            for name in names:
                method = getattr(server, name, None)
                if callable(method):
                    method()
