"""The controller benchmark's arithmetic (the runs themselves need a control plane: make bench)."""

from __future__ import annotations

import dataclasses
import json
import subprocess
import time
from dataclasses import replace
from pathlib import Path
from typing import Any

import pytest

from modelserving import devcluster
from modelserving.bench import controller as bench
from modelserving.bench import fleet
from modelserving.bench.controller import (
    Run,
    Snapshot,
    kthena_controller,
    main,
    paired,
    run_as_json,
    run_from_json,
    run_order,
)
from modelserving.bench.fleet import FleetRun, report, settled


def run(variant: str, seconds: float | None) -> Run:
    return Run(variant, seconds, 0.1, Snapshot(), 1.0, 2.0)


def test_run_order_puts_each_variant_in_each_place() -> None:
    assert run_order(3) == [
        *("none", "native", "wasm"),
        *("wasm", "none", "native"),
        *("native", "wasm", "none"),
    ]


def test_paired_compares_within_rounds(capsys: pytest.CaptureFixture[str]) -> None:
    # round 1 fast, round 2 slow: the medians of the variants mix the two, the pairs do not
    runs = [
        *(run("none", 5.0), run("native", 5.5), run("wasm", 5.25)),
        *(run("wasm", 10.5), run("none", 10.0), run("native", 11.0)),
        *(run("native", 8.8), run("wasm", None), run("none", 8.0)),  # wasm did not finish
    ]
    paired(runs)
    assert capsys.readouterr().out.splitlines() == [
        "  native vs none within each round: median +10.0 % (rounds: +10, +10, +10 %)",
        "  wasm vs native within each round: median  -4.5 % (rounds: -5, -5 %)",
        "  wasm vs none within each round: median  +5.0 % (rounds: +5, +5 %)",
    ]


def test_paired_needs_two_rounds(capsys: pytest.CaptureFixture[str]) -> None:
    paired([run("none", 5.0), run("native", 5.5), run("wasm", 5.25)])
    assert capsys.readouterr().out == ""


def test_a_run_goes_from_its_process_to_the_benchmark_whole() -> None:
    got = Run(
        "wasm",
        8.0,
        0.1,
        Snapshot({("p", "OnPodCreate", "ok"): 800.0}, {("p", "OnPodCreate"): 0.4}, 17, 12.5, 800),
        2.0,
        13.0,
        available=15.5,
        cpu_available=3.3,
        peak_rss_mb=98.0,
        idle_rss_mb=83.0,
    )
    assert run_from_json(run_as_json(got)) == got


def test_the_fleet_waits_for_every_group_updated_and_available_at_its_generation() -> None:
    ready = {
        "status": {
            "observedGeneration": 2,
            "updatedReplicas": 125,
            "availableReplicas": 125,
            "conditions": [{"type": "Available", "status": "True"}],
        }
    }
    assert settled(ready, 2, 125)
    assert not settled(ready, 3, 125)  # the update is not observed yet
    assert not settled(ready, 2, 126)
    rolling = {"status": {**ready["status"], "updatedReplicas": 100}}
    assert not settled(rolling, 2, 125)


def test_the_fleet_report_gives_per_pod_figures(capsys: pytest.CaptureFixture[str]) -> None:
    run = FleetRun(1000, 7.0, 14.0, 4.0, 3500, 97.0, 30.0, 2.0)
    run.control_plane_cpu_available = 25.0
    report(run)
    out = capsys.readouterr().out
    assert "CPU to available 4.00 ms/Pod (control plane 25.0 ms/Pod), 3.50 API requests/Pod" in out
    assert "peak RSS 97 MB" in out
    assert "rolling update 30.0 s, 2.00 ms CPU/Pod" in out
    assert "cores" not in out  # the control plane's CPU through it not read
    run.rollout_reported, run.control_plane_cpu_rollout = 29.0, 43.5
    report(run)
    # 43.5 s in the 29 s until the status said done: 1.50 cores; the controller 2 s in 30 s
    assert (
        "; control plane 43.5 ms/Pod, 1.50 cores (the controller 0.07)" in capsys.readouterr().out
    )


