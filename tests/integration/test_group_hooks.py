"""ServingGroup hooks on a real control plane: hccl-ranktable writes a rank table that completes
once both Pods of a two-node group have IPs and devices (kwok gives the IPs, the test writes the
device plugin's annotation), follows a role replica recreated on the other node, and goes with the
ModelServing (garbage collection of its owner reference); the built-ins' WebAssembly twins
write the same; a WebAssembly plugin that answers with a forbidden object is refused with an
event naming plugin, ServingGroup and rule."""

from __future__ import annotations

import json
from collections.abc import Iterator
from typing import Any

import msgpack
import pytest
from kubernetes import client

from modelserving.controller.manager import Controller
from modelserving.plugins.builtins.hccl_ranktable import DEFAULT_ANNOTATION
from tests.integration import controller_env
from tests.integration.conftest import Cluster, wait_for
from tests.integration.controller_env import (
    Objects,
    install_crd,
    model_serving,
    module_config_map,
    running_controller,
    wasm_plugin,
)
from tests.wasm.guests import guest, hook, returns, wat_bytes


@pytest.fixture(scope="module")
def controller(cluster: Cluster) -> Iterator[Controller]:
    install_crd(cluster)
    with running_controller(cluster, controller_env.test_config()) as ctl:
        yield ctl


@pytest.fixture
def objs(cluster: Cluster, namespace: str, controller: Controller) -> Objects:
    return Objects(cluster, namespace)


def config_map(objs: Objects, name: str) -> dict[str, Any] | None:
    try:
        got = objs.core.read_namespaced_config_map(name, objs.namespace)
    except client.ApiException as exc:
        if exc.status == 404:
            return None
        raise
    data: dict[str, Any] = objs.cluster.api_client.sanitize_for_serialization(got)
    return data


def table(objs: Objects, group: str) -> dict[str, Any] | None:
    cm = config_map(objs, f"{group}-ranktable")
    if cm is None:
        return None
    parsed: dict[str, Any] = json.loads(cm["data"]["hccl.json"])
    return parsed


def with_ips(objs: Objects, ms: str, count: int) -> list[dict[str, Any]]:
    def ready() -> list[dict[str, Any]] | None:
        pods = objs.pods(ms)
        known = [p for p in pods if (p.get("status") or {}).get("podIP")]
        return known if len(known) == count else None

    pods: list[dict[str, Any]] = wait_for(f"{count} Pods of {ms} with IPs", ready, 60)
    return sorted(pods, key=lambda p: p["metadata"]["name"])


def give_devices(objs: Objects, pod: dict[str, Any], n: int) -> None:
    """Write the annotation the Ascend device plugin writes: two NPUs and their IPs."""
    devices = [{"device_id": str(d), "device_ip": f"192.168.{n}.{d + 1}"} for d in range(2)]
    value = json.dumps({"pod_name": pod["metadata"]["name"], "devices": devices})
    patch = {"metadata": {"annotations": {DEFAULT_ANNOTATION: value}}}
    objs.core.patch_namespaced_pod(pod["metadata"]["name"], objs.namespace, patch)


def completed(objs: Objects, group: str, ips: list[str], device_ips: list[str]) -> dict[str, Any]:
    """The group's rank table once it is completed with these Pod IPs and first device IPs."""

    def done() -> dict[str, Any] | None:
        got = table(objs, group)
        if got is None or got["status"] != "completed":
            return None
        servers = got["server_list"]
        have = (
            [s["container_ip"] for s in servers],
            [s["device"][0]["device_ip"] for s in servers],
        )
        return got if have == (ips, device_ips) else None

    result: dict[str, Any] = wait_for(f"a completed rank table of {ips}", done, 60)
    return result


def set_unschedulable(objs: Objects, node: str, value: bool) -> None:
    objs.core.patch_node(node, {"spec": {"unschedulable": value}})


