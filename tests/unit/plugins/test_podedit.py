"""PodEdit: each change applied to the working copy and recorded as its JSON Patch operation;
the Rust twin (plugins-src/builtins-kit) has the same cases as its unit tests."""

from __future__ import annotations

import json
import re
from typing import Any

import jsonpatch
import pytest

from modelserving.api.names import (
    is_dns1123_label,
    is_env_var_name,
    is_label_value,
    is_quantity,
)
from modelserving.plugins.base import HookError
from modelserving.plugins.podedit import (
    SHM_PATH,
    SHM_VOLUME,
    PodEdit,
    dotted,
    pointer,
    str_field,
)


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


def test_lists_append_unless() -> None:
    original = pod()
    edit = PodEdit(original)
    path = ["spec", "tolerations"]
    assert edit.append_unless(path, {"key": "a"}, lambda t: str_field(t, "key") == "a")
    assert not edit.append_unless(path, {"key": "a"}, lambda t: str_field(t, "key") == "a")
    assert edit.append_unless(path, {"key": "b"}, lambda t: False)
    assert steps(edit) == [("add", "/spec/tolerations"), ("add", "/spec/tolerations/-")]
    assert edit.pod["spec"]["tolerations"] == [{"key": "a"}, {"key": "b"}]
    assert replayed(edit, original) == edit.pod
    with pytest.raises(HookError, match=r"^pod metadata.name is a str, not an array$"):
        edit.append_unless(["metadata", "name"], 1, lambda _: False)


def pod_with(engine: dict[str, Any], **spec: Any) -> dict[str, Any]:
    """``pod()`` with the container ``engine`` replaced and ``spec`` extended."""
    original = pod()
    original["spec"]["containers"][0] = engine
    original["spec"].update(spec)
    return original


def values(edit: PodEdit) -> list[tuple[str, str]]:
    """Each operation's path and value, the value as JSON text (so map key order counts)."""
    return [(op["path"], json.dumps(op["value"])) for op in edit.ops]


def at(path: str, value: Any) -> tuple[str, str]:
    return (path, json.dumps(value))


def test_set_amount_updates_the_request_only_when_present() -> None:
    original = pod_with(
        {"name": "engine", "resources": {"requests": {"a.com/x": "1", "c.com/z": None}}}
    )
    edit = PodEdit(original)
    edit.set_amount(0, "a.com/x", "2")
    edit.set_amount(0, "b.com/y", "3")
    edit.set_amount(0, "c.com/z", "4")
    assert values(edit) == [
        at("/spec/containers/0/resources/limits", {"a.com/x": "2"}),
        at("/spec/containers/0/resources/requests/a.com~1x", "2"),
        at("/spec/containers/0/resources/limits/b.com~1y", "3"),
        at("/spec/containers/0/resources/limits/c.com~1z", "4"),
    ]
    assert replayed(edit, original) == edit.pod
    with pytest.raises(
        HookError, match=r"^pod spec.containers\[1\].resources is a str, not a map$"
    ):
        edit.set_amount(1, "a.com/x", "1")


def volume(name: str) -> dict[str, Any]:
    return {"name": name, "emptyDir": {}}


def test_add_volume_to_a_bare_pod_once() -> None:
    original = pod()
    edit = PodEdit(original)
    edit.add_volume(0, volume("v"), "/v")
    edit.add_volume(0, volume("v"), "/v")
    assert values(edit) == [
        at("/spec/volumes", [volume("v")]),
        at("/spec/containers/0/volumeMounts", [{"name": "v", "mountPath": "/v"}]),
    ]
    assert replayed(edit, original) == edit.pod


def test_add_volume_existing_volume_name_kept() -> None:
    mine = {"name": "v", "hostPath": {"path": "/x"}}
    edit = PodEdit(pod_with({"name": "engine"}, volumes=[mine]))
    edit.add_volume(0, volume("v"), "/v")
    assert values(edit) == [
        at("/spec/containers/0/volumeMounts", [{"name": "v", "mountPath": "/v"}])
    ]
    assert edit.get(["spec", "volumes"]) == [mine]


