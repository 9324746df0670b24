"""One reconcile pass against an in-memory API: creates, status writes, plugins, OnPodReady."""

from __future__ import annotations

import base64
import copy
import hashlib
import itertools
import json
import threading
import time
from collections.abc import Callable, Iterator
from concurrent.futures import Future, ThreadPoolExecutor
from typing import Any

import pytest

from modelserving.api import ModelServing, labels, parse_model_serving
from modelserving.api.errors import FailureClass
from modelserving.api.hook import Hook
from modelserving.chain import CallRecord, Chain, ChainCache, ModuleResolver
from modelserving.controller.kube import (
    CONFIG_MAPS,
    CONTROLLER_REVISIONS,
    MODEL_SERVINGS,
    PODS,
    SERVICES,
    ApiError,
    Kube,
    Resource,
)
from modelserving.controller.pacing import StartBacklog
from modelserving.controller.reconciler import (
    REVISION_HISTORY,
    REVISIONS_RELIST_S,
    Reconciler,
    ReconcilerSettings,
    Recorder,
    RetryLater,
)
from modelserving.plugins.artifacts import builtin_wasm
from modelserving.plugins.exports import plugin_sandbox
from modelserving.plugins.modules import gzip_module
from modelserving.sandbox import Sandbox, SandboxSettings
from modelserving.workload.observed import READY_HOOKS_ANNOTATION
from modelserving.workload.plan import plan
from modelserving.workload.revision import revision
from modelserving.workload.sync import sync
from tests.unit.conftest import manifest, role
from tests.wasm.guests import guest, hook, returns

NS = "team-a"
KEY = (NS, "sample")
T0 = 1_700_000_000.0

Obj = dict[str, Any]
ObjKey = tuple[str, str, str]

TRAP = guest(hook("unreachable"))
"""OnPodCreate traps on every call."""

READY_ONLY = guest(
    '(data (i32.const 1024) "\\80")',  # an empty msgpack map: no patch, no error
    hook(returns(1024, 1), "ms_on_pod_ready"),
)
"""Only OnPodReady, which succeeds."""


# --- the fakes -------------------------------------------------------------------------------


def _merge(target: Obj, patch: Obj) -> None:
    """RFC 7386 JSON merge patch, in place."""
    for k, v in patch.items():
        if v is None:
            target.pop(k, None)
        elif isinstance(v, dict) and isinstance(target.get(k), dict):
            _merge(target[k], v)
        else:
            target[k] = copy.deepcopy(v)


def _matches(obj: Obj, selector: str | None) -> bool:
    if not selector:
        return True
    have = (obj.get("metadata") or {}).get("labels") or {}
    for term in selector.split(","):
        k, equals, v = term.partition("=")
        if (have.get(k) != v) if equals else (k not in have):  # key=value, or key (exists)
            return False
    return True


class FakeKube(Kube):
    """The API server in dicts keyed by (plural, namespace, name); records every write."""

    def __init__(self) -> None:
        super().__init__(api=None)
        self.lock = threading.Lock()
        self.objects: dict[ObjKey, Obj] = {}
        self.writes: list[tuple[str, str, str, str | None]] = []  # verb, plural, name, sub
        self.created: list[Obj] = []
        self.lists = 0
        """Lists read with their resourceVersion (the cache's)."""
        self.forced: list[str] = []
        """Names of the objects deleted with a grace period of 0."""
        self._uids = itertools.count(1)
        self._versions = itertools.count(100)
        self.touch_pods_after_list = False

    # --- helpers for the tests -------------------------------------------------------------

    def _bump(self, obj: Obj) -> None:
        obj.setdefault("metadata", {})["resourceVersion"] = str(next(self._versions))

    def put(self, res: Resource, obj: Obj) -> Obj:
        """Store ``obj`` as is (keeping its uid), as if someone else had created it."""
        obj = copy.deepcopy(obj)
        meta = obj.setdefault("metadata", {})
        meta.setdefault("namespace", NS)
        meta.setdefault("uid", f"uid-put-{next(self._uids)}")
        with self.lock:
            self._bump(obj)
            self.objects[(res.plural, meta["namespace"], meta["name"])] = obj
        return obj

    def stored(self, res: Resource, name: str, namespace: str = NS) -> Obj | None:
        return self.objects.get((res.plural, namespace, name))

    def all(self, res: Resource, namespace: str = NS) -> dict[str, Obj]:
        return {
            k[2]: v for k, v in self.objects.items() if k[0] == res.plural and k[1] == namespace
        }

    def count(self, verb: str, res: Resource, sub: str | None = None) -> int:
        return sum(1 for w in self.writes if w[0] == verb and w[1] == res.plural and w[3] == sub)

    def edit(self, res: Resource, name: str, change: Callable[[Obj], None]) -> None:
        with self.lock:
            obj = self.objects[(res.plural, NS, name)]
            change(obj)
            self._bump(obj)

    def remove(self, res: Resource, name: str) -> None:
        with self.lock:
            del self.objects[(res.plural, NS, name)]

    # --- Kube ------------------------------------------------------------------------------

    def request(
        self,
        method: str,
        path: str,
        body: Any = None,
        query: dict[str, str] | None = None,
        content_type: str = "application/json",
        accept: str = "application/json",
    ) -> Any:
        raise AssertionError(f"unexpected raw request {method} {path}")

    def get(self, res: Resource, namespace: str | None, name: str) -> Obj | None:
        with self.lock:
            obj = self.objects.get((res.plural, namespace or "", name))
            return copy.deepcopy(obj) if obj is not None else None

    def list_at(
        self, res: Resource, namespace: str | None, selector: str | None = None
    ) -> tuple[list[Obj], str]:
        with self.lock:
            self.lists += 1
            version = str(next(self._versions))
        return self.list(res, namespace, selector), version

    def list(self, res: Resource, namespace: str | None, selector: str | None = None) -> list[Obj]:
        with self.lock:
            found = [
                copy.deepcopy(obj)
                for (plural, ns, _), obj in sorted(self.objects.items())
                if plural == res.plural and ns == namespace and _matches(obj, selector)
            ]
            if res is PODS and self.touch_pods_after_list:
                for (plural, _, _), obj in self.objects.items():
                    if plural == PODS.plural:
                        self._bump(obj)  # e.g. the kubelet updated the status since the list
            return found

    def create(
        self,
        res: Resource,
        namespace: str,
        body: Obj,
        field_manager: str | None = None,
        *,
        as_sent: bool = False,
    ) -> Obj | None:
        """As the API server does; ``as_sent`` answers as ``Kube.create`` then does: the object
        sent with the stored metadata, and no status."""
        obj = copy.deepcopy(body)
        meta = obj.setdefault("metadata", {})
        if field_manager:
            meta["managedFields"] = [{"manager": field_manager, "operation": "Update"}]
        key = (res.plural, namespace, meta["name"])
        with self.lock:
            self.writes.append(("create", res.plural, meta["name"], None))
            if key in self.objects:
                return None
            meta["namespace"] = namespace
            meta["uid"] = f"uid-{res.plural}-{next(self._uids)}"
            self._bump(obj)
            self.objects[key] = obj
            self.created.append(obj)
            if as_sent:
                return {**copy.deepcopy(body), "metadata": copy.deepcopy(meta)}
            return copy.deepcopy(obj)

    def delete(
        self,
        res: Resource,
        namespace: str,
        name: str,
        uid: str | None = None,
        force: bool = False,
    ) -> bool:
        key = (res.plural, namespace, name)
        with self.lock:
            self.writes.append(("delete", res.plural, name, None))
            if force:
                self.forced.append(name)
            obj = self.objects.get(key)
            if obj is None or (uid and obj["metadata"].get("uid") != uid):
                return False
            del self.objects[key]
            return True

    def apply(self, res: Resource, namespace: str, body: Obj, field_manager: str) -> Obj:
        """Server-side apply by the only manager of the object's fields: what ``body`` leaves
        out goes, as with the real API server once the fields are the manager's applied ones
        (labels and annotations others set are kept)."""
        obj = copy.deepcopy(body)
        meta = obj["metadata"]
        key = (res.plural, namespace, meta["name"])
        path = res.path(namespace, meta["name"])
        with self.lock:
            self.writes.append(("apply", res.plural, meta["name"], None))
            old = self.objects.get(key)
            if old is None:
                raise AssertionError("the controller applies only objects it created")
            wanted = meta.pop("resourceVersion", None)
            if wanted is not None and wanted != old["metadata"].get("resourceVersion"):
                raise ApiError(409, "PATCH", path, "the object has been modified")
            entries = old["metadata"].get("managedFields") or []
            if any(e["manager"] == field_manager and e["operation"] == "Update" for e in entries):
                raise AssertionError("applied over fields the manager wrote by update")
            meta["namespace"] = namespace
            meta["uid"] = old["metadata"]["uid"]
            meta["managedFields"] = [{"manager": field_manager, "operation": "Apply"}]
            self._bump(obj)
            self.objects[key] = obj
            return copy.deepcopy(obj)

    def adopt_updates(self, res: Resource, obj: Obj, field_manager: str) -> Obj:
        meta = obj["metadata"]
        key = (res.plural, meta["namespace"], meta["name"])
        with self.lock:
            stored = self.objects.get(key)
            entries = (stored or {}).get("metadata", {}).get("managedFields") or []
            if stored is None or not any(e["operation"] == "Update" for e in entries):
                return obj
            self.writes.append(("adopt", res.plural, meta["name"], None))
            if stored["metadata"]["resourceVersion"] != meta["resourceVersion"]:
                raise ApiError(409, "PATCH", res.path(meta["namespace"], meta["name"]), "moved")
            stored["metadata"]["managedFields"] = [
                {**e, "operation": "Apply"} if e["manager"] == field_manager else e for e in entries
            ]
            self._bump(stored)
            return copy.deepcopy(stored)

    def merge_patch(
        self, res: Resource, namespace: str, name: str, patch: Obj, sub: str | None = None
    ) -> Obj:
        path = res.path(namespace, name, sub)
        with self.lock:
            self.writes.append(("patch", res.plural, name, sub))
            obj = self.objects.get((res.plural, namespace, name))
            if obj is None:
                raise ApiError(404, "PATCH", path, "not found")
            patch = copy.deepcopy(patch)
            wanted = (patch.get("metadata") or {}).pop("resourceVersion", None)
            if wanted is not None and wanted != obj["metadata"].get("resourceVersion"):
                raise ApiError(409, "PATCH", path, "the object has been modified")
            if sub == "status":
                patch = {"status": patch.get("status")}
            else:
                patch.pop("status", None)
            _merge(obj, patch)
            self._bump(obj)
            return copy.deepcopy(obj)


