"""What the API server answers Kube's requests with: metadata only, when asked, on a create and
a delete."""

from __future__ import annotations

import copy
from typing import Any

from modelserving.controller.kube import METADATA, PODS, Kube
from tests.integration.conftest import Cluster


def pod(name: str) -> dict[str, Any]:
    return {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {"name": name, "labels": {"app": "kube-test"}},
        "spec": {"containers": [{"name": "c", "image": "example.invalid/none:1"}]},
    }


def test_creates_and_deletes_are_answered_with_metadata_only(
    cluster: Cluster, namespace: str
) -> None:
    kube = Kube(cluster.api_client)
    raw = kube.request("POST", PODS.path(namespace), pod("raw"), accept=METADATA)
    assert raw["kind"] == "PartialObjectMetadata", raw
    assert set(raw) == {"kind", "apiVersion", "metadata"}
    assert raw["metadata"]["uid"] and raw["metadata"]["resourceVersion"]

    sent = pod("as-sent")
    made = kube.create(PODS, namespace, copy.deepcopy(sent), as_sent=True)
    assert made is not None
    stored = kube.get(PODS, namespace, "as-sent")
    assert stored is not None
    for key in ("uid", "labels", "creationTimestamp"):
        assert made["metadata"][key] == stored["metadata"][key], key
    # the scheduler may have written the Pod's status since: never older than the answer
    assert int(made["metadata"]["resourceVersion"]) <= int(stored["metadata"]["resourceVersion"])
    assert made["spec"] == sent["spec"] and "status" not in made
    assert kube.create(PODS, namespace, sent, as_sent=True) is None  # it exists

    body = {"propagationPolicy": "Background", "gracePeriodSeconds": 0}
    gone = kube.request("DELETE", PODS.path(namespace, "raw"), body, accept=METADATA)
    assert gone["kind"] == "PartialObjectMetadata", gone
    assert kube.delete(PODS, namespace, "as-sent", uid=made["metadata"]["uid"], force=True)
