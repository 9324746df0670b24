"""One reconcile pass of one ModelServing: read, decide (``workload.sync``), act, report.

Called by the controller's workers with a (namespace, name) key. A pass
1. reads the ModelServing (the watch's fresh copy when it has one, else from the API); gone or
   being deleted: forget it (garbage collection removes the rest);
2. builds (or reuses) its plugin chain; module ConfigMaps are read each pass and their
   resourceVersions join the chain's cache key, so a changed ConfigMap yields a new chain;
3. records the revision as a ControllerRevision and lists the Pods, Services and PodGroups;
4. carries out the plan: deletions (with UID preconditions), then PodGroup updates (merge
   patches of the spec fields Kthena manages), then creations per ServingGroup,
   concurrently across ServingGroups and bounded by the API write pool. The chain runs on every
   Pod of a ServingGroup before any of them is created; a Fail-policy failure creates nothing in
   that ServingGroup;
5. runs OnPodReady once per Pod (claimed by an annotation with a resourceVersion precondition,
   so neither a restart nor a second replica runs it twice);
6. runs the ServingGroup hooks whose input changed and keeps their objects in step
   (``controller.groups``);
7. writes the status with Kthena's conditions and ``PluginsReady``.

Nothing here keeps state that a restart would need: names are deterministic and creates that
find the object already there count as done.
"""

from __future__ import annotations

import json
import logging
import threading
import time
from collections.abc import Callable, Iterable, Mapping
from concurrent.futures import Future, ThreadPoolExecutor
from dataclasses import dataclass, field
from typing import Any

from modelserving.api import labels
from modelserving.api.errors import (
    FailureClass,
    InvalidManifest,
    PluginConfigError,
    PluginFailure,
)
from modelserving.api.hook import POD_HOOKS, Hook
from modelserving.api.modelserving import ModelServing, PluginSpec
from modelserving.api.validation import parse_model_serving
from modelserving.chain import CallRecord, Chain, ChainCache, Outcome
from modelserving.chain.objects import ObjectValidator
from modelserving.controller import status as status_
from modelserving.controller.cache import LatestObjects, ObjectCache
from modelserving.controller.groups import GroupHooks
from modelserving.controller.kube import (
    CONFIG_MAPS,
    CONTROLLER_REVISIONS,
    MODEL_SERVINGS,
    NODES,
    POD_GROUPS,
    PODS,
    SERVICES,
    ApiError,
    Kube,
    Resource,
)
from modelserving.controller.pacing import StartBacklog
from modelserving.plugins.modules import (
    ModuleUnavailable,
    module_from_config_map,
    outside_plugin_namespaces,
)
from modelserving.workload.gang import VolcanoApi, as_api
from modelserving.workload.observed import (
    NODE_DELETED,
    READY_HOOKS_ANNOTATION,
    owned_by,
)
from modelserving.workload.owned import OwnedSet
from modelserving.workload.plan import DesiredPod, refusal
from modelserving.workload.pods import owner_reference
from modelserving.workload.podset import PodSet
from modelserving.workload.revision import revision as revision_of
from modelserving.workload.sync import GroupWork, SyncPlan, sync

log = logging.getLogger("modelserving.controller")

Key = tuple[str, str]
REVISION_HISTORY = 10
LOOK_AGAIN_S = 1.0
REVISIONS_RELIST_S = 300.0
"""How long a ModelServing's ControllerRevisions, as its passes last listed and then wrote them,
are trusted before a pass lists them again (``Reconciler._revisions``)."""


class Recorder:
    """Where the reconciler reports: events and metrics (both optional, for tests)."""

    def event(self, obj: Mapping[str, Any], type_: str, reason: str, message: str) -> None:
        """Post a Kubernetes Event about ``obj``."""

    def hook(self, record: CallRecord) -> None:
        """Count one plugin hook call."""

    def pods(self, created: int, deleted: int) -> None:
        """Count Pods created and deleted."""

    def objects(self, plugin: str, action: str, n: int) -> None:
        """Count a ServingGroup hook's objects applied, deleted, refused or monitored."""

    def chain_built(self, failed: bool = False) -> None:
        """A chain was (re)built, or failed to (``failed``: a module was refused)."""


class RetryLater(Exception):
    """The pass did part of its work; the key is queued again with backoff."""


@dataclass
class ReconcilerSettings:
    """What the operator configures for reconciling."""

    plugin_namespaces: frozenset[str] = frozenset()
    max_module_bytes: int = 32 * 1024 * 1024
    objects: ObjectValidator = field(default_factory=ObjectValidator)
    groups_ahead: int = 32
    """ServingGroups whose Pods a pass builds (plugin chain run) before the write pool has
    created them: more would only hold memory (every Pod of a big ModelServing at once)."""
    max_pods: int = 100_000
    """The most Pods one ModelServing may ask for (``maxPodsPerModelServing``)."""


