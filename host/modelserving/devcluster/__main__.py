"""Command line of the dev cluster: ``python -m modelserving.devcluster build|up|down|status|env``.

Called by the Makefile targets ``cluster-build``, ``cluster-up``, ``cluster-down`` and
``cluster-status``; the folder defaults to ``.cluster`` in the current directory (the checkout).
"""

from __future__ import annotations

import argparse
import sys
import time
from collections.abc import Sequence
from pathlib import Path

from modelserving.devcluster import build, certs, cluster
from modelserving.devcluster.versions import BUNDLES, bundle_dir


def _say(message: str) -> None:
    print(f"devcluster: {message}", file=sys.stderr, flush=True)


def _build(args: argparse.Namespace) -> int:
    started = time.monotonic()
    try:
        binaries = build.build_all()
    except build.BuildError as error:
        _say(f"build failed: {error}")
        return 1
    for name, path in sorted(binaries.items()):
        print(f"{name}\t{path}")
    _say(f"all components ready in {time.monotonic() - started:.1f}s")
    return 0


def _up(args: argparse.Namespace) -> int:
    try:
        state = cluster.up(args.dir, nodes=args.nodes, timeout=args.timeout, log=_say)
    except (cluster.ClusterError, build.BuildError, certs.CertError, OSError) as error:
        _say(f"failed: {error}")
        _say(f"logs are in {args.dir.resolve() / 'logs'}; `make cluster-down` cleans up")
        return 1
    except KeyboardInterrupt:
        _say("interrupted: every process it had started is stopped")
        return 130
    print(f"kubeconfig: {state.kubeconfig}")
    print(f"kubectl:    {state.kubectl}")
    print(f"try:        {state.kubectl} --kubeconfig {state.kubeconfig} get nodes")
    return 0


def _down(args: argparse.Namespace) -> int:
    if cluster.down(args.dir):
        _say(f"stopped and removed {args.dir.resolve()}")
    else:
        _say("nothing to stop")
    return 0


def _status(args: argparse.Namespace) -> int:
    state = cluster.load_state(args.dir.resolve())
    if state is None:
        print("not running")
        for bundle in BUNDLES:
            built = build.read_stamp(bundle_dir(bundle), bundle) is not None
            print(f"  {bundle.key}: {'built' if built else 'not built'}")
        return 3
    healthy = cluster.is_healthy(state)
    print(f"{'running' if healthy else 'NOT HEALTHY'}: {state.server}")
    print(f"kubeconfig: {state.kubeconfig}")
    memory = cluster.rss_bytes(state)
    for record in state.processes:
        rss = memory.get(record.name)
        alive = f"pid {record.pid}, {rss / 2**20:.0f} MiB" if rss is not None else "gone"
        print(f"  {record.name:<24} {alive}  log {record.log}")
    print(f"  total RSS {sum(memory.values()) / 2**20:.0f} MiB")
    return 0 if healthy else 1


def _env(args: argparse.Namespace) -> int:
    directory = args.dir.resolve()
    print(f"export KUBECONFIG={directory / 'kubeconfig'}")
    print(f'export PATH="{directory / "bin"}:$PATH"')
    return 0


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m modelserving.devcluster")
    parser.add_argument("--dir", type=Path, default=Path(".cluster"), help="cluster folder")
    sub = parser.add_subparsers(dest="command", required=True)
    sub.add_parser(
        "build", help="build (or find cached) etcd, Kubernetes, kubectl, kwok, Volcano"
    ).set_defaults(run=_build)
    up = sub.add_parser("up", help="start the control plane (idempotent)")
    up.add_argument("--nodes", type=int, default=2, help="fake kwok Nodes to register")
    up.add_argument(
        "--timeout", type=float, default=cluster.DEFAULT_TIMEOUT, help="seconds per wait"
    )
    up.set_defaults(run=_up)
    sub.add_parser("down", help="stop it and remove its folder (idempotent)").set_defaults(
        run=_down
    )
    sub.add_parser("status", help="show processes, health, memory").set_defaults(run=_status)
    sub.add_parser("env", help="print shell exports for KUBECONFIG and kubectl").set_defaults(
        run=_env
    )
    args = parser.parse_args(argv)
    code: int = args.run(args)
    return code


if __name__ == "__main__":
    sys.exit(main())
