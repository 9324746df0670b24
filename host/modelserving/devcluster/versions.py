"""Pinned versions of the local control plane and where their binaries are cached.

Read by ``build`` (what to compile, where to put it) and ``cluster`` (which binaries to run).
Changing a version here is the only step needed to move the dev cluster to another release:
the cache folder's name holds every version (and the recipe number), so old and new builds live
side by side.

The programs are compiled in *bundles*: one Go module requiring every upstream of the bundle at
its pinned version, linked into one binary that runs the program it is started as (``argv[0]``),
with one symlink per program. Packages the upstreams share are compiled once and the binary is
linked once; at run time the processes share its pages.
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from pathlib import Path

KUBERNETES_VERSION = "v1.34.4"
"""The Kubernetes release of kube-apiserver, kube-controller-manager, kube-scheduler and kubectl."""

ETCD_VERSION = "v3.6.4"
"""The etcd server release: the one Kubernetes 1.34 is released and tested with (its go.mod
requires it), so etcd shares Kubernetes' module graph and most of its compiled packages."""

VOLCANO_VERSION = "v1.10.0"
"""Volcano's scheduler and controller manager (PodGroups, Queues, gang scheduling): the newest
release the Go module proxy serves here. It is built against Kubernetes 1.30's client
libraries; the integration tests run it against this control plane (``test_volcano.py``)."""

KWOK_VERSION = "v0.7.0"
"""kwok release; v0.7.0 still has its default node and pod stages built in."""


@dataclass(frozen=True)
class Component:
    """One upstream Go module at its pinned version and the programs built from it."""

    name: str
    version: str
    binaries: tuple[str, ...]

    @property
    def key(self) -> str:
        """``<name>-<version>``, e.g. ``etcd-v3.6.4``."""
        return f"{self.name}-{self.version}"


@dataclass(frozen=True)
class Bundle:
    """Components built together into one multi-call binary (see the module docstring)."""

    name: str
    components: tuple[Component, ...]
    recipe: int
    """Raised whenever the way the bundle is built changes, so a stale build is not reused."""

    @property
    def binaries(self) -> tuple[str, ...]:
        return tuple(name for component in self.components for name in component.binaries)

    @property
    def key(self) -> str:
        """The cache folder name: every component's version and the recipe number."""
        parts = "_".join(component.key for component in self.components)
        return f"{self.name}_{parts}_r{self.recipe}"


KUBERNETES = Component(
    "kubernetes",
    KUBERNETES_VERSION,
    ("kube-apiserver", "kube-controller-manager", "kube-scheduler"),
)
KUBECTL = Component("kubectl", KUBERNETES_VERSION, ("kubectl",))
"""kubectl comes from the same module as the control plane (``k8s.io/kubernetes``)."""
ETCD = Component("etcd", ETCD_VERSION, ("etcd",))
KWOK = Component("kwok", KWOK_VERSION, ("kwok",))
VOLCANO = Component("volcano", VOLCANO_VERSION, ("vc-scheduler", "vc-controller-manager"))
COMPONENTS: tuple[Component, ...] = (ETCD, KUBERNETES, KWOK, KUBECTL, VOLCANO)
CONTROL_PLANE = Bundle("controlplane", (ETCD, KUBERNETES, KUBECTL, KWOK), recipe=6)
"""kwok is built with the control plane's Kubernetes 1.34 libraries, not the 1.33 ones its
go.mod asks for: a cold build compiles those libraries once, not twice. v0.7.0 reads one
apimachinery constant 1.34 removed; the build patches its value in (``build.upstream``), and
makes its deletion of a terminating Pod carry the Pod's UID, as a kubelet's does. The
only newer kwok release (v0.8.0) needs Kubernetes 1.36's libraries. kubectl is in the bundle
too: kwok raises a few shared dependencies (golang.org/x/sys, protobuf) above Kubernetes' own
versions, so a kubectl built apart would compile most of Kubernetes' packages again."""
VOLCANO_BUNDLE = Bundle("volcano", (VOLCANO,), recipe=2)
"""Volcano on its own: it pins Kubernetes 1.30's libraries (its go.mod's replaces), which the
control plane's 1.34 module graph cannot hold."""
BUNDLES: tuple[Bundle, ...] = (CONTROL_PLANE, VOLCANO_BUNDLE)
"""Every bundle: what the local cluster runs, and kubectl."""


def cache_root(env: dict[str, str] | None = None) -> Path:
    """``$MODELSERVING_CACHE``, else ``$XDG_CACHE_HOME/modelserving``, else ``~/.cache/...``."""
    env = dict(os.environ) if env is None else env
    explicit = env.get("MODELSERVING_CACHE")
    if explicit:
        return Path(explicit).expanduser()
    xdg = env.get("XDG_CACHE_HOME") or str(Path(env.get("HOME", str(Path.home()))) / ".cache")
    return Path(xdg).expanduser() / "modelserving"


def bundle_dir(bundle: Bundle, env: dict[str, str] | None = None) -> Path:
    """The folder holding one bundle's wrapper module, binaries and build stamp."""
    return cache_root(env) / "kube" / bundle.key


def go_cache_dirs(env: dict[str, str] | None = None) -> tuple[Path, Path]:
    """Go's build cache and module cache, shared with the Go plugin builds
    (``plugins-src/build-go.sh`` uses the same two folders)."""
    root = cache_root(env) / "go"
    return root / "build", root / "mod"
