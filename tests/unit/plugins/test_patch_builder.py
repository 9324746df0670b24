"""PodPatch: the JSON Patch operations it produces, and the Pod they make under RFC 6902."""

from __future__ import annotations

import copy
from collections.abc import Callable, Mapping
from typing import Any

import jsonpatch
import jsonpointer
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from modelserving.chain import PatchValidator
from modelserving.plugins import PodPatch
from modelserving.plugins.patch import escape
from tests.unit.plugins.conftest import apply, sample_pod

Merge = Callable[[PodPatch, Mapping[str, str]], PodPatch]
MERGES: dict[str, Merge] = {
    "annotations": PodPatch.merge_annotations,
    "labels": PodPatch.merge_labels,
}


def env(**values: str) -> list[dict[str, str]]:
    return [{"name": k, "value": v} for k, v in values.items()]


# --- runtime class ---------------------------------------------------------------------------


def test_set_runtime_class_name(pod: dict[str, Any]) -> None:
    patch = PodPatch(pod)
    assert patch.set_runtime_class_name("nvidia") is patch
    assert patch.ops == [{"op": "add", "path": "/spec/runtimeClassName", "value": "nvidia"}]
    assert apply(pod, patch.ops)["spec"]["runtimeClassName"] == "nvidia"


def test_set_runtime_class_name_overwrites_an_existing_one(pod: dict[str, Any]) -> None:
    pod["spec"]["runtimeClassName"] = "runc"
    ops = PodPatch(pod).set_runtime_class_name("nvidia").ops
    assert apply(pod, ops)["spec"]["runtimeClassName"] == "nvidia"


# --- annotations and labels ------------------------------------------------------------------


@pytest.mark.parametrize("field", list(MERGES))
def test_merge_creates_the_map_when_absent(pod: dict[str, Any], field: str) -> None:
    pod["metadata"].pop(field, None)
    patch = MERGES[field](PodPatch(pod), {"a": "1", "example.com/b": "2"})
    assert patch.ops == [
        {"op": "add", "path": f"/metadata/{field}", "value": {"a": "1", "example.com/b": "2"}}
    ]
    assert apply(pod, patch.ops)["metadata"][field] == {"a": "1", "example.com/b": "2"}


@pytest.mark.parametrize("field", list(MERGES))
def test_merge_into_a_present_map_adds_and_overwrites_per_key(
    pod: dict[str, Any], field: str
) -> None:
    pod["metadata"][field] = {"keep": "me", "a": "old"}
    patch = MERGES[field](PodPatch(pod), {"a": "new", "b": "2"})
    assert patch.ops == [
        {"op": "add", "path": f"/metadata/{field}/a", "value": "new"},
        {"op": "add", "path": f"/metadata/{field}/b", "value": "2"},
    ]
    assert apply(pod, patch.ops)["metadata"][field] == {"keep": "me", "a": "new", "b": "2"}


@pytest.mark.parametrize("field", list(MERGES))
def test_merge_into_a_present_empty_map_is_per_key(pod: dict[str, Any], field: str) -> None:
    pod["metadata"][field] = {}
    patch = MERGES[field](PodPatch(pod), {"a": "1"})
    assert patch.ops == [{"op": "add", "path": f"/metadata/{field}/a", "value": "1"}]


@pytest.mark.parametrize("field", list(MERGES))
def test_merge_into_a_map_created_earlier_by_the_same_builder(
    pod: dict[str, Any], field: str
) -> None:
    pod["metadata"].pop(field, None)
    patch = PodPatch(pod)
    MERGES[field](patch, {"a": "1", "b": "1"})
    MERGES[field](patch, {"b": "2", "c": "2"})
    assert patch.ops == [
        {"op": "add", "path": f"/metadata/{field}", "value": {"a": "1", "b": "1"}},
        {"op": "add", "path": f"/metadata/{field}/b", "value": "2"},
        {"op": "add", "path": f"/metadata/{field}/c", "value": "2"},
    ]
    assert apply(pod, patch.ops)["metadata"][field] == {"a": "1", "b": "2", "c": "2"}


