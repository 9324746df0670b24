"""``make bench``, pass part: the CPU of one reconcile pass (``workload.sync``) per Pod, as the
ModelServing grows from 1,000 to 10,000 Pods.

No cluster: the Pods and Services a settled ModelServing of the controller benchmark's shape
(ServingGroups of 2 roles x an entry and 3 workers, with PodGroups) would have are made once, as the
API would return them (Running and Ready), and ``sync`` decides a pass over them: settled (nothing
to do) and at the start of a rolling update (a new image: a quarter of the ServingGroups deleted),
each from a fresh list of the Pods; and, as the controller runs it, after one Pod changed (a Pod
turned not Ready), from the ``PodSet`` kept from the last pass, given that one change as the
controller's cache gives it (``ObjectCache.changes``), with the ``GroupIndex`` kept with it: the
pass works only on that Pod's ServingGroup. And a whole rolling update simulated (``rollout``), each
pass given only what changed since the last; then again on a slow control plane, where a deleted
Pod stays terminating for many passes, as the 10k fleet's are. No plugin has an OnPodReady hook.
The time per Pod of a fresh pass should stay flat as the ModelServing grows; the time of a pass
after one event should not grow with it at all, nor the rolling update's CPU per Pod. Each size
runs with Python's default
garbage-collector thresholds and with the controller's (``collector.GC_THRESHOLDS``). Figures are
printed, never asserted.

    python -m modelserving.bench.passes [--sizes 1000,5000,10000] [--runs 5]
"""

from __future__ import annotations

import argparse
import copy
import functools
import gc
import itertools
import statistics
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from modelserving.api import parse_model_serving
from modelserving.api.modelserving import ModelServing, ModelServingStatus
from modelserving.bench import controller as bench
from modelserving.collector import GC_THRESHOLDS
from modelserving.workload.owned import OwnedSet
from modelserving.workload.plan import plan
from modelserving.workload.podset import PodSet
from modelserving.workload.revision import revision
from modelserving.workload.sync import SyncPlan, sync

SIZES = (1000, 5000, 10000)
RUNS = 5
PODS_PER_GROUP = len(bench.ROLES) * (1 + bench.WORKERS)
NOW = 1_000_000.0


def model_serving(groups: int, image: str | None = None) -> ModelServing:
    """The controller benchmark's ModelServing with ``groups`` ServingGroups (``image``: every
    container's, for a new revision), rolling 25 % at a time."""
    doc = bench.model_serving("passes", [], groups)
    doc["metadata"].update(namespace="bench", uid="uid-passes", generation=1)
    doc["spec"]["schedulerName"] = "volcano"  # a PodGroup per ServingGroup
    doc["spec"]["rolloutStrategy"] = {
        "type": "ServingGroupRollingUpdate",
        "rollingUpdateConfiguration": {"maxUnavailable": "25%"},
    }
    if image is not None:
        for role in doc["spec"]["template"]["roles"]:
            for key in ("entryTemplate", "workerTemplate"):
                for container in role[key]["spec"]["containers"]:
                    container["image"] = image
    return parse_model_serving(doc)


def settled(ms: ModelServing) -> tuple[list[dict[str, Any]], list[dict[str, Any]], list[Any]]:
    """Every Pod (Running and Ready), Service and PodGroup of ``ms``, as the API returns them."""
    pods: list[dict[str, Any]] = []
    services: list[dict[str, Any]] = []
    pod_groups: list[dict[str, Any]] = []
    for n, group in enumerate(plan(ms, gang=True)):
        if group.pod_group is not None:
            pod_groups.append(group.pod_group)
        for replica in group.roles:
            if replica.service is not None:
                services.append(replica.service)
            for k, desired in enumerate(replica.pods()):
                pod = copy.deepcopy(desired.pod)
                pod["metadata"].update(uid=f"pod-{n}-{replica.role}-{k}", resourceVersion="1")
                pod["status"] = {
                    "phase": "Running",
                    "conditions": [{"type": "Ready", "status": "True"}],
                    "containerStatuses": [{"name": "engine", "restartCount": 0}],
                }
                pods.append(pod)
    return pods, services, pod_groups


def median_s(run: Callable[[], object], runs: int) -> float:
    times = []
    for _ in range(runs):
        start = time.process_time()
        run()
        times.append(time.process_time() - start)
    return statistics.median(times)


