"""The Pods and Services of each ModelServing, as the watch last showed them.

A pass used to list every Pod and Service of its ModelServing from the API server. While 800
Pods turn Ready, each of the passes that follow their events decoded all 800 again: JSON decoding
was 40 % of the controller's CPU. The watch already delivers every object whole, so
``ObjectCache`` keeps them (without ``managedFields``, and of a Pod's spec only its Node), and a
pass reads them from here.

Consistency:
- A ModelServing's objects are listed once (``prime``) before its first pass reads the cache, and
  again after the watch itself listed again (``forget_all``: its resourceVersion was too old, so
  events may have been missed). A resync reads the cache as it is: a list of every Pod on each
  one cost O(Pods) per resync, O(Pods^2) over a long rolling update.
- Events are applied in resourceVersion order per object: an older one never replaces a newer
  (the controller writes its own creates, deletes and patches through at once, and the watch's
  echo of an earlier state may come after them).
- A list merges with what events brought meanwhile: the newer copy of each object wins, and an
  object the list lacks is dropped only when it is older than the list.
- An object the watch saw deleted never comes back (its UID is kept for ``TOMBSTONE_S``): the
  API's answer to the controller's own create can reach the cache after the watch reported
  the new object deleted (a node agent deletes it at once), and a list read before a deletion
  can be merged after it. Either would leave the cache holding an object the API no longer
  has, and no event would ever correct it: the ServingGroup would wait for it forever.
- A Pod the watch saw deleted that the controller had not deleted (``will_delete`` marks those
  it deletes, before it asks) is kept for the next pass of its ModelServing (``deleted_by_others``)
  until the pass has acted on it (``handled``): Kthena recovers such a Pod by the recovery
  policy, and only the deletion event tells it apart from one that was never made.
Every write from outside goes through the API with preconditions (UIDs on deletes, the
resourceVersion on the OnPodReady claim), so a decision made on a copy that was stale by a
moment fails safely and is made again.
"""

from __future__ import annotations

import sys
import threading
import time
from collections.abc import Callable, Iterable, Mapping
from typing import Any

from modelserving.api import labels

GONE_S = 1.0
"""How long a Pod's name rests after the watch saw it deleted, before a pass makes it again. A
node agent may still act on the old Pod by name (kwok deletes it again, and then deletes the
new one: the ServingGroup never settles); a pass seconds later never saw that."""

TOMBSTONE_S = 120.0
"""How long the UID of an object the watch saw deleted is remembered (longer than any API call
and list the controller makes takes)."""

OURS_MAX = 65536
"""Marks of the Pods the controller is deleting (``will_delete``) kept at most; past that the
oldest go. Bounded by number, not age: a Pod may take any time to go (a long grace period, a
finalizer), and its deletion is the controller's all the same."""

DELETED_BY_OTHERS_MAX = 4096
"""Pods deleted by others a ModelServing keeps for its next pass; past that the oldest go (the
Pods themselves are then made again alone, as after a restart)."""

CHANGES_MAX = 4096
"""Changed names a bucket remembers for ``changes``; past that its reader reads it whole."""

Bucket = tuple[str, str, str]
"""(plural, namespace, ModelServing name)."""


def _version(obj: Mapping[str, Any]) -> int | None:
    text = str((obj.get("metadata") or {}).get("resourceVersion") or "")
    return int(text) if text.isdigit() else None


def _older(a: Mapping[str, Any], b: Mapping[str, Any]) -> bool:
    """Whether ``a`` is an older state than ``b`` (unknown order: not older)."""
    va, vb = _version(a), _version(b)
    return va is not None and vb is not None and va < vb


_POD_META = (
    "name",
    "namespace",
    "uid",
    "resourceVersion",
    "labels",
    "annotations",
    "deletionTimestamp",
)
_CONTAINER = ("name", "restartCount", "state", "lastState")


def _shared(value: Any) -> Any:
    """A short string every Pod of a ServingGroup or ModelServing repeats (a label's value, a
    condition's type and status, a phase), as one object for all of them."""
    return sys.intern(value) if type(value) is str and len(value) <= 128 else value


def _interned(values: Mapping[str, Any]) -> dict[str, Any]:
    """Labels or annotations with their keys and short values shared."""
    return {sys.intern(str(k)): _shared(v) for k, v in values.items()}


