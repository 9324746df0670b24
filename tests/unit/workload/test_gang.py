"""Volcano PodGroups and Pod annotations as Kthena 3cc0572 makes them, one rule per test."""

from __future__ import annotations

import copy
from typing import Any

import pytest

from modelserving.api import ModelServing, parse_model_serving
from modelserving.workload import plan
from modelserving.workload.gang import (
    NO_VOLCANO,
    VolcanoApi,
    pod_group,
    pod_group_spec,
    spec_changes,
    volcano_api,
)
from modelserving.workload.sync import sync
from tests.unit.conftest import container, manifest, role

CURRENT = VolcanoApi()
OLD_VOLCANO = VolcanoApi(pod_groups=True, sub_group_policy=False)


def ms_of(
    roles: list[dict[str, Any]] | None = None,
    annotations: dict[str, str] | None = None,
    **template: Any,
) -> ModelServing:
    doc = manifest(name="llm", roles=roles)
    doc["spec"]["template"].update(template)
    if annotations:
        doc["metadata"]["annotations"] = annotations
    return parse_model_serving(doc)


def requesting(requests: dict[str, Any], **extra: Any) -> dict[str, Any]:
    return {"spec": {"containers": [container("c", resources={"requests": requests}, **extra)]}}


# --- when ------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("scheduler", "gang", "template", "wanted"),
    [
        ("volcano", True, {}, True),  # no gangPolicy: still one PodGroup (Kthena's default)
        ("volcano", True, {"gangPolicy": {"minRoleReplicas": {"server": 1}}}, True),
        ("volcano", OLD_VOLCANO, {}, True),
        ("volcano", False, {"gangPolicy": {}}, False),  # no PodGroup CRD
        ("default-scheduler", True, {"gangPolicy": {}}, False),
    ],
)
def test_a_pod_group_per_serving_group_when_volcano_schedules(
    scheduler: str, gang: bool | VolcanoApi, template: dict[str, Any], wanted: bool
) -> None:
    doc = manifest(name="llm", roles=[role(replicas=2, workers=1)], schedulerName=scheduler)
    doc["spec"]["replicas"] = 2
    doc["spec"]["template"].update(template)
    groups = plan(parse_model_serving(doc), gang=gang)
    assert [g.pod_group is not None for g in groups] == [wanted, wanted]
    for group in groups:
        for pod in group.pods():
            annotations = pod.pod["metadata"].get("annotations") or {}
            if wanted:
                assert annotations["scheduling.k8s.io/group-name"] == group.name
                assert annotations["volcano.sh/task-spec"] == pod.place.role_id
            else:
                assert "scheduling.k8s.io/group-name" not in annotations


def test_pod_group_metadata() -> None:
    got = pod_group(ms_of(), "llm-3")
    assert got["apiVersion"] == "scheduling.volcano.sh/v1beta1"
    assert got["kind"] == "PodGroup"
    assert got["metadata"] == {
        "name": "llm-3",
        "namespace": "team-a",
        "labels": {
            "modelserving.volcano.sh/name": "llm",
            "modelserving.volcano.sh/group-name": "llm-3",
        },
        "annotations": {"scheduling.k8s.io/group-name": "llm-3"},
        "ownerReferences": [
            {
                "apiVersion": "workload.serving.volcano.sh/v1alpha1",
                "kind": "ModelServing",
                "name": "llm",
                "uid": "uid-1",
                "controller": True,
            }
        ],
    }


# --- spec fields -------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("roles", "gang_policy", "min_member"),
    [
        ([role(replicas=3)], None, 3),
        ([role("a", replicas=3, workers=2), role("b", replicas=2)], None, 11),
        ([role("a", replicas=3, workers=2), role("b", replicas=2)], {"a": 1}, 5),
        ([role("a", replicas=3, workers=1)], {"a": 3}, 6),
        ([role("a", replicas=0)], None, None),  # 0 is left out (omitempty)
        ([role("a", replicas=2)], {"a": 0}, None),
    ],
)
def test_min_member(
    roles: list[dict[str, Any]], gang_policy: dict[str, int] | None, min_member: int | None
) -> None:
    template: dict[str, Any] = (
        {"gangPolicy": {"minRoleReplicas": gang_policy}} if gang_policy is not None else {}
    )
    spec = pod_group_spec(ms_of(roles, **template), VolcanoApi())
    assert spec.get("minMember") == min_member


