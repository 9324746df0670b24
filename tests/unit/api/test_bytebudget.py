"""``ByteBudget``: the newest values kept while their sizes come to at most the budget."""

from __future__ import annotations

from modelserving.api.bytebudget import ByteBudget


def test_the_oldest_go_first_when_the_budget_would_be_passed() -> None:
    kept: ByteBudget[str, int] = ByteBudget(10)
    for i, key in enumerate("abcd"):
        kept.keep(key, 4, i)
    assert list(kept) == ["c", "d"] and kept.values() == [2, 3]
    assert kept.kept_bytes == 8 and kept.get("a") is None and kept.get("d") == 3


def test_a_key_kept_keeps_its_first_value_and_size() -> None:
    kept: ByteBudget[str, int] = ByteBudget(10)
    kept.keep("a", 4, 1)
    kept.keep("a", 6, 2)
    assert kept.get("a") == 1 and kept.kept_bytes == 4 and len(kept) == 1


def test_one_value_larger_than_the_budget_empties_the_rest() -> None:
    kept: ByteBudget[str, int] = ByteBudget(10)
    kept.keep("a", 4, 1)
    kept.keep("big", 12, 2)
    assert list(kept) == ["big"] and kept.kept_bytes == 12
    kept.clear()
    assert not kept and kept.kept_bytes == 0
