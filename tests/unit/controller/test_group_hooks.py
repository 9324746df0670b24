"""The ServingGroup hook in the reconciler: when it is called, what it writes and deletes, what
it refuses and how failures follow the failure policy (controller.groups, on a fake API)."""

from __future__ import annotations

import json
from typing import Any

import pytest

from modelserving.api import labels
from modelserving.api.errors import FailureClass
from modelserving.controller.groups import INPUT_ANNOTATION, PLUGIN_LABEL, field_manager
from modelserving.controller.kube import CONFIG_MAPS, MODEL_SERVINGS, PODS
from modelserving.controller.reconciler import Reconciler, RetryLater
from modelserving.plugins.builtins.hccl_ranktable import DEFAULT_ANNOTATION
from tests.unit.conftest import manifest, role
from tests.unit.controller.test_reconciler import (
    KEY,
    NS,
    FakeKube,
    Obj,
    Recording,
    plugins_ready,
)

# the fixtures of the reconciler's tests (kube, rec, recorder, make_reconciler and theirs)
pytest_plugins = ["tests.unit.controller.test_reconciler"]

RANKTABLE = {"name": "hccl-ranktable", "type": "BuiltIn"}
ENTRY_FILE = {"name": "entry-address-file", "type": "BuiltIn"}


def two_node(plugins: list[Obj], replicas: int = 1) -> Obj:
    return manifest(roles=[role(workers=1)], replicas=replicas, plugins=plugins)


def schedule(kube: FakeKube, name: str, n: int, devices: int = 2) -> None:
    """The Pod is scheduled on node ``n``, has an IP and the device plugin's annotation."""

    def change(pod: Obj) -> None:
        pod["spec"]["nodeName"] = f"node-{n}"
        pod["status"] = {"phase": "Running", "hostIP": f"10.0.0.{n}", "podIP": f"10.244.{n}.5"}
        device_list = [
            {"device_id": str(d), "device_ip": f"192.168.{n}.{d + 1}"} for d in range(devices)
        ]
        annotation = json.dumps({"pod_name": pod["metadata"]["name"], "devices": device_list})
        pod["metadata"].setdefault("annotations", {})[DEFAULT_ANNOTATION] = annotation

    kube.edit(PODS, name, change)


def table(kube: FakeKube, group: str = "sample-0") -> dict[str, Any]:
    cm = kube.stored(CONFIG_MAPS, f"{group}-ranktable")
    assert cm is not None, sorted(kube.all(CONFIG_MAPS))
    return json.loads(cm["data"]["hccl.json"])  # type: ignore[no-any-return]


def applies(kube: FakeKube) -> int:
    """Writes of ConfigMaps: creates of new ones and applies to the controller's own."""
    return kube.count("apply", CONFIG_MAPS) + kube.count("create", CONFIG_MAPS)


def test_the_rank_table_is_written_at_once_and_completed_when_every_pod_is_known(
    kube: FakeKube, rec: Reconciler
) -> None:
    kube.put(MODEL_SERVINGS, two_node([RANKTABLE]))
    rec.reconcile(KEY)  # creates the Pods; the hook sees them on the next pass
    rec.reconcile(KEY)
    assert table(kube) == {
        "status": "initializing",
        "version": "1.0",
        "server_count": "0",
        "server_list": [],
    }
    schedule(kube, "sample-0-server-0-0", 1)
    rec.reconcile(KEY)
    assert table(kube)["status"] == "initializing"
    assert table(kube)["server_count"] == "1"
    schedule(kube, "sample-0-server-0-1", 2)
    rec.reconcile(KEY)
    done = table(kube)
    assert done["status"] == "completed"
    assert [s["server_id"] for s in done["server_list"]] == ["10.0.0.1", "10.0.0.2"]
    ranks = [d["rank_id"] for s in done["server_list"] for d in s["device"]]
    assert ranks == ["0", "1", "2", "3"]
    cm = kube.stored(CONFIG_MAPS, "sample-0-ranktable")
    assert cm is not None
    meta = cm["metadata"]
    assert meta["labels"][labels.NAME_LABEL] == "sample"
    assert meta["labels"][labels.GROUP_NAME_LABEL] == "sample-0"
    assert meta["labels"][PLUGIN_LABEL] == "hccl-ranktable"
    assert meta["ownerReferences"][0]["uid"] == "uid-1"
    assert meta["managedFields"] == [
        {"manager": field_manager("hccl-ranktable"), "operation": "Apply"}
    ]  # created, then applied
    assert len(meta["annotations"][INPUT_ANNOTATION]) == 64