class Recording(Recorder):
    def __init__(self) -> None:
        self.lock = threading.Lock()
        self.events: list[tuple[str, str, str]] = []
        self.hooks: list[CallRecord] = []
        self.pod_counts: list[tuple[int, int]] = []
        self.builds: list[bool] = []
        self.object_counts: dict[tuple[str, str], int] = {}

    def objects(self, plugin: str, action: str, n: int) -> None:
        with self.lock:
            key = (plugin, action)
            self.object_counts[key] = self.object_counts.get(key, 0) + n

    def event(self, obj: Any, type_: str, reason: str, message: str) -> None:
        with self.lock:
            self.events.append((type_, reason, message))

    def hook(self, record: CallRecord) -> None:
        with self.lock:
            self.hooks.append(record)

    def pods(self, created: int, deleted: int) -> None:
        with self.lock:
            self.pod_counts.append((created, deleted))

    def chain_built(self, failed: bool = False) -> None:
        with self.lock:
            self.builds.append(failed)

    def reasons(self, type_: str | None = None) -> list[str]:
        return [r for t, r, _ in self.events if type_ is None or t == type_]

    def messages(self, reason: str) -> list[str]:
        return [m for _, r, m in self.events if r == reason]


class Clock:
    def __init__(self) -> None:
        self.now = T0

    def __call__(self) -> float:
        self.now += 1.0  # every reading is a second later: kept times must really be kept
        return self.now


# --- fixtures and helpers --------------------------------------------------------------------


@pytest.fixture(scope="module")
def sandbox(tmp_path_factory: pytest.TempPathFactory) -> Sandbox:
    return plugin_sandbox(SandboxSettings(cache_dir=tmp_path_factory.mktemp("wasm-cache")))


@pytest.fixture
def writes() -> Iterator[ThreadPoolExecutor]:
    with ThreadPoolExecutor(max_workers=4) as pool:
        yield pool


@pytest.fixture
def kube() -> FakeKube:
    return FakeKube()


@pytest.fixture
def recorder() -> Recording:
    return Recording()


MakeReconciler = Callable[..., Reconciler]


@pytest.fixture
def make_reconciler(
    kube: FakeKube, writes: ThreadPoolExecutor, recorder: Recording, sandbox: Sandbox
) -> MakeReconciler:
    def make(
        plugin_namespaces: frozenset[str] = frozenset(), max_pods: int = 100_000
    ) -> Reconciler:
        return Reconciler(
            kube,
            ChainCache(sandbox=sandbox),
            writes,
            ReconcilerSettings(plugin_namespaces=plugin_namespaces, max_pods=max_pods),
            recorder,
            clock=Clock(),
            monotonic=Clock(),
        )

    return make


@pytest.fixture
def rec(make_reconciler: MakeReconciler) -> Reconciler:
    return make_reconciler()


def model_serving(
    replicas: int = 2, plugins: list[Obj] | None = None, workers: int = 1, **spec: Any
) -> Obj:
    if plugins is not None:
        spec["plugins"] = plugins
    return manifest(roles=[role(workers=workers)], replicas=replicas, **spec)


def config_map(name: str, module: bytes, namespace: str = NS, key: str = "plugin.wasm") -> Obj:
    return {
        "apiVersion": "v1",
        "kind": "ConfigMap",
        "metadata": {"name": name, "namespace": namespace},
        "binaryData": {key: base64.b64encode(module).decode()},
    }


def wasm_plugin(
    name: str,
    config_map: str,
    module: bytes,
    namespace: str | None = None,
    **extra: Any,
) -> Obj:
    ref = {"name": config_map, "key": "plugin.wasm"}
    if namespace is not None:
        ref["namespace"] = namespace
    return {
        "name": name,
        "type": "Wasm",
        "module": {"configMapRef": ref, "sha256": hashlib.sha256(module).hexdigest()},
        **extra,
    }


def status_of(kube: FakeKube) -> Obj:
    ms = kube.stored(MODEL_SERVINGS, "sample")
    assert ms is not None
    return dict(ms.get("status") or {})


def condition(kube: FakeKube, type_: str) -> Obj:
    for cond in status_of(kube).get("conditions") or []:
        if cond["type"] == type_:
            return dict(cond)
    raise AssertionError(f"no condition {type_}")


