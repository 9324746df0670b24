"""The wrapper-module recipe and the build cache of the dev cluster (no Go, no network)."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from modelserving.devcluster import build
from modelserving.devcluster.versions import (
    BUNDLES,
    CONTROL_PLANE,
    ETCD,
    KUBECTL,
    KUBERNETES,
    KWOK,
    VOLCANO,
    VOLCANO_BUNDLE,
    Bundle,
    Component,
    bundle_dir,
    cache_root,
    go_cache_dirs,
)
from tests.processes import default_signals, wait_until_gone

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


def test_version_replaces_are_the_modules_pinned_to_a_version() -> None:
    text = UPSTREAM + (
        "replace k8s.io/api => k8s.io/api v0.30.2\n"
        "replace (\n\tgoogle.golang.org/grpc v1.0.0 => google.golang.org/grpc v1.57.0 // pin\n)\n"
    )
    assert build.version_replaces(text) == {
        "k8s.io/api": "v0.30.2",
        "google.golang.org/grpc": "v1.57.0",
    }  # neither folders nor a module replaced by another one (example.com/forked)


def test_volcano_keeps_its_pins_and_ships_its_crds(tmp_path: Path) -> None:
    spec = build.upstream(VOLCANO)
    assert spec.module == "volcano.sh/volcano" and spec.keep_version_replaces
    assert spec.assets == {build.VOLCANO_CRDS_SOURCE: build.ASSET_CRDS}
    assert any(flag.endswith(f".Version={VOLCANO.version}") for flag in spec.ldflags)
    assert not build.upstream(KUBERNETES).keep_version_replaces
    module = tmp_path / "module"
    (module / build.VOLCANO_CRDS_SOURCE).mkdir(parents=True)
    (module / build.VOLCANO_CRDS_SOURCE / "a_podgroups.yaml").write_text("kind: x\n")
    (module / build.VOLCANO_CRDS_SOURCE / "README.md").write_text("not a CRD\n")
    bundle = tmp_path / "bundle"
    build._copy_assets(spec, module, bundle)
    assert sorted(p.name for p in (bundle / build.ASSET_CRDS).iterdir()) == ["a_podgroups.yaml"]
    (module / build.VOLCANO_CRDS_SOURCE / "a_podgroups.yaml").unlink()
    with pytest.raises(build.BuildError, match="has no YAML in installer/"):
        build._copy_assets(spec, module, bundle)


def test_go_directive_is_read_from_upstream() -> None:
    assert build.go_directive(UPSTREAM) == "1.26.0"
    assert build.go_directive("module x\n") == "1.22"


def test_kubernetes_staging_modules_use_v0_minor_patch() -> None:
    assert build.kubernetes_staging_version("v1.34.4") == "v0.34.4"
    with pytest.raises(ValueError, match="unexpected"):
        build.kubernetes_staging_version("v2.0.0")


def test_etcd_client_v2_has_its_own_numbering() -> None:
    assert build.etcd_module_version("v3.5.35", "go.etcd.io/etcd/client/v2") == "v2.305.35"
    assert build.etcd_module_version("v3.6.4", "go.etcd.io/etcd/api/v3") == "v3.6.4"


def test_rendered_wrapper_requires_every_upstream_and_pins_each_replace() -> None:
    text = build.render_go_mod(
        CONTROL_PLANE,
        "1.24.0",
        {"k8s.io/kubernetes": "v1.34.4", "sigs.k8s.io/kwok": "v0.7.0"},
        {"k8s.io/api": "v0.34.4", "k8s.io/kubectl": "v0.34.4"},
    )
    lines = text.splitlines()
    assert "module modelserving.local/devcluster/controlplane" in lines
    assert "go 1.24.0" in lines
    assert "\tk8s.io/kubernetes v1.34.4" in lines
    assert "\tsigs.k8s.io/kwok v0.7.0" in lines
    assert "\tk8s.io/api => k8s.io/api v0.34.4" in lines
    assert "\tk8s.io/kubectl => k8s.io/kubectl v0.34.4" in lines
    # The wrapper's own replaces point at versions, never at folders.
    assert build.local_replaces(text, ".") == []


def test_a_patched_module_is_built_from_its_folder_in_the_wrapper() -> None:
    text = build.render_go_mod(
        CONTROL_PLANE,
        "1.24.0",
        {"sigs.k8s.io/kwok": "v0.7.0"},
        {"k8s.io/api": "v0.34.4"},
        {"sigs.k8s.io/kwok": "patched-kwok"},
    )
    assert "\tsigs.k8s.io/kwok => ./patched-kwok" in text.splitlines()
    assert "\tk8s.io/api => k8s.io/api v0.34.4" in text.splitlines()
    assert build.local_replaces(text, "./") == ["sigs.k8s.io/kwok"]


POD_CONTROLLER = (
    "import (\n"
    '\tmetav1 "k8s.io/apimachinery/pkg/apis/meta/v1"\n'
    ")\n"
    "func (c *PodController) deleteResource(ctx context.Context, pod *corev1.Pod) error {\n"
    "\terr := c.typedClient.CoreV1().Pods(pod.Namespace).Delete(ctx, pod.Name, deleteOpt)\n"
    "\tif err != nil {\n"
)
"""The parts of kwok v0.7.0's pkg/kwok/controllers/pod_controller.go the build patches."""