def test_the_same_input_calls_nothing_and_writes_nothing(
    kube: FakeKube, rec: Reconciler, recorder: Recording
) -> None:
    kube.put(MODEL_SERVINGS, two_node([RANKTABLE]))
    rec.reconcile(KEY)
    schedule(kube, "sample-0-server-0-0", 1)
    schedule(kube, "sample-0-server-0-1", 2)
    rec.reconcile(KEY)
    calls = len([r for r in recorder.hooks if r.hook == "OnServingGroupChange"])
    written = applies(kube)
    for _ in range(3):
        rec.reconcile(KEY)
    assert len([r for r in recorder.hooks if r.hook == "OnServingGroupChange"]) == calls
    assert applies(kube) == written


def test_a_restarted_controller_reads_the_input_from_the_objects(
    kube: FakeKube, make_reconciler: Any, recorder: Recording
) -> None:
    kube.put(MODEL_SERVINGS, two_node([RANKTABLE]))
    first = make_reconciler()
    first.reconcile(KEY)
    schedule(kube, "sample-0-server-0-0", 1)
    first.reconcile(KEY)
    calls = len(recorder.hooks)
    make_reconciler().reconcile(KEY)  # a new process: nothing in memory
    assert [r.hook for r in recorder.hooks[calls:]] == []


def test_a_recreated_pod_on_another_node_changes_the_table(kube: FakeKube, rec: Reconciler) -> None:
    kube.put(MODEL_SERVINGS, two_node([RANKTABLE]))
    rec.reconcile(KEY)
    schedule(kube, "sample-0-server-0-0", 1)
    schedule(kube, "sample-0-server-0-1", 2)
    rec.reconcile(KEY)
    kube.remove(PODS, "sample-0-server-0-1")
    rec.reconcile(KEY)  # recreates it
    assert table(kube)["status"] == "initializing"
    schedule(kube, "sample-0-server-0-1", 3)
    rec.reconcile(KEY)
    assert table(kube)["status"] == "completed"
    assert table(kube)["server_list"][1]["server_id"] == "10.0.0.3"


def test_scaling_down_deletes_the_groups_objects(kube: FakeKube, rec: Reconciler) -> None:
    kube.put(MODEL_SERVINGS, two_node([RANKTABLE, ENTRY_FILE], replicas=2))
    rec.reconcile(KEY)
    rec.reconcile(KEY)
    assert sorted(kube.all(CONFIG_MAPS)) == [
        "sample-0-entry-address",
        "sample-0-ranktable",
        "sample-1-entry-address",
        "sample-1-ranktable",
    ]

    def one(ms: Obj) -> None:
        ms["spec"]["replicas"] = 1
        ms["metadata"]["generation"] = 2

    kube.edit(MODEL_SERVINGS, "sample", one)
    rec.reconcile(KEY)
    assert sorted(kube.all(CONFIG_MAPS)) == ["sample-0-entry-address", "sample-0-ranktable"]


def test_a_plugin_removed_from_the_list_loses_its_objects(kube: FakeKube, rec: Reconciler) -> None:
    kube.put(MODEL_SERVINGS, two_node([RANKTABLE, ENTRY_FILE]))
    rec.reconcile(KEY)
    rec.reconcile(KEY)

    def drop(ms: Obj) -> None:
        ms["spec"]["plugins"] = [ENTRY_FILE]
        ms["metadata"]["generation"] = 2

    kube.edit(MODEL_SERVINGS, "sample", drop)
    rec.reconcile(KEY)
    assert sorted(kube.all(CONFIG_MAPS)) == ["sample-0-entry-address"]


