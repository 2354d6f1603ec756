"""Progress bars for the long phases of a session: indexing a corpus, waiting for answers.

A bar is drawn with tqdm on the terminal pytest writes to, and only when that terminal is
a TTY, in the controller process (not on an xdist worker, which has no terminal) and from
the main thread: in a CI log, a pipe or a background thread it stays silent, as tqdm
does on a file that is not a terminal. pytest captures output while fixtures and items
run, so each refresh is written with capture suspended, as pytest's own live logging
does, through the terminal reporter and on a line of its own. Cheap to import: tqdm is
imported when a bar is actually drawn.
"""

from __future__ import annotations

import contextlib
import shutil
import sys
import threading
from collections.abc import Iterator
from typing import Any

import pytest

MAX_WIDTH = 100


class ProgressBar:
    """A tqdm bar, or nothing at all when progress is not shown; same methods either way."""

    def __init__(self, bar: Any = None) -> None:
        self._bar = bar

    @property
    def shown(self) -> bool:
        """True when the bar is drawn on a terminal."""
        return self._bar is not None

    def update(self, count: int = 1) -> None:
        """Advance by ``count``."""
        if self._bar is not None:
            self._bar.update(count)

    def set(self, done: int) -> None:
        """Show ``done`` as the count reached so far."""
        if self._bar is not None and done != self._bar.n:
            self._bar.update(done - self._bar.n)


class _TerminalStream:
    """A file for tqdm: writes to pytest's terminal with output capture suspended."""

    def __init__(self, config: pytest.Config, reporter: Any) -> None:
        self._config = config
        self._reporter = reporter
        self.encoding = getattr(sys.stdout, "encoding", None) or "utf-8"

    def write(self, text: str) -> int:
        if threading.current_thread() is not threading.main_thread():
            return len(text)  # capture can only be suspended by the thread pytest runs in
        capman = self._config.pluginmanager.get_plugin("capturemanager")
        suspended = capman.global_and_fixture_disabled() if capman is not None \
            else contextlib.nullcontext()
        with suspended:
            self._reporter.write(text, flush=True)
        return len(text)

    def flush(self) -> None:
        """Each write is flushed already."""


def shown(config: pytest.Config) -> bool:
    """Whether progress bars are drawn in this process, at this moment (see the module doc)."""
    if hasattr(config, "workerinput") or threading.current_thread() is not threading.main_thread():
        return False
    reporter = config.pluginmanager.get_plugin("terminalreporter")
    if reporter is None or not bool(getattr(reporter, "isatty", False)):
        return False
    return config.get_verbosity() > -2  # -qq asks for silence


@contextlib.contextmanager
def progress_bar(config: pytest.Config, description: str, total: int | None,
                 unit: str = "it", bar_format: str | None = None) -> Iterator[ProgressBar]:
    """A bar for one phase; it stays on screen, finished, when the phase ends."""
    if not shown(config):
        yield ProgressBar()
        return
    from tqdm import tqdm

    reporter = config.pluginmanager.get_plugin("terminalreporter")
    stream = _TerminalStream(config, reporter)
    stream.write("\n")  # pytest's own line (a file name and dots) is left as it was
    width = min(MAX_WIDTH, shutil.get_terminal_size().columns)
    bar = tqdm(total=total, desc=description, unit=unit, file=stream, leave=True,
               ncols=width, mininterval=0.25, dynamic_ncols=False, bar_format=bar_format)
    try:
        yield ProgressBar(bar)
    finally:
        bar.close()
