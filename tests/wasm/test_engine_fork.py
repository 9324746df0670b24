"""A process that forks (to start a subprocess) while the engine's epoch ticker runs."""

from __future__ import annotations

import subprocess
import sys
import textwrap


def test_forking_with_the_epoch_ticker_running_is_quiet() -> None:
    script = textwrap.dedent(
        """
        import os
        from modelserving.sandbox.engine import SandboxEngine
        from modelserving.sandbox.settings import SandboxSettings

        engine = SandboxEngine(SandboxSettings())
        pid = os.fork()
        if pid == 0:
            os._exit(0)
        os.waitpid(pid, 0)
        print("forked")
        """
    )
    done = subprocess.run(
        [sys.executable, "-c", script], capture_output=True, text=True, timeout=60, check=True
    )
    assert done.stdout.strip() == "forked"
    assert "_after_fork" not in done.stderr, done.stderr
