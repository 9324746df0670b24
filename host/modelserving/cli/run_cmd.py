"""``modelserving run``: the controller, in the foreground, until SIGINT/SIGTERM.

The command's implementation (kopf, the Kubernetes client, the chain); its arguments and
description are in ``cli.run_args``, which imports this module when the command runs.
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
