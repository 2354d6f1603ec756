"""SIGTERM as Ctrl-C, and the status of a run: ``complete`` or ``interrupted``.

CI runners stop a job with SIGTERM, then SIGKILL a few seconds later. Python's default
for SIGTERM is to die at once, so pytest never reaches its session end and no report
is written. While ragbench items run, SIGTERM raises ``KeyboardInterrupt`` instead, as
Ctrl-C does: pytest's own interruption path runs, the session-end hooks write the
finished records, and the run is marked ``interrupted``. A SIGTERM after that (the
interruption is under way, or the report is being written) is ignored, so that the
files are finished before the SIGKILL.
SIGINT keeps its meaning (a second Ctrl-C while the report is written stops it); it is
only noted, to say in the report what stopped the run. Handlers are installed only
where the default handler is in place, in the main thread, and restored at the end.
"""

from __future__ import annotations

import contextlib
import signal
import threading
from dataclasses import dataclass
from types import FrameType
from typing import Any


class SignalWatch:
    """Turns SIGTERM into ``KeyboardInterrupt`` and notes which signal stopped the run."""

    def __init__(self) -> None:
        self.received: str | None = None  # the first signal that arrived
        self.reporting = False  # the report is being written: SIGTERM waits for it
        self._previous: dict[int, Any] = {}

    def install(self) -> None:
        """Take over SIGTERM (and note SIGINT), where nobody else handles them."""
        if self._previous or threading.current_thread() is not threading.main_thread():
            return
        defaults = {signal.SIGTERM: signal.SIG_DFL, signal.SIGINT: signal.default_int_handler}
        for signum, default in defaults.items():
            with contextlib.suppress(ValueError, OSError):
                if signal.getsignal(signum) is default:
                    self._previous[signum] = signal.signal(signum, self._handle)

    def uninstall(self) -> None:
        """Put the handlers back as they were."""
        if threading.current_thread() is not threading.main_thread():
            return
        for signum, previous in self._previous.items():
            with contextlib.suppress(ValueError, OSError):
                if signal.getsignal(signum) == self._handle:
                    signal.signal(signum, previous)
        self._previous.clear()

    def _handle(self, signum: int, frame: FrameType | None) -> None:
        name = signal.Signals(signum).name
        first = self.received is None
        self.received = self.received or name
        if signum == signal.SIGTERM:
            if self.reporting or not first:  # the interruption is already under way
                return
            raise KeyboardInterrupt(f"{name}: pytest-ragbench stops the session as on "
                                    "Ctrl-C and keeps the finished items")
        signal.default_int_handler(signum, frame)


@dataclass(frozen=True)
class RunStatus:
    """What ``run`` in results.json says about how far the run got."""

    status: str  # "complete" or "interrupted"
    items_not_run: int | None  # None: unknown (stopped before the items were known)
    interrupted_by: str | None

    def as_run_keys(self) -> dict[str, Any]:
        """``status``, ``items_not_run`` and, when interrupted, ``interrupted_by``."""
        keys: dict[str, Any] = {"status": self.status, "items_not_run": self.items_not_run}
        if self.interrupted_by:
            keys["interrupted_by"] = self.interrupted_by
        return keys


def run_status(selected: set[str] | None, finished: set[str], *, interrupted: bool,
               signal_name: str | None, shouldstop: Any = None) -> RunStatus:
    """``complete`` when every selected item has a record, else ``interrupted``.

    ``selected``: node ids of the session's ragbench items (None when not known, e.g.
    the session stopped before the xdist workers had collected). ``interrupted``: pytest
    ended with ``ExitCode.INTERRUPTED``. A run stopped early by ``-x`` / ``--maxfail``
    is partial too: it is ``interrupted`` with the reason pytest gave.
    """
    not_run = None if selected is None else len(selected - finished)
    if not_run == 0 or (not_run is None and not interrupted):
        return RunStatus("complete", not_run, None)
    if signal_name:
        why = signal_name
    elif isinstance(shouldstop, str) and shouldstop:
        why = shouldstop
    elif interrupted:
        why = "KeyboardInterrupt"
    else:
        why = "the session stopped before every item ran"
    return RunStatus("interrupted", not_run, why)