def test_a_fleet_rollout_out_of_time_reports_the_cpu_of_what_it_updated(
    capsys: pytest.CaptureFixture[str],
) -> None:
    run = FleetRun(1000, 7.0, 14.0, 4.0, 3500, 97.0, None, 2.0, 10, 1.0)
    run.updated_at_timeout = "25/125"  # 200 of the 1,000 Pods
    run.error = "the rolling update did not finish within 900 s"
    report(run)
    out = capsys.readouterr().out
    assert "rolling update n/a s, 10.00 ms CPU/updated Pod (10 passes, 1.0 s CPU in them)" in out


def test_a_fleet_child_gets_the_timeout_and_its_run_comes_back(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """Each size runs in a child process with the timeout it was given (and three times that to
    finish); its one line of JSON is the run."""
    seen: dict[str, Any] = {}

    def child(command: list[str], **kwargs: Any) -> Any:
        seen["command"], seen["timeout"] = command, kwargs["timeout"]
        line = fleet.PREFIX + json.dumps(dataclasses.asdict(FleetRun(5000, created=70.0)))
        return subprocess.CompletedProcess(command, 0, f"noise\n{line}\n", "")

    monkeypatch.setattr(subprocess, "run", child)
    got = fleet.in_child(5000, fleet.Settings(1800.0, 100))
    assert got == FleetRun(5000, created=70.0)
    assert seen["command"][-6:] == ["--one", "5000", "--timeout", "1800.0", "--models", "100"]
    assert seen["timeout"] == 5400.0
    fleet.in_child(5000, fleet.Settings(60.0, api_writes=1, rollout=False))
    assert seen["command"][-3:] == ["--api-writes", "1", "--no-rollout"]


def test_a_fleet_run_may_set_the_writes_in_flight() -> None:
    assert fleet.operator_config(16).concurrency.api_writes == 16
    default = fleet.operator_config()
    assert default.concurrency.api_writes == type(default.concurrency)().api_writes
    assert not default.leader_election.enabled


def test_a_fleet_of_many_model_servings_splits_its_groups_and_waits_for_all() -> None:
    assert fleet.model_names(1) == ["fleet"]
    assert fleet.model_names(3) == ["fleet-000", "fleet-001", "fleet-002"]
    assert fleet.split(10000, 1) == 1250 and fleet.split(10000, 100) == 12
    assert fleet.split(8, 100) == 1  # never none
    ready: dict[str, Any] = {"observedGeneration": 2, "updatedReplicas": 12}
    ready |= {"availableReplicas": 12, "conditions": [{"type": "Available", "status": "True"}]}
    late = {**ready, "availableReplicas": 11}

    class Listed:
        def __init__(self) -> None:
            self.calls = 0

        def list(self, res: Any, namespace: str) -> list[dict[str, Any]]:
            self.calls += 1
            second = ready if self.calls > 1 else late
            return [
                {"metadata": {"name": "fleet-000"}, "status": ready},
                {"metadata": {"name": "fleet-001"}, "status": second},
            ]

    kube = Listed()
    names = fleet.model_names(2)
    assert fleet._wait(kube, names, 2, 12, 5.0) is not None  # type: ignore[arg-type]
    assert kube.calls == 2  # (the second list found the last one settled)
    assert fleet._wait(kube, [*names, "fleet-002"], 2, 12, 0.6) is None  # type: ignore[arg-type]


def test_a_fleet_report_names_how_many_model_servings_share_the_pods(
    capsys: pytest.CaptureFixture[str],
) -> None:
    report(FleetRun(9600, 7.0, 14.0, 4.0, 3500, 97.0, 30.0, 2.0, models=100))
    assert "9600 Pods in 100 ModelServings: created" in capsys.readouterr().out


def test_a_fleet_child_for_kthena_gets_its_binary(monkeypatch: pytest.MonkeyPatch) -> None:
    seen: dict[str, Any] = {}

    def child(command: list[str], **kwargs: Any) -> Any:
        seen["command"] = command
        return subprocess.CompletedProcess(command, 3, "", "one\ntwo\nboom")

    monkeypatch.setattr(subprocess, "run", child)
    got = fleet.in_child(1000, fleet.Settings(60.0, kthena=Path("/opt/kthena-controller-manager")))
    assert seen["command"][-2:] == ["--kthena", "/opt/kthena-controller-manager"]
    # a child that failed is still reported as Kthena's run, with the cause
    assert got.controller == "kthena" and got.error == "exit 3: one | two | boom"


def test_a_kthena_fleet_is_reported_without_our_own_metrics(
    capsys: pytest.CaptureFixture[str],
) -> None:
    report(FleetRun(1000, 7.0, 14.0, 2.0, None, 60.0, 30.0, 1.0, controller="kthena"))
    out = capsys.readouterr().out
    assert "1000 Pods (kthena): created" in out
    assert "CPU to available 2.00 ms/Pod (control plane n/a ms/Pod), n/a API requests/Pod" in out
    assert "peak RSS 60 MB" in out
    assert "rolling update 30.0 s, 1.00 ms CPU/Pod (n/a passes" in out


def test_a_fleet_measured_through_a_child_probe_reads_its_cpu_and_memory() -> None:
    """Kthena's controller is another process: the fleet's CPU and peak memory come from the
    probe, and there are no API request or pass counts to read."""

    class Probe(bench.Probe):
        pids: tuple[int, ...] = (4242,)

        def __init__(self) -> None:
            super().__init__()
            self.cpu_now, self.reset = 10.0, 0

        def cpu(self) -> float:
            self.cpu_now += 2.5
            return self.cpu_now

        def reset_peak(self) -> None:
            self.reset += 1

        def status_kb(self, field: str) -> float | None:
            return 51200.0 if field == "VmHWM" else None

    ready: dict[str, Any] = {"updatedReplicas": 1, "availableReplicas": 1}
    ready |= {"conditions": [{"type": "Available", "status": "True"}]}

    class Kube:
        generation = 1

        def create(self, res: Any, namespace: str, body: Any) -> Any:
            return body

        def get(self, res: Any, namespace: str, name: str) -> Any:
            status = {**ready, "observedGeneration": self.generation}
            return {"metadata": {"name": name}, "status": status}

        def merge_patch(self, res: Any, namespace: str, name: str, patch: Any) -> Any:
            self.generation = 2

        def list(self, res: Any, namespace: str, selector: str | None = None) -> Any:
            self.lists = getattr(self, "lists", 0) + 1
            return [new_pod(f"p{i}") for i in range(8 if self.lists > 1 else 7)]

    class Watch:
        last: float | None = None

        def __init__(self, *args: Any, **kwargs: Any) -> None:
            self.last = time.perf_counter()

        def wait(self, timeout: float) -> bool:
            return True

        def close(self) -> None:
            pass

    probe = Probe()
    run = FleetRun(8, controller="kthena")
    with pytest.MonkeyPatch.context() as mp:
        mp.setattr(bench, "PodWatch", Watch)
        mp.setattr(bench, "settle", lambda pids: seen.append(pids))
        mp.setattr(bench, "create_namespace", lambda kube, name: None)
        control_plane = iter([100.0, 112.0, 120.0, 150.0])
        mp.setattr(bench, "control_plane_cpu", lambda pids: next(control_plane))
        seen: list[tuple[int, ...]] = []
        fleet.measure(Kube(), probe, None, (1, 2), 1, run, 5.0, idle=0)  # type: ignore[arg-type]
    assert seen == [(1, 2, 4242)] and probe.reset == 1
    assert run.cpu_available == 2.5 and run.cpu_rollout == 2.5
    assert run.control_plane_cpu_available == 12.0
    assert run.control_plane_cpu_rollout == 30.0  # read when the status said it done
    # without the rollout: the same figures up to available, nothing patched
    kube, fast = Kube(), FleetRun(8, controller="kthena")
    with pytest.MonkeyPatch.context() as mp:
        mp.setattr(bench, "PodWatch", Watch)
        mp.setattr(bench, "settle", lambda pids: None)
        mp.setattr(bench, "create_namespace", lambda kube, name: None)
        mp.setattr(bench, "control_plane_cpu", lambda pids: None)
        fleet.measure(kube, probe, None, (1,), 1, fast, 5.0, False, 0)  # type: ignore[arg-type]
    assert kube.generation == 1 and fast.cpu_available == 2.5 and fast.peak_rss_mb == 50.0
    assert fast.cpu_rollout is None and fast.rollout is None and fast.error is None
    assert fast.control_plane_cpu_available is None

    class InProcess(Probe):
        """Ours: the controller shares this process with the lists that check the Pods."""

        pids = ()

        def status_kb(self, field: str) -> float | None:
            listed = getattr(checked, "lists", 0)
            return 51200.0 if not listed else 512000.0  # the lists of every Pod would add 450 MB

    ours, checked = FleetRun(8), Kube()
    with pytest.MonkeyPatch.context() as mp:
        mp.setattr(bench, "PodWatch", Watch)
        mp.setattr(bench, "settle", lambda pids: None)
        mp.setattr(bench, "create_namespace", lambda kube, name: None)
        mp.setattr(bench, "control_plane_cpu", lambda pids: None)
        fleet.measure(checked, InProcess(), None, (1,), 1, ours, 5.0, idle=0)  # type: ignore[arg-type]
    assert checked.lists == 2 and ours.rollout is not None
    assert ours.peak_rss_mb == 50.0  # read before the lists
    assert run.peak_rss_mb == 50.0 and run.rollout is not None and run.error is None
    # the status said done at once; the Pods were all replaced at the second look, 2 s on
    assert run.rollout_reported is not None and run.rollout - run.rollout_reported >= 2.0
    assert run.requests is None and run.passes_rollout is None


def new_pod(name: str, image: str = fleet.NEW_IMAGE, ready: str = "True") -> dict[str, Any]:
    return {
        "metadata": {"name": name},
        "spec": {"containers": [{"name": "engine", "image": image}]},
        "status": {"conditions": [{"type": "Ready", "status": ready}]},
    }


def test_a_fleet_is_replaced_when_every_pod_has_the_new_image_and_is_ready() -> None:
    pods = [new_pod("a"), new_pod("b")]
    assert fleet.replaced(pods, 2)
    assert not fleet.replaced(pods, 3)  # one still missing
    assert not fleet.replaced([new_pod("a"), new_pod("b", image="vllm/vllm-openai:v0.10.0")], 2)
    assert not fleet.replaced([new_pod("a"), new_pod("b", ready="False")], 2)
    terminating = new_pod("b")
    terminating["metadata"]["deletionTimestamp"] = "2026-12-02T10:00:00Z"
    assert not fleet.replaced([new_pod("a"), terminating], 2)


def test_the_fleet_is_replaced_when_the_list_that_shows_it_was_asked(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """A list of 10,000 Pods takes this client seconds to read: the rollout ends when the
    list that shows every Pod replaced was asked, not when its answer was read."""
    clock = [100.0]

    class Kube:
        lists = 0

        def list(self, res: Any, namespace: str, selector: str | None = None) -> Any:
            assert selector == "app=bench"
            self.lists += 1
            clock[0] += 7.6  # reading the answer
            old = "vllm/vllm-openai:v0.10.0"
            return [new_pod("a"), new_pod("b", image=fleet.NEW_IMAGE if self.lists > 1 else old)]

    monkeypatch.setattr(time, "perf_counter", lambda: clock[0])
    monkeypatch.setattr(time, "sleep", lambda seconds: clock.__setitem__(0, clock[0] + seconds))
    kube = Kube()
    done, _ = fleet._replaced(kube, 2, 1000.0)  # type: ignore[arg-type]
    # first list asked at 100.0, read at 107.6; 2 s later the second is asked (109.6) and shows it
    assert kube.lists == 2 and done == pytest.approx(109.6)
    late = Kube()
    assert fleet._replaced(late, 2, 105.0)[0] is None  # type: ignore[arg-type]
    assert late.lists == 1


def test_a_status_that_said_done_early_is_quoted(capsys: pytest.CaptureFixture[str]) -> None:
    early = FleetRun(1000, 7.0, 14.0, 2.0, None, 60.0, 300.0, 1.0, controller="kthena")
    early.rollout_reported = 11.8
    report(early)
    honest = FleetRun(1000, 7.0, 14.0, 2.0, None, 60.0, 300.0, 1.0)
    honest.rollout_reported = 298.0
    report(honest)
    report(FleetRun(1000, 7.0, 14.0, 2.0, 3500, 60.0))  # --no-rollout
    first, second, third = capsys.readouterr().out.splitlines()
    assert "rolling update 300.0 s (its status said done at 11.8 s)," in first
    assert "rolling update 300.0 s, " in second
    assert third.endswith("peak RSS 60 MB") and "rolling" not in third


def test_run_order_rotates_any_variants() -> None:
    assert run_order(2, ("none", "kthena")) == ["none", "kthena", "kthena", "none"]


def test_paired_compares_ours_with_kthena(capsys: pytest.CaptureFixture[str]) -> None:
    runs = [run("none", 12.0), run("kthena", 10.0), run("kthena", 20.0), run("none", 22.0)]
    paired(runs)
    assert capsys.readouterr().out.splitlines() == [
        "  none vs kthena within each round: median +15.0 % (rounds: +20, +10 %)",
    ]


def test_the_kthena_variant_needs_its_binary(tmp_path: Path) -> None:
    with pytest.raises(SystemExit) as exc:
        main(["--variants", "none,kthena"])
    assert exc.value.code == 2
    with pytest.raises(SystemExit):
        main(["--variants", "none,kthena", "--kthena", str(tmp_path / "absent")])
    with pytest.raises(SystemExit):
        main(["--variants", "none,bogus"])


def script(path: Path, body: str) -> Path:
    path.write_text("#!/bin/sh\n" + body)
    path.chmod(0o755)
    return path


def test_the_kthena_controller_runs_for_the_block_and_is_stopped(tmp_path: Path) -> None:
    kubeconfig = tmp_path / "kubeconfig"
    binary = script(tmp_path / "kthena", 'echo "$@"\nexec sleep 60\n')
    with kthena_controller(binary, kubeconfig, grace=0.1) as probe:
        (pid,) = probe.pids
        assert Path(f"/proc/{pid}").exists()
        assert probe.status_kb("VmRSS") is not None
        log = tmp_path / "kthena-controller-manager.log"
        deadline = time.monotonic() + 30
        while "--kubeconfig" not in log.read_text() and time.monotonic() < deadline:
            time.sleep(0.01)
    assert not Path(f"/proc/{pid}").exists()
    logged = log.read_text()
    assert f"--kubeconfig={kubeconfig}" in logged and "--kube-api-qps=10000" in logged


def test_a_kthena_controller_that_exits_at_start_is_reported(tmp_path: Path) -> None:
    binary = script(tmp_path / "kthena", 'echo "no such flag: --bogus" >&2\nexit 3\n')
    with (
        pytest.raises(RuntimeError, match=r"exited with 3 at start: no such flag: --bogus"),
        kthena_controller(binary, tmp_path / "kubeconfig", grace=30),
    ):
        pass


def test_the_fleet_command_line_reaches_each_child(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    """Each size runs once per controller, with the options given, and a child given them back
    on its command line reads the same settings."""
    seen: list[tuple[int, fleet.Settings]] = []

    def child(pods: int, settings: fleet.Settings) -> FleetRun:
        seen.append((pods, settings))
        return FleetRun(pods, controller=fleet._whose(settings.kthena))

    monkeypatch.setattr(fleet, "in_child", child)
    monkeypatch.setattr(devcluster, "cached_binaries", dict)
    kthena = Path("/opt/kthena-controller-manager")
    options = ["--sizes", "8,16", "--no-rollout", "--api-writes", "2", "--kthena", str(kthena)]
    fleet.main(options)
    ours = fleet.Settings(900.0, 1, None, 2, False)
    assert seen == [
        (8, ours),
        (8, replace(ours, kthena=kthena)),
        (16, ours),
        (16, replace(ours, kthena=kthena)),
    ]
    assert "8 Pods (kthena)" in capsys.readouterr().out
    got: list[fleet.Settings] = []

    def one(binaries: Any, pods: int, settings: fleet.Settings) -> FleetRun:
        got.append(settings)
        return FleetRun(pods)

    monkeypatch.setattr(fleet, "one_size", one)
    fleet.main(["--one", "8", *replace(ours, kthena=kthena).arguments()])
    assert got == [replace(ours, kthena=kthena)]


def test_a_fleet_rollout_reports_its_events_and_cpu_per_event_beyond_idle(
    capsys: pytest.CaptureFixture[str],
) -> None:
    """CPU per watch event, with the idle CPU of the rollout's duration taken out: a rollout the
    control plane makes twice as long costs the controller twice its idle CPU, not more per
    event."""
    run = FleetRun(1000, 7.0, 14.0, 4.0, 3500, 97.0, 100.0, 12.0, 10, 1.0)
    run.events_rollout, run.requests_rollout, run.idle_cpu_ms_per_s = 10_000, 2100, 20.0
    report(run)
    out = capsys.readouterr().out
    assert "idle 20.0 ms CPU/s" in out
    # 12 s of CPU, 2 s of it idle (20 ms/s over 100 s): 10 s over 10,000 events
    assert (
        "10.0 watch events and 2.10 API requests per Pod, 1000 us CPU per event beyond idle "
        "(idle: 2.0 s of it)" in out
    )
    run.idle_cpu_ms_per_s = None  # not read (--idle 0): the counts alone
    report(run)
    out = capsys.readouterr().out
    assert "idle" not in out.split(";")[0] and "2.10 API requests per Pod)" in out
    assert "per event" not in out


def test_the_idle_cpu_is_read_over_the_window_once_settled(monkeypatch: pytest.MonkeyPatch) -> None:
    settled_for: list[tuple[int, ...]] = []
    monkeypatch.setattr(bench, "settle", settled_for.append)
    clock = iter([100.0, 102.0])
    slept: list[float] = []

    class Probe(bench.Probe):
        pids: tuple[int, ...] = (7,)
        readings = iter([5.0, 5.05])

        def cpu(self) -> float:
            return next(self.readings)

    read = fleet._idle(Probe(), (1, 2), 2.0, lambda: next(clock), slept.append)
    assert read == pytest.approx(25.0)  # 50 ms over 2 s
    assert settled_for == [(1, 2, 7)] and slept == [2.0]
    assert fleet._idle(Probe(), (1,), 0) is None  # not read
    assert fleet.Settings(idle=5.0).arguments()[-2:] == ["--idle", "5.0"]
    assert "--idle" not in fleet.Settings().arguments()


def test_the_controller_counts_the_events_of_its_watches() -> None:
    from types import SimpleNamespace

    from modelserving.controller.kube import NODES, PODS, SERVICES
    from modelserving.controller.manager import Controller

    watches = [
        SimpleNamespace(res=PODS, events=3),
        SimpleNamespace(res=SERVICES, events=4),
        SimpleNamespace(res=NODES, events=50),  # heartbeats: not the fleet's events
    ]
    assert Controller.watch_events.fget(SimpleNamespace(watches=watches)) == 7  # type: ignore[attr-defined]
    assert Controller.watch_events.fget(SimpleNamespace(watches=[])) == 0  # type: ignore[attr-defined]
