"""SIGTERM, SIGHUP and SIGINT during a dev cluster start become an exception, so it cleans up.

Used by ``cluster.up``: a killed ``make cluster-up`` or ``make run`` (SIGTERM), a closed terminal
(SIGHUP) or Ctrl-C (SIGINT) raises :class:`Interrupted` where the start is, so its cleanup
stops every process it had started. When the start is over, the previous handlers are back and
a signal that arrived is delivered again to them: with the default disposition the process then
dies of the signal as it would have (after the cleanup), SIGINT becomes ``KeyboardInterrupt``,
and a program's own handler sees it. Ignored signals stay ignored (``nohup`` keeps working).
Handlers can only be installed in the main thread; elsewhere the guard does nothing.
"""

from __future__ import annotations

import signal
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from types import FrameType, TracebackType
from typing import Any

SIGNALS = (signal.SIGTERM, signal.SIGHUP, signal.SIGINT)


class Interrupted(Exception):
    """A signal arrived while the dev cluster was starting."""

    def __init__(self, signum: int) -> None:
        self.signum = signum
        super().__init__(f"interrupted by {signal.Signals(signum).name}")


class SignalGuard:
    """While entered: the first of ``SIGNALS`` raises :class:`Interrupted` (see the module).

    ``held()`` marks a section the exception must not split (a process started but not yet
    recorded): a signal arriving there is raised at its end. After ``disarm()`` (the cleanup has
    begun) signals are only remembered, for delivery at exit.
    """

    def __init__(self, signals: tuple[signal.Signals, ...] = SIGNALS) -> None:
        self._signals = signals
        self._previous: dict[signal.Signals, Any] = {}
        self._received: int | None = None
        self._holding = 0
        self._armed = True

    def __enter__(self) -> SignalGuard:
        if threading.current_thread() is not threading.main_thread():
            return self
        for signum in self._signals:
            previous = signal.getsignal(signum)
            if previous == signal.SIG_IGN:
                continue
            signal.signal(signum, self._on_signal)
            self._previous[signum] = previous
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self._armed = False
        for signum, previous in self._previous.items():
            signal.signal(signum, previous if previous is not None else signal.SIG_DFL)
        self._previous.clear()
        if self._received is not None:
            signal.raise_signal(self._received)

    @property
    def received(self) -> int | None:
        """The first signal that arrived, if any."""
        return self._received

    def disarm(self) -> None:
        """From now on, only remember signals (the cleanup must not be interrupted)."""
        self._armed = False

    @contextmanager
    def held(self) -> Iterator[None]:
        """Defer :class:`Interrupted` to the end of this block."""
        self._holding += 1
        try:
            yield
        finally:
            self._holding -= 1
        self.raise_if_due()

    def _on_signal(self, signum: int, _frame: FrameType | None) -> None:
        if self._received is None:
            self._received = signum
        self.raise_if_due()

    def raise_if_due(self) -> None:
        """Raise :class:`Interrupted` for a signal that arrived (outside a held section, while
        armed). The handler raises at once, but where the signal lands decides whether the
        exception gets out: in a finalizer (``__del__`` of a socket the HTTP client dropped)
        Python prints and drops it, and the start went on to its end. So a loop that waits
        calls this between its polls too."""
        if self._received is not None and self._armed and not self._holding:
            raise Interrupted(self._received)
