"""``make bench``, fleet part: the controller's cost per Pod as the fleet grows (1k, 5k, 10k Pods).

For each size, a fresh local control plane with enough kwok Nodes (110 Pods each) and a fresh
controller in a Python process of its own get one ModelServing of the controller benchmark's
shape (ServingGroups of 2 roles x an entry and 3 workers, no plugins), or with ``--models M``
the same Pods in M ModelServings (each with an M-th of the ServingGroups). Printed per size: the
time until every Pod is created and until every ModelServing is available, the controller's CPU
to available per Pod (and the control plane's, which the controller's requests and watches
cost too), its API requests per Pod, the process's peak resident memory, and a
rolling update of the whole fleet (a new image; ``maxUnavailable: 25%``) until every
ServingGroup is updated and available again, with its CPU per Pod, its watch events and API
requests per Pod and its CPU per event; and the controller's CPU per second while idle (``IDLE_S``
once the fleet is available), which a rollout pays for as long as it lasts. The cost per Pod
should stay flat as the fleet grows. Figures are printed, never asserted; the sizes run in
order, smallest first, and a size that does not finish in time is reported and ends the
benchmark.
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
import time
from collections.abc import Callable
from dataclasses import asdict, dataclass, replace
from pathlib import Path
from typing import Any

from modelserving import devcluster
from modelserving.api.operator import OperatorConfig
from modelserving.bench import controller as bench
from modelserving.controller.kube import MODEL_SERVINGS, PODS, Kube, api_client

SIZES = (1000, 5000, 10000)
PODS_PER_GROUP = len(bench.ROLES) * (1 + bench.WORKERS)
PODS_PER_NODE = 100
"""kwok Nodes take 110 Pods; a little room is left."""
TIMEOUT_S = 900.0
IDLE_S = 30.0
"""How long the controller's CPU is read with nothing changing, once the fleet is available."""
PREFIX = "fleet-run: "
OURS = "ours"
NAMESPACE = "fleet"
NEW_IMAGE = "vllm/vllm-openai:v0.10.1"
"""The image the rolling update moves every Pod to."""


@dataclass
class FleetRun:
    pods: int
    created: float | None = None
    available: float | None = None
    cpu_available: float | None = None
    requests: int | None = None
    peak_rss_mb: float | None = None
    rollout: float | None = None
    cpu_rollout: float | None = None
    passes_rollout: int | None = None
    pass_cpu_rollout: float | None = None
    updated_at_timeout: str | None = None
    """When the rolling update ran out of time: how far it got ("updated/groups")."""
    error: str | None = None
    models: int = 1
    """How many ModelServings share the Pods."""
    controller: str = OURS
    """Whose controller made them: ours, or Kthena's (``--kthena``)."""
    control_plane_cpu_available: float | None = None
    """CPU the control plane's processes (API server, etcd, scheduler, kwok...) used until
    available: what the controller's requests and watches cost the rest of the machine."""
    rollout_reported: float | None = None
    """When the ModelServings' status first said the rolling update done; ``rollout`` is when
    every Pod was in fact replaced and Ready."""
    events_available: int | None = None
    """Pod and Service watch events our controller handled until available."""
    events_rollout: int | None = None
    """The same through the rolling update."""
    requests_rollout: int | None = None
    """Our controller's API requests through the rolling update."""
    control_plane_cpu_rollout: float | None = None
    """CPU the control plane's processes used from the rolling update's start until the status
    said it done (``rollout_reported``): whether the machine's cores were the limit."""
    idle_cpu_ms_per_s: float | None = None
    """The controller's CPU while nothing changes (``IDLE_S`` once the fleet is available and
    settled), per second: what it costs for as long as a rollout takes, whatever its size."""


def settled(ms: dict[str, Any], generation: int, groups: int) -> bool:
    status = ms.get("status") or {}
    conditions = {c.get("type"): c.get("status") for c in status.get("conditions") or []}
    return (
        (status.get("observedGeneration") or 0) >= generation
        and status.get("updatedReplicas") == groups
        and status.get("availableReplicas") == groups
        and conditions.get("Available") == "True"
    )


def _wait(
    kube: Kube, names: list[str], generation: int, groups: int, timeout: float
) -> float | None:
    """When every ModelServing of ``names`` (``groups`` ServingGroups each) settled at
    ``generation``; None when not within ``timeout``."""
    deadline = time.perf_counter() + timeout
    left = set(names)
    while time.perf_counter() < deadline:
        if len(names) == 1:
            found = [kube.get(MODEL_SERVINGS, NAMESPACE, names[0]) or {}]
        else:
            found = kube.list(MODEL_SERVINGS, NAMESPACE)
        for ms in found:
            if settled(ms, generation, groups):
                left.discard((ms.get("metadata") or {}).get("name"))
        if not left:
            return time.perf_counter()
        time.sleep(0.5)
    return None