@pytest.mark.parametrize("field", list(MERGES))
def test_merging_nothing_is_no_op_and_creates_nothing(pod: dict[str, Any], field: str) -> None:
    pod["metadata"].pop(field, None)
    patch = MERGES[field](PodPatch(pod), {})
    assert patch.ops == []
    MERGES[field](patch, {"a": "1"})
    assert patch.ops == [{"op": "add", "path": f"/metadata/{field}", "value": {"a": "1"}}]


def test_labels_and_annotations_are_tracked_separately(pod: dict[str, Any]) -> None:
    del pod["metadata"]["labels"]
    ops = PodPatch(pod).merge_labels({"l": "1"}).merge_annotations({"a": "1"}).ops
    assert [o["path"] for o in ops] == ["/metadata/labels", "/metadata/annotations"]
    result = apply(pod, ops)
    assert (result["metadata"]["labels"], result["metadata"]["annotations"]) == (
        {"l": "1"},
        {"a": "1"},
    )


@pytest.mark.parametrize(
    ("token", "escaped"),
    [
        ("plain", "plain"),
        ("example.com/tier", "example.com~1tier"),
        ("a~b", "a~0b"),
        ("~1", "~01"),
        ("/~", "~1~0"),
        ("~/~/", "~0~1~0~1"),
        ("", ""),
    ],
)
def test_escape(token: str, escaped: str) -> None:
    assert escape(token) == escaped
    assert jsonpointer.JsonPointer("/" + escaped).parts == [token]


@settings(max_examples=200, deadline=None)
@given(st.text(alphabet=st.sampled_from("ab~/01"), max_size=12))
def test_escape_round_trips_through_json_pointer(token: str) -> None:
    assert jsonpointer.JsonPointer("/" + escape(token)).parts == [token]


@pytest.mark.parametrize("field", list(MERGES))
def test_keys_with_slash_and_tilde_land_exactly(pod: dict[str, Any], field: str) -> None:
    pod["metadata"][field] = {"x": "y"}
    keys = {"example.com/tier": "1", "a~b": "2", "~1": "3", "c/~0/d": "4"}
    ops = MERGES[field](PodPatch(pod), keys).ops
    assert [o["path"] for o in ops] == [
        f"/metadata/{field}/example.com~1tier",
        f"/metadata/{field}/a~0b",
        f"/metadata/{field}/~01",
        f"/metadata/{field}/c~1~00~1d",
    ]
    assert apply(pod, ops)["metadata"][field] == {"x": "y", **keys}


# --- env upsert ------------------------------------------------------------------------------


def test_upsert_env_into_every_container_and_init_container(pod: dict[str, Any]) -> None:
    ops = PodPatch(pod).upsert_env(env(MODE="prefill", KV="producer")).ops
    assert ops == [
        {"op": "replace", "path": "/spec/containers/0/env/1", "value": env(MODE="prefill")[0]},
        {"op": "add", "path": "/spec/containers/0/env/-", "value": env(KV="producer")[0]},
        {
            "op": "add",
            "path": "/spec/containers/1/env",
            "value": env(MODE="prefill", KV="producer"),
        },
        {
            "op": "add",
            "path": "/spec/initContainers/0/env",
            "value": env(MODE="prefill", KV="producer"),
        },
    ]
    expected = sample_pod()
    expected["spec"]["containers"][0]["env"] = env(GROUP_SIZE="1", MODE="prefill", KV="producer")
    expected["spec"]["containers"][1]["env"] = env(MODE="prefill", KV="producer")
    expected["spec"]["initContainers"][0]["env"] = env(MODE="prefill", KV="producer")
    assert apply(pod, ops) == expected


