"""``modelserving plugin``: run, inspect, benchmark, package and create plugins offline.

  run      call one hook of a module on a request file; print the patched Pod, the patch, the
           fuel and time used and the guest's log lines as one JSON object
  inspect  describe a module: ABI version, flavour, hooks, imports, exports, size, sha256
  bench    time one hook call through the controller's path (WebAssembly or native)
  pack     check a module loads as the controller loads it; print a ConfigMap holding it and,
           as a comment, the spec.plugins entry that pins its sha256
  new      generate a plugin project (Rust or Go) that builds, tests, runs and packs as generated

MODULE is a .wasm file, a .wat text file (assembled first), or the name of a built-in plugin
(its compiled module from the package). A file of that name wins over a built-in.

Exit codes: 0 success; 1 the plugin failed (the first line on stderr starts with the failure
class, e.g. "FuelExhausted: plugin 'x' OnPodCreate: ...", followed by the guest's log lines), or
pack's module does not fit in a ConfigMap ("error: ..."), or the request holds a value no
request can carry (an integer beyond 64 bits: "error: <file>: config.a.b: integer ... is
outside the 64-bit range ..."); 2 usage error ("error: ...": bad arguments or names, unreadable
or malformed files, unknown built-in, a non-empty target folder, no SDK sources). See
docs/plugin-cli.md for the request file format.
"""

from __future__ import annotations

import argparse
from typing import Any

from modelserving.api.hook import HOOK_SPECS, Hook
from modelserving.cli.scaffold import LANGUAGES

HOOKS: dict[str, Hook] = {spec.option: spec.hook for spec in HOOK_SPECS}
WARMUP = 10


# --- command line ----------------------------------------------------------------------------


def _positive(text: str) -> int:
    try:
        value = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"not a whole number: {text!r}") from None
    if value < 1:
        raise argparse.ArgumentTypeError(f"must be at least 1, not {value}")
    return value


def _module_arg(p: argparse.ArgumentParser) -> None:
    p.add_argument(
        "module",
        metavar="MODULE",
        help="a .wasm file, a .wat text file, or a built-in plugin's name (e.g. demo-pod-tweaks)",
    )


def _request_args(p: argparse.ArgumentParser, default_hook: str | None) -> None:
    hooks = ", ".join(HOOKS)
    p.add_argument(
        "--hook",
        choices=list(HOOKS),
        required=default_hook is None,
        default=default_hook,
        metavar="HOOK",
        help=f"the hook to call: {hooks}" + (f" (default: {default_hook})" if default_hook else ""),
    )
    p.add_argument(
        "--request",
        required=True,
        metavar="FILE",
        help="YAML or JSON request fields: plugin {name, config}, modelServing, servingGroup, "
        "roleName, roleId, isEntry, pod (on-serving-group-change: plugin, modelServing, "
        "servingGroup, expectedPods, pods) ('-' for stdin; see docs/plugin-cli.md)",
    )
    p.add_argument(
        "--config",
        metavar="FILE",
        help="YAML or JSON file whose map replaces plugin.config of the request",
    )
    p.add_argument(
        "--name",
        help="the plugin name in the request (default: the request's plugin.name, "
        "else the module's file stem or the built-in's name)",
    )
    p.add_argument("--fuel", type=_positive, metavar="N", help="fuel per call (default: sandbox)")
    p.add_argument("--memory-mib", type=_positive, metavar="N", help="memory cap per call in MiB")
    p.add_argument("--timeout-ms", type=_positive, metavar="N", help="deadline per call in ms")