def test_kwok_is_patched_for_the_control_planes_kubernetes_libraries(tmp_path: Path) -> None:
    spec = build.upstream(KWOK)
    assert spec.patches and KWOK in CONTROL_PLANE.components
    assert not build.upstream(VOLCANO).patches and not build.upstream(KUBERNETES).patches
    module = tmp_path / "module"
    (module / "pkg" / "utils" / "informer").mkdir(parents=True)
    source = module / "pkg" / "utils" / "informer" / "informer.go"
    source.write_text("x := m[metav1.InitialEventsListBlueprintAnnotationKey]\n")
    pods = module / "pkg" / "kwok" / "controllers" / "pod_controller.go"
    pods.parent.mkdir(parents=True)
    pods.write_text(POD_CONTROLLER)
    (module / "go.mod").write_text("module sigs.k8s.io/kwok\n")
    for path in (source, pods, module / "go.mod", source.parent, module):
        path.chmod(0o555 if path.is_dir() else 0o444)  # as in Go's module cache
    target = tmp_path / "src" / "patched-kwok"
    build.patch_module(spec, module, target)
    patched = (target / "pkg" / "utils" / "informer" / "informer.go").read_text()
    assert patched == 'x := m["kubernetes.io/initial-events-list-blueprint"]\n'
    deletes = (target / "pkg" / "kwok" / "controllers" / "pod_controller.go").read_text()
    assert "opt.Preconditions = metav1.NewUIDPreconditions(string(pod.UID))" in deletes
    assert ".Delete(ctx, pod.Name, opt)" in deletes and "deleteOpt)" not in deletes
    assert 'apierrors "k8s.io/apimachinery/pkg/api/errors"' in deletes
    assert (target / "go.mod").read_text() == "module sigs.k8s.io/kwok\n"
    assert source.read_text().startswith("x := m[metav1.")  # the module cache is untouched
    build.patch_module(spec, module, target)  # a rebuild starts again from a fresh copy
    # A new kwok version without the text (or the file) stops the build, naming both.
    source.parent.chmod(0o755)
    source.chmod(0o644)
    source.write_text("x := 1\n")
    with pytest.raises(build.BuildError, match=r"kwok@v0\.7\.0 .*informer\.go no longer applies"):
        build.patch_module(spec, module, target)
    source.unlink()
    with pytest.raises(build.BuildError, match=r"has no file pkg/utils/informer/informer\.go"):
        build.patch_module(spec, module, target)


def test_wrapper_without_replaces_has_no_replace_block() -> None:
    text = build.render_go_mod(CONTROL_PLANE, "1.24.0", {"sigs.k8s.io/kwok": "v0.7.0"}, {})
    assert "replace" not in text


def test_replaces_of_several_upstreams_merge_and_conflicts_name_both() -> None:
    merged = build.merge_replaces(
        {
            "k8s.io/kubernetes": {"k8s.io/api": "v0.34.4"},
            "go.etcd.io/etcd/server/v3": {"go.etcd.io/etcd/api/v3": "v3.6.4"},
            "sigs.k8s.io/kwok": {"k8s.io/api": "v0.34.4"},
        }
    )
    assert merged == {"k8s.io/api": "v0.34.4", "go.etcd.io/etcd/api/v3": "v3.6.4"}
    with pytest.raises(build.BuildError, match=r"^a needs m v1 but b needs v2$"):
        build.merge_replaces({"a": {"m": "v1"}, "b": {"m": "v2"}})


