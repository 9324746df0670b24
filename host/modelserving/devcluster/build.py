"""Build (or find cached) the local control plane's binaries from Go modules.

Called by ``python -m modelserving.devcluster build|up`` and by the integration tests' conftest.
Only the Go module proxy is needed. Each :class:`~versions.Bundle` is compiled from a small
*wrapper module* written into the cache (``<cache>/kube/<bundle key>/src``): its ``go.mod``
requires every upstream module at its pinned version and turns the upstreams' local ``replace``
directives (``k8s.io/api => ./staging/...``, ``go.etcd.io/etcd/api/v3 => ../api``) into
published module versions, because a module with such replaces cannot be required as it is;
its Go files (from ``multicall/`` beside this file: ``main.go`` and one file per component)
run the program named by ``argv[0]``.
One ``go build`` compiles every package once and links one binary; ``bin/`` gets a symlink
per program.

The build is lean on purpose: ``-trimpath``, no DWARF in the compiler or the linker
(``-gcflags=all=-dwarf=false``, ``-ldflags=-s -w``), no inlining outside the standard library
(``GCFLAGS``), cgo off, and Go's build and module caches
shared with the Go plugin builds (``versions.go_cache_dirs``), and ``GOGC=400`` for the compiler.

A finished build writes ``build.json``; a later call that finds it (and every binary) returns at
once. Builds of one bundle are serialised with a file lock, so a test run and a ``make
cluster-up`` started together do not compile twice.
"""

from __future__ import annotations

import fcntl
import json
import os
import re
import shutil
import signal
import subprocess
import sys
import threading
import time
from collections.abc import Callable, Iterator, Mapping, Sequence
from concurrent.futures import FIRST_EXCEPTION, ThreadPoolExecutor, wait
from contextlib import contextmanager, suppress
from dataclasses import dataclass, field
from pathlib import Path

from modelserving.devcluster.interrupts import SignalGuard
from modelserving.devcluster.versions import (
    BUNDLES,
    ETCD,
    KUBECTL,
    KUBERNETES,
    KWOK,
    VOLCANO,
    Bundle,
    Component,
    bundle_dir,
    go_cache_dirs,
)

STAMP = "build.json"
ASSET_CRDS = "crds"
"""The bundle folder holding the CustomResourceDefinitions its programs need installed."""
VOLCANO_CRDS_SOURCE = "installer/helm/chart/volcano/crd/bases"
"""Where Volcano's module keeps the CRDs its scheduler and controllers watch."""
BINARY = "multicall"
"""The file name of a bundle's binary in ``bin/``; each program is a symlink to it."""

_LOCK_POLL_S = 0.2
STD_GCFLAGS = "-dwarf=false"
"""The compiler's flags for the standard library: no DWARF. ``plugins-src/build-go.sh`` vets and
tests natively with the same (``-gcflags=all=-dwarf=false``), to reuse the standard library
packages compiled here from Go's shared build cache."""
GCFLAGS = (f"-gcflags=all={STD_GCFLAGS} -l", f"-gcflags=std={STD_GCFLAGS}")
"""The compiler's flags (the last pattern a package matches wins): no DWARF anywhere, and no
inlining outside the standard library. Both bundles from an empty build cache took 1,100 s of
CPU so (alone on the machine), against 1,309 s with inlining (in a cold ``make test``, not
counting the downloads). The 800-Pod controller benchmark (``--one none``, three runs each,
alternated) showed no difference beyond its noise: the control plane's CPU had a median of
28.4 s against 29.2 s with inlining, the ModelServing was available after 26.7 s against
26.8 s; the hot paths are the standard library's (JSON, HTTP, TLS, reflection, the runtime).
With inlining off in the standard library too, the integration tests had run 50 s longer."""
MULTICALL = Path(__file__).with_name("multicall")
"""The Go sources of the multi-call binary: ``main.go`` and ``<component name>.go`` each."""


class BuildError(RuntimeError):
    """A bundle could not be built; the message names it and quotes the end of its log."""