def add_parser(sub: Any) -> None:
    p = sub.add_parser(
        "plugin",
        help="run, inspect or benchmark a plugin module offline",
        description=__doc__,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    commands = p.add_subparsers(dest="plugin_command", required=True, metavar="SUBCOMMAND")
    _add_run(commands)
    _add_inspect(commands)
    _add_bench(commands)
    _add_pack(commands)
    _add_new(commands)


def _add_run(commands: Any) -> None:
    run = commands.add_parser(
        "run",
        help="call one hook on a request file and print the result as JSON",
        description="Encode the request (ABI v1), call the hook in a fresh sandboxed instance, "
        "decode the response and, for on-pod-create, validate and apply the patch with the "
        "default patch policy. Prints one JSON object: hook, plugin, sha256, patch, pod, "
        "fuelConsumed, durationUs, logs. Exit 1 with the failure class on stderr when the "
        "plugin fails; exit 2 on usage errors.",
    )
    _module_arg(run)
    _request_args(run, None)
    run.set_defaults(func=_run)


def _add_inspect(commands: Any) -> None:
    inspect = commands.add_parser(
        "inspect",
        help="describe a module (ABI version, hooks, imports, exports, size, sha256)",
        description="Load and check a module as the controller does and print what it is as "
        "JSON. Exit 1 with 'InvalidModule: ...' on stderr when the module is refused.",
    )
    _module_arg(inspect)
    inspect.set_defaults(func=_inspect)


def _add_bench(commands: Any) -> None:
    bench = commands.add_parser(
        "bench",
        help="time one hook call through the controller's path",
        description="Time one hook call as the controller makes it. wasm: encode (the parts "
        "shared by every Pod encoded once), fresh instance, call, decode, validate and apply the "
        "patch. native (built-ins only): the native hook on a copy of the Pod, validate and "
        f"apply. After {WARMUP} warm-up calls, prints p50Us, p99Us, meanUs, meanFuel "
        "(null for native), iterations and runtime as JSON.",
    )
    _module_arg(bench)
    _request_args(bench, "on-pod-create")
    bench.add_argument(
        "--runtime",
        choices=["wasm", "native"],
        default="wasm",
        help="wasm (default) or native (a built-in's Python implementation)",
    )
    bench.add_argument(
        "--iterations", type=_positive, default=1000, metavar="N", help="timed calls (default 1000)"
    )
    bench.set_defaults(func=_bench)


def _add_pack(commands: Any) -> None:
    pack = commands.add_parser(
        "pack",
        help="print a ConfigMap holding a module, and the spec.plugins entry pinning it",
        description="Check that the module loads as the controller loads it (marker, exports, "
        "imports), then print one YAML document, a ConfigMap holding the module under "
        "binaryData (gzip-compressed with --gzip), for `kubectl apply --server-side -f -`; the "
        "spec.plugins entry for a ModelServing (name, type Wasm, module.configMapRef, the "
        "sha256 of the uncompressed module, a config placeholder) is a comment above it, its "
        "lines prefixed with '#   ' (sed -n 's/^#   //p' extracts it). Exit 1 when the module "
        "is refused (InvalidModule) or does not fit in a ConfigMap (1 MiB); 2 on usage errors.",
    )
    _module_arg(pack)
    pack.add_argument(
        "--name",
        required=True,
        help="the ConfigMap's name and the plugin's name in spec.plugins (a DNS-1123 label)",
    )
    pack.add_argument(
        "--namespace",
        metavar="NS",
        help="the ConfigMap's namespace, also set as configMapRef.namespace (default: none, "
        "i.e. kubectl's namespace and the ModelServing's)",
    )
    pack.add_argument(
        "--key",
        help="the binaryData key (default: NAME.wasm, or NAME.wasm.gz with --gzip)",
    )
    pack.add_argument(
        "--gzip",
        action="store_true",
        help="store the module gzip-compressed (the controller decompresses it; the sha256 is "
        "still that of the module)",
    )
    pack.set_defaults(func=_pack)


def _add_new(commands: Any) -> None:
    new = commands.add_parser(
        "new",
        help="generate a plugin project that builds, tests, runs and packs as generated",
        description="Generate a plugin project in DIR (default: ./NAME; it must not exist or be "
        "empty) that depends on the guest SDK of this modelserving checkout by path: the plugin "
        "(OnPodCreate adds a label from the config; ValidateConfig), native tests, "
        "request.yaml, README.md, and build.sh plus a Makefile using the toolchain of the "
        "SDK's own build (rust: plugins-src/build.sh, Debian's Rust 1.63, "
        "wasm32-unknown-unknown; go: plugins-src/build-go.sh's TinyGo v0.37.0, or with "
        "TOOLCHAIN=go its exact standard Go version, wasip1), offline once the toolchain is "
        "installed. Exit 2 on a bad name, a non-empty DIR or when the SDK sources are not found.",
    )
    new.add_argument("name", metavar="NAME", help="the plugin's name (a DNS-1123 label)")
    new.add_argument(
        "--lang",
        required=True,
        choices=list(LANGUAGES),
        help="the plugin's language: rust or go",
    )
    new.add_argument("--dir", metavar="DIR", help="the project's folder (default: ./NAME)")
    new.add_argument(
        "--sdk",
        metavar="DIR",
        help="the guest SDK's folder (default: plugins-src/sdk-<lang> of the checkout this "
        "modelserving runs from)",
    )
    new.set_defaults(func=_new)


# The commands (``cli.plugin_cmd``: the sandbox, the chain, the built-ins) are imported when one
# runs, not when the parser is built.


def _run(args: argparse.Namespace) -> int:
    from modelserving.cli import plugin_cmd

    return plugin_cmd.run_cmd(args)


def _inspect(args: argparse.Namespace) -> int:
    from modelserving.cli import plugin_cmd

    return plugin_cmd.inspect_cmd(args)


def _bench(args: argparse.Namespace) -> int:
    from modelserving.cli import plugin_cmd

    return plugin_cmd.bench_cmd(args)


def _pack(args: argparse.Namespace) -> int:
    from modelserving.cli import plugin_cmd

    return plugin_cmd.pack_cmd(args)


def _new(args: argparse.Namespace) -> int:
    from modelserving.cli import plugin_cmd

    return plugin_cmd.new_cmd(args)
