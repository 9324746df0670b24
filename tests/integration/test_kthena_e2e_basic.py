"""Kthena's own end-to-end tests of its ModelServing controller, ported to ours.

Thirteen tests of ``test/e2e/controller-manager/model_serving_test.go`` (Kthena at 3cc0572),
in its order, from ``TestModelServingLifecycle`` to the rolling update to a bad image (each
test's docstring names the one it ports): create, update and delete; scaling ServingGroups and
roles; recovery of a deleted Pod (``RoleRecreate`` and ``ServingGroupRecreate``) and of a
deleted headless Service; headless Services going with their ServingGroup; duplicate-IP
``hostAliases``; ``maxUnavailable`` during a rolling update, to a good image and to one whose
Pods never become Ready; and the role status events (whose equivalent here is the status, see
that test). Each test builds its ModelServing as Kthena's helpers (``createBasicModelServing``,
``createRole``) do, in a namespace of its own, and checks what Kthena's test checks; the waits
are Kthena's, with shorter timeouts (kwok's Pods are Ready within a second).
"""

from __future__ import annotations

import copy
import re
import threading
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import Any

import pytest
from kubernetes import watch
from kubernetes.client.exceptions import ApiException

from modelserving.api import labels
from modelserving.controller.manager import Controller
from tests.integration.conftest import Cluster, wait_for
from tests.integration.controller_env import Objects, install_crd, running_controller
from tests.integration.kthena_e2e import (
    NGINX_ALPINE,
    basic_model_serving,
    kthena_role,
)

BAD_IMAGE = "nginx:nonexistent-image-99999"
NOWHERE = {"modelserving.test/node": "none"}
"""A nodeSelector no Node has: kwok makes every Pod it is given Running and Ready whatever its
image, so a Pod stands for one whose image cannot be pulled by never being scheduled."""


@pytest.fixture(scope="module")
def controller(cluster: Cluster) -> Iterator[Controller]:
    install_crd(cluster)
    with running_controller(cluster) as ctl:
        yield ctl


@pytest.fixture
def objs(cluster: Cluster, namespace: str, controller: Controller) -> Objects:
    return Objects(cluster, namespace)


# --- Kthena's waits and reads -------------------------------------------------------------------


def is_ready_status(ms: dict[str, Any]) -> bool:
    """``utils.WaitForModelServingReady``'s test: the generation observed, and as many
    ServingGroups, all available, as ``spec.replicas`` asks."""
    status = ms.get("status") or {}
    want = ms["spec"].get("replicas", 1)
    return bool(
        status.get("observedGeneration") == ms["metadata"]["generation"]
        and status.get("replicas", 0) == want
        and status.get("availableReplicas", 0) == want
    )


def wait_ready(objs: Objects, name: str, timeout: float = 60) -> dict[str, Any]:
    def ready() -> dict[str, Any] | None:
        ms = objs.get(name)
        return ms if is_ready_status(ms) else None

    result: dict[str, Any] = wait_for(f"ModelServing {name} ready", ready, timeout)
    return result


def create_and_wait(objs: Objects, body: dict[str, Any]) -> dict[str, Any]:
    """``createAndWaitForModelServing`` (the namespace goes with the test: no cleanup needed)."""
    objs.create(body)
    return wait_ready(objs, body["metadata"]["name"])


def update(objs: Objects, name: str, mutate: Callable[[dict[str, Any]], None]) -> dict[str, Any]:
    """An Update of the whole object, as Kthena's tests make it, again on a conflict with a
    status write (``updateModelServingWithRetry``)."""
    for _ in range(10):
        ms = objs.get(name)
        mutate(ms)
        try:
            got: Any = objs.custom.replace_namespaced_custom_object(
                labels.GROUP, labels.VERSION, objs.namespace, labels.PLURAL, name, ms
            )
            return dict(got)
        except ApiException as error:
            if error.status != 409:
                raise
    raise AssertionError(f"could not update {name}: conflicts")


