"""``modelserving plugin pack``: a WebAssembly module as a ConfigMap, and the PluginSpec pinning it.

The output is one YAML document, the ConfigMap, so it can go straight to
``kubectl apply --server-side -f -``; the ``spec.plugins`` entry is a comment above it, each line
prefixed with ``#   `` (``sed -n 's/^#   //p'`` extracts it as YAML).

The ConfigMap holds the module under ``binaryData[key]``, gzip-compressed with ``--gzip``
(deterministically: no name, no timestamp). The pinned ``sha256`` is the digest of the
uncompressed module, which is what the controller checks after reading and decompressing the
ConfigMap (``plugins.modules.module_from_config_map``, then ``Sandbox.load(data, sha256)``).
"""

from __future__ import annotations

import base64
import hashlib
import re
from dataclasses import dataclass
from typing import Any

from modelserving.cli.manifests import dump_stream, dump_yaml
from modelserving.plugins.modules import (
    CONFIG_MAP_MAX_BYTES,
    check_module_size,
    gzip_module,
)

CONFIG_MAP_KEY = re.compile(r"[-._a-zA-Z0-9]+")
"""What Kubernetes accepts as a ConfigMap key (at most 253 characters)."""
SNIPPET_PREFIX = "#   "
"""Each line of the spec.plugins entry in the output starts with this, and no other line does."""
SNIPPET_INDENT = SNIPPET_PREFIX.removeprefix("# ")  # dump_stream writes comments as "# " + line
LAST_APPLIED_LIMIT = 256 * 1024
"""Kubernetes' limit on all annotations of an object. Client-side ``kubectl apply`` copies the
whole object into one (``kubectl.kubernetes.io/last-applied-configuration``)."""


@dataclass(frozen=True)
class Packed:
    """A module packed for a ConfigMap."""

    name: str
    key: str
    namespace: str | None
    module_size: int
    sha256: str
    stored: bytes  # binaryData[key]: the module, or its gzip
    gzipped: bool

    def config_map(self) -> dict[str, Any]:
        metadata: dict[str, Any] = {"name": self.name}
        if self.namespace:
            metadata["namespace"] = self.namespace
        return {
            "apiVersion": "v1",
            "kind": "ConfigMap",
            "metadata": metadata,
            "binaryData": {self.key: base64.b64encode(self.stored).decode("ascii")},
        }

    def plugin_spec(self, config: Any = None) -> dict[str, Any]:
        """The ``spec.plugins`` entry; ``config`` defaults to an empty map (a placeholder)."""
        ref: dict[str, Any] = {"name": self.name, "key": self.key}
        if self.namespace:
            ref["namespace"] = self.namespace
        return {
            "name": self.name,
            "type": "Wasm",
            "module": {"configMapRef": ref, "sha256": self.sha256},
            "config": {} if config is None else config,
            "failurePolicy": "Fail",
        }

    def manifest(self) -> str:
        """The ConfigMap as a YAML stream, the spec.plugins entry as a comment above it."""
        return dump_stream([self.config_map()], comments={0: self._comment()})

    def _comment(self) -> str:
        stored = (
            f"stored gzip-compressed, {len(self.stored)} bytes"
            if self.gzipped
            else "stored uncompressed"
        )
        where = (
            f"in namespace {self.namespace} (other namespaces' ModelServings need it in "
            "pluginNamespaces)"
            if self.namespace
            else "in the ModelServing's namespace (kubectl -n NAMESPACE)"
        )
        lines = []
        for line in dump_yaml([self.plugin_spec()]).splitlines():
            if line.strip() == "config: {}":
                indent = line[: len(line) - len(line.lstrip())]
                lines += [
                    f"{indent}# the plugin's config, checked by its ValidateConfig when the "
                    "chain is built",
                    line,
                    f"{indent}# limits: {{fuel: 100000000, memoryMiB: 64, timeoutMs: 250}}"
                    "  # optional",
                ]
            else:
                lines.append(line)
        return "\n".join(
            [
                f"modelserving plugin pack: module {self.name}, {self.module_size} bytes "
                f"({stored}), sha256",
                f"{self.sha256}.",
                "Create the ConfigMap with `kubectl apply --server-side -f FILE` (or `kubectl "
                "create -f FILE`)",
                f"{where};",
                "then add this entry to the ModelServing's spec.plugins "
                "(`sed -n 's/^#   //p' FILE` prints it):",
                "",
                *(SNIPPET_INDENT + line for line in lines),
            ]
        )


def pack_module(
    module: bytes, name: str, key: str, namespace: str | None, compress: bool
) -> Packed:
    """Pack ``module`` (already checked to load). Raises ModuleTooLarge (with the remedy) when
    it does not fit in a ConfigMap's 1 MiB as it would be stored. (That the controller reads the
    module back from the ConfigMap is tests/unit/cli/test_plugin_pack.py's concern.)"""
    stored = gzip_module(module) if compress else module
    if len(stored) > CONFIG_MAP_MAX_BYTES:  # the module is the ConfigMap's only value
        check_module_size(module, gzipped=compress, limit=CONFIG_MAP_MAX_BYTES)  # raises
    packed = Packed(
        name=name,
        key=key,
        namespace=namespace,
        module_size=len(module),
        sha256=hashlib.sha256(module).hexdigest(),
        stored=stored,
        gzipped=compress,
    )
    return packed
