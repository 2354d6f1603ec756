"""Start the model work of many items ahead of the items, bounded by the concurrency limit.

A :class:`Prefetcher` runs jobs keyed by item (node id) on a background event loop,
at most ``concurrency`` at a time, in submission order; an item then takes its own
result with :meth:`Prefetcher.result`. With N items whose calls take L seconds each,
the whole batch takes about N·L/c instead of N·L. Asynchronous jobs run on the loop;
plain functions run in a thread pool of ``concurrency`` threads. Answers of several
systems (``--ragbench-systems``) go through one prefetcher, in the order of the items.

Which items are to come is decided here alone (with ``run/schedule.py``, which reads
xdist's queue): :func:`items_ahead` hands out each upcoming item once per purpose, and
:func:`plan_ahead` gives a kind's ``plan_ahead`` its own items (``ItemKind.plan_ahead``).
Serially every selected item is handed out at the first call; on an xdist worker only the
items sent to that worker, topped up before each item, so no worker works for another.

A result fetched ahead is taken once by each taker (an item, by its node id): an item
that takes it again is run again (pytest-rerunfailures' ``--reruns``), so its job runs
again and the system is asked again, rather than the first attempt's answer, or its
exception, being handed out once more.
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import contextlib
import functools
import inspect
import threading
import time
from collections.abc import Callable, Mapping, Sequence
from contextlib import AbstractContextManager
from typing import Any, Protocol

import pytest

from pytest_ragbench.run.schedule import on_worker, upcoming
from pytest_ragbench.systems.aio import LoopThread
from pytest_ragbench.systems.protocols import Answer, AnswerRequest, System
from pytest_ragbench.systems.streaming import can_stream, stream_answer

# An item that waits this long for its answer shows how many answers are ready, at most
# once in PROGRESS_EVERY_S (pytest's own progress shows the items after that).
PROGRESS_AFTER_S = 2.0
PROGRESS_EVERY_S = 30.0
AnswerJob = tuple[str, System, AnswerRequest]  # (key, system, request)


class Progress(Protocol):
    """A progress display: ``set(done)`` (see ``pytest_ragbench.run.progress``)."""

    def set(self, done: int) -> None:
        """Show ``done`` as the count reached so far."""


class Prefetcher:
    """Jobs keyed by item, run ahead of time; results are taken by key.

    ``progress(total)``, when given, opens a progress display; it is used while a caller
    of :meth:`answer` waits longer than :data:`PROGRESS_AFTER_S` for its answer (and
    no display was shown in the last :data:`PROGRESS_EVERY_S`).
    """

    def __init__(self, concurrency: int = 8, loop: LoopThread | None = None,
                 progress: Callable[[int], AbstractContextManager[Progress]] | None = None,
                 *, stream: bool = False) -> None:
        if concurrency < 1:
            raise ValueError("concurrency must be at least 1")
        self.concurrency = concurrency
        self.stream = stream  # --ragbench-stream: a system's astream answers (streaming.py)
        self._progress = progress
        self._progress_shown = -PROGRESS_EVERY_S
        self._requests: dict[str, AnswerRequest] = {}
        self._loop = loop or LoopThread("ragbench-prefetch")
        self._own_loop = loop is None
        self._executor = concurrent.futures.ThreadPoolExecutor(
            max_workers=concurrency, thread_name_prefix="ragbench-prefetch")
        self._futures: dict[str, concurrent.futures.Future[Any]] = {}
        self._jobs: dict[str, Callable[[], Any]] = {}  # to run a job again for a rerun
        self._taken: set[tuple[str, str]] = set()  # (key, taker): results handed out
        # Seconds each prefetched answer took the system (its service time: from the call
        # to its return, without the time the job waited for a free slot).
        self._service_s: dict[str, float] = {}
        self._semaphore: asyncio.Semaphore | None = None
        self._lock = threading.Lock()

    def __contains__(self, key: object) -> bool:
        return key in self._futures

    def __len__(self) -> int:
        return len(self._futures)

    def submit(self, key: str, job: Callable[[], Any]) -> None:
        """Start ``job`` unless ``key`` exists.

        ``job`` takes no arguments: a coroutine function (run on the loop), or a plain
        function (run in a worker thread; if it returns an awaitable, that is awaited).
        """
        with self._lock:
            if key not in self._futures:
                self._jobs[key] = job
                self._futures[key] = self._loop.submit(self._run(job))

    def _take(self, key: str, taker: str | None) -> concurrent.futures.Future[Any]:
        """The future of ``key`` for ``taker`` (the key itself unless given).

        The first take gets the job started ahead; a taker taking ``key`` again (its item
        runs again) gets the job run anew.
        """
        taker = key if taker is None else taker
        with self._lock:
            if (key, taker) in self._taken:
                self._futures[key] = self._loop.submit(self._run(self._jobs[key]))
            self._taken.add((key, taker))
            return self._futures[key]

    def submit_answers(self, system: System, requests: Mapping[str, AnswerRequest]) -> None:
        """Prefetch ``system``'s answers, keyed like ``requests``.

        If the system has ``prepare(questions)`` it is called once with every question
        first (the default system embeds and retrieves them in one batch); each answer
        uses ``aanswer`` when the system has it, else ``answer`` in a thread.
        """
        self.submit_many([(key, system, request) for key, request in requests.items()])

    def submit_many(self, jobs: Sequence[AnswerJob]) -> None:
        """Prefetch the answers of ``(key, system, request)`` jobs, started in this order.

        The jobs may name several systems: each system's ``prepare`` gets its own
        questions once, and the answers start in the order given (the order in which
        the items will run), whichever system they belong to.
        """
        prepared: dict[int, concurrent.futures.Future[Any] | None] = {}
        for _, system, _ in jobs:
            if id(system) not in prepared:
                prepare = getattr(system, "prepare", None)
                questions = [r.question for _, s, r in jobs if s is system]
                prepared[id(system)] = (self._executor.submit(prepare, questions)
                                        if callable(prepare) else None)
        for key, system, request in jobs:
            with self._lock:
                self._requests.setdefault(key, request)
            self.submit(key, functools.partial(self._answer, key, system, request,
                                               prepared[id(system)]))

    def answer(self, key: str, system: System, request: AnswerRequest) -> Answer:
        """Return the prefetched answer of ``key``, or ask ``system`` now if there is none.

        A prefetched answer is only taken for the request it was fetched for; another
        question under the same key is asked directly.
        """
        return self.timed_answer(key, system, request)[0]

    def timed_answer(self, key: str, system: System, request: AnswerRequest
                     ) -> tuple[Answer, float | None]:
        """:meth:`answer`, and the seconds the system took to give it (None if unknown).

        The time is the system's service time, measured around its call: time spent
        waiting in the prefetch queue or for this item's turn is not in it.
        """
        if key in self._futures and self._requests.get(key, request) == request:
            future = self._take(key, None)
            self._wait(future)
            answer: Answer = future.result()
            return answer, self._service_s.get(key)
        start = time.perf_counter()
        if self._streams(system):
            answer = self._loop.run(stream_answer(system, request.question,
                                                  list(request.history) or None))
        else:
            answer = system.answer(request.question, list(request.history) or None)
        return answer, time.perf_counter() - start

    def _streams(self, system: System) -> bool:
        return self.stream and can_stream(system)

    def _wait(self, future: concurrent.futures.Future[Any]) -> None:
        """Wait for ``future``, showing how many answers are ready when that takes long."""
        if self._progress is None or future.done() \
                or time.monotonic() - self._progress_shown < PROGRESS_EVERY_S:
            return
        concurrent.futures.wait([future], timeout=PROGRESS_AFTER_S)
        if future.done():
            return
        with self._progress(len(self._futures)) as bar:
            while not future.done():
                bar.set(self._finished())
                concurrent.futures.wait([future], timeout=0.2)
            bar.set(self._finished())
        self._progress_shown = time.monotonic()

    def _finished(self) -> int:
        return sum(f.done() for f in list(self._futures.values()))

    def result(self, key: str, timeout: float | None = None, *,
               taker: str | None = None) -> Any:
        """Wait for the job of ``key`` and return its result (or raise its exception).

        ``taker``: who takes it (the key itself unless given); taking it again runs the
        job again (see the module docstring).
        """
        return self._take(key, taker).result(timeout)

    async def aresult(self, key: str, *, taker: str | None = None) -> Any:
        """Await the job of ``key`` from any event loop (to chain a judge call, say)."""
        return await asyncio.wrap_future(self._take(key, taker))

    def done(self, key: str) -> bool:
        """Return whether the job of ``key`` has finished."""
        return self._futures[key].done()

    def stats(self) -> dict[str, int]:
        """Return how many jobs were submitted, finished, failed and are pending."""
        futures = list(self._futures.values())
        finished = [f for f in futures if f.done() and not f.cancelled()]
        return {"submitted": len(futures), "finished": len(finished),
                "failed": sum(f.exception() is not None for f in finished),
                "pending": sum(not f.done() for f in futures)}

    def close(self) -> None:
        """Cancel the jobs not yet finished and stop the workers (e.g. after ``-x``)."""
        for future in self._futures.values():
            future.cancel()
        self._executor.shutdown(wait=False, cancel_futures=True)
        if self._own_loop:
            self._loop.close()

    async def _run(self, job: Callable[[], Any]) -> Any:
        if self._semaphore is None:
            self._semaphore = asyncio.Semaphore(self.concurrency)
        async with self._semaphore:
            if inspect.iscoroutinefunction(job) or inspect.iscoroutinefunction(
                    getattr(job, "func", None)):
                return await job()
            loop = asyncio.get_running_loop()
            result = await loop.run_in_executor(self._executor, job)
            if inspect.isawaitable(result):  # e.g. ``lambda: client.agenerate(...)``
                result = await result
            return result

    async def _answer(self, key: str, system: System, request: AnswerRequest,
                      prepared: concurrent.futures.Future[Any] | None) -> Answer:
        if prepared is not None:
            # if batch retrieval failed, each answer retrieves on its own
            with contextlib.suppress(Exception):
                await asyncio.wrap_future(prepared)
        history = list(request.history) or None
        aanswer = getattr(system, "aanswer", None)
        if self._streams(system):
            start = time.perf_counter()
            try:
                return await stream_answer(system, request.question, history)
            finally:
                self._service_s[key] = time.perf_counter() - start
        if aanswer is not None and inspect.iscoroutinefunction(aanswer):
            start = time.perf_counter()
            answer: Answer = await aanswer(request.question, history)
            self._service_s[key] = time.perf_counter() - start
            return answer

        def timed() -> Answer:  # timed in the worker thread, not while queued for it
            start = time.perf_counter()
            try:
                return system.answer(request.question, history)
            finally:
                self._service_s[key] = time.perf_counter() - start

        loop = asyncio.get_running_loop()
        return await loop.run_in_executor(self._executor, timed)


def answer_many(system: System, questions: Sequence[str],
                histories: Sequence[Sequence[Any] | None] | None = None,
                concurrency: int = 8) -> list[Answer]:
    """Answer many questions concurrently (batch retrieval first when the system can)."""
    histories = histories or [None] * len(questions)
    prefetcher = Prefetcher(concurrency)
    try:
        requests = {str(i): AnswerRequest(q, tuple(h or ()))
                    for i, (q, h) in enumerate(zip(questions, histories, strict=True))}
        prefetcher.submit_answers(system, requests)
        return [prefetcher.result(key) for key in requests]
    finally:
        prefetcher.close()


# -- the items to come: what is handed out ahead, per purpose --------------------------------

_HANDED_OUT = pytest.StashKey[dict[Any, set[str]]]()


def items_ahead(request: pytest.FixtureRequest, purpose: Any,
                wanted: Callable[[pytest.Item], bool]) -> list[pytest.Item]:
    """The items to come that ``wanted`` accepts and ``purpose`` has not been given yet.

    Serially the first call returns every selected item wanted, in run order, and later
    calls nothing. On an xdist worker each call returns the wanted items newly sent to
    this worker (its current item first), and never an item another worker runs.
    ``purpose`` is any hashable key: the answers of the system, a kind and system.
    """
    handed = request.config.stash.setdefault(_HANDED_OUT, {})
    worker = on_worker(request.config)
    if purpose in handed and not worker:
        return []  # serially the first call handed out every selected item
    seen = handed.setdefault(purpose, set())
    fresh = [item for item in upcoming(request) if item.nodeid not in seen and wanted(item)]
    seen.update(item.nodeid for item in fresh)
    return fresh


def plan_ahead(kind: Any, item: Any) -> None:
    """Give ``kind.plan_ahead`` the items of ``kind`` and of ``item``'s system to come.

    ``kind`` is an :class:`~pytest_ragbench.kinds.ItemKind`, ``item`` the
    :class:`~pytest_ragbench.kinds.ItemRun` of the item about to run; called before each
    item of a kind that plans ahead. The plan is not called when no item is new to it,
    and an item it was given is never given again (a failing plan is not retried).
    """
    plan = kind.load_plan_ahead()
    request = item.request
    if plan is None or request is None:
        return

    def wanted(queued: pytest.Item) -> bool:
        return getattr(getattr(queued, "item_kind", None), "name", None) == kind.name \
            and getattr(queued, "system_name", None) == item.system_name

    fresh = items_ahead(request, ("plan_ahead", kind.name, item.system_name), wanted)
    if fresh:
        plan(fresh, item)
