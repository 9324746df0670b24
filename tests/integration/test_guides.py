"""The guides' cluster commands, walked on the local control plane with our controller running.

The guides mark the blocks the tests run with ``<!-- guide: GROUP/NAME -->`` (the convention and
the output matching rules are in ``tests/guides.py``). The commands run in one bash with the
control plane's kubectl and this checkout's ``modelserving`` first on ``PATH`` and
``KUBECONFIG`` set; the controller runs in this process (``running_controller``).

- ``docs/plugin-authors.md``: the ``rust`` steps (scaffold, build, test, run, inspect, bench,
  pack a fresh Rust plugin), then the ``cluster`` steps: the ConfigMap and the spec.plugins
  entry exactly as ``plugin pack`` printed them go into a ModelServing; the placeholder config
  is refused, the filled-in one works; the Pods carry the label and the plugins-applied
  annotation with the module's sha256, PluginsReady is True and a PluginLoaded event was
  posted; then a rebuilt module: InvalidModule until the new sha256 is pinned, and new Pods use
  it while the old ones stay.
- ``docs/operator.md``: ``kubectl apply -k deploy/`` and ``-k crds/``, then the troubleshooting
  entries: a wrong sha256, a missing ConfigMap, a ConfigMap in a namespace that is not allowed
  (fixed by restarting the controller with ``pluginNamespaces``, as the guide says), a plugin
  that times out, a forbidden patch, and the metrics that count them.

Besides the output the guides show, the state they describe is checked through the API.
"""

from __future__ import annotations

import hashlib
import json
import socket
from collections.abc import Callable, Iterator
from contextlib import ExitStack
from pathlib import Path
from typing import Any

import pytest
import wasmtime
from kubernetes import client
from kubernetes.client.exceptions import ApiException

from modelserving.api import labels
from modelserving.plugins.artifacts import builtin_wasm
from tests.guides import Block, Walk, check_all_marked, marked, read_blocks, shell_env
from tests.integration.conftest import Cluster
from tests.integration.controller_env import (
    Objects,
    install_crd,
    running_controller,
)
from tests.integration.controller_env import test_config as operator_config
from tests.wasm.test_plugin_new import rust_missing

ROOT = Path(__file__).resolve().parents[2]
AUTHORS = ROOT / "docs" / "plugin-authors.md"
OPERATOR = ROOT / "docs" / "operator.md"
VENV_BIN = ROOT / ".venv" / "bin"
RETRY_S = 60.0


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port: int = sock.getsockname()[1]
        return port


def guide_env(cluster: Cluster, cache: Path) -> dict[str, str]:
    cache.mkdir(exist_ok=True)
    return shell_env(
        cluster.kubectl.parent,
        VENV_BIN,
        KUBECONFIG=str(cluster.kubeconfig),
        MODELSERVING_CACHE=str(cache),
    )


def delete_namespaces(cluster: Cluster, *names: str) -> None:
    for name in names:
        try:
            cluster.core.delete_namespace(name)
        except ApiException as error:
            if error.status != 404:
                raise