def plugins_ready(kube: FakeKube) -> tuple[str, str]:
    cond = condition(kube, "PluginsReady")
    return cond["status"], cond["reason"]


def set_running(kube: FakeKube, name: str, ready: bool = True) -> None:
    def change(pod: Obj) -> None:
        pod["status"] = {
            "phase": "Running",
            "conditions": [{"type": "Ready", "status": "True" if ready else "False"}],
            "containerStatuses": [{"name": "entry", "restartCount": 0}],
        }

    kube.edit(PODS, name, change)


def set_failed(kube: FakeKube, name: str) -> None:
    def change(pod: Obj) -> None:
        pod["status"] = {"phase": "Failed"}

    kube.edit(PODS, name, change)


def group_of(obj: Obj) -> str:
    return str(obj["metadata"]["labels"][labels.GROUP_NAME_LABEL])


def pods_of_group(kube: FakeKube, group: str) -> list[str]:
    return sorted(n for n, p in kube.all(PODS).items() if group_of(p) == group)


def env_names(pod: Obj) -> set[str]:
    return {e["name"] for c in pod["spec"]["containers"] for e in c.get("env") or []}


# --- a first pass and the passes after it ----------------------------------------------------


def test_a_first_pass_creates_everything_in_order(kube: FakeKube, rec: Reconciler) -> None:
    raw = kube.put(MODEL_SERVINGS, model_serving(replicas=2))
    assert rec.reconcile(KEY) is None

    ms = parse_model_serving(raw)
    kinds = [o.get("kind") for o in kube.created if o.get("kind") in ("Pod", "Service")]
    # every Service after every Pod of the pass, as Kthena's pass does: while a Service exists,
    # the control plane's endpoint controllers match each Pod event in the namespace against it
    assert kinds == ["Pod"] * 4 + ["Service"] * 2
    for group in plan(ms):
        pods: list[str] = []
        services: list[str] = []
        for replica in group.roles:
            pods += [replica.entry.name, *(w.name for w in replica.workers)]
            if replica.service is not None:
                services.append(replica.service["metadata"]["name"])
        made = [
            o["metadata"]["name"]
            for o in kube.created
            if o.get("kind") in ("Pod", "Service") and group_of(o) == group.name
        ]
        assert made == pods + services
    assert len(kube.all(PODS)) == 4
    assert len(kube.all(SERVICES)) == 2
    for pod in kube.all(PODS).values():
        owner = pod["metadata"]["ownerReferences"][0]
        assert (owner["uid"], owner["controller"]) == ("uid-1", True)


def test_a_first_pass_writes_the_status(
    kube: FakeKube, rec: Reconciler, recorder: Recording
) -> None:
    raw = kube.put(MODEL_SERVINGS, model_serving(replicas=2))
    rec.reconcile(KEY)
    assert kube.count("patch", MODEL_SERVINGS, "status") == 1
    st = status_of(kube)
    rev = revision(parse_model_serving(raw))
    assert st["updateRevision"] == rev
    assert st["observedGeneration"] == 1
    assert plugins_ready(kube) == ("True", "NoPlugins")
    assert condition(kube, "Available")["status"] == "False"
    assert recorder.pod_counts == [(4, 0)]
    assert "PluginLoaded" not in recorder.reasons()


def test_a_builtin_plugin_is_loaded_and_applied(
    kube: FakeKube, rec: Reconciler, recorder: Recording
) -> None:
    tweaks = {"name": "demo-pod-tweaks", "config": {"annotations": {"example.com/team": "llm"}}}
    kube.put(MODEL_SERVINGS, model_serving(plugins=[tweaks]))
    rec.reconcile(KEY)
    assert plugins_ready(kube) == ("True", "PluginsLoaded")
    loaded = [(t, m) for t, r, m in recorder.events if r == "PluginLoaded"]
    assert len(loaded) == 1
    assert loaded[0][0] == "Normal"
    assert "'demo-pod-tweaks'" in loaded[0][1]
    assert "OnPodCreate" in loaded[0][1]
    assert len(kube.all(PODS)) == 4
    for pod in kube.all(PODS).values():
        assert pod["metadata"]["annotations"]["example.com/team"] == "llm"
    hooks = [(h.plugin, h.hook, h.result) for h in recorder.hooks]
    assert hooks == [("demo-pod-tweaks", str(Hook.ON_POD_CREATE), "ok")] * 4
    rec.reconcile(KEY)
    assert len(recorder.messages("PluginLoaded")) == 1  # the cached chain is not announced again


def test_later_passes_create_nothing_and_skip_an_unchanged_status(
    kube: FakeKube, rec: Reconciler
) -> None:
    kube.put(MODEL_SERVINGS, model_serving(replicas=2))
    rec.reconcile(KEY)
    created = len(kube.created)
    first = status_of(kube)
    rec.reconcile(KEY)  # now the Pods exist: the counts change, so the status is written
    assert len(kube.created) == created
    assert kube.count("patch", MODEL_SERVINGS, "status") == 2
    assert status_of(kube)["replicas"] == 2
    writes = len(kube.writes)
    rec.reconcile(KEY)
    rec.reconcile(KEY)
    assert len(kube.writes) == writes  # nothing changed: no create, delete or status write
    times = {c["type"]: c["lastTransitionTime"] for c in first["conditions"]}
    assert {c["type"]: c["lastTransitionTime"] for c in status_of(kube)["conditions"]} == times


def test_a_pass_records_the_cpu_of_what_every_pass_repeats(
    kube: FakeKube, rec: Reconciler, monkeypatch: pytest.MonkeyPatch
) -> None:
    """``decide_seconds`` counts deciding (what every pass repeats), not listing (a first pass,
    a resync) nor the work per Pod created (the plugins and the creations): neither a slow list
    nor many new Pods widen the event window."""

    def burn(seconds: float) -> None:
        end = time.thread_time() + seconds
        while time.thread_time() < end:
            pass

    real_sync = sync

    def slow_sync(*args: Any, **kwargs: Any) -> Any:
        burn(0.05)
        return real_sync(*args, **kwargs)

    real_list, real_create = kube.list, rec._create

    def slow_list(res: Any, *args: Any, **kwargs: Any) -> Any:
        if res is PODS:  # the revisions are listed on every pass: those count
            burn(0.1)
        return real_list(res, *args, **kwargs)

    def slow_create(*args: Any, **kwargs: Any) -> None:
        burn(0.2)
        real_create(*args, **kwargs)

    monkeypatch.setattr("modelserving.controller.reconciler.sync", slow_sync)
    monkeypatch.setattr(kube, "list", slow_list)
    monkeypatch.setattr(rec, "_create", slow_create)
    kube.put(MODEL_SERVINGS, model_serving(replicas=1))
    rec.reconcile(KEY)
    assert 0.05 <= rec.decide_seconds[KEY] < 0.1
    rec.forget(KEY)
    assert KEY not in rec.decide_seconds


def test_ready_pods_make_the_model_serving_available(kube: FakeKube, rec: Reconciler) -> None:
    kube.put(MODEL_SERVINGS, model_serving(replicas=2))
    rec.reconcile(KEY)
    for name in kube.all(PODS):
        set_running(kube, name)
    assert rec.reconcile(KEY) is None
    st = status_of(kube)
    assert (st["replicas"], st["availableReplicas"], st["updatedReplicas"]) == (2, 2, 2)
    assert (condition(kube, "Available")["status"], condition(kube, "Available")["reason"]) == (
        "True",
        "AllGroupsReady",
    )


