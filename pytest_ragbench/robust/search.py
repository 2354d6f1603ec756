"""Drive hypothesis over one perturbation kind: draw examples, then shrink a failure.

The search runs in two passes with the same seed, so both see the same examples:

1. *draw*: hypothesis generates ``examples`` perturbed questions (no model call), so that
   the caller can answer them all at once through the session's prefetcher (batch
   retrieval, bounded concurrency, the response cache) and check them;
2. *shrink*: only when one of them broke a property, hypothesis runs again with the
   property as the test and shrinks the failure to a minimal perturbed question. Answers
   already known are reused; shrink steps that need a new answer are capped
   (``shrink_calls``), after which untried candidates count as holding.

Both passes reject a question drawn before (:class:`Distinct`), so ``examples`` buys that
many distinct questions. Generation is fixed by the seed (``@seed``), so runs are
reproducible, and ``--hypothesis-seed=N`` reruns with the seed a failure printed.
Failing examples are kept in hypothesis's ``DirectoryBasedExampleDatabase`` under the
cache directory and replayed first (as explicit examples) on the next run.

Imported only when robustness items run (it imports hypothesis).
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Protocol

from hypothesis import HealthCheck, Phase, Verbosity, assume, example, given, seed, settings
from hypothesis import strategies as st
from hypothesis.database import DirectoryBasedExampleDatabase
from hypothesis.errors import Flaky

from pytest_ragbench.robust.perturb import Perturbed

DATABASE_FOLDER = "hypothesis"  # inside the --ragbench-cache directory


@dataclass(frozen=True)
class Verdict:
    """The properties measured on one perturbed example, and those it broke."""

    values: dict[str, float] = field(default_factory=dict)
    unscored: dict[str, str] = field(default_factory=dict)
    broken: tuple[str, ...] = ()  # "rbo = 0.31, needs >= 0.5"
    details: dict[str, str] = field(default_factory=dict)  # shown with a failure

    @property
    def holds(self) -> bool:
        """True when no property with a bound was broken."""
        return not self.broken


class PropertyBroken(Exception):
    """Raised inside the hypothesis test when an example breaks a property."""

    def __init__(self, perturbed: Perturbed, verdict: Verdict) -> None:
        super().__init__(f"{perturbed.question!r}: {'; '.join(verdict.broken)}")
        self.perturbed = perturbed
        self.verdict = verdict


@dataclass(frozen=True)
class Shrunk:
    """The minimal failing example hypothesis found, and how much shrinking it took."""

    perturbed: Perturbed
    verdict: Verdict
    new_calls: int
    capped: bool
    shrunk: bool = True  # False: hypothesis did not reproduce it; the first failure is kept


def run_hypothesis(strategy: st.SearchStrategy[Perturbed], test: Callable[[Perturbed], None],
                   *, examples: int, seed_value: Any, replay: Sequence[Perturbed] = (),
                   shrink: bool = False) -> None:
    """Run ``test`` on ``examples`` drawn examples (replayed ones first), seeded."""
    phases = [Phase.explicit, Phase.generate, *([Phase.shrink] if shrink else [])]
    wrapped = given(strategy)(test)
    for old in reversed(replay):  # @example runs in the order the decorators are listed
        wrapped = example(old)(wrapped)
    wrapped = settings(max_examples=examples, database=None, deadline=None, phases=phases,
                       suppress_health_check=list(HealthCheck), verbosity=Verbosity.quiet,
                       report_multiple_bugs=False, print_blob=False)(wrapped)
    seed(seed_value)(wrapped)()


class Distinct:
    """Rejects a question drawn before, so that the budget buys distinct questions.

    Hypothesis then draws another (a rejected example does not count towards
    ``max_examples``). Both passes reject the same way until the first failure, so they
    generate the same sequence; after it the shrinker may revisit any question.
    """

    def __init__(self) -> None:
        self.seen: set[str] = set()
        self.active = True

    def check(self, perturbed: Perturbed) -> None:
        """Reject ``perturbed`` (``assume``) when its question was drawn already."""
        if self.active:
            assume(perturbed.question not in self.seen)
            self.seen.add(perturbed.question)


def draw(strategy: st.SearchStrategy[Perturbed], *, examples: int, seed_value: Any,
         replay: Sequence[Perturbed] = ()) -> list[Perturbed]:
    """The distinct examples hypothesis tries for this seed, in order (replayed ones first)."""
    drawn: list[Perturbed] = []
    distinct = Distinct()

    def record(perturbed: Perturbed) -> None:
        distinct.check(perturbed)
        drawn.append(perturbed)

    run_hypothesis(strategy, record, examples=examples, seed_value=seed_value, replay=replay)
    return drawn


class Checks(Protocol):
    """What :func:`shrink` needs from the caller's checker."""

    def known(self, question: str) -> bool:
        """True when the question was answered already (checking it costs no call)."""
        ...

    def verdict(self, perturbed: Perturbed) -> Verdict:
        """Answer (if needed) and check one example."""
        ...


