"""The ``make run`` demo ModelServing: valid, and its plugins (native, Wasm and ConfigMap
delivered) all apply when rendered offline."""

from __future__ import annotations

import hashlib
from pathlib import Path

import pytest

from modelserving import devcluster
from modelserving.api.validation import parse_model_serving
from modelserving.chain import build_chain
from modelserving.chain.render import render
from modelserving.cli import demo
from modelserving.cli.main import main
from modelserving.plugins.artifacts import builtin_wasm
from modelserving.plugins.modules import ConfigMapModules


def test_the_demo_renders_with_every_plugin_applied() -> None:
    module = builtin_wasm("demo-pod-tweaks.wasm")
    ms = parse_model_serving(demo.demo_model_serving(hashlib.sha256(module).hexdigest()))
    config_map = demo.module_config_map(module)
    maps = {(demo.NAMESPACE, demo.MODULE_CONFIG_MAP): config_map}
    modules = ConfigMapModules(maps, ms.namespace, 4 << 20)
    chain = build_chain(ms, modules=modules)
    assert [e.name for e in chain.entries] == [
        "demo-pod-tweaks",
        "wasm-tweaks",
        "lws-standard-labels",
        "ready-reporter",
    ]
    pods = [o for o in render(ms, chain).objects if o["kind"] == "Pod"]
    assert len(pods) == 4
    for pod in pods:
        annotations = pod["metadata"]["annotations"]
        assert annotations["demo.modelserving.io/builtin"] == "applied"
        assert annotations["demo.modelserving.io/wasm"] == "applied"
        labels = pod["metadata"]["labels"]
        assert labels["leaderworkerset.sigs.k8s.io/name"] == demo.NAME
    assert "leaderworkerset.sigs.k8s.io/worker-index" in demo.how_to_look(Path("/k/kubeconfig"))


@pytest.mark.parametrize(
    "error",
    [
        devcluster.ClusterError("etcd: exited with status 1 while waiting for etcd /health"),
        devcluster.BuildError("go build failed (1)"),
        devcluster.CertError("the `openssl` command is needed"),
    ],
)
def test_a_local_cluster_that_does_not_start_is_one_error_line(
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
    error: Exception,
) -> None:
    def fail(*_args: object, **_kwargs: object) -> None:
        raise error

    monkeypatch.setattr(devcluster, "up", fail)
    assert main(["run", "--local-cluster", str(tmp_path / "c"), "--no-leader-election"]) == 1
    err = capsys.readouterr().err
    assert err == f"error: the local control plane in {tmp_path / 'c'} did not start: {error}\n"