def all_pods(objs: Objects, name: str) -> list[dict[str, Any]]:
    """Every Pod of the ModelServing, terminating ones included."""
    got = objs.core.list_namespaced_pod(
        objs.namespace, label_selector=f"{labels.NAME_LABEL}={name}"
    )
    items: list[dict[str, Any]] = objs.cluster.api_client.sanitize_for_serialization(got)["items"]
    return items


def running(pod: dict[str, Any]) -> bool:
    return (pod.get("status") or {}).get("phase") == "Running" and not pod["metadata"].get(
        "deletionTimestamp"
    )


def is_pod_ready(pod: dict[str, Any]) -> bool:
    """``utils.IsPodReady``: Running with the condition Ready True."""
    status = pod.get("status") or {}
    return status.get("phase") == "Running" and any(
        c["type"] == "Ready" and c["status"] == "True" for c in status.get("conditions") or []
    )


def wait_running_count(objs: Objects, name: str, count: int, timeout: float = 60) -> None:
    """``waitForRunningPodCount``: Running Pods that are not terminating."""
    wait_for(
        f"{count} running Pods of {name}",
        lambda: sum(map(running, all_pods(objs, name))) == count,
        timeout,
    )


def headless_services(objs: Objects, name: str, uid: str) -> list[dict[str, Any]]:
    """The ModelServing's Services owned by ``uid`` whose clusterIP is None."""
    got = objs.core.list_namespaced_service(
        objs.namespace, label_selector=f"{labels.NAME_LABEL}={name}"
    )
    items: list[dict[str, Any]] = objs.cluster.api_client.sanitize_for_serialization(got)["items"]
    return [
        s
        for s in items
        if s["spec"].get("clusterIP") == "None"
        and any(ref["uid"] == uid for ref in s["metadata"].get("ownerReferences") or [])
    ]


def group_ordinal(group_name: str) -> tuple[str, int]:
    """``GetParentNameAndOrdinal``: ``<parent>-<ordinal>``, or ``("", -1)``."""
    match = re.fullmatch(r"(.*)-([0-9]+)", group_name)
    return (match[1], int(match[2])) if match else ("", -1)


def running_group_ordinals(objs: Objects, name: str) -> dict[int, str]:
    """``collectRunningServingGroupStates``: the ServingGroup ordinals of the Running Pods that
    carry a revision, with their group's name."""
    states: dict[int, str] = {}
    for pod in all_pods(objs, name):
        meta = pod["metadata"]
        group = meta.get("labels", {}).get(labels.GROUP_NAME_LABEL, "")
        parent, ordinal = group_ordinal(group)
        if not running(pod) or parent != name or ordinal < 0:
            continue
        if meta["labels"].get(labels.REVISION_LABEL) and pod["spec"]["containers"]:
            states.setdefault(ordinal, group)
    return states


class StatusWatch:
    """Every version of one ModelServing that the API server's watch shows, from when it starts
    (the watch goroutine of Kthena's ``maxUnavailable`` tests)."""

    def __init__(self, objs: Objects, name: str) -> None:
        self.objs = objs
        self.name = name
        self.seen: list[dict[str, Any]] = []
        self.error: BaseException | None = None
        self._lock = threading.Lock()
        self._stop = threading.Event()
        listed: Any = objs.custom.list_namespaced_custom_object(
            labels.GROUP, labels.VERSION, objs.namespace, labels.PLURAL
        )
        self._version: str = listed["metadata"]["resourceVersion"]
        self._thread = threading.Thread(target=self._run, name=f"watch-{name}", daemon=True)
        self._thread.start()

    def _run(self) -> None:
        try:
            while not self._stop.is_set():
                stream = watch.Watch().stream(  # type: ignore[no-untyped-call]
                    self.objs.custom.list_namespaced_custom_object,
                    labels.GROUP,
                    labels.VERSION,
                    self.objs.namespace,
                    labels.PLURAL,
                    field_selector=f"metadata.name={self.name}",
                    resource_version=self._version,
                    timeout_seconds=1,
                )
                for event in stream:
                    obj = event["object"]
                    self._version = obj["metadata"]["resourceVersion"]
                    if event["type"] in ("ADDED", "MODIFIED"):
                        with self._lock:
                            self.seen.append(copy.deepcopy(obj))
        except BaseException as error:  # reported by stop()
            self.error = error

    def statuses(self) -> list[dict[str, Any]]:
        with self._lock:
            return [ms.get("status") or {} for ms in self.seen]

    def stop(self) -> list[dict[str, Any]]:
        self._stop.set()
        self._thread.join(10)
        assert self.error is None, f"the watch failed: {self.error!r}"
        return self.statuses()