def shrink(strategy: st.SearchStrategy[Perturbed], checks: Checks,
           first_failure: tuple[Perturbed, Verdict], *, examples: int, seed_value: Any,
           replay: Sequence[Perturbed] = (), shrink_calls: int = 20) -> Shrunk:
    """Rerun with the property as the test and return the minimal failing example."""
    budget = {"calls": 0, "capped": 0}
    distinct = Distinct()

    def holds(perturbed: Perturbed) -> None:
        distinct.check(perturbed)
        if not checks.known(perturbed.question):
            if budget["calls"] >= shrink_calls:
                budget["capped"] = 1
                return  # over budget: an untried candidate counts as holding
            budget["calls"] += 1
        verdict = checks.verdict(perturbed)
        if verdict.broken:
            distinct.active = False
            raise PropertyBroken(perturbed, verdict)

    try:
        run_hypothesis(strategy, holds, examples=examples, seed_value=seed_value,
                       replay=replay, shrink=True)
    except PropertyBroken as exc:
        return Shrunk(exc.perturbed, exc.verdict, budget["calls"], bool(budget["capped"]))
    except Flaky:
        pass  # the system answered differently when asked again: keep the first failure
    return Shrunk(*first_failure, budget["calls"], bool(budget["capped"]), shrunk=False)


# -- replay ------------------------------------------------------------------------------


class ReplayStore:
    """Failing examples kept in hypothesis's example database, replayed first next time."""

    def __init__(self, cache_dir: Path | None) -> None:
        self.database = (DirectoryBasedExampleDatabase(str(cache_dir / DATABASE_FOLDER))
                         if cache_dir is not None else None)

    @staticmethod
    def key(label: str, kind: str, question: str) -> bytes:
        """One key per case, perturbation kind and original question (edits start afresh)."""
        digest = hashlib.sha256(question.encode("utf-8")).hexdigest()[:16]
        return f"pytest-ragbench robust {label} {kind} {digest}".encode()

    def fetch(self, key: bytes, kind: str) -> list[Perturbed]:
        """The stored examples of ``key`` (unreadable entries are skipped)."""
        if self.database is None:
            return []
        found = []
        for value in sorted(self.database.fetch(key)):
            try:
                perturbed = Perturbed.from_dict(json.loads(value.decode("utf-8")))
            except (ValueError, KeyError, TypeError, AttributeError):
                continue
            if perturbed.kind == kind:
                found.append(perturbed)
        return found

    def keep(self, key: bytes, failing: Perturbed | None) -> None:
        """Store the minimal failing example of ``key`` (None: the kind holds, forget it)."""
        if self.database is None:
            return
        value = None if failing is None else json.dumps(failing.to_dict(),
                                                        sort_keys=True).encode("utf-8")
        for old in list(self.database.fetch(key)):
            if old != value:
                self.database.delete(key, old)
        if value is not None:
            self.database.save(key, value)
