"""Under pytest-xdist, report.html's plots are drawn while the workers still run.

The plots are most of the session end (a dozen matplotlib figures on the bundled run),
and under xdist the controller does nothing but wait for the workers' reports until
then. So once every selected item of a kind has reported, that kind's
plots are drawn from a document of that kind's records
(:func:`~pytest_ragbench.results.document.plot_document`). At session end a kind's plots
are used only if what they were drawn from equals what the full document holds for the
kind (:func:`~pytest_ragbench.render.html.plot_inputs`); otherwise (a kind whose items
did not all report, a record that changed, a failed drawing) they are drawn there as
before. Drawing ahead never changes the page.

Kinds waiting to be drawn are taken, those with more metrics first, by *lanes*:

- one thread of the controller, from the first kind on;
- each xdist worker that has run all its items: its process is idle until the session
  ends, so the kinds still waiting then are drawn there too, sent over an execnet
  channel of the worker's gateway (``gateway.remote_exec``) and drawn by
  :func:`serve`. Without them the last kinds (often all of them, when every kind's
  last items run at the end) would be drawn one after another by the controller alone
  while the workers' cores sit idle.

A worker lane that fails (its process gone, no answer within :data:`LANE_TIMEOUT_S`)
puts its kind back for the other lanes and stops. Within the controller only its one
thread draws, and the session end waits for it before drawing anything: matplotlib's
font cache is not safe to use from two threads at once.
"""

from __future__ import annotations

import contextlib
import functools
import inspect
import pickle
import threading
import time
from collections import Counter
from collections.abc import Callable, Iterable
from typing import Any

from pytest_ragbench.config.settings import RagbenchConfig
from pytest_ragbench.results.records import ItemRecord

LANE_TIMEOUT_S = 300.0  # one kind's plots on a worker: seconds at most before giving up


class PlotsAhead:
    """Draws each kind's plots as soon as its last selected item has reported."""

    def __init__(self, settings: RagbenchConfig, *, local_lane: bool = True) -> None:
        self.settings = settings
        self.local_lane = local_lane  # False: only worker lanes draw (tests)
        self._expected: Counter[str] = Counter()
        self._records: dict[str, dict[str, ItemRecord]] = {}
        self._waiting: list[str] = []  # complete kinds no lane has taken yet
        self._taken: set[str] = set()  # kinds waiting, being drawn or done
        self._drawing = 0  # lanes drawing a kind now
        self._drawn: dict[str, Any] = {}  # kind -> html.DrawnPlots
        self._drawn_by: dict[str, str] = {}  # kind -> the lane that drew it
        self._closed = False
        self._changed = threading.Condition()
        self._lanes: list[threading.Thread] = []
        self._lane_names: list[str] = []
        self.lane_failures: list[str] = []  # "lane: why" of each lane that stopped early

    def expect(self, kinds: Iterable[str]) -> None:
        """The kind of every selected item (one entry per item)."""
        self._expected = Counter(kinds)

    def arrived(self, record: ItemRecord) -> None:
        """An item's record reached the controller; queue its kind if that was the last."""
        kind_records = self._records.setdefault(record.kind, {})
        kind_records[record.nodeid] = record
        expected = self._expected.get(record.kind, 0)
        if record.kind in self._taken or not expected or len(kind_records) < expected:
            return
        with self._changed:
            self._taken.add(record.kind)
            self._waiting.append(record.kind)
            self._waiting.sort(key=self._metric_count, reverse=True)
            self._changed.notify_all()
        if self.local_lane and "controller" not in self._lane_names:
            self._start_lane("controller", _LocalLane(self.settings))

    def add_worker(self, name: str, gateway: Any) -> None:
        """An xdist worker that has run all its items becomes a lane (its execnet gateway)."""
        if not self._closed:
            self._start_lane(name, _WorkerLane(gateway, self.settings, serve_source(),
                                               stopped=lambda: self._closed))

    def finish(self) -> dict[str, Any]:
        """The kinds drawn (``html.DrawnPlots`` by kind), once every waiting kind is drawn.

        Waiting for a kind that is still queued takes no longer than drawing it at session
        end would; a kind whose drawing failed is left to the session end.
        """
        with self._changed:
            while self._drawing or (self._waiting and self._any_lane_alive()):
                self._changed.wait(timeout=1.0)
            self._closed = True
            self._changed.notify_all()
        for lane in self._lanes:
            lane.join()
        return dict(self._drawn)

    def drawn_by(self) -> dict[str, str]:
        """The lane that drew each kind ("controller" or an xdist worker's id)."""
        return dict(self._drawn_by)

    def close(self) -> None:
        """Stop the lanes without waiting (an interrupted session)."""
        with self._changed:
            self._closed = True
            self._waiting.clear()
            self._changed.notify_all()

    # -- lanes ----------------------------------------------------------------------------

    def _metric_count(self, kind: str) -> int:
        return len({name for r in self._records.get(kind, {}).values() for name in r.metrics})

    def _any_lane_alive(self) -> bool:
        return any(lane.is_alive() for lane in self._lanes)

    def _start_lane(self, name: str, lane: _LocalLane | _WorkerLane) -> None:
        thread = threading.Thread(target=self._run_lane, args=(name, lane),
                                  name=f"ragbench-plots-{name}", daemon=True)
        self._lanes.append(thread)
        self._lane_names.append(name)
        thread.start()

    def _run_lane(self, name: str, lane: _LocalLane | _WorkerLane) -> None:
        try:
            lane.open()
            while (kind := self._take()) is not None:
                try:
                    drawn = lane.draw(kind, list(self._records[kind].values()))
                except LaneFailed as exc:
                    self.lane_failures.append(f"{name}: {exc}")
                    self._give_back(kind)
                    return
                except Exception:  # left to the session end, which reports it
                    drawn = None
                self._done(kind, name, drawn)
        except LaneFailed as exc:
            self.lane_failures.append(f"{name}: {exc}")
            return
        finally:
            lane.close()
            with self._changed:
                self._changed.notify_all()

    def _take(self) -> str | None:
        with self._changed:
            while not self._waiting and not self._closed:
                self._changed.wait()
            if self._closed:
                return None
            self._drawing += 1
            return self._waiting.pop(0)

    def _done(self, kind: str, lane: str, drawn: Any) -> None:
        with self._changed:
            self._drawing -= 1
            if drawn is not None:
                self._drawn[kind], self._drawn_by[kind] = drawn, lane
            self._changed.notify_all()

    def _give_back(self, kind: str) -> None:
        with self._changed:
            self._drawing -= 1
            self._waiting.insert(0, kind)
            self._changed.notify_all()



