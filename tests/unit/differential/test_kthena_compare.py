"""The differential run's comparison (the run itself needs Kthena's binary and a control plane:
tests/differential/kthena.py)."""

from __future__ import annotations

import copy
from typing import Any

from tests.differential.kthena import (
    Case,
    compare,
    compare_replaced,
    compare_status,
    normalized,
    replaced,
    taken_over,
    victim,
)


def pod(namespace: str, uid: str = "u1", **spec: Any) -> dict[str, Any]:
    return {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {
            "name": "llm-0-prefill-0-0",
            "namespace": namespace,
            "uid": uid,
            "resourceVersion": "17",
            "creationTimestamp": "2026-12-01T00:00:00Z",
            "managedFields": [{"manager": "x"}],
            "labels": {"modelserving.volcano.sh/name": "llm"},
            "ownerReferences": [{"kind": "ModelServing", "name": "llm", "uid": "ms-" + uid}],
        },
        "spec": {
            "nodeName": "node-3",
            "subdomain": "llm-0-prefill-0",
            "containers": [
                {
                    "name": "c",
                    "env": [{"name": "ENTRY_ADDRESS", "value": f"llm-0-prefill-0.{namespace}"}],
                }
            ],
            **spec,
        },
        "status": {"phase": "Running"},
    }


def test_what_the_server_and_the_scheduler_set_is_left_out_and_the_namespace_replaced() -> None:
    got = normalized("Pod", pod("kthena-1"), "kthena-1")
    assert got["metadata"] == {
        "name": "llm-0-prefill-0-0",
        "namespace": "NAMESPACE",
        "labels": {"modelserving.volcano.sh/name": "llm"},
        "ownerReferences": [{"kind": "ModelServing", "name": "llm"}],
    }
    assert "status" not in got and "nodeName" not in got["spec"]
    assert got["spec"]["containers"][0]["env"][0]["value"] == "llm-0-prefill-0.NAMESPACE"


def test_same_objects_in_two_namespaces_compare_equal() -> None:
    theirs = {("Pod", "llm-0-prefill-0-0"): pod("kthena-1", uid="a")}
    ours = {("Pod", "llm-0-prefill-0-0"): pod("ours-1", uid="b")}
    assert compare(theirs, "kthena-1", ours, "ours-1") == []


def test_a_field_of_one_side_only_is_a_difference() -> None:
    theirs = {("Pod", "p"): pod("kthena-1")}
    ours = {("Pod", "p"): pod("ours-1", hostname="p")}
    assert compare(theirs, "kthena-1", ours, "ours-1") == [
        'Pod p: add {"path": "/spec/hostname", "value": "p"}'
    ]


def test_objects_of_one_side_only_are_named() -> None:
    theirs = {("Service", "a"): {"metadata": {"name": "a"}}}
    ours = {("Service", "b"): {"metadata": {"name": "b"}}}
    assert compare(theirs, "k", ours, "o") == [
        "Service a: made by Kthena only",
        "Service b: made by ours only",
    ]


def test_a_service_keeps_headless_but_not_allocated_cluster_ips() -> None:
    headless = {"metadata": {"name": "s"}, "spec": {"clusterIP": "None", "clusterIPs": ["None"]}}
    allocated = {"metadata": {"name": "s"}, "spec": {"clusterIP": "10.0.0.7"}}
    assert normalized("Service", headless, "n")["spec"]["clusterIP"] == "None"
    assert "clusterIP" not in normalized("Service", allocated, "n")["spec"]


def test_a_takeover_must_keep_every_object_as_it_was() -> None:
    before = {("Pod", "p"): pod("kthena-1", uid="a"), ("Pod", "q"): pod("kthena-1", uid="q")}
    after = copy.deepcopy(before)
    after[("Pod", "p")]["status"] = {"phase": "Succeeded"}  # status is not ours to keep
    after[("Pod", "p")]["metadata"]["resourceVersion"] = "99"
    assert taken_over(before, after, "kthena-1") == []
    after[("Pod", "p")]["metadata"]["labels"]["extra"] = "x"
    after[("Pod", "q")]["metadata"]["uid"] = "q2"
    after[("Pod", "r")] = pod("kthena-1", uid="r")
    assert taken_over(before, after, "kthena-1") == [
        'takeover: Pod p: add {"path": "/metadata/labels/extra", "value": "x"}',
        "takeover: Pod q re-created",
        "takeover: Pod r made by ours",
    ]
    del after[("Pod", "p")]
    assert "takeover: Pod p deleted" in taken_over(before, after, "kthena-1")


