"""Walking a guide's commands: the convention the guides follow, and the runner their tests use.

``docs/plugin-authors.md`` and ``docs/operator.md`` show commands with the output they printed.
``tests/wasm/test_author_guide.py`` and ``tests/integration/test_guides.py`` run those commands
in order and check that the output still has the shape the guide shows, so a guide that goes
stale fails a test.

The convention
--------------

- A block the tests use is a fenced block with an HTML comment on the line right above it::

      <!-- guide: GROUP/NAME [file=PATH | excerpt=PATH] -->

  ``GROUP`` says which test walks it (``rust`` and ``go``: the author guide's local steps, run
  by ``tests/wasm/test_author_guide.py``; ``local`` and ``cluster``: steps run by
  ``tests/integration/test_guides.py`` against the local control plane). ``GROUP/NAME`` is unique
  in its guide. The comment is invisible when the Markdown is rendered.
- A ``console`` block holds commands and their output. A line starting with ``$ `` is a command
  (a line ending with ``\\`` continues on the next one); the lines up to the next command are
  what it printed, standard output and standard error together.
- ``file=PATH``: the block (any language) is a file the reader writes; the walk writes it to
  ``PATH`` in the current directory when it reaches the block.
- ``excerpt=PATH``: the block is an excerpt of ``PATH`` (a generated file): its lines, blank
  ones and lines that are only ``...`` or ``// ...`` left out, must appear in that file in this
  order (each compared without its leading and trailing spaces).
- Every ``console`` block of a guide is marked (``check_all_marked``): what a guide shows with
  its output is run. ``sh`` blocks are commands shown without output (they need a real
  installation: a registry, a deployed controller) and are not run.

Running
-------

The commands of one walk run in one ``bash`` process, so ``cd`` and shell variables carry from
one command to the next (and from block to block). Each command's standard input is
``/dev/null``. A command whose documented output starts with ``error:``, ``Error from
server``, or ``<FailureClass>: plugin '`` must exit non-zero; any other must exit 0. Read-only
cluster commands (``kubectl get``, ``kubectl describe``, ``curl``) are retried until their
output matches, for up to ``retry_seconds``, since the controller acts asynchronously.

Matching output
---------------

The documented output is turned into a pattern, line by line; the actual output must match it
as a whole (trailing spaces and trailing empty lines ignored):

- a line that is only ``...`` (any indentation) stands for any number of lines, none included;
- a line ending with ``...`` matches any line starting with the text before the dots (long base64
  or messages trimmed);
- numbers match any number (sizes, fuel, durations, counts, timestamps' digits), and a run of
  hex digits with at least one digit and one letter, 7 or more long, any such run (digests);
- kubectl ages (``5s``, ``2m10s``, ``7s (x3 over 20s)``) match any age;
- a run of two or more spaces matches any run of spaces (table columns);
- everything else is literal. ``substitutions`` replace text in the documented commands and
  output first (the folder the guide was run in, the checkout, a port).
"""

from __future__ import annotations

import os
import re
import select
import subprocess
import time
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from pathlib import Path

MARKER = re.compile(r"^<!--\s*guide:\s*(?P<group>[a-z]+)/(?P<name>[a-z0-9-]+)(?P<attrs>.*?)-->\s*$")
FENCE = re.compile(r"^(?P<fence>```+)(?P<lang>[A-Za-z0-9_-]*)\s*$")
ATTR = re.compile(r"(?P<key>file|excerpt)=(?P<value>\S+)")
FAILING_OUTPUT = re.compile(r"^(error: |Error from server|[A-Z][A-Za-z]+: plugin ')")
READ_ONLY = re.compile(r"^(kubectl\s+(-n\s+\S+\s+)?(get|describe)\b|curl\b)")


@dataclass(frozen=True)
class Block:
    """One fenced block of a guide, marked or not."""

    guide: Path
    line: int  # 1-based line of the opening fence
    lang: str
    text: str
    group: str | None = None
    name: str | None = None
    attrs: Mapping[str, str] = field(default_factory=dict)

    @property
    def where(self) -> str:
        return f"{self.guide.name}:{self.line} ({self.group}/{self.name})"


