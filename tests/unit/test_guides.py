"""The guide walker of ``tests/guides.py``: its output matching rules, the parsing of console
blocks, and the markers of the two guides it walks (the walks themselves need toolchains and a
cluster: tests/wasm/test_author_guide.py, tests/integration/test_guides.py)."""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.guides import Walk, check_all_marked, output_matches, read_blocks, shell_env, steps

ROOT = Path(__file__).resolve().parents[2]


@pytest.mark.parametrize("guide", ["plugin-authors.md", "operator.md"])
def test_guides_mark_every_console_block(guide: str) -> None:
    check_all_marked(ROOT / "docs" / guide)


@pytest.mark.parametrize(
    ("expected", "actual", "matches"),
    [
        (["size 86771 bytes"], "size 2035034 bytes\n", True),
        (["size 86771 bytes"], "size many bytes\n", False),
        (["sha256 dcf4b13a906254d5"], "sha256 0efe152ddc0246510d28\n", True),
        (["x", "...", "y"], "x\na\nb\ny\n", True),
        (["x", "...", "y"], "x\ny\n", True),
        (["x", "...", "y"], "x\na\n", False),
        (["  key: H4sIAAAA..."], "  key: H4sIAAAAxyz\n", True),
        (["  key: H4sIAAAA..."], "  key: other\n", False),
        (["NAME    AGE", "llama   5s"], "NAME     AGE\nllama    2m10s\n", True),
        (["0s   Normal"], "7s (x3 over 20s)   Normal\n", True),
        (["(100 ms)"], "(250 ms)\n", True),
        (["value: ml"], "value: ai\n", False),
        (["a"], "a\n\n\n", True),
        (["a"], "a\nb\n", False),
    ],
)
def test_output_matching(expected: list[str], actual: str, matches: bool) -> None:
    assert output_matches(expected, actual) is matches


def test_console_blocks_are_commands_and_outputs(tmp_path: Path) -> None:
    guide = tmp_path / "guide.md"
    guide.write_text(
        "<!-- guide: demo/one -->\n"
        "```console\n"
        "$ echo one \\\n"
        "  two\n"
        "one two\n"
        "$ false-command\n"
        "error: nope\n"
        "```\n"
        "<!-- guide: demo/file file=x.txt -->\n"
        "```yaml\n"
        "a: 1\n"
        "```\n"
    )
    one, file_ = read_blocks(guide)
    first, second = steps(one)
    assert first.command == "echo one \\\n  two"
    assert first.expected == ["one two"]
    assert not first.should_fail and second.should_fail
    assert file_.attrs == {"file": "x.txt"} and file_.text == "a: 1\n"
    with Walk(tmp_path, shell_env()) as walk:
        walk.run(file_)
        walk.run_step(one, steps(one)[0])
        assert walk.here() == tmp_path
    assert (tmp_path / "x.txt").read_text() == "a: 1\n"


def test_a_walk_runs_outside_the_make_that_runs_pytest(monkeypatch: pytest.MonkeyPatch) -> None:
    """`make test` runs pytest with MAKELEVEL set; a make inside a walk must not see it (it
    would print "make[1]: Entering directory" lines that no guide shows)."""
    monkeypatch.setenv("MAKELEVEL", "1")
    monkeypatch.setenv("MAKEFLAGS", "w")
    env = shell_env()
    assert "MAKELEVEL" not in env and "MAKEFLAGS" not in env
    assert env["PATH"]
