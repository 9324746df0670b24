"""``modelserving plugin new NAME --lang rust|go``, end to end with the real toolchains.

The generated project, as generated, passes its own tests (``make test``) and builds to a module
(``make build``) with the toolchain of the SDK's own build: Debian's Rust 1.63 offline with the
flags of plugins-src/build.sh, or plugins-src/build-go.sh's TinyGo or exact Go version for wasip1.
``make run`` calls the module in the sandbox, and ``make pack``'s ConfigMap and spec.plugins
entry load through the controller's ConfigMap path (``module_from_config_map``, the pinned
sha256, ValidateConfig) and label the Pod. A Go project builds with TinyGo (installed into the
shared cache when missing) by default and with standard Go under ``TOOLCHAIN=go``.
"""

from __future__ import annotations

import hashlib
import json
import os
import re
import shutil
import subprocess
from collections.abc import Iterator
from pathlib import Path

import pytest

from modelserving.api.errors import PluginConfigError
from modelserving.cli.main import main
from modelserving.cli.scaffold import checkout_root
from modelserving.plugins.exports import set_default_sandbox
from modelserving.plugins.modules import module_from_config_map
from modelserving.sandbox import Sandbox
from tests.unit.cli.packing import controller_chain, model_serving, parse_pack, rendered_pod
from tests.wasm.test_tinygo_build import install_tinygo

RUSTC = Path("/usr/bin/rustc")
BUILD_GO = checkout_root() / "plugins-src" / "build-go.sh"
MAX_MODULE = 32 * 1024 * 1024


def _output(*argv: str | Path, env: dict[str, str] | None = None) -> str:
    try:
        done = subprocess.run(
            [str(a) for a in argv], capture_output=True, text=True, check=False, env=env
        )
    except OSError:
        return ""
    return done.stdout.strip()


def rust_missing() -> str | None:
    """Why the Debian toolchain of plugins-src/build.sh is not usable here, or None."""
    if not (RUSTC.is_file() and Path("/usr/bin/cargo").is_file()):
        return "no /usr/bin/rustc and /usr/bin/cargo (`make wasm` installs Debian's Rust 1.63)"
    version = _output(RUSTC, "--version")
    if not version.startswith("rustc 1.63."):
        return f"/usr/bin/rustc is {version or 'broken'}, not 1.63"
    sysroot = Path(_output(RUSTC, "--print", "sysroot"))
    if not (sysroot / "lib/rustlib/wasm32-unknown-unknown/lib").is_dir():
        return "no wasm32-unknown-unknown standard library (libstd-rust-dev-wasm32)"
    return None


def go_missing() -> str | None:
    """Why the Go toolchain of plugins-src/build-go.sh is not usable here (offline), or None."""
    if not BUILD_GO.is_file() or not (checkout_root() / "plugins-src/sdk-go/go.mod").is_file():
        return "no Go SDK (plugins-src/sdk-go, build-go.sh) in this checkout"
    if shutil.which("go") is None:
        return "no go on PATH"
    match = re.search(r"^GO_VERSION=(\S+)$", BUILD_GO.read_text(), re.MULTILINE)
    if match is None:
        return "plugins-src/build-go.sh sets no GO_VERSION"
    env = {**os.environ, "GOTOOLCHAIN": "local", "GOENV": "off"}
    have = _output("go", "env", "GOVERSION", env=env)
    if have != f"go{match.group(1)}":
        return f"go on PATH is {have or 'broken'}; the offline build needs go{match.group(1)}"
    return None


@pytest.fixture
def cli_sandbox(sandbox: Sandbox) -> Iterator[Sandbox]:
    set_default_sandbox(sandbox)
    yield sandbox
    set_default_sandbox(None)


def make(project: Path, target: str, env: dict[str, str]) -> str:
    """``make -s TARGET`` in the project: its stdout (the build tools write to stderr)."""
    done = subprocess.run(
        ["make", "-s", target],
        cwd=project,
        env=env,
        capture_output=True,
        text=True,
        timeout=900,
        check=False,
    )
    assert done.returncode == 0, f"make {target}:\n{done.stdout}\n{done.stderr}"
    return done.stdout