def test_a_two_node_group_gets_its_rank_table(objs: Objects) -> None:
    plugins = [{"name": "hccl-ranktable"}]
    objs.create(model_serving("npu", replicas=1, workers=1, plugins=plugins))
    objs.wait_pods("npu", 2)
    wait_for("the rank table", lambda: table(objs, "npu-0"), 60)
    assert table(objs, "npu-0") is not None
    pods = with_ips(objs, "npu", 2)
    for pod in pods:
        volume = next(v for v in pod["spec"]["volumes"] if v["name"] == "ranktable")
        assert volume["configMap"]["name"] == "npu-0-ranktable"
        assert volume["configMap"]["optional"] is True
    for n, pod in enumerate(pods):
        give_devices(objs, pod, n)
    ips = [p["status"]["podIP"] for p in pods]
    done = completed(objs, "npu-0", ips, ["192.168.0.1", "192.168.1.1"])
    assert done["server_count"] == "2"
    assert [d["rank_id"] for s in done["server_list"] for d in s["device"]] == ["0", "1", "2", "3"]
    assert [s["server_id"] for s in done["server_list"]] == [p["status"]["hostIP"] for p in pods]

    # The worker is deleted: its role replica is recreated (RoleRecreate, as Kthena), the
    # worker on the other node. The table follows them.
    worker = pods[1]
    old_node = worker["spec"]["nodeName"]
    set_unschedulable(objs, old_node, True)
    try:
        objs.core.delete_namespaced_pod(worker["metadata"]["name"], objs.namespace)

        def moved() -> list[dict[str, Any]] | None:
            fresh = [
                p
                for p in objs.pods("npu")
                if p["metadata"]["uid"] not in {q["metadata"]["uid"] for q in pods}
                and (p.get("status") or {}).get("podIP")
            ]
            return sorted(fresh, key=lambda p: p["metadata"]["name"]) if len(fresh) == 2 else None

        again: list[dict[str, Any]] = wait_for("the recreated role replica with IPs", moved, 60)
    finally:
        set_unschedulable(objs, old_node, False)
    assert [p["metadata"]["name"] for p in again] == [p["metadata"]["name"] for p in pods]
    assert again[1]["spec"]["nodeName"] != old_node
    for n, pod in enumerate(again, start=6):
        give_devices(objs, pod, n)
    changed = completed(
        objs, "npu-0", [p["status"]["podIP"] for p in again], ["192.168.6.1", "192.168.7.1"]
    )
    assert changed["server_list"][1]["server_id"] == again[1]["status"]["hostIP"]

    # The ConfigMap goes with the ModelServing (its owner).
    objs.delete("npu")
    gone = lambda: config_map(objs, "npu-0-ranktable") is None  # noqa: E731
    wait_for("garbage collection of the rank table", gone, timeout=90)


def test_the_objects_are_server_side_applied(objs: Objects) -> None:
    """A key the plugin stops returning goes; a key someone else added stays; every field the
    controller wrote is its field manager's, applied."""
    objs.create(model_serving("ssa", replicas=1, workers=1, plugins=[{"name": "hccl-ranktable"}]))
    objs.wait_pods("ssa", 2)
    wait_for("the rank table", lambda: config_map(objs, "ssa-0-ranktable"), 60)
    note = {"data": {"note": "kept"}}
    objs.core.patch_namespaced_config_map(
        "ssa-0-ranktable", objs.namespace, note, field_manager="someone"
    )
    plugins = [{"name": "hccl-ranktable", "config": {"fileName": "rank.json"}}]
    objs.patch("ssa", {"spec": {"plugins": plugins}})

    def renamed() -> dict[str, Any] | None:
        cm = config_map(objs, "ssa-0-ranktable")
        return cm if cm is not None and "hccl.json" not in cm["data"] else None

    cm: dict[str, Any] = wait_for("the rank table under its new key", renamed, 60)
    assert set(cm["data"]) == {"rank.json", "note"}
    ours = [
        (m["operation"], m.get("subresource"))
        for m in cm["metadata"]["managedFields"]
        if m["manager"] == "modelserving-plugin-hccl-ranktable"
    ]
    assert ours == [("Apply", None)]