def slim(plural: str, obj: Mapping[str, Any]) -> dict[str, Any]:
    """What a pass reads of ``obj``. An object but a Pod: without ``metadata.managedFields``.
    A Pod: of its metadata the identity, labels, annotations, controller owner and deletion
    time; of its spec only ``nodeName`` (the rest is the template the controller made;
    OnPodReady hooks, which are given the whole Pod, read it from the API); of its status the
    phase, addresses, conditions (type, status, time) and each container's restarts and
    states. A Pod as kwok reports it is about 15.7 KB in Python objects, 9.7 KB without its
    spec and ``managedFields``, 4.0 KB so (``tracemalloc``, docs/performance.md); most of the
    controller's memory at 10,000 Pods is this cache."""
    meta = obj.get("metadata") or {}
    if plural != "pods":
        other = dict(obj)
        if "managedFields" in meta:
            other["metadata"] = {k: v for k, v in meta.items() if k != "managedFields"}
        return other
    kept_meta: dict[str, Any] = {k: meta[k] for k in _POD_META if k in meta}
    for key in ("labels", "annotations"):
        if isinstance(kept_meta.get(key), dict):
            kept_meta[key] = _interned(kept_meta[key])
    owners = meta.get("ownerReferences")
    if isinstance(owners, list):
        kept_meta["ownerReferences"] = [
            {"uid": r.get("uid"), "controller": r.get("controller")}
            for r in owners
            if type(r) is dict and r.get("controller")
        ]
    out: dict[str, Any] = {"metadata": kept_meta}
    spec = obj.get("spec")
    if type(spec) is dict:
        node = spec.get("nodeName")
        out["spec"] = {"nodeName": node} if node else {}
    status = obj.get("status")
    if type(status) is dict:
        out["status"] = _pod_status(status)
    return out


def _pod_status(status: Mapping[str, Any]) -> dict[str, Any]:
    kept: dict[str, Any] = {}
    for key in ("phase", "hostIP", "podIP"):
        if key in status:
            kept[key] = _shared(status[key])
    conditions = status.get("conditions")
    if isinstance(conditions, list):
        kept["conditions"] = [
            {
                "type": _shared(c.get("type")),
                "status": _shared(c.get("status")),
                "lastTransitionTime": c.get("lastTransitionTime"),
            }
            for c in conditions
            if type(c) is dict
        ]
    for key in ("containerStatuses", "initContainerStatuses"):
        containers = status.get(key)
        if isinstance(containers, list):
            kept[key] = [
                {k: _shared(c[k]) for k in _CONTAINER if k in c}
                for c in containers
                if type(c) is dict
            ]
    return kept


def owner_of(obj: Mapping[str, Any]) -> str | None:
    """The ModelServing an object belongs to (its name label)."""
    value = ((obj.get("metadata") or {}).get("labels") or {}).get(labels.NAME_LABEL)
    return str(value) if value else None