@pytest.mark.parametrize(
    ("roles", "gang_policy", "expected"),
    [
        ([role()], None, {}),  # nothing requested: an empty map, still written
        (
            [role(replicas=2, entryTemplate=requesting({"cpu": "500m", "memory": "1Gi"}))],
            None,
            {"cpu": "1", "memory": "2Gi"},
        ),
        (  # only the role replicas minMember counts
            [role(replicas=3, entryTemplate=requesting({"cpu": "1"}))],
            {"server": 1},
            {"cpu": "1"},
        ),
        (  # each worker counts, times the role's minimum
            [
                role(
                    replicas=2,
                    workers=3,
                    entryTemplate=requesting({"nvidia.com/gpu": 1}),
                    workerTemplate=requesting({"nvidia.com/gpu": "2"}),
                )
            ],
            None,
            {"nvidia.com/gpu": "14"},
        ),
        (  # limits are not requests; initContainers do not count
            [
                role(
                    entryTemplate={
                        "spec": {
                            "containers": [container("c", resources={"limits": {"cpu": "4"}})],
                            "initContainers": [
                                container("i", resources={"requests": {"cpu": "8"}})
                            ],
                        }
                    }
                )
            ],
            None,
            {},
        ),
        (  # summed across roles and containers, in the first term's format
            [
                role("a", entryTemplate=requesting({"memory": "512Mi"})),
                role("b", replicas=2, entryTemplate=requesting({"memory": "1G"})),
            ],
            None,
            {"memory": "2477413Ki"},  # 512Mi + 2 x 1G, BinarySI as the first term
        ),
        (  # a role with no minimum adds a zero; the next term's format wins
            [
                role("a", entryTemplate=requesting({"memory": "1G"})),
                role("b", entryTemplate=requesting({"memory": "1Gi"})),
            ],
            {"a": 0},
            {"memory": "1Gi"},
        ),
    ],
)
def test_min_resources(
    roles: list[dict[str, Any]], gang_policy: dict[str, int] | None, expected: dict[str, str]
) -> None:
    template: dict[str, Any] = (
        {"gangPolicy": {"minRoleReplicas": gang_policy}} if gang_policy is not None else {}
    )
    assert pod_group_spec(ms_of(roles, **template), VolcanoApi())["minResources"] == expected


@pytest.mark.parametrize(
    ("annotations", "queue"),
    [
        ({"scheduling.volcano.sh/queue-name": "gpu"}, "gpu"),
        ({"scheduling.volcano.sh/queue-name": ""}, None),
        (None, None),
    ],
)
def test_queue_from_the_model_serving_annotation(
    annotations: dict[str, str] | None, queue: str | None
) -> None:
    assert pod_group_spec(ms_of(annotations=annotations), VolcanoApi()).get("queue") == queue


@pytest.mark.parametrize(
    ("topology", "expected"),
    [
        (None, None),
        ({"rolePolicy": {"mode": "hard"}}, None),
        (
            {"groupPolicy": {"mode": "soft", "highestTierAllowed": 2}},
            {"mode": "soft", "highestTierAllowed": 2},
        ),
        ({"groupPolicy": {"highestTierName": "", "mode": "hard", "x": 1}}, {"mode": "hard"}),
    ],
)
def test_network_topology_is_the_group_policy(
    topology: dict[str, Any] | None, expected: dict[str, Any] | None
) -> None:
    template: dict[str, Any] = {"networkTopology": topology} if topology is not None else {}
    assert pod_group_spec(ms_of(**template), VolcanoApi()).get("networkTopology") == expected


def test_sub_group_policy_per_role_when_the_crd_has_it() -> None:
    ms = ms_of(
        [role("prefill", replicas=3, workers=1), role("decode", replicas=2)],
        gangPolicy={"minRoleReplicas": {"prefill": 2}},
        networkTopology={"rolePolicy": {"mode": "hard", "highestTierAllowed": 1}},
    )
    assert pod_group_spec(ms, VolcanoApi())["subGroupPolicy"] == [
        {
            "name": "prefill",
            "networkTopology": {"mode": "hard", "highestTierAllowed": 1},
            "subGroupSize": 2,
            "minSubGroups": 2,
            "labelSelector": {
                "matchLabels": {
                    "modelserving.volcano.sh/name": "llm",
                    "modelserving.volcano.sh/role": "prefill",
                }
            },
            "matchLabelKeys": ["modelserving.volcano.sh/role-id"],
        },
        {
            "name": "decode",
            "networkTopology": {"mode": "hard", "highestTierAllowed": 1},
            "subGroupSize": 1,
            "minSubGroups": 2,
            "labelSelector": {
                "matchLabels": {
                    "modelserving.volcano.sh/name": "llm",
                    "modelserving.volcano.sh/role": "decode",
                }
            },
            "matchLabelKeys": ["modelserving.volcano.sh/role-id"],
        },
    ]
    assert "subGroupPolicy" not in pod_group_spec(ms, OLD_VOLCANO)