def test_the_revision_is_recorded_once(kube: FakeKube, rec: Reconciler) -> None:
    raw = kube.put(MODEL_SERVINGS, model_serving(replicas=1))
    rec.reconcile(KEY)
    rec.reconcile(KEY)
    rev = revision(parse_model_serving(raw))
    revisions = kube.all(CONTROLLER_REVISIONS)
    assert list(revisions) == [f"sample-{rev}"]
    cr = revisions[f"sample-{rev}"]
    assert cr["revision"] == 1
    assert cr["metadata"]["labels"] == {labels.NAME_LABEL: "sample", labels.REVISION_LABEL: rev}
    assert cr["metadata"]["ownerReferences"][0]["uid"] == "uid-1"
    assert cr["data"]["roles"][0]["name"] == "server"
    assert kube.count("create", CONTROLLER_REVISIONS) == 1
    assert kube.created[0]["kind"] == "ControllerRevision"  # before any Pod


def new_image(kube: FakeKube, image: str, generation: int) -> None:
    def change(ms: Obj) -> None:
        ms["spec"]["template"]["roles"][0]["entryTemplate"]["spec"]["containers"][0]["image"] = (
            image
        )
        ms["metadata"]["generation"] = generation

    kube.edit(MODEL_SERVINGS, "sample", change)


def test_a_new_template_gets_the_next_revision_number(kube: FakeKube, rec: Reconciler) -> None:
    kube.put(MODEL_SERVINGS, model_serving(replicas=1))
    rec.reconcile(KEY)
    new_image(kube, "nginx:1.29.0", 2)
    rec.reconcile(KEY)
    numbers = sorted(r["revision"] for r in kube.all(CONTROLLER_REVISIONS).values())
    assert numbers == [1, 2]


class Revisions:
    """Counts the lists of ControllerRevisions a reconciler makes; its monotonic clock set by
    hand."""

    def __init__(self, kube: FakeKube, rec: Reconciler, monkeypatch: pytest.MonkeyPatch) -> None:
        self.lists = 0
        self.now = 0.0
        listed = kube.list

        def counting(res: Resource, namespace: str | None, selector: str | None = None) -> Any:
            if res is CONTROLLER_REVISIONS:
                self.lists += 1
            return listed(res, namespace, selector)

        monkeypatch.setattr(kube, "list", counting)
        rec.monotonic = lambda: self.now


@pytest.fixture
def revisions(kube: FakeKube, rec: Reconciler, monkeypatch: pytest.MonkeyPatch) -> Revisions:
    """The lists counted, the clock set by hand, and ModelServing ``sample`` (one ServingGroup)
    reconciled once: its first revision made."""
    counted = Revisions(kube, rec, monkeypatch)
    kube.put(MODEL_SERVINGS, model_serving(replicas=1))
    rec.reconcile(KEY)
    return counted


def test_passes_list_the_revisions_once_until_the_relist_time(
    kube: FakeKube, rec: Reconciler, revisions: Revisions
) -> None:
    for _ in range(4):
        revisions.now += 10.0
        rec.reconcile(KEY)
    assert revisions.lists == 1
    assert kube.count("create", CONTROLLER_REVISIONS) == 1
    (name,) = kube.all(CONTROLLER_REVISIONS)
    kube.edit(CONTROLLER_REVISIONS, name, lambda r: r["metadata"].update(managedFields=[{}]))
    revisions.now = REVISIONS_RELIST_S  # 300 s after the list
    rec.reconcile(KEY)
    assert revisions.lists == 2
    rec.reconcile(KEY)
    assert revisions.lists == 2
    (kept,) = rec.known_revisions[KEY].found  # what a pass reads, without the rest
    assert set(kept["metadata"]) == {"name", "uid", "labels"}
    assert kept["data"]["roles"][0]["name"] == "server"


def test_a_new_template_lists_the_revisions_again_and_keeps_the_one_it_made(
    kube: FakeKube, rec: Reconciler, revisions: Revisions
) -> None:
    new_image(kube, "nginx:1.29.0", 2)
    rec.reconcile(KEY)
    assert revisions.lists == 2
    assert sorted(r["revision"] for r in kube.all(CONTROLLER_REVISIONS).values()) == [1, 2]
    rec.reconcile(KEY)  # the revision it made is known: no list
    assert revisions.lists == 2
    assert kube.count("create", CONTROLLER_REVISIONS) == 2


def test_a_revision_deleted_by_someone_else_is_made_again_after_the_relist_time(
    kube: FakeKube, rec: Reconciler, revisions: Revisions
) -> None:
    (name,) = kube.all(CONTROLLER_REVISIONS)
    kube.remove(CONTROLLER_REVISIONS, name)
    rec.reconcile(KEY)
    assert kube.all(CONTROLLER_REVISIONS) == {}  # trusted as the last pass left it
    revisions.now = REVISIONS_RELIST_S
    rec.reconcile(KEY)
    assert list(kube.all(CONTROLLER_REVISIONS)) == [name]


def test_a_revision_name_taken_by_another_owner_is_listed_on_every_pass(
    kube: FakeKube, rec: Reconciler, monkeypatch: pytest.MonkeyPatch
) -> None:
    revisions = Revisions(kube, rec, monkeypatch)
    raw = kube.put(MODEL_SERVINGS, model_serving(replicas=1))
    rev = revision(parse_model_serving(raw))
    foreign = {
        "apiVersion": "apps/v1",
        "kind": "ControllerRevision",
        "metadata": {
            "name": f"sample-{rev}",
            "labels": {labels.NAME_LABEL: "sample", labels.REVISION_LABEL: rev},
            "ownerReferences": [{"kind": "ModelServing", "name": "sample", "uid": "other"}],
        },
        "revision": 7,
    }
    kube.put(CONTROLLER_REVISIONS, foreign)
    rec.reconcile(KEY)
    rec.reconcile(KEY)
    assert revisions.lists == 2  # nothing of its own to keep: asked again, as before
    assert KEY not in rec.known_revisions


def test_old_revisions_deleted_leave_the_kept_list_as_the_api_has_it(
    kube: FakeKube, rec: Reconciler, revisions: Revisions
) -> None:
    for generation in range(2, REVISION_HISTORY + 5):
        new_image(kube, f"nginx:1.{generation}.0", generation)
        rec.reconcile(KEY)
        for name in kube.all(PODS):  # the Pods move on: their revision is no longer in use
            set_running(kube, name)
        rec.reconcile(KEY)
    stored = kube.all(CONTROLLER_REVISIONS)
    kept = rec.known_revisions[KEY].found
    assert sorted(r["metadata"]["name"] for r in kept) == sorted(stored)
    deletes = kube.count("delete", CONTROLLER_REVISIONS)
    assert deletes == REVISION_HISTORY + 5 - 1 - len(stored) > 0
    rec.reconcile(KEY)
    assert kube.count("delete", CONTROLLER_REVISIONS) == deletes  # none deleted twice
    assert revisions.lists == REVISION_HISTORY + 4  # once per new template


