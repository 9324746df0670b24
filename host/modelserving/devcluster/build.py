"""Build (or find cached) etcd, the Kubernetes control plane, kubectl and kwok from Go modules.

Called by ``python -m modelserving.devcluster build|up`` and by the integration tests' conftest.
Only the Go module proxy is needed: each component is compiled from a small *wrapper module*
written into the cache (``<cache>/kube/<component>-<version>/src/go.mod``) that requires the
upstream module at its pinned version and turns the upstream's local ``replace`` directives
(``k8s.io/api => ./staging/...``, ``go.etcd.io/etcd/api/v3 => ../api``) into published module
versions, because ``go install module@version`` refuses modules with such replaces.

A finished build writes ``build.json``; a later call that finds it (and every binary) returns at
once. Builds of one component are serialised with a file lock, so a test run and a ``make
cluster-up`` started together do not compile twice.
"""

from __future__ import annotations

import fcntl
import json
import os
import re
import shutil
import subprocess
import sys
import time
from collections.abc import Callable, Iterator, Mapping, Sequence
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path

from modelserving.devcluster.versions import COMPONENTS, ETCD, KUBERNETES, KWOK, Component
from modelserving.devcluster.versions import component_dir as _component_dir

STAMP = "build.json"


class BuildError(RuntimeError):
    """A component could not be built; the message names it and quotes the end of its log."""


@dataclass(frozen=True)
class WrapperSpec:
    """How to build one component from a wrapper module."""

    component: Component
    module: str
    """The upstream module required by the wrapper, e.g. ``k8s.io/kubernetes``."""
    packages: tuple[str, ...]
    """Main packages to build; each binary is named after the last path element."""
    local_prefix: str
    """Upstream ``replace`` targets starting with this are local folders to be replaced."""
    replace_version: Callable[[str], str]
    """The published version to use for a module that upstream replaces with a local folder."""
    ldflags: tuple[str, ...] = ()


def kubernetes_staging_version(k8s_version: str) -> str:
    """Staging modules are tagged ``v0.<minor>.<patch>`` for Kubernetes ``v1.<minor>.<patch>``."""
    major, rest = k8s_version.lstrip("v").split(".", 1)
    if major != "1":
        raise ValueError(f"unexpected Kubernetes version {k8s_version!r}")
    return f"v0.{rest}"


def etcd_module_version(etcd_version: str, module: str) -> str:
    """etcd's sibling modules share its version, except ``client/v2`` (``v2.305.<patch>``)."""
    if module.endswith("/v2"):
        _major, minor, patch = etcd_version.lstrip("v").split(".")
        return f"v2.3{int(minor):02d}.{patch}"
    return etcd_version


def kubernetes_ldflags(version: str, build_date: str) -> tuple[str, ...]:
    """``-X`` flags so ``/version`` and ``kubectl version`` report the real release."""
    major, minor, _patch = version.lstrip("v").split(".")
    values = {
        "gitVersion": version,
        "gitMajor": major,
        "gitMinor": minor,
        "gitTreeState": "clean",
        "buildDate": build_date,
    }
    flags = []
    for package in ("k8s.io/component-base/version", "k8s.io/client-go/pkg/version"):
        flags += [f"-X {package}.{key}={value}" for key, value in values.items()]
    return tuple(flags)


def wrapper_spec(component: Component, build_date: str = "1970-01-01T00:00:00Z") -> WrapperSpec:
    """The wrapper recipe of one of the pinned components."""
    if component.name == KUBERNETES.name:
        staging = kubernetes_staging_version(component.version)
        return WrapperSpec(
            component,
            "k8s.io/kubernetes",
            tuple(f"k8s.io/kubernetes/cmd/{name}" for name in component.binaries),
            "./staging/",
            lambda _module: staging,
            kubernetes_ldflags(component.version, build_date),
        )
    if component.name == ETCD.name:
        version = component.version
        return WrapperSpec(
            component,
            "go.etcd.io/etcd/server/v3",
            ("go.etcd.io/etcd/server/v3",),
            "../",
            lambda module: etcd_module_version(version, module),
        )
    if component.name == KWOK.name:
        return WrapperSpec(
            component, "sigs.k8s.io/kwok", ("sigs.k8s.io/kwok/cmd/kwok",), "./", lambda _m: ""
        )
    raise ValueError(f"no build recipe for component {component.name!r}")


_REPLACE_LINE = re.compile(r"^\s*(?:replace\s+)?(\S+)(?:\s+v\S+)?\s+=>\s+(\S+)\s*$")
_GO_LINE = re.compile(r"^go\s+(\S+)\s*$", re.MULTILINE)


def local_replaces(go_mod: str, prefix: str) -> list[str]:
    """Module paths that ``go_mod`` replaces with a local folder starting with ``prefix``."""
    modules = []
    for line in go_mod.splitlines():
        match = _REPLACE_LINE.match(line.split("//", 1)[0])
        if match and match.group(2).startswith(prefix):
            modules.append(match.group(1))
    return modules


def go_directive(go_mod: str) -> str:
    """The ``go`` line of a go.mod (the wrapper needs at least the upstream's)."""
    match = _GO_LINE.search(go_mod)
    return match.group(1) if match else "1.22"


def render_go_mod(spec: WrapperSpec, go_version: str, replaces: Mapping[str, str]) -> str:
    """The wrapper module's go.mod: require the upstream, pin each replaced module."""
    name = re.sub(r"[^a-z0-9]+", "", spec.component.name.lower())
    lines = [
        "// Generated by modelserving.devcluster.build; do not edit.",
        f"module modelserving.local/devcluster/{name}",
        "",
        f"go {go_version}",
        "",
        f"require {spec.module} {spec.component.version}",
    ]
    if replaces:
        lines += ["", "replace ("]
        lines += [f"\t{module} => {module} {version}" for module, version in replaces.items()]
        lines.append(")")
    return "\n".join(lines) + "\n"


