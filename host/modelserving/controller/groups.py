"""The ServingGroup hooks of a reconcile pass, and the objects they own (ABI v3, section 15).

For each ServingGroup the ModelServing keeps and each plugin with an OnServingGroupChange hook,
``GroupHooks.run``
1. builds the plugin's request from the group's Pods as listed in this pass (not terminating,
   in its scope, in order: role, role replica, entry first);
2. skips the call when its input digest is the one last handled (kept in memory, and on the
   objects as the annotation ``modelserving.volcano.sh/group-input``, so a restart does not
   call again), and defers it when the last call for this plugin and group was less than
   ``DEBOUNCE_S`` ago (the pass looks again shortly);
3. calls it (``Chain.on_serving_group_change``: the object policy has checked the objects), then
   refuses a name another plugin owns, or that an object this controller does not own has;
4. writes each object by server-side apply as field manager ``modelserving-plugin-<name>``,
   with the controller's labels, the input annotation and an owner reference to the
   ModelServing: a new one is created first (so an object someone else made meanwhile is never
   taken over) and the fields of that create made the manager's applied fields; one of its own
   whose content changed is applied with its resourceVersion as a precondition, so keys the
   plugin no longer returns go. The plugin's objects of the group it no longer lists are
   deleted.
Objects of a ServingGroup the ModelServing no longer keeps, or of a plugin no longer in its
chain, are deleted. A failure follows the plugin's failure policy: ``Fail`` is returned (the
pass is retried with backoff and PluginsReady turns false), ``Ignore`` is reported and waits for
the input to change. Each call is counted by the chain's observer, each object by the recorder.
"""

from __future__ import annotations

import json
import threading
import time
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from modelserving.api import labels
from modelserving.api.errors import FailureClass, PluginFailure
from modelserving.api.group import GroupPod, group_input_digest, group_pod
from modelserving.api.hook import Hook
from modelserving.api.modelserving import ModelServing
from modelserving.api.place import PodPlace
from modelserving.chain import Chain, ChainEntry
from modelserving.chain.objects import ObjectValidator
from modelserving.controller.kube import CONFIG_MAPS, ApiError, Kube
from modelserving.workload.observed import observe_pod, owned_by
from modelserving.workload.pods import owner_reference

if TYPE_CHECKING:
    from modelserving.controller.reconciler import Recorder

PLUGIN_LABEL = labels.LABEL_PREFIX + "plugin"
PLUGIN_INDEX_ANNOTATION = labels.LABEL_PREFIX + "plugin-index"
"""Which entry of ``spec.plugins`` owns the object (a plugin may be listed more than once)."""
INPUT_ANNOTATION = labels.LABEL_PREFIX + "group-input"
OBJECTS_ANNOTATION = labels.LABEL_PREFIX + "group-objects"
"""The names of all the objects the call wrote (sorted, comma-separated): one that is missing
(deleted by hand, or a write that failed) is made again even though the input is the same."""
DEBOUNCE_S = 1.0
HOOK = Hook.ON_SERVING_GROUP_CHANGE

Owner = tuple[str, str, str]
"""(ServingGroup, plugin name, its index in spec.plugins) an owned object belongs to."""


def owner_of(group: str, entry: ChainEntry) -> Owner:
    return group, entry.name, str(entry.index)


@dataclass
class GroupsResult:
    """What the ServingGroup hooks of one pass leave for the reconciler."""

    failures: list[PluginFailure] = field(default_factory=list)
    api_errors: list[str] = field(default_factory=list)
    look_again: bool = False


def field_manager(plugin: str) -> str:
    return f"modelserving-plugin-{plugin}"