def test_an_old_revision_made_again_by_someone_else_is_not_deleted_by_name(
    kube: FakeKube, rec: Reconciler, revisions: Revisions
) -> None:
    for generation in range(2, REVISION_HISTORY + 3):
        new_image(kube, f"nginx:1.{generation}.0", generation)
        rec.reconcile(KEY)  # lists: the new template's revision is not kept
        if generation == REVISION_HISTORY + 2:  # the next pass deletes the oldest, from the list
            oldest = min(kube.all(CONTROLLER_REVISIONS).values(), key=lambda r: r["revision"])
            kube.edit(
                CONTROLLER_REVISIONS,
                oldest["metadata"]["name"],
                lambda r: r["metadata"].update(uid="made-again"),
            )
        for name in kube.all(PODS):
            set_running(kube, name)
        rec.reconcile(KEY)
    stored = kube.all(CONTROLLER_REVISIONS)
    assert stored[oldest["metadata"]["name"]]["metadata"]["uid"] == "made-again"
    assert len(stored) == REVISION_HISTORY + 2


def test_a_model_serving_made_again_under_its_name_gets_its_own_revision(
    kube: FakeKube, rec: Reconciler, revisions: Revisions
) -> None:
    (name,) = kube.all(CONTROLLER_REVISIONS)
    # deleted (its revisions with it, by their owner) and made again between two passes
    kube.remove(MODEL_SERVINGS, "sample")
    kube.remove(CONTROLLER_REVISIONS, name)
    made = model_serving(replicas=1)
    made["metadata"]["uid"] = "uid-again"
    kube.put(MODEL_SERVINGS, made)
    rec.reconcile(KEY)
    assert revisions.lists == 2
    (again,) = kube.all(CONTROLLER_REVISIONS).values()
    assert again["metadata"]["ownerReferences"][0]["uid"] == "uid-again"


def test_forget_drops_the_kept_revisions(kube: FakeKube, rec: Reconciler) -> None:
    kube.put(MODEL_SERVINGS, model_serving(replicas=1))
    rec.reconcile(KEY)
    assert KEY in rec.known_revisions
    rec.forget(KEY)
    assert KEY not in rec.known_revisions


# --- plugin configuration errors -------------------------------------------------------------


@pytest.mark.parametrize(
    ("plugin", "words"),
    [
        ({"name": "demo-pod-tweaks", "config": {"bogus": 1}}, "config.bogus"),
        ({"name": "no-such-plugin"}, "no built-in plugin has this name"),
        (
            {"name": "demo-pod-tweaks", "config": {"annotations": {"a": 2**70}}},
            "config.annotations.a: integer 1180591620717411303424 is outside the 64-bit range",
        ),
        (
            wasm_plugin("ready", "mods", READY_ONLY, config={"a": [1, {"b": -(2**63) - 1}]}),
            "config.a[1].b: integer -9223372036854775809 is outside the 64-bit range",
        ),
    ],
    ids=["unknown-config-field", "unknown-builtin", "wide-integer-native", "wide-integer-wasm"],
)
def test_a_plugin_config_error_creates_nothing(
    kube: FakeKube, rec: Reconciler, recorder: Recording, plugin: Obj, words: str
) -> None:
    kube.put(MODEL_SERVINGS, model_serving(plugins=[plugin]))
    assert rec.reconcile(KEY) is None  # waits for the ModelServing to be fixed: no retry
    assert kube.all(PODS) == {}
    assert kube.all(SERVICES) == {}
    assert plugins_ready(kube) == ("False", "InvalidConfig")
    message = condition(kube, "PluginsReady")["message"]
    assert f"plugin '{plugin['name']}'" in message
    assert words in message
    failed = [(t, m) for t, r, m in recorder.events if r == "PluginLoadFailed"]
    assert len(failed) == 1
    assert failed[0][0] == "Warning"
    assert words in failed[0][1]
    assert recorder.builds == [False]


def with_spec(kube: FakeKube, **changes: Any) -> None:
    def change(ms: Obj) -> None:
        ms["spec"].update(changes)
        ms["metadata"]["generation"] += 1

    kube.edit(MODEL_SERVINGS, "sample", change)


BROKEN = [{"name": "demo-pod-tweaks", "config": {"bogus": 1}}]


def test_a_broken_plugin_list_still_scales_down(kube: FakeKube, rec: Reconciler) -> None:
    kube.put(MODEL_SERVINGS, model_serving(replicas=2))
    rec.reconcile(KEY)
    assert len(kube.all(PODS)) == 4
    with_spec(kube, replicas=1, plugins=BROKEN)
    rec.reconcile(KEY)
    assert pods_of_group(kube, "sample-1") == []
    assert len(pods_of_group(kube, "sample-0")) == 2
    assert [group_of(s) for s in kube.all(SERVICES).values()] == ["sample-0"]
    assert plugins_ready(kube) == ("False", "InvalidConfig")


@pytest.mark.parametrize("broken", [False, True])
def test_a_failed_pod_is_recovered_only_with_a_working_plugin_list(
    kube: FakeKube, rec: Reconciler, recorder: Recording, broken: bool
) -> None:
    kube.put(MODEL_SERVINGS, model_serving(replicas=1))
    rec.reconcile(KEY)
    entry = pods_of_group(kube, "sample-0")[0]
    set_failed(kube, entry)
    if broken:
        with_spec(kube, plugins=BROKEN)
    rec.reconcile(KEY)
    if broken:
        assert len(kube.all(PODS)) == 2  # recreating could not make the Pods again
        assert kube.count("delete", PODS) == 0
        assert kube.count("delete", SERVICES) == 0
    else:
        assert kube.all(PODS) == {}  # RoleRecreate: the whole role replica
        assert kube.all(SERVICES) == {}
        assert any("failed" in m for m in recorder.messages("Recreating"))


# --- WebAssembly modules from ConfigMaps -----------------------------------------------------


def test_a_missing_module_config_map(kube: FakeKube, rec: Reconciler, recorder: Recording) -> None:
    kube.put(MODEL_SERVINGS, model_serving(plugins=[wasm_plugin("ready", "mods", READY_ONLY)]))
    rec.reconcile(KEY)
    assert kube.all(PODS) == {}
    assert plugins_ready(kube) == ("False", "InvalidModule")
    message = condition(kube, "PluginsReady")["message"]
    assert "ConfigMap team-a/mods not found" in message
    assert "plugin 'ready'" in message
    assert recorder.reasons("Warning") == ["PluginLoadFailed"]
    assert recorder.builds == [True]
    assert rec.users_of_config_map(NS, "mods") == {KEY}  # its arrival requeues the ModelServing
    kube.put(CONFIG_MAPS, config_map("mods", READY_ONLY))
    rec.reconcile(KEY)
    assert len(kube.all(PODS)) == 4
    assert plugins_ready(kube) == ("True", "PluginsLoaded")
    assert recorder.messages("PluginsLoaded") == [
        "the plugin list loads again (1 plugin(s) ready); Pods are created and recovered as before"
    ]
    rec.reconcile(KEY)
    assert len(recorder.messages("PluginsLoaded")) == 1  # said once, on the recovery


