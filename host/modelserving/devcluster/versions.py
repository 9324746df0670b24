"""Pinned versions of the local control plane and where their binaries are cached.

Read by ``build`` (what to compile, where to put it) and ``cluster`` (which binaries to run).
Changing a version here is the only step needed to move the dev cluster to another release:
the cache is keyed by ``<component>-<version>``, so old and new builds live side by side.
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from pathlib import Path

KUBERNETES_VERSION = "v1.34.4"
"""The Kubernetes release of kube-apiserver, kube-controller-manager, kube-scheduler and kubectl."""

ETCD_VERSION = "v3.5.35"
"""The etcd server release (3.5.x is supported by Kubernetes 1.34)."""

KWOK_VERSION = "v0.7.0"
"""kwok release; v0.7.0 still has its default node and pod stages built in."""


@dataclass(frozen=True)
class Component:
    """One Go program (or a family built from one module) with its pinned version."""

    name: str
    version: str
    binaries: tuple[str, ...]

    @property
    def key(self) -> str:
        """The cache folder name, e.g. ``etcd-v3.5.35``."""
        return f"{self.name}-{self.version}"


KUBERNETES = Component(
    "kubernetes",
    KUBERNETES_VERSION,
    ("kube-apiserver", "kube-controller-manager", "kube-scheduler", "kubectl"),
)
ETCD = Component("etcd", ETCD_VERSION, ("etcd",))
KWOK = Component("kwok", KWOK_VERSION, ("kwok",))
COMPONENTS: tuple[Component, ...] = (ETCD, KUBERNETES, KWOK)


def cache_root(env: dict[str, str] | None = None) -> Path:
    """``$MODELSERVING_CACHE``, else ``$XDG_CACHE_HOME/modelserving``, else ``~/.cache/...``."""
    env = dict(os.environ) if env is None else env
    explicit = env.get("MODELSERVING_CACHE")
    if explicit:
        return Path(explicit).expanduser()
    xdg = env.get("XDG_CACHE_HOME") or str(Path(env.get("HOME", str(Path.home()))) / ".cache")
    return Path(xdg).expanduser() / "modelserving"


def component_dir(component: Component, env: dict[str, str] | None = None) -> Path:
    """The folder holding one component's wrapper module, binaries and build stamp."""
    return cache_root(env) / "kube" / component.key
