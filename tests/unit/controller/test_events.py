"""EventRecorder against a fake CoreV1Api: create, aggregation, cut messages, spam guard."""

from __future__ import annotations

import logging
import re
import threading
from typing import Any

import pytest
from kubernetes.client.exceptions import ApiException

from modelserving.controller.events import EventRecorder

T0 = 1_700_000_000.0  # 2023-11-14T22:13:20Z


class FakeCore:
    """Records create/patch calls; ``fail_create``/``fail_patch`` raise on the next calls."""

    def __init__(self) -> None:
        self.created: list[tuple[str, dict[str, Any]]] = []
        self.patched: list[tuple[str, str, dict[str, Any], dict[str, Any]]] = []
        self.fail_create: Exception | None = None
        self.fail_patch: Exception | None = None

    def create_namespaced_event(self, namespace: str, body: dict[str, Any], **kw: Any) -> None:
        if self.fail_create is not None:
            raise self.fail_create
        self.created.append((namespace, body))

    def patch_namespaced_event(
        self, name: str, namespace: str, body: dict[str, Any], **kw: Any
    ) -> None:
        if self.fail_patch is not None:
            raise self.fail_patch
        self.patched.append((name, namespace, body, kw))


class Clock:
    def __init__(self) -> None:
        self.now = T0

    def __call__(self) -> float:
        return self.now


def ms(name: str = "sample", uid: str = "uid-1", namespace: str = "team") -> dict[str, Any]:
    return {
        "apiVersion": "workload.serving.volcano.sh/v1alpha1",
        "kind": "ModelServing",
        "metadata": {"name": name, "namespace": namespace, "uid": uid, "resourceVersion": "42"},
        "spec": {"replicas": 1},
    }


@pytest.fixture
def core() -> FakeCore:
    return FakeCore()


@pytest.fixture
def clock() -> Clock:
    return Clock()


@pytest.fixture
def recorder(core: FakeCore, clock: Clock) -> EventRecorder:
    return EventRecorder(None, host="node-a", clock=clock, core=core)


def test_creates_an_event_with_every_field(recorder: EventRecorder, core: FakeCore) -> None:
    recorder.record(ms(), "Normal", "PodCreated", "created pod sample-0-server-0-0")
    ((namespace, body),) = core.created
    assert namespace == "team"
    name = body["metadata"]["name"]
    assert re.fullmatch(r"sample\.[0-9a-f]{16}", name)
    assert body["metadata"]["namespace"] == "team"
    assert body["involvedObject"] == {
        "apiVersion": "workload.serving.volcano.sh/v1alpha1",
        "kind": "ModelServing",
        "name": "sample",
        "namespace": "team",
        "uid": "uid-1",
        "resourceVersion": "42",
    }
    assert body["reason"] == "PodCreated"
    assert body["message"] == "created pod sample-0-server-0-0"
    assert body["type"] == "Normal"
    assert body["source"] == {"component": "modelserving-controller", "host": "node-a"}
    assert body["reportingComponent"] == "modelserving-controller"
    assert body["reportingInstance"] == "node-a"
    assert body["firstTimestamp"] == body["lastTimestamp"] == "2023-11-14T22:13:20Z"
    assert body["count"] == 1


def test_event_names_are_unique(recorder: EventRecorder, core: FakeCore) -> None:
    recorder.record(ms(), "Normal", "A", "one")
    recorder.record(ms(), "Normal", "A", "two")
    names = {body["metadata"]["name"] for _, body in core.created}
    assert len(names) == 2


def test_a_repeat_within_the_window_patches_the_count(
    recorder: EventRecorder, core: FakeCore, clock: Clock
) -> None:
    recorder.record(ms(), "Warning", "PluginFailed", "gpu-env: Timeout")
    clock.now += 120
    recorder.record(ms(), "Warning", "PluginFailed", "gpu-env: Timeout")
    clock.now += 120
    recorder.record(ms(), "Warning", "PluginFailed", "gpu-env: Timeout")
    assert len(core.created) == 1
    name = core.created[0][1]["metadata"]["name"]
    assert [(n, ns, body) for n, ns, body, _ in core.patched] == [
        (name, "team", {"count": 2, "lastTimestamp": "2023-11-14T22:15:20Z"}),
        (name, "team", {"count": 3, "lastTimestamp": "2023-11-14T22:17:20Z"}),
    ]
    assert core.patched[0][3]["_content_type"] == "application/merge-patch+json"


def test_differences_are_not_aggregated(recorder: EventRecorder, core: FakeCore) -> None:
    recorder.record(ms(), "Warning", "PluginFailed", "gpu-env: Timeout")
    recorder.record(ms(), "Normal", "PluginFailed", "gpu-env: Timeout")
    recorder.record(ms(), "Warning", "Other", "gpu-env: Timeout")
    recorder.record(ms(), "Warning", "PluginFailed", "gpu-env: Trap")
    recorder.record(ms(uid="uid-2"), "Warning", "PluginFailed", "gpu-env: Timeout")
    assert len(core.created) == 5
    assert core.patched == []