@contextmanager
def status_watch(objs: Objects, name: str) -> Iterator[StatusWatch]:
    recorder = StatusWatch(objs, name)
    try:
        yield recorder
    finally:
        recorder.stop()


def unavailable(status: dict[str, Any]) -> int:
    return int(status.get("replicas", 0)) - int(status.get("availableReplicas", 0))


def set_entry_image(image: str) -> Callable[[dict[str, Any]], None]:
    def mutate(ms: dict[str, Any]) -> None:
        ms["spec"]["template"]["roles"][0]["entryTemplate"]["spec"]["containers"][0]["image"] = (
            image
        )

    return mutate


# --- the tests, in Kthena's order ---------------------------------------------------------------


def test_create_update_image_and_delete_as_kthena_does(objs: Objects) -> None:
    """Ports TestModelServingLifecycle."""
    name = "test-lifecycle"
    create_and_wait(objs, basic_model_serving(name, 1))
    pods = all_pods(objs, name)
    assert pods, "at least one Pod after creation"
    for pod in pods:
        assert pod["status"]["phase"] == "Running", pod["metadata"]["name"]

    update(objs, name, set_entry_image(NGINX_ALPINE))
    wait_ready(objs, name)

    def updated() -> bool:
        pods = [p for p in all_pods(objs, name) if not p["metadata"].get("deletionTimestamp")]
        return bool(pods) and all(
            p["status"].get("phase") == "Running"
            and any(
                c["name"] == "test-container" and c["image"] == NGINX_ALPINE
                for c in p["spec"]["containers"]
            )
            for p in pods
        )

    wait_for(f"every Pod running {NGINX_ALPINE}", updated)

    objs.delete(name)

    def gone() -> bool:
        try:
            objs.get(name)
        except ApiException as error:
            return bool(error.status == 404)
        return False

    wait_for("the ModelServing deleted", gone)
    # The garbage collector deletes them. When this module installed the CRD moments ago (run
    # alone), it learns of ModelServings only at its next discovery, up to 30 s later.
    wait_for("its Pods gone", lambda: all_pods(objs, name) == [], timeout=90)


def test_scaling_up_servinggroups_fills_ordinals_from_zero(objs: Objects) -> None:
    """Ports TestModelServingScaleUp."""
    name = "test-scale-up"
    initial = create_and_wait(objs, basic_model_serving(name, 1))
    assert initial["spec"]["replicas"] == 1

    def scale(ms: dict[str, Any]) -> None:
        ms["spec"]["replicas"] = 3

    assert update(objs, name, scale)["spec"]["replicas"] == 3
    final = wait_ready(objs, name)
    assert final["spec"]["replicas"] == 3
    ordinals = running_group_ordinals(objs, name)
    assert sorted(ordinals) == [0, 1, 2], ordinals


