"""State file, generated configuration and cleanup of a dev cluster folder (no cluster)."""

from __future__ import annotations

import shutil
import sys
from pathlib import Path

import pytest
import yaml

from modelserving.devcluster import cluster, procs
from modelserving.devcluster.certs import make_pki
from tests.processes import wait_until_exec_done

PORTS = dict(zip(cluster.PORT_NAMES, range(20000, 20006), strict=True))


def _state(directory: Path) -> cluster.ClusterState:
    record = procs.ProcessRecord("etcd", 1, ("/bin/etcd", "--x"), 5, str(directory / "e.log"))
    return cluster.ClusterState(directory, PORTS, (record,), ready=True, started_at=1.5)


def test_state_round_trips_and_bad_files_read_as_none(tmp_path: Path) -> None:
    assert cluster.load_state(tmp_path) is None
    cluster.save_state(_state(tmp_path))
    assert cluster.load_state(tmp_path) == _state(tmp_path)
    (tmp_path / cluster.STATE_FILE).write_text("{not json")
    assert cluster.load_state(tmp_path) is None
    (tmp_path / cluster.STATE_FILE).write_text('{"version": 99}')
    assert cluster.load_state(tmp_path) is None


def test_command_lines_stay_on_loopback_and_inside_the_folder(tmp_path: Path) -> None:
    binaries = {name: Path("/cache") / name for name in cluster.PROGRAMS}
    commands = cluster.command_lines(_state(tmp_path), binaries)
    assert list(commands) == list(cluster.PROGRAMS)
    apiserver = commands["kube-apiserver"]
    assert f"--secure-port={PORTS['kube-apiserver']}" in apiserver
    assert "--authorization-mode=RBAC" in apiserver
    assert f"--etcd-servers=http://127.0.0.1:{PORTS['etcd']}" in apiserver
    assert "--leader-elect=false" in commands["kube-scheduler"]
    assert "--controllers=*" in commands["kube-controller-manager"]
    for argv in commands.values():
        assert not any("=0.0.0.0" in arg or "//0.0.0.0" in arg for arg in argv)
        # Every process carries the folder in its flags, which is how strays are found.
        assert any(str(tmp_path) in arg for arg in argv[1:])


def test_volcano_runs_on_the_clusters_kubeconfig_with_no_port_of_its_own(tmp_path: Path) -> None:
    binaries = {name: Path("/cache") / name for name in cluster.PROGRAMS}
    commands = cluster.command_lines(_state(tmp_path), binaries)
    kubeconfig = f"--kubeconfig={tmp_path / 'kubeconfig'}"
    for name in ("vc-scheduler", "vc-controller-manager"):
        argv = commands[name]
        assert kubeconfig in argv and "--leader-elect=false" in argv
        # no health, metrics or pprof listener: two clusters side by side never collide
        assert not any(flag.split("=")[0].endswith("address") for flag in argv)
    conf = tmp_path / cluster.VOLCANO_SCHEDULER_CONF
    assert f"--scheduler-conf={conf}" in commands["vc-scheduler"]
    settings = yaml.safe_load(cluster.VOLCANO_SCHEDULER_CONF_TEXT)
    plugins = [p["name"] for tier in settings["tiers"] for p in tier["plugins"]]
    assert "gang" in plugins and "predicates" in plugins
    assert [a.strip() for a in settings["actions"].split(",")] == [
        "enqueue",
        "allocate",
        "backfill",
    ]


def test_missing_volcano_crds_fail_the_start_with_the_command_that_builds_them() -> None:
    with pytest.raises(cluster.ClusterError, match=r"Volcano's CRDs are missing from .*make"):
        cluster._install_crds(None, [])  # type: ignore[arg-type]


def test_fake_node_is_managed_by_kwok_and_offers_gpus() -> None:
    node = cluster.fake_node("n0")
    assert node["metadata"]["annotations"]["kwok.x-k8s.io/node"] == "fake"
    assert node["metadata"]["labels"]["type"] == "kwok"
    assert node["status"]["allocatable"]["nvidia.com/gpu"] == "8"


@pytest.mark.skipif(shutil.which("openssl") is None, reason="needs the openssl command")
def test_kubeconfig_embeds_the_admin_identity(tmp_path: Path) -> None:
    pki = make_pki(tmp_path / "pki")
    config = yaml.safe_load(cluster.kubeconfig_text("https://127.0.0.1:1", pki))
    assert config["clusters"][0]["cluster"]["server"] == "https://127.0.0.1:1"
    user = config["users"][0]["user"]
    assert set(user) == {"client-certificate-data", "client-key-data"}
    assert config["current-context"] == config["contexts"][0]["name"]
    assert (pki.directory / "sa.pub").read_text().startswith("-----BEGIN PUBLIC KEY")


def test_clean_removes_folder_and_stops_recorded_and_stray_processes(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    directory = tmp_path / "cluster"
    directory.mkdir()
    # A process recorded in state.json, and a stray (say, started just before a crash).
    argv = [sys.executable, "-c", "import time; time.sleep(60)", f"--data-dir={directory}/x"]
    recorded = procs.spawn("etcd", argv, directory / "a.log", cwd=tmp_path)
    stray = procs.spawn("etcd", [*argv, "stray"], directory / "b.log", cwd=tmp_path)
    # A process only shows its argv once exec has set up its stack; the /proc scan needs it.
    wait_until_exec_done(stray.record)
    cluster.save_state(cluster.ClusterState(directory, PORTS, (recorded.record,)))
    monkeypatch.setattr(cluster, "PROGRAMS", (*cluster.PROGRAMS, Path(sys.executable).name))
    try:
        assert cluster.clean(directory)
        assert recorded.exit_status() is not None
        assert stray.exit_status() is not None
    finally:
        recorded.stop(timeout=1)
        stray.stop(timeout=1)
    assert not directory.exists()
    assert not procs.is_ours(recorded.record)
    assert not procs.is_ours(stray.record)
    assert not cluster.clean(directory)


def test_clean_can_keep_logs(tmp_path: Path) -> None:
    (tmp_path / "logs").mkdir()
    (tmp_path / "logs" / "etcd.log").write_text("x")
    (tmp_path / "etcd").mkdir()
    cluster.save_state(cluster.ClusterState(tmp_path, PORTS))
    assert cluster.clean(tmp_path, keep_logs=True)
    assert sorted(p.name for p in tmp_path.iterdir()) == ["logs", cluster.STATE_FILE]


def test_a_dead_cluster_is_not_healthy(tmp_path: Path) -> None:
    assert not cluster.is_healthy(_state(tmp_path))