def test_no_min_task_member_nor_priority_class() -> None:
    ms = ms_of([role(replicas=2)], gangPolicy={"minRoleReplicas": {"server": 1}})
    spec = pod_group_spec(ms, VolcanoApi())
    assert "minTaskMember" not in spec
    assert "priorityClassName" not in spec


# --- the CRD -----------------------------------------------------------------------------------


def crd(*spec_fields: str) -> dict[str, Any]:
    props = {f: {"type": "object"} for f in spec_fields}
    return {
        "spec": {
            "versions": [
                {"name": "v1alpha1", "schema": {"openAPIV3Schema": {"type": "object"}}},
                {
                    "name": "v1beta1",
                    "schema": {"openAPIV3Schema": {"properties": {"spec": {"properties": props}}}},
                },
            ]
        }
    }


@pytest.mark.parametrize(
    ("found", "api"),
    [
        (None, NO_VOLCANO),
        (crd("minMember"), VolcanoApi(pod_groups=True, sub_group_policy=False)),
        (crd("minMember", "subGroupPolicy"), VolcanoApi(pod_groups=True, sub_group_policy=True)),
        ({"spec": {}}, VolcanoApi(pod_groups=True, sub_group_policy=False)),
    ],
)
def test_volcano_api_from_the_crd(found: dict[str, Any] | None, api: VolcanoApi) -> None:
    assert volcano_api(found) == api


# --- updates -----------------------------------------------------------------------------------


def served(ms: ModelServing, api: VolcanoApi = CURRENT, **spec: Any) -> dict[str, Any]:
    """The PodGroup as the API would return it: created from ``ms``, defaults filled in."""
    got = pod_group(ms, "llm-0", api)
    got["spec"].setdefault("queue", "default")
    for entry in got["spec"].get("subGroupPolicy", []):
        if "networkTopology" in entry:
            entry["networkTopology"].setdefault("mode", "hard")
    got["spec"].update(spec)
    return got


def test_no_update_when_only_defaults_differ() -> None:
    ms = ms_of(
        [role(replicas=2, workers=1)],
        networkTopology={"groupPolicy": {"highestTierAllowed": 1}, "rolePolicy": {}},
    )
    existing = served(ms, networkTopology={"mode": "hard", "highestTierAllowed": 1})
    assert spec_changes(existing, ms, VolcanoApi()) is None


def test_scale_updates_min_member_and_min_resources() -> None:
    before = ms_of([role(replicas=2, entryTemplate=requesting({"cpu": "1", "memory": "1Gi"}))])
    after = ms_of([role(replicas=3, entryTemplate=requesting({"cpu": "1"}))])
    patch = spec_changes(served(before, OLD_VOLCANO), after, OLD_VOLCANO)
    assert patch == {"spec": {"minMember": 3, "minResources": {"cpu": "3", "memory": None}}}
    patch = spec_changes(served(before), after, VolcanoApi())
    assert patch is not None
    assert [p["minSubGroups"] for p in patch["spec"]["subGroupPolicy"]] == [3]


def test_removed_fields_are_removed_and_others_left_alone() -> None:
    before = ms_of(
        annotations={"scheduling.volcano.sh/queue-name": "gpu"},
        networkTopology={"groupPolicy": {"mode": "soft", "highestTierName": "rack"}},
    )
    existing = served(before, minTaskMember={"server-0": 1}, priorityClassName="high")
    after = ms_of(networkTopology={"groupPolicy": {"mode": "soft"}})
    patch = spec_changes(existing, after, VolcanoApi())
    assert patch == {
        "spec": {"queue": None, "networkTopology": {"mode": "soft", "highestTierName": None}}
    }


def test_sub_group_policy_left_alone_when_the_crd_lacks_it() -> None:
    ms = ms_of()
    existing = served(ms, subGroupPolicy=[{"name": "other"}])
    assert spec_changes(existing, ms, OLD_VOLCANO) is None
    assert spec_changes(existing, ms, VolcanoApi()) == {
        "spec": {"subGroupPolicy": pod_group_spec(ms, VolcanoApi())["subGroupPolicy"]}
    }


# --- the reconcile pass ------------------------------------------------------------------------