class ObjectCache:
    """Objects by (plural, namespace, ModelServing); thread-safe. The watch feeds ``event``,
    the reconciler ``prime``s, reads with ``objects`` and writes its own changes through."""

    def __init__(self, clock: Callable[[], float] = time.monotonic) -> None:
        self._clock = clock
        self._lock = threading.Lock()
        self._objects: dict[Bucket, dict[str, dict[str, Any]]] = {}
        self._primed: set[Bucket] = set()
        self._gone: dict[Bucket, dict[str, float]] = {}
        """When each object the watch saw deleted went, by name (for ``recently_gone``)."""
        self._where: dict[tuple[str, str, str], Bucket] = {}
        """The bucket holding each object, by (plural, namespace, name): an object whose name
        label changes, or goes, leaves the bucket it was in."""
        self._deleted: dict[str, float] = {}
        """When the watch saw each deleted object go, by UID, oldest first (``TOMBSTONE_S``)."""
        self._changed: dict[Bucket, set[str] | None] = {}
        """The names whose object changed, came or went since the last ``changes`` of the
        bucket (None, or no entry: not known)."""
        self._ours: dict[str, bool] = {}
        """The UIDs of the Pods the controller is deleting, oldest first (``OURS_MAX``)."""
        self._by_others: dict[Bucket, dict[str, dict[str, Any]]] = {}
        """The last state of each Pod the watch saw deleted that the controller had not
        deleted, by UID, until a pass handles it."""

    @staticmethod
    def bucket(plural: str, obj: Mapping[str, Any]) -> Bucket | None:
        owner = owner_of(obj)
        if owner is None:
            return None
        return plural, str((obj.get("metadata") or {}).get("namespace", "")), owner

    def event(self, plural: str, event_type: str | None, obj: Mapping[str, Any]) -> Bucket | None:
        """One watch event (``DELETED`` removes; anything else adds or replaces). Returns the
        bucket the object left when its name label moved it out of one (to another
        ModelServing, or to none: a label-selected watch then says ``DELETED``), so that
        ModelServing is looked at too; else None."""
        meta = obj.get("metadata") or {}
        name = str(meta.get("name", ""))
        where = (plural, str(meta.get("namespace", "")), name)
        key = self.bucket(plural, obj)
        uid = meta.get("uid")
        with self._lock:
            first = False
            if event_type == "DELETED":
                first = uid not in self._deleted
                self._tombstone(uid)
            elif uid in self._deleted:
                return None  # a late copy of an object already gone
            stale, left = self._leave_others(where, key, obj, gone=event_type == "DELETED")
            if stale or key is None:
                return left
            found = self._objects.setdefault(key, {})
            old = found.get(name)
            if old is not None and _older(obj, old):
                return left
            if event_type == "DELETED":
                self._remove(key, where, gone=True)
                ours = not uid or self._ours.pop(uid, False)
                if plural == "pods" and first and not ours:
                    self._deleted_by_other(key, str(uid), obj)
            else:
                found[name] = slim(plural, obj)
                self._where[where] = key
                self._touch(key, name)
            return left

    def _deleted_by_other(self, key: Bucket, uid: str, obj: Mapping[str, Any]) -> None:
        """Keep the Pod someone else deleted for its ModelServing's next pass (the lock held)."""
        kept = self._by_others.setdefault(key, {})
        kept[uid] = slim("pods", obj)
        while len(kept) > DELETED_BY_OTHERS_MAX:
            del kept[next(iter(kept))]

    def will_delete(self, uid: str) -> None:
        """The controller is about to delete the Pod ``uid``: its deletion is not someone
        else's. Marked before the request, since the watch may report it before the answer."""
        with self._lock:
            ours = self._ours
            ours.pop(uid, None)
            ours[uid] = True
            if len(ours) > OURS_MAX:  # oldest first: a mark whose Pod never went is forgotten
                del ours[next(iter(ours))]

    def not_deleting(self, uid: str) -> None:
        """The controller's deletion of ``uid`` failed: a later deletion is someone else's."""
        with self._lock:
            self._ours.pop(uid, None)

    def deleted_by_others(self, plural: str, namespace: str, owner: str) -> list[dict[str, Any]]:
        """The Pods of ``owner`` that someone else deleted and no pass has handled yet, oldest
        first (their last state)."""
        with self._lock:
            return list((self._by_others.get((plural, namespace, owner)) or {}).values())

    def handled(self, plural: str, namespace: str, owner: str, uids: Iterable[str]) -> None:
        """A pass acted on these deletions (``deleted_by_others``)."""
        with self._lock:
            kept = self._by_others.get((plural, namespace, owner))
            if kept is None:
                return
            for uid in uids:
                kept.pop(uid, None)
            if not kept:
                del self._by_others[(plural, namespace, owner)]

    def _touch(self, key: Bucket, name: str) -> None:
        """The object ``name`` of ``key`` changed, came or went (the lock held)."""
        names = self._changed.get(key)
        if names is not None:
            names.add(name)
            if len(names) > CHANGES_MAX:
                self._changed[key] = None

    def changes(
        self, plural: str, namespace: str, owner: str
    ) -> dict[str, dict[str, Any] | None] | None:
        """The objects whose names changed, came or went since the last call for the same
        bucket, as they are now (None: gone); None when that is not known (the first call, a
        list merged in since, the bucket dropped, or more than ``CHANGES_MAX`` changes): then
        read the bucket whole (``by_name``), after this call."""
        key = (plural, namespace, owner)
        with self._lock:
            names = self._changed.get(key)
            self._changed[key] = set()
            if names is None:
                return None
            found = self._objects.get(key) or {}
            return {name: found.get(name) for name in names}

    def _tombstone(self, uid: Any) -> None:
        """Remember that the object ``uid`` is gone (the lock held); forget old ones."""
        if not uid:
            return
        now = self._clock()
        deleted = self._deleted
        deleted.pop(uid, None)
        deleted[uid] = now
        cutoff = now - TOMBSTONE_S
        while True:  # oldest first: stop at the first one kept
            oldest = next(iter(deleted))
            if deleted[oldest] >= cutoff:
                break
            del deleted[oldest]

    def _leave_others(
        self, where: tuple[str, str, str], key: Bucket | None, obj: Mapping[str, Any], *, gone: bool
    ) -> tuple[bool, Bucket | None]:
        """Before ``obj`` is filed under ``key`` (None: under no ModelServing), take it out of
        another bucket holding it (the lock held). Returns whether ``obj`` is older than that
        bucket's copy (then nothing changes: it is to be ignored), and the bucket it left."""
        before = self._where.get(where)
        if before is None or before == key:
            return False, None
        held = (self._objects.get(before) or {}).get(where[2])
        if held is not None and _older(obj, held):
            return True, None
        self._remove(before, where, gone=gone)
        return False, before

    def _remove(self, key: Bucket, where: tuple[str, str, str], *, gone: bool) -> None:
        """Take the object at ``where`` (plural, namespace, name) out of ``key`` (the lock
        held); ``gone``: the watch saw it deleted."""
        name = where[2]
        (self._objects.get(key) or {}).pop(name, None)
        self._touch(key, name)
        if self._where.get(where) == key:
            del self._where[where]
        if not gone:
            return
        names = self._gone.setdefault(key, {})
        now = self._clock()
        names[name] = now
        if len(names) > 64:
            for old_name in [n for n, t in names.items() if now - t > GONE_S]:
                del names[old_name]

    def written(self, plural: str, obj: Mapping[str, Any]) -> None:
        """The controller created or changed ``obj`` (the API's answer)."""
        self.event(plural, "MODIFIED", obj)

    def deleting(self, plural: str, namespace: str, owner: str, name: str, uid: str) -> None:
        """The controller deleted an object: it counts as terminating until the watch says
        more."""
        with self._lock:
            found = self._objects.get((plural, namespace, owner)) or {}
            old = found.get(name)
            if old is None or (old.get("metadata") or {}).get("uid") != uid:
                return
            meta = dict(old.get("metadata") or {})
            meta.setdefault("deletionTimestamp", time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()))
            found[name] = {**old, "metadata": meta}
            self._touch((plural, namespace, owner), name)

    def deleted(self, plural: str, namespace: str, owner: str, name: str) -> None:
        """The controller deleted an object that goes at once (no finalizers, as a PodGroup):
        it leaves the cache now, not when the watch reports it, so the next pass does not
        count it; its UID is remembered, so a late event does not bring it back."""
        key = (plural, namespace, owner)
        with self._lock:
            old = (self._objects.get(key) or {}).get(name)
            if old is None:
                return
            self._tombstone((old.get("metadata") or {}).get("uid"))
            self._remove(key, (plural, namespace, name), gone=False)

    def recently_gone(self, plural: str, namespace: str, owner: str) -> set[str]:
        """Objects deleted less than ``GONE_S`` ago, by name."""
        now = self._clock()
        with self._lock:
            gone = self._gone.get((plural, namespace, owner)) or {}
            return {n for n, t in gone.items() if now - t < GONE_S}

    def primed(self, plural: str, namespace: str, owner: str) -> bool:
        with self._lock:
            return (plural, namespace, owner) in self._primed

    def prime(
        self,
        plural: str,
        namespace: str,
        owner: str,
        items: Iterable[Mapping[str, Any]],
        version: str,
    ) -> list[dict[str, Any]]:
        """Merge a fresh list, read at resourceVersion ``version``, in (see the module
        docstring); the objects it leaves."""
        key = (plural, namespace, owner)
        listed = {str((o.get("metadata") or {}).get("name", "")): o for o in items}
        newest = _version({"metadata": {"resourceVersion": version}})
        with self._lock:
            self._changed.pop(key, None)
            found = self._objects.setdefault(key, {})
            for name in list(found):
                if name not in listed:
                    have = _version(found[name])
                    if newest is None or have is None or have <= newest:
                        self._remove(key, (plural, namespace, name), gone=False)
            for name, obj in listed.items():
                if (obj.get("metadata") or {}).get("uid") in self._deleted:
                    continue  # deleted since this list was read
                where = (plural, namespace, name)
                if self._leave_others(where, key, obj, gone=False)[0]:
                    continue  # moved away since this list was read
                old = found.get(name)
                if old is None or not _older(obj, old):
                    found[name] = slim(plural, obj)
                    self._where[where] = key
            self._primed.add(key)
            return list(found.values())

    def objects(self, plural: str, namespace: str, owner: str) -> list[dict[str, Any]]:
        with self._lock:
            return list((self._objects.get((plural, namespace, owner)) or {}).values())

    def by_name(self, plural: str, namespace: str, owner: str) -> dict[str, dict[str, Any]]:
        """The objects by name (a copy of the table: the objects themselves are shared and
        replaced, never changed in place)."""
        with self._lock:
            return dict(self._objects.get((plural, namespace, owner)) or {})

    def forget_all(self) -> None:
        """Every ModelServing lists again before its next read (the watch had to list again:
        a deletion may have been missed)."""
        with self._lock:
            self._primed.clear()

    def drop(self, namespace: str, owner: str) -> None:
        """Forget a deleted ModelServing's objects (its watch events may still come)."""
        with self._lock:
            for key in [k for k in self._changed if k[1:] == (namespace, owner)]:
                del self._changed[key]
            for key in [k for k in self._objects if k[1:] == (namespace, owner)]:
                for name in self._objects.pop(key):
                    where = (key[0], namespace, name)
                    if self._where.get(where) == key:
                        del self._where[where]
            for key in [k for k in self._gone if k[1:] == (namespace, owner)]:
                del self._gone[key]
            for key in [k for k in self._by_others if k[1:] == (namespace, owner)]:
                del self._by_others[key]
            self._primed = {k for k in self._primed if k[1:] != (namespace, owner)}


