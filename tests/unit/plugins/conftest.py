"""Builders for the plugin tests: a Pod with containers and an init container, a HookRequest
for it, and applying a plugin's patch the way the chain would."""

from __future__ import annotations

import copy
from collections.abc import Sequence
from typing import Any

import jsonpatch
import pytest

from modelserving.api import HookRequest, ModelServing, PatchOperation, parse_model_serving
from modelserving.api.hook import Hook
from modelserving.api.place import PodPlace


def sample_pod() -> dict[str, Any]:
    """Two containers (one with env, one without) and an init container without env."""
    return {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {
            "name": "llm-0-server-0-0",
            "namespace": "team-a",
            "labels": {"modelserving.volcano.sh/name": "llm"},
        },
        "spec": {
            "containers": [
                {
                    "name": "engine",
                    "image": "vllm/vllm-openai:v0.10.0",
                    "env": [
                        {"name": "GROUP_SIZE", "value": "1"},
                        {"name": "MODE", "value": "serve"},
                    ],
                },
                {"name": "proxy", "image": "envoy:1.31"},
            ],
            "initContainers": [{"name": "fetch", "image": "busybox:1.36"}],
        },
    }


@pytest.fixture
def pod() -> dict[str, Any]:
    return sample_pod()


def apply(pod: dict[str, Any], ops: Sequence[PatchOperation]) -> dict[str, Any]:
    """RFC 6902, on a copy."""
    result: dict[str, Any] = jsonpatch.apply_patch(copy.deepcopy(pod), list(ops))
    return result


def model_serving() -> ModelServing:
    return parse_model_serving(
        {
            "apiVersion": "workload.serving.volcano.sh/v1alpha1",
            "kind": "ModelServing",
            "metadata": {"name": "llm", "namespace": "team-a"},
            "spec": {
                "template": {
                    "roles": [
                        {
                            "name": "server",
                            "entryTemplate": {
                                "spec": {"containers": [{"name": "engine", "image": "e:1"}]}
                            },
                            "workerReplicas": 0,
                        }
                    ]
                }
            },
        }
    )


def hook_request(pod: dict[str, Any], is_entry: bool = True) -> HookRequest:
    return HookRequest(
        hook=Hook.ON_POD_CREATE,
        model_serving=model_serving(),
        place=PodPlace("llm-0", "server", "server-0", is_entry),
        pod=pod,
    )
