"""The wrapper-module recipe and the build cache of the dev cluster (no Go, no network)."""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest

from modelserving.devcluster import build
from modelserving.devcluster.versions import ETCD, KUBERNETES, KWOK, Component, cache_root

UPSTREAM = """module go.etcd.io/etcd/server/v3

go 1.26.0

require (
\tgo.etcd.io/etcd/api/v3 v3.5.35
)

replace (
\tgo.etcd.io/etcd/api/v3 => ../api
\tgo.etcd.io/etcd/client/v2 => ../client/v2 // a comment
)

replace go.etcd.io/etcd/raft/v3 v3.5.0 => ../raft

replace (
\tgo.etcd.io/etcd => ./FORBIDDEN_DEPENDENCY
\texample.com/forked => example.com/fork v1.2.3
)
"""


def test_local_replaces_finds_only_folder_targets() -> None:
    assert build.local_replaces(UPSTREAM, "../") == [
        "go.etcd.io/etcd/api/v3",
        "go.etcd.io/etcd/client/v2",
        "go.etcd.io/etcd/raft/v3",
    ]


def test_go_directive_is_read_from_upstream() -> None:
    assert build.go_directive(UPSTREAM) == "1.26.0"
    assert build.go_directive("module x\n") == "1.22"


def test_kubernetes_staging_modules_use_v0_minor_patch() -> None:
    assert build.kubernetes_staging_version("v1.34.4") == "v0.34.4"
    with pytest.raises(ValueError, match="unexpected"):
        build.kubernetes_staging_version("v2.0.0")


def test_etcd_client_v2_has_its_own_numbering() -> None:
    assert build.etcd_module_version("v3.5.35", "go.etcd.io/etcd/client/v2") == "v2.305.35"
    assert build.etcd_module_version("v3.5.35", "go.etcd.io/etcd/api/v3") == "v3.5.35"


def test_rendered_wrapper_requires_upstream_and_pins_each_replace() -> None:
    spec = build.wrapper_spec(KUBERNETES)
    text = build.render_go_mod(
        spec, "1.24.0", {"k8s.io/api": "v0.34.4", "k8s.io/kubectl": "v0.34.4"}
    )
    lines = text.splitlines()
    assert "module modelserving.local/devcluster/kubernetes" in lines
    assert "go 1.24.0" in lines
    assert f"require k8s.io/kubernetes {KUBERNETES.version}" in lines
    assert "\tk8s.io/api => k8s.io/api v0.34.4" in lines
    assert "\tk8s.io/kubectl => k8s.io/kubectl v0.34.4" in lines
    # The wrapper's own replaces point at versions, never at folders.
    assert build.local_replaces(text, ".") == []


def test_wrapper_without_replaces_has_no_replace_block() -> None:
    text = build.render_go_mod(build.wrapper_spec(KWOK), "1.24.0", {})
    assert "replace" not in text


def test_every_component_has_a_recipe_building_its_binaries() -> None:
    for component in (ETCD, KUBERNETES, KWOK):
        spec = build.wrapper_spec(component)
        if component is not ETCD:
            assert tuple(p.rsplit("/", 1)[1] for p in spec.packages) == component.binaries
    assert any(
        "gitVersion=" + KUBERNETES.version in f for f in build.wrapper_spec(KUBERNETES).ldflags
    )
    with pytest.raises(ValueError, match="no build recipe"):
        build.wrapper_spec(Component("nope", "v1", ("nope",)))


def test_cache_root_precedence(tmp_path: Path) -> None:
    assert cache_root({"MODELSERVING_CACHE": str(tmp_path)}) == tmp_path
    assert cache_root({"XDG_CACHE_HOME": "/x"}) == Path("/x/modelserving")
    assert cache_root({"HOME": "/home/u"}) == Path("/home/u/.cache/modelserving")


def _fake_build(directory: Path, component: Component, version: str | None = None) -> None:
    (directory / "bin").mkdir(parents=True)
    for name in component.binaries:
        binary = directory / "bin" / name
        binary.write_text("#!/bin/sh\n")
        binary.chmod(0o755)
    stamp = {"component": component.name, "version": version or component.version}
    (directory / build.STAMP).write_text(json.dumps(stamp))


def test_stamp_is_needed_and_must_match_version(tmp_path: Path) -> None:
    assert build.read_stamp(tmp_path, ETCD) is None
    _fake_build(tmp_path, ETCD, version="v0.0.0")
    assert build.read_stamp(tmp_path, ETCD) is None
    (tmp_path / build.STAMP).write_text(json.dumps({"version": ETCD.version}))
    assert build.read_stamp(tmp_path, ETCD) is not None
    os.chmod(tmp_path / "bin" / "etcd", 0o644)
    assert build.read_stamp(tmp_path, ETCD) is None


def test_cached_build_returns_without_go(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("MODELSERVING_CACHE", str(tmp_path))
    monkeypatch.setenv("PATH", "/nonexistent")  # no `go`: a cache hit must not need it
    assert build.cached_binaries() is None
    for component in (ETCD, KUBERNETES, KWOK):
        _fake_build(tmp_path / "kube" / component.key, component)
    binaries = build.build_all(quiet=True)
    assert (
        binaries["kube-apiserver"] == tmp_path / "kube" / KUBERNETES.key / "bin" / "kube-apiserver"
    )
    assert build.cached_binaries() == binaries


def test_missing_go_is_reported(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("MODELSERVING_CACHE", str(tmp_path))
    monkeypatch.setenv("PATH", "/nonexistent")
    with pytest.raises(build.BuildError, match="go"):
        build.build_component(KWOK, quiet=True)