def test_status_compares_fields_and_the_conditions_kthena_reports() -> None:
    theirs: dict[str, Any] = {
        "replicas": 2,
        "conditions": [
            {"type": "Progressing", "status": "False", "reason": "GroupProgressing"},
            {"type": "Available", "status": "True", "message": "a", "lastTransitionTime": "t1"},
        ],
    }
    ours: dict[str, Any] = {
        "replicas": 2,
        "conditions": [
            {"type": "Available", "status": "True", "message": "b", "lastTransitionTime": "t2"},
            {"type": "Progressing", "status": "False", "reason": "NotProgressing"},
            {"type": "PluginsReady", "status": "True"},
        ],
    }
    assert compare_status(theirs, "k", ours, "o") == []
    ours["availableReplicas"] = 2
    ours["conditions"][0]["status"] = "False"
    del ours["conditions"][1]
    assert compare_status(theirs, "k", ours, "o") == [
        'ModelServing status: add {"path": "/availableReplicas", "value": 2}',
        "ModelServing condition Progressing: Kthena False, ours absent",
        "ModelServing condition Available: Kthena True, ours False",
    ]


def test_only_whole_occurrences_of_the_namespace_are_replaced() -> None:
    obj = {"metadata": {"name": "ns-a", "labels": {"x": "a.ns", "y": "ns2", "z": "https://ns/b"}}}
    assert normalized("Service", obj, "ns")["metadata"] == {
        "name": "ns-a",
        "labels": {"x": "a.NAMESPACE", "y": "ns2", "z": "https://NAMESPACE/b"},
    }


def test_the_token_volumes_random_name_is_left_out() -> None:
    a = pod("k", volumes=[{"name": "kube-api-access-bp274"}])
    b = pod("k", volumes=[{"name": "kube-api-access-2lfwb"}])
    assert normalized("Pod", a, "k") == normalized("Pod", b, "k")
    assert normalized("Pod", a, "k")["spec"]["volumes"] == [{"name": "kube-api-access-RANDOM"}]


def test_an_object_under_the_same_name_with_another_uid_counts_as_re_created() -> None:
    before = {("Pod", "a"): pod("n", uid="1"), ("Pod", "b"): pod("n", uid="2")}
    after = {
        ("Pod", "a"): pod("n", uid="1"),
        ("Pod", "b"): pod("n", uid="3"),
        ("Pod", "c"): pod("n", uid="4"),
    }
    assert replaced(before, after) == {("Pod", "b")}


def test_re_creations_of_one_side_only_are_named() -> None:
    theirs = ({("Pod", "a"): pod("k", uid="1")}, {("Pod", "a"): pod("k", uid="2")})
    ours = (
        {("Pod", "a"): pod("o", uid="5"), ("Pod", "b"): pod("o", uid="6")},
        {("Pod", "a"): pod("o", uid="5"), ("Pod", "b"): pod("o", uid="7")},
    )
    assert compare_replaced(theirs, ours) == [
        "Pod a: re-created by Kthena only",
        "Pod b: re-created by ours only",
    ]
    assert compare_replaced(theirs, theirs) == []


def test_the_pod_deleted_is_the_last_of_the_first_serving_group() -> None:
    case = Case("m.yaml", {"metadata": {"name": "llm"}}, 1)
    pods = ["llm-1-a-0-0", "llm-0-b-0-1", "llm-0-a-0-0", "llm-0-b-0-0", "llm-10-a-0-0"]
    assert victim(case, pods) == "llm-0-b-0-1"
    assert victim(case, ["llm-1-a-0-0"]) is None