def test_a_config_map_the_controller_does_not_own_is_refused(
    kube: FakeKube, rec: Reconciler, recorder: Recording
) -> None:
    theirs = {"metadata": {"name": "sample-0-ranktable"}, "data": {"hccl.json": "mine"}}
    kube.put(CONFIG_MAPS, theirs)
    kube.put(MODEL_SERVINGS, two_node([RANKTABLE]))
    rec.reconcile(KEY)
    with pytest.raises(RetryLater, match="ForbiddenObject"):
        rec.reconcile(KEY)
    stored = kube.stored(CONFIG_MAPS, "sample-0-ranktable")
    assert stored is not None and stored["data"] == {"hccl.json": "mine"}
    (message,) = set(recorder.messages("PluginFailed"))
    assert message.startswith(
        "ForbiddenObject: plugin 'hccl-ranktable' OnServingGroupChange on ServingGroup sample-0: "
        "objects[0]: ConfigMap sample-0-ranktable exists and is not owned by plugin "
        "'hccl-ranktable'"
    )
    assert plugins_ready(kube)[0] == "False"
    assert recorder.object_counts[("hccl-ranktable", "refused")] == 1


def test_a_name_another_model_servings_plugin_wrote_is_refused_naming_it(
    kube: FakeKube, rec: Reconciler, recorder: Recording
) -> None:
    theirs = {
        "metadata": {
            "name": "sample-0-ranktable",
            "labels": {
                labels.NAME_LABEL: "other",
                labels.GROUP_NAME_LABEL: "other-3",
                PLUGIN_LABEL: "custom",
            },
        },
        "data": {"x": "1"},
    }
    kube.put(CONFIG_MAPS, theirs)
    kube.put(MODEL_SERVINGS, two_node([RANKTABLE]))
    rec.reconcile(KEY)
    with pytest.raises(RetryLater, match="ForbiddenObject"):
        rec.reconcile(KEY)
    (message,) = set(recorder.messages("PluginFailed"))
    assert "(plugin 'custom' of ModelServing other, ServingGroup other-3, wrote it" in message


def test_under_ignore_a_refusal_is_reported_and_not_retried(
    kube: FakeKube, rec: Reconciler, recorder: Recording
) -> None:
    kube.put(CONFIG_MAPS, {"metadata": {"name": "sample-0-ranktable"}, "data": {}})
    kube.put(MODEL_SERVINGS, two_node([{**RANKTABLE, "failurePolicy": "Ignore"}]))
    rec.reconcile(KEY)
    rec.reconcile(KEY)  # no RetryLater
    rec.reconcile(KEY)
    assert len(recorder.messages("PluginIgnored")) == 1
    assert FailureClass.FORBIDDEN_OBJECT in recorder.messages("PluginIgnored")[0]


def test_calls_for_one_group_are_a_second_apart(
    kube: FakeKube, make_reconciler: Any, recorder: Recording
) -> None:
    kube.put(MODEL_SERVINGS, two_node([RANKTABLE]))
    rec = make_reconciler()
    now = [1000.0]
    rec.groups.clock = lambda: now[0]
    rec.reconcile(KEY)
    rec.reconcile(KEY)
    calls = len(recorder.hooks)
    schedule(kube, "sample-0-server-0-0", 1)
    assert rec.reconcile(KEY) is not None  # deferred: looks again shortly
    assert len(recorder.hooks) == calls
    now[0] += 1.0
    rec.reconcile(KEY)
    assert len(recorder.hooks) == calls + 1
    assert table(kube)["server_count"] == "1"


def test_entry_address_files_follow_the_entry_pods_ip(kube: FakeKube, rec: Reconciler) -> None:
    kube.put(MODEL_SERVINGS, two_node([ENTRY_FILE]))
    rec.reconcile(KEY)
    rec.reconcile(KEY)
    cm = kube.stored(CONFIG_MAPS, "sample-0-entry-address")
    assert cm is not None
    dns = f"sample-0-server-0-0.{NS}"
    assert cm["data"] == {
        "server-0": dns,
        "server-0.json": json.dumps({"dns": dns, "ip": ""}, separators=(",", ":")),
    }
    schedule(kube, "sample-0-server-0-0", 1)
    rec.reconcile(KEY)
    cm = kube.stored(CONFIG_MAPS, "sample-0-entry-address")
    assert cm is not None and cm["data"]["server-0"] == "10.244.1.5"
    pod = kube.stored(PODS, "sample-0-server-0-1")
    assert pod is not None
    volume = next(v for v in pod["spec"]["volumes"] if v["name"] == "entry-address")
    assert volume["configMap"] == {
        "name": "sample-0-entry-address",
        "optional": True,
        "items": [
            {"key": "server-0", "path": "address"},
            {"key": "server-0.json", "path": "address.json"},
        ],
    }


# --- Monitor mode ----------------------------------------------------------------------------