@dataclass
class _Revisions:
    """A ModelServing's ControllerRevisions as its passes left them: listed at ``listed``
    (monotonic seconds), with what the passes created and deleted since."""

    uid: str
    found: list[dict[str, Any]]
    listed: float


@dataclass
class _Pass:
    """The state of one pass."""

    key: Key
    ms: ModelServing
    raw: Mapping[str, Any]
    chain: Chain | None = None
    plugin_error: PluginConfigError | None = None
    pod_failures: list[PluginFailure] = field(default_factory=list)
    api_errors: list[str] = field(default_factory=list)
    created: int = 0
    deleted: int = 0
    look_again: bool = False


class Reconciler:
    """Reconciles ModelServings by key; safe to call from several threads for different keys."""

    def __init__(
        self,
        kube: Kube,
        chains: ChainCache,
        writes: ThreadPoolExecutor,
        settings: ReconcilerSettings | None = None,
        recorder: Recorder | None = None,
        gang: Callable[[], bool | VolcanoApi] = lambda: False,
        clock: Callable[[], float] = time.time,
        monotonic: Callable[[], float] = time.monotonic,
    ) -> None:
        self.kube = kube
        self.chains = chains
        self.writes = writes
        self.settings = settings or ReconcilerSettings()
        self.recorder = recorder or Recorder()
        self.gang = gang
        self.clock = clock
        self.config_map_users: dict[tuple[str, str], set[Key]] = {}
        self._users_lock = threading.Lock()
        self.seen_failed: dict[str, float] = {}
        self.monotonic = monotonic
        self.groups = GroupHooks(kube, self.recorder, self.settings.objects, monotonic)
        self.cache: ObjectCache | None = None
        """Pods and Services from the watch (None: every pass lists them)."""
        self.lost_nodes: Callable[[], Mapping[str, str]] = dict
        """The Nodes the Node watch saw deleted or not Ready (``NodeStates.lost``)."""
        self.pod_groups_watched: Callable[[], bool] = lambda: False
        """Whether PodGroups are watched into the cache (asked once Volcano is seen; the first
        call starts their watch): then a pass reads them there instead of listing them."""
        self.stopping: Callable[[Key], bool] = lambda key: False
        """Whether the ModelServing of ``key`` has been deleted since its pass began (the
        watch saw it): the pass then creates nothing more."""
        self.backlog: StartBacklog | None = None
        """The Pods created lately that have not started: a pass waits for room in it before
        each ServingGroup (None: never waits)."""
        self.model_servings: LatestObjects | None = None
        """The ModelServings as their watch and the status writes last showed them: a pass
        reads its own there while it is fresh (None: every pass reads it from the API)."""
        self.pod_sets: dict[Key, PodSet] = {}
        """Each ModelServing's Pods as its last pass left them (with the cache only)."""
        self.owned_sets: dict[tuple[str, Key], OwnedSet] = {}
        """Each ModelServing's Services and PodGroups (by plural) as its last pass left them
        (with the cache only)."""
        self.known_revisions: dict[Key, _Revisions] = {}
        """Each ModelServing's ControllerRevisions as its last pass left them: a pass lists them
        only when the current revision is not among them or ``REVISIONS_RELIST_S`` has passed."""
        self.deleting: dict[Key, tuple[str, frozenset[str]]] = {}
        """Each ModelServing's (by UID) ServingGroups and role replicas its passes deleted whole
        that still have Pods (``SyncPlan.deleting``): made again once those are gone. Kept in
        memory only, as Kthena's store keeps them: after a restart, missing Pods are made again."""
        self.decide_seconds: dict[Key, float] = {}
        """The CPU each ModelServing's last pass spent on what every pass repeats, however
        little changed: reading the ModelServing and its revisions, bringing its Pods up to
        date, deciding (``sync``), deleting and writing the status. Not counted: listing from
        the API (a first pass, a resync), and the work done per Pod created or made Ready (the
        plugins, the creations, the ServingGroup hooks), which does not repeat."""
        self._broken: set[Key] = set()
        """ModelServings whose plugin list failed to load on their last pass."""
        self._broken_lock = threading.Lock()

    # --- entry point -----------------------------------------------------------------------

    def reconcile(self, key: Key) -> float | None:
        """One pass; the delay before the key should be looked at again (None: on events only).

        Raises RetryLater (or ApiError) when the pass must be retried with backoff.
        """
        namespace, name = key
        started = time.thread_time()
        raw = self._model_serving(namespace, name)
        if raw is None or raw.get("metadata", {}).get("deletionTimestamp"):
            self.forget(key)
            return None
        try:
            ms = parse_model_serving(raw)
        except InvalidManifest as exc:
            self.recorder.event(raw, "Warning", "InvalidSpec", str(exc))
            return None
        refused = refusal(ms, self.settings.max_pods)
        if refused is not None:
            self.recorder.event(raw, "Warning", "InvalidSpec", refused)
            return None
        work = _Pass(key, ms, raw)
        self._load_chain(key, work)
        gang = as_api(self.gang())
        selector = f"{labels.NAME_LABEL}={ms.name}"
        reading = time.thread_time()
        primed = self.cache is not None and all(
            self.cache.primed(res.plural, namespace, name) for res in (PODS, SERVICES)
        )
        pods = self._pods(key, ms, selector)
        services = self._owned(SERVICES, key, ms, selector)
        once = 0.0 if primed else time.thread_time() - reading  # a list: a first pass, a resync
        pod_groups: OwnedSet | list[dict[str, Any]] = []
        if gang.pod_groups:
            if self.cache is not None and self.pod_groups_watched():
                pod_groups = self._owned(POD_GROUPS, key, ms, selector)
            else:
                pod_groups = self.kube.list(POD_GROUPS, namespace, selector)
        history = self._revisions(ms, pods.revisions)
        self._note_failures(pods)
        by_others = self.cache.deleted_by_others(PODS.plural, namespace, name) if self.cache else []
        plan = sync(
            ms,
            pods,
            services,
            pod_groups,
            now=self.clock(),
            gang=gang,
            history=history,
            seen_failed=self.seen_failed,
            lost_nodes=self._lost_nodes(pods.raw.values()),
            recently_gone=(
                self.cache.recently_gone(PODS.plural, namespace, name) if self.cache else ()
            ),
            deleted=by_others,
            deleting=self._deleting(key, ms.metadata.uid),
            ready_hooks=work.chain is not None and work.chain.serves(Hook.ON_POD_READY),
        )
        if plan.deleting:
            self.deleting[key] = (ms.metadata.uid or "", plan.deleting)
        else:
            self.deleting.pop(key, None)
        self._delete(work, plan)
        # acted on (else, after an API error or with a broken plugin list, the next pass looks
        # at them again; so does it at a deletion reported after this pass read the Pods)
        if by_others and self.cache is not None and work.chain is not None and not work.api_errors:
            unseen = set(plan.unseen_deletions)
            uids = [str(p["metadata"].get("uid")) for p in by_others]
            self.cache.handled(PODS.plural, namespace, name, [u for u in uids if u not in unseen])
        self._update_pod_groups(work, plan)
        per_pod = time.thread_time()
        self._create(work, plan)
        self._ready_hooks(work, plan)
        self._group_hooks(work, plan, pods.raw.values())
        once += time.thread_time() - per_pod
        self._write_status(work, plan)
        self.decide_seconds[key] = time.thread_time() - started - once
        self.recorder.pods(work.created, work.deleted)
        if work.api_errors:
            raise RetryLater("; ".join(work.api_errors[:3]))
        if work.pod_failures:
            raise RetryLater(str(work.pod_failures[0]))
        if work.look_again:
            return min(plan.requeue_after or LOOK_AGAIN_S, LOOK_AGAIN_S)
        return plan.requeue_after

    def _model_serving(self, namespace: str, name: str) -> Mapping[str, Any] | None:
        """The ModelServing: the watch's fresh copy, else read from the API (and kept)."""
        latest = self.model_servings
        if latest is not None:
            found = latest.get(namespace, name)
            if found is not None:
                return found
        raw = self.kube.get(MODEL_SERVINGS, namespace, name)
        if latest is not None:
            if raw is None:
                latest.gone(namespace, name)
            else:
                latest.offer(raw)
        return raw

    def _deleting(self, key: Key, uid: str | None) -> frozenset[str]:
        kept = self.deleting.get(key)
        return kept[1] if kept is not None and kept[0] == (uid or "") else frozenset()

    def forget(self, key: Key) -> None:
        self.decide_seconds.pop(key, None)
        self.deleting.pop(key, None)
        self.known_revisions.pop(key, None)
        self.pod_sets.pop(key, None)
        for res in (SERVICES, POD_GROUPS):
            self.owned_sets.pop((res.plural, key), None)
        if self.cache is not None:
            self.cache.drop(*key)
        self.chains.forget(*key)
        self.groups.forget(*key)
        with self._broken_lock:
            self._broken.discard(key)
        self._set_users(key, [])

    def users_of_config_map(self, namespace: str, name: str) -> set[Key]:
        """The ModelServings whose plugins read this ConfigMap."""
        with self._users_lock:
            return set(self.config_map_users.get((namespace, name), ()))

    def _set_users(self, key: Key, config_maps: Iterable[tuple[str, str]]) -> None:
        """Record that ``key`` reads exactly these ConfigMaps (workers call this concurrently)."""
        with self._users_lock:
            for ref in [r for r, users in self.config_map_users.items() if key in users]:
                users = self.config_map_users[ref]
                users.discard(key)
                if not users:
                    del self.config_map_users[ref]
            for ref in config_maps:
                self.config_map_users.setdefault(ref, set()).add(key)

    # --- plugins ---------------------------------------------------------------------------

    def _config_map_of(
        self, ms: ModelServing, spec: PluginSpec
    ) -> tuple[str, str, dict[str, Any] | None, str | None]:
        """(namespace, name, ConfigMap or None, why it is unusable)."""
        assert spec.module is not None
        ref = spec.module.config_map_ref
        namespace = ref.namespace or ms.namespace
        why = outside_plugin_namespaces(
            namespace, ref.name, ms.namespace, self.settings.plugin_namespaces
        )
        if why is not None:
            return namespace, ref.name, None, why
        config_map = self.kube.get(CONFIG_MAPS, namespace, ref.name)
        if config_map is None:
            return namespace, ref.name, None, f"ConfigMap {namespace}/{ref.name} not found"
        return namespace, ref.name, config_map, None

    def _load_chain(self, key: Key, work: _Pass) -> None:
        ms = work.ms
        read: list[tuple[str, str]] = []
        fetched: dict[str, tuple[dict[str, Any] | None, str | None]] = {}
        versions: list[str] = []
        for spec in ms.spec.plugins or []:
            if spec.type != "Wasm" or spec.module is None:
                continue
            namespace, name, config_map, why = self._config_map_of(ms, spec)
            read.append((namespace, name))
            fetched[spec.name + "\0" + spec.module.config_map_ref.key] = (config_map, why)
            rv = (config_map or {}).get("metadata", {}).get("resourceVersion", "-")
            versions.append(f"{namespace}/{name}@{rv}")
        self._set_users(key, read)

        def modules(spec: PluginSpec) -> bytes:
            assert spec.module is not None
            config_map, why = fetched[spec.name + "\0" + spec.module.config_map_ref.key]
            if config_map is None:
                raise ModuleUnavailable(why or "ConfigMap not found")
            key_ = spec.module.config_map_ref.key
            return module_from_config_map(config_map, key_, self.settings.max_module_bytes)

        try:
            chain = self.chains.get(ms, tuple(versions), modules)
        except PluginConfigError as exc:
            work.plugin_error = exc
            with self._broken_lock:
                self._broken.add(key)
            self.recorder.chain_built(exc.failure_class is FailureClass.INVALID_MODULE)
            self.recorder.event(work.raw, "Warning", "PluginLoadFailed", str(exc))
            return
        chain.observer = self.recorder.hook
        work.chain = chain
        with self._broken_lock:
            recovered = key in self._broken
            self._broken.discard(key)
        if recovered:
            self.recorder.event(
                work.raw,
                "Normal",
                "PluginsLoaded",
                f"the plugin list loads again ({len(chain)} plugin(s) ready); Pods are created "
                "and recovered as before",
            )
        if not chain.announced:  # a new chain (one worker per ModelServing at a time)
            chain.announced = True
            self.recorder.chain_built()
            for entry in chain.entries:
                hooks = [str(h) for h in POD_HOOKS if h in entry.hooks]
                digest = f", sha256 {entry.digest[:12]}" if entry.digest else ""
                self.recorder.event(
                    work.raw,
                    "Normal",
                    "PluginLoaded",
                    f"plugin '{entry.name}' (spec.plugins[{entry.index}], {entry.runtime}"
                    f"{digest}) is ready: {', '.join(hooks) or 'no Pod hooks'}",
                )

    # --- revisions -------------------------------------------------------------------------

    def _revisions(
        self, ms: ModelServing, pod_revisions: Iterable[str]
    ) -> dict[str, list[dict[str, Any]]]:
        """Record the current revision as a ControllerRevision; older ones by revision.
        Those some Pod is labelled with (``pod_revisions``) are kept.

        The revisions are the controller's own: a pass lists them when there is no list of this
        ModelServing's UID kept, when it is ``REVISIONS_RELIST_S`` old or lacks the current
        revision (a new template), and otherwise takes them as the last pass left them, with what
        it created and deleted (a list on every pass was an API round trip for a ModelServing
        whose template had not changed). A pass that fails here, or whose create finds the
        name taken by another owner's revision, keeps nothing: the next one lists again."""
        key = (ms.namespace, ms.name)
        uid = ms.metadata.uid or ""
        current = revision_of(ms)
        known = self.known_revisions.pop(key, None)  # kept again only when the pass succeeds
        now = self.monotonic()
        by_rev: dict[str | None, dict[str, Any]] = {}
        if known is not None and known.uid == uid and now - known.listed < REVISIONS_RELIST_S:
            by_rev = _by_revision(known.found)
        if known is None or current not in by_rev:  # none kept, too old, a new template: list
            selector = f"{labels.NAME_LABEL}={ms.name}"
            listed = [
                _slim_revision(r)
                for r in self.kube.list(CONTROLLER_REVISIONS, ms.namespace, selector)
                if owned_by(r, uid)
            ]
            known = _Revisions(uid, listed, now)
            by_rev = _by_revision(listed)
        found = known.found
        kept = True
        if current not in by_rev:
            number = max((int(r.get("revision") or 0) for r in found), default=0) + 1
            body = {
                "apiVersion": "apps/v1",
                "kind": "ControllerRevision",
                "metadata": {
                    "name": f"{ms.name}-{current}",
                    "namespace": ms.namespace,
                    "labels": {labels.NAME_LABEL: ms.name, labels.REVISION_LABEL: current},
                    "ownerReferences": [owner_reference(ms)],
                },
                "data": {"roles": [r.to_api() for r in ms.spec.template.roles]},
                "revision": number,
            }
            made = self.kube.create(CONTROLLER_REVISIONS, ms.namespace, body)
            if made is None:  # one of that name is not this ModelServing's: list again next time
                kept = False
            else:
                found.append(_slim_revision(made))
        in_use: set[str | None] = set(pod_revisions)
        in_use.add(current)
        old = sorted(
            (r for r in found if by_rev.get(_rev(r)) is r and _rev(r) not in in_use),
            key=lambda r: int(r.get("revision") or 0),
        )
        for r in old[: max(len(old) - REVISION_HISTORY, 0)]:
            meta = r["metadata"]  # by UID too: the list may be minutes old
            self.kube.delete(CONTROLLER_REVISIONS, ms.namespace, meta["name"], meta.get("uid"))
            found.remove(r)
        if kept:
            self.known_revisions[key] = known
        return {str(_rev(r)): _history_roles(r) for r in found if _rev(r)}

    def _pods(self, key: Key, ms: ModelServing, selector: str) -> PodSet:
        """The ModelServing's Pods. With the cache, a ``PodSet`` kept from its last pass and
        brought up to date with what changed since; without it, a list from the API."""
        uid = ms.metadata.uid or ""
        if self.cache is None:
            return PodSet.of(ms.name, uid, self.kube.list(PODS, ms.namespace, selector))
        if not self.cache.primed(PODS.plural, ms.namespace, ms.name):
            self._read(PODS, ms, selector)  # lists them (a primed cache's list is not needed)
        kept = self.pod_sets.get(key)
        if kept is None or kept.uid != uid:
            kept = self.pod_sets[key] = PodSet(ms.name, uid)
        changes = self.cache.changes(PODS.plural, ms.namespace, ms.name)
        if changes is not None and kept.whole:
            kept.apply(changes)  # O(changes), not O(Pods)
        else:
            kept.refresh(self.cache.by_name(PODS.plural, ms.namespace, ms.name))
        return kept

    def _owned(
        self, res: Resource, key: Key, ms: ModelServing, selector: str
    ) -> OwnedSet | list[dict[str, Any]]:
        """The ModelServing's Services or PodGroups (``res``). With the cache, an ``OwnedSet``
        kept from its last pass and brought up to date with what changed since (O(changes):
        during a rolling update some of them change in every pass); without it, a list from
        the API."""
        if self.cache is None:
            return self.kube.list(res, ms.namespace, selector)
        if not self.cache.primed(res.plural, ms.namespace, ms.name):
            self._read(res, ms, selector)  # lists them
        uid = ms.metadata.uid or ""
        kept = self.owned_sets.get((res.plural, key))
        if kept is None or kept.uid != uid:
            kept = self.owned_sets[(res.plural, key)] = OwnedSet(uid)
        changes = self.cache.changes(res.plural, ms.namespace, ms.name)
        if changes is not None and kept.whole:
            kept.apply(changes)
        else:
            kept.refresh(self.cache.objects(res.plural, ms.namespace, ms.name))
        return kept

    def _read(self, res: Resource, ms: ModelServing, selector: str) -> list[dict[str, Any]]:
        """The ModelServing's objects of ``res``: from the cache once it holds a list of them,
        else from the API."""
        if self.cache is None:
            return self.kube.list(res, ms.namespace, selector)
        if self.cache.primed(res.plural, ms.namespace, ms.name):
            return self.cache.objects(res.plural, ms.namespace, ms.name)
        items, version = self.kube.list_at(res, ms.namespace, selector)
        return self.cache.prime(res.plural, ms.namespace, ms.name, items, version)

    def _written(self, res: Resource, obj: Mapping[str, Any] | None) -> None:
        if obj is not None and self.cache is not None:
            self.cache.written(res.plural, obj)

    def _lost_nodes(self, pods: Iterable[Mapping[str, Any]]) -> dict[str, str]:
        """The lost Nodes these Pods are on. A deletion the watch reported is confirmed by a
        read of the Node (one of that name may have registered since)."""
        states = self.lost_nodes()
        if not states:
            return {}
        found: dict[str, str] = {}
        for node in {str((p.get("spec") or {}).get("nodeName") or "") for p in pods}:
            state = states.get(node)
            if state == NODE_DELETED and self.kube.get(NODES, None, node) is not None:
                continue
            if state is not None:
                found[node] = state
        return found

    def _note_failures(self, pods: PodSet) -> None:
        """Remember when a failed Pod without a failure time in its status was first seen."""
        now = self.clock()
        for seen in pods.unstamped_failures.values():
            self.seen_failed.setdefault(seen.uid, now)
        if len(self.seen_failed) > 100_000:
            self.seen_failed.clear()

    # --- acting ----------------------------------------------------------------------------

    def _delete(self, work: _Pass, plan: SyncPlan) -> None:
        """Deletions; with a broken plugin list only scale-downs (nothing could be recreated)."""
        ns = work.ms.namespace
        allowed = {"scale"} if work.chain is None else None
        jobs: list[tuple[bool, Future[bool]]] = []
        deleted: list[tuple[Future[bool], str, str]] = []
        pod_groups: list[tuple[Future[bool], str]] = []
        for ref in plan.delete_pods:
            if allowed is None or ref.cause in allowed or ref.force:
                if self.cache is not None:
                    self.cache.will_delete(ref.uid)  # its deletion event is not someone else's
                job = self.writes.submit(self.kube.delete, PODS, ns, ref.name, ref.uid, ref.force)
                jobs.append((True, job))
                deleted.append((job, ref.name, ref.uid))
        for name in plan.delete_services:
            if allowed is None or plan.service_causes.get(name) in allowed:
                jobs.append((False, self.writes.submit(self.kube.delete, SERVICES, ns, name)))
        for name in plan.delete_pod_groups:
            job = self.writes.submit(self.kube.delete, POD_GROUPS, ns, name)
            jobs.append((False, job))
            pod_groups.append((job, name))
        for note in plan.notes:
            log.info("ModelServing %s: %s", work.ms.ref, note)
            self.recorder.event(work.raw, "Normal", "Recreating", note)
        for is_pod, job in jobs:
            try:
                if job.result() and is_pod:
                    work.deleted += 1
            except ApiError as exc:
                work.api_errors.append(str(exc))
        if self.cache is not None:
            for job, name, uid in deleted:
                if job.done() and job.exception() is not None:
                    self.cache.not_deleting(uid)  # not deleted: a later deletion is not ours
                elif job.done() and job.result():
                    self.cache.deleting(PODS.plural, ns, work.ms.name, name, uid)
            for job, name in pod_groups:  # gone at once (no finalizers): not counted again
                if job.done() and job.exception() is None:
                    self.cache.deleted(POD_GROUPS.plural, ns, work.ms.name, name)

    def _update_pod_groups(self, work: _Pass, plan: SyncPlan) -> None:
        """Bring existing PodGroups to Kthena's spec (merge patches of the fields it manages)."""
        ns = work.ms.namespace
        jobs = [
            self.writes.submit(self.kube.merge_patch, POD_GROUPS, ns, name, patch)
            for name, patch in plan.update_pod_groups.items()
        ]
        for job in jobs:
            try:
                self._written(POD_GROUPS, job.result())
            except ApiError as exc:
                if not exc.not_found:
                    work.api_errors.append(str(exc))

    def _create(self, work: _Pass, plan: SyncPlan) -> None:
        if work.chain is None or not plan.creates:
            return
        jobs: list[tuple[GroupWork, Future[int], list[dict[str, Any]]]] = []
        ahead = threading.BoundedSemaphore(max(1, self.settings.groups_ahead))
        for group in plan.creates:
            if self.backlog is not None:
                self.backlog.wait_for_room(lambda: self.stopping(work.key))
            ahead.acquire()
            if self.stopping(work.key):
                ahead.release()
                break
            steps = self._run_chain(work, group)
            if steps is None:
                ahead.release()
                continue
            pods = [obj for obj in steps if obj.get("kind") != "Service"]
            job = self.writes.submit(self._create_group, work, group, pods)
            job.add_done_callback(lambda _: ahead.release())
            jobs.append((group, job, [obj for obj in steps if obj.get("kind") == "Service"]))
        due: list[dict[str, Any]] = []
        for group, job, group_services in jobs:
            try:
                work.created += job.result()
            except ApiError as exc:
                work.api_errors.append(str(exc))
                self._refused(work, f"ServingGroup {group.name}", exc)
                continue
            due += group_services
        if self.stopping(work.key):
            return
        # only now, every Pod of the pass written: a Service before them would have the
        # endpoint controllers match each of their events against it
        services = [self.writes.submit(self._create_service, work, s) for s in due]
        for service, done in zip(due, services, strict=True):
            try:
                done.result()
            except ApiError as exc:
                work.api_errors.append(str(exc))
                self._refused(work, f"Service {service['metadata']['name']}", exc)

    def _refused(self, work: _Pass, what: str, exc: ApiError) -> None:
        """A Warning event ``FailedCreate`` when the API server refused an object as invalid
        (400, 422: a Pod template the CRD leaves open, a field only the Pod API checks), so the
        cause shows on the ModelServing, not only in the controller's log."""
        if exc.status in (400, 422):
            self.recorder.event(
                work.raw,
                "Warning",
                "FailedCreate",
                f"{what}: the API server refused {exc}; retrying with backoff",
            )

    def _create_service(self, work: _Pass, service: dict[str, Any]) -> None:
        self._written(SERVICES, self.kube.create(SERVICES, work.ms.namespace, service))

    def _run_chain(self, work: _Pass, group: GroupWork) -> list[dict[str, Any]] | None:
        """Every object of the ServingGroup to create, after OnPodCreate; None when a
        Fail-policy plugin failed on one of its Pods (then nothing of it is created)."""
        assert work.chain is not None
        out: list[dict[str, Any]] = []
        monitored: dict[str, list[tuple[str, Outcome]]] = {}
        for step in group.steps:
            if not isinstance(step, DesiredPod):
                out.append(step)
                continue
            try:
                result = work.chain.on_pod_create(step, work.ms)
            except PluginFailure as failure:
                work.pod_failures.append(failure)
                self.recorder.event(
                    work.raw,
                    "Warning",
                    "PluginFailed",
                    f"{failure}; ServingGroup {group.name} was not created (failure policy Fail)"
                    "; retrying with backoff",
                )
                return None
            for ignored in result.ignored:
                self.recorder.event(
                    work.raw,
                    "Warning",
                    "PluginIgnored",
                    f"{ignored.failure}; Pod created without this plugin's changes "
                    "(failure policy Ignore)",
                )
            for outcome in result.monitored:
                monitored.setdefault(outcome.plugin, []).append((step.name, outcome))
            out.append(result.pod)
        for plugin, outcomes in monitored.items():
            self.recorder.event(
                work.raw, "Normal", "PluginMonitored", monitor_report(plugin, group.name, outcomes)
            )
        return out

    def _create_group(self, work: _Pass, group: GroupWork, pods: list[dict[str, Any]]) -> int:
        """Create in order: PodGroup, then each entry Pod and its workers."""
        ns = work.ms.namespace
        if self.stopping(work.key):
            return 0
        if group.pod_group is not None:
            self._written(POD_GROUPS, self.kube.create(POD_GROUPS, ns, group.pod_group))
        created = 0
        for obj in pods:
            if self.stopping(work.key):
                break  # deleted meanwhile: what is in flight finishes, nothing more starts
            made = self.kube.create(PODS, ns, obj, as_sent=True)
            if made is not None:
                made.setdefault("status", {"phase": "Pending"})  # as the API server sets it
                self._written(PODS, made)
                if self.backlog is not None:
                    self.backlog.created(made)
                created += 1
        return created

    def _ready_hooks(self, work: _Pass, plan: SyncPlan) -> None:
        chain = work.chain
        if chain is None:
            return
        for desired in plan.ready_hooks:
            if not chain.has_ready_hooks(desired):
                continue
            if self.cache is None:
                pod = desired.pod
            else:
                # the cache keeps no Pod spec: the hooks get the Pod as the API has it now
                found = self.kube.get(PODS, work.ms.namespace, desired.name)
                notes = ((found or {}).get("metadata") or {}).get("annotations") or {}
                if found is None or READY_HOOKS_ANNOTATION in notes:
                    continue  # gone, or claimed since the cache's copy
                pod = found
            meta = pod.get("metadata", {})
            claim = {
                "metadata": {
                    "resourceVersion": meta.get("resourceVersion"),
                    "annotations": {READY_HOOKS_ANNOTATION: _ready_plugins(chain, desired)},
                }
            }
            try:
                self._written(
                    PODS, self.kube.merge_patch(PODS, work.ms.namespace, desired.name, claim)
                )
            except ApiError as exc:
                if exc.conflict:
                    work.look_again = True  # changed since listed: decide again shortly
                elif not exc.not_found:
                    work.api_errors.append(str(exc))
                continue
            monitors = {e.name for e in chain.entries if e.spec.monitor}
            for failure in chain.on_pod_ready(desired, pod, work.ms):
                if failure.plugin in monitors:
                    message = f"{failure} (mode Monitor: nothing blocked)"
                    self.recorder.event(work.raw, "Normal", "PluginMonitored", message)
                else:
                    self.recorder.event(work.raw, "Warning", "PluginFailed", str(failure))

    def _group_hooks(self, work: _Pass, plan: SyncPlan, pods: Iterable[Mapping[str, Any]]) -> None:
        if work.chain is None:
            return  # a broken plugin list: leave every owned object as it is
        try:
            done = self.groups.run(
                work.ms, work.raw, work.chain, pods, plan.groups, lambda: self.stopping(work.key)
            )
        except ApiError as exc:
            work.api_errors.append(str(exc))
            return
        work.pod_failures.extend(done.failures)
        work.api_errors.extend(done.api_errors)
        work.look_again = work.look_again or done.look_again

    def _write_status(self, work: _Pass, plan: SyncPlan) -> None:
        assert plan.status is not None
        new = status_.build(
            work.ms,
            work.raw.get("status") or {},
            plan.status,
            status_.plugins_condition(work.ms, work.plugin_error, work.pod_failures),
            self.clock(),
        )
        if new != (work.raw.get("status") or {}):
            try:
                written = self.kube.merge_patch(
                    MODEL_SERVINGS, work.ms.namespace, work.ms.name, {"status": new}, "status"
                )
            except ApiError as exc:
                if exc.not_found:
                    if self.model_servings is not None:
                        uid = work.ms.metadata.uid
                        self.model_servings.gone(work.ms.namespace, work.ms.name, uid)
                else:
                    work.api_errors.append(str(exc))
            else:
                if self.model_servings is not None and isinstance(written, Mapping):
                    self.model_servings.offer(written)