@pytest.mark.parametrize(
    ("stored", "words"),
    [
        (lambda packed: packed[:-4], "the data ends before the gzip stream does (truncated)"),
        (lambda packed: packed + b"junk", "4 byte(s) after the end of the gzip stream"),
    ],
    ids=["truncated", "trailing-data"],
)
def test_a_broken_gzip_module_is_not_valid_gzip_before_any_digest_check(
    kube: FakeKube,
    rec: Reconciler,
    recorder: Recording,
    stored: Callable[[bytes], bytes],
    words: str,
) -> None:
    """The uncompressed module is the pinned one, and a stream cut in its trailer still yields
    all of it: the gzip check, not the digest, refuses it."""
    kube.put(CONFIG_MAPS, config_map("mods", stored(gzip_module(READY_ONLY))))
    kube.put(MODEL_SERVINGS, model_serving(plugins=[wasm_plugin("ready", "mods", READY_ONLY)]))
    rec.reconcile(KEY)
    assert kube.all(PODS) == {}
    assert plugins_ready(kube) == ("False", "InvalidModule")
    (message,) = recorder.messages("PluginLoadFailed")
    assert message.startswith(
        "spec.plugins[0] (plugin 'ready'): module.configMapRef: ConfigMap team-a/mods key "
        f"plugin.wasm is not valid gzip: {words}"
    )
    assert "sha256" not in message


def test_a_config_map_in_a_namespace_not_allowed(
    kube: FakeKube, rec: Reconciler, recorder: Recording
) -> None:
    kube.put(CONFIG_MAPS, config_map("mods", READY_ONLY, namespace="plugins"))
    plugin = wasm_plugin("ready", "mods", READY_ONLY, namespace="plugins")
    kube.put(MODEL_SERVINGS, model_serving(plugins=[plugin]))
    rec.reconcile(KEY)
    assert kube.all(PODS) == {}
    assert plugins_ready(kube) == ("False", "InvalidModule")
    message = condition(kube, "PluginsReady")["message"]
    assert "plugins/mods" in message
    assert "pluginNamespaces: none" in message
    assert "pluginNamespaces" in recorder.messages("PluginLoadFailed")[0]


def test_a_config_map_in_an_allowed_namespace(
    kube: FakeKube, make_reconciler: MakeReconciler, recorder: Recording
) -> None:
    module = builtin_wasm("demo-pod-tweaks.wasm")
    kube.put(CONFIG_MAPS, config_map("tweaks", module, namespace="plugins"))
    config = {
        "annotations": {"example.com/team": "llm"},
        "env": [{"name": "TEAM", "value": "llm"}],
    }
    plugin = wasm_plugin("tweaks", "tweaks", module, namespace="plugins", config=config)
    kube.put(MODEL_SERVINGS, model_serving(plugins=[plugin]))
    rec = make_reconciler(frozenset({"plugins", "other"}))
    rec.reconcile(KEY)
    assert plugins_ready(kube) == ("True", "PluginsLoaded")
    pods = kube.all(PODS)
    assert len(pods) == 4
    digest = hashlib.sha256(module).hexdigest()
    for pod in pods.values():
        assert pod["metadata"]["annotations"]["example.com/team"] == "llm"
        assert "TEAM" in env_names(pod)
        applied = json.loads(pod["metadata"]["annotations"][labels.PLUGINS_APPLIED_ANNOTATION])
        assert applied == [{"name": "tweaks", "runtime": "Wasm", "sha256": digest}]
    loaded = recorder.messages("PluginLoaded")
    assert len(loaded) == 1
    assert f"sha256 {digest[:12]}" in loaded[0]
    assert rec.users_of_config_map("plugins", "tweaks") == {KEY}
    assert rec.users_of_config_map(NS, "tweaks") == set()


def test_a_changed_config_map_rebuilds_the_chain(
    kube: FakeKube, rec: Reconciler, recorder: Recording
) -> None:
    kube.put(CONFIG_MAPS, config_map("mods", READY_ONLY))
    kube.put(MODEL_SERVINGS, model_serving(plugins=[wasm_plugin("ready", "mods", READY_ONLY)]))
    rec.reconcile(KEY)
    rec.reconcile(KEY)
    assert recorder.builds == [False]
    kube.edit(CONFIG_MAPS, "mods", lambda cm: None)  # a new resourceVersion
    rec.reconcile(KEY)
    assert recorder.builds == [False, False]


# --- plugin failures on Pods -----------------------------------------------------------------


def test_a_fail_policy_failure_creates_nothing_in_its_serving_group(
    kube: FakeKube, rec: Reconciler, recorder: Recording
) -> None:
    kube.put(CONFIG_MAPS, config_map("trap", TRAP))
    # Only the workers are in scope: the entry Pod passes the chain, and still is not created.
    plugin = wasm_plugin("trap", "trap", TRAP, scope={"target": "Worker"})
    kube.put(MODEL_SERVINGS, model_serving(replicas=2, plugins=[plugin]))
    with pytest.raises(RetryLater, match="Trap"):
        rec.reconcile(KEY)
    assert kube.all(PODS) == {}
    assert kube.all(SERVICES) == {}
    failed = [(t, m) for t, r, m in recorder.events if r == "PluginFailed"]
    assert [t for t, _ in failed] == ["Warning", "Warning"]
    assert "ServingGroup sample-0 was not created" in failed[0][1]
    assert "ServingGroup sample-1 was not created" in failed[1][1]
    assert plugins_ready(kube) == ("False", str(FailureClass.TRAP))
    assert [h.result for h in recorder.hooks] == ["Trap", "Trap"]


def test_a_fail_policy_failure_leaves_other_serving_groups_alone(
    kube: FakeKube, rec: Reconciler, recorder: Recording
) -> None:
    kube.put(MODEL_SERVINGS, model_serving(replicas=1))
    rec.reconcile(KEY)
    kube.put(CONFIG_MAPS, config_map("trap", TRAP))
    with_spec(kube, replicas=2, plugins=[wasm_plugin("trap", "trap", TRAP)])
    with pytest.raises(RetryLater):
        rec.reconcile(KEY)
    assert len(pods_of_group(kube, "sample-0")) == 2  # existing Pods are kept
    assert pods_of_group(kube, "sample-1") == []
    assert len(recorder.messages("PluginFailed")) == 1


def test_an_ignore_policy_failure_creates_the_pods(
    kube: FakeKube, rec: Reconciler, recorder: Recording
) -> None:
    kube.put(CONFIG_MAPS, config_map("trap", TRAP))
    plugin = wasm_plugin("trap", "trap", TRAP, failurePolicy="Ignore")
    kube.put(MODEL_SERVINGS, model_serving(replicas=2, plugins=[plugin]))
    assert rec.reconcile(KEY) is None
    assert len(kube.all(PODS)) == 4
    assert len(kube.all(SERVICES)) == 2
    ignored = [(t, m) for t, r, m in recorder.events if r == "PluginIgnored"]
    assert len(ignored) == 4
    assert all(t == "Warning" and "failure policy Ignore" in m for t, m in ignored)
    assert plugins_ready(kube) == ("True", "PluginsLoaded")
    for pod in kube.all(PODS).values():
        assert labels.PLUGINS_APPLIED_ANNOTATION not in (pod["metadata"].get("annotations") or {})


# --- OnPodReady ------------------------------------------------------------------------------


@pytest.fixture
def ready_pods(kube: FakeKube, rec: Reconciler, recorder: Recording) -> list[str]:
    """One ServingGroup (entry and worker) with the READY_ONLY plugin, both Pods Ready."""
    kube.put(CONFIG_MAPS, config_map("ready", READY_ONLY))
    plugin = wasm_plugin("ready", "ready", READY_ONLY)
    kube.put(MODEL_SERVINGS, model_serving(replicas=1, plugins=[plugin]))
    rec.reconcile(KEY)
    names = sorted(kube.all(PODS))
    assert len(names) == 2
    assert recorder.hooks == []  # not Ready yet
    for name in names:
        set_running(kube, name)
    return names


