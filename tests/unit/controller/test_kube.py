"""Kube's pure helpers (turning a manager's update-written fields into applied ones) and what
it asks the API server for."""

from __future__ import annotations

import json
from typing import Any

from hypothesis import given, settings
from hypothesis import strategies as st

from modelserving.controller.kube import METADATA, PODS, Kube, adopted_fields, loads

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


class Answering:
    """What Kube uses of the client's ApiClient: one scripted answer, the headers recorded."""

    def __init__(self, status: int, answer: dict[str, Any]) -> None:
        self.status = status
        self.answer = json.dumps(answer).encode()
        self.headers: list[dict[str, str]] = []
        self.configuration = type("C", (), {"host": "https://api"})()
        self.rest_client = self

    def update_params_for_auth(self, *args: Any) -> None:
        pass

    def request(self, method: str, url: str, headers: dict[str, str], **_: Any) -> Any:
        self.headers.append(dict(headers))
        return self

    def read(self) -> bytes:
        return self.answer

    def getheaders(self) -> dict[str, str]:
        return {}


POD = {
    "apiVersion": "v1",
    "kind": "Pod",
    "metadata": {"name": "p", "labels": {"a": "b"}},
    "spec": {"containers": [{"name": "c", "image": "i"}]},
    "status": {"phase": "Running"},  # a sent status is not what the API server keeps
}
ANSWERED = {
    "name": "p",
    "namespace": "ns",
    "uid": "u1",
    "resourceVersion": "7",
    "labels": {"a": "b"},
}


def test_a_create_as_sent_asks_for_metadata_and_gives_the_sent_object_with_it() -> None:
    api = Answering(201, {"kind": "PartialObjectMetadata", "metadata": ANSWERED})
    made = Kube(api).create(PODS, "ns", POD, as_sent=True)
    assert api.headers[0]["Accept"] == METADATA
    assert METADATA.startswith("application/json;as=PartialObjectMetadata;g=meta.k8s.io;v=v1")
    assert made == {"apiVersion": "v1", "kind": "Pod", "metadata": ANSWERED, "spec": POD["spec"]}


def test_a_create_as_sent_answered_whole_gives_the_answer() -> None:
    """An API server that cannot answer with metadata only answers with the object."""
    whole = {**POD, "metadata": ANSWERED, "status": {"phase": "Pending", "qosClass": "BestEffort"}}
    api = Answering(201, whole)
    assert Kube(api).create(PODS, "ns", POD, as_sent=True) == whole


def test_a_plain_create_asks_for_the_object() -> None:
    api = Answering(201, {**POD, "metadata": ANSWERED})
    assert Kube(api).create(PODS, "ns", POD) == {**POD, "metadata": ANSWERED}
    assert api.headers[0]["Accept"] == "application/json"


def test_a_delete_asks_for_metadata_only() -> None:
    api = Answering(200, {"kind": "PartialObjectMetadata", "metadata": ANSWERED})
    assert Kube(api).delete(PODS, "ns", "p", uid="u1") is True
    assert api.headers[0]["Accept"] == METADATA


@settings(max_examples=300, deadline=None)
@given(
    value=st.recursive(
        st.none()
        | st.booleans()
        | st.integers(-(2**63), 2**64 - 1)  # the API server reads numbers as int64 or float64
        | st.floats(allow_nan=True, allow_infinity=True)
        | st.text(),
        lambda inner: st.lists(inner) | st.dictionaries(st.text(), inner),
        max_leaves=20,
    )
)
def test_answers_decode_as_the_standard_library_decodes_them(value: Any) -> None:
    """orjson where it can, the standard library where orjson refuses (NaN, Infinity): every
    text the API server can send decodes to what ``json.loads`` gives."""
    text = json.dumps(value)
    got, want = loads(text.encode()), json.loads(text)
    assert json.dumps(got, sort_keys=True) == json.dumps(want, sort_keys=True)
    assert type(got) is type(want)
