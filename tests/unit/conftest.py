"""Builders shared by the unit tests: small, valid ModelServing manifests to vary per test."""

from __future__ import annotations

import copy
from collections.abc import Callable
from typing import Any

import pytest

from modelserving.api import ModelServing, parse_model_serving


def container(name: str = "main", image: str = "nginx:1.28.0", **extra: Any) -> dict[str, Any]:
    return {"name": name, "image": image, **extra}


def role(
    name: str = "server",
    replicas: int = 1,
    workers: int = 0,
    **extra: Any,
) -> dict[str, Any]:
    out: dict[str, Any] = {
        "name": name,
        "replicas": replicas,
        "entryTemplate": {"spec": {"containers": [container("entry")]}},
        "workerReplicas": workers,
    }
    if workers:
        out["workerTemplate"] = {"spec": {"containers": [container("worker")]}}
    out.update(extra)
    return out


def manifest(
    name: str = "sample",
    roles: list[dict[str, Any]] | None = None,
    **spec: Any,
) -> dict[str, Any]:
    return {
        "apiVersion": "workload.serving.volcano.sh/v1alpha1",
        "kind": "ModelServing",
        "metadata": {"name": name, "namespace": "team-a", "uid": "uid-1", "generation": 1},
        "spec": {"template": {"roles": roles if roles is not None else [role()]}, **spec},
    }


ManifestFactory = Callable[..., dict[str, Any]]


@pytest.fixture
def make_manifest() -> ManifestFactory:
    """A fresh manifest dict per call; tests edit it freely."""

    def make(**kwargs: Any) -> dict[str, Any]:
        return copy.deepcopy(manifest(**kwargs))

    return make


@pytest.fixture
def make_ms() -> Callable[..., ModelServing]:
    """A validated ModelServing per call."""

    def make(**kwargs: Any) -> ModelServing:
        return parse_model_serving(manifest(**kwargs))

    return make
