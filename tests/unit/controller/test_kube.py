"""Kube's pure helpers: turning a manager's update-written fields into applied ones."""

from __future__ import annotations

from typing import Any

from modelserving.controller.kube import adopted_fields

Entry = dict[str, Any]


def entry(manager: str, operation: str, fields: Entry, sub: str | None = None) -> Entry:
    got: Entry = {"manager": manager, "operation": operation, "fieldsV1": fields}
    if sub:
        got["subresource"] = sub
    return got


def test_an_update_entry_becomes_the_managers_apply_entry() -> None:
    created = entry("m", "Update", {"f:data": {"f:a": {}, "f:b": {}}})
    other = entry("kubectl-edit", "Update", {"f:data": {"f:note": {}}})
    got = adopted_fields([created, other], "m")
    assert got == [other, entry("m", "Apply", {"f:data": {"f:a": {}, "f:b": {}}})]


def test_fields_of_both_entries_are_merged_into_one() -> None:
    applied = entry("m", "Apply", {"f:data": {"f:a": {}}, "f:metadata": {"f:labels": {"f:x": {}}}})
    updated = entry("m", "Update", {"f:data": {"f:b": {}}})
    (got,) = adopted_fields([applied, updated], "m") or []
    assert got["operation"] == "Apply"
    assert got["fieldsV1"] == {
        "f:data": {"f:a": {}, "f:b": {}},
        "f:metadata": {"f:labels": {"f:x": {}}},
    }


def test_nothing_to_turn_gives_none() -> None:
    assert adopted_fields([entry("m", "Apply", {"f:data": {}})], "m") is None
    assert adopted_fields([entry("other", "Update", {"f:data": {}})], "m") is None
    # a status subresource's update is not the object's content
    assert adopted_fields([entry("m", "Update", {"f:status": {}}, sub="status")], "m") is None