def test_the_webassembly_twins_write_the_same_objects(objs: Objects) -> None:
    plugins = [
        {"name": "hccl-ranktable", "runtime": "Wasm"},
        {"name": "entry-address-file", "runtime": "Wasm"},
    ]
    objs.create(model_serving("twin", replicas=1, workers=1, plugins=plugins))
    pods = with_ips(objs, "twin", 2)
    for n, pod in enumerate(pods):
        give_devices(objs, pod, n)
    ips = [p["status"]["podIP"] for p in pods]
    done = completed(objs, "twin-0", ips, ["192.168.0.1", "192.168.1.1"])
    assert [s["server_id"] for s in done["server_list"]] == [p["status"]["hostIP"] for p in pods]

    def addresses() -> dict[str, Any] | None:
        cm = config_map(objs, "twin-0-entry-address")
        return cm if cm is not None and cm["data"].get("server-0") == ips[0] else None

    cm: dict[str, Any] = wait_for("the entry address file with the entry Pod's IP", addresses)
    dns = f"twin-0-server-0-0.{objs.namespace}"
    assert json.loads(cm["data"]["server-0.json"]) == {"dns": dns, "ip": ips[0]}
    applied = json.loads(
        pods[0]["metadata"]["annotations"]["modelserving.volcano.sh/plugins-applied"]
    )
    assert [(a["name"], a["runtime"]) for a in applied] == [
        ("hccl-ranktable", "Wasm"),
        ("entry-address-file", "Wasm"),
    ]


def group_guest(objects: list[dict[str, Any]]) -> bytes:
    """A v3 module whose ServingGroup hook answers ``objects``."""
    data = msgpack.packb({"objects": objects})
    offset = 1024 if len(data) <= 3000 else 1 << 20
    pages = (offset + len(data)) // 65536 + 2
    fields = [
        f'(data (i32.const {offset}) "{wat_bytes(data)}")',
        '(func (export "modelserving_abi_v3"))',
        hook(returns(offset, len(data)), "ms_on_serving_group_change"),
    ]
    return guest(*fields, marker=False, memory=f'(memory (export "memory") {pages})')


def cm(name: str, kind: str = "ConfigMap", **meta: Any) -> dict[str, Any]:
    return {"apiVersion": "v1", "kind": kind, "metadata": {"name": name, **meta}, "data": {}}


FORBIDDEN: dict[str, tuple[dict[str, Any], str]] = {
    "secret": (cm("secret-0-x", "Secret"), "kind Secret is not allowed (objectPolicy.kinds: "),
    "namespace": (cm("namespace-0-x", namespace="kube-system"), "namespace kube-system is not"),
    "prefix": (cm("someone-elses"), "name 'someone-elses' must start with 'prefix-0-'"),
    "big": (
        {**cm("big-0-x"), "data": {"blob": "x" * 300_000}},
        "bytes; objectPolicy.maxObjectBytes is 262144",
    ),
}


def test_a_forbidden_object_is_refused_with_a_clear_event(objs: Objects) -> None:
    for name, (obj, _) in FORBIDDEN.items():
        module = group_guest([obj])
        objs.core.create_namespaced_config_map(
            objs.namespace, module_config_map(objs.namespace, f"{name}-module", module)
        )
        plugin = wasm_plugin("owner", f"{name}-module", module)
        objs.create(model_serving(name, replicas=1, workers=0, plugins=[plugin]))

    def refused() -> dict[str, str] | None:
        found: dict[str, str] = {}
        for event in objs.events("PluginFailed"):
            for name in FORBIDDEN:
                if event.involved_object.name == name and "ForbiddenObject" in event.message:
                    found[name] = event.message
        return found if len(found) == len(FORBIDDEN) else None

    messages: dict[str, str] = wait_for("a ForbiddenObject event for each", refused, 90)
    for name, (_, rule) in FORBIDDEN.items():
        assert messages[name].startswith(
            f"ForbiddenObject: plugin 'owner' OnServingGroupChange on ServingGroup {name}-0: "
            "objects[0]: "
        ), messages[name]
        assert rule in messages[name]
        assert objs.wait_condition(name, "PluginsReady", "False")
    secrets = objs.core.list_namespaced_secret(objs.namespace).items
    assert "secret-0-x" not in {s.metadata.name for s in secrets if s.metadata}
    maps = objs.core.list_namespaced_config_map(objs.namespace).items
    names = {c.metadata.name for c in maps if c.metadata}
    assert names & {"someone-elses", "big-0-x", "namespace-0-x"} == set()
