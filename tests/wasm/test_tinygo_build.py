"""TinyGo as a guest toolchain: plugins-src/install-tinygo.sh (``make tinygo``) and the TinyGo
flavour of plugins-src/build-go.sh.

The heavy test installs TinyGo when the cache lacks it (Debian packages, the Go module proxy;
about 1.5 minutes once), then rebuilds every TinyGo example module and compares it with the
committed examples/wasm/tinygo-*.wasm byte for byte (``build-go.sh check tinygo``, what
``make wasm-go-check-tinygo`` runs): `make test` runs it beside the integration tests, off the
unit tests' path. The quick tests check the installer's errors and the committed modules' set.
"""

from __future__ import annotations

import os
import re
import subprocess
from pathlib import Path

import pytest

from modelserving.abi.codec import encode_request
from modelserving.api.hook import Hook
from modelserving.api.place import PodPlace
from modelserving.sandbox import CallFailure, Sandbox

ROOT = Path(__file__).resolve().parents[2]
INSTALL = ROOT / "plugins-src" / "install-tinygo.sh"
BUILD_GO = ROOT / "plugins-src" / "build-go.sh"
EXAMPLES = ROOT / "examples" / "wasm"


def _run(
    *argv: str | Path, env: dict[str, str], timeout: float = 60
) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [str(a) for a in argv],
        env=env,
        capture_output=True,
        text=True,
        timeout=timeout,
        check=False,
    )


def install_tinygo() -> Path:
    """TinyGo's root in the shared cache, installed first when missing (for the heavy tests
    that build with it)."""
    done = _run("nice", "-n", "10", "bash", INSTALL, env=dict(os.environ), timeout=900)
    assert done.returncode == 0, done.stderr
    return Path(done.stdout.strip())


def test_every_go_example_has_a_committed_tinygo_module() -> None:
    examples = sorted(p.parent.name for p in (ROOT / "plugins-src/examples-go").glob("*/go.mod"))
    assert examples
    for name in examples:
        for flavour in ("go", "tinygo"):
            assert (EXAMPLES / f"{flavour}-{name}.wasm").is_file(), (
                f"run `make wasm-go` ({flavour})"
            )


def test_the_installer_pins_tinygo_and_its_go() -> None:
    text = INSTALL.read_text()
    assert re.search(r"^TINYGO_VERSION=v0\.37\.0$", text, re.MULTILINE)
    assert re.search(r"^TINYGO_GO_VERSION=1\.24\.13$", text, re.MULTILINE)
    assert re.search(r'^TINYGO_SUM="h1:[A-Za-z0-9+/=]{44}"$', text, re.MULTILINE)
    build = BUILD_GO.read_text()
    assert re.search(r"^TINYGO_GO_VERSION=1\.24\.13$", build, re.MULTILINE)


def test_a_failed_step_is_named(tmp_path: Path) -> None:
    """Without go on PATH the install stops at its first step and says which, installing
    nothing; --root reports an absent install with status 1."""
    env = {"HOME": str(tmp_path), "PATH": "/usr/bin:/bin", "MODELSERVING_CACHE": str(tmp_path)}
    if any(Path(d, "go").exists() for d in ("/usr/bin", "/bin")):
        pytest.skip("go is in /usr/bin here")
    done = _run("bash", INSTALL, env=env)
    assert done.returncode == 1
    assert done.stderr.startswith("plugins-src/install-tinygo.sh: step 'go' failed: no go on PATH")
    assert "TinyGo v0.37.0 is not installed" in done.stderr
    assert not list(tmp_path.glob("tinygo-*"))
    root = _run("bash", INSTALL, "--root", env=env)
    assert (root.returncode, root.stdout) == (1, "")


def test_an_unknown_flavour_is_refused() -> None:
    done = _run("bash", BUILD_GO, "check", "gccgo", env=dict(os.environ))
    assert done.returncode == 1
    assert "unknown flavour 'gccgo' (go, tinygo or both)" in done.stderr


def test_an_unknown_example_is_refused(tmp_path: Path) -> None:
    env = {**os.environ, "WASM_GO_OUT": str(tmp_path)}
    done = _run("bash", BUILD_GO, "build", "go", "nosuch", env=env)
    assert done.returncode == 1
    assert "no example examples-go/nosuch" in done.stderr
    assert not list(tmp_path.iterdir())