def test_every_component_has_a_recipe_and_registers_each_of_its_programs() -> None:
    for component in (ETCD, KUBERNETES, KWOK, KUBECTL, VOLCANO):
        assert build.upstream(component).component is component
        source = (build.MULTICALL / f"{component.name}.go").read_text()
        for program in component.binaries:
            assert f'register("{program}", ' in source
    assert any("gitVersion=" + KUBERNETES.version in f for f in build.upstream(KUBERNETES).ldflags)
    with pytest.raises(ValueError, match="no build recipe"):
        build.upstream(Component("nope", "v1", ("nope",)))


def test_each_bundle_compiles_the_dispatcher_and_its_components_files() -> None:
    programs = [name for bundle in BUNDLES for name in bundle.binaries]
    assert sorted(programs) == sorted(
        {
            *ETCD.binaries,
            *KUBERNETES.binaries,
            *KWOK.binaries,
            *KUBECTL.binaries,
            *VOLCANO.binaries,
        }
    )
    assert VOLCANO_BUNDLE in BUNDLES  # the cluster runs Volcano
    for bundle in BUNDLES:
        sources = build.go_sources(bundle)
        assert sources[0] == "main.go"
        assert all((build.MULTICALL / name).is_file() for name in sources)
    assert build.go_sources(CONTROL_PLANE) == (
        "main.go",
        "etcd.go",
        "kubernetes.go",
        "kubectl.go",
        "kwok.go",
    )


def test_bundle_key_names_every_version_and_the_recipe() -> None:
    bundle = Bundle("cp", (ETCD, KWOK), recipe=7)
    assert bundle.key == f"cp_etcd-{ETCD.version}_kwok-{KWOK.version}_r7"
    assert bundle.binaries == ("etcd", "kwok")


def test_cache_root_precedence(tmp_path: Path) -> None:
    assert cache_root({"MODELSERVING_CACHE": str(tmp_path)}) == tmp_path
    assert cache_root({"XDG_CACHE_HOME": "/x"}) == Path("/x/modelserving")
    assert cache_root({"HOME": "/home/u"}) == Path("/home/u/.cache/modelserving")


def test_go_caches_are_the_plugin_builds_and_the_environment_is_clean(tmp_path: Path) -> None:
    environ = {"MODELSERVING_CACHE": str(tmp_path), "GOOS": "wasip1", "GOFLAGS": "-x"}
    assert go_cache_dirs(environ) == (tmp_path / "go" / "build", tmp_path / "go" / "mod")
    script = (Path(__file__).parents[3] / "plugins-src" / "build-go.sh").read_text()
    assert 'GOCACHE="$cache/go/build" GOMODCACHE="$cache/go/mod"' in script
    # the native vet and test compile with the build's flags, to share its standard library
    assert f'NATIVE_FLAGS=(-trimpath "-gcflags=all={build.STD_GCFLAGS}")' in script
    assert build.GCFLAGS[-1] == f"-gcflags=std={build.STD_GCFLAGS}"  # the last match wins
    env = build.go_env(environ)
    assert env["GOCACHE"] == str(tmp_path / "go" / "build")
    assert env["GOMODCACHE"] == str(tmp_path / "go" / "mod")
    assert "GOOS" not in env
    assert env["GOFLAGS"] == "-x -mod=mod -modcacherw"
    assert env["CGO_ENABLED"] == "0"
    assert env["GOGC"] == "400"
    assert build.go_env({**environ, "GOGC": "100"})["GOGC"] == "100"  # the caller's wins


def _fake_build(directory: Path, bundle: Bundle, key: str | None = None) -> None:
    (directory / "bin").mkdir(parents=True)
    binary = directory / "bin" / build.BINARY
    binary.write_text("#!/bin/sh\n")
    binary.chmod(0o755)
    for name in bundle.binaries:
        (directory / "bin" / name).symlink_to(build.BINARY)
    (directory / build.STAMP).write_text(json.dumps({"bundle": key or bundle.key}))


def test_stamp_is_needed_and_must_match_the_bundle(tmp_path: Path) -> None:
    assert build.read_stamp(tmp_path, CONTROL_PLANE) is None
    _fake_build(tmp_path, CONTROL_PLANE, key="controlplane_old")
    assert build.read_stamp(tmp_path, CONTROL_PLANE) is None
    (tmp_path / build.STAMP).write_text(json.dumps({"bundle": CONTROL_PLANE.key}))
    assert build.read_stamp(tmp_path, CONTROL_PLANE) is not None
    os.chmod(tmp_path / "bin" / build.BINARY, 0o644)
    assert build.read_stamp(tmp_path, CONTROL_PLANE) is None