def read_blocks(guide: Path) -> list[Block]:
    """Every fenced block of ``guide``, with its marker when the line above has one."""
    lines = guide.read_text(encoding="utf-8").splitlines()
    blocks: list[Block] = []
    i = 0
    while i < len(lines):
        opening = FENCE.match(lines[i])
        if opening is None:
            i += 1
            continue
        fence = opening.group("fence")
        end = i + 1
        while end < len(lines) and lines[end].strip() != fence:
            end += 1
        text = "\n".join(lines[i + 1 : end]) + "\n"
        marker = MARKER.match(lines[i - 1]) if i > 0 else None
        if marker is None:
            blocks.append(Block(guide, i + 1, opening.group("lang"), text))
        else:
            attrs = {m.group("key"): m.group("value") for m in ATTR.finditer(marker["attrs"])}
            blocks.append(
                Block(
                    guide,
                    i + 1,
                    opening.group("lang"),
                    text,
                    marker.group("group"),
                    marker.group("name"),
                    attrs,
                )
            )
        i = end + 1
    return blocks


def marked(guide: Path, groups: Iterable[str]) -> list[Block]:
    """The marked blocks of these groups, in the guide's order."""
    wanted = set(groups)
    return [b for b in read_blocks(guide) if b.group in wanted]


def check_all_marked(guide: Path) -> None:
    """Every console block is marked, every marker is on a block, names are unique."""
    blocks = read_blocks(guide)
    unmarked = [b.line for b in blocks if b.lang == "console" and b.group is None]
    assert not unmarked, f"{guide.name}: console blocks without a guide marker at lines {unmarked}"
    names = [f"{b.group}/{b.name}" for b in blocks if b.name is not None]
    twice = sorted({n for n in names if names.count(n) > 1})
    assert not twice, f"{guide.name}: block names used twice: {twice}"
    markers = sum(1 for line in guide.read_text().splitlines() if MARKER.match(line))
    assert markers == len(names), f"{guide.name}: a guide marker is not right above a fence"


@dataclass(frozen=True)
class Step:
    """One command of a console block and the output the guide shows for it."""

    command: str
    expected: list[str]

    @property
    def should_fail(self) -> bool:
        first = next((line for line in self.expected if line.strip()), "")
        return FAILING_OUTPUT.match(first) is not None


def steps(block: Block) -> list[Step]:
    """The commands of a console block with their documented output."""
    assert block.lang == "console", f"{block.where}: not a console block"
    out: list[Step] = []
    lines = block.text.splitlines()
    i = 0
    while i < len(lines):
        line = lines[i]
        assert line.startswith("$ "), f"{block.where}: output before any command: {line!r}"
        command = line[2:]
        while command.endswith("\\") and i + 1 < len(lines):
            i += 1
            command = command + "\n" + lines[i]  # bash joins the lines
        i += 1
        expected: list[str] = []
        while i < len(lines) and not lines[i].startswith("$ "):
            expected.append(lines[i])
            i += 1
        out.append(Step(command, expected))
    return out


# --- matching ---------------------------------------------------------------------------------

_AGE = r"\d+[smhd](?:\d+[smhd])?"
_TOKENS = re.compile(
    r"(?P<age>(?<![\w.])" + _AGE + r"(?: \(x\d+ over " + _AGE + r"\))?(?![\w.]))"
    r"|(?P<hex>(?<![0-9A-Za-z])(?=[0-9a-f]*[a-f])(?=[0-9a-f]*[0-9])[0-9a-f]{7,}(?![0-9A-Za-z]))"
    r"|(?P<number>\d+(?:\.\d+)?)"
    r"|(?P<spaces>(?<=\S) {2,})"
)


def line_pattern(line: str) -> str:
    """The regular expression one documented output line stands for (without the newline)."""
    prefix_only = line.endswith("...")
    if prefix_only:
        line = line[:-3]
    parts: list[str] = []
    last = 0
    for m in _TOKENS.finditer(line):
        parts.append(re.escape(line[last : m.start()]))
        kind = m.lastgroup
        if kind == "age":
            parts.append(_AGE + r"(?: \(x\d+ over " + _AGE + r"\))?")
        elif kind == "hex":
            parts.append(r"[0-9a-f]{7,}")
        elif kind == "number":
            parts.append(r"\d+(?:\.\d+)?")
        else:
            parts.append(r" +")
        last = m.end()
    parts.append(re.escape(line[last:]))
    return "".join(parts) + ("[^\n]*" if prefix_only else "")