def _history_roles(revision: Mapping[str, Any]) -> list[Any]:
    """A ControllerRevision's roles: ours keep them under ``data.roles``, Kthena's (same name,
    same labels, adopted when switching controllers) under ``data.data``."""
    data = revision.get("data") or {}
    roles = data.get("roles")
    if roles is None:
        roles = data.get("data")
    return list(roles or [])


def _slim_revision(revision: Mapping[str, Any]) -> dict[str, Any]:
    """What a pass reads of a ControllerRevision (name, UID, labels, number, its data: the
    roles, ``_history_roles``), kept between passes without the rest (``managedFields``)."""
    meta = revision.get("metadata") or {}
    return {
        "metadata": {key: meta[key] for key in ("name", "uid", "labels") if key in meta},
        "revision": revision.get("revision"),
        "data": revision.get("data"),
    }


def _by_revision(found: Iterable[dict[str, Any]]) -> dict[str | None, dict[str, Any]]:
    """ControllerRevisions by their revision label (``_rev``; the last of a label wins)."""
    return {_rev(r): r for r in found}


def _rev(obj: Mapping[str, Any]) -> str | None:
    value = (obj.get("metadata") or {}).get("labels", {}).get(labels.REVISION_LABEL)
    return str(value) if value else None


MONITOR_QUOTE = 600
"""Most characters of a monitored patch an event quotes."""


