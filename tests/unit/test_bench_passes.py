"""The pass benchmark's set-up and report (the figures themselves are for make bench)."""

from __future__ import annotations

import gc
from collections import Counter
from collections.abc import Callable
from typing import Any

import pytest

from modelserving.bench import passes
from modelserving.collector import GC_THRESHOLDS
from modelserving.workload import sync as sync_module
from modelserving.workload.sync import SyncPlan
from tests.unit.workload.test_podset import summary


def test_the_settled_pods_need_nothing_and_a_new_image_rolls_a_quarter() -> None:
    ms = passes.model_serving(8)
    pods, services, pod_groups = passes.settled(ms)
    assert (len(pods), len(services), len(pod_groups)) == (64, 16, 8)
    count, _steady, _update, deleted, _event = passes.one_size(64, runs=1)
    assert (count, deleted) == (64, 16)  # 25 % of 8 ServingGroups: 2 of them, 8 Pods each


def test_each_size_runs_with_both_thresholds_and_the_default_comes_back(
    capsys: pytest.CaptureFixture[str],
) -> None:
    before = gc.get_threshold()
    passes.main(["--sizes", "32,64", "--runs", "1"])
    assert gc.get_threshold() == before != GC_THRESHOLDS
    lines = capsys.readouterr().out.splitlines()
    rows = [line.split() for line in lines[2:6]]
    assert [(row[0], row[1]) for row in rows] == [
        ("32", "Python's"),
        ("32", "controller's"),
        ("64", "Python's"),
        ("64", "controller's"),
    ]
    assert [line.split()[:3] for line in lines[7:11]] == [
        ["32", "rolling", "update"],
        ["64", "rolling", "update"],
        ["32", "slow", "rollout"],
        ["64", "slow", "rollout"],
    ]


def test_the_simulated_rolling_update_ends_with_every_pod_replaced() -> None:
    run = passes.rollout(80, ready_per_pass=3)
    assert run.done and run.pods == 80
    # 10 ServingGroups, at most 2 (25 %) unavailable at a time, 3 Pods Ready a pass
    assert run.passes >= 80 // 3


@pytest.mark.parametrize("ready_per_pass", [1, 3, 7])
def test_a_slow_rolling_update_decides_every_pass_as_a_visit_of_every_group(
    ready_per_pass: int,
) -> None:
    """Deleted Pods that stay terminating: new ServingGroups wait for their names over many
    passes (no plan is built for them then), and each pass decides as a pass from lists that
    visits and plans every ServingGroup."""
    waited: list[float | None] = []

    def check(plan: SyncPlan, again: Callable[..., SyncPlan]) -> None:
        assert summary(plan) == summary(again(every_group=True))
        waited.append(plan.requeue_after)

    run = passes.rollout(96, ready_per_pass=ready_per_pass, slow=True, check=check)
    assert run.done and len(waited) == run.passes
    assert sum(w is not None for w in waited) > run.passes // 2  # they waited for their names


def test_every_group_plans_every_new_serving_group_and_the_kept_pass_does_not(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """``every_group`` is what the shortcut is compared with: it must never take it."""
    calls: Counter[tuple[str, bool]] = Counter()
    for method in ("create_fresh", "fresh_plan"):
        original = getattr(sync_module._Sync, method)

        def counting(self: Any, *args: Any, _method: str = method, _f: Any = original) -> Any:
            calls[(_method, self.every_group)] += 1
            return _f(self, *args)

        monkeypatch.setattr(sync_module._Sync, method, counting)

    def check(plan: SyncPlan, again: Callable[..., SyncPlan]) -> None:
        again(every_group=True)

    passes.rollout(96, ready_per_pass=3, slow=True, check=check)
    assert calls[("create_fresh", True)] == calls[("fresh_plan", True)] > 0
    assert calls[("fresh_plan", False)] < calls[("create_fresh", False)] / 2