def ready_calls(recorder: Recording) -> list[tuple[str, str, str]]:
    return [
        (h.plugin, h.runtime, h.result) for h in recorder.hooks if h.hook == str(Hook.ON_POD_READY)
    ]


def test_on_pod_ready_runs_once_per_pod(
    kube: FakeKube, rec: Reconciler, recorder: Recording, ready_pods: list[str]
) -> None:
    assert rec.reconcile(KEY) is None
    for name in ready_pods:
        pod = kube.stored(PODS, name)
        assert pod is not None
        assert json.loads(pod["metadata"]["annotations"][READY_HOOKS_ANNOTATION]) == ["ready"]
    assert ready_calls(recorder) == [("ready", "Wasm", "ok")] * 2
    assert kube.count("patch", PODS) == 2
    rec.reconcile(KEY)
    rec.reconcile(KEY)
    assert len(ready_calls(recorder)) == 2
    assert kube.count("patch", PODS) == 2


def test_on_pod_ready_does_not_run_when_the_claim_conflicts(
    kube: FakeKube, rec: Reconciler, recorder: Recording, ready_pods: list[str]
) -> None:
    kube.touch_pods_after_list = True
    assert rec.reconcile(KEY) == 1.0  # a conflict is no error: the pass is repeated shortly
    assert ready_calls(recorder) == []
    assert kube.count("patch", PODS) == 2
    for name in ready_pods:
        pod = kube.stored(PODS, name)
        assert pod is not None
        assert READY_HOOKS_ANNOTATION not in (pod["metadata"].get("annotations") or {})
    kube.touch_pods_after_list = False
    rec.reconcile(KEY)
    assert len(ready_calls(recorder)) == 2


def test_on_pod_ready_skips_a_pod_gone_since_the_list(
    kube: FakeKube, rec: Reconciler, recorder: Recording, ready_pods: list[str]
) -> None:
    original = kube.list

    def list_then_delete(res: Resource, namespace: str | None, selector: str | None = None) -> Any:
        found = original(res, namespace, selector)
        if res is PODS:
            kube.remove(PODS, ready_pods[0])
        return found

    kube.list = list_then_delete  # type: ignore[method-assign]
    rec.reconcile(KEY)
    assert len(ready_calls(recorder)) == 1


def test_pods_without_ready_hooks_are_not_claimed(kube: FakeKube, rec: Reconciler) -> None:
    kube.put(MODEL_SERVINGS, model_serving(replicas=1, plugins=[{"name": "demo-pod-tweaks"}]))
    rec.reconcile(KEY)
    for name in kube.all(PODS):
        set_running(kube, name)
    rec.reconcile(KEY)
    assert kube.count("patch", PODS) == 0


# --- users of ConfigMaps, a ModelServing gone ------------------------------------------------


def test_users_of_config_map(kube: FakeKube, rec: Reconciler) -> None:
    kube.put(CONFIG_MAPS, config_map("mods", READY_ONLY))
    kube.put(MODEL_SERVINGS, model_serving(plugins=[wasm_plugin("ready", "mods", READY_ONLY)]))
    assert rec.users_of_config_map(NS, "mods") == set()
    rec.reconcile(KEY)
    assert rec.users_of_config_map(NS, "mods") == {KEY}
    assert rec.users_of_config_map(NS, "other") == set()
    with_spec(kube, plugins=[])
    rec.reconcile(KEY)
    assert rec.users_of_config_map(NS, "mods") == set()


def test_a_model_serving_gone_is_forgotten(
    kube: FakeKube, rec: Reconciler, recorder: Recording
) -> None:
    kube.put(CONFIG_MAPS, config_map("mods", READY_ONLY))
    ms = model_serving(plugins=[wasm_plugin("ready", "mods", READY_ONLY)])
    kube.put(MODEL_SERVINGS, ms)
    rec.reconcile(KEY)
    rec.reconcile(KEY)
    assert rec.chains.builds == 1
    kube.remove(MODEL_SERVINGS, "sample")
    writes = len(kube.writes)
    assert rec.reconcile(KEY) is None
    assert len(kube.writes) == writes
    assert rec.users_of_config_map(NS, "mods") == set()
    kube.put(MODEL_SERVINGS, ms)  # the same name (and here the same uid) again
    rec.reconcile(KEY)
    assert rec.chains.builds == 2  # the cached chain was dropped


def test_a_model_serving_being_deleted_is_left_alone(kube: FakeKube, rec: Reconciler) -> None:
    ms = model_serving()
    ms["metadata"]["deletionTimestamp"] = "2023-11-14T22:13:20Z"
    kube.put(MODEL_SERVINGS, ms)
    assert rec.reconcile(KEY) is None
    assert kube.writes == []


def test_an_invalid_model_serving_is_reported(
    kube: FakeKube, rec: Reconciler, recorder: Recording
) -> None:
    ms = model_serving()
    ms["spec"]["template"]["roles"] = []
    kube.put(MODEL_SERVINGS, ms)
    assert rec.reconcile(KEY) is None
    assert recorder.reasons() == ["InvalidSpec"]
    assert kube.writes == []


@pytest.mark.parametrize(("replicas", "workers"), [(2**31 - 1, 0), (1, 2**31 - 2), (3, 1)])
def test_a_model_serving_of_too_many_pods_is_refused_unplanned(
    kube: FakeKube,
    make_reconciler: MakeReconciler,
    recorder: Recording,
    replicas: int,
    workers: int,
) -> None:
    """Planning is about 1.3 KB per Pod: 2**31 ServingGroups, or one of 2**31 Pods, would take
    the controller's memory before a single Pod is made. Such a ModelServing is refused as
    InvalidSpec, named by its figures, before anything is planned or written."""
    rec = make_reconciler(max_pods=5)
    kube.put(MODEL_SERVINGS, model_serving(replicas=replicas, workers=workers))
    assert rec.reconcile(KEY) is None
    assert recorder.reasons() == ["InvalidSpec"]
    total = replicas * (1 + workers)
    assert f"spec asks for {total:,} Pods" in recorder.events[0][2]
    assert "the limit is 5 (operator setting maxPodsPerModelServing)" in recorder.events[0][2]
    assert kube.writes == []


def test_a_quantity_the_api_server_would_take_long_over_is_refused(
    kube: FakeKube, rec: Reconciler, recorder: Recording
) -> None:
    """``cpu: 1e999999999`` took the API server more than 30 s per Pod create, on every retry:
    refused as InvalidSpec naming the field, and nothing is written."""
    ms = model_serving()
    container = ms["spec"]["template"]["roles"][0]["entryTemplate"]["spec"]["containers"][0]
    container["resources"] = {"requests": {"cpu": "1e999999999"}}
    kube.put(MODEL_SERVINGS, ms)
    assert rec.reconcile(KEY) is None
    assert recorder.reasons() == ["InvalidSpec"]
    assert recorder.events[0][2] == (
        "spec.template.roles[0].entryTemplate.spec.containers[0].resources.requests.cpu: "
        "'1e999999999': an exponent beyond 1000"
    )
    assert kube.writes == []


def test_a_model_serving_at_the_pod_limit_is_made(
    kube: FakeKube, make_reconciler: MakeReconciler, recorder: Recording
) -> None:
    rec = make_reconciler(max_pods=4)
    kube.put(MODEL_SERVINGS, model_serving(replicas=2, workers=1))
    rec.reconcile(KEY)
    assert "InvalidSpec" not in recorder.reasons()
    assert len(kube.list(PODS, NS)) == 4


