"""Pods, Services and PodGroups with Kthena's names, labels, env and owner references."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

from modelserving.api import ModelServing, parse_model_serving
from modelserving.api.modelserving import GangPolicy, Role
from modelserving.workload import label_selector, plan, revision
from modelserving.workload.plan import DesiredPod, group_names, plan_group
from modelserving.workload.revision import role_template_hash
from tests.unit.conftest import ManifestFactory, container, manifest, role

MakeMs = Callable[..., ModelServing]


def env_of(pod: dict[str, Any], kind: str = "containers") -> dict[str, str]:
    return {e["name"]: e.get("value", "") for e in pod["spec"][kind][0]["env"]}


def all_pods(ms: ModelServing, gang: bool = False) -> list[DesiredPod]:
    return [p for g in plan(ms, gang=gang) for p in g.pods()]


def test_single_role_without_workers(make_ms: MakeMs) -> None:
    ms = make_ms(name="sample", roles=[role("prefill")])
    groups = plan(ms)
    assert [g.name for g in groups] == ["sample-0"]
    (replica,) = groups[0].roles
    assert replica.service is None
    assert replica.workers == ()
    pod = replica.entry.pod
    assert pod["metadata"]["name"] == "sample-0-prefill-0-0"
    assert pod["metadata"]["namespace"] == "team-a"
    assert pod["metadata"]["labels"] == {
        "modelserving.volcano.sh/name": "sample",
        "modelserving.volcano.sh/group-name": "sample-0",
        "modelserving.volcano.sh/role": "prefill",
        "modelserving.volcano.sh/role-id": "prefill-0",
        "modelserving.volcano.sh/revision": revision(ms),
        "modelserving.volcano.sh/role-template-hash": role_template_hash(ms.spec.template.roles[0]),
        "modelserving.volcano.sh/entry": "true",
    }
    assert env_of(pod) == {
        "GROUP_SIZE": "1",
        "ENTRY_ADDRESS": "sample-0-prefill-0-0.team-a",
        "WORKER_INDEX": "0",
    }
    assert pod["spec"]["schedulerName"] == "volcano"
    assert pod["metadata"]["ownerReferences"] == [
        {
            "apiVersion": "workload.serving.volcano.sh/v1alpha1",
            "kind": "ModelServing",
            "name": "sample",
            "uid": "uid-1",
            "controller": True,
            "blockOwnerDeletion": True,
        }
    ]


def test_prefill_decode_two_roles(make_ms: MakeMs) -> None:
    ms = make_ms(name="pd", replicas=2, roles=[role("prefill", replicas=2), role("decode")])
    names = [p.name for p in all_pods(ms)]
    assert names == [
        "pd-0-prefill-0-0",
        "pd-0-prefill-1-0",
        "pd-0-decode-0-0",
        "pd-1-prefill-0-0",
        "pd-1-prefill-1-0",
        "pd-1-decode-0-0",
    ]
    pods = {p.name: p for p in all_pods(ms)}
    assert (
        pods["pd-1-prefill-1-0"].pod["metadata"]["labels"]["modelserving.volcano.sh/role-id"]
        == "prefill-1"
    )
    assert pods["pd-1-decode-0-0"].place.serving_group == "pd-1"


def test_multi_node_entry_and_workers(make_ms: MakeMs) -> None:
    ms = make_ms(name="vllm-sample", roles=[role("prefill", replicas=2, workers=2)])
    replica = plan(ms)[0].roles[1]
    assert replica.entry.name == "vllm-sample-0-prefill-1-0"
    assert [w.name for w in replica.workers] == [
        "vllm-sample-0-prefill-1-1",
        "vllm-sample-0-prefill-1-2",
    ]
    worker = replica.workers[0].pod
    assert "modelserving.volcano.sh/entry" not in worker["metadata"]["labels"]
    assert env_of(worker) == {
        "GROUP_SIZE": "3",
        "ENTRY_ADDRESS": "vllm-sample-0-prefill-1-0.team-a",
        "WORKER_INDEX": "1",
    }
    assert env_of(replica.workers[1].pod)["WORKER_INDEX"] == "2"
    assert worker["spec"]["containers"][0]["name"] == "worker"
    assert replica.entry.pod["spec"]["containers"][0]["name"] == "entry"


def test_headless_service_per_role_replica_with_workers(make_ms: MakeMs) -> None:
    ms = make_ms(name="m", roles=[role("leader", workers=1)])
    service = plan(ms)[0].roles[0].service
    assert service == {
        "apiVersion": "v1",
        "kind": "Service",
        "metadata": {
            "name": "m-0-leader-0-0",
            "namespace": "team-a",
            "labels": {
                "modelserving.volcano.sh/name": "m",
                "modelserving.volcano.sh/group-name": "m-0",
                "modelserving.volcano.sh/role": "leader",
                "modelserving.volcano.sh/role-id": "leader-0",
            },
            "ownerReferences": service["metadata"]["ownerReferences"] if service else None,
        },
        "spec": {
            "clusterIP": "None",
            "selector": {
                "modelserving.volcano.sh/group-name": "m-0",
                "modelserving.volcano.sh/role": "leader",
                "modelserving.volcano.sh/role-id": "leader-0",
                "modelserving.volcano.sh/entry": "true",
            },
            "publishNotReadyAddresses": True,
        },
    }
    assert service["metadata"]["ownerReferences"][0]["controller"] is True


def test_worker_template_with_zero_workers_still_gets_service(make_ms: MakeMs) -> None:
    r = role("leader")
    r["workerTemplate"] = {"spec": {"containers": [container("worker")]}}
    ms = make_ms(roles=[r])
    assert plan(ms)[0].roles[0].service is not None


def test_injected_env_replaces_same_names_and_goes_last(make_ms: MakeMs) -> None:
    r = role("server")
    r["entryTemplate"]["spec"]["containers"][0]["env"] = [
        {"name": "WORKER_INDEX", "value": "99"},
        {"name": "KEEP", "value": "1"},
    ]
    r["entryTemplate"]["spec"]["initContainers"] = [container("init")]
    pod = all_pods(make_ms(roles=[r]))[0].pod
    names = [e["name"] for e in pod["spec"]["containers"][0]["env"]]
    assert names == ["KEEP", "GROUP_SIZE", "ENTRY_ADDRESS", "WORKER_INDEX"]
    assert env_of(pod)["WORKER_INDEX"] == "0"
    assert env_of(pod, "initContainers")["GROUP_SIZE"] == "1"


def test_template_metadata_is_merged_after_controller_labels(make_ms: MakeMs) -> None:
    r = role("server")
    r["entryTemplate"]["metadata"] = {
        "labels": {"app": "llm"},
        "annotations": {"prometheus.io/scrape": "true"},
    }
    pod = all_pods(make_ms(roles=[r]))[0].pod
    assert pod["metadata"]["labels"]["app"] == "llm"
    assert pod["metadata"]["labels"]["modelserving.volcano.sh/role"] == "server"
    assert pod["metadata"]["annotations"] == {"prometheus.io/scrape": "true"}


def test_scheduler_name_overrides_template(make_ms: MakeMs) -> None:
    r = role("server")
    r["entryTemplate"]["spec"]["schedulerName"] = "other"
    pod = all_pods(make_ms(roles=[r], schedulerName="default-scheduler"))[0].pod
    assert pod["spec"]["schedulerName"] == "default-scheduler"


def test_pods_do_not_share_state_with_the_template(make_ms: MakeMs) -> None:
    ms = make_ms(roles=[role("server", replicas=2)])
    first, second = all_pods(ms)
    first.pod["spec"]["containers"][0]["image"] = "changed"
    assert second.pod["spec"]["containers"][0]["image"] == "nginx:1.28.0"
    assert ms.spec.template.roles[0].entry_template.spec["containers"][0]["image"] == "nginx:1.28.0"
    assert "env" not in ms.spec.template.roles[0].entry_template.spec["containers"][0]


def test_pods_of_one_template_share_what_they_take_from_it_unchanged(make_ms: MakeMs) -> None:
    """Each Pod has its own spec map, container lists and container maps (its env, its
    scheduler name); what it takes from the template unchanged (a container's securityContext,
    ports, args; the volumes) is one copy of the template's, shared by every Pod made from it,
    never the template's own objects. A template changed in place is copied again."""
    r = role("server", replicas=2)
    r["entryTemplate"]["spec"]["containers"][0]["securityContext"] = {"runAsNonRoot": True}
    r["entryTemplate"]["spec"]["containers"][0]["ports"] = [{"containerPort": 80}]
    r["entryTemplate"]["spec"]["volumes"] = [{"name": "shm", "emptyDir": {}}]
    ms = make_ms(roles=[r])
    first, second = (p.pod for p in all_pods(ms))
    a, b = first["spec"]["containers"][0], second["spec"]["containers"][0]
    assert first["spec"] is not second["spec"] and a is not b
    assert first["spec"]["containers"] is not second["spec"]["containers"]
    assert a["env"] is not b["env"] and a["env"] != b["env"]  # the entry address differs
    assert a["securityContext"] is b["securityContext"] and a["ports"] is b["ports"]
    assert first["spec"]["volumes"] is second["spec"]["volumes"]
    template = ms.spec.template.roles[0].entry_template.spec
    assert a["securityContext"] is not template["containers"][0]["securityContext"]
    assert a["securityContext"] == template["containers"][0]["securityContext"]
    template["containers"][0]["securityContext"] = {"runAsNonRoot": False}  # changed in place
    again = all_pods(ms)[0].pod["spec"]["containers"][0]
    assert again["securityContext"] == {"runAsNonRoot": False}
    assert a["securityContext"] == {"runAsNonRoot": True}  # the Pods made before keep theirs