@dataclass(frozen=True)
class Upstream:
    """How one component's module enters a wrapper module."""

    component: Component
    module: str
    """The upstream module required by the wrapper, e.g. ``k8s.io/kubernetes``."""
    local_prefix: str
    """Upstream ``replace`` targets starting with this are local folders to be replaced."""
    replace_version: Callable[[str], str]
    """The published version to use for a module that upstream replaces with a local folder."""
    ldflags: tuple[str, ...] = ()
    keep_version_replaces: bool = False
    """Carry the upstream's ``X => X vN`` replaces into the wrapper (Volcano pins Kubernetes'
    libraries that way; a dependency's replaces are otherwise ignored by Go)."""
    assets: Mapping[str, str] = field(default_factory=dict)
    """Files the cluster needs besides the binary: a folder of the upstream module (its YAML
    files) to the bundle folder it is copied to, e.g. Volcano's CRDs to ``crds``."""
    patches: Mapping[str, tuple[tuple[str, str], ...]] = field(default_factory=dict)
    """Source edits that let the module compile in its bundle: a file of the module to the
    ``(old, new)`` text replacements made in it. A module with patches is built from a copy in
    the wrapper's folder (``replace`` by a local path); an edit whose old text is missing stops
    the build (the pinned version changed under it)."""


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


def upstream(component: Component, build_date: str = "1970-01-01T00:00:00Z") -> Upstream:
    """How one of the pinned components enters its bundle's wrapper module."""
    if component.name in (KUBERNETES.name, KUBECTL.name):
        staging = kubernetes_staging_version(component.version)
        return Upstream(
            component,
            "k8s.io/kubernetes",
            "./staging/",
            lambda _module: staging,
            kubernetes_ldflags(component.version, build_date),
        )
    if component.name == ETCD.name:
        version = component.version
        return Upstream(
            component,
            "go.etcd.io/etcd/server/v3",
            "../",
            lambda module: etcd_module_version(version, module),
        )
    if component.name == KWOK.name:
        # Built against the control plane's Kubernetes 1.34 libraries (whose packages the
        # bundle compiles anyway) rather than its own 1.33 ones: 1.34 removed one apimachinery
        # constant kwok v0.7.0 reads, so its value is written in its place.
        return Upstream(
            component,
            "sigs.k8s.io/kwok",
            "./",
            lambda _m: "",
            patches={
                "pkg/utils/informer/informer.go": (
                    (
                        "metav1.InitialEventsListBlueprintAnnotationKey",
                        '"kubernetes.io/initial-events-list-blueprint"',
                    ),
                ),
                # kwok deletes a terminating Pod by name; a retry could then delete the Pod
                # made again under that name (over and over, at a few hundred Pods). A kubelet
                # deletes by UID: so does ours.
                "pkg/kwok/controllers/pod_controller.go": (
                    (
                        "err := c.typedClient.CoreV1().Pods(pod.Namespace)"
                        ".Delete(ctx, pod.Name, deleteOpt)",
                        "opt := deleteOpt\n"
                        "\topt.Preconditions = metav1.NewUIDPreconditions(string(pod.UID))\n"
                        "\terr := c.typedClient.CoreV1().Pods(pod.Namespace)"
                        ".Delete(ctx, pod.Name, opt)\n"
                        "\tif apierrors.IsConflict(err) || apierrors.IsNotFound(err) {\n"
                        "\t\treturn nil // another Pod of that name, or gone already\n"
                        "\t}",
                    ),
                    (
                        'metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"',
                        'apierrors "k8s.io/apimachinery/pkg/api/errors"\n'
                        '\tmetav1 "k8s.io/apimachinery/pkg/apis/meta/v1"',
                    ),
                ),
            },
        )
    if component.name == VOLCANO.name:
        package = "volcano.sh/volcano/pkg/version"
        return Upstream(
            component,
            "volcano.sh/volcano",
            "./",
            lambda _m: "",
            (f"-X {package}.Version={component.version}", f"-X {package}.Built={build_date}"),
            keep_version_replaces=True,
            assets={VOLCANO_CRDS_SOURCE: ASSET_CRDS},
        )
    raise ValueError(f"no build recipe for component {component.name!r}")