def read_stamp(directory: Path, component: Component) -> dict[str, object] | None:
    """The stamp of a finished build of ``component`` in ``directory``, or None if incomplete."""
    try:
        stamp = json.loads((directory / STAMP).read_text())
    except (OSError, ValueError):
        return None
    if not isinstance(stamp, dict) or stamp.get("version") != component.version:
        return None
    for binary in component.binaries:
        if not os.access(directory / "bin" / binary, os.X_OK):
            return None
    return stamp


@contextmanager
def _locked(path: Path) -> Iterator[None]:
    path.parent.mkdir(parents=True, exist_ok=True)
    with path.open("a") as handle:
        fcntl.flock(handle, fcntl.LOCK_EX)
        try:
            yield
        finally:
            fcntl.flock(handle, fcntl.LOCK_UN)


def _go_env() -> dict[str, str]:
    env = dict(os.environ)
    env["CGO_ENABLED"] = "0"
    env["GOWORK"] = "off"  # a go.work of the caller must not pull the wrapper into a workspace
    env["GOFLAGS"] = (env.get("GOFLAGS", "") + " -mod=mod").strip()
    env.pop("GOOS", None)
    env.pop("GOARCH", None)
    return env


def _run(args: Sequence[str], cwd: Path, log: Path, env: Mapping[str, str]) -> str:
    with log.open("a") as out:
        out.write(f"$ {' '.join(args)}\n")
        out.flush()
        proc = subprocess.run(
            args, cwd=cwd, env=env, stdout=subprocess.PIPE, stderr=out, text=True, check=False
        )
        out.write(proc.stdout)
    if proc.returncode != 0:
        tail = "\n".join(log.read_text().splitlines()[-25:])
        raise BuildError(f"{' '.join(args[:3])} failed ({proc.returncode}); log {log}:\n{tail}")
    return proc.stdout


def _upstream_go_mod(spec: WrapperSpec, cwd: Path, log: Path, env: Mapping[str, str]) -> str:
    target = f"{spec.module}@{spec.component.version}"
    info = json.loads(_run(["go", "mod", "download", "-json", target], cwd, log, env))
    return Path(info["GoMod"]).read_text()


def build_component(component: Component, *, quiet: bool = False) -> Path:
    """Build ``component`` into its cache folder unless already there; return its ``bin`` dir."""
    directory = _component_dir(component)
    if read_stamp(directory, component) is not None:
        return directory / "bin"
    with _locked(directory.with_name(directory.name + ".lock")):
        if read_stamp(directory, component) is not None:
            return directory / "bin"
        if shutil.which("go") is None:
            raise BuildError("`go` is not on PATH; it is needed to build the dev cluster")
        started = time.monotonic()
        if not quiet:
            print(
                f"devcluster: building {component.key} (log in {directory}/build.log)",
                file=sys.stderr,
            )
        _build_into(
            directory, wrapper_spec(component, time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()))
        )
        seconds = round(time.monotonic() - started, 1)
        go_version = subprocess.run(
            ["go", "version"], capture_output=True, text=True, check=False
        ).stdout.strip()
        stamp = {
            "component": component.name,
            "version": component.version,
            "seconds": seconds,
            "go": go_version,
        }
        (directory / STAMP).write_text(json.dumps(stamp, indent=2) + "\n")
        if not quiet:
            print(f"devcluster: built {component.key} in {seconds:.0f}s", file=sys.stderr)
    return directory / "bin"


def _build_into(directory: Path, spec: WrapperSpec) -> None:
    src, tmp_bin, log = directory / "src", directory / "bin.partial", directory / "build.log"
    shutil.rmtree(tmp_bin, ignore_errors=True)
    (directory / STAMP).unlink(missing_ok=True)
    src.mkdir(parents=True, exist_ok=True)
    tmp_bin.mkdir()
    log.write_text("")
    env = _go_env()
    upstream = _upstream_go_mod(spec, directory, log, env)
    replaces = {m: spec.replace_version(m) for m in local_replaces(upstream, spec.local_prefix)}
    (src / "go.mod").write_text(render_go_mod(spec, go_directive(upstream), replaces))
    (src / "go.sum").unlink(missing_ok=True)
    ldflags = " ".join(("-s", "-w", *spec.ldflags))
    # One package: name the binary (etcd's main package ends in /v3); several: a folder.
    single = len(spec.packages) == 1
    output = str(tmp_bin / spec.component.binaries[0]) if single else f"{tmp_bin}/"
    _run(
        ["go", "build", "-trimpath", "-ldflags", ldflags, "-o", output, *spec.packages],
        src,
        log,
        env,
    )
    missing = [name for name in spec.component.binaries if not (tmp_bin / name).is_file()]
    if missing:
        raise BuildError(f"building {spec.component.key} did not produce {', '.join(missing)}")
    shutil.rmtree(directory / "bin", ignore_errors=True)
    tmp_bin.rename(directory / "bin")


def build_all(*, quiet: bool = False) -> dict[str, Path]:
    """Build every pinned component; map each binary name to its cached path."""
    binaries: dict[str, Path] = {}
    for component in COMPONENTS:
        bin_dir = build_component(component, quiet=quiet)
        binaries.update({name: bin_dir / name for name in component.binaries})
    return binaries


def cached_binaries() -> dict[str, Path] | None:
    """Every binary's path when all components are built, else None (never builds)."""
    binaries: dict[str, Path] = {}
    for component in COMPONENTS:
        directory = _component_dir(component)
        if read_stamp(directory, component) is None:
            return None
        binaries.update({name: directory / "bin" / name for name in component.binaries})
    return binaries
