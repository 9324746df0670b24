"""Reading Kubernetes manifests from YAML or JSON files (multi-document, ``kind: List``) and
writing YAML streams. Used by the CLI commands."""

from __future__ import annotations

import sys
from collections.abc import Iterable, Iterator
from pathlib import Path
from typing import Any

import yaml

_Loader: Any = getattr(yaml, "CSafeLoader", yaml.SafeLoader)
_BaseDumper: Any = getattr(yaml, "CSafeDumper", yaml.SafeDumper)


class _Dumper(_BaseDumper):  # type: ignore[misc]
    """Never writes anchors/aliases: every object is printed in full, as kubectl expects."""

    def ignore_aliases(self, data: Any) -> bool:
        return True


class ManifestError(ValueError):
    """A file that cannot be read as Kubernetes manifests."""


def read_documents(path: str) -> Iterator[dict[str, Any]]:
    """Every object in ``path`` (``-`` is standard input); Lists are flattened."""
    try:
        text = sys.stdin.read() if path == "-" else Path(path).read_text(encoding="utf-8")
    except OSError as exc:
        raise ManifestError(f"{path}: cannot read: {exc.strerror or exc}") from None
    try:
        docs = list(yaml.load_all(text, Loader=_Loader))
    except yaml.YAMLError as exc:
        raise ManifestError(f"{path}: not valid YAML: {exc}") from None
    for i, doc in enumerate(docs):
        if doc is None:
            continue
        if not isinstance(doc, dict):
            raise ManifestError(f"{path}: document {i + 1} is not a map")
        if doc.get("kind") == "List" or (
            str(doc.get("kind", "")).endswith("List") and isinstance(doc.get("items"), list)
        ):
            for item in doc["items"]:
                if isinstance(item, dict):
                    yield item
            continue
        yield doc


def dump_stream(objects: Iterable[dict[str, Any]], comments: dict[int, str] | None = None) -> str:
    """A YAML stream; ``comments`` maps an object's position to comment text put above it."""
    parts = []
    for i, obj in enumerate(objects):
        text = yaml.dump(obj, Dumper=_Dumper, sort_keys=False, default_flow_style=False)
        comment = (comments or {}).get(i)
        if comment:
            text = "".join(f"# {line}\n" if line else "#\n" for line in comment.splitlines()) + text
        parts.append(text)
    return "---\n" + "---\n".join(parts) if parts else ""


def dump_yaml(obj: Any) -> str:
    return str(yaml.dump(obj, Dumper=_Dumper, sort_keys=False, default_flow_style=False))
