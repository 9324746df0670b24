"""``modelserving run``: the controller, in the foreground, until SIGINT/SIGTERM.

Credentials come from ``--kubeconfig``, else in-cluster, else ``$KUBECONFIG`` / ``~/.kube/config``.
``--local-cluster DIR`` (what ``make run`` uses when ``$KUBECONFIG`` is unset) first starts the
local control plane in DIR (building its binaries once), installs the CRD and a demo
ModelServing whose Pods get a built-in plugin and a WebAssembly plugin delivered by ConfigMap,
and prints how to look at the result.
"""

from __future__ import annotations

import argparse
import logging
import signal
import sys
import threading
from pathlib import Path
from typing import Any

import modelserving.cli.demo as demo
from modelserving.controller.config import load_config
from modelserving.controller.kube import api_client
from modelserving.controller.manager import Controller


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
    p.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    logging.basicConfig(
        level=args.log_level.upper(),
        format="%(asctime)s %(levelname)s %(name)s: %(message)s",
    )
    for noisy in ("kopf", "kubernetes", "urllib3", "aiohttp"):
        logging.getLogger(noisy).setLevel(max(logging.WARNING, logging.getLogger().level))
    config = load_config(args.config)
    if args.no_leader_election:
        config.leader_election.enabled = False
    kubeconfig = args.kubeconfig
    if args.local_cluster is not None:
        kubeconfig = str(demo.start_local_cluster(args.local_cluster))
    client = api_client(kubeconfig, pool_size=config.concurrency.api_writes + 8)
    if args.local_cluster is not None:
        demo.install(client, Path(kubeconfig or ""))
    controller = Controller(config, client, identity=args.identity)
    stop = threading.Event()

    def on_signal(signum: int, _frame: Any) -> None:
        logging.getLogger("modelserving.controller").info("signal %d: stopping", signum)
        stop.set()

    signal.signal(signal.SIGINT, on_signal)
    signal.signal(signal.SIGTERM, on_signal)
    announce = None
    if args.local_cluster is not None:

        def announce() -> None:
            print(demo.how_to_look(Path(kubeconfig or "")), file=sys.stderr, flush=True)

    try:
        return controller.run(stop, ready=announce)
    finally:
        client.close()