def test_a_monitored_group_hook_writes_nothing_and_says_what_it_would_apply(
    kube: FakeKube, rec: Reconciler, recorder: Recording
) -> None:
    kube.put(MODEL_SERVINGS, two_node([{**RANKTABLE, "mode": "Monitor"}]))
    rec.reconcile(KEY)
    rec.reconcile(KEY)
    assert kube.all(CONFIG_MAPS) == {}
    pod = kube.stored(PODS, "sample-0-server-0-0")
    assert pod is not None and "volumes" not in pod["spec"]  # nor the OnPodCreate patch
    messages = recorder.messages("PluginMonitored")
    assert any(
        m.startswith(
            "plugin 'hccl-ranktable' (mode Monitor) OnPodCreate on ServingGroup sample-0: "
            "would change 2 of 2 Pods; Pod sample-0-server-0-0 would get "
        )
        and m.endswith("(nothing applied)")
        for m in messages
    ), messages
    assert any(
        m.startswith(
            "plugin 'hccl-ranktable' (mode Monitor) OnServingGroupChange on ServingGroup "
            "sample-0: would apply 1 ConfigMap(s): sample-0-ranktable ("
        )
        for m in messages
    ), messages
    assert recorder.object_counts[("hccl-ranktable", "monitored")] == 1
    assert ("hccl-ranktable", "applied") not in recorder.object_counts


def test_a_failing_monitored_plugin_blocks_nothing(
    kube: FakeKube, rec: Reconciler, recorder: Recording
) -> None:
    broken = {**ENTRY_FILE, "mode": "Monitor", "config": {"container": "missing"}}
    kube.put(MODEL_SERVINGS, two_node([broken]))
    rec.reconcile(KEY)  # failure policy Fail, yet no RetryLater
    assert len(kube.all(PODS)) == 2
    (message,) = [m for m in recorder.messages("PluginMonitored") if "OnPodCreate" in m]
    assert "would fail on 2, first on Pod sample-0-server-0-0: PluginError: " in message
    assert "the Pod has no container named 'missing'" in message
    assert "PluginFailed" not in recorder.reasons()
    assert plugins_ready(kube)[0] == "True"


def test_a_plugin_listed_twice_owns_two_sets_of_objects(
    kube: FakeKube, rec: Reconciler, recorder: Recording
) -> None:
    plugins = [
        {**RANKTABLE, "scope": {"roles": ["prefill"]}, "config": {"configMapSuffix": "p-table"}},
        {**RANKTABLE, "scope": {"roles": ["decode"]}, "config": {"configMapSuffix": "d-table"}},
    ]
    roles = [role("prefill", workers=1), role("decode", workers=1)]
    kube.put(MODEL_SERVINGS, manifest(roles=roles, plugins=plugins))
    for _ in range(4):
        rec.reconcile(KEY)
    assert sorted(kube.all(CONFIG_MAPS)) == ["sample-0-d-table", "sample-0-p-table"]
    assert kube.count("delete", CONFIG_MAPS) == 0  # no flapping between the two entries
    assert kube.count("create", CONFIG_MAPS) == 2  # made once each, never rewritten
    prefill = json.loads(kube.all(CONFIG_MAPS)["sample-0-p-table"]["data"]["hccl.json"])
    assert prefill["server_count"] == "0"  # and nothing of decode's


def test_without_group_hooks_the_config_maps_are_listed_once(
    kube: FakeKube, rec: Reconciler
) -> None:
    lists: list[str | None] = []
    list_ = kube.list

    def counting(res: Any, namespace: str | None, selector: str | None = None) -> list[Obj]:
        if res is CONFIG_MAPS:
            lists.append(selector)
        return list_(res, namespace, selector)

    kube.list = counting  # type: ignore[method-assign]
    kube.put(MODEL_SERVINGS, two_node([{"name": "demo-pod-tweaks"}]))
    for _ in range(3):
        rec.reconcile(KEY)
    assert len(lists) == 1  # the first pass learns it owns nothing

    def add_group_plugin(ms: Obj) -> None:
        ms["spec"]["plugins"] = [RANKTABLE]
        ms["metadata"]["generation"] = 2

    kube.edit(MODEL_SERVINGS, "sample", add_group_plugin)
    rec.reconcile(KEY)
    rec.reconcile(KEY)
    assert len(lists) == 3  # with a ServingGroup hook, every pass reads what it owns
    assert "sample-0-ranktable" in kube.all(CONFIG_MAPS)

    def drop(ms: Obj) -> None:
        ms["spec"]["plugins"] = []
        ms["metadata"]["generation"] = 3

    kube.edit(MODEL_SERVINGS, "sample", drop)
    rec.reconcile(KEY)
    assert kube.all(CONFIG_MAPS) == {}  # deleted once the plugin is gone
    rec.reconcile(KEY)
    assert len(lists) == 4


