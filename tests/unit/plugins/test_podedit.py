"""PodEdit: each change applied to the working copy and recorded as its JSON Patch operation;
the Rust twin (plugins-src/builtins-kit) has the same cases as its unit tests."""

from __future__ import annotations

import re
from typing import Any

import jsonpatch
import pytest

from modelserving.api.names import is_label_value, is_quantity
from modelserving.plugins.base import HookError
from modelserving.plugins.podedit import PodEdit, dotted, pointer, str_field


def pod() -> dict[str, Any]:
    return {
        "metadata": {"name": "p"},
        "spec": {"containers": [{"name": "engine"}, {"name": "sidecar", "resources": "x"}]},
    }


def steps(edit: PodEdit) -> list[tuple[str, str]]:
    return [(op["op"], op["path"]) for op in edit.ops]


def replayed(edit: PodEdit, original: dict[str, Any]) -> Any:
    """The patch applied to the original Pod by an independent implementation."""
    return jsonpatch.apply_patch(original, list(edit.ops))


def test_put_creates_the_missing_maps_in_one_add() -> None:
    edit = PodEdit(pod())
    limits: list[str | int] = ["spec", "containers", 0, "resources", "limits"]
    edit.put([*limits, "nvidia.com/gpu"], "8")
    edit.put([*limits, "memory"], "1Gi")
    assert steps(edit) == [
        ("add", "/spec/containers/0/resources"),
        ("add", "/spec/containers/0/resources/limits/memory"),
    ]
    assert edit.ops[0]["value"] == {"limits": {"nvidia.com/gpu": "8"}}  # not changed later
    assert edit.get([*limits, "nvidia.com/gpu"]) == "8"
    assert replayed(edit, pod()) == edit.pod


def test_a_null_member_counts_as_missing() -> None:
    original = {"spec": {"nodeSelector": None, "containers": [{"name": "c"}]}}
    edit = PodEdit(original)
    edit.merge_map(["spec", "nodeSelector"], {"a": "1"})
    assert steps(edit) == [("add", "/spec/nodeSelector")]
    assert replayed(edit, original) == edit.pod


@pytest.mark.parametrize(
    ("path", "message"),
    [
        (
            ["spec", "containers", 1, "resources", "limits"],
            "pod spec.containers[1].resources is a str, not a map",
        ),
        (["spec", "containers", 5, "x"], "pod spec.containers has no item 5"),
        (["metadata", "name", "x"], "pod metadata.name is a str, not a map"),
    ],
)
def test_wrong_types_on_the_way_are_errors(path: list[Any], message: str) -> None:
    edit = PodEdit(pod())
    with pytest.raises(HookError, match=f"^{re.escape(message)}$"):
        edit.put(path, None)
    assert edit.ops == []


def test_containers_by_name() -> None:
    edit = PodEdit(pod())
    assert edit.container(None) == 0
    assert edit.container("sidecar") == 1
    with pytest.raises(HookError, match=r"^the Pod has no container named 'x'$"):
        edit.container("x")
    with pytest.raises(HookError, match=r"^the Pod has no containers$"):
        PodEdit({}).container(None)


def test_lists_append_unless_and_upsert() -> None:
    original = pod()
    edit = PodEdit(original)
    path = ["spec", "tolerations"]
    assert edit.append_unless(path, {"key": "a"}, lambda t: str_field(t, "key") == "a")
    assert not edit.append_unless(path, {"key": "a"}, lambda t: str_field(t, "key") == "a")
    assert edit.append_unless(path, {"key": "b"}, lambda t: False)
    edit.upsert(path, {"key": "b", "v": "1"}, lambda t: str_field(t, "key") == "b")
    edit.upsert(path, {"key": "c"}, lambda t: False)
    assert steps(edit) == [
        ("add", "/spec/tolerations"),
        ("add", "/spec/tolerations/-"),
        ("replace", "/spec/tolerations/1"),
        ("add", "/spec/tolerations/-"),
    ]
    assert edit.pod["spec"]["tolerations"] == [{"key": "a"}, {"key": "b", "v": "1"}, {"key": "c"}]
    assert replayed(edit, original) == edit.pod
    with pytest.raises(HookError, match=r"^pod metadata.name is a str, not an array$"):
        edit.append_unless(["metadata", "name"], 1, lambda _: False)


def test_merge_map_and_put_if_absent() -> None:
    edit = PodEdit(pod())
    annotations = ["metadata", "annotations"]
    edit.merge_map(annotations, {"a/b": "1", "c": "2"})
    edit.merge_map(annotations, {"c": "3"})
    probe: list[str | int] = ["spec", "containers", 0, "readinessProbe"]
    assert edit.put_if_absent(probe, {"x": 1})
    assert not edit.put_if_absent(probe, {"x": 2})
    assert steps(edit) == [
        ("add", "/metadata/annotations"),
        ("add", "/metadata/annotations/c"),
        ("add", "/spec/containers/0/readinessProbe"),
    ]
    assert pointer(["a/b~c", 3]) == "/a~1b~0c/3"
    assert dotted(["spec", "containers", 0, "env"]) == "spec.containers[0].env"
    with pytest.raises(HookError, match=r"^pod metadata.name is a str, not a map$"):
        edit.merge_map(["metadata", "name"], {"a": "b"})


def test_the_original_pod_is_never_changed() -> None:
    original = pod()
    edit = PodEdit(original)
    edit.put(["spec", "containers", 0, "env"], [{"name": "A"}])
    edit.append_unless(["spec", "containers", 0, "env"], {"name": "B"}, lambda _: False)
    assert original == pod()


@pytest.mark.parametrize("value", ["1", "16Gi", "500m", "1.5", ".5", "5.", "2e3", "1E-2", "0"])
def test_quantities(value: str) -> None:
    assert is_quantity(value)


@pytest.mark.parametrize(
    "value", ["", ".", "-1", "+1", "1GiB", "1 Gi", "e3", "1e", "1e+", "Gi", "1.2.3", "1" * 65]
)
def test_not_quantities(value: str) -> None:
    assert not is_quantity(value)


def test_label_values() -> None:
    assert all(is_label_value(v) for v in ["", "a", "A-b_c.9", "x" * 63])
    assert not any(is_label_value(v) for v in ["-a", "a-", "a b", "a/b", "x" * 64])