def group_pods(ms: ModelServing, pods: Iterable[Mapping[str, Any]]) -> dict[str, list[GroupPod]]:
    """The not terminating Pods of ``ms`` by ServingGroup, each group in the requests' order."""
    order = {role.name: i for i, role in enumerate(ms.spec.template.roles)}
    found: dict[str, list[tuple[tuple[int, int, int], GroupPod]]] = {}
    for pod in pods:
        seen = observe_pod(pod, ms.name)
        if seen is None or seen.terminating:
            continue
        place = PodPlace(seen.group, seen.role, seen.role_id, seen.pod_index == 0)
        key = (order.get(seen.role, len(order)), seen.role_index, seen.pod_index)
        found.setdefault(seen.group, []).append((key, group_pod(pod, place)))
    return {g: [p for _, p in sorted(items, key=lambda kp: kp[0])] for g, items in found.items()}


def _content(obj: Mapping[str, Any]) -> tuple[Any, Any, Any]:
    """What a write would change: data, and labels and annotations without the input digest."""
    meta = obj.get("metadata") or {}
    annotations = dict(meta.get("annotations") or {})
    annotations.pop(INPUT_ANNOTATION, None)
    return obj.get("data") or {}, meta.get("labels") or {}, annotations


def _held_by(obj: Mapping[str, Any]) -> str:
    """Whose the object is, when another ModelServing's ServingGroup hook wrote it: its name
    begins with both ServingGroups' names (e.g. ServingGroup ``a-1`` of ModelServing ``a`` and
    ServingGroup ``a-1-x-0`` of ModelServing ``a-1-x``)."""
    lab = (obj.get("metadata") or {}).get("labels") or {}
    if PLUGIN_LABEL not in lab:
        return ""
    return (
        f" (plugin '{lab[PLUGIN_LABEL]}' of ModelServing {lab.get(labels.NAME_LABEL)}, "
        f"ServingGroup {lab.get(labels.GROUP_NAME_LABEL)}, wrote it: the name fits both "
        "ServingGroups' prefixes; a name with no number between dashes after the ServingGroup's "
        "name cannot)"
    )


def _names(names: Iterable[str]) -> str:
    return ",".join(sorted(names))