def test_add_volume_existing_mount_path_kept() -> None:
    engine = {"name": "engine", "volumeMounts": [{"name": "mine", "mountPath": "/v"}]}
    original = pod_with(engine, volumes=[volume("other")])
    edit = PodEdit(original)
    edit.add_volume(0, volume("v"), "/v")
    assert values(edit) == [at("/spec/volumes/-", volume("v"))]
    assert replayed(edit, original) == edit.pod


def test_add_volume_errors() -> None:
    edit = PodEdit(pod_with({"name": "engine"}, volumes="x"))
    with pytest.raises(HookError, match=r"^pod spec.volumes is a str, not an array$"):
        edit.add_volume(0, volume("v"), "/v")
    with pytest.raises(HookError, match=r"^add_volume: the volume has no name$"):
        edit.add_volume(0, {"emptyDir": {}}, "/v")
    assert edit.ops == []


@pytest.mark.parametrize(
    ("size", "empty_dir"),
    [(None, {"medium": "Memory"}), ("1Gi", {"medium": "Memory", "sizeLimit": "1Gi"})],
)
def test_add_shared_memory_with_and_without_a_size(
    size: str | None, empty_dir: dict[str, str]
) -> None:
    original = pod()
    edit = PodEdit(original)
    edit.add_shared_memory(0, size)
    assert values(edit) == [
        at("/spec/volumes", [{"name": "dshm", "emptyDir": empty_dir}]),
        at("/spec/containers/0/volumeMounts", [{"name": SHM_VOLUME, "mountPath": SHM_PATH}]),
    ]
    assert replayed(edit, original) == edit.pod
    assert (SHM_VOLUME, SHM_PATH) == ("dshm", "/dev/shm")


def test_add_env_name_present() -> None:
    original = pod_with({"name": "engine", "env": [{"name": "A", "value": "mine"}]})
    edit = PodEdit(original)
    edit.add_env(0, {"name": "A", "value": "x"})
    edit.add_env(0, {"name": "B", "value": "1"})
    edit.add_env(1, {"name": "A", "value": "x"})
    assert values(edit) == [
        at("/spec/containers/0/env/-", {"name": "B", "value": "1"}),
        at("/spec/containers/1/env", [{"name": "A", "value": "x"}]),
    ]
    assert replayed(edit, original) == edit.pod
    with pytest.raises(HookError, match=r"^add_env: the env var has no name$"):
        edit.add_env(0, {"value": "x"})
    bad = PodEdit(pod_with({"name": "engine", "env": "x"}))
    with pytest.raises(HookError, match=r"^pod spec.containers\[0\].env is a str, not an array$"):
        bad.add_env(0, {"name": "A"})


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


def test_the_working_copy_is_made_on_write() -> None:
    """Only the maps and lists on the way to a change are copied; the rest is shared."""
    original = pod()
    original["spec"]["volumes"] = [{"name": "data"}]
    edit = PodEdit(original)
    edit.add_env(1, {"name": "A", "value": "1"})
    edit.add_env(1, {"name": "B", "value": "2"})
    edit.put(["metadata", "labels"], {"a": "b"})
    assert original == {**pod(), "spec": {**pod()["spec"], "volumes": [{"name": "data"}]}}
    spec, before = edit.pod["spec"], original["spec"]
    assert spec is not before and spec["containers"] is not before["containers"]
    assert spec["containers"][1] is not before["containers"][1]
    assert spec["containers"][0] is before["containers"][0]  # untouched: shared
    assert spec["volumes"] is before["volumes"]
    assert spec["containers"][1]["env"] == [
        {"name": "A", "value": "1"},
        {"name": "B", "value": "2"},
    ]
    assert edit.pod["metadata"] is not original["metadata"]
    assert replayed(edit, original) == edit.pod


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


def test_dns1123_labels() -> None:
    assert all(is_dns1123_label(v) for v in ["a", "0", "a-b", "a" * 63])
    assert not any(is_dns1123_label(v) for v in ["", "A", "-a", "a-", "a.b", "a_b", "é", "a" * 64])


def test_env_var_names() -> None:
    """The cases of the Rust SDK's ``names::is_env_var_name`` test."""
    assert all(is_env_var_name(v) for v in ["A", "_a", "-", ".x9", "a.b-c_D1"])
    assert not any(is_env_var_name(v) for v in ["", "1A", "A B", "A=B", "é", "A\n"])