# --- several workers sharing one ChainCache --------------------------------------------------


class InterleavedCache(ChainCache):
    """Another reconcile worker builds a chain for another ModelServing while this pass looks its
    own chain up (the manager's workers share one cache)."""

    def __init__(self, other: ModelServing, sandbox: Sandbox) -> None:
        super().__init__(sandbox=sandbox)
        self.other = other
        self.interleave = False

    def get(
        self,
        ms: ModelServing,
        extra: tuple[str, ...] = (),
        modules: ModuleResolver | None = None,
    ) -> Chain:
        if self.interleave:
            super().get(self.other)
        return super().get(ms, extra, modules)


def test_a_build_for_another_model_serving_does_not_announce_this_chain_again(
    kube: FakeKube, writes: ThreadPoolExecutor, recorder: Recording, sandbox: Sandbox
) -> None:
    other = parse_model_serving(manifest(name="other", plugins=[{"name": "demo-pod-tweaks"}]))
    chains = InterleavedCache(other, sandbox)
    rec = Reconciler(kube, chains, writes, recorder=recorder, clock=Clock())
    kube.put(MODEL_SERVINGS, model_serving(plugins=[{"name": "demo-pod-tweaks"}]))
    rec.reconcile(KEY)
    assert len(recorder.messages("PluginLoaded")) == 1
    chains.interleave = True
    rec.reconcile(KEY)  # this ModelServing's chain comes from the cache
    assert chains.builds == 2  # the other one's was built meanwhile
    assert len(recorder.messages("PluginLoaded")) == 1


def test_a_deleted_model_serving_stops_creating_within_one_write(
    kube: FakeKube, rec: Reconciler
) -> None:
    kube.put(MODEL_SERVINGS, model_serving(replicas=3, workers=3))
    deleted = threading.Event()
    rec.stopping = lambda key: deleted.is_set()
    create = kube.create

    def create_then_delete(
        res: Resource, namespace: str, body: Obj, field_manager: str | None = None, **how: Any
    ) -> Obj | None:
        made = create(res, namespace, body, field_manager, **how)
        if res is PODS and len(kube.all(PODS)) == 2:
            deleted.set()  # the watch sees the deletion while the pass is creating
        return made

    kube.create = create_then_delete  # type: ignore[method-assign]
    rec.reconcile(KEY)
    # 3 ServingGroups of 4 Pods were due; the writes in flight when it was deleted finish
    # (one per write thread at most), nothing new starts
    assert 2 <= len(kube.all(PODS)) <= 2 + 3
    assert not kube.all(SERVICES)  # the pass's Services come last: none was due yet


def test_a_servinggroup_whose_pods_failed_gets_no_service(kube: FakeKube, rec: Reconciler) -> None:
    """An API error on a Pod of one ServingGroup: the other ServingGroups get their Services,
    that one gets its Service with its Pods on a later pass."""
    kube.put(MODEL_SERVINGS, model_serving(replicas=2, workers=1))
    create = kube.create

    def refused(
        res: Resource, namespace: str, body: Obj, field_manager: str | None = None, **how: Any
    ) -> Obj | None:
        if body["metadata"]["name"] == "sample-1-server-0-1":
            raise ApiError(500, "POST", res.path(namespace), "etcd timed out")
        return create(res, namespace, body, field_manager, **how)

    kube.create = refused  # type: ignore[method-assign]
    with pytest.raises(RetryLater, match="500 etcd timed out"):
        rec.reconcile(KEY)
    assert sorted(kube.all(SERVICES)) == ["sample-0-server-0-0"]
    kube.create = create  # type: ignore[method-assign]
    rec.reconcile(KEY)
    assert sorted(kube.all(SERVICES)) == ["sample-0-server-0-0", "sample-1-server-0-0"]
    assert len(kube.all(PODS)) == 4


@pytest.mark.parametrize(("status", "events"), [(422, 1), (400, 1), (500, 0)])
def test_a_pod_the_api_refuses_as_invalid_is_an_event(
    kube: FakeKube, rec: Reconciler, recorder: Recording, status: int, events: int
) -> None:
    """A Pod template is open in the CRD: what only the Pod API refuses used to show in the
    controller's log alone, with PluginsReady True and Progressing True."""
    kube.put(MODEL_SERVINGS, model_serving(replicas=1, workers=1))
    create = kube.create

    def refused(
        res: Resource, namespace: str, body: Obj, field_manager: str | None = None, **how: Any
    ) -> Obj | None:
        if res is PODS:
            raise ApiError(status, "POST", res.path(namespace), "spec.containers[0].ports: bad")
        return create(res, namespace, body, field_manager, **how)

    kube.create = refused  # type: ignore[method-assign]
    with pytest.raises(RetryLater):
        rec.reconcile(KEY)
    messages = recorder.messages("FailedCreate")
    assert len(messages) == events
    if events:
        assert messages[0].startswith(
            f"ServingGroup sample-0: the API server refused POST /api/v1/namespaces/team-a/pods: "
            f"{status} spec.containers[0].ports: bad"
        )
        assert ("Warning", "FailedCreate") in [(t, r) for t, r, _ in recorder.events]


class InlineWrites(ThreadPoolExecutor):
    """Runs each write as it is submitted: the order of a pass's writes is then fixed."""

    def submit(self, fn: Callable[..., Any], /, *args: Any, **kwargs: Any) -> Future[Any]:
        done: Future[Any] = Future()
        try:
            done.set_result(fn(*args, **kwargs))
        except Exception as exc:
            done.set_exception(exc)
        return done


def test_a_pass_waits_for_room_among_the_starting_pods_between_servinggroups_only(
    kube: FakeKube, rec: Reconciler
) -> None:
    """With 4 Pods allowed to be starting at once, the first ServingGroup (4 Pods, one gang) is
    created whole; the second waits until one of them runs."""
    kube.put(MODEL_SERVINGS, model_serving(replicas=2, workers=3))
    rec.writes = InlineWrites()
    backlog = rec.backlog = StartBacklog(max_starting=4)
    waits: list[int] = []
    wait_for_room = backlog.wait_for_room
    ran = threading.Event()

    def run(pod: Obj) -> None:
        backlog.observed("MODIFIED", pod)
        ran.set()

    def first_pod_runs_meanwhile(stop: Callable[[], bool], poll_s: float = 0.25) -> float:
        waits.append(backlog.count())
        if backlog.count() == 4:  # the watch reports the first Pod Running a moment later
            first = kube.all(PODS)[sorted(kube.all(PODS))[0]]
            running = {**first, "spec": {"nodeName": "n"}, "status": {"phase": "Running"}}
            threading.Timer(0.2, run, (running,)).start()
        return wait_for_room(stop, poll_s)

    create = kube.create
    created_after_run: list[bool] = []

    def create_noting(
        res: Resource, namespace: str, body: Obj, field_manager: str | None = None, **how: Any
    ) -> Obj | None:
        if res is PODS:
            created_after_run.append(ran.is_set())
        return create(res, namespace, body, field_manager, **how)

    kube.create = create_noting  # type: ignore[method-assign]
    backlog.wait_for_room = first_pod_runs_meanwhile  # type: ignore[method-assign]
    rec.reconcile(KEY)
    assert waits == [0, 4]  # before each ServingGroup, never between the Pods of one
    assert created_after_run == [False] * 4 + [True] * 4
    assert len(kube.all(PODS)) == 8
    assert backlog.count() == 7