def test_scaling_down_servinggroups_leaves_one_running_and_available(objs: Objects) -> None:
    """Ports TestModelServingScaleDown."""
    name = "test-scale-down"
    initial = create_and_wait(objs, basic_model_serving(name, 3))
    assert initial["spec"]["replicas"] == 3

    def scale(ms: dict[str, Any]) -> None:
        ms["spec"]["replicas"] = 1

    assert update(objs, name, scale)["spec"]["replicas"] == 1
    wait_ready(objs, name)
    wait_running_count(objs, name, 1)

    def converged() -> bool:
        ms = objs.get(name)
        return bool(
            ms["spec"]["replicas"] == 1 and (ms.get("status") or {}).get("availableReplicas") == 1
        )

    wait_for("1 available ServingGroup", converged)


def test_scaling_up_a_role_adds_its_replicas(objs: Objects) -> None:
    """Ports TestModelServingRoleScaleUp."""
    name = "test-role-scale-up"
    create_and_wait(objs, basic_model_serving(name, 1, 1))

    def scale(ms: dict[str, Any]) -> None:
        ms["spec"]["template"]["roles"][0]["replicas"] = 3

    update(objs, name, scale)
    wait_ready(objs, name)
    wait_running_count(objs, name, 3)


def test_scaling_down_a_role_removes_its_replicas(objs: Objects) -> None:
    """Ports TestModelServingRoleScaleDown."""
    name = "test-role-scale-down"
    create_and_wait(objs, basic_model_serving(name, 1, 3))
    wait_running_count(objs, name, 3)

    def scale(ms: dict[str, Any]) -> None:
        ms["spec"]["template"]["roles"][0]["replicas"] = 1

    update(objs, name, scale)
    wait_ready(objs, name)
    wait_running_count(objs, name, 1)


def test_deleting_a_pod_recreates_its_whole_servinggroup_under_servinggroup_recreate(
    objs: Objects,
) -> None:
    """Ports TestModelServingServingGroupRecreate."""
    name = "test-sg-recreate"
    body = basic_model_serving(
        name, 1, 0, kthena_role("prefill", 1, 0), kthena_role("decode", 1, 0)
    )
    body["spec"]["recoveryPolicy"] = "ServingGroupRecreate"
    body["spec"]["rolloutStrategy"] = {"type": "ServingGroupRollingUpdate"}
    create_and_wait(objs, body)

    pods = all_pods(objs, name)
    assert len(pods) == 2, "1 prefill + 1 decode Pod"
    original = {p["metadata"]["uid"] for p in pods}
    group = pods[0]["metadata"]["labels"][labels.GROUP_NAME_LABEL]
    assert group
    objs.core.delete_namespaced_pod(pods[0]["metadata"]["name"], objs.namespace)

    def recreated() -> bool:
        pods = all_pods(objs, name)
        if len(pods) < 2:
            return False
        live = [p for p in pods if not p["metadata"].get("deletionTimestamp")]
        if any(p["metadata"]["labels"][labels.GROUP_NAME_LABEL] != group for p in live):
            return False  # Kthena's test waits on: the new Pods must be in the same group
        if any(p["metadata"]["uid"] in original for p in live):
            return False
        new_ready = [p for p in live if p["metadata"]["uid"] not in original and is_pod_ready(p)]
        return len(new_ready) >= 2

    wait_for("the whole ServingGroup recreated", recreated, timeout=90)


def test_scaling_down_deletes_the_headless_services_of_removed_servinggroups(
    objs: Objects,
) -> None:
    """Ports TestModelServingHeadlessServiceDeleteOnServingGroupDelete."""
    name = "test-svc-sg-delete"
    create_and_wait(objs, basic_model_serving(name, 3, 0, kthena_role("prefill", 1, 1)))
    uid = objs.get(name)["metadata"]["uid"]
    wait_for("3 headless Services", lambda: len(headless_services(objs, name, uid)) == 3, 30)

    def scale(ms: dict[str, Any]) -> None:
        ms["spec"]["replicas"] = 1

    update(objs, name, scale)
    wait_ready(objs, name)
    wait_for("1 headless Service", lambda: len(headless_services(objs, name, uid)) == 1)


