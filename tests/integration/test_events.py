"""EventRecorder against the real API server: an Event is created, then its count bumped."""

from __future__ import annotations

from typing import Any

from kubernetes import client

from modelserving.controller.events import EventRecorder

from .conftest import Cluster, wait_for


def _config_map(cluster: Cluster, namespace: str) -> dict[str, Any]:
    created = cluster.core.create_namespaced_config_map(
        namespace,
        client.V1ConfigMap(metadata=client.V1ObjectMeta(name="involved"), data={"k": "v"}),
    )
    body: dict[str, Any] = cluster.api_client.sanitize_for_serialization(created)
    body.setdefault("apiVersion", "v1")
    body.setdefault("kind", "ConfigMap")
    return body


def _events_about(cluster: Cluster, namespace: str, uid: str) -> list[Any]:
    listed = cluster.core.list_namespaced_event(
        namespace, field_selector=f"involvedObject.uid={uid}"
    )
    return list(listed.items)


def test_record_creates_then_aggregates(cluster: Cluster, namespace: str) -> None:
    involved = _config_map(cluster, namespace)
    uid = involved["metadata"]["uid"]
    recorder = EventRecorder(cluster.api_client, host="test-host")

    recorder.record(involved, "Warning", "PluginFailed", "gpu-env: OnPodCreate: Timeout")
    (event,) = wait_for("the Event", lambda: _events_about(cluster, namespace, uid))
    assert event.reason == "PluginFailed"
    assert event.message == "gpu-env: OnPodCreate: Timeout"
    assert event.type == "Warning"
    assert event.count == 1
    assert event.involved_object.kind == "ConfigMap"
    assert event.involved_object.name == "involved"
    assert event.source.component == "modelserving-controller"
    assert event.source.host == "test-host"
    assert event.first_timestamp is not None

    recorder.record(involved, "Warning", "PluginFailed", "gpu-env: OnPodCreate: Timeout")

    def bumped() -> list[Any]:
        events = _events_about(cluster, namespace, uid)
        return events if events and events[0].count == 2 else []

    (again,) = wait_for("count 2 on the Event", bumped)
    assert again.metadata.name == event.metadata.name
    assert recorder.dropped == 0


def test_a_deleted_event_is_created_again(cluster: Cluster, namespace: str) -> None:
    involved = _config_map(cluster, namespace)
    uid = involved["metadata"]["uid"]
    recorder = EventRecorder(cluster.api_client)
    recorder.record(involved, "Normal", "Scaled", "replicas 1 -> 2")
    (event,) = wait_for("the Event", lambda: _events_about(cluster, namespace, uid))
    cluster.core.delete_namespaced_event(event.metadata.name, namespace)

    recorder.record(involved, "Normal", "Scaled", "replicas 1 -> 2")

    def recreated() -> list[Any]:
        events = _events_about(cluster, namespace, uid)
        return events if events and events[0].metadata.name != event.metadata.name else []

    (fresh,) = wait_for("a new Event", recreated)
    assert fresh.count == 1
