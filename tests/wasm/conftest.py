"""Fixtures of the sandbox tests: a sandbox with a private disk cache, a sample request, and
Extism workers that tests can tell apart."""

from __future__ import annotations

import shutil
from pathlib import Path
from typing import Any

import pytest

from modelserving.abi.codec import encode_request
from modelserving.api.hook import Hook
from modelserving.api.place import PodPlace
from modelserving.plugins.exports import plugin_sandbox
from modelserving.sandbox import Sandbox, SandboxSettings
from modelserving.sandbox.extism import call as extism_call
from modelserving.sandbox.settings import Limits


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    here = Path(__file__).parent
    for item in items:
        if here in Path(str(item.fspath)).parents:
            item.add_marker(pytest.mark.wasm)


ROOMY_COMPILE_MS = 120_000
"""The compile deadline of the sandboxes that compare what modules answer: a 2 MB standard-Go
module compiles in a few seconds on an idle machine but has taken more than the default 10 s
while make test builds Kubernetes beside it, and a late compile is remembered as a refusal."""


def roomy(**changes: Any) -> SandboxSettings:
    """SandboxSettings with ``changes`` and a compile deadline no loaded machine reaches; the
    tests of the deadline itself set their own."""
    return SandboxSettings(**{"compile_timeout_ms": ROOMY_COMPILE_MS, **changes})


@pytest.fixture(scope="session")
def sandbox(tmp_path_factory: pytest.TempPathFactory) -> Sandbox:
    return plugin_sandbox(roomy(cache_dir=tmp_path_factory.mktemp("wasm-cache")))


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


@pytest.fixture
def worker_copy(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> str:
    """Workers started during the test run a copy of the worker script under ``tmp_path``, so
    ``mentioning(marker)`` finds exactly them."""
    copy = tmp_path / "worker" / "worker.py"
    copy.parent.mkdir()
    shutil.copy(Path(extism_call.__file__).with_name("worker.py"), copy)
    monkeypatch.setattr(extism_call, "_WORKER", copy)
    return str(copy.parent)