@pytest.mark.heavy
@pytest.mark.timeout(1200)
def test_tinygo_modules_match_their_sources() -> None:
    """Install (or find) TinyGo, twice: the second run is the stamp's, quick and the same root;
    then rebuild the TinyGo modules and compare them with the committed ones."""
    env = dict(os.environ)
    root = install_tinygo()
    assert (root.parent / ".installed").is_file() and (root.parent / "bin/tinygo").is_file()
    again = _run("bash", INSTALL, env=env, timeout=10)
    assert (again.returncode, again.stdout, again.stderr) == (0, f"{root}\n", "")
    assert _run("bash", INSTALL, "--root", env=env).stdout == f"{root}\n"
    check = _run("nice", "-n", "10", "bash", BUILD_GO, "check", "tinygo", env=env, timeout=600)
    assert check.returncode == 0, check.stderr
    assert "examples/wasm/ matches plugins-src/ (tinygo)" in check.stderr


PANICKING = """package main

import "modelserving.dev/plugin"

var P = plugin.Plugin{OnPodCreate: onPodCreate}

//go:wasmexport ms_on_pod_create
func msOnPodCreate(ptr, size uint32) uint64 { return P.Export(plugin.OnPodCreate, ptr, size) }

func onPodCreate(req *plugin.Request) ([]plugin.Op, error) {
	%s
	return nil, nil
}

func main() {}
"""


def tinygo_build(root: Path, project: Path, body: str) -> subprocess.CompletedProcess[str]:
    """Build a one-hook plugin whose OnPodCreate runs ``body``, as build-go.sh builds with
    TinyGo."""
    project.mkdir()
    sdk = ROOT / "plugins-src" / "sdk-go"
    (project / "go.mod").write_text(
        f"module example.com/p\n\ngo 1.24\n\nrequire modelserving.dev/plugin v0.0.0\n\n"
        f'replace modelserving.dev/plugin => "{sdk}"\n'
    )
    (project / "main.go").write_text(PANICKING % body)
    cache = os.environ.get("MODELSERVING_CACHE") or str(Path.home() / ".cache/modelserving")
    env = {
        **os.environ,
        "GOENV": "off",
        "GOTOOLCHAIN": "go1.24.13",
        "GOWORK": "off",
        "GOFLAGS": "-modcacherw",
        "GOPROXY": "off",
        "GOCACHE": f"{cache}/go/build",
        "GOMODCACHE": f"{cache}/go/mod",
        "TINYGOROOT": str(root),
        "XDG_CACHE_HOME": str(root.parent / "cache"),
    }
    flags = ["-target=wasip1", "-buildmode=c-shared", "-no-debug", "-scheduler=none"]
    argv = [root.parent / "bin" / "tinygo", "build", *flags, "-o", project / "p.wasm", "."]
    return subprocess.run(
        [str(a) for a in argv], cwd=project, env=env, capture_output=True, text=True, timeout=300
    )


@pytest.mark.heavy
@pytest.mark.timeout(1200)
def test_what_tinygo_lacks_behaves_as_the_sdk_documents(tmp_path: Path, sandbox: Sandbox) -> None:
    """plugins-src/README.md, section TinyGo: a goroutine fails the build under
    -scheduler=none; a panic is not recovered (no error-level line from the SDK): TinyGo prints
    it to standard output and traps, a Trap."""
    root = install_tinygo()
    go = tinygo_build(root, tmp_path / "go", "go func() {}()")
    assert go.returncode != 0
    assert "attempted to start a goroutine without a scheduler" in go.stderr
    built = tinygo_build(root, tmp_path / "panic", 'panic("boom " + req.PodName())')
    assert built.returncode == 0, built.stderr
    request = encode_request(
        Hook.ON_POD_CREATE,
        "p",
        None,
        {"kind": "ModelServing"},
        PodPlace("g", "r", "r-0", True),
        {"metadata": {"name": "pod-0"}},
    )
    compiled = sandbox.load((tmp_path / "panic" / "p.wasm").read_bytes())
    with pytest.raises(CallFailure) as info:
        sandbox.call(compiled, "ms_on_pod_create", request, sandbox.limits())
    assert info.value.failure_class == "Trap"
    assert "unreachable" in str(info.value)
    lines = [(r.level, r.message, r.source) for r in info.value.logs]
    assert ("info", "panic: boom pod-0", "stdout") in lines
    assert not [line for line in lines if line[0] == "error"]