FRESH_S = 30.0
"""How long a ModelServing's copy from its watch, or from the answer to the controller's own
write, stands for a read of it (``LatestObjects.get``)."""


class LatestObjects:
    """The newest copy of each object of one kind, by (namespace, name): from its watch's
    events and the answers to the controller's own writes. A pass reads its ModelServing here
    instead of from the API while the copy is fresh (seen within ``fresh_s``): a GET per pass
    was an API round trip and about a millisecond and a half of the controller's CPU, on every
    pass of a rolling update. A copy nothing confirmed for ``fresh_s``, or one a status write
    found gone, sends the read back to the API; a deletion the watch missed (it listed again)
    is acted on for at most that long. Thread-safe."""

    def __init__(self, fresh_s: float = FRESH_S, clock: Callable[[], float] = time.monotonic):
        self._fresh_s = fresh_s
        self._clock = clock
        self._lock = threading.Lock()
        self._objects: dict[tuple[str, str], tuple[Mapping[str, Any], float]] = {}
        self._gone: dict[str, float] = {}
        """The UIDs of objects ``gone`` took away, and when (``TOMBSTONE_S``): the answer to a
        write can come after the watch told the object deleted, and must not bring it back."""

    @staticmethod
    def key(obj: Mapping[str, Any]) -> tuple[str, str]:
        meta = obj.get("metadata") or {}
        return str(meta.get("namespace", "")), str(meta.get("name", ""))

    def offer(self, obj: Mapping[str, Any]) -> bool:
        """Keep ``obj`` unless it is older than the copy kept (resourceVersions order every
        object of the cluster: the watch's echo of an earlier state can come after a write's
        answer, and the answer about an object deleted and made again after the new one's
        events), or its object is gone. Whether it is a state not seen before: False for the
        echo of what is kept, an older state, or a gone object's."""
        key = self.key(obj)
        meta = obj.get("metadata") or {}
        uid = meta.get("uid")
        now = self._clock()
        with self._lock:
            if uid is not None and uid in self._gone:
                return False
            kept = self._objects.get(key)
            if kept is not None:
                old = kept[0]
                if _older(obj, old):
                    return False
                old_meta = old.get("metadata") or {}
                version = meta.get("resourceVersion")
                same = uid == old_meta.get("uid")
                if same and version is not None and version == old_meta.get("resourceVersion"):
                    self._objects[key] = (old, now)
                    return False
            self._objects[key] = (obj, now)
            return True

    def gone(self, namespace: str, name: str, uid: str | None = None) -> None:
        """The object of that name (of that UID, when given) is gone: deleted, or not found.
        Its copy, and any copy of it offered later, are not read."""
        now = self._clock()
        with self._lock:
            key = (namespace, name)
            kept = self._objects.get(key)
            kept_uid = (kept[0].get("metadata") or {}).get("uid") if kept is not None else None
            if kept is not None and (uid is None or kept_uid == uid):
                del self._objects[key]
            for went in {uid, kept_uid if uid is None else None} - {None}:
                self._gone[str(went)] = now
            for old in [u for u, t in self._gone.items() if now - t > TOMBSTONE_S]:
                del self._gone[old]

    def get(self, namespace: str, name: str) -> Mapping[str, Any] | None:
        """The kept copy while fresh; None when there is none or it is too old (read the API,
        then ``offer`` or ``gone`` what it answered)."""
        with self._lock:
            kept = self._objects.get((namespace, name))
        if kept is None or self._clock() - kept[1] > self._fresh_s:
            return None
        return kept[0]