def test_upsert_env_replaces_a_same_named_entry_in_place(pod: dict[str, Any]) -> None:
    ops = PodPatch(pod).upsert_env(env(GROUP_SIZE="9")).ops
    assert ops[0] == {
        "op": "replace",
        "path": "/spec/containers/0/env/0",
        "value": env(GROUP_SIZE="9")[0],
    }
    assert apply(pod, ops)["spec"]["containers"][0]["env"] == env(GROUP_SIZE="9", MODE="serve")


def test_upsert_env_appends_new_names_in_order(pod: dict[str, Any]) -> None:
    ops = PodPatch(pod).upsert_env(env(B="1", A="2")).ops
    assert apply(pod, ops)["spec"]["containers"][0]["env"] == env(
        GROUP_SIZE="1", MODE="serve", B="1", A="2"
    )


@pytest.mark.parametrize("container", [0, 1], ids=["env present", "env missing"])
def test_later_duplicates_in_the_input_win(pod: dict[str, Any], container: int) -> None:
    wanted = env(X="1", Y="2") + env(X="3") + env(MODE="a") + env(MODE="b")
    result = apply(pod, PodPatch(pod).upsert_env(wanted).ops)
    final = {e["name"]: e["value"] for e in result["spec"]["containers"][container]["env"]}
    names = [e["name"] for e in result["spec"]["containers"][container]["env"]]
    assert len(names) == len(set(names)), "no name twice"
    assert final["X"] == "3"
    assert final["MODE"] == "b"
    assert final["Y"] == "2"
    # The same order whether the list existed or not: existing names first, then new ones in
    # the order they were first asked for.
    assert [n for n in names if n in {"X", "Y"}] == ["X", "Y"]


def test_upsert_env_keeps_value_from_and_other_fields(pod: dict[str, Any]) -> None:
    var = {"name": "TOKEN", "valueFrom": {"secretKeyRef": {"name": "hf", "key": "token"}}}
    result = apply(pod, PodPatch(pod).upsert_env([var]).ops)
    assert result["spec"]["containers"][1]["env"] == [var]


def test_upsert_env_with_nothing_is_no_op(pod: dict[str, Any]) -> None:
    assert PodPatch(pod).upsert_env([]).ops == []


def test_upsert_env_without_init_containers(pod: dict[str, Any]) -> None:
    del pod["spec"]["initContainers"]
    ops = PodPatch(pod).upsert_env(env(A="1")).ops
    assert [o["path"] for o in ops] == ["/spec/containers/0/env/-", "/spec/containers/1/env"]
    pod["spec"]["initContainers"] = None
    assert PodPatch(pod).upsert_env(env(A="1")).ops == ops


def test_upsert_env_into_an_explicitly_null_env(pod: dict[str, Any]) -> None:
    pod["spec"]["containers"][1]["env"] = None
    result = apply(pod, PodPatch(pod).upsert_env(env(A="1")).ops)
    assert result["spec"]["containers"][1]["env"] == env(A="1")


def test_upsert_env_twice_on_one_builder_builds_on_the_first(pod: dict[str, Any]) -> None:
    patch = PodPatch(pod).upsert_env(env(A="1", MODE="x")).upsert_env(env(B="2", A="3"))
    result = apply(pod, patch.ops)
    assert result["spec"]["containers"][0]["env"] == env(GROUP_SIZE="1", MODE="x", A="3", B="2")
    assert result["spec"]["containers"][1]["env"] == env(A="3", MODE="x", B="2")
    assert result["spec"]["initContainers"][0]["env"] == env(A="3", MODE="x", B="2")


def test_building_never_changes_the_pod(pod: dict[str, Any]) -> None:
    before = copy.deepcopy(pod)
    wanted = env(A="1")
    patch = PodPatch(pod)
    patch.set_runtime_class_name("x").merge_labels({"l": "1"}).merge_annotations({"a": "1"})
    patch.upsert_env(wanted).upsert_env(env(GROUP_SIZE="5"))
    assert pod == before
    apply(pod, patch.ops)
    assert pod == before
    assert wanted == env(A="1")


