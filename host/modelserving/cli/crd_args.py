"""``modelserving crd``: its arguments. Light: the command (``cli.crd_cmd``, which builds the
pydantic models' schema and writes YAML) is imported only when it runs."""

from __future__ import annotations

import argparse
from typing import Any

CRD_FILE = "workload.serving.volcano.sh_modelservings.yaml"


def add_parser(sub: Any) -> None:
    p = sub.add_parser("crd", help="print or write the ModelServing CustomResourceDefinition")
    p.add_argument("--output-dir", help=f"write {CRD_FILE} into this directory")
    p.add_argument(
        "--check",
        action="store_true",
        help="with --output-dir: fail if the file there is not what would be written",
    )
    p.set_defaults(func=_run)


def _run(args: argparse.Namespace) -> int:
    from modelserving.cli import crd_cmd

    return crd_cmd.run(args)
