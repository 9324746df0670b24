"""Entry point of the ``modelserving`` command: parses arguments and reports errors uniformly.

Every known failure prints ``error: <message>`` on stderr and exits 1; the message names the
object, the field or plugin, and the cause.

Building the parser imports only the ``*_args`` modules (argparse and light modules); a command's
implementation, with kopf, the Kubernetes client, wasmtime, pydantic or YAML, is imported when it
runs, so ``--version`` and ``--help`` start fast (tests/unit/cli/test_startup_imports.py).
"""

from __future__ import annotations

import argparse
import sys
from collections.abc import Sequence

from modelserving import __version__
from modelserving.api.errors import ModelServingError
from modelserving.cli import crd_args, plugin_args, render_args, run_args
from modelserving.cli.errors import ManifestError


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="modelserving",
        description="Controller and tools for Kthena-compatible ModelServing resources.",
    )
    parser.add_argument("--version", action="version", version=f"modelserving {__version__}")
    sub = parser.add_subparsers(dest="command", required=True, metavar="COMMAND")
    render_args.add_parser(sub)
    crd_args.add_parser(sub)
    plugin_args.add_parser(sub)
    run_args.add_parser(sub)
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    try:
        return int(args.func(args))
    except (ModelServingError, ManifestError) as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 1
    except BrokenPipeError:
        return 0


if __name__ == "__main__":
    sys.exit(main())
