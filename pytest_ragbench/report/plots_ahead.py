"""Under pytest-xdist, report.html's plots are drawn while the workers still run.

The plots are most of the session end (a dozen matplotlib figures, about 5 s of CPU on
the bundled run), and under xdist the controller does nothing but wait for the workers'
reports until then. So once every selected item of a kind has reported, one background
thread draws that kind's plots from a document of that kind's records
(:func:`~pytest_ragbench.report.document.plot_document`). At session end a kind's plots
are used only if what they were drawn from equals what the full document holds for the
kind (:func:`~pytest_ragbench.report.html.plot_inputs`); otherwise (a kind whose items
did not all report, a record that changed, a failure in the thread) they are drawn there
as before. Drawing ahead never changes the page.

One thread, and the session end waits for it before drawing anything: matplotlib's font
cache is not safe to use from two threads at once.
"""

from __future__ import annotations

import concurrent.futures
import contextlib
from collections import Counter
from collections.abc import Iterable
from typing import Any

from pytest_ragbench.config import RagbenchConfig
from pytest_ragbench.records import ItemRecord


class PlotsAhead:
    """Draws each kind's plots as soon as its last selected item has reported."""

    def __init__(self, settings: RagbenchConfig) -> None:
        self.settings = settings
        self._expected: Counter[str] = Counter()
        self._records: dict[str, dict[str, ItemRecord]] = {}
        self._started: dict[str, concurrent.futures.Future[Any]] = {}
        self._executor: concurrent.futures.ThreadPoolExecutor | None = None

    def expect(self, kinds: Iterable[str]) -> None:
        """The kind of every selected item (one entry per item)."""
        self._expected = Counter(kinds)

    def arrived(self, record: ItemRecord) -> None:
        """An item's record reached the controller; draw its kind if that was the last."""
        kind_records = self._records.setdefault(record.kind, {})
        kind_records[record.nodeid] = record
        expected = self._expected.get(record.kind, 0)
        if record.kind in self._started or not expected or len(kind_records) < expected:
            return
        if self._executor is None:
            self._executor = concurrent.futures.ThreadPoolExecutor(
                max_workers=1, thread_name_prefix="ragbench-plots")
        self._started[record.kind] = self._executor.submit(
            draw, record.kind, list(kind_records.values()), self.settings)

    def finish(self) -> dict[str, Any]:
        """The kinds drawn (``html.DrawnPlots`` by kind), once the thread has drawn them all.

        Waiting for a kind that is still queued takes no longer than drawing it at session
        end would; a kind that failed in the thread is left to the session end.
        """
        if self._executor is None:
            return {}
        self._executor.shutdown(wait=True)
        drawn = {}
        for kind, future in self._started.items():
            if future.done() and not future.cancelled() and future.exception() is None:
                drawn[kind] = future.result()
        return drawn

    def close(self) -> None:
        """Stop the thread without waiting (an interrupted session)."""
        if self._executor is not None:
            with contextlib.suppress(Exception):
                self._executor.shutdown(wait=False, cancel_futures=True)


def draw(kind: str, records: list[ItemRecord], settings: RagbenchConfig) -> Any:
    """One kind's plots as ``html.DrawnPlots``, from a document of its records alone."""
    # lazy: the report's libraries load in the thread, not before the items run
    from pytest_ragbench.report import document as document_mod
    from pytest_ragbench.report import html, plots

    document = document_mod.plot_document(records, settings)
    values = plots.item_values(document)
    problems: list[str] = []
    body = html.kind_plots(document, kind, values, html.Page(problems))
    return html.DrawnPlots(html.plot_inputs(document, kind, values), body, tuple(problems))