def test_a_repeat_after_the_window_creates_a_new_event(
    recorder: EventRecorder, core: FakeCore, clock: Clock
) -> None:
    recorder.record(ms(), "Normal", "Scaled", "replicas 1 -> 2")
    clock.now += 601
    recorder.record(ms(), "Normal", "Scaled", "replicas 1 -> 2")
    assert len(core.created) == 2
    assert core.patched == []
    assert core.created[1][1]["count"] == 1
    assert core.created[1][1]["firstTimestamp"] == "2023-11-14T22:23:21Z"


def test_a_vanished_event_is_created_again(
    recorder: EventRecorder, core: FakeCore, clock: Clock
) -> None:
    recorder.record(ms(), "Normal", "Scaled", "up")
    core.fail_patch = ApiException(status=404, reason="Not Found")
    recorder.record(ms(), "Normal", "Scaled", "up")
    assert len(core.created) == 2
    first, second = (body["metadata"]["name"] for _, body in core.created)
    assert first != second
    # The new Event is the one bumped next.
    core.fail_patch = None
    recorder.record(ms(), "Normal", "Scaled", "up")
    assert core.patched[0][0] == second
    assert core.patched[0][2]["count"] == 2


def test_long_messages_are_cut(recorder: EventRecorder, core: FakeCore) -> None:
    recorder.record(ms(), "Warning", "Long", "x" * 5000)
    recorder.record(ms(), "Warning", "Exact", "y" * 1024)
    cut, exact = (body["message"] for _, body in core.created)
    assert len(cut) == 1024
    assert cut.endswith("x…")
    assert exact == "y" * 1024


def test_invalid_type_and_object_are_refused(recorder: EventRecorder, core: FakeCore) -> None:
    with pytest.raises(ValueError, match="'Error' is not one of"):
        recorder.record(ms(), "Error", "Bad", "no")
    with pytest.raises(ValueError, match=r"metadata\.name"):
        recorder.record({"kind": "Pod", "metadata": {}}, "Normal", "Bad", "no")
    assert core.created == []


def test_cluster_scoped_objects_get_events_in_default(
    recorder: EventRecorder, core: FakeCore
) -> None:
    node = {"apiVersion": "v1", "kind": "Node", "metadata": {"name": "n1", "uid": "u"}}
    recorder.record(node, "Normal", "Seen", "hello")
    ((namespace, body),) = core.created
    assert namespace == body["metadata"]["namespace"] == "default"
    assert "namespace" not in body["involvedObject"]


def test_spam_guard_drops_after_the_burst_and_refills(
    recorder: EventRecorder, core: FakeCore, clock: Clock, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.DEBUG, logger="modelserving.controller.events")
    for i in range(30):
        recorder.record(ms(), "Normal", "Step", f"step {i}")
    assert len(core.created) == 25
    assert recorder.dropped == 5
    assert "spam guard" in caplog.text
    # Another object has its own bucket.
    recorder.record(ms(uid="uid-2"), "Normal", "Step", "other")
    assert len(core.created) == 26
    # One token back per five minutes.
    clock.now += 299
    recorder.record(ms(), "Normal", "Step", "still dropped")
    assert recorder.dropped == 6
    clock.now += 301  # 600 s since the burst: two tokens, one per record
    recorder.record(ms(), "Normal", "Step", "allowed 1")
    recorder.record(ms(), "Normal", "Step", "allowed 2")
    recorder.record(ms(), "Normal", "Step", "dropped again")
    assert [body["message"] for _, body in core.created[26:]] == ["allowed 1", "allowed 2"]
    assert recorder.dropped == 7


def test_api_errors_are_logged_not_raised(
    recorder: EventRecorder, core: FakeCore, caplog: pytest.LogCaptureFixture
) -> None:
    core.fail_create = ApiException(status=403, reason="Forbidden")
    recorder.record(ms(), "Normal", "A", "denied")
    assert "could not create Event sample." in caplog.text
    assert "403 Forbidden" in caplog.text
    core.fail_create = ConnectionError("refused")
    recorder.record(ms(), "Normal", "B", "down")
    assert "ConnectionError: refused" in caplog.text
    # A failed create is not remembered: the repeat creates again.
    core.fail_create = None
    recorder.record(ms(), "Normal", "A", "denied")
    assert len(core.created) == 1
    assert core.patched == []
    # A failed patch (other than 404) is logged and creates nothing.
    core.fail_patch = ApiException(status=500, reason="Internal Server Error")
    recorder.record(ms(), "Normal", "A", "denied")
    assert "could not patch Event" in caplog.text
    assert len(core.created) == 1


def test_concurrent_repeats_are_counted_in_order(recorder: EventRecorder, core: FakeCore) -> None:
    def record() -> None:
        for _ in range(5):
            recorder.record(ms(), "Normal", "Busy", "same")

    threads = [threading.Thread(target=record) for _ in range(4)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert len(core.created) == 1
    assert [body["count"] for _, _, body, _ in core.patched] == list(range(2, 21))