_REPLACE_LINE = re.compile(r"^\s*(?:replace\s+)?(\S+)(?:\s+v\S+)?\s+=>\s+(\S+)\s*$")
_PIN_LINE = re.compile(r"^\s*(?:replace\s+)?(\S+)(?:\s+v\S+)?\s+=>\s+(\S+)\s+(v\S+)\s*$")
_GO_LINE = re.compile(r"^go\s+(\S+)\s*$", re.MULTILINE)


def local_replaces(go_mod: str, prefix: str) -> list[str]:
    """Module paths that ``go_mod`` replaces with a local folder starting with ``prefix``."""
    modules = []
    for line in go_mod.splitlines():
        match = _REPLACE_LINE.match(line.split("//", 1)[0])
        if match and match.group(2).startswith(prefix):
            modules.append(match.group(1))
    return modules


def version_replaces(go_mod: str) -> dict[str, str]:
    """The ``X => X vN`` replaces of a go.mod (a module pinned to a version), module to
    version; replaces by another module or by a folder are left out."""
    pinned = {}
    for line in go_mod.splitlines():
        match = _PIN_LINE.match(line.split("//", 1)[0])
        if match and match.group(1) == match.group(2):
            pinned[match.group(1)] = match.group(3)
    return pinned


def go_directive(go_mod: str) -> str:
    """The ``go`` line of a go.mod (the wrapper needs at least the upstream's)."""
    match = _GO_LINE.search(go_mod)
    return match.group(1) if match else "1.22"


def _version_key(go_version: str) -> tuple[int, ...]:
    return tuple(int(part) for part in re.findall(r"\d+", go_version))


def merge_replaces(upstreams: Mapping[str, Mapping[str, str]]) -> dict[str, str]:
    """One replace map from each upstream's; two upstreams pinning one module differently is
    an error naming both (the wrapper can hold only one version of it)."""
    merged: dict[str, str] = {}
    owner: dict[str, str] = {}
    for name, replaces in upstreams.items():
        for module, version in replaces.items():
            if merged.get(module, version) != version:
                raise BuildError(
                    f"{owner[module]} needs {module} {merged[module]} but {name} needs {version}"
                )
            merged[module] = version
            owner[module] = name
    return merged


def render_go_mod(
    bundle: Bundle,
    go_version: str,
    requires: Mapping[str, str],
    replaces: Mapping[str, str],
    folders: Mapping[str, str] | None = None,
) -> str:
    """The wrapper module's go.mod: require each upstream, pin each replaced module, and build
    each module of ``folders`` from its (patched) copy in that folder of the wrapper."""
    lines = [
        "// Generated by modelserving.devcluster.build; do not edit.",
        f"module modelserving.local/devcluster/{bundle.name}",
        "",
        f"go {go_version}",
        "",
        "require (",
        *(f"\t{module} {version}" for module, version in requires.items()),
        ")",
    ]
    if replaces:
        lines += ["", "replace ("]
        lines += [f"\t{module} => {module} {version}" for module, version in replaces.items()]
        lines.append(")")
    if folders:
        lines += ["", "replace ("]
        lines += [f"\t{module} => ./{folder}" for module, folder in folders.items()]
        lines.append(")")
    return "\n".join(lines) + "\n"


def go_sources(bundle: Bundle) -> tuple[str, ...]:
    """The files of ``multicall/`` that make up ``bundle``'s program."""
    return ("main.go", *(f"{component.name}.go" for component in bundle.components))


def read_stamp(directory: Path, bundle: Bundle) -> dict[str, object] | None:
    """The stamp of a finished build of ``bundle`` in ``directory``, or None if incomplete."""
    try:
        stamp = json.loads((directory / STAMP).read_text())
    except (OSError, ValueError):
        return None
    if not isinstance(stamp, dict) or stamp.get("bundle") != bundle.key:
        return None
    for binary in bundle.binaries:
        if not os.access(directory / "bin" / binary, os.X_OK):
            return None
    return stamp