def sha256(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()


def walk_blocks(
    walk: Walk,
    blocks: list[Block],
    before: dict[str, Callable[[], None]] | None = None,
    after: dict[str, Callable[[], None]] | None = None,
) -> None:
    """Run the blocks in order, with checks (or actions) before and after named ones."""
    for block in blocks:
        key = f"{block.group}/{block.name}"
        if before and key in before:
            before.pop(key)()
        walk.run(block)
        if after and key in after:
            after.pop(key)()
    leftover = sorted({*(before or {}), *(after or {})})
    assert not leftover, f"the guide has no blocks {leftover} any more"


def condition(objs: Objects, name: str, type_: str = "PluginsReady") -> dict[str, Any]:
    found = objs.condition(name, type_)
    assert found is not None, f"{name} has no {type_} condition"
    return found


def annotation(pod: dict[str, Any]) -> list[dict[str, Any]]:
    raw = (pod["metadata"].get("annotations") or {})[labels.PLUGINS_APPLIED_ANNOTATION]
    value: list[dict[str, Any]] = json.loads(raw)
    return value


# --- docs/plugin-authors.md -------------------------------------------------------------------


@pytest.mark.skipif(rust_missing() is not None, reason=f"Rust toolchain: {rust_missing()}")
@pytest.mark.timeout(900)
def test_author_guide_deploys_a_fresh_rust_plugin(cluster: Cluster, tmp_path: Path) -> None:
    check_all_marked(AUTHORS)
    install_crd(cluster)
    work = tmp_path / "guide"
    work.mkdir()
    env = guide_env(cluster, tmp_path / "cache")
    substitutions = {"/tmp/guide": str(work), "/work/main": str(ROOT)}
    objs = Objects(cluster, "demo")
    project = work / "team-label"
    first: dict[str, str] = {}

    def deployed() -> None:
        module = (project / "team-label.wasm").read_bytes()
        first["sha256"] = sha256(module)
        packed = (project / "packed.yaml").read_text()
        # the entry in the ModelServing is the one pack printed, config filled in
        ms = objs.get("llama")
        (entry,) = ms["spec"]["plugins"]
        assert entry["module"] == {
            "configMapRef": {"name": "team-label", "key": "team-label.wasm.gz"},
            "sha256": first["sha256"],
        }
        assert f"\n# {first['sha256']}.\n" in packed  # the header comment names the digest
        assert entry["config"] == {"value": "ml"}
        stored = objs.core.read_namespaced_config_map("team-label", "demo").binary_data or {}
        assert set(stored) == {"team-label.wasm.gz"}
        pods = objs.pods("llama")
        assert sorted(p["metadata"]["name"] for p in pods) == [
            "llama-0-server-0-0",
            "llama-0-server-0-1",
        ]
        for pod in pods:
            assert pod["metadata"]["labels"]["example.com/team-label"] == "ml"
            assert annotation(pod) == [
                {"name": "team-label", "runtime": "Wasm", "sha256": first["sha256"]}
            ]
        ready = condition(objs, "llama")
        assert (ready["status"], ready["reason"]) == ("True", "PluginsLoaded")
        loaded = [e for e in objs.events("PluginLoaded") if e.involved_object.name == "llama"]
        assert loaded and f"sha256 {first['sha256'][:12]}" in loaded[0].message

    def refused_new_module() -> None:
        refused = condition(objs, "llama")
        assert (refused["status"], refused["reason"]) == ("False", "InvalidModule")
        assert "sha256 mismatch" in refused["message"]
        assert len(objs.pods("llama")) == 2  # running Pods left alone

    def scaled() -> None:
        new = sha256((project / "team-label.wasm").read_bytes())
        assert new != first["sha256"]
        by_name = {p["metadata"]["name"]: p for p in objs.pods("llama")}
        assert len(by_name) == 4
        for name, pod in by_name.items():
            old_group = name.startswith("llama-0-")
            assert annotation(pod)[0]["sha256"] == (first["sha256"] if old_group else new)
            key = "example.com/team-label" if old_group else "example.com/team"
            assert pod["metadata"]["labels"][key] == "ml"

    blocks = marked(AUTHORS, ["rust", "cluster"])
    try:
        with running_controller(cluster), Walk(tmp_path, env, substitutions, RETRY_S) as walk:
            walk_blocks(
                walk,
                blocks,
                after={
                    "cluster/events": deployed,
                    "cluster/new-configmap": refused_new_module,
                    "cluster/scale": scaled,
                },
            )
    finally:
        delete_namespaces(cluster, "demo")


# --- docs/operator.md -------------------------------------------------------------------------


def file_block(guide: Path, name: str) -> str:
    (block,) = [b for b in read_blocks(guide) if b.name == name]
    return block.text


def test_operator_guide_pins_current_digests() -> None:
    """The troubleshooting examples pin the digests of the built-in and of slow.wat; a guide
    whose digests went stale would fail later in a confusing way."""
    tweaks = sha256(builtin_wasm("demo-pod-tweaks.wasm"))
    assert f"sha256: {tweaks}" in file_block(OPERATOR, "namespace-file")
    slow = sha256(bytes(wasmtime.wat2wasm(file_block(OPERATOR, "timeout-file"))))
    assert f"sha256: {slow}" in file_block(OPERATOR, "timeout-file2")


@pytest.fixture
def deploy_cleanup(cluster: Cluster) -> Iterator[None]:
    """Remove what ``kubectl apply -k deploy/`` made, except the CRD other tests use."""
    yield
    delete_namespaces(cluster, "modelserving-system")
    rbac = client.RbacAuthorizationV1Api(cluster.api_client)
    for delete in (rbac.delete_cluster_role, rbac.delete_cluster_role_binding):
        try:
            delete("modelserving-controller")
        except ApiException as error:
            if error.status != 404:
                raise


@pytest.mark.timeout(600)
def test_operator_guide_install_and_troubleshooting(
    cluster: Cluster, tmp_path: Path, deploy_cleanup: None
) -> None:
    check_all_marked(OPERATOR)
    ops = tmp_path / "ops"
    ops.mkdir()
    env = guide_env(cluster, tmp_path / "cache")
    ports = [free_port(), free_port()]
    substitutions = {"/tmp/ops": str(ops), "localhost:8080": f"127.0.0.1:{ports[0]}"}
    objs = Objects(cluster, "serving")
    controllers = ExitStack()

    def start(port: int, **config: Any) -> None:
        """The controller, with its metrics served as ``modelserving run`` serves them (only
        the metrics: the health server is not needed here)."""
        ctl = controllers.enter_context(running_controller(cluster, operator_config(**config)))
        controllers.callback(ctl.metrics.serve(port, "127.0.0.1").close)

    def restart_with_plugin_namespaces() -> None:
        controllers.close()
        start(ports[1], pluginNamespaces=["wasm-plugins"])
        walk.substitutions["localhost:8080"] = f"127.0.0.1:{ports[1]}"

    def installed() -> None:
        apps = client.AppsV1Api(cluster.api_client)
        deployment = apps.read_namespaced_deployment(
            "modelserving-controller", "modelserving-system"
        )
        assert deployment.spec.replicas == 2
        config = objs.core.read_namespaced_config_map("modelserving-config", "modelserving-system")
        assert "pluginNamespaces: []" in (config.data or {})["config.yaml"]

    def expect(
        name: str, status: str, reason: str, text: str, event: str | None = None
    ) -> Callable[[], None]:
        def check() -> None:
            found = condition(objs, name)
            assert (found["status"], found["reason"]) == (status, reason), found
            assert text in found["message"]
            if event is not None:
                messages = [e.message for e in objs.events(event) if e.involved_object.name == name]
                assert any(text in m for m in messages), messages

        return check

    def slow_timed_out() -> None:
        expect("slow", "False", "Timeout", "passed its deadline (100 ms)", "PluginFailed")()
        assert objs.pods("slow") == []

    def healed() -> None:
        pods = objs.pods("llama")
        assert len(pods) == 4
        for pod in pods:
            annotations = pod["metadata"]["annotations"]
            assert annotations["example.com/team"] == "ml"
            assert "modelserving.volcano.sh/owner" not in annotations
        assert condition(objs, "llama")["status"] == "True"

    try:
        with Walk(ROOT, env, substitutions, RETRY_S) as walk:
            blocks = marked(OPERATOR, ["cluster"])
            install = [b for b in blocks if b.name in ("install", "crds")]
            assert [b.name for b in blocks[:2]] == ["install", "crds"]
            walk_blocks(walk, install, after={"cluster/install": installed})
            install_crd(cluster)  # applied by the guide; established before kopf watches it
            start(ports[0])
            walk_blocks(
                walk,
                blocks[2:],
                before={"cluster/namespace-fixed": restart_with_plugin_namespaces},
                after={
                    "cluster/sha-symptom": expect(
                        "llama", "False", "InvalidModule", "sha256 mismatch", "PluginLoadFailed"
                    ),
                    "cluster/sha-fix": expect("llama", "True", "PluginsLoaded", "1 plugin"),
                    "cluster/missing": expect(
                        "llama", "False", "InvalidModule", "ConfigMap serving/tweaks not found"
                    ),
                    "cluster/namespace": expect(
                        "shared",
                        "False",
                        "InvalidModule",
                        "wasm-plugins is not an allowed plugin namespace",
                        "PluginLoadFailed",
                    ),
                    "cluster/namespace-fixed": expect("shared", "True", "PluginsLoaded", ""),
                    "cluster/timeout": slow_timed_out,
                    "cluster/forbidden": expect(
                        "llama",
                        "False",
                        "ForbiddenPatch",
                        "modelserving.volcano.sh/owner",
                        "PluginFailed",
                    ),
                    "cluster/forbidden-fix": healed,
                },
            )
    finally:
        controllers.close()
        delete_namespaces(cluster, "serving", "wasm-plugins")
