"""``modelserving plugin new``: the generated Rust project (without building it: tests/wasm does),
names, target folders, finding the SDK, languages without templates."""

from __future__ import annotations

import os
import re
import shutil
import stat
import tomllib
from pathlib import Path

import pytest

from modelserving.cli import scaffold
from modelserving.cli.main import main
from modelserving.cli.scaffold import (
    LANGUAGES,
    PLACEHOLDER,
    ScaffoldError,
    checkout_root,
    render,
    substitute,
    variables,
)

RUST_TEMPLATE_FILES = [
    ".cargo/config.toml",
    ".gitignore",
    "Cargo.toml",
    "Makefile",
    "README.md",
    "build.sh",
    "request.yaml",
    "src/lib.rs",
    "tests/plugin.rs",
]
GO_FILES = [
    ".gitignore",
    "Makefile",
    "README.md",
    "build.sh",
    "go.mod",
    "main.go",
    "main_test.go",
    "request.yaml",
]
SDK = checkout_root() / "plugins-src" / "sdk-rust"
GO_SDK = checkout_root() / "plugins-src" / "sdk-go"
needs_sdk = pytest.mark.skipif(
    not (SDK / "Cargo.toml").is_file(), reason="not run from a checkout with plugins-src/sdk-rust"
)
needs_go_sdk = pytest.mark.skipif(
    not (GO_SDK / "go.mod").is_file() or not (GO_SDK.parent / "build-go.sh").is_file(),
    reason="not run from a checkout with plugins-src/sdk-go and build-go.sh",
)


def cli(capsys: pytest.CaptureFixture[str], *argv: str) -> tuple[int, str, str]:
    code = main(["plugin", "new", *argv])
    out, err = capsys.readouterr()
    return code, out, err


def project_files(root: Path) -> list[str]:
    return sorted(p.relative_to(root).as_posix() for p in root.rglob("*") if p.is_file())


def sdk_sources(sdk: Path) -> list[str]:
    """The Rust SDK's files a project gets a copy of: its Cargo.toml and its sources."""
    return sorted(
        p.relative_to(sdk).as_posix() for p in [sdk / "Cargo.toml", *sdk.glob("src/**/*.rs")]
    )


def rust_files(sdk: Path) -> list[str]:
    """A generated Rust project's files: the templates', and the SDK's under vendor/."""
    return sorted(
        RUST_TEMPLATE_FILES + [f"vendor/modelserving-plugin/{f}" for f in sdk_sources(sdk)]
    )