@contextmanager
def _locked(path: Path, running: _Running | None = None) -> Iterator[None]:
    """Hold the bundle's file lock (another process may be building it). A thread of
    ``build_all`` waits for it in steps, so a stopping build does not wait for the other."""
    path.parent.mkdir(parents=True, exist_ok=True)
    with path.open("a") as handle:
        if running is None:
            fcntl.flock(handle, fcntl.LOCK_EX)
        else:
            while True:
                if running.stopping:
                    raise BuildError(f"waiting for {path.name} given up: the build is stopping")
                try:
                    fcntl.flock(handle, fcntl.LOCK_EX | fcntl.LOCK_NB)
                    break
                except BlockingIOError:
                    time.sleep(_LOCK_POLL_S)
        try:
            yield
        finally:
            fcntl.flock(handle, fcntl.LOCK_UN)


def go_env(environ: Mapping[str, str] | None = None) -> dict[str, str]:
    """The environment of every ``go`` command of a build."""
    env = dict(os.environ if environ is None else environ)
    gocache, gomodcache = go_cache_dirs(env)
    env["GOCACHE"], env["GOMODCACHE"] = str(gocache), str(gomodcache)
    env["CGO_ENABLED"] = "0"
    env["GOWORK"] = "off"  # a go.work of the caller must not pull the wrapper into a workspace
    # The compiler collects garbage less often: measured on the Volcano bundle from an empty
    # build cache, 7 % less user CPU (204 s against 220 s); with no collection at all (GOGC=off)
    # it was 196 s, with a 1.7 GiB peak.
    env.setdefault("GOGC", "400")
    # -modcacherw: the shared module cache stays deletable (`rm -rf`) like the plugin builds'.
    env["GOFLAGS"] = (env.get("GOFLAGS", "") + " -mod=mod -modcacherw").strip()
    for name in ("GOOS", "GOARCH", "GOPATH", "GOEXPERIMENT"):
        env.pop(name, None)
    return env


