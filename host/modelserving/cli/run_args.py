"""``modelserving run``: the controller, in the foreground, until SIGINT/SIGTERM.

Credentials come from ``--kubeconfig``, else in-cluster, else ``$KUBECONFIG`` / ``~/.kube/config``.
``--local-cluster DIR`` (what ``make run`` uses when ``$KUBECONFIG`` is unset) first starts the
local control plane in DIR (building its binaries once), installs the CRD and a demo
ModelServing whose Pods get a built-in plugin and a WebAssembly plugin delivered by ConfigMap,
and prints how to look at the result.
"""

from __future__ import annotations

import argparse
from pathlib import Path
from typing import Any


def add_parser(sub: Any) -> None:
    p = sub.add_parser(
        "run",
        help="run the controller (reconcile ModelServings) in the foreground",
        description=__doc__,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    p.add_argument("--config", type=Path, help="operator configuration file (YAML)")
    p.add_argument("--kubeconfig", help="kubeconfig file (default: in-cluster or $KUBECONFIG)")
    p.add_argument("--identity", help="this replica's name in the leader Lease (default: host)")
    p.add_argument(
        "--no-leader-election",
        action="store_true",
        help="act at once, without taking the leader Lease (a single replica only)",
    )
    p.add_argument(
        "--local-cluster",
        type=Path,
        metavar="DIR",
        help="start the local control plane in DIR and install a demo first",
    )
    p.add_argument("--log-level", default="info", choices=["debug", "info", "warning", "error"])
    p.set_defaults(func=_run)


def _run(args: argparse.Namespace) -> int:
    from modelserving.cli import run_cmd

    return run_cmd.run(args)
