"""JSON-shaped data helpers: the deep copy, the shape check and the 64-bit integer range."""

from __future__ import annotations

import threading
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

from modelserving.api.jsondata import (
    INT_MAX,
    INT_MIN,
    NotPlain,
    find_wide_int,
    json_copy,
    json_problem,
    plain_copy,
    wide_int_reason,
)

json_values = st.recursive(
    st.none()
    | st.booleans()
    | st.integers(-(2**63), 2**64 - 1)
    | st.floats(allow_nan=False)
    | st.text(),
    lambda inner: st.lists(inner, max_size=4) | st.dictionaries(st.text(), inner, max_size=4),
    max_leaves=30,
)


def test_copy_is_deep_and_equal() -> None:
    value: dict[str, Any] = {"a": [{"b": 1}, "x", None, 1.5, True]}
    copied = json_copy(value)
    assert copied == value
    copied["a"][0]["b"] = 2
    assert value["a"][0]["b"] == 1


@pytest.mark.parametrize(
    "odd",
    [lambda: None, threading.Lock()],
    ids=["function", "lock"],
)
def test_copy_of_data_pickle_cannot_carry(odd: Any) -> None:
    value: dict[str, Any] = {"a": [{"b": odd}], "c": {"d": "x"}}
    copied = json_copy(value)
    assert copied == value
    assert copied["a"][0]["b"] is odd  # kept as it is
    copied["a"][0]["e"] = 1
    copied["c"]["d"] = "y"
    assert value == {"a": [{"b": odd}], "c": {"d": "x"}}


def test_copy_with_non_string_keys_and_tuples() -> None:
    value: dict[Any, Any] = {1: {"x": [1]}, "t": (1, [2])}
    copied = json_copy(value)
    assert copied[1] == {"x": [1]} and copied[1] is not value[1]
    copied[1]["x"].append(2)
    assert value[1] == {"x": [1]}


@given(json_values)
def test_copy_equals_the_data_and_shares_no_container(value: Any) -> None:
    copied = json_copy(value)
    assert copied == value
    assert not _containers(value) & _containers(copied)


def _containers(value: Any) -> set[int]:
    found: set[int] = set()
    stack = [value]
    while stack:
        item = stack.pop()
        if isinstance(item, dict):
            found.add(id(item))
            stack.extend(item.values())
        elif isinstance(item, list):
            found.add(id(item))
            stack.extend(item)
    return found


# JSON values, and what is not JSON in them: tuples, bytes, NaN and infinity, non-string keys.
odd_values = st.recursive(
    json_values
    | st.just(b"x")
    | st.sampled_from([float("nan"), float("inf")])
    | st.tuples(st.integers(0, 2)),
    lambda inner: (
        st.lists(inner, max_size=4)
        | st.dictionaries(st.text(max_size=2) | st.integers(0, 2), inner, max_size=4)
    ),
    max_leaves=30,
)


@given(odd_values, st.integers(0, 6))
def test_plain_copy_accepts_what_the_check_accepts_and_copies_it(value: Any, depth: int) -> None:
    """One walk checks and copies: it refuses exactly what ``json_problem`` finds, and what it
    returns equals the value and shares none of its containers."""
    problem = json_problem(value, depth)
    try:
        copied = plain_copy(value, depth)
    except NotPlain:
        assert problem is not None
        return
    assert problem is None
    assert copied == value
    assert not _containers(value) & _containers(copied)


@given(odd_values)
def test_a_flat_map_or_list_is_copied_too(value: Any) -> None:
    for flat in ({"a": value if not isinstance(value, dict | list) else 1}, [1, "x", None]):
        copied = json_copy(flat)
        assert copied == flat
        assert copied is not flat


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


@given(json_values)
def test_what_msgpack_can_carry_has_no_wide_integer(value: Any) -> None:
    assert find_wide_int(value) is None


@pytest.mark.parametrize(
    ("value", "found"),
    [
        ({"a": {"b": 2**70}}, (("a", "b"), 2**70)),
        ([0, INT_MAX, INT_MIN, {"x": [INT_MAX + 1]}], ((3, "x", 0), INT_MAX + 1)),
        ({"first": INT_MIN - 1, "second": 2**99}, (("first",), INT_MIN - 1)),
        ([[[[[[-(2**64)]]]]], 2**65], ((0, 0, 0, 0, 0, 0), -(2**64))),
    ],
    ids=["nested", "just-past-uint64", "first-in-document-order", "deep-first"],
)
def test_the_first_wide_integer_and_its_path(value: Any, found: Any) -> None:
    assert find_wide_int(value) == found


def test_booleans_and_floats_are_not_wide_integers_and_depth_does_not_matter() -> None:
    assert find_wide_int({"a": True, "b": 1e300, "c": [False]}) is None
    deep: Any = 2**64
    for _ in range(100_000):
        deep = [deep]
    found = find_wide_int(deep)
    assert found is not None
    assert len(found[0]) == 100_000


def test_the_reason_names_the_range_and_the_value_when_readable() -> None:
    assert wide_int_reason(2**70) == (
        "integer 1180591620717411303424 is outside the 64-bit range "
        "(-9223372036854775808 to 18446744073709551615)"
    )
    assert wide_int_reason(-(16**5000)).startswith("an integer of 20001 bits is outside")