def test_everything_at_once_gives_the_expected_pod_and_passes_the_default_policy(
    pod: dict[str, Any],
) -> None:
    ops = (
        PodPatch(pod)
        .set_runtime_class_name("nvidia")
        .merge_annotations({"example.com/tier": "gold"})
        .merge_labels({"app": "llm"})
        .upsert_env(env(MODE="prefill", KV="producer"))
        .ops
    )
    expected = sample_pod()
    expected["spec"]["runtimeClassName"] = "nvidia"
    expected["metadata"]["annotations"] = {"example.com/tier": "gold"}
    expected["metadata"]["labels"]["app"] = "llm"
    expected["spec"]["containers"][0]["env"] = env(GROUP_SIZE="1", MODE="prefill", KV="producer")
    expected["spec"]["containers"][1]["env"] = env(MODE="prefill", KV="producer")
    expected["spec"]["initContainers"][0]["env"] = env(MODE="prefill", KV="producer")
    assert apply(pod, ops) == expected
    assert PatchValidator().apply(pod, ops) == expected


# --- property: upsert_env behaves like an ordered map by name --------------------------------

names = st.sampled_from(["A", "B", "C", "D", "GROUP_SIZE"])
env_lists = st.lists(st.builds(lambda n, v: {"name": n, "value": v}, names, st.sampled_from("xyz")))


def reference_upsert(current: list[dict[str, str]] | None, wanted: list[dict[str, str]]) -> Any:
    out = [dict(e) for e in current or []]
    for var in wanted:
        at = [e["name"] for e in out]
        if var["name"] in at:
            out[at.index(var["name"])] = dict(var)
        else:
            out.append(dict(var))
    return out


@settings(max_examples=200, deadline=None)
@given(
    existing=st.one_of(st.none(), st.lists(names, unique=True)),
    calls=st.lists(env_lists, min_size=1, max_size=3),
)
def test_upsert_env_matches_an_ordered_map_by_name(
    existing: list[str] | None, calls: list[list[dict[str, str]]]
) -> None:
    pod = sample_pod()
    container = pod["spec"]["containers"][0]
    if existing is None:
        del container["env"]
    else:
        container["env"] = [{"name": n, "value": "orig"} for n in existing]
    patch = PodPatch(pod)
    expected = container.get("env")
    for wanted in calls:
        patch.upsert_env(wanted)
        if wanted:
            expected = reference_upsert(expected, wanted)
    assert apply(pod, patch.ops)["spec"]["containers"][0].get("env") == expected


def test_upsert_env_collapses_duplicates_the_template_had() -> None:
    pod = {
        "metadata": {"name": "p"},
        "spec": {
            "containers": [
                {
                    "name": "c",
                    "env": [
                        {"name": "A", "value": "1"},
                        {"name": "B", "value": "x"},
                        {"name": "A", "value": "2"},
                        {"name": "A", "value": "3"},
                    ],
                }
            ]
        },
    }
    patch = PodPatch(pod).upsert_env([{"name": "A", "value": "mine"}, {"name": "C", "value": "c"}])
    assert patch.ops == [
        {
            "op": "replace",
            "path": "/spec/containers/0/env/0",
            "value": {"name": "A", "value": "mine"},
        },
        {"op": "remove", "path": "/spec/containers/0/env/3"},
        {"op": "remove", "path": "/spec/containers/0/env/2"},
        {"op": "add", "path": "/spec/containers/0/env/-", "value": {"name": "C", "value": "c"}},
    ]
    after = jsonpatch.apply_patch(pod, patch.ops)
    assert after["spec"]["containers"][0]["env"] == [
        {"name": "A", "value": "mine"},
        {"name": "B", "value": "x"},
        {"name": "C", "value": "c"},
    ]