class _Running:
    """The ``go`` commands of the builds under way (several bundles build at once), so an
    interruption seen by the main thread can stop them all; once stopping, none starts."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._procs: set[subprocess.Popen[str]] = set()
        self.stopping = False

    def add(self, proc: subprocess.Popen[str]) -> bool:
        with self._lock:
            if not self.stopping:
                self._procs.add(proc)
            return not self.stopping

    def discard(self, proc: subprocess.Popen[str]) -> None:
        with self._lock:
            self._procs.discard(proc)

    def stop_all(self) -> None:
        with self._lock:
            self.stopping = True
            procs = list(self._procs)
        for proc in procs:
            with suppress(ProcessLookupError):
                os.killpg(proc.pid, signal.SIGKILL)


def _run(
    args: Sequence[str],
    cwd: Path,
    log: Path,
    env: Mapping[str, str],
    running: _Running | None = None,
) -> str:
    """Run a ``go`` command in its own process group, output to ``log``; on any exception
    (a signal turned into one by the caller's guard) the whole group is killed, as it is by
    ``running.stop_all()`` from another thread."""
    with log.open("a") as out:
        out.write(f"$ {' '.join(args)}\n")
        out.flush()
        with subprocess.Popen(
            args,
            cwd=cwd,
            env=env,
            stdout=subprocess.PIPE,
            stderr=out,
            text=True,
            start_new_session=True,
        ) as proc:
            if running is not None and not running.add(proc):
                _kill_group(proc)
                raise BuildError(f"{' '.join(args[:3])} not run: the build is stopping")
            try:
                stdout, _ = proc.communicate()
            except BaseException:
                _kill_group(proc)
                raise
            finally:
                if running is not None:
                    running.discard(proc)
        out.write(stdout)
    if proc.returncode != 0:
        tail = "\n".join(log.read_text().splitlines()[-25:])
        raise BuildError(f"{' '.join(args[:3])} failed ({proc.returncode}); log {log}:\n{tail}")
    return stdout


def _kill_group(proc: subprocess.Popen[str]) -> None:
    """SIGKILL ``proc`` and every compiler it started (its process group), then reap it."""
    with suppress(ProcessLookupError):
        os.killpg(proc.pid, signal.SIGKILL)
    proc.wait()


def _download(
    spec: Upstream, cwd: Path, log: Path, env: Mapping[str, str], running: _Running | None
) -> tuple[str, Path]:
    """Download the upstream module: its go.mod text and its (read-only) source folder."""
    target = f"{spec.module}@{spec.component.version}"
    info = json.loads(_run(["go", "mod", "download", "-json", target], cwd, log, env, running))
    return Path(info["GoMod"]).read_text(), Path(info["Dir"])


def _copy_assets(spec: Upstream, module_dir: Path, directory: Path) -> None:
    """Copy the YAML files of each asset folder of ``spec`` into the bundle ``directory``."""
    for source, target in spec.assets.items():
        files = sorted((module_dir / source).glob("*.yaml"))
        if not files:
            raise BuildError(f"{spec.module}@{spec.component.version} has no YAML in {source}")
        destination = directory / target
        shutil.rmtree(destination, ignore_errors=True)
        destination.mkdir(parents=True)
        for path in files:
            shutil.copyfile(path, destination / path.name)


def _make_writable(tree: Path) -> None:
    for path in (tree, *tree.rglob("*")):
        if not path.is_symlink():
            path.chmod(path.stat().st_mode | 0o200)


def patch_module(spec: Upstream, module_dir: Path, target: Path) -> None:
    """Copy the module at ``module_dir`` to ``target`` (writable) and make ``spec.patches``'
    edits in the copy; an edit whose old text is not in its file is a :class:`BuildError`."""
    if target.exists():
        _make_writable(target)  # an interrupted copy keeps the cache's read-only modes
        shutil.rmtree(target)
    shutil.copytree(module_dir, target)
    _make_writable(target)
    for name, edits in spec.patches.items():
        path = target / name
        if not path.is_file():
            raise BuildError(f"{spec.module}@{spec.component.version} has no file {name} to patch")
        text = path.read_text()
        for old, new in edits:
            if old not in text:
                raise BuildError(
                    f"patch of {spec.module}@{spec.component.version} {name} no longer "
                    f"applies: {old!r} is not in it"
                )
            text = text.replace(old, new)
        path.write_text(text)


def bundle_assets(bundle: Bundle, target: str) -> list[Path]:
    """The files of one asset folder (``ASSET_CRDS``) of a built bundle, sorted by name."""
    return sorted((bundle_dir(bundle) / target).glob("*.yaml"))


def build_bundle(bundle: Bundle, *, quiet: bool = False, running: _Running | None = None) -> Path:
    """Build ``bundle`` into its cache folder unless already there; return its ``bin`` dir.
    ``running`` (from ``build_all``) collects its ``go`` commands, to be stopped together."""
    directory = bundle_dir(bundle)
    if read_stamp(directory, bundle) is not None:
        return directory / "bin"
    with _locked(directory.with_name(directory.name + ".lock"), running):
        if read_stamp(directory, bundle) is not None:
            return directory / "bin"
        if shutil.which("go") is None:
            raise BuildError("`go` is not on PATH; it is needed to build the dev cluster")
        started = time.monotonic()
        if not quiet:
            print(
                f"devcluster: building {bundle.key} (log in {directory}/build.log)",
                file=sys.stderr,
            )
        with SignalGuard():  # SIGTERM/SIGHUP/SIGINT: stop the compilers, then die of it
            _build_into(
                directory, bundle, time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()), running
            )
        seconds = round(time.monotonic() - started, 1)
        go_version = subprocess.run(
            ["go", "version"], capture_output=True, text=True, check=False
        ).stdout.strip()
        stamp = {
            "bundle": bundle.key,
            "versions": {c.name: c.version for c in bundle.components},
            "seconds": seconds,
            "go": go_version,
        }
        (directory / STAMP).write_text(json.dumps(stamp, indent=2) + "\n")
        if not quiet:
            print(f"devcluster: built {bundle.key} in {seconds:.0f}s", file=sys.stderr)
    return directory / "bin"


def _build_into(directory: Path, bundle: Bundle, build_date: str, running: _Running | None) -> None:
    src, tmp_bin, log = directory / "src", directory / "bin.partial", directory / "build.log"
    shutil.rmtree(tmp_bin, ignore_errors=True)
    (directory / STAMP).unlink(missing_ok=True)
    src.mkdir(parents=True, exist_ok=True)
    tmp_bin.mkdir()
    log.write_text("")
    env = go_env()
    specs = [upstream(component, build_date) for component in bundle.components]
    go_version = "1.22"
    replaces: dict[str, dict[str, str]] = {}
    folders: dict[str, str] = {}
    for spec in specs:
        upstream_mod, module_dir = _download(spec, directory, log, env, running)
        _copy_assets(spec, module_dir, directory)
        if spec.patches:
            folders[spec.module] = f"patched-{spec.component.name}"
            patch_module(spec, module_dir, src / folders[spec.module])
        go_version = max(go_version, go_directive(upstream_mod), key=_version_key)
        replaces[spec.module] = {
            module: spec.replace_version(module)
            for module in local_replaces(upstream_mod, spec.local_prefix)
        }
        if spec.keep_version_replaces:
            replaces[spec.module].update(version_replaces(upstream_mod))
    requires = {spec.module: spec.component.version for spec in specs}
    (src / "go.mod").write_text(
        render_go_mod(bundle, go_version, requires, merge_replaces(replaces), folders)
    )
    (src / "go.sum").unlink(missing_ok=True)
    for name in go_sources(bundle):
        shutil.copyfile(MULTICALL / name, src / name)
    # dict.fromkeys: kubectl and the control plane share one module and its -X flags.
    flags = dict.fromkeys(flag for spec in specs for flag in spec.ldflags)
    ldflags = " ".join(("-s", "-w", *flags))
    _run(
        [
            "go",
            "build",
            "-trimpath",
            *GCFLAGS,
            "-ldflags",
            ldflags,
            "-o",
            str(tmp_bin / BINARY),
            ".",
        ],
        src,
        log,
        env,
        running,
    )
    if not (tmp_bin / BINARY).is_file():
        raise BuildError(f"building {bundle.key} did not produce {BINARY}")
    for name in bundle.binaries:
        (tmp_bin / name).symlink_to(BINARY)
    shutil.rmtree(directory / "bin", ignore_errors=True)
    tmp_bin.rename(directory / "bin")


def build_all(*, quiet: bool = False) -> dict[str, Path]:
    """Build every bundle; map each program name to its path (a symlink in ``bin/``).

    Bundles not yet built are built at the same time, one thread each: one ``go build`` leaves
    a core idle much of the time (downloads, the single-threaded link, the last large packages),
    which the other fills. A signal or error in one stops every ``go`` command of them all."""
    pending = [bundle for bundle in BUNDLES if read_stamp(bundle_dir(bundle), bundle) is None]
    if len(pending) > 1:
        running = _Running()
        with SignalGuard(), ThreadPoolExecutor(len(pending), "devcluster-build") as pool:
            futures = [pool.submit(build_bundle, b, quiet=quiet, running=running) for b in pending]
            try:
                while True:  # in steps: a signal handler runs between them
                    done, not_done = wait(futures, timeout=0.5, return_when=FIRST_EXCEPTION)
                    for future in done:
                        future.result()  # the first failure, raised here
                    if not not_done:
                        break
            except BaseException:
                running.stop_all()
                raise
    binaries: dict[str, Path] = {}
    for bundle in BUNDLES:
        bin_dir = build_bundle(bundle, quiet=quiet)
        binaries.update({name: bin_dir / name for name in bundle.binaries})
    return binaries


def cached_binaries() -> dict[str, Path] | None:
    """Every program's path when all bundles are built, else None (never builds)."""
    binaries: dict[str, Path] = {}
    for bundle in BUNDLES:
        directory = bundle_dir(bundle)
        if read_stamp(directory, bundle) is None:
            return None
        binaries.update({name: directory / "bin" / name for name in bundle.binaries})
    return binaries