def output_pattern(expected: list[str]) -> re.Pattern[str]:
    """The pattern the whole output of a command must match."""
    parts = []
    for line in _trim(expected):
        if line.strip() == "...":
            parts.append(r"(?:[^\n]*\n)*?")
        else:
            parts.append(line_pattern(line) + "\n")
    return re.compile("".join(parts))


def _trim(lines: list[str]) -> list[str]:
    out = [line.rstrip() for line in lines]
    while out and not out[-1]:
        out.pop()
    return out


def normalized_output(text: str) -> str:
    lines = _trim(text.splitlines())
    return "".join(line + "\n" for line in lines)


def output_matches(expected: list[str], actual: str) -> bool:
    return output_pattern(expected).fullmatch(normalized_output(actual)) is not None


def check_excerpt(block: Block, path: Path) -> None:
    """Every line of the excerpt appears in ``path``, in order."""
    wanted = [
        s
        for s in (line.strip() for line in block.text.splitlines())
        if s and s not in ("...", "// ...", "# ...")
    ]
    have = [line.strip() for line in path.read_text(encoding="utf-8").splitlines()]
    at = 0
    for line in wanted:
        try:
            at = have.index(line, at) + 1
        except ValueError:
            raise AssertionError(
                f"{block.where}: the excerpt's line {line!r} is not in {path} "
                "(after the lines before it): the guide is stale"
            ) from None


# --- running ----------------------------------------------------------------------------------


class Shell:
    """One bash process; commands run one at a time and their merged output is returned."""

    def __init__(self, cwd: Path, env: Mapping[str, str]) -> None:
        self._mark = f"__guide_done_{os.getpid()}_{time.monotonic_ns()}__"
        self.proc = subprocess.Popen(
            ["bash", "--noprofile", "--norc"],
            cwd=cwd,
            env=dict(env),
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=subprocess.STDOUT,
        )

    def run(self, command: str, timeout: float) -> tuple[int, str]:
        assert self.proc.stdin is not None and self.proc.stdout is not None
        script = f"{{ {command}\n}} </dev/null\nprintf '\\n{self._mark} %d\\n' $?\n"
        self.proc.stdin.write(script.encode())
        self.proc.stdin.flush()
        fd = self.proc.stdout.fileno()
        data = b""
        deadline = time.monotonic() + timeout
        end = re.compile(rb"\n" + re.escape(self._mark.encode()) + rb" (\d+)\n$")
        while True:
            found = end.search(data)
            if found is not None:
                text = data[: found.start()].decode("utf-8", errors="replace")
                return int(found.group(1)), text
            left = deadline - time.monotonic()
            if left <= 0:
                self.close()
                raise AssertionError(f"timed out after {timeout:.0f}s: {command}\n{data!r}")
            ready, _, _ = select.select([fd], [], [], min(left, 1.0))
            if ready:
                chunk = os.read(fd, 65536)
                if not chunk:
                    raise AssertionError(f"bash ended while running: {command}\n{data!r}")
                data += chunk

    def close(self) -> None:
        if self.proc.poll() is None:
            self.proc.kill()
        self.proc.wait(10)
        for stream in (self.proc.stdin, self.proc.stdout):
            if stream is not None:
                stream.close()