def test_zero_replicas_plan_nothing(make_ms: MakeMs) -> None:
    assert plan(make_ms(replicas=0)) == []
    assert all_pods(make_ms(roles=[role("server", replicas=0)])) == []


def test_missing_namespace_defaults(make_ms: MakeMs) -> None:
    ms = make_ms()
    ms.metadata.namespace = None
    assert all_pods(ms)[0].pod["metadata"]["namespace"] == "default"


def test_label_selector_picks_one_pod_per_group(make_ms: MakeMs) -> None:
    ms = make_ms(name="pd", roles=[role("prefill"), role("decode")])
    # as Kthena's controller wrote it for such a ModelServing: the terms sorted as text
    assert label_selector(ms) == (
        "modelserving.volcano.sh/entry=true,modelserving.volcano.sh/name=pd,"
        "modelserving.volcano.sh/role-id=prefill-0,modelserving.volcano.sh/role=prefill"
    )


def test_gang_scheduling_pod_group_and_annotations(make_manifest: ManifestFactory) -> None:
    doc = make_manifest(
        name="g", roles=[role("prefill", replicas=3, workers=1), role("decode", replicas=2)]
    )
    doc["metadata"]["annotations"] = {"scheduling.volcano.sh/queue-name": "gpu"}
    doc["spec"]["template"]["gangPolicy"] = {"minRoleReplicas": {"prefill": 2}}
    ms = parse_model_serving(doc)
    groups = plan(ms, gang=True)
    pod_group = groups[0].pod_group
    assert pod_group is not None
    assert pod_group["metadata"]["name"] == "g-0"
    # prefill: (1 + 1 worker) x min(2, 3) = 4; decode: 1 x 2 = 2
    assert pod_group["spec"]["minMember"] == 6
    assert "minTaskMember" not in pod_group["spec"]
    assert pod_group["spec"]["minResources"] == {}
    assert pod_group["spec"]["queue"] == "gpu"
    assert "blockOwnerDeletion" not in pod_group["metadata"]["ownerReferences"][0]
    worker = groups[0].roles[0].workers[0].pod
    assert worker["metadata"]["annotations"] == {
        "scheduling.k8s.io/group-name": "g-0",
        "volcano.sh/task-spec": "prefill-0",
    }