def test_cached_build_returns_without_go(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("MODELSERVING_CACHE", str(tmp_path))
    monkeypatch.setenv("PATH", "/nonexistent")  # no `go`: a cache hit must not need it
    assert build.cached_binaries() is None
    _fake_build(bundle_dir(CONTROL_PLANE), CONTROL_PLANE)
    assert build.cached_binaries() is None  # Volcano's bundle is missing
    with pytest.raises(build.BuildError, match="go"):
        build.build_all(quiet=True)
    _fake_build(bundle_dir(VOLCANO_BUNDLE), VOLCANO_BUNDLE)
    binaries = build.build_all(quiet=True)
    assert binaries["kube-apiserver"] == (
        tmp_path / "kube" / CONTROL_PLANE.key / "bin" / "kube-apiserver"
    )
    assert binaries["kubectl"] == tmp_path / "kube" / CONTROL_PLANE.key / "bin" / "kubectl"
    assert set(binaries) == {name for bundle in BUNDLES for name in bundle.binaries}
    assert build.cached_binaries() == binaries


def test_missing_go_is_reported(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("MODELSERVING_CACHE", str(tmp_path))
    monkeypatch.setenv("PATH", "/nonexistent")
    with pytest.raises(build.BuildError, match="go"):
        build.build_bundle(CONTROL_PLANE, quiet=True)


def test_an_interrupted_go_command_leaves_none_of_its_processes(tmp_path: Path) -> None:
    # A signal during a build becomes an exception (the build's SignalGuard); go's compilers
    # are its children, so the whole process group must go, not only `go` itself.
    marker = f"modelserving-build-test-{os.getpid()}"
    ready = tmp_path / "ready"
    sleeper = f"{sys.executable} -c 'import time; time.sleep(300)' {marker}"
    command = ["sh", "-c", f"{sleeper} & {sleeper} & touch {ready}; wait", marker]

    class Alarm(Exception):
        pass

    def ring(_signum: int, _frame: object) -> None:
        if ready.exists():
            raise Alarm
        signal.setitimer(signal.ITIMER_REAL, 0.05)

    previous = signal.signal(signal.SIGALRM, ring)
    try:
        signal.setitimer(signal.ITIMER_REAL, 0.05)
        with pytest.raises(Alarm):
            build._run(command, tmp_path, tmp_path / "build.log", os.environ)
    finally:
        signal.setitimer(signal.ITIMER_REAL, 0)
        signal.signal(signal.SIGALRM, previous)
    assert wait_until_gone(marker) == []


# A stand-in for `go`: `mod download` makes a small module (with what the recipes copy or
# patch), `build` writes the binary after FAKE_GO_SLEEP seconds, noting its start and end in
# FAKE_GO_LOG; a build whose folder names FAKE_GO_FAIL fails at once.
FAKE_GO = """#!{python}
import json, os, sys, time
from pathlib import Path
args = sys.argv[1:]
if args[:1] == ["version"]:
    print("go version go0.0-fake linux/amd64")
elif args[:2] == ["mod", "download"]:
    module = Path(os.environ["FAKE_GO_MODS"]) / args[-1].replace("/", "_")
    informer = module / "pkg/utils/informer/informer.go"
    pods = module / "pkg/kwok/controllers/pod_controller.go"
    crds = module / "installer/helm/chart/volcano/crd/bases"
    for folder in (informer.parent, pods.parent, crds):
        folder.mkdir(parents=True, exist_ok=True)
    informer.write_text("k := metav1.InitialEventsListBlueprintAnnotationKey\\n")
    pods.write_text({pod_controller!r})
    (crds / "podgroups.yaml").write_text("kind: CustomResourceDefinition\\n")
    (module / "go.mod").write_text("module fake\\n\\ngo 1.22\\n")
    print(json.dumps({{"GoMod": str(module / "go.mod"), "Dir": str(module)}}))
elif args[:1] == ["build"]:
    name = Path.cwd().parent.name
    fail = os.environ.get("FAKE_GO_FAIL")
    if fail and fail in name:
        sys.exit("fake compile error")
    with open(os.environ["FAKE_GO_LOG"], "a") as log:
        log.write(f"start {{name}} {{time.time()}}\\n")
    time.sleep(float(os.environ["FAKE_GO_SLEEP"]))
    out = Path(args[args.index("-o") + 1])
    out.write_text("#!/bin/sh\\n")
    out.chmod(0o755)
    with open(os.environ["FAKE_GO_LOG"], "a") as log:
        log.write(f"end {{name}} {{time.time()}}\\n")
else:
    sys.exit(f"fake go: unexpected {{args}}")
"""


def _fake_go(tmp_path: Path, sleep: float, fail: str = "") -> dict[str, str]:
    tools = tmp_path / "tools"
    tools.mkdir()
    (tools / "go").write_text(FAKE_GO.format(python=sys.executable, pod_controller=POD_CONTROLLER))
    (tools / "go").chmod(0o755)
    return {
        "PATH": f"{tools}:{os.environ['PATH']}",
        "MODELSERVING_CACHE": str(tmp_path / "cache"),
        "FAKE_GO_MODS": str(tmp_path / "mods"),
        "FAKE_GO_LOG": str(tmp_path / "go.log"),
        "FAKE_GO_SLEEP": str(sleep),
        "FAKE_GO_FAIL": fail,
    }


def _builds(log: Path) -> dict[str, dict[str, float]]:
    spans: dict[str, dict[str, float]] = {}
    for line in log.read_text().splitlines():
        event, name, when = line.split()
        spans.setdefault(name, {})[event] = float(when)
    return spans


def test_bundles_not_built_yet_are_built_at_the_same_time(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    for name, value in _fake_go(tmp_path, sleep=1.0).items():
        monkeypatch.setenv(name, value)
    binaries = build.build_all(quiet=True)
    assert set(binaries) == {name for bundle in BUNDLES for name in bundle.binaries}
    assert all(path.is_file() for path in binaries.values())
    spans = _builds(tmp_path / "go.log")
    assert set(spans) == {bundle.key for bundle in BUNDLES}
    first, second = sorted(spans.values(), key=lambda span: span["start"])
    assert second["start"] < first["end"]  # overlapping, not one after the other
    # The kwok patch was made in the control plane's wrapper, the CRDs copied for Volcano.
    src = bundle_dir(CONTROL_PLANE) / "src"
    assert "sigs.k8s.io/kwok => ./patched-kwok" in (src / "go.mod").read_text()
    assert build.bundle_assets(VOLCANO_BUNDLE, build.ASSET_CRDS)
    (tmp_path / "go.log").unlink()
    assert build.build_all(quiet=True) == binaries  # cached: no go build at all
    assert not (tmp_path / "go.log").exists()


def test_one_failed_bundle_stops_the_others_build(tmp_path: Path) -> None:
    env = {**os.environ, **_fake_go(tmp_path, sleep=300, fail="volcano")}
    started = time.monotonic()
    done = subprocess.run(
        [sys.executable, "-m", "modelserving.devcluster", "build"],
        env=env,
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    assert done.returncode == 1
    (failure,) = [line for line in done.stderr.splitlines() if "build failed" in line]
    assert failure.startswith("devcluster: build failed: go build -trimpath failed (1); log ")
    assert VOLCANO_BUNDLE.key in failure
    assert done.stderr.endswith("fake compile error\n")  # the end of the log is quoted
    assert time.monotonic() - started < 60  # the control plane's 300 s build was stopped
    assert wait_until_gone(str(tmp_path / "tools" / "go")) == []


def test_a_signal_stops_every_bundle_build(tmp_path: Path) -> None:
    env = {**os.environ, **_fake_go(tmp_path, sleep=300)}
    builder = subprocess.Popen(
        [sys.executable, "-m", "modelserving.devcluster", "build"],
        env=env,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
        preexec_fn=default_signals,
    )
    try:
        deadline = time.monotonic() + 60
        log = tmp_path / "go.log"
        while not (log.exists() and len(_builds(log)) == len(BUNDLES)):
            assert time.monotonic() < deadline and builder.poll() is None
            time.sleep(0.05)
        builder.send_signal(signal.SIGTERM)
        assert builder.wait(timeout=30) == -signal.SIGTERM
    finally:
        builder.kill()
        builder.communicate()
    assert wait_until_gone(str(tmp_path / "tools" / "go")) == []
    assert all("end" not in span for span in _builds(tmp_path / "go.log").values())
