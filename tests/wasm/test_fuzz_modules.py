"""Random modules (``ms-smith``, wasm-smith) and random responses through load, call, the plugin
adapter and the patch policy: every outcome is a result or one failure class, within the limits,
and nothing crashes.

The campaign (``tests/wasm/module_fuzz.py``, which says what it generates and checks) runs in a
child process, so a crash of the host (a segfault in wasmtime, an abort in Extism) or a hang
fails this test naming the seed and the module, instead of killing pytest. ``make test`` runs a
fixed seed and count; ``make fuzz`` a longer campaign (``FUZZ_SEED``, ``FUZZ_COUNT``). Both build
ms-smith first (``make smith``) and pass it in ``SMITH``; run alone, without it built, the
test is skipped.
"""

from __future__ import annotations

import hashlib
import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

ROOT = Path(__file__).resolve().parents[2]
SEED = int(os.environ.get("FUZZ_SEED") or 14)
COUNT = int(os.environ.get("FUZZ_COUNT") or 300)
"""The fixed campaign of ``make test``: 25 to 65 s on 2 cores alone, and more than 120 s beside
the integration tests on a busy day (2026-12-07)."""
CHILD_TIMEOUT = max(100.0, COUNT * 1.0)
"""Seconds the campaign may take before it is called hung. The test's own pytest timeout is
longer (``PYTEST_TIMEOUT``), so a hang is reported with the module that hung, not as pytest's
timeout in the middle of the wait (``make fuzz`` turns pytest's off)."""
PYTEST_TIMEOUT = CHILD_TIMEOUT + 60
SHOWN = 5


def cached_smith() -> Path:
    """Where ``make smith`` puts the binary of the current sources (the key the Makefile uses:
    the first 12 hex digits of the sha256 of Cargo.toml, Cargo.lock and src/main.rs)."""
    source = ROOT / "tests" / "wasm" / "smith"
    digest = hashlib.sha256()
    for part in ("Cargo.toml", "Cargo.lock", "src/main.rs"):
        digest.update((source / part).read_bytes())
    cache = os.environ.get("MODELSERVING_CACHE") or os.path.join(
        os.environ.get("XDG_CACHE_HOME") or os.path.expanduser("~/.cache"), "modelserving"
    )
    return Path(cache) / f"smith-{digest.hexdigest()[:12]}" / "ms-smith"


def smith() -> str:
    """The ms-smith to use: make's (it must exist), else the cached one, else skip."""
    given = os.environ.get("SMITH")
    if given:
        assert Path(given).is_file(), f"SMITH={given} does not exist (make smith)"
        return given
    cached = cached_smith()
    if not cached.is_file():
        pytest.skip(f"no ms-smith at {cached}: `make smith` builds it (make test does)")
    return str(cached)


def campaign(
    tool: str, *args: str, timeout: float | None = None
) -> subprocess.CompletedProcess[str]:
    command = [sys.executable, "-m", "tests.wasm.module_fuzz", "--smith", tool, *args]
    return subprocess.run(
        command, cwd=ROOT, capture_output=True, text=True, timeout=timeout, check=False
    )


def lines(stdout: str | bytes | None) -> list[dict[str, Any]]:
    if isinstance(stdout, bytes):
        stdout = stdout.decode(errors="replace")
    return [json.loads(line) for line in (stdout or "").splitlines() if line.startswith("{")]


def reproducer(tool: str, index: int, where: Path) -> str:
    """How to make module ``index`` again, and its text (WAT)."""
    where.mkdir(parents=True, exist_ok=True)
    campaign(
        tool, "--seed", str(SEED), "--only", str(index), "--save", str(where), "--generate-only"
    )
    path = where / f"module-{SEED}-{index}.wasm"
    command = f"python -m tests.wasm.module_fuzz --smith {tool} --seed {SEED} --only {index}"
    if not path.is_file():
        return f"{command}\n(smith made no module from these bytes)"
    wat = subprocess.run(
        [tool, "print", str(path)], capture_output=True, text=True, check=False
    ).stdout
    if len(wat) > 6000:
        wat = wat[:6000] + "\n;; ... cut"
    return f"{command}\n{path}:\n{wat}"


@pytest.mark.heavy
@pytest.mark.timeout(PYTEST_TIMEOUT)
def test_random_modules_end_in_a_result_or_a_failure_class(tmp_path: Path) -> None:
    tool = smith()
    seed_args = ("--seed", str(SEED), "--count", str(COUNT))
    out: str | bytes | None
    err: str | bytes | None
    try:
        run = campaign(tool, *seed_args, timeout=CHILD_TIMEOUT)
        code = run.returncode
        died = f"killed by signal {-code}" if code < 0 else f"exit status {code}"
        out, err = run.stdout, run.stderr
    except subprocess.TimeoutExpired as exc:
        out, err, died = exc.stdout, exc.stderr, f"hung for {CHILD_TIMEOUT} s"
    got = lines(out)
    if not got or "summary" not in got[-1]:
        stderr = (err.decode(errors="replace") if isinstance(err, bytes) else err or "")[-3000:]
        last = got[-1] if got else {}
        if "start" in last:
            what = f"running module {last}:\n{reproducer(tool, last['start'], tmp_path)}"
        else:
            what = f"making module {last.get('make')} (ms-smith)" if last else "starting"
        pytest.fail(f"the campaign (seed {SEED}) died ({died}) {what}\nstderr:\n{stderr}")
    result = got[-1]
    print(json.dumps({k: v for k, v in result.items() if k != "findings"}, indent=1))
    findings = result["findings"]
    if findings:
        shown = [
            f"{json.dumps(f)}\n{reproducer(tool, f['index'], tmp_path)}" for f in findings[:SHOWN]
        ]
        pytest.fail(
            f"{len(findings)} broken invariants (seed {SEED}, {COUNT} modules):\n"
            + "\n\n".join(shown)
        )
    summary = result["summary"]
    # Not vacuous: modules of the ABI shape loaded and ran to results and to failures.
    assert summary.get("abi: loaded", 0) > 0
    assert summary.get("call result", 0) > 0
    assert summary.get("call Trap", 0) + summary.get("call FuelExhausted", 0) > 0
