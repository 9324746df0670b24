"""JSON-shaped data helpers: the deep copy and the shape check."""

from __future__ import annotations

from typing import Any

import pytest

from modelserving.api.jsondata import json_copy, json_problem


def test_copy_is_deep_and_equal() -> None:
    value: dict[str, Any] = {"a": [{"b": 1}, "x", None, 1.5, True]}
    copied = json_copy(value)
    assert copied == value
    copied["a"][0]["b"] = 2
    assert value["a"][0]["b"] == 1


@pytest.mark.parametrize("value", [None, 1, 1.5, "x", True, [], {}, {"a": [1, {"b": None}]}])
def test_plain_json_has_no_problem(value: Any) -> None:
    assert json_problem(value) is None


@pytest.mark.parametrize(
    ("value", "problem"),
    [
        ({"a": (1,)}, "holds a tuple at '/a'"),
        ({"a": [b"x"]}, "holds a bytes at '/a/0'"),
        ({"a": float("inf")}, "holds inf at '/a'"),
        ({"a": {2: "x"}}, "non-string key 2 at '/a'"),
    ],
)
def test_problems_name_the_place(value: Any, problem: str) -> None:
    found = json_problem(value)
    assert found is not None
    assert problem in found


def test_depth_limit_is_exact_and_iterative() -> None:
    value: Any = 0
    for _ in range(3):
        value = [value]
    assert json_problem(value, max_depth=3) is None
    assert json_problem([value], max_depth=3) == "is nested more than 3 levels deep (at '/0/0/0')"
    deep: Any = {}
    for _ in range(100_000):
        deep = {"k": deep}
    found = json_problem(deep)
    assert found is not None
    assert found.startswith("is nested more than 64 levels deep")