def test_a_config_map_made_meanwhile_by_someone_else_is_not_taken_over(
    kube: FakeKube, rec: Reconciler, recorder: Recording
) -> None:
    kube.put(MODEL_SERVINGS, two_node([RANKTABLE]))
    rec.reconcile(KEY)
    get = kube.get

    def get_then_race(res: Any, namespace: str | None, name: str) -> Obj | None:
        got = get(res, namespace, name)
        if res is CONFIG_MAPS and name == "sample-0-ranktable":
            kube.put(CONFIG_MAPS, {"metadata": {"name": name}, "data": {"theirs": "1"}})
        return got  # None: the check saw no ConfigMap

    kube.get = get_then_race  # type: ignore[method-assign]
    with pytest.raises(RetryLater, match="ForbiddenObject"):
        rec.reconcile(KEY)
    stored = kube.stored(CONFIG_MAPS, "sample-0-ranktable")
    assert stored is not None and stored["data"] == {"theirs": "1"}
    assert kube.count("apply", CONFIG_MAPS) == 0


def test_an_object_deleted_by_hand_is_made_again(kube: FakeKube, rec: Reconciler) -> None:
    kube.put(MODEL_SERVINGS, two_node([RANKTABLE]))
    rec.reconcile(KEY)
    rec.reconcile(KEY)
    kube.remove(CONFIG_MAPS, "sample-0-ranktable")
    rec.reconcile(KEY)  # same input, but an object it wrote is missing
    assert "sample-0-ranktable" in kube.all(CONFIG_MAPS)


def test_a_key_the_plugin_drops_goes_from_the_config_map(kube: FakeKube, rec: Reconciler) -> None:
    kube.put(MODEL_SERVINGS, two_node([RANKTABLE]))
    rec.reconcile(KEY)
    rec.reconcile(KEY)

    def rename(ms: Obj) -> None:
        ms["spec"]["plugins"] = [{**RANKTABLE, "config": {"fileName": "rank.json"}}]
        ms["metadata"]["generation"] = 2

    kube.edit(MODEL_SERVINGS, "sample", rename)
    rec.reconcile(KEY)
    assert set(kube.all(CONFIG_MAPS)["sample-0-ranktable"]["data"]) == {"rank.json"}


def test_reordering_the_plugin_list_keeps_the_objects(kube: FakeKube, rec: Reconciler) -> None:
    kube.put(MODEL_SERVINGS, two_node([RANKTABLE, ENTRY_FILE]))
    rec.reconcile(KEY)
    rec.reconcile(KEY)
    uids = {n: o["metadata"]["uid"] for n, o in kube.all(CONFIG_MAPS).items()}

    def swap(ms: Obj) -> None:
        ms["spec"]["plugins"] = [ENTRY_FILE, RANKTABLE]
        ms["metadata"]["generation"] = 2

    kube.edit(MODEL_SERVINGS, "sample", swap)
    rec.reconcile(KEY)
    rec.reconcile(KEY)
    assert {n: o["metadata"]["uid"] for n, o in kube.all(CONFIG_MAPS).items()} == uids
    assert kube.count("delete", CONFIG_MAPS) == 0


def test_two_entries_of_one_plugin_may_not_share_a_name(
    kube: FakeKube, rec: Reconciler, recorder: Recording
) -> None:
    kube.put(MODEL_SERVINGS, two_node([RANKTABLE, {**RANKTABLE, "failurePolicy": "Ignore"}]))
    rec.reconcile(KEY)
    rec.reconcile(KEY)
    rec.reconcile(KEY)
    cm = kube.all(CONFIG_MAPS)["sample-0-ranktable"]
    assert cm["metadata"]["annotations"]["modelserving.volcano.sh/plugin-index"] == "0"
    (message,) = set(recorder.messages("PluginIgnored"))
    assert "is owned by plugin 'hccl-ranktable' (spec.plugins[0]" in message