def monitor_report(plugin: str, group: str, outcomes: list[tuple[str, Outcome]]) -> str:
    """The event of a plugin in Monitor mode for one ServingGroup's new Pods: how many it would
    have changed or failed on, and the first such Pod's patch or failure."""
    changed = [(pod, o) for pod, o in outcomes if o.failure is None and o.patch]
    failed = [(pod, o) for pod, o in outcomes if o.failure is not None]
    parts = [
        f"plugin '{plugin}' (mode Monitor) OnPodCreate on ServingGroup {group}: would change "
        f"{len(changed)} of {len(outcomes)} Pods"
    ]
    if failed:
        parts.append(
            f"would fail on {len(failed)}, first on Pod {failed[0][0]}: {failed[0][1].failure}"
        )
    if changed:
        pod, outcome = changed[0]
        patch = json.dumps(outcome.patch, separators=(",", ":"), sort_keys=True)
        if len(patch) > MONITOR_QUOTE:
            patch = patch[:MONITOR_QUOTE] + "...[cut]"
        parts.append(f"Pod {pod} would get {patch}")
    return "; ".join(parts) + " (nothing applied)"


def _ready_plugins(chain: Chain, desired: DesiredPod) -> str:
    """The claim mark: which plugins' OnPodReady ran for this Pod."""
    names = [e.name for e in chain.entries if e.serves(Hook.ON_POD_READY, desired.place)]
    return json.dumps(names, separators=(",", ":"))