def test_pod_groups_without_gang_policy_but_not_without_volcano(make_ms: MakeMs) -> None:
    ms = make_ms()  # Kthena's default schedulerName is volcano; no gangPolicy
    assert plan(ms, gang=True)[0].pod_group is not None
    assert (
        "scheduling.k8s.io/group-name" in all_pods(ms, gang=True)[0].pod["metadata"]["annotations"]
    )
    assert plan(ms, gang=False)[0].pod_group is None
    doc_ms = make_ms(schedulerName="default-scheduler")
    doc_ms.spec.template.gang_policy = GangPolicy()
    assert plan(doc_ms, gang=True)[0].pod_group is None
    assert "annotations" not in all_pods(doc_ms, gang=True)[0].pod["metadata"]


@given(
    shapes=st.lists(
        st.tuples(st.integers(0, 3), st.integers(0, 3), st.booleans()), min_size=1, max_size=3
    ),
    index=st.integers(0, 12),
)
def test_group_names_are_the_names_of_the_plan(
    shapes: list[tuple[int, int, bool]], index: int
) -> None:
    roles = []
    for n, (replicas, workers, worker_template) in enumerate(shapes):
        r = role(f"r{n}", replicas=replicas, workers=workers)
        if worker_template and not workers:
            r["workerTemplate"] = {"spec": {"containers": [container("worker")]}}
        roles.append(r)
    doc = manifest(roles=roles, replicas=index + 1)
    ms = parse_model_serving(doc)
    group = plan_group(ms, index)
    names = group_names(ms, index)
    assert names.pods == {d.name for d in group.pods()}
    assert names.services == {r.service["metadata"]["name"] for r in group.roles if r.service}


def test_group_names_refuse_workers_without_a_template_as_the_plan_does() -> None:
    # a revision from the history is not validated as a whole ModelServing is
    ms = parse_model_serving(manifest(roles=[role("prefill", workers=1)]))
    bare = role("prefill", workers=1)
    del bare["workerTemplate"]
    template = ms.spec.template.model_copy(update={"roles": [Role.model_validate(bare)]})
    old = ms.model_copy(update={"spec": ms.spec.model_copy(update={"template": template})})
    with pytest.raises(ValueError, match="has workers but no workerTemplate"):
        plan_group(old, 0)
    with pytest.raises(ValueError, match="has workers but no workerTemplate"):
        group_names(old, 0)
