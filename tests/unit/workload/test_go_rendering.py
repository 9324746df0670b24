"""The pieces of Kthena's hash text: Go's quantity decoding, JSON numbers, spew's rules.

The expected values were printed by Go (k8s.io/apimachinery v0.34.2, go-spew d8f796a, Go's
encoding/json); the vectors in tests/data/kthena-revision cover the same ground end to end.
"""

from __future__ import annotations

import json

import pytest

from modelserving.workload.goquantity import (
    QuantityError,
    go_json_number,
    go_quantity,
    parse_quantity,
)
from modelserving.workload.revision import fnv1_32, hash_text, role_dump
from modelserving.workload.spew import GoType, Spew, load_schema


@pytest.mark.parametrize(
    ("number", "text"),
    [
        (1e-7, "1e-7"),
        (1.5e-7, "1.5e-7"),
        (1e21, "1e+21"),
        (1.25e22, "1.25e+22"),
        (2.0, "2"),
        (0.1, "0.1"),
        (1.5e-5, "0.000015"),
        (123456.789, "123456.789"),
        (1e20, "100000000000000000000"),
        (-0.5, "-0.5"),
        (1e-6, "0.000001"),
        (7, "7"),
    ],
)
def test_json_numbers_as_go_writes_them(number: float, text: str) -> None:
    assert go_json_number(number) == text


@pytest.mark.parametrize(
    ("text", "fields"),
    [
        ("0", {"Format": "DecimalSI", "s": "0"}),
        ("1", {"i": {"value": 1, "scale": 0}, "Format": "DecimalSI", "s": "1"}),
        ("1000m", {"i": {"value": 1000, "scale": -3}, "Format": "DecimalSI"}),
        ("1e3", {"i": {"value": 1, "scale": 3}, "Format": "DecimalExponent", "s": "1e3"}),
        ("1Gi", {"i": {"value": 2**30, "scale": 0}, "Format": "BinarySI", "s": "1Gi"}),
        ("1024Mi", {"i": {"value": 2**30, "scale": 0}, "Format": "BinarySI"}),
        (
            "1.5Gi",
            {
                "d": {
                    "Dec": {"unscaled": {"neg": False, "abs": [1610612736000000000]}, "scale": 9}
                },
                "Format": "BinarySI",
            },
        ),
        (
            "100Ei",  # capped at the largest int64
            {
                "d": {"Dec": {"unscaled": {"neg": False, "abs": [2**63 - 1]}, "scale": 0}},
                "Format": "BinarySI",
            },
        ),
        (
            "0.0000000000",
            {
                "d": {"Dec": {"unscaled": {"neg": False, "abs": None}, "scale": 10}},
                "Format": "DecimalSI",
            },
        ),
    ],
)
def test_quantities_decode_as_in_go(text: str, fields: dict[str, object]) -> None:
    assert parse_quantity(text) == fields


@pytest.mark.parametrize("text", ["", "1x", "1e", "1.2.3", "--1"])
def test_quantities_go_refuses(text: str) -> None:
    with pytest.raises(QuantityError):
        parse_quantity(text)


def test_json_text_is_parsed_unescaped_and_trimmed_as_in_go() -> None:
    """UnmarshalJSON strips the quotes but does not unescape: a tab (written \\t) is refused,
    while spaces are trimmed; a bare suffix is a zero."""
    assert go_quantity(" 2 ") == go_quantity("2")
    with pytest.raises(QuantityError):
        go_quantity("\t2")
    assert go_quantity("Gi") == {"i": {"value": 0, "scale": 0}, "Format": "BinarySI"}
    with pytest.raises(QuantityError):
        go_quantity("1e-999999999")  # Go would divide by 10**999999990


def _schema(types: dict[str, object], root: str) -> GoType:
    return load_schema(json.dumps({"root": root, "types": types}))


def test_a_nil_pointer_in_a_slice_leaves_the_next_type_unprinted() -> None:
    """spew's quirk: a nil pointer printed without its type (a slice element) returns without
    clearing that state, so the field after the slice loses its type too."""
    root = _schema(
        {
            "T": {
                "spew": "p.T",
                "kind": "struct",
                "fields": [
                    {"name": "A", "json": "a", "type": "[]*int"},
                    {"name": "B", "json": "b", "type": "string"},
                ],
            },
            "[]*int": {"spew": "[]*int", "kind": "slice", "elem": "*int"},
            "*int": {"spew": "*int", "kind": "ptr", "elem": "int"},
            "int": {"spew": "int", "kind": "int"},
            "string": {"spew": "string", "kind": "string"},
        },
        "T",
    )
    assert Spew().top(root, {"a": [1, None], "b": "x"}) == "(p.T){A:([]*int)[<*>1 <nil>] B:x}"
    assert (
        Spew().top(root, {"a": [None, 1], "b": "x"}) == "(p.T){A:([]*int)[<nil> <*>1] B:(string)x}"
    )
    assert Spew().top(root, {}) == "(p.T){A:([]*int)<nil> B:(string)}"


def test_hash_is_fnv1_32_safe_encoded() -> None:
    assert hash_text("") == "".join(
        "bcdfghjklmnpqrstvwxz2456789"[ord(c) % 27] for c in "2166136261"
    )
    assert fnv1_32(b"foobar") == 0x31F0B262


def test_replicas_and_rolling_update_fields_are_cleared() -> None:
    role = {"name": "a", "workerReplicas": 0, "entryTemplate": {"spec": {}}}
    knobs = {**role, "replicas": 5, "maxUnavailable": "50%", "partition": 1}
    assert role_dump(knobs) == role_dump(role)
    assert "Replicas:(*int32)<nil>" in role_dump(knobs)
    assert "MaxUnavailable:(*intstr.IntOrString)<nil>" in role_dump(knobs)
