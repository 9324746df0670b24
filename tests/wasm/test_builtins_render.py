"""``modelserving render`` of the multi-node vLLM example that uses the accelerator,
inference-engine and rdma-network built-ins: the Pods an engineer would deploy, the same with
the plugins' WebAssembly twins, and the patch-policy error without the operator's IPC_LOCK."""

from __future__ import annotations

import contextlib
import io
from pathlib import Path
from typing import Any

import pytest
import yaml

from modelserving.api.labels import PLUGINS_APPLIED_ANNOTATION
from modelserving.cli.main import main
from tests.guides import Walk, check_all_marked, marked, shell_env

ROOT = Path(__file__).resolve().parents[2]
EXAMPLE = ROOT / "examples" / "multinode-vllm-rdma.yaml"
CONFIG = ROOT / "examples" / "operator-rdma.yaml"
ENTRY, WORKER = "llama-405b-0-leader-0-0", "llama-405b-0-leader-0-1"


def render(capsys: pytest.CaptureFixture[str], *args: str) -> tuple[int, str, str]:
    code = main(["render", *args])
    out, err = capsys.readouterr()
    return code, out, err


def pods(out: str) -> dict[str, dict[str, Any]]:
    return {o["metadata"]["name"]: o for o in yaml.safe_load_all(out) if o["kind"] == "Pod"}


def engine(pod: dict[str, Any]) -> dict[str, Any]:
    containers = pod["spec"]["containers"]
    assert [c["name"] for c in containers] == ["engine"]
    container: dict[str, Any] = containers[0]
    return container


@pytest.fixture(scope="module")
def rendered() -> dict[str, dict[str, Any]]:
    out = io.StringIO()  # a module-scoped fixture has no capsys
    with contextlib.redirect_stdout(out):
        code = main(["render", "--config", str(CONFIG), "-f", str(EXAMPLE)])
    assert code == 0
    return pods(out.getvalue())


def test_every_pod_gets_devices_network_and_shared_memory(
    rendered: dict[str, dict[str, Any]],
) -> None:
    assert sorted(rendered) == [ENTRY, WORKER]
    for pod in rendered.values():
        spec, container = pod["spec"], engine(pod)
        assert container["resources"]["limits"] == {
            "nvidia.com/gpu": "8",
            "rdma/rdma_shared_device_a": "1",
        }
        assert spec["nodeSelector"] == {"nvidia.com/gpu.product": "NVIDIA-H100-80GB-HBM3"}
        assert {"key": "nvidia.com/gpu", "operator": "Exists", "effect": "NoSchedule"} in spec[
            "tolerations"
        ]
        shm = [v for v in spec["volumes"] if v["name"] == "dshm"]
        assert shm == [{"name": "dshm", "emptyDir": {"medium": "Memory", "sizeLimit": "16Gi"}}]
        assert {"name": "dshm", "mountPath": "/dev/shm"} in container["volumeMounts"]
        assert [m["mountPath"] for m in container["volumeMounts"]].count("/dev/shm") == 1
        assert container["securityContext"]["capabilities"]["add"] == ["IPC_LOCK"]
        assert pod["metadata"]["annotations"]["k8s.v1.cni.cncf.io/networks"] == "rdma-net"
        env = {e["name"]: e for e in container["env"]}
        assert env["NVIDIA_DRIVER_CAPABILITIES"]["value"] == "compute,utility"
        assert env["VLLM_HOST_IP"]["valueFrom"] == {"fieldRef": {"fieldPath": "status.podIP"}}
        assert {"GROUP_SIZE", "ENTRY_ADDRESS", "WORKER_INDEX", "POD_IP"} <= set(env)
        applied = yaml.safe_load(pod["metadata"]["annotations"][PLUGINS_APPLIED_ANNOTATION])
        assert [p["name"] for p in applied] == ["accelerator", "inference-engine", "rdma-network"]


def test_only_the_entry_pod_serves_http(rendered: dict[str, dict[str, Any]]) -> None:
    entry, worker = engine(rendered[ENTRY]), engine(rendered[WORKER])
    assert entry["ports"] == [{"name": "http", "containerPort": 8000, "protocol": "TCP"}]
    assert entry["startupProbe"] == {
        "httpGet": {"path": "/health", "port": 8000},
        "periodSeconds": 10,
        "failureThreshold": 360,
    }
    assert entry["readinessProbe"]["httpGet"] == {"path": "/health", "port": 8000}
    assert not {"ports", "startupProbe", "readinessProbe"} & set(worker)


def test_the_wasm_twins_render_the_same_pods(
    rendered: dict[str, dict[str, Any]], tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    doc = yaml.safe_load(EXAMPLE.read_text())
    for plugin in doc["spec"]["plugins"]:
        plugin["runtime"] = "Wasm"
    manifest = tmp_path / "wasm.yaml"
    manifest.write_text(yaml.safe_dump(doc))
    code, out, err = render(capsys, "--config", str(CONFIG), "-f", str(manifest))
    assert code == 0, err
    wasm = pods(out)

    def without_record(pod: dict[str, Any]) -> dict[str, Any]:
        annotations = dict(pod["metadata"]["annotations"])
        runtimes = {
            p["runtime"] for p in yaml.safe_load(annotations.pop(PLUGINS_APPLIED_ANNOTATION))
        }
        return {**pod, "metadata": {**pod["metadata"], "annotations": annotations}, "_": runtimes}

    for name, pod in rendered.items():
        native, twin = without_record(pod), without_record(wasm[name])
        assert native.pop("_") == {"Native"} and twin.pop("_") == {"Wasm"}
        assert twin == native


def test_without_ipc_lock_allowed_the_error_names_the_setting(
    capsys: pytest.CaptureFixture[str],
) -> None:
    code, out, err = render(capsys, "-f", str(EXAMPLE))
    assert code != 0
    assert out == ""
    assert "rdma-network" in err
    assert "IPC_LOCK" in err
    assert "patchPolicy.allowedCapabilities" in err


def test_the_pages_commands_print_what_it_shows() -> None:
    guide = ROOT / "docs" / "builtin-plugins.md"
    check_all_marked(guide)
    blocks = marked(guide, ["builtins"])
    assert [b.name for b in blocks] == ["render"]
    with Walk(ROOT, shell_env(ROOT / ".venv" / "bin")) as walk:
        for block in blocks:
            walk.run(block)
