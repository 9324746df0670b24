"""An OwnedSet brought up to date from its changes holds what one read whole holds."""

from __future__ import annotations

from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from modelserving.workload.owned import OwnedSet

UID = "uid-ms"
NAMES = [f"svc-{n}" for n in range(6)]


def service(name: str, group: str | None, owner: str, n: int) -> dict[str, Any]:
    meta: dict[str, Any] = {
        "name": name,
        "resourceVersion": str(n),
        "ownerReferences": [{"uid": owner, "controller": True}],
    }
    if group is not None:
        meta["labels"] = {"modelserving.volcano.sh/group-name": group}
    return {"metadata": meta}


def view(owned: OwnedSet) -> Any:
    return (owned.objects, owned.groups, owned.by_group, set(owned.table))


@settings(max_examples=200, deadline=None)
@given(
    steps=st.lists(
        st.lists(
            st.tuples(
                st.sampled_from(NAMES),
                st.one_of(st.none(), st.sampled_from(["llm-0", "llm-1", "llm-01"])),
                st.sampled_from([UID, "someone-else"]),
                st.booleans(),  # gone
            ),
            max_size=4,
        ),
        min_size=1,
        max_size=8,
    ),
    whole=st.lists(st.booleans(), min_size=8, max_size=8),
)
def test_changes_bring_a_set_to_what_a_refresh_finds(
    steps: list[list[Any]], whole: list[bool]
) -> None:
    """Random changes (new, relabelled, taken over by another owner, gone, the same object),
    each step given as its changes or, now and then, as every object (a list after the watch
    listed again): after each step, the set holds what a new set refreshed from every object
    holds; the version moves exactly when something changed, and ``changed`` names every name
    and label that did."""
    objects: dict[str, dict[str, Any]] = {}
    kept = OwnedSet(UID)
    kept.refresh([])
    for n, step in enumerate(steps):
        changes: dict[str, dict[str, Any] | None] = {}
        for name, group, owner, gone in step:
            if gone:
                objects.pop(name, None)
                changes[name] = None
            else:
                objects[name] = changes[name] = service(name, group, owner, n)
        before, version, known = view(kept), kept.version, set(kept.table)
        if whole[n]:
            kept.refresh(list(objects.values()))
        else:
            kept.apply(changes)
        fresh = OwnedSet(UID)
        fresh.refresh(list(objects.values()))
        assert view(kept) == view(fresh)
        replaced = any(obj is not None for obj in changes.values())  # new objects each
        if not whole[n]:
            assert (kept.version != version) == (replaced or view(kept) != before)
        elif view(kept) != before:
            assert kept.version != version
        if kept.version != version:
            assert kept.changes_since(version) is kept.changed
            assert {n for n, o in changes.items() if o is not None or n in known} <= kept.changed
        assert all(names == sorted(names) for names in kept.by_group.values())


def test_a_list_after_changes_is_read_whole() -> None:
    """A refresh after ``apply`` compares every object, even when it has as many objects as
    the refresh before (none, say): the watch listed again and something went."""
    kept = OwnedSet(UID)
    kept.refresh([])
    kept.apply({"svc-0": service("svc-0", "llm-0", UID, 1)})
    kept.refresh([])
    assert kept.objects == {} and kept.by_group == {}


def test_the_same_objects_change_nothing() -> None:
    kept = OwnedSet(UID)
    first = service("svc-0", "llm-0", UID, 1)
    kept.refresh([first])
    version = kept.version
    kept.apply({"svc-0": first})
    kept.refresh([first])
    assert kept.version == version and kept.changes_since(version) == set()


def test_apply_needs_a_set_read_whole_and_a_bad_change_empties_it() -> None:
    kept = OwnedSet(UID)
    with pytest.raises(ValueError, match="refresh"):
        kept.apply({"svc-0": None})
    kept.refresh([service("svc-0", "llm-0", UID, 1)])
    version = kept.version
    with pytest.raises(ValueError, match="names another object"):
        kept.apply({"svc-1": service("svc-2", "llm-0", UID, 2)})
    assert kept.objects == {} and not kept.whole
    assert kept.changes_since(version) is None  # a pass reads every ServingGroup again