@needs_sdk
def test_generates_the_rust_project(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    target = tmp_path / "team-label"
    code, out, err = cli(capsys, "team-label", "--lang", "rust", "--dir", str(target))
    assert code == 0, err
    assert err == ""
    sdk_files = sdk_sources(SDK)
    vendor = target / "vendor" / "modelserving-plugin"
    assert project_files(target) == rust_files(SDK)
    assert "src/lib.rs" in sdk_files and "src/patch.rs" in sdk_files
    for name in sdk_files:  # the copy is exact
        assert (vendor / name).read_bytes() == (SDK / name).read_bytes(), name
    assert out.splitlines()[0] == f"created {target}: the Rust plugin team-label (SDK: {SDK})"
    assert f"  {target / 'src/lib.rs'}" in out.splitlines()
    copied = len(sdk_sources(SDK))
    vendor_line = f"  {target / 'vendor/modelserving-plugin'}/  (a copy of the SDK: {copied} files)"
    assert out.splitlines()[-2] == vendor_line
    assert not any("/vendor/modelserving-plugin/src/" in line for line in out.splitlines())
    assert out.splitlines()[-1].startswith(f"next: cd {target} && make test build run pack")

    cargo = (target / "Cargo.toml").read_text()
    assert 'name = "team-label"' in cargo
    assert 'name = "team_label"' in cargo
    assert 'crate-type = ["cdylib", "rlib"]' in cargo
    assert 'modelserving-plugin = { path = "vendor/modelserving-plugin" }' in cargo
    assert str(SDK) not in cargo
    assert "\n[workspace]\n" in cargo
    assert re.search(r"^\[dependencies\]\n(#.*\n)*modelserving-plugin = .*\n\n", cargo, re.M)

    build = target / "build.sh"
    assert build.stat().st_mode & stat.S_IXUSR
    script = build.read_text()
    # the toolchain and flags of plugins-src/build.sh
    for expected in (
        "/usr/bin/cargo",
        "RUST_VERSION=1.63",
        "TARGET=wasm32-unknown-unknown",
        "-Clink-arg=-zstack-size=65536 -Ctarget-feature=+bulk-memory",
        "--offline",
        'SDK="$HERE/vendor/modelserving-plugin"',
        "CRATE=team_label",
    ):
        assert expected in script
    upstream = (checkout_root() / "plugins-src" / "build.sh").read_text()
    # ... and when those change, this template has to follow
    assert "WASM_STACK_SIZE=65536\n" in upstream
    assert "(-Clink-arg=-zstack-size=$WASM_STACK_SIZE -Ctarget-feature=+bulk-memory)" in upstream
    assert "RUST_VERSION=1.63\n" in upstream

    assert "use team_label::{" in (target / "tests/plugin.rs").read_text()
    assert 'DEFAULT_KEY: &str = "example.com/team-label"' in (target / "src/lib.rs").read_text()
    makefile = (target / "Makefile").read_text()
    assert "plugin pack $(NAME).wasm --name $(NAME) --gzip" in makefile
    assert "\tbash build.sh build\n" in makefile  # recipes are tab-indented
    readme = (target / "README.md").read_text()
    assert "plugin pack team-label.wasm --name team-label --gzip" in readme
    assert str(checkout_root() / "plugins-src" / "README.md") in readme
    assert (target / ".gitignore").read_text() == "/target/\n/team-label.wasm\n"
    for name in RUST_TEMPLATE_FILES:
        assert not PLACEHOLDER.search((target / name).read_text()), name


@needs_sdk
def test_default_dir_is_the_name_and_an_empty_dir_is_used(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.chdir(tmp_path)
    code, out, _ = cli(capsys, "p1", "--lang", "rust")
    assert code == 0
    assert out.startswith("created p1: ")
    assert project_files(tmp_path / "p1") == rust_files(SDK)
    (tmp_path / "empty").mkdir()
    code, _, err = cli(capsys, "p2", "--lang", "rust", "--dir", "empty")
    assert code == 0, err
    assert project_files(tmp_path / "empty") == rust_files(SDK)


@needs_sdk
def test_a_non_empty_or_non_directory_target_is_refused(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    used = tmp_path / "used"
    used.mkdir()
    (used / "notes.txt").write_text("mine")
    code, out, err = cli(capsys, "p", "--lang", "rust", "--dir", str(used))
    assert code == 2
    assert out == ""
    assert err == (
        f"error: {used} exists and is not empty; give another --dir, or remove it first\n"
    )
    assert os.listdir(used) == ["notes.txt"]
    afile = tmp_path / "afile"
    afile.write_text("")
    code, _, err = cli(capsys, "p", "--lang", "rust", "--dir", str(afile))
    assert code == 2
    assert err == f"error: {afile} exists and is not a directory\n"


@pytest.mark.parametrize(
    ("name", "message"),
    [
        (
            "Team",
            "error: 'Team': a plugin name must be a DNS-1123 label: at most 63 lower-case "
            "letters, digits and '-', starting and ending with a letter or digit",
        ),
        ("team_label", "error: 'team_label': a plugin name must be a DNS-1123 label"),
        ("-team", "error: '-team': a plugin name must be a DNS-1123 label"),
        ("a.b", "error: 'a.b': a plugin name must be a DNS-1123 label"),
        ("x" * 64, "error: 'xxxxxxxx"),
        (
            "fn",
            "error: 'fn' cannot be a Rust plugin's name: its Rust crate name fn is a Rust keyword "
            "or the name of a crate it needs",
        ),
        ("modelserving-plugin", "error: 'modelserving-plugin' cannot be a Rust plugin's name"),
        (
            "1st",
            "error: '1st' cannot be a Rust plugin's name: its Rust crate name 1st would start "
            "with a digit",
        ),
    ],
)
def test_bad_names(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], name: str, message: str
) -> None:
    target = tmp_path / "out"
    code, out, err = cli(capsys, "--lang", "rust", "--dir", str(target), "--", name)
    assert code == 2
    assert out == ""
    assert err.startswith(message)
    assert not target.exists()


def test_lang_is_required_and_known(capsys: pytest.CaptureFixture[str]) -> None:
    for argv in (["p"], ["p", "--lang", "cobol"]):
        with pytest.raises(SystemExit) as info:
            main(["plugin", "new", *argv])
        assert info.value.code == 2
        assert "--lang" in capsys.readouterr().err


def fake_checkout(tmp_path: Path, monkeypatch: pytest.MonkeyPatch, *sdks: str) -> Path:
    """A package that runs from ``tmp_path/checkout`` holding only the given SDK folders."""
    root = tmp_path / "checkout"
    (root / "plugins-src").mkdir(parents=True)
    for sdk in sdks:
        (root / "plugins-src" / sdk).mkdir()
    monkeypatch.setattr(scaffold, "checkout_root", lambda: root)
    return root


def test_the_sdk_missing_from_the_checkout(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    root = fake_checkout(tmp_path, monkeypatch)
    code, _, err = cli(capsys, "p", "--lang", "rust", "--dir", str(tmp_path / "p"))
    assert code == 2
    assert err == (
        "error: --lang rust needs the Rust guest SDK (plugins-src/sdk-rust), which the checkout "
        f"{root} does not have (yet)\n"
    )
    assert not (tmp_path / "p").exists()


def test_not_run_from_a_checkout(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    """An installed (not editable) package: no SDK sources next to it; --sdk is the way out."""
    monkeypatch.setattr(scaffold, "checkout_root", lambda: tmp_path / "site-packages")
    code, _, err = cli(capsys, "p", "--lang", "rust", "--dir", str(tmp_path / "p"))
    assert code == 2
    assert err.startswith(
        "error: the Rust guest SDK (plugins-src/sdk-rust) was not found: this modelserving is "
        "installed in "
    )
    assert "give the SDK's folder with --sdk DIR" in err


@needs_sdk
def test_sdk_option(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(scaffold, "checkout_root", lambda: tmp_path / "site-packages")
    code, _, err = cli(capsys, "p", "--lang", "rust", "--dir", str(tmp_path / "p"), "--sdk", ".")
    assert code == 2
    assert err == (
        f"error: --sdk .: {Path.cwd()} is not the Rust guest SDK (it has no Cargo.toml)\n"
    )
    other = tmp_path / "other-crate"
    other.mkdir()
    (other / "Cargo.toml").write_text('[package]\nname = "other"\n')
    code, _, err = cli(
        capsys, "p", "--lang", "rust", "--dir", str(tmp_path / "p"), "--sdk", str(other)
    )
    assert code == 2
    assert err == (
        f"error: the Rust guest SDK at {other} is unusable: {other / 'Cargo.toml'} is not the "
        "crate modelserving-plugin\n"
    )
    given = tmp_path / "sdk-copy"
    shutil.copytree(SDK, given, ignore=shutil.ignore_patterns("target"))
    (given / "src" / "extra.rs").write_text("// only in the given SDK\n")
    code, _, err = cli(
        capsys, "p", "--lang", "rust", "--dir", str(tmp_path / "p"), "--sdk", str(given)
    )
    assert code == 0, err
    # the project's copy is of the SDK given
    extra = tmp_path / "p" / "vendor" / "modelserving-plugin" / "src" / "extra.rs"
    assert extra.read_text() == "// only in the given SDK\n"
    assert project_files(tmp_path / "p") == rust_files(given)


@needs_go_sdk
def test_generates_the_go_project(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    target = tmp_path / "go-label"
    code, out, err = cli(capsys, "go-label", "--lang", "go", "--dir", str(target))
    assert code == 0, err
    assert out.splitlines()[0] == f"created {target}: the Go plugin go-label (SDK: {GO_SDK})"
    assert project_files(target) == GO_FILES
    upstream = (GO_SDK.parent / "build-go.sh").read_text()
    version = re.search(r"^GO_VERSION=(\S+)$", upstream, re.M)
    assert version is not None
    go_mod = (target / "go.mod").read_text()
    assert go_mod.startswith("module example.com/go-label\n")
    assert "\nrequire modelserving.dev/plugin v0.0.0\n" in go_mod
    assert f'\nreplace modelserving.dev/plugin => "{GO_SDK}"\n' in go_mod
    sdk_go = re.search(r"^go (\S+)$", (GO_SDK / "go.mod").read_text(), re.M)
    assert sdk_go is not None
    assert f"\ngo {sdk_go.group(1)}\n" in go_mod
    build = target / "build.sh"
    assert build.stat().st_mode & stat.S_IXUSR
    script = build.read_text()
    # the toolchain of plugins-src/build-go.sh
    assert f"GO_VERSION={version.group(1)}\n" in script
    flags = 'GO_BUILD_FLAGS=(-buildmode=c-shared -trimpath -buildvcs=false "-ldflags=-s -w")'
    assert flags in script
    assert flags in upstream
    assert 'export GOENV=off GOTOOLCHAIN="go$GO_VERSION" GOWORK=off CGO_ENABLED=0' in script
    assert 'export GOENV=off GOTOOLCHAIN="go$GO_VERSION" GOWORK=off CGO_ENABLED=0' in upstream
    assert "GOOS=wasip1 GOARCH=wasm go build" in script
    # TinyGo by default, with build-go.sh's flags, Go version and installer
    assert 'TOOLCHAIN="${TOOLCHAIN:-tinygo}"\n' in script
    tinygo_flags = "TINYGO_FLAGS=(-target=wasip1 -buildmode=c-shared -no-debug -scheduler=none)\n"
    assert tinygo_flags in script
    assert tinygo_flags in upstream
    tinygo_go = re.search(r"^TINYGO_GO_VERSION=(\S+)$", upstream, re.M)
    assert tinygo_go is not None
    assert f"TINYGO_GO_VERSION={tinygo_go.group(1)}\n" in script
    assert f"INSTALL_TINYGO={GO_SDK.parent / 'install-tinygo.sh'}\n" in script
    makefile = (target / "Makefile").read_text()
    assert "TOOLCHAIN ?= tinygo\n" in makefile
    assert "\tTOOLCHAIN=$(TOOLCHAIN) bash build.sh build\n" in makefile
    main_go = (target / "main.go").read_text()
    assert 'const DefaultKey = "example.com/go-label"' in main_go
    assert "//go:wasmexport ms_on_pod_create\n" in main_go
    assert "plugin pack $(NAME).wasm --name $(NAME) --gzip" in (target / "Makefile").read_text()
    for name in GO_FILES:
        assert not PLACEHOLDER.search((target / name).read_text()), name


def test_go_sdk_checks(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    root = fake_checkout(tmp_path, monkeypatch, "sdk-go")
    sdk = root / "plugins-src" / "sdk-go"
    (sdk / "go.mod").write_text("module example.com/other\n\ngo 1.24\n")
    argv = ["p", "--lang", "go", "--dir", str(tmp_path / "p")]
    code, _, err = cli(capsys, *argv)
    assert code == 2
    assert err == (
        f"error: the Go guest SDK at {sdk} is unusable: {sdk / 'go.mod'} is not the module "
        "modelserving.dev/plugin (with a go line)\n"
    )
    (sdk / "go.mod").write_text("module modelserving.dev/plugin\n\ngo 1.24\n")
    code, _, err = cli(capsys, *argv)
    assert code == 2
    build_go = root / "plugins-src" / "build-go.sh"
    assert err == (
        f"error: the Go guest SDK at {sdk} is unusable: cannot read {build_go}: "
        "No such file or directory\n"
    )
    build_go.write_text("GO_VERSION=1.26.8\n")
    code, _, err = cli(capsys, *argv)
    assert code == 2
    assert err == (
        f"error: the Go guest SDK at {sdk} is unusable: {build_go} sets no TINYGO_GO_VERSION "
        "(a checkout without TinyGo)\n"
    )
    build_go.write_text("GO_VERSION=1.26.8\nTINYGO_GO_VERSION=1.24.13\n")
    code, _, err = cli(capsys, *argv)
    assert code == 0, err
    go_mod = (tmp_path / "p" / "go.mod").read_text()
    assert f'replace modelserving.dev/plugin => "{sdk}"' in go_mod
    script = (tmp_path / "p" / "build.sh").read_text()
    assert "\nGO_VERSION=1.26.8\n" in script
    assert "\nTINYGO_GO_VERSION=1.24.13\n" in script


def test_go_without_its_sdk(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    root = fake_checkout(tmp_path, monkeypatch, "sdk-rust")
    code, out, err = cli(capsys, "p", "--lang", "go", "--dir", str(tmp_path / "p"))
    assert code == 2
    assert out == ""
    assert err == (
        "error: --lang go needs the Go guest SDK (plugins-src/sdk-go), which the checkout "
        f"{root} does not have (yet)\n"
    )


def test_templates_and_substitution() -> None:
    values = variables(LANGUAGES["rust"], "x", Path("/sdk dir/sdk-rust"), "/venv/bin/modelserving")
    assert values["sdk_path_sh"] == "'/sdk dir/sdk-rust'"
    assert substitute("a {{name}} {{crate}}", values, "t") == "a x x"
    with pytest.raises(ScaffoldError, match=r"template t: unknown variable \{\{nmae\}\}"):
        substitute("{{nmae}}", values, "t")
    files = render(
        LANGUAGES["rust"], variables(LANGUAGES["rust"], "my-plugin", SDK, "modelserving")
    )
    assert sorted(files) == RUST_TEMPLATE_FILES
    assert "use my_plugin::{" in files["tests/plugin.rs"]


def test_templates_are_package_data() -> None:
    """An installed (non-editable) package carries the template sets."""
    pyproject = tomllib.loads((Path(__file__).parents[3] / "pyproject.toml").read_text())
    assert "cli/templates/**/*" in pyproject["tool"]["setuptools"]["package-data"]["modelserving"]