def check_run_and_pack(
    project: Path,
    name: str,
    env: dict[str, str],
    sandbox: Sandbox,
    capsys: pytest.CaptureFixture[str],
    tmp_path: Path,
) -> None:
    """``make build``, ``make run``, ValidateConfig in the sandbox, ``make pack`` and what the
    controller does with its output."""
    make(project, "build", env)
    wasm = project / f"{name}.wasm"
    module = wasm.read_bytes()
    assert module[:4] == b"\0asm"
    assert str(project).encode() not in module  # paths are remapped: reproducible bytes
    assert str(tmp_path).encode() not in module

    ran = json.loads(make(project, "run", env))  # the Makefile's modelserving
    assert ran["sha256"] == hashlib.sha256(module).hexdigest()
    assert ran["patch"] == [
        {"op": "add", "path": f"/metadata/labels/example.com~1{name}", "value": "ml"}
    ]
    assert ran["pod"]["metadata"]["labels"] == {"app": "llama", f"example.com/{name}": "ml"}
    assert ran["logs"] == [
        {
            "level": "info",
            "message": f"labelling Pod llama-0-server-0-0 with example.com/{name}=ml",
            "source": "log",
        }
    ]

    bad = tmp_path / "bad-config.yaml"
    bad.write_text("value: ml\ncolour: red\n")
    request = str(project / "request.yaml")
    argv = ["plugin", "run", str(wasm), "--hook", "validate-config", "--request", request]
    assert main([*argv, "--config", str(bad)]) == 1
    assert capsys.readouterr().err == (
        f"PluginError: plugin '{name}' ValidateConfig: config.colour: unknown field\n"
    )

    config_map, entry = parse_pack(make(project, "pack", env), tmp_path)
    key = entry["module"]["configMapRef"]["key"]
    assert key == f"{name}.wasm.gz"
    assert module_from_config_map(config_map, key, MAX_MODULE) == module
    assert entry["module"]["sha256"] == hashlib.sha256(module).hexdigest()
    ms = model_serving(entry, {"key": "example.com/team", "value": "ml"})
    chain = controller_chain(config_map, ms, sandbox, MAX_MODULE)
    assert [e.digest for e in chain.entries] == [entry["module"]["sha256"]]
    assert rendered_pod(ms, chain)["metadata"]["labels"]["example.com/team"] == "ml"
    # the placeholder config is refused by the plugin's ValidateConfig when the chain is built
    with pytest.raises(PluginConfigError, match=r"config\.value: is required"):
        controller_chain(config_map, model_serving(entry, {}), sandbox, MAX_MODULE)


@pytest.mark.heavy
@pytest.mark.skipif(rust_missing() is not None, reason=f"Rust toolchain: {rust_missing()}")
@pytest.mark.timeout(900)
def test_generated_rust_project_builds_tests_runs_and_packs(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], cli_sandbox: Sandbox
) -> None:
    name = "team-label"
    project = tmp_path / "work" / name
    assert main(["plugin", "new", name, "--lang", "rust", "--dir", str(project)]) == 0
    capsys.readouterr()
    # a private cargo home and compile cache: nothing is downloaded (there is no index there)
    env = {**os.environ, "MODELSERVING_CACHE": str(tmp_path / "cache")}
    tested = make(project, "test", env)
    assert "test result: ok. 6 passed; 0 failed" in tested
    check_run_and_pack(project, name, env, cli_sandbox, capsys, tmp_path)

    # Reproducible: the same project made from an SDK in another folder, and put in another
    # folder, builds the same bytes (neither path reaches the module).
    sdk = tmp_path / "another" / "checkout" / "sdk-rust"
    shutil.copytree(checkout_root() / "plugins-src" / "sdk-rust", sdk)
    elsewhere = tmp_path / "somewhere" / "else" / name
    argv = ["plugin", "new", name, "--lang", "rust", "--dir", str(elsewhere), "--sdk", str(sdk)]
    assert main(argv) == 0
    capsys.readouterr()
    make(elsewhere, "build", env)
    assert (elsewhere / f"{name}.wasm").read_bytes() == (project / f"{name}.wasm").read_bytes()


@pytest.mark.heavy
@pytest.mark.skipif(go_missing() is not None, reason=f"Go toolchain: {go_missing()}")
@pytest.mark.timeout(1200)
def test_generated_go_project_builds_tests_runs_and_packs(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], cli_sandbox: Sandbox
) -> None:
    name = "go-label"
    project = tmp_path / "work" / name
    assert main(["plugin", "new", name, "--lang", "go", "--dir", str(project)]) == 0
    capsys.readouterr()
    # the shared Go build cache (a cold one costs minutes of compiling the standard library);
    # GOPROXY=off: nothing is downloaded
    env = {k: v for k, v in os.environ.items() if k not in ("GOPROXY", "TOOLCHAIN")}
    install_tinygo()  # the shared cache's TinyGo, which the project's build uses
    tested = make(project, "test", env)
    assert re.search(r"^ok\s+example\.com/go-label\s", tested, re.MULTILINE), tested
    # TinyGo by default: a module that a ConfigMap holds as it is
    check_run_and_pack(project, name, env, cli_sandbox, capsys, tmp_path)
    tiny = (project / f"{name}.wasm").read_bytes()
    assert len(tiny) < 200_000
    # TOOLCHAIN=go: standard Go, about 2 MB, the same answers
    make(project, "build", {**env, "TOOLCHAIN": "go"})
    standard = (project / f"{name}.wasm").read_bytes()
    assert len(standard) > 1_500_000
    ran = json.loads(make(project, "run", {**env, "TOOLCHAIN": "go"}))
    assert ran["sha256"] == hashlib.sha256(standard).hexdigest()
    assert ran["patch"] == [
        {"op": "add", "path": f"/metadata/labels/example.com~1{name}", "value": "ml"}
    ]
    # the TinyGo build is reproducible: the same project elsewhere gives the same bytes
    elsewhere = tmp_path / "somewhere" / "else" / name
    assert main(["plugin", "new", name, "--lang", "go", "--dir", str(elsewhere)]) == 0
    capsys.readouterr()
    make(elsewhere, "build", env)
    assert (elsewhere / f"{name}.wasm").read_bytes() == tiny
