"""The contract between an item and its kind: what a runner gets and what it returns.

A kind's runner is called as ``run(case, context)`` with a :class:`RunContext` and
returns an :class:`Outcome`; the item applies thresholds and makes the record.
"""

from __future__ import annotations

import contextlib
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any, TypeVar

import pytest

from pytest_ragbench.config import RagbenchConfig
from pytest_ragbench.system.components import name_component
from pytest_ragbench.system.protocols import AnswerRequest

T = TypeVar("T")


@dataclass(frozen=True)
class Outcome:
    """What a kind's runner returns for one case, before thresholds are applied."""

    metrics: dict[str, float] = field(default_factory=dict)
    unscored: dict[str, str] = field(default_factory=dict)
    # Failures that no threshold can waive (a refused or broken query, a wrong decline).
    errors: list[str] = field(default_factory=list)
    warnings: list[str] = field(default_factory=list)
    evidence: dict[str, Any] = field(default_factory=dict)
    usage: dict[str, Any] = field(default_factory=dict)
    # One line saying what went wrong, shown first when the item fails.
    summary: str | None = None
    # The answer did not depend on the system under test (ragbench_llm answered for a
    # system without answer_from): the item takes no part in comparisons of systems.
    system_independent: bool = False
    # What the judge scored: judged metric names, every sample, settings (metrics/repeated.py).
    judge: dict[str, Any] = field(default_factory=dict)


@dataclass
class RunContext:
    """What a kind's runner gets besides the case: settings, fixtures, thresholds."""

    config: RagbenchConfig
    fixtures: dict[str, Any]
    thresholds: dict[str, float]
    system_name: str | None = None
    nodeid: str = ""
    request: pytest.FixtureRequest | None = None
    # What the system answered (system/trace.py) and the service time of each call.
    traces: list[dict[str, Any]] = field(default_factory=list)
    service_s: list[float] = field(default_factory=list)
    latency_s: list[float] = field(default_factory=list)  # as the system reported them

    def fixture(self, name: str) -> Any:
        """Return a fixture value: one the item kind requested, else looked up now."""
        if name in self.fixtures:
            return self.fixtures[name]
        if self.request is None:
            raise KeyError(name)
        value = self.request.getfixturevalue(name)
        self.fixtures[name] = value
        return value

    def session_state(self, key: pytest.StashKey[T], make: Callable[[], T]) -> T:
        """A kind's state for the whole session (in ``config.stash``; fresh without a session)."""
        if self.request is None:
            return make()
        stash = self.request.config.stash
        if key not in stash:
            stash[key] = make()
        return stash[key]

    def system(self) -> Any:
        """The system under test: ``ragbench_system``, or the named one of --ragbench-systems."""
        if self.system_name is None:
            system = self.fixture("ragbench_system")
            if self.request is not None:  # an overridden fixture names no component itself

                name_component(self.request.config, "system", system)
            return system
        return self.fixture("ragbench_named_systems").get(self.system_name)

    def answer(self, question: str, history: tuple[Any, ...] | list[Any] = ()) -> Any:
        """Ask the system under test (or this item's named system), prefetched when it was.

        The call is timed (the system's service time, not the wait for a prefetch slot)
        and what came back is kept for the report's drill-down.
        """
        # lazy: kept out of a plain pytest run
        from pytest_ragbench.system.trace import MAX_TRACES, answer_trace

        system = self.system()
        prefetch: Any = self.fixture("ragbench_prefetch") if self.request is not None else None
        request = AnswerRequest(question, tuple(history))
        seconds: float | None
        if hasattr(prefetch, "timed_answer"):
            answer, seconds = prefetch.timed_answer(self.nodeid, system, request)
        elif prefetch is not None:  # an overridden prefetcher: its answers are not timed
            answer, seconds = prefetch.answer(self.nodeid, system, request), None
        else:
            start = time.perf_counter()
            answer = system.answer(question, list(history) or None)
            seconds = time.perf_counter() - start
        if seconds is not None:
            self.service_s.append(seconds)
        reported = getattr(answer, "latency_s", None)
        if isinstance(reported, int | float) and not isinstance(reported, bool) and reported > 0:
            self.latency_s.append(float(reported))
        if len(self.traces) < MAX_TRACES:
            # an odd answer object: the kind reports on it, the trace is left out
            with contextlib.suppress(Exception):
                self.traces.append(answer_trace(question, answer, seconds, history))
        return answer
