"""Quantity sums and their text exactly as k8s.io/apimachinery makes them (vectors from Go)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from modelserving.workload.quantity import (
    BINARY_SI,
    DECIMAL_EXPONENT,
    DECIMAL_SI,
    Quantity,
    QuantityError,
    canonical,
    parse,
    total,
)

VECTORS: list[Any] = json.loads((Path(__file__).parent / "data" / "quantity_sums.json").read_text())


@pytest.mark.parametrize(("terms", "expected"), VECTORS, ids=[json.dumps(v[0]) for v in VECTORS])
def test_sums_print_as_go_prints_them(terms: list[list[Any]], expected: str) -> None:
    assert total([(q, n) for q, n in terms]) == expected


@pytest.mark.parametrize(
    ("text", "nanos", "fmt"),
    [
        ("500m", 500_000_000, DECIMAL_SI),
        ("1Gi", 2**30 * 10**9, BINARY_SI),
        ("0.5Ki", 512 * 10**9, BINARY_SI),
        ("0.5", 500_000_000, DECIMAL_SI),
        ("2e3", 2000 * 10**9, DECIMAL_EXPONENT),
        ("1E3", 1000 * 10**9, DECIMAL_EXPONENT),
        ("1E", 10**18 * 10**9, DECIMAL_SI),  # E alone is exa
        ("1.0000000001", 1_000_000_001, DECIMAL_SI),  # finer than nano: rounded up
        ("0.0001Ki", 102_400_000, DECIMAL_SI),  # BinarySI below 1 is DecimalSI
        ("16Ei", (2**63 - 1) * 10**9, BINARY_SI),  # BinarySI capped at int64
        (" 2 ", 2 * 10**9, DECIMAL_SI),
        (4, 4 * 10**9, DECIMAL_SI),  # a JSON number
        (0.25, 250_000_000, DECIMAL_SI),
        ("-1", -(10**9), DECIMAL_SI),
    ],
)
def test_parse(text: str | int | float, nanos: int, fmt: str) -> None:
    assert parse(text) == Quantity(nanos, fmt)


@pytest.mark.parametrize("bad", ["", "abc", "1x", "1e1.5", "1Ki2", "--1", True, float("inf")])
def test_not_quantities(bad: Any) -> None:
    with pytest.raises(QuantityError):
        parse(bad)


@pytest.mark.parametrize(
    ("q", "text"),
    [
        (Quantity(0, BINARY_SI), "0"),
        (Quantity(1023 * 10**9, BINARY_SI), "1023"),  # below 1024: decimal
        (Quantity(1536 * 2**20 * 10**9, BINARY_SI), "1536Mi"),
        (Quantity(1025 * 10**9, BINARY_SI), "1025"),
        (Quantity(1500 * 10**6 * 1024, BINARY_SI), "1536"),  # 1.5Ki
        (Quantity(1_500_000_000 * 1024 + 1, BINARY_SI), "1536000000001n"),  # not whole: decimal
        (Quantity(1_500_000_000, DECIMAL_SI), "1500m"),
        (Quantity(2 * 10**9, DECIMAL_SI), "2"),
        (Quantity(10**21 * 10**9, DECIMAL_SI), "1"),  # no suffix beyond E, as in Go
        (Quantity(1500 * 10**9, DECIMAL_EXPONENT), "1500"),
        (Quantity(15 * 10**12, DECIMAL_EXPONENT), "15e3"),
        (Quantity(-(5 * 10**8), DECIMAL_SI), "-500m"),
    ],
)
def test_canonical(q: Quantity, text: str) -> None:
    assert canonical(q) == text


def test_a_zero_total_takes_the_format_of_what_is_added() -> None:
    zero_binary = parse("1Gi") * 0
    assert canonical(zero_binary + parse("1500m")) == "1500m"
    assert canonical(parse("1500m") + parse("1Gi")) == "1073741825500m"
    assert canonical(parse("1Gi") + parse("1Gi")) == "2Gi"
    assert canonical(parse("1G") + parse("1Gi")) == "2073741824"


@pytest.mark.parametrize(
    "bad",
    [
        "1e999999999",  # valid syntax: 10**999999999 took minutes and gigabytes to work out
        "1e-999999999",
        "1e1001",
        "9" * 257,
        ["1"],  # a Pod template is open: anything can stand where a quantity belongs
        {"a": 1},
        None,
    ],
)
def test_absurd_or_mistyped_quantities_are_refused_at_once(bad: Any) -> None:
    with pytest.raises(QuantityError):
        parse(bad)


def test_the_largest_exponent_still_parses() -> None:
    assert parse("1e1000") == Quantity(10**1009, DECIMAL_EXPONENT)


@pytest.mark.parametrize("start", [-6, -5, -3, -2, 0, 1, 3])
@pytest.mark.parametrize("step", [-2, 0, 1, 2])
@pytest.mark.parametrize("times", [0, 1, 2, 3, 4])
def test_add_times_is_one_add_after_another(start: int, step: int, times: int) -> None:
    acc = Quantity(start * 10**9, BINARY_SI)
    term = Quantity(step * 10**9, DECIMAL_EXPONENT)
    one_by_one = acc
    for _ in range(times):
        one_by_one = one_by_one + term
    assert acc.add_times(term, times) == one_by_one
