"""docs/plugin-authors.md, walked: its local commands run in order and print what it shows.

The guide marks its blocks with ``<!-- guide: GROUP/NAME -->`` comments (the convention and the
output matching rules are in ``tests/guides.py``). This test runs the ``rust`` group
(scaffold a Rust plugin, test, build, run, validate a config, a forbidden patch, a fuel limit,
inspect, bench, pack) and the ``go`` group (scaffold a Go plugin, test, build with TinyGo, pack,
the fuel figures, bench; then standard Go: build, the ConfigMap size limit, the memory limit)
in a temporary folder standing for the guide's ``/tmp/guide``, with this checkout's
``modelserving`` first on ``PATH``. Source excerpts the guide quotes must still be in the
generated files. The ``cluster`` group (deploy,
update) is walked by ``tests/integration/test_guides.py``.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from modelserving.cli.scaffold import checkout_root
from tests.guides import Walk, check_all_marked, marked, read_blocks, shell_env
from tests.wasm.test_plugin_new import go_missing, rust_missing
from tests.wasm.test_tinygo_build import install_tinygo

ROOT = checkout_root()
GUIDE = ROOT / "docs" / "plugin-authors.md"
VENV_BIN = ROOT / ".venv" / "bin"
GUIDE_DIR = "/tmp/guide"  # where the guide's output was recorded
GUIDE_CHECKOUT = "/work/main"


def walk(tmp_path: Path, cache: Path, tinygo: Path | None = None) -> Walk:
    """A walk in ``tmp_path/guide`` (the guide's /tmp/guide), with this checkout's modelserving
    first on PATH and a private module cache (the Go build cache and TinyGo, given as its
    installed root, are the shared ones: a cold one costs minutes)."""
    work = tmp_path / "guide"
    work.mkdir()
    cache.mkdir(exist_ok=True)
    shared_go = Path.home() / ".cache" / "modelserving" / "go"
    if shared_go.is_dir() and not (cache / "go").exists():
        (cache / "go").symlink_to(shared_go)
    if tinygo is not None:
        (cache / tinygo.parent.name).symlink_to(tinygo.parent)
    env = shell_env(VENV_BIN, MODELSERVING_CACHE=str(cache))
    env.pop("GOPROXY", None)  # offline: the scaffold's build.sh sets GOPROXY=off
    substitutions = {GUIDE_DIR: str(work), GUIDE_CHECKOUT: str(ROOT)}
    return Walk(tmp_path, env, substitutions)


def test_every_console_block_of_the_guide_is_marked() -> None:
    check_all_marked(GUIDE)
    groups = {b.group for b in read_blocks(GUIDE) if b.group}
    assert groups == {"rust", "go", "cluster"}


@pytest.mark.heavy
@pytest.mark.skipif(rust_missing() is not None, reason=f"Rust toolchain: {rust_missing()}")
@pytest.mark.timeout(900)
def test_the_rust_steps_of_the_author_guide(tmp_path: Path) -> None:
    blocks = marked(GUIDE, ["rust"])
    with walk(tmp_path, tmp_path / "cache") as guide:
        for block in blocks:
            guide.run(block)
        wasm = guide.here() / "team-label.wasm"
    assert wasm.read_bytes()[:4] == b"\0asm"
    assert (wasm.parent / "packed.yaml").is_file()


@pytest.mark.heavy
@pytest.mark.skipif(go_missing() is not None, reason=f"Go toolchain: {go_missing()}")
@pytest.mark.timeout(900)
def test_the_go_steps_of_the_author_guide(tmp_path: Path) -> None:
    blocks = marked(GUIDE, ["go"])
    with walk(tmp_path, tmp_path / "cache", install_tinygo()) as guide:
        for block in blocks:
            guide.run(block)
        assert guide.here() == tmp_path / "guide" / "go-label"
