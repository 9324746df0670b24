"""The command line's own error, in a module of its own so that ``cli.main`` can catch it without
importing the YAML reader (``cli.manifests`` raises it and re-exports it)."""

from __future__ import annotations


class ManifestError(ValueError):
    """A file that cannot be read as Kubernetes manifests."""