class GroupHooks:
    """Runs ServingGroup hooks for the reconciler; safe for several workers on different
    ModelServings."""

    def __init__(
        self,
        kube: Kube,
        recorder: Recorder,
        objects: ObjectValidator | None = None,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self.kube = kube
        self.recorder = recorder
        self.objects = objects or ObjectValidator()
        self.clock = clock
        self._lock = threading.Lock()
        # by (namespace, name): (uid, group, plugin) -> the input digest last handled and the
        # names of the objects it left
        self._done: dict[tuple[str, str], dict[tuple[str, str, str], tuple[str, frozenset[str]]]]
        self._done = {}
        # by (namespace, name): (uid, group, plugin) -> when it was last called
        self._called: dict[tuple[str, str], dict[tuple[str, str, str], float]] = {}
        # ModelServings without ServingGroup hooks known to own no object: not listed again
        self._owns_nothing: set[tuple[str, str]] = set()

    def forget(self, namespace: str, name: str) -> None:
        with self._lock:
            self._done.pop((namespace, name), None)
            self._called.pop((namespace, name), None)
            self._owns_nothing.discard((namespace, name))

    def run(
        self,
        ms: ModelServing,
        raw: Mapping[str, Any],
        chain: Chain,
        pods: Iterable[Mapping[str, Any]],
        groups: Iterable[str],
        stopping: Callable[[], bool] = lambda: False,
    ) -> GroupsResult:
        """One pass's ServingGroup hooks (see the module docstring). ``stopping``: the
        ModelServing was deleted meanwhile, so nothing more is written."""
        result = GroupsResult()
        entries = chain.group_entries(HOOK)
        key = (ms.namespace, ms.name)
        with self._lock:
            if entries:
                self._owns_nothing.discard(key)
            elif key in self._owns_nothing:
                return result  # no hook, nothing owned: no list on every pass
        keep_groups = set(groups)
        owned = self._owned(ms)
        active = {(e.name, str(e.index)) for e in entries}
        names = {e.name for e in entries}
        stale = [
            (owner, obj)
            for owner, objs in owned.items()
            if owner[0] not in keep_groups or owner[1] not in names
            for obj in objs.values()
        ]
        self._delete(ms, stale, result)
        if not entries:
            if not result.api_errors:
                with self._lock:
                    self._owns_nothing.add(key)
            return result
        by_group = group_pods(ms, pods)
        everything = {name: obj for objs in owned.values() for name, obj in objs.items()}
        owners = {name: owner for owner, objs in owned.items() for name in objs}
        taken: set[str] = set()
        for group in sorted(keep_groups):
            members = by_group.get(group)
            if not members:
                continue
            for entry in entries:
                if stopping():
                    return result
                try:
                    self._one(
                        ms,
                        raw,
                        chain,
                        entry,
                        group,
                        members,
                        owned,
                        owners,
                        everything,
                        active,
                        taken,
                        result,
                    )
                except ApiError as exc:  # not the plugin's doing: the pass is retried
                    result.api_errors.append(str(exc))
        # Objects of a plugin entry no longer listed at its index (the list was reordered)
        # that no entry took over: deleted once every call of this pass went through.
        if not (result.failures or result.api_errors or result.look_again):
            leftovers = [
                (owner, obj)
                for owner, objs in owned.items()
                if owner[0] in keep_groups and owner[1] in names and owner[1:] not in active
                for name, obj in objs.items()
                if name not in taken
            ]
            self._delete(ms, leftovers, result)
        return result

    # --- one plugin, one group -----------------------------------------------------------

    def _one(
        self,
        ms: ModelServing,
        raw: Mapping[str, Any],
        chain: Chain,
        entry: ChainEntry,
        group: str,
        members: list[GroupPod],
        owned: dict[Owner, dict[str, dict[str, Any]]],
        owners: dict[str, Owner],
        everything: dict[str, dict[str, Any]],
        active: set[tuple[str, str]],
        taken: set[str],
        result: GroupsResult,
    ) -> None:
        request = chain.group_request(entry, group, members, ms, HOOK)
        if request is None:
            return
        ns = ms.namespace
        uid = ms.metadata.uid or ""
        context = {
            "labels": ms.metadata.labels or {},
            "annotations": ms.metadata.annotations or {},
            "module": entry.digest,
        }
        generation = ms.metadata.generation
        digest = group_input_digest(entry.name, entry.spec.config, generation, request, context)
        key = (uid, group, f"{entry.index}/{entry.name}")
        existing = owned.get(owner_of(group, entry), {})
        with self._lock:
            done = self._done.setdefault((ns, ms.name), {})
            called = self._called.setdefault((ns, ms.name), {})
            if done.get(key) == (digest, frozenset(existing)) or (
                existing
                and all(
                    (o["metadata"].get("annotations") or {}).get(INPUT_ANNOTATION) == digest
                    and (o["metadata"].get("annotations") or {}).get(OBJECTS_ANNOTATION)
                    == _names(existing)
                    for o in existing.values()
                )
            ):
                done[key] = (digest, frozenset(existing))
                taken.update(existing)
                return
            now = self.clock()
            if now - called.get(key, -DEBOUNCE_S) < DEBOUNCE_S:
                result.look_again = True
                return
            called[key] = now
        outcome = chain.on_serving_group_change(entry, request, self.objects)
        failure = outcome.failure
        kept = frozenset(existing)
        if entry.spec.monitor:
            self._monitor(raw, entry, group, outcome.objects, failure)
        elif failure is None:
            failure = self._write(
                ms,
                raw,
                entry,
                group,
                digest,
                outcome.objects,
                existing,
                owners,
                everything,
                active,
            )
            if failure is None:
                kept = frozenset(o["metadata"]["name"] for o in outcome.objects)
                taken.update(kept)
        if failure is not None and not entry.spec.monitor:
            taken.update(existing)
            if failure.failure_class is FailureClass.FORBIDDEN_OBJECT:
                self.recorder.objects(entry.name, "refused", 1)
            self._failed(raw, entry, failure, result)
            if entry.spec.blocks:
                return
        with self._lock:
            self._done.setdefault((ns, ms.name), {})[key] = (digest, kept)

    def _failed(
        self,
        raw: Mapping[str, Any],
        entry: ChainEntry,
        failure: PluginFailure,
        result: GroupsResult,
    ) -> None:
        if entry.spec.blocks:
            result.failures.append(failure)
            self.recorder.event(raw, "Warning", "PluginFailed", f"{failure}; retrying with backoff")
        else:
            self.recorder.event(
                raw,
                "Warning",
                "PluginIgnored",
                f"{failure}; the ServingGroup's objects are left as they are (failure policy "
                "Ignore)",
            )

    def _monitor(
        self,
        raw: Mapping[str, Any],
        entry: ChainEntry,
        group: str,
        objects: list[dict[str, Any]],
        failure: PluginFailure | None,
    ) -> None:
        """Report what a plugin in Monitor mode would have written (nothing is)."""
        if failure is not None:
            message = f"{failure} (mode Monitor: nothing blocked)"
        else:
            self.recorder.objects(entry.name, "monitored", len(objects))
            listed = ", ".join(
                f"{o['metadata']['name']} ({len(json.dumps(o.get('data') or {}))} bytes of data)"
                for o in objects
            )
            message = (
                f"plugin '{entry.name}' (mode Monitor) {HOOK} on ServingGroup {group}: would "
                f"apply {len(objects)} ConfigMap(s){': ' + listed if listed else ''} "
                "(nothing applied)"
            )
        self.recorder.event(raw, "Normal", "PluginMonitored", message)

    def _write(
        self,
        ms: ModelServing,
        raw: Mapping[str, Any],
        entry: ChainEntry,
        group: str,
        digest: str,
        objects: list[dict[str, Any]],
        existing: dict[str, dict[str, Any]],
        owners: dict[str, Owner],
        everything: dict[str, dict[str, Any]],
        active: set[tuple[str, str]],
    ) -> PluginFailure | None:
        """Write ``objects`` and delete the plugin's others of ``group``; the failure that
        stopped it (a name it may not have), None when all is done. An API error is raised."""
        ns = ms.namespace
        mine = owner_of(group, entry)
        for i, obj in enumerate(objects):
            name = obj["metadata"]["name"]
            owner = owners.get(name)
            why = None
            if owner is not None and owner != mine:
                if owner[:2] != (group, entry.name) or owner[1:] in active:
                    # another plugin, another ServingGroup, or another entry of this plugin
                    # still listed; only one that left its index (a reordered list) is taken
                    # over
                    why = (
                        f"ConfigMap {name} is owned by plugin '{owner[1]}' "
                        f"(spec.plugins[{owner[2]}], ServingGroup {owner[0]})"
                    )
            elif owner is None:
                found = self.kube.get(CONFIG_MAPS, ns, name)
                if found is not None:
                    why = f"ConfigMap {name} exists and is not owned by plugin '{entry.name}'"
                    why += _held_by(found)
            if why is not None:
                return self._failure(
                    entry, group, FailureClass.FORBIDDEN_OBJECT, f"objects[{i}]: {why}"
                )
        listing = _names(o["metadata"]["name"] for o in objects)
        written: list[str] = []
        for i, obj in enumerate(objects):
            body = self._body(ms, entry, group, digest, listing, obj)
            name = obj["metadata"]["name"]
            old = everything.get(name)
            manager = field_manager(entry.name)
            if old is not None:
                if old is existing.get(name) and _content(old) == _content(body):
                    continue
                # the controller's own: applied (keys the plugin dropped go), with its
                # resourceVersion as a precondition
                old = self.kube.adopt_updates(CONFIG_MAPS, old, manager)
                body["metadata"]["resourceVersion"] = old["metadata"].get("resourceVersion")
                self.kube.apply(CONFIG_MAPS, ns, body, manager)
            else:
                made = self.kube.create(CONFIG_MAPS, ns, body, manager)
                if made is None:
                    # made by someone else since the check above: never taken over
                    why = f"objects[{i}]: ConfigMap {name} exists and is not owned by plugin "
                    why += f"'{entry.name}'"
                    return self._failure(entry, group, FailureClass.FORBIDDEN_OBJECT, why)
                # what the create wrote becomes the manager's applied fields
                self.kube.adopt_updates(CONFIG_MAPS, made, manager)
            written.append(name)
            owners[name] = mine  # later calls of this pass see it taken
        listed = {o["metadata"]["name"] for o in objects}
        gone = [n for n in existing if n not in listed]
        deleted = [n for n in gone if self._delete_one(ms, existing[n])]
        self.recorder.objects(entry.name, "applied", len(written))
        self.recorder.objects(entry.name, "deleted", len(deleted))
        if written or gone:
            parts = []
            if written:
                parts.append("wrote ConfigMap " + ", ".join(written))
            if gone:
                parts.append("deleted ConfigMap " + ", ".join(gone))
            self.recorder.event(
                raw,
                "Normal",
                "PluginObjects",
                f"plugin '{entry.name}' {HOOK} on ServingGroup {group}: {'; '.join(parts)}",
            )
        return None

    def _failure(
        self, entry: ChainEntry, group: str, failure_class: FailureClass, message: str
    ) -> PluginFailure:
        return PluginFailure(failure_class, entry.name, HOOK, message, group=group)

    def _body(
        self,
        ms: ModelServing,
        entry: ChainEntry,
        group: str,
        digest: str,
        listing: str,
        obj: Mapping[str, Any],
    ) -> dict[str, Any]:
        """The object as applied: the plugin's, plus the controller's labels, annotation,
        namespace and owner reference."""
        meta = obj["metadata"]
        return {
            "apiVersion": obj["apiVersion"],
            "kind": obj["kind"],
            "metadata": {
                "name": meta["name"],
                "namespace": ms.namespace,
                "labels": {
                    **meta.get("labels", {}),
                    labels.NAME_LABEL: ms.name,
                    labels.GROUP_NAME_LABEL: group,
                    PLUGIN_LABEL: entry.name,
                },
                "annotations": {
                    **meta.get("annotations", {}),
                    PLUGIN_INDEX_ANNOTATION: str(entry.index),
                    INPUT_ANNOTATION: digest,
                    OBJECTS_ANNOTATION: listing,
                },
                "ownerReferences": [owner_reference(ms)],
            },
            "data": obj.get("data") or {},
        }

    # --- reading and deleting --------------------------------------------------------------

    def _owned(self, ms: ModelServing) -> dict[Owner, dict[str, dict[str, Any]]]:
        """The ConfigMaps of ServingGroup hooks this ModelServing owns, by (group, plugin)."""
        selector = f"{labels.NAME_LABEL}={ms.name},{PLUGIN_LABEL}"
        out: dict[Owner, dict[str, dict[str, Any]]] = {}
        for cm in self.kube.list(CONFIG_MAPS, ms.namespace, selector):
            if not owned_by(cm, ms.metadata.uid or ""):
                continue
            meta = cm.get("metadata") or {}
            lab = meta.get("labels") or {}
            notes = meta.get("annotations") or {}
            owner = (
                str(lab.get(labels.GROUP_NAME_LABEL, "")),
                str(lab.get(PLUGIN_LABEL, "")),
                str(notes.get(PLUGIN_INDEX_ANNOTATION, "")),
            )
            out.setdefault(owner, {})[str(meta.get("name", ""))] = cm
        return out

    def _delete(
        self,
        ms: ModelServing,
        stale: list[tuple[Owner, dict[str, Any]]],
        result: GroupsResult,
    ) -> None:
        counts: dict[str, int] = {}
        for (_, plugin, _), obj in stale:
            try:
                if self._delete_one(ms, obj):
                    counts[plugin] = counts.get(plugin, 0) + 1
            except ApiError as exc:
                result.api_errors.append(str(exc))
        for plugin, n in counts.items():
            self.recorder.objects(plugin, "deleted", n)

    def _delete_one(self, ms: ModelServing, obj: Mapping[str, Any]) -> bool:
        meta = obj.get("metadata") or {}
        return self.kube.delete(CONFIG_MAPS, ms.namespace, str(meta.get("name")), meta.get("uid"))