def one_size(pods_wanted: int, runs: int) -> tuple[int, float, float, int, float]:
    """Pods, settled pass seconds, rolling-update pass seconds, Pods the latter deletes, and
    the seconds of a pass after one Pod event (a kept ``PodSet`` brought up to date)."""
    groups = max(1, pods_wanted // PODS_PER_GROUP)
    ms = model_serving(groups)
    pods, services, pod_groups = settled(ms)
    ms.status = ModelServingStatus(current_revision=revision(ms))
    rolled = model_serving(groups, image="vllm/vllm-openai:v0.10.1")
    rolled.status = ms.status

    def pass_of(target: ModelServing) -> Callable[[], object]:
        return lambda: sync(
            target, pods, services, pod_groups, now=NOW, gang=True, ready_hooks=False
        )

    pass_of(ms)()  # warm: observe_pod remembers each Pod object's answer, as in the controller
    steady = median_s(pass_of(ms), runs)
    update = median_s(pass_of(rolled), runs)
    deleted = len(pass_of(rolled)().delete_pods)  # type: ignore[attr-defined]
    by_name = {p["metadata"]["name"]: p for p in pods}
    kept = PodSet(ms.name, ms.metadata.uid or "")
    kept.refresh(by_name)
    names = list(by_name)
    turn = [0]

    def after_one_event() -> object:
        name = names[turn[0] % len(names)]
        turn[0] += 1
        pod = copy.deepcopy(by_name[name])
        ready = pod["status"]["conditions"][0]
        ready["status"] = "False" if ready["status"] == "True" else "True"
        by_name[name] = pod
        kept.apply({name: pod})  # as the controller's cache hands it the change
        return sync(ms, kept, services, pod_groups, now=NOW, gang=True, ready_hooks=False)

    after_one_event()
    event = median_s(after_one_event, runs)
    return len(pods), steady, update, deleted, event


READY_PER_PASS = 25
"""Pods the simulated rolling update sees turn Ready between two passes (the 10k fleet's rolling
update made a pass for about 24 Pods: 419 passes)."""


@dataclass
class Rollout:
    """A simulated rolling update of one size: its passes and their CPU (``rollout``)."""

    pods: int
    passes: int
    seconds: float
    done: bool
    """Every Pod at the new revision and Ready, and a last pass with nothing to do."""


def rollout(
    pods_wanted: int,
    ready_per_pass: int = READY_PER_PASS,
    slow: bool = False,
    check: Callable[[SyncPlan, Callable[..., SyncPlan]], None] | None = None,
) -> Rollout:
    """A rolling update of the whole ModelServing (a new image, 25 % at a time), as the
    controller runs it, with no cluster: each pass is given a kept ``PodSet`` and ``OwnedSet``s
    brought up to date with what changed since the last one (as the controller's cache hands
    them), the pass's Pods, Services and PodGroups appear (the Pods Pending), and
    ``ready_per_pass`` of the Pods still Pending turn Ready before the next pass. Until a pass
    has nothing left to do. Only ``sync``'s CPU is counted.

    The pass's deletions happen at once; with ``slow``, as on a control plane that takes
    minutes over a big rolling update (the 10k fleet's kwok), a deleted Pod stays terminating
    and only ``ready_per_pass`` of them go before each pass (their names then gone a moment
    ago), so hundreds of ServingGroups wait for their names in every pass. ``check`` is given
    each pass's plan and a function that decides the same pass again from lists of the same
    objects (with more of ``sync``'s keywords: the tests compare it with ``every_group``)."""
    groups = max(1, pods_wanted // PODS_PER_GROUP)
    ms = model_serving(groups)
    pods, services, pod_groups = settled(ms)
    ms.status = ModelServingStatus(current_revision=revision(ms))
    rolled = model_serving(groups, image="vllm/vllm-openai:v0.10.1")
    rolled.status = ms.status
    history = {revision(ms): [r.to_api() for r in ms.spec.template.roles]}
    uid = ms.metadata.uid or ""
    kept = PodSet(ms.name, uid)
    kept.refresh({p["metadata"]["name"]: p for p in pods})
    owned = (OwnedSet(uid), OwnedSet(uid))
    owned[0].refresh(services)
    owned[1].refresh(pod_groups)
    sync(ms, kept, *owned, now=NOW, gang=True, ready_hooks=False, history=history)
    made = itertools.count()
    pending: list[dict[str, Any]] = []
    terminating: list[str] = []
    gone: set[str] = set()
    passes, seconds = 0, 0.0
    while passes < 100 * groups:
        inputs: dict[str, Any] = {
            "now": NOW,
            "gang": True,
            "ready_hooks": False,
            "history": history,
        }
        start = time.process_time()
        plan = sync(rolled, kept, *owned, recently_gone=gone, **inputs)
        seconds += time.process_time() - start
        passes += 1
        if check is not None:  # the same pass from lists of the same objects
            lists = [list(kept.raw.values())] + [list(o.objects.values()) for o in owned]
            check(plan, functools.partial(sync, rolled, *lists, recently_gone=gone, **inputs))
        changes: dict[str, dict[str, Any] | None] = {}
        for ref in plan.delete_pods:
            if not slow:
                changes[ref.name] = None
                continue
            pod = kept.raw.get(ref.name)
            if pod is not None:
                meta = {**pod["metadata"], "deletionTimestamp": "2026-12-07T00:00:00Z"}
                changes[ref.name] = {**pod, "metadata": meta}
                terminating.append(ref.name)
        gone = set()
        for name in terminating[:ready_per_pass]:
            changes[name] = None
            gone.add(name)
        del terminating[:ready_per_pass]
        service_changes: dict[str, Any] = dict.fromkeys(plan.delete_services)
        pod_group_changes: dict[str, Any] = dict.fromkeys(plan.delete_pod_groups)
        for work in plan.creates:
            if work.pod_group is not None:
                pod_group_changes[work.pod_group["metadata"]["name"]] = work.pod_group
            for step in work.steps:
                if isinstance(step, dict):
                    service_changes[step["metadata"]["name"]] = step
                    continue
                pod = copy.deepcopy(step.pod)
                pod["metadata"].update(uid=f"new-{next(made)}", resourceVersion="1")
                pod["status"] = {"phase": "Pending"}
                changes[step.name] = pod
                pending.append(pod)
        for pod in pending[:ready_per_pass]:
            name = pod["metadata"]["name"]
            current = changes[name] if name in changes else kept.raw.get(name)
            if current is None or current["metadata"]["uid"] != pod["metadata"]["uid"]:
                continue  # deleted since
            ready = copy.deepcopy(pod)
            ready["status"] = {
                "phase": "Running",
                "conditions": [{"type": "Ready", "status": "True"}],
                "containerStatuses": [{"name": "engine", "restartCount": 0}],
            }
            changes[name] = ready
        del pending[:ready_per_pass]
        if not changes and not service_changes and not pod_group_changes:
            status = plan.status
            done = status is not None and status.updated_replicas == groups and not status.updating
            return Rollout(len(pods), passes, seconds, done)
        kept.apply(changes)
        owned[0].apply(service_changes)
        owned[1].apply(pod_group_changes)
    return Rollout(len(pods), passes, seconds, False)


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(prog="python -m modelserving.bench.passes")
    parser.add_argument("--sizes", default=",".join(map(str, SIZES)), help="Pods, comma-separated")
    parser.add_argument("--runs", type=int, default=RUNS, help="passes per figure (median)")
    args = parser.parse_args(argv)
    sizes = [int(s) for s in args.sizes.split(",") if s]
    print(f"pass benchmark: one reconcile pass (sync) of N Pods, CPU, median of {args.runs}")
    print(
        f"  {'Pods':>6}  {'GC thresholds':<16}  {'settled':>10}  {'per Pod':>8}"
        f"  {'update':>10}  {'per Pod':>8}  deletes  {'one event':>10}  {'per Pod':>8}"
    )
    default = gc.get_threshold()
    try:
        for size in sizes:
            for label, thresholds in (
                ("Python's default", default),
                ("controller's", GC_THRESHOLDS),
            ):
                gc.set_threshold(*thresholds)
                pods, steady, update, deleted, event = one_size(size, args.runs)
                print(
                    f"  {pods:>6}  {label:<16}  {steady * 1e3:>8.1f}ms"
                    f"  {steady / pods * 1e6:>6.1f}us  {update * 1e3:>8.1f}ms"
                    f"  {update / pods * 1e6:>6.1f}us  {deleted:>7}  {event * 1e3:>8.1f}ms"
                    f"  {event / pods * 1e6:>6.1f}us"
                )
        print(
            f"  a rolling update of the whole ModelServing, simulated ({READY_PER_PASS} Pods turn"
            " Ready between passes; the controller's thresholds); and slow (as many deleted Pods"
            " go, the rest terminating):"
        )
        gc.set_threshold(*GC_THRESHOLDS)
        for label, slow in (("rolling update", False), ("slow rollout", True)):
            for size in sizes:
                run = rollout(size, slow=slow)
                print(
                    f"  {run.pods:>6}  {label:<14}  {run.passes:>5} passes  {run.seconds:>6.2f} s"
                    f"  {run.seconds / run.passes * 1e3:>6.2f} ms/pass"
                    f"  {run.seconds / run.pods * 1e6:>6.1f} us/Pod"
                )
    finally:
        gc.set_threshold(*default)
    print(
        "  target: the CPU per Pod of a fresh pass flat from 1k to 10k Pods; a pass after one"
        " event as long at 10k as at 1k; the rolling update's CPU per Pod flat"
    )


if __name__ == "__main__":
    main()
