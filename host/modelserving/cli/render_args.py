"""``modelserving render``: the Pods and Services the controller would create, offline.

Reads ModelServing manifests (ConfigMaps are accepted for the modules of Wasm plugins), builds
each plugin chain, generates every Pod and runs OnPodCreate, then prints one YAML stream sorted
by kind and name. ``--explain`` puts each plugin's validated patch above every Pod as comments
(a plugin in Monitor mode: the patch it would have made, not applied to the Pod).
"""

from __future__ import annotations

import argparse
from pathlib import Path
from typing import Any


def add_parser(sub: Any) -> None:
    p = sub.add_parser(
        "render",
        help="print the Pods and Services a ModelServing produces, plugins applied",
        description=__doc__,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    p.add_argument(
        "-f",
        "--filename",
        dest="files",
        action="append",
        required=True,
        metavar="FILE",
        help="manifest file (YAML or JSON, '-' for stdin); repeatable",
    )
    p.add_argument(
        "-n",
        "--namespace",
        default="default",
        help="namespace for objects that name none (default: default)",
    )
    p.add_argument(
        "--explain", action="store_true", help="show each plugin's validated patch above every Pod"
    )
    p.add_argument(
        "--config",
        type=Path,
        metavar="FILE",
        help="operator configuration file (YAML) whose patchPolicy, pluginNamespaces and "
        "maxPodsPerModelServing apply, as `run --config` uses them (default: their defaults)",
    )
    p.add_argument(
        "--volcano",
        action="store_true",
        help="assume a current Volcano is installed (its PodGroup CRD, with subGroupPolicy): "
        "with schedulerName volcano, one PodGroup per ServingGroup and Volcano's annotations "
        "on every Pod, as Kthena creates them",
    )
    p.set_defaults(func=_run)


def _run(args: argparse.Namespace) -> int:
    from modelserving.cli import render_cmd

    return render_cmd.run(args)