def created(ms: ModelServing, api: VolcanoApi = CURRENT) -> dict[str, list[dict[str, Any]]]:
    """What a first pass creates: Pods and PodGroups, as the API would hold them."""
    out: dict[str, list[dict[str, Any]]] = {"pods": [], "pod_groups": []}
    for work in sync(ms, [], now=0.0, gang=api).creates:
        if work.pod_group is not None:
            out["pod_groups"].append(served(ms, api) | {"metadata": work.pod_group["metadata"]})
        out["pods"].extend(copy.deepcopy(p.pod) for p in work.pods)
    for pod in out["pods"]:
        pod["metadata"]["uid"] = "u-" + pod["metadata"]["name"]
        pod["status"] = {"phase": "Running", "conditions": [{"type": "Ready", "status": "True"}]}
    return out


def test_sync_creates_a_pod_group_before_the_pods_of_each_serving_group() -> None:
    ms = ms_of([role(replicas=2)])
    ms.spec.replicas = 2
    plan = sync(ms, [], now=0.0, gang=VolcanoApi())
    assert [(w.name, w.pod_group is not None) for w in plan.creates] == [
        ("llm-0", True),
        ("llm-1", True),
    ]
    assert sync(ms, [], now=0.0, gang=NO_VOLCANO).creates[0].pod_group is None


def test_sync_recreates_a_missing_pod_group_of_a_kept_serving_group() -> None:
    ms = ms_of([role(replicas=2)])
    world = created(ms)
    plan = sync(ms, world["pods"], [], [], now=0.0, gang=VolcanoApi())
    assert [(w.name, w.pod_group is not None, w.steps) for w in plan.creates] == [
        ("llm-0", True, [])
    ]


def test_sync_updates_pod_groups_to_the_current_model_serving() -> None:
    ms = ms_of([role(replicas=2)])
    ms.spec.replicas = 2
    world = created(ms)
    plan = sync(ms, world["pods"], [], world["pod_groups"], now=0.0, gang=VolcanoApi())
    assert plan.update_pod_groups == {}
    # A change of template rolls the ServingGroups one at a time: the one rolled first loses its
    # PodGroup with its Pods (as Kthena's deleteServingGroup), the other's follows the new
    # template at once.
    changed = ms_of([role(replicas=3, entryTemplate=requesting({"cpu": "2"}))])
    changed.spec.replicas = 2
    plan = sync(changed, world["pods"], [], world["pod_groups"], now=0.0, gang=VolcanoApi())
    assert plan.delete_pod_groups == ["llm-1"]
    assert list(plan.update_pod_groups) == ["llm-0"]
    patch = plan.update_pod_groups["llm-0"]["spec"]
    assert patch["minMember"] == 3
    assert patch["minResources"] == {"cpu": "6"}


def test_sync_leaves_pod_groups_alone_for_another_scheduler() -> None:
    ms = ms_of([role(replicas=2)])
    world = created(ms)
    other = ms_of([role(replicas=3)])
    other.spec.scheduler_name = "default-scheduler"
    plan = sync(other, world["pods"], [], world["pod_groups"], now=0.0, gang=VolcanoApi())
    assert plan.update_pod_groups == {}
    assert all(w.pod_group is None for w in plan.creates)
    assert plan.delete_pod_groups == []


def test_sync_deletes_the_pod_group_of_a_removed_serving_group() -> None:
    ms = ms_of([role()])
    ms.spec.replicas = 2
    world = created(ms)
    ms.spec.replicas = 1
    plan = sync(ms, world["pods"], [], world["pod_groups"], now=0.0, gang=VolcanoApi())
    assert plan.delete_pod_groups == ["llm-1"]


@pytest.mark.parametrize(
    "requests",
    [
        "4",  # not a map
        {"cpu": ["1"]},  # not a quantity
        {"cpu": {"a": 1}},
        {"cpu": "1e999999999"},  # a quantity too big to work out (minutes, gigabytes)
        {"cpu": "9" * 5000},
    ],
)
def test_min_resources_skips_requests_no_pod_could_carry(requests: Any) -> None:
    roles = [
        role(
            entryTemplate={
                "spec": {"containers": [container("c", resources={"requests": requests})]}
            }
        )
    ]
    spec = pod_group_spec(ms_of(roles), VolcanoApi())
    assert spec["minResources"] == {}


def test_min_resources_does_not_add_once_per_worker() -> None:
    """2**31 - 1 workers (the CRD allows it): one addition, not two billion."""
    workers = 2**31 - 1
    roles = [
        role(
            entryTemplate=requesting({"cpu": "1"}),
            workerReplicas=workers,
            workerTemplate=requesting({"cpu": "500m"}),
        )
    ]
    spec = pod_group_spec(ms_of(roles), VolcanoApi())
    assert spec["minResources"] == {"cpu": f"{1000 + 500 * workers}m"}