@dataclass
class Walk:
    """Runs marked blocks in order in one shell; see the module docstring for the rules."""

    cwd: Path
    env: Mapping[str, str] = field(repr=False)
    substitutions: dict[str, str] = field(default_factory=dict)
    retry_seconds: float = 0.0
    command_timeout: float = 900.0
    log: list[str] = field(default_factory=list, repr=False)
    _shell: Shell | None = field(default=None, repr=False)

    def __enter__(self) -> Walk:
        self._shell = Shell(self.cwd, self.env)
        return self

    def __exit__(self, *_: object) -> None:
        if self._shell is not None:
            self._shell.close()

    def _subst(self, text: str) -> str:
        for old, new in self.substitutions.items():
            text = text.replace(old, new)
        return text

    def here(self) -> Path:
        """The shell's current directory."""
        _, out = self._run("pwd")
        return Path(out.strip())

    def _run(self, command: str) -> tuple[int, str]:
        assert self._shell is not None, "use Walk as a context manager"
        return self._shell.run(command, self.command_timeout)

    def run(self, block: Block) -> None:
        if "file" in block.attrs:
            target = self.here() / block.attrs["file"]
            target.write_text(self._subst(block.text), encoding="utf-8")
            self.log.append(f"# wrote {target}")
            return
        if "excerpt" in block.attrs:
            check_excerpt(block, self.here() / block.attrs["excerpt"])
            return
        for step in steps(block):
            self.run_step(block, step)

    def run_step(self, block: Block, step: Step) -> str:
        command = self._subst(step.command)
        expected = [self._subst(line) for line in step.expected]
        retry = self.retry_seconds if READ_ONLY.match(command) else 0.0
        deadline = time.monotonic() + retry
        while True:
            started = time.monotonic()
            status, out = self._run(command)
            took = time.monotonic() - started
            failed = status != 0
            ok = failed == step.should_fail and output_matches(expected, out)
            if ok or time.monotonic() >= deadline:
                break
            time.sleep(1.0)
        self.log.append(f"$ {command}   # exit {status}, {took:.1f}s\n{out}")
        if failed != step.should_fail:
            want = "to fail" if step.should_fail else "to succeed"
            raise AssertionError(
                f"{block.where}: expected {want}, exit status {status}:\n$ {command}\n{out}"
            )
        if not output_matches(expected, out):
            raise AssertionError(
                f"{block.where}: the output no longer matches the guide (stale guide?)\n"
                f"$ {command}\n--- the guide shows:\n"
                + "\n".join(expected)
                + f"\n--- the command printed:\n{out}"
            )
        return out


MAKE_VARIABLES = frozenset(
    {"MAKELEVEL", "MAKEFLAGS", "MFLAGS", "MAKEOVERRIDES", "MAKE_TERMOUT", "MAKE_TERMERR"}
)


def shell_env(*prepend: Path, **extra: str) -> dict[str, str]:
    """The environment of a walk: these folders first on PATH, plus ``extra``."""
    # Not pytest's variables, nor those of a make that runs pytest (`make test`): a make in a walk
    # would print "make[1]: Entering directory" and share the outer make's job server.
    env = {
        k: v
        for k, v in os.environ.items()
        if not k.startswith("PYTEST_") and k not in MAKE_VARIABLES
    }
    env["PATH"] = os.pathsep.join([*(str(p) for p in prepend), env.get("PATH", "")])
    env.update(extra)
    env.setdefault("LC_ALL", "C.UTF-8")
    return env


def show(guide: Path, selectors: list[str], cwd: Path) -> int:
    """Run the marked blocks chosen by ``selectors`` (``GROUP`` or ``GROUP/NAME``) in ``cwd``
    with this environment and print each console block with the output its commands print now
    (to refresh a guide by hand)."""
    chosen = [
        b for b in read_blocks(guide) if b.group in selectors or f"{b.group}/{b.name}" in selectors
    ]
    with Walk(cwd, shell_env()) as walk:
        for block in chosen:
            if block.lang != "console" or block.attrs:
                walk.run(block)
                print(f"<!-- {block.where}: {'wrote' if 'file' in block.attrs else 'checked'} -->")
                continue
            print(f"<!-- {block.where} -->")
            for step in steps(block):
                status, out = walk._run(step.command)
                print(f"$ {step.command}")
                print(normalized_output(out), end="")
                if status != 0:
                    print(f"<!-- exit status {status} -->")
    return 0


if __name__ == "__main__":  # python -m tests.guides GUIDE DIR SELECTOR...
    import sys

    sys.exit(show(Path(sys.argv[1]).resolve(), sys.argv[3:], Path(sys.argv[2])))