def test_deleting_a_pod_recreates_it_at_its_ordinals_under_role_recreate(objs: Objects) -> None:
    """Ports TestModelServingPodRecovery."""
    name = "test-pod-recovery"
    body = basic_model_serving(name, 1)
    body["spec"]["recoveryPolicy"] = "RoleRecreate"
    body["spec"]["rolloutStrategy"] = {"type": "RoleRollingUpdate"}
    create_and_wait(objs, body)

    (pod, *_) = all_pods(objs, name)
    meta = pod["metadata"]
    group = meta["labels"][labels.GROUP_NAME_LABEL]
    role_id = meta["labels"][labels.ROLE_ID_LABEL]
    assert group and role_id
    objs.core.delete_namespaced_pod(meta["name"], objs.namespace)
    wait_ready(objs, name)

    def recovered() -> bool:
        return any(
            p["metadata"]["uid"] != meta["uid"]
            and not p["metadata"].get("deletionTimestamp")
            and is_pod_ready(p)
            and p["metadata"]["labels"][labels.GROUP_NAME_LABEL] == group
            and p["metadata"]["labels"][labels.ROLE_ID_LABEL] == role_id
            for p in all_pods(objs, name)
        )

    wait_for(f"a new ready Pod in {group}, role {role_id}", recovered)


def test_deleting_a_headless_service_recreates_it(objs: Objects) -> None:
    """Ports TestModelServingServiceRecovery."""
    name = "test-service-recovery"
    create_and_wait(objs, basic_model_serving(name, 1, 0, kthena_role("prefill", 1, 1)))
    uid = objs.get(name)["metadata"]["uid"]
    (service,) = headless_services(objs, name, uid)
    objs.core.delete_namespaced_service(service["metadata"]["name"], objs.namespace)

    wait_for(
        "a new headless Service",
        lambda: any(
            s["metadata"]["uid"] != service["metadata"]["uid"]
            for s in headless_services(objs, name, uid)
        ),
    )
    wait_ready(objs, name)


def test_host_aliases_with_a_repeated_ip_reach_the_pods(objs: Objects) -> None:
    """Ports TestModelServingWithDuplicateHostAliases."""
    name = "test-duplicate-hostaliases"
    body = basic_model_serving(name, 1)
    body["spec"]["template"]["roles"][0]["entryTemplate"]["spec"]["hostAliases"] = [
        {"ip": "10.1.2.3", "hostnames": ["test.com", "example.com"]},
        {"ip": "10.1.2.3", "hostnames": ["test.org"]},
    ]
    create_and_wait(objs, body)

    def has_aliases(pod: dict[str, Any]) -> bool:
        aliases = pod["spec"].get("hostAliases") or []
        ips = [a["ip"] for a in aliases]
        names = {h for a in aliases for h in a.get("hostnames") or []}
        return len(ips) > len(set(ips)) and {"test.com", "example.com", "test.org"} <= names

    wait_for(
        "a running Pod with the duplicate-IP hostAliases",
        lambda: any(
            p["status"].get("phase") == "Running" and has_aliases(p) for p in all_pods(objs, name)
        ),
    )


def test_a_rolling_update_keeps_within_max_unavailable(objs: Objects) -> None:
    """Ports TestModelServingRollingUpdateMaxUnavailable: 4 ServingGroups of 4 role replicas,
    ``maxUnavailable: 2``; every status the watch shows has at most 2 unavailable. Kthena waits
    only for the ModelServing to be ready, which a status written before the update began can
    already show; this also waits for every Pod at the new image, so the watch covers the
    whole update."""
    name = "test-rolling-update-maxunavailable"
    initial = create_and_wait(objs, basic_model_serving(name, 4, 4))
    assert initial["spec"]["replicas"] == 4

    with status_watch(objs, name) as recorder:
        update(objs, name, set_entry_image(NGINX_ALPINE))

        def rolled() -> bool:
            pods = [p for p in all_pods(objs, name) if not p["metadata"].get("deletionTimestamp")]
            return len(pods) == 16 and all(
                p["spec"]["containers"][0]["image"] == NGINX_ALPINE for p in pods
            )

        wait_for("every Pod at the new image", rolled, timeout=90)
        final = wait_ready(objs, name)
    statuses = recorder.stop()

    assert final["spec"]["replicas"] == 4
    image = final["spec"]["template"]["roles"][0]["entryTemplate"]["spec"]["containers"][0]
    assert image["image"] == NGINX_ALPINE
    observed = [unavailable(s) for s in statuses]
    assert max(observed) <= 2, observed
    assert max(observed) > 0, "the watch saw the update replace ServingGroups"


