"""Fixtures of the sandbox tests: a sandbox with a private disk cache, and a sample request."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from modelserving.abi.codec import encode_request
from modelserving.api.hook import Hook
from modelserving.api.place import PodPlace
from modelserving.plugins.exports import plugin_sandbox
from modelserving.sandbox import Sandbox, SandboxSettings
from modelserving.sandbox.settings import Limits


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    here = Path(__file__).parent
    for item in items:
        if here in Path(str(item.fspath)).parents:
            item.add_marker(pytest.mark.wasm)


@pytest.fixture(scope="session")
def sandbox(tmp_path_factory: pytest.TempPathFactory) -> Sandbox:
    settings = SandboxSettings(cache_dir=tmp_path_factory.mktemp("wasm-cache"))
    return plugin_sandbox(settings)


def unhurried(sandbox: Sandbox) -> Limits:
    """The default limits with the longest deadline the sandbox allows: for tests that compare
    what modules answer, not how fast, so that a loaded machine (make test builds Kubernetes
    beside the unit tests) cannot turn a slow call into a Timeout."""
    return sandbox.limits(timeout_ms=sandbox.settings.max_timeout_ms)


def sample_pod() -> dict[str, Any]:
    return {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {"name": "sample-0-server-0-0", "namespace": "default", "labels": {"a": "b"}},
        "spec": {"containers": [{"name": "main", "image": "nginx:1.28.0"}]},
    }


@pytest.fixture
def request_bytes() -> bytes:
    where = PodPlace("sample-0", "server", "server-0", True)
    ms = {"apiVersion": "workload.serving.volcano.sh/v1alpha1", "kind": "ModelServing"}
    return encode_request(Hook.ON_POD_CREATE, "p", None, ms, where, sample_pod())