def model_names(models: int) -> list[str]:
    """The ModelServings' names: ``fleet`` alone, else ``fleet-000``, ``fleet-001``..."""
    return ["fleet"] if models == 1 else [f"fleet-{i:03d}" for i in range(models)]


def split(pods: int, models: int) -> int:
    """ServingGroups per ModelServing for about ``pods`` Pods in ``models`` of them (at least 1)."""
    return max(1, pods // PODS_PER_GROUP // models)


def _whose(kthena: Path | None) -> str:
    return OURS if kthena is None else bench.KTHENA


def operator_config(api_writes: int | None = None) -> OperatorConfig:
    """Our controller's settings in a run: no leader election; ``api_writes`` when given."""
    settings: dict[str, Any] = {"leaderElection": {"enabled": False}}
    if api_writes is not None:
        settings["concurrency"] = {"apiWrites": api_writes}
    return OperatorConfig.model_validate(settings)


@dataclass(frozen=True)
class Settings:
    """How each size runs: the command line's options, passed on to the child that runs it."""

    timeout: float = TIMEOUT_S
    models: int = 1
    kthena: Path | None = None
    """Kthena's controller binary: the fleet made by it instead of ours."""
    api_writes: int | None = None
    """Our controller's ``concurrency.apiWrites`` (None: the operator config's default)."""
    rollout: bool = True
    idle: float = IDLE_S
    """Seconds the idle controller's CPU is read once the fleet is available (0: not read)."""

    def arguments(self) -> list[str]:
        """These settings as the child's command-line options."""
        out = ["--timeout", str(self.timeout), "--models", str(self.models)]
        if self.kthena is not None:
            out += ["--kthena", str(self.kthena)]
        if self.api_writes is not None:
            out += ["--api-writes", str(self.api_writes)]
        if not self.rollout:
            out.append("--no-rollout")
        if self.idle != IDLE_S:
            out += ["--idle", str(self.idle)]
        return out


def one_size(binaries: dict[str, Path], pods: int, settings: Settings) -> FleetRun:
    """One fleet on its own control plane (in this process: run it in a child, see main), made
    by our controller or, given its binary, by Kthena's."""
    models, kthena = settings.models, settings.kthena
    groups = split(pods, models)
    run = FleetRun(groups * PODS_PER_GROUP * models, models=models, controller=_whose(kthena))
    config = operator_config(settings.api_writes)
    how = (settings.timeout, settings.rollout, settings.idle)
    nodes = run.pods // PODS_PER_NODE + 2
    with bench.fresh_cluster(binaries, nodes=nodes) as (kubeconfig, pids):
        client = api_client(str(kubeconfig), pool_size=config.concurrency.api_writes + 8)
        ours = api_client(str(kubeconfig), pool_size=4)
        try:
            kube = Kube(ours)
            bench.install_crd(kube)
            if kthena is not None:
                with bench.kthena_controller(kthena, kubeconfig) as probe:
                    measure(kube, probe, None, pids, groups, run, *how)
            else:
                with bench.running_controller(client, config) as ctl:
                    measure(kube, bench.Probe(ctl), ctl, pids, groups, run, *how)
        finally:
            client.close()
            ours.close()
    return run


def measure(
    kube: Kube,
    probe: bench.Probe,
    ctl: Any,
    pids: tuple[int, ...],
    groups: int,
    run: FleetRun,
    timeout: float = TIMEOUT_S,
    rollout: bool = True,
    idle: float = IDLE_S,
) -> None:
    """The fleet's figures into ``run``; ``probe`` reads the controller's CPU and memory,
    ``ctl`` (ours only, None for Kthena's) its API requests and passes. Without ``rollout``
    the figures end when the fleet is available."""
    bench.create_namespace(kube, NAMESPACE)
    names = model_names(run.models)
    body = bench.model_serving("fleet", [], groups)
    body["metadata"]["namespace"] = NAMESPACE
    body["spec"]["rolloutStrategy"] = {
        "type": "ServingGroupRollingUpdate",
        "rollingUpdateConfiguration": {"maxUnavailable": "25%"},
    }
    bench.settle(pids + probe.pids)
    # every Pod of the benchmark's template has the label app=bench
    watch = bench.PodWatch(kube, NAMESPACE, "fleet", run.pods, selector="app=bench")
    probe.reset_peak()
    requests = ctl.kube.requests if ctl is not None else 0
    events = ctl.watch_events if ctl is not None else 0
    cpu, others = probe.cpu(), bench.control_plane_cpu(pids)
    started = time.perf_counter()
    for name in names:
        kube.create(
            MODEL_SERVINGS, NAMESPACE, {**body, "metadata": {**body["metadata"], "name": name}}
        )
    if watch.wait(timeout) and watch.last is not None:
        run.created = watch.last - started
    watch.close()
    ready = _wait(kube, names, 1, groups, timeout)
    if ready is None:
        run.error = f"not available within {timeout:.0f} s"
        return
    run.available = ready - started
    run.cpu_available = probe.cpu() - cpu
    others_after = bench.control_plane_cpu(pids)
    if others is not None and others_after is not None:
        run.control_plane_cpu_available = others_after - others
    if ctl is not None:
        run.requests = ctl.kube.requests - requests
        run.events_available = ctl.watch_events - events
    run.idle_cpu_ms_per_s = _idle(probe, pids, idle)
    if rollout:
        _roll(kube, probe, ctl, pids, names, body, groups, run, timeout)
    if run.peak_rss_mb is None:
        run.peak_rss_mb = _peak_mb(probe)


def _idle(
    probe: bench.Probe,
    pids: tuple[int, ...],
    seconds: float,
    clock: Callable[[], float] = time.perf_counter,
    sleep: Callable[[float], None] = time.sleep,
) -> float | None:
    """The controller's CPU per second (in ms) over ``seconds`` once the control plane has
    settled: its watches, resyncs and timers, with no Pod changing (None: not measured)."""
    if seconds <= 0:
        return None
    bench.settle(pids + probe.pids)
    cpu, started = probe.cpu(), clock()
    sleep(seconds)
    return (probe.cpu() - cpu) / (clock() - started) * 1000


def _peak_mb(probe: bench.Probe) -> float | None:
    peak = probe.status_kb("VmHWM")
    return peak / 1024 if peak is not None else None


def _roll(
    kube: Kube,
    probe: bench.Probe,
    ctl: Any,
    pids: tuple[int, ...],
    names: list[str],
    body: dict[str, Any],
    groups: int,
    run: FleetRun,
    timeout: float,
) -> None:
    """The whole fleet rolls to a new image: its figures into ``run``."""
    cpu, others = probe.cpu(), bench.control_plane_cpu(pids)
    passes, pass_cpu = (sum(ctl.passes.values()), ctl.pass_cpu_seconds) if ctl else (0, 0.0)
    events, requests = (ctl.watch_events, ctl.kube.requests) if ctl else (0, 0)
    started = time.perf_counter()
    patch = {"spec": {"template": {"roles": body["spec"]["template"]["roles"]}}}
    for role in patch["spec"]["template"]["roles"]:
        for kind in ("entryTemplate", "workerTemplate"):
            role[kind]["spec"]["containers"][0]["image"] = NEW_IMAGE
    for name in names:
        kube.merge_patch(MODEL_SERVINGS, NAMESPACE, name, patch)
    done = _wait(kube, names, 2, groups, timeout)
    checking = 0.0
    if done is not None:
        run.rollout_reported = done - started
        others_after = bench.control_plane_cpu(pids)  # before the lists that check the Pods
        if others is not None and others_after is not None:
            run.control_plane_cpu_rollout = others_after - others
        if not probe.pids:  # ours, in this process: before the lists of every Pod below
            run.peak_rss_mb = _peak_mb(probe)
        done, checking = _replaced(kube, run.pods, started + timeout)
    # the CPU is reported also when the rollout ran out of time: the CPU of the part it did;
    # the lists that checked the Pods are this process's, not a controller's
    run.cpu_rollout = probe.cpu() - cpu - (checking if not probe.pids else 0.0)
    if ctl is not None:
        run.passes_rollout = sum(ctl.passes.values()) - passes
        run.pass_cpu_rollout = ctl.pass_cpu_seconds - pass_cpu
        run.events_rollout = ctl.watch_events - events
        run.requests_rollout = ctl.kube.requests - requests
    if done is None and run.rollout_reported is not None:
        run.error = (
            f"the status said the rolling update done at {run.rollout_reported:.1f} s, but its "
            f"Pods were not all replaced and Ready within {timeout:.0f} s"
        )
    elif done is None:
        updated = sum(
            ((ms.get("status") or {}).get("updatedReplicas") or 0)
            for ms in kube.list(MODEL_SERVINGS, NAMESPACE)
        )
        run.updated_at_timeout = f"{updated}/{groups * run.models}"
        run.error = (
            f"the rolling update did not finish within {timeout:.0f} s "
            f"({run.updated_at_timeout} ServingGroups updated by then; its CPU is of that part)"
        )
    else:
        run.rollout = done - started


def replaced(pods: list[dict[str, Any]], want: int) -> bool:
    """Whether these are ``want`` Pods of the new image, each Ready and none terminating."""
    if len(pods) != want:
        return False
    for pod in pods:
        if (pod.get("metadata") or {}).get("deletionTimestamp"):
            return False
        containers = (pod.get("spec") or {}).get("containers") or []
        if not containers or any(c.get("image") != NEW_IMAGE for c in containers):
            return False
        conditions = (pod.get("status") or {}).get("conditions") or []
        if not any(c.get("type") == "Ready" and c.get("status") == "True" for c in conditions):
            return False
    return True


def _replaced(kube: Kube, want: int, deadline: float) -> tuple[float | None, float]:
    """When the fleet's Pods were all replaced (None: not by ``deadline``), and the CPU this
    thread spent listing them. A status may say the rollout done while old Pods of the same
    names are still Ready; the Pods themselves are the proof. The time is the start of the
    list that showed them so: the API server answers a list from the state it holds when the
    list arrives, and reading 10,000 Pods takes this client seconds (7.6 s at 10k), which
    belong to the benchmark, not to the rollout."""
    spent = 0.0
    while True:
        before, asked = time.thread_time(), time.perf_counter()
        # every Pod of the benchmark's template has the label app=bench
        pods = kube.list(PODS, NAMESPACE, "app=bench")
        spent += time.thread_time() - before
        if replaced(pods, want):
            return asked, spent
        if time.perf_counter() >= deadline:
            return None, spent
        time.sleep(2.0)


def in_child(pods: int, settings: Settings) -> FleetRun:
    command = [sys.executable, "-m", "modelserving.bench.fleet", "--one", str(pods)]
    command += settings.arguments()
    timeout = settings.timeout * 3
    done = subprocess.run(command, capture_output=True, text=True, timeout=timeout, check=False)
    for line in done.stdout.splitlines():
        if line.startswith(PREFIX):
            return FleetRun(**json.loads(line[len(PREFIX) :]))
    tail = " | ".join((done.stderr or "").strip().splitlines()[-3:])
    error = f"exit {done.returncode}: {tail}"
    return FleetRun(pods, error=error, models=settings.models, controller=_whose(settings.kthena))


def report(run: FleetRun) -> None:
    def fig(value: float | None, fmt: str) -> str:
        return "n/a" if value is None else format(value, fmt)

    per_pod = run.cpu_available / run.pods * 1000 if run.cpu_available is not None else None
    others = run.control_plane_cpu_available
    others_per_pod = others / run.pods * 1000 if others is not None else None
    rolled = run.pods  # Pods the rollout's CPU went to: all, or those updated by its timeout
    if run.updated_at_timeout is not None:
        rolled = int(run.updated_at_timeout.split("/")[0]) * PODS_PER_GROUP
    roll = run.cpu_rollout / rolled * 1000 if run.cpu_rollout is not None and rolled else None
    per = "Pod" if run.updated_at_timeout is None else "updated Pod"
    asks = run.requests / run.pods if run.requests is not None else None
    where = "" if run.models == 1 else f" in {run.models} ModelServings"
    who = "" if run.controller == OURS else f" ({run.controller})"
    rolling = (
        ""  # not run (--no-rollout, or the fleet never became available)
        if run.cpu_rollout is None
        else f"; rolling update {fig(run.rollout, '.1f')} s{_reported(run)}, "
        f"{fig(roll, '.2f')} ms CPU/{per} ({fig(run.passes_rollout, 'd')} passes, "
        f"{fig(run.pass_cpu_rollout, '.1f')} s CPU in them{_per_event(run, rolled)})"
        + _rollout_cores(run)
    )
    print(
        f"  {run.pods:>6} Pods{where}{who}: created {fig(run.created, '6.1f')} s, available "
        f"{fig(run.available, '6.1f')} s, CPU to available {fig(per_pod, '.2f')} ms/Pod "
        f"(control plane {fig(others_per_pod, '.1f')} ms/Pod), "
        f"{fig(asks, '.2f')} API requests/Pod, peak RSS {fig(run.peak_rss_mb, '.0f')} MB"
        + ("" if run.idle_cpu_ms_per_s is None else f", idle {run.idle_cpu_ms_per_s:.1f} ms CPU/s")
        + rolling
        + (f"; {run.error}" if run.error else ""),
        flush=True,
    )


def _per_event(run: FleetRun, rolled: int) -> str:
    """The rolling update's watch events and API requests per Pod, and its CPU per event once
    the idle CPU of its duration is taken out (ours only: Kthena's has no counts)."""
    if run.events_rollout is None or run.requests_rollout is None or not rolled:
        return ""
    text = (
        f"; {run.events_rollout / rolled:.1f} watch events and "
        f"{run.requests_rollout / rolled:.2f} API requests per Pod"
    )
    took = run.rollout
    if run.cpu_rollout is None or run.idle_cpu_ms_per_s is None or took is None:
        return text
    idle = run.idle_cpu_ms_per_s * took / 1000
    busy = run.cpu_rollout - idle
    if run.events_rollout:
        text += f", {busy / run.events_rollout * 1e6:.0f} us CPU per event beyond idle"
    return text + f" (idle: {idle:.1f} s of it)"


def _rollout_cores(run: FleetRun) -> str:
    """The control plane's CPU through the rolling update, per Pod and in cores (of the time
    until the status said it done), with the controller's beside it."""
    took, others = run.rollout_reported, run.control_plane_cpu_rollout
    if took is None or others is None or took <= 0:
        return ""
    text = f"; control plane {others / run.pods * 1000:.1f} ms/Pod, {others / took:.2f} cores"
    if run.cpu_rollout is not None and run.rollout:
        text += f" (the controller {run.cpu_rollout / run.rollout:.2f})"
    return text


def _reported(run: FleetRun) -> str:
    """What the status said, when it said the rollout done well before it was."""
    early = run.rollout_reported
    if early is None or (run.rollout is not None and run.rollout - early < REPORTED_SLACK_S):
        return ""
    return f" (its status said done at {early:.1f} s)"


REPORTED_SLACK_S = 5.0
"""How much earlier than the Pods a status may say a rollout done without being quoted."""


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(prog="python -m modelserving.bench.fleet")
    parser.add_argument(
        "--sizes",
        default=",".join(map(str, SIZES)),
        help="Pods per fleet, comma-separated (default 1000,5000,10000)",
    )
    parser.add_argument(
        "--timeout",
        type=float,
        default=TIMEOUT_S,
        help=f"seconds coming up, and the rolling update, may each take (default {TIMEOUT_S:.0f})",
    )
    parser.add_argument(
        "--models",
        type=int,
        default=1,
        help="split each fleet's Pods over this many ModelServings (default 1)",
    )
    bench.add_kthena_argument(
        parser, "also run each size with Kthena's controller, on a fresh control plane of its own"
    )
    parser.add_argument(
        "--api-writes",
        type=int,
        help="our controller's concurrency.apiWrites (default: the operator config's default)",
    )
    parser.add_argument(
        "--no-rollout",
        dest="rollout",
        action="store_false",
        help="end each run when the fleet is available (no rolling update)",
    )
    parser.add_argument(
        "--idle",
        type=float,
        default=IDLE_S,
        help="seconds the idle controller's CPU is read once the fleet is available "
        f"(default {IDLE_S:.0f}; 0: not read)",
    )
    parser.add_argument("--one", type=int, help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    models = max(1, args.models)
    settings = Settings(args.timeout, models, args.kthena, args.api_writes, args.rollout, args.idle)
    binaries = devcluster.cached_binaries()
    if args.one:
        if binaries is None:
            raise SystemExit("no local control plane binaries")
        run = one_size(binaries, args.one, settings)
        print(PREFIX + json.dumps(asdict(run)), flush=True)
        return
    shared = "one ModelServing" if models == 1 else f"{models} ModelServings"
    print(
        f"fleet benchmark: {shared} of N Pods in all (ServingGroups of 2 roles x 4 Pods, no "
        f"plugins) on N/{PODS_PER_NODE}+2 kwok Nodes, a fresh control plane and controller "
        "process per size; then a rolling update of the whole fleet (maxUnavailable 25%)"
    )
    if binaries is None:
        print("  skipped: the local control plane is not built (make cluster-build)")
        return
    if args.kthena is not None:
        print(f"  kthena: {args.kthena} {' '.join(bench.KTHENA_FLAGS)}")
    controllers: list[Path | None] = [None] if args.kthena is None else [None, args.kthena]
    for pods in (int(p) for p in args.sizes.split(",") if p.strip()):
        runs = [in_child(pods, replace(settings, kthena=kthena)) for kthena in controllers]
        for run in runs:
            report(run)
        if any(run.error for run in runs):
            break
    print("  target (issues 19 and 21): the controller's CPU per Pod does not grow with the fleet")


if __name__ == "__main__":
    main()