class LaneFailed(Exception):
    """A worker lane could not draw (its process or channel is gone)."""


class _LocalLane:
    """Draws in the controller's lane thread."""

    def __init__(self, settings: RagbenchConfig) -> None:
        self.settings = settings

    def open(self) -> None:
        pass

    def draw(self, kind: str, records: list[ItemRecord]) -> Any:
        return draw(kind, records, self.settings)

    def close(self) -> None:
        pass


class _WorkerLane:
    """Sends kinds to :func:`serve` on an xdist worker and returns what it drew."""

    def __init__(self, gateway: Any, settings: RagbenchConfig, source: str,
                 stopped: Callable[[], bool] = lambda: False) -> None:
        self.gateway = gateway
        self.settings = settings
        self.source = source  # serve_source()
        self.stopped = stopped  # the session no longer waits for drawings
        self.channel: Any = None

    def open(self) -> None:
        """Start :func:`serve` on the worker, once its pytest session has returned.

        xdist runs a worker's code in its main thread only (execnet's
        ``main_thread_only``): until the session's last hooks return, execnet refuses
        another ``remote_exec`` with a "deadlock" error, so this asks again.
        """
        deadline = time.monotonic() + LANE_TIMEOUT_S
        while True:
            try:
                self.channel = self.gateway.remote_exec(self.source)
                self.channel.receive(timeout=LANE_TIMEOUT_S)  # serve's hello
                return
            except Exception as exc:
                if "deadlock" not in str(exc) or time.monotonic() > deadline \
                        or self.stopped():
                    raise LaneFailed(str(exc)) from exc
                time.sleep(0.1)

    def draw(self, kind: str, records: list[ItemRecord]) -> Any:
        try:
            self.channel.send(pickle.dumps((kind, records, self.settings)))
            ok, drawn = pickle.loads(self.channel.receive(timeout=LANE_TIMEOUT_S))
        except Exception as exc:
            with contextlib.suppress(Exception):
                self.channel.close()
            raise LaneFailed(str(exc)) from exc
        if not ok:
            raise RuntimeError(drawn)
        return drawn

    def close(self) -> None:
        """End :func:`serve` on the worker (its loop ends with the channel)."""
        if self.channel is not None:
            with contextlib.suppress(Exception):
                self.channel.close()


@functools.cache
def serve_source() -> str:
    """The source that runs :func:`serve` on a worker, for ``gateway.remote_exec``.

    A string, not the function: given a function, execnet checks its names with
    ``ast.parse`` in the calling thread, and on Python 3.11 an ``ast.parse`` in a lane
    thread at the same time as one in the main thread (pytest formatting a traceback)
    fails with "AST constructor recursion depth mismatch". Built in the main thread.
    """
    return f"{inspect.getsource(serve)}\nserve(channel)\n"


def serve(channel):  # unannotated: its source runs alone on the worker
    """A worker lane: draw each kind sent, answer ``(ok, html.DrawnPlots or error)``.

    Sent to the worker as source (:func:`serve_source`), so it imports what it uses
    and names nothing of this module (its annotations included).
    The pickles come from the controller of the same session (never from case files).
    """
    import pickle

    from pytest_ragbench.run import plots_ahead

    channel.send(b"ready")
    for job in channel:
        kind, records, settings = pickle.loads(job)
        try:
            answer = (True, plots_ahead.draw(kind, records, settings))
        except Exception as exc:
            answer = (False, f"{type(exc).__name__}: {exc}")
        channel.send(pickle.dumps(answer))


def draw(kind: str, records: list[ItemRecord], settings: RagbenchConfig) -> Any:
    """One kind's plots as ``html.DrawnPlots``, from a document of its records alone."""
    # lazy: the report's libraries load in the lane, not before the items run
    from pytest_ragbench.render import html, plots
    from pytest_ragbench.results import document as document_mod

    document = document_mod.plot_document(records, settings)
    values = plots.item_values(document)
    problems: list[str] = []
    body = html.kind_plots(document, kind, values, html.Page(problems))
    return html.DrawnPlots(html.plot_inputs(document, kind, values), body, tuple(problems))