def test_role_status_transitions_show_as_progressing_then_available(objs: Objects) -> None:
    """Ports TestModelServingRoleStatusEvents. Kthena posts the events ``RoleCreating`` and
    ``RoleRunning`` on the ModelServing as a role replica is created and becomes Running; we
    post neither, on purpose (docs/moving-from-kthena.md, "What we add": Kthena's own events are
    not posted). The same transitions show in our status, which this checks instead: a status
    with ``Progressing`` True while the role's Pods are created, then ``Available`` True once
    they run, in that order, on the ModelServing's own watch."""
    name = "test-role-status-events"
    with status_watch(objs, name) as recorder:
        create_and_wait(objs, basic_model_serving(name, 1))

        def conditions() -> list[dict[str, str]]:
            found = []
            for status in recorder.statuses():
                found.append({c["type"]: c["status"] for c in status.get("conditions") or []})
            return found

        def creating_then_running() -> bool:
            seen = conditions()
            creating = [i for i, c in enumerate(seen) if c.get("Progressing") == "True"]
            running = [i for i, c in enumerate(seen) if c.get("Available") == "True"]
            return bool(creating and running and creating[0] < running[-1])

        wait_for("Progressing True, then Available True", creating_then_running)


def test_a_rolling_update_to_pods_that_never_get_ready_stops_at_max_unavailable(
    objs: Objects,
) -> None:
    """Ports TestModelServingRollingUpdateMaxUnavailableWithBadImage: 6 ServingGroups,
    ``maxUnavailable: 2``, updated to an image that cannot be pulled; at no time are more than
    2 unavailable. On kwok every scheduled Pod becomes Running and Ready whatever its image
    (its default stages, ``devcluster``), so the bad template also carries a nodeSelector no
    Node has: its Pods stay Pending and never Ready, as a bad image's do. Kthena watches for a
    fixed 60 s; this waits until the update has used its budget (2 unavailable), then watches
    the stalled update for 7 s more (past the 5 s after which a waiting update looks again)."""
    name = "test-rolling-update-bad-image"
    objs.create(basic_model_serving(name, 6))
    initial = wait_ready(objs, name)
    assert initial["spec"]["replicas"] == 6
    assert initial["status"]["availableReplicas"] == 6

    def bad(ms: dict[str, Any]) -> None:
        set_entry_image(BAD_IMAGE)(ms)
        ms["spec"]["template"]["roles"][0]["entryTemplate"]["spec"]["nodeSelector"] = NOWHERE

    with status_watch(objs, name) as recorder:
        update(objs, name, bad)
        wait_for(
            "the update to take 2 ServingGroups down",
            lambda: any(unavailable(s) == 2 for s in recorder.statuses()),
        )
        time.sleep(7)  # nothing to wait for: the update must not go on
    statuses = recorder.stop()

    observed = [unavailable(s) for s in statuses]
    for index, count in enumerate(observed):
        assert count <= 2, f"observation {index}: {count} unavailable, more than 2: {observed}"
    current = objs.get(name)["status"]
    assert unavailable(current) <= 2, current
    assert current["availableReplicas"] == 4, current
    pending = [p for p in all_pods(objs, name) if p["spec"].get("nodeSelector") == NOWHERE]
    assert len(pending) == 2 and not any(map(is_pod_ready, pending)), pending
