"""A kept PodSet against one made afresh: every part of its state the reconciler and ``sync``
read, under more kinds of change, and after a refresh that failed."""

from __future__ import annotations

import copy
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from modelserving.api import labels, parse_model_serving
from modelserving.workload.observed import DELETION_COST_ANNOTATION
from modelserving.workload.podset import PodSet
from modelserving.workload.sync import sync
from tests.unit.conftest import manifest, role
from tests.unit.workload.test_podset import changed, made

MS = parse_model_serving(manifest(replicas=3, roles=[role("decode", replicas=2, workers=1)]))
BASE = {d.name: made(d) for w in sync(MS, [], now=0.0).creates for d in w.pods}


def state(ps: PodSet) -> Any:
    """Everything of a PodSet the reconciler or sync reads."""
    return (
        sorted(ps.raw),
        dict(sorted(ps.observed.items())),
        sorted(ps.terminating),
        sorted(ps.unstamped_failures),
        dict(ps.revisions),
        {i: [p.name for p in g.pods] for i, g in ps.groups.items()},
        {i: g.pods for i, g in ps.groups.items()},
        list(ps.groups),
    )


def extra_change(pod: dict[str, Any], change: str, n: int) -> dict[str, Any] | None:
    pod = copy.deepcopy(pod)
    meta = pod["metadata"]
    if change == "owner back":
        meta["ownerReferences"] = [dict(meta["ownerReferences"][0], uid="uid-1")]
    elif change == "recreated":
        meta["uid"] = f"again-{n}"
        pod["status"] = {**pod["status"], "phase": "Pending"}
    elif change == "template hash":
        meta["labels"][labels.ROLE_TEMPLATE_HASH_LABEL] = f"h{n % 2}"
    elif change == "cost":
        meta.setdefault("annotations", {})[DELETION_COST_ANNOTATION] = str(n)
    elif change == "no revision":
        meta["labels"].pop(labels.REVISION_LABEL, None)
    elif change == "unstamped foreign failure":
        meta["ownerReferences"] = [dict(meta["ownerReferences"][0], uid="someone-else")]
        pod["status"]["phase"] = "Failed"
    else:
        return changed(pod, change, n)
    return pod


KINDS = (
    "failed", "restarted", "terminating", "gone", "same content", "foreign", "owner back",
    "recreated", "template hash", "cost", "no revision", "relabel revision",
    "outside the layout", "unstamped foreign failure",
)  # fmt: skip


@settings(max_examples=150, deadline=None)
@given(data=st.data())
def test_kept_state_equals_fresh_state_on_more_kinds_of_change(data: st.DataObject) -> None:
    """All the state a kept PodSet carries (not only sync's plan) equals a fresh one's, with
    changes the existing generator lacks (owner restored, same-name re-create, hash/cost/
    revision labels, a foreign unstamped failure) and Pods coming back after being gone."""
    pods = dict(BASE)
    kept = PodSet(MS.name, "uid-1")
    for n in range(data.draw(st.integers(1, 12))):
        for name in data.draw(st.lists(st.sampled_from(sorted(BASE)), unique=True, max_size=4)):
            if name not in pods:
                pods[name] = BASE[name]  # back (the very object seen earlier)
                continue
            after = extra_change(pods[name], data.draw(st.sampled_from(KINDS)), n)
            if after is None:
                del pods[name]
            else:
                pods[name] = after
        kept.refresh(dict(pods))
        assert state(kept) == state(PodSet.of(MS.name, "uid-1", pods.values()))


def test_a_refresh_that_raises_is_not_taken_half() -> None:
    """One Pod that makes ``observe_pod`` raise, after another Pod's change was taken in: the
    next refresh still gives what a fresh set of the same Pods gives (the Pods taken in before
    the error are not left unseen, as unchanged, in ServingGroups never rebuilt)."""
    kept = PodSet(MS.name, "uid-1")
    pods = dict(BASE)
    kept.refresh(dict(pods))
    a, bad = "sample-0-decode-0-0", "sample-2-decode-0-0"
    pods[a] = changed(pods[a], "not ready", 0) or {}
    broken = copy.deepcopy(pods[bad])
    broken["status"]["phase"] = "Pending"  # not ready: its restarts are read
    broken["status"]["containerStatuses"][0]["restartCount"] = "n/a"  # int() raises
    # a's change is seen first (dict order), then bad raises
    with pytest.raises(ValueError, match="n/a"):
        kept.refresh({**pods, bad: broken})
    pods[bad] = changed(pods[bad], "not ready", 0) or {}  # the bad Pod is fixed next
    kept.refresh(dict(pods))
    fresh = PodSet.of(MS.name, "uid-1", pods.values())
    assert [p.ready for p in kept.groups[0].pods] == [p.ready for p in fresh.groups[0].pods]
