"""The Pods' and Services' watch: events handed on, bookmarks and versions, a 410 that lists
again (and makes every ModelServing list again), errors retried."""

from __future__ import annotations

import threading
from typing import Any

import pytest

from modelserving.controller.kube import PODS, ApiError, Kube
from modelserving.controller.watch import Gone, Watch

Obj = dict[str, Any]


class ListingKube(Kube):
    def __init__(self, items: list[Obj]) -> None:
        super().__init__(api=None)
        self.items = items
        self.lists = 0

    def list_at(
        self, res: Any, namespace: str | None, selector: str | None = None
    ) -> tuple[list[Obj], str]:
        self.lists += 1
        return self.items, str(10 * self.lists)


def pod(name: str, version: str) -> Obj:
    return {"metadata": {"name": name, "resourceVersion": version}}


def make(kube: Kube, seen: list[tuple[str, str]], relisted: list[int]) -> Watch:
    return Watch(
        kube,
        PODS,
        "modelserving.volcano.sh/name",
        None,
        lambda kind, obj: seen.append((kind, obj["metadata"]["name"])),
        lambda: relisted.append(1),
    )


def test_events_are_handed_on_and_bookmarks_only_move_the_version() -> None:
    seen: list[tuple[str, str]] = []
    watch = make(ListingKube([]), seen, [])
    assert watch._event({"type": "ADDED", "object": pod("a", "11")}, "10") == "11"
    assert watch._event({"type": "BOOKMARK", "object": pod("", "15")}, "11") == "15"
    assert watch._event({"type": "DELETED", "object": pod("a", "16")}, "15") == "16"
    assert seen == [("ADDED", "a"), ("DELETED", "a")]
    with pytest.raises(Gone):
        watch._event({"type": "ERROR", "object": {"code": 410}}, "16")
    with pytest.raises(ApiError):
        watch._event({"type": "ERROR", "object": {"code": 500}}, "16")


def test_a_gone_watch_lists_again_and_every_model_serving_relists() -> None:
    kube = ListingKube([pod("a", "5")])
    seen: list[tuple[str, str]] = []
    relisted: list[int] = []
    watch = make(kube, seen, relisted)
    versions: list[str] = []
    done = threading.Event()

    def fake_watch(version: str) -> str:
        versions.append(version)
        if len(versions) == 1:
            raise Gone()
        if len(versions) == 2:
            raise ApiError(0, "GET", "/api/v1/pods", "connection refused")  # retried
        watch._stop.set()
        done.set()
        return version

    watch._watch = fake_watch  # type: ignore[method-assign]
    watch._stop.wait = lambda timeout=None: False  # type: ignore[method-assign]  # no pause
    watch._run()
    assert done.is_set()
    assert versions == ["10", "20", "20"]  # listed, gone: listed again, error: resumed
    assert kube.lists == 2 and relisted == [1]  # the first list is no relist
    assert seen == [("ADDED", "a"), ("ADDED", "a")]


def test_a_list_after_the_first_is_handed_whole_once_each_object_was_handled() -> None:
    """``listed`` gets every object of a list after the first, after the handler had each: what
    is not among them went while the watch was gone (the Node watch takes them as deleted)."""
    kube = ListingKube([pod("a", "5"), pod("b", "6")])
    seen: list[tuple[str, str]] = []
    lists: list[tuple[list[str], int]] = []
    watch = Watch(
        kube,
        PODS,
        "",
        None,
        lambda kind, obj: seen.append((kind, obj["metadata"]["name"])),
        lambda: None,
        lambda items: lists.append(([o["metadata"]["name"] for o in items], len(seen))),
    )
    watch._list()
    assert lists == []  # the first list: nothing was shown before it
    kube.items = [pod("b", "7")]
    watch._list()
    assert lists == [(["b"], 3)]  # after the handler had "b"
