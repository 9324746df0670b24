"""Entry point of the ``modelserving`` command: parses arguments and reports errors uniformly.

Every known failure prints ``error: <message>`` on stderr and exits 1; the message names the
object, the field or plugin, and the cause.
"""

from __future__ import annotations

import argparse
import sys
from collections.abc import Sequence

from modelserving import __version__
from modelserving.api.errors import ModelServingError
from modelserving.cli import crd_cmd, plugin_cmd, render_cmd, run_cmd
from modelserving.cli.manifests import ManifestError


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="modelserving",
        description="Controller and tools for Kthena-compatible ModelServing resources.",
    )
    parser.add_argument("--version", action="version", version=f"modelserving {__version__}")
    sub = parser.add_subparsers(dest="command", required=True, metavar="COMMAND")
    render_cmd.add_parser(sub)
    crd_cmd.add_parser(sub)
    plugin_cmd.add_parser(sub)
    run_cmd.add_parser(sub)
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
