"""The pytest items: one per (case, item kind), with a record of the result.

Items are real ``pytest.Function`` objects, so fixtures (and their overrides in a
user's conftest.py), ``-k``/``-m``, ``--lf`` and IDE runners work with public API.
"""

from __future__ import annotations

import functools
import inspect
import time
import warnings
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from pytest_ragbench.cases.model import Case
from pytest_ragbench.config import thresholds as thresholds_mod
from pytest_ragbench.config.settings import get_config
from pytest_ragbench.errors import CaseError, RagbenchError
from pytest_ragbench.kinds import (
    ANY_CASE_KIND,
    AS_GIVEN,
    ASKS_SYSTEM,
    EVALUATION,
    FROM_PASSAGES,
    INVALID_CASE,
    NO_SYSTEM,
    ItemKind,
    ItemRun,
    Outcome,
    registry,
)
from pytest_ragbench.metrics.repeated import inconclusive
from pytest_ragbench.redact import scrub
from pytest_ragbench.replies import cut_strings
from pytest_ragbench.results.records import ItemIdentity, ItemRecord
from pytest_ragbench.systems.checks import SPECS, require
from pytest_ragbench.systems.fixtures import ANSWER_REQUEST, without_answer_from
from pytest_ragbench.systems.protocols import AnswerRequest


class CaseFailed(AssertionError):
    """An item missed a threshold or a check; the message is the evidence.

    An assertion failure, as a failed ``assert`` is: reporters that tell a failed test from
    a broken one (allure-pytest) file it as failed.
    """


class CaseBroken(Exception):
    """The evaluation itself failed (the system, the database, a model call); the message says why.

    The item's record is an ``error``: reporters that tell the two apart show it as broken.
    """


class RagbenchWarning(UserWarning):
    """A verification found something worth a look that is not a failure (a WARNING verdict)."""


def systems_for(item_kind: ItemKind, systems: tuple[str, ...], case: Any = None,
                config: pytest.Config | None = None) -> tuple[str | None, ...]:
    """The systems a case's item of ``item_kind`` is made for (``(None,)``: just one item).

    An item whose answer cannot depend on the system is made once (``ItemKind.answers``):
    one of a kind testing a component every named system shares (memory items test
    ``ragbench_memory``: their scores would be copies, so compare memory stores across
    runs), one scored as given, and one answered from given passages when none of the
    named systems can answer from passages (the built-in retriever systems cannot; a
    registered system is asked at run time, kinds/passages.py).
    """
    if not systems or item_kind.family != EVALUATION:
        return (None,)
    source = item_kind.answer_source(case)
    if source in (NO_SYSTEM, AS_GIVEN):
        return (None,)
    if config is not None and source == FROM_PASSAGES:
        unable = without_answer_from(config)
        return tuple(s for s in systems if s not in unable) or (None,)
    return tuple(systems)


def item_fixtures(item_kind: ItemKind, system: str | None) -> tuple[str, ...]:
    """The fixtures an item requests: a named system's item asks for the named systems.

    So ``ragbench_system`` (the default system, and its index) is not built for a run
    that only evaluates named systems, and the named systems are built at setup.
    """
    if system is None or "ragbench_system" not in item_kind.fixtures:
        return item_kind.fixtures
    return tuple(dict.fromkeys("ragbench_named_systems" if name == "ragbench_system" else name
                               for name in item_kind.fixtures))


@functools.cache
def _signature(names: tuple[str, ...]) -> Callable[..., None]:
    """A callable whose parameters are ``names``, so pytest resolves those fixtures.

    One per set of fixtures, shared by the items that request it.
    """

    def case_item(**_: Any) -> None:  # the item's runtest does the work
        return None

    case_item.__signature__ = inspect.Signature(  # type: ignore[attr-defined]
        [inspect.Parameter(n, inspect.Parameter.KEYWORD_ONLY) for n in names]
    )
    return case_item


# Items of one file asking for the same fixtures share their test function and fixture
# closure, as pytest's own parametrized functions do: working out the closure again for
# each case dominates the collection of a large file (benchmarks/bench_loading.py).
_SHARED_FIXTURE_INFO = pytest.StashKey[dict[tuple[str, ...], tuple[Callable[..., None], Any]]]()


_CATEGORY_MARKERS = pytest.StashKey[set[str]]()


@functools.lru_cache(maxsize=256)
def _mark(name: str) -> pytest.MarkDecorator:
    """``pytest.mark.<name>``, made once per name (not once per item)."""
    return getattr(pytest.mark, name)


def _restructure_id(item: pytest.Item) -> None:
    """Give a ``kind[id]`` item the structured id pytest gives parametrized tests.

    pytest >= 9.2 keys ``--lf`` by structured node ids (path, names, params) and parses
    the cached strings into them; an item named ``kind[id]`` would otherwise carry
    ``names=("kind[id]",)`` and never match its own cached id, so ``--lf`` ran everything.
    Older pytest has no ``_id`` and keys by the string, which is unchanged either way.
    """
    structured = getattr(item, "_id", None)
    parse = getattr(type(structured), "parse", None)
    if structured is not None and callable(parse) and getattr(structured, "params", 1) is None:
        item._id = parse(str(structured))


def marker_name(value: str) -> str:
    """A category value as a marker name: ``NOISY`` -> ``noisy``."""
    cleaned = "".join(ch if ch.isalnum() else "_" for ch in value.strip().lower())
    return cleaned.strip("_") or "uncategorized"


def answer_request(case: Case, item_kind: ItemKind) -> Any:
    """The question an item will ask the system under test, if the case says it up front.

    Only for kinds that ask the system (``ragbench_system`` among their fixtures) and only
    when this case's answer comes from it (``ItemKind.answers``).
    """
    question = getattr(case, "question", None)
    if not question or "ragbench_system" not in item_kind.fixtures \
            or item_kind.answer_source(case) != ASKS_SYSTEM:
        return None
    history = tuple(getattr(case, "history", ()) or ())
    return AnswerRequest(str(question), history)


def add_ragbench_marker(item: pytest.Item, parent: pytest.Collector) -> None:
    """Mark ``item`` with ``ragbench``: on its case-file collector, once, when it has one.

    Every item of a case file is a ragbench item, and ``-m ragbench`` sees the markers of
    an item's parents; one marker per file instead of one per item is less to keep.
    """
    if not getattr(parent, "holds_only_ragbench_items", False):
        item.add_marker("ragbench")
    elif _MARKED not in parent.stash:
        parent.stash[_MARKED] = True
        parent.add_marker("ragbench")


_MARKED = pytest.StashKey[bool]()
_PREPARED_KINDS = pytest.StashKey[set[str]]()  # kinds whose prepare ran in this process
_PREPARE_FAILED = pytest.StashKey[str]()  # why this item's kind could not be prepared


class CaseItem(pytest.Function):
    """One case evaluated by one item kind (optionally for one of several systems)."""

    def __init__(self, *, case: Case, item_kind: ItemKind, system: str | None = None,
                 **kwargs: Any) -> None:
        super().__init__(**kwargs)
        self.case = case
        self.item_kind = item_kind
        self.kind_name = item_kind.name
        self.system_name = system
        self.record: ItemRecord | None = None

    @classmethod
    def create(cls, parent: pytest.Collector, case: Case, item_kind: ItemKind,
               system: str | None = None) -> CaseItem:
        """Make the item ``<kind>[<system>-<id>]`` under ``parent``."""
        case_label = case.id
        if item_kind.case_kind == ANY_CASE_KIND:  # robust[<case kind>-<id>]
            case_label = f"{case.kind}-{case.id}"
        label = f"{system}-{case_label}" if system else case_label
        names = item_fixtures(item_kind, system)
        shared = parent.stash.setdefault(_SHARED_FIXTURE_INFO, {})
        callobj, fixtureinfo = shared.get(names) or (_signature(names), None)
        item = cls.from_parent(parent, name=f"{item_kind.name}[{label}]", callobj=callobj,
                               fixtureinfo=fixtureinfo, case=case, item_kind=item_kind,
                               system=system)
        if fixtureinfo is None:
            shared[names] = (callobj, getattr(item, "_fixtureinfo", None))
        _restructure_id(item)
        add_ragbench_marker(item, parent)
        item.add_marker(_mark(item_kind.name))
        request = answer_request(case, item_kind)
        if request is not None:
            item.stash[ANSWER_REQUEST] = request  # prefetched with every other answer
        if case.category:
            category = marker_name(case.category)
            registered = parent.config.stash.setdefault(_CATEGORY_MARKERS, set())
            if category not in registered:
                registered.add(category)
                parent.config.addinivalue_line("markers", f"{category}: ragbench case category")
            item.add_marker(_mark(category))
        return item

    def identity(self) -> ItemIdentity:
        """Kind, system and case, as the item's record will say them."""
        return ItemIdentity(self.kind_name, self.system_name, self.case.kind, self.case.id,
                            self.location[0], self.case.line)

    # -- running ------------------------------------------------------------------------

    def prepare_kind(self) -> None:
        """Run the kind's ``prepare`` once per process, before this item's timers start.

        Called from ``pytest_runtest_protocol`` ahead of pytest-timeout's timer. A failure
        is kept for :meth:`setup` to raise (this item errors); the kind is not marked
        prepared, so its next item tries again.
        """
        prepared = self.config.stash.setdefault(_PREPARED_KINDS, set())
        if self.item_kind.name in prepared:
            return
        try:
            prepare = self.item_kind.load_prepare()
            if prepare is not None:
                prepare(self.config)
        except Exception as exc:
            detail = f"{type(exc).__name__}: {exc}".splitlines()[0][:300]
            self.stash[_PREPARE_FAILED] = (
                f"could not prepare the {self.item_kind.name} items ({detail}); the next "
                f"{self.item_kind.name} item tries again")
            return
        prepared.add(self.item_kind.name)

    def setup(self) -> None:
        """Set up the fixtures, then check each one against its protocol (once a session)."""
        failed = self.stash.get(_PREPARE_FAILED, None)
        if failed is not None:
            del self.stash[_PREPARE_FAILED]  # a rerun of this item prepares again
            raise RagbenchError(failed)
        super().setup()

        for name in item_fixtures(self.item_kind, self.system_name):
            if name in SPECS and name in self.funcargs:
                require(self._request, name, self.funcargs[name])

    def runtest(self) -> None:
        """Evaluate the case, keep the record, fail with the evidence when it misses."""
        config = get_config(self.config)
        limits = thresholds_mod.resolve(self.item_kind, config.thresholds_for(self.path),
                                        self.case.item_thresholds())
        requested = item_fixtures(self.item_kind, self.system_name)
        run = ItemRun(config, {n: self.funcargs[n] for n in requested},
                      limits, self.system_name, self.nodeid, self._request)
        start = time.perf_counter()
        try:
            if self.item_kind.plan_ahead is not None:
                # lazy: the prefetch machinery (asyncio, threads) only for kinds that use it
                from pytest_ragbench.run.prefetch import plan_ahead

                plan_ahead(self.item_kind, run)  # start the work of the kind's items to come
            outcome: Outcome = self.item_kind.load_runner()(self.case, run)
        except RagbenchError as exc:
            self.record = self._record("error", time.perf_counter() - start, error=str(exc),
                                       run=run)
            raise CaseBroken(self._evidence_text(str(exc), {})) from None
        outcome = with_stream_timings(outcome, run, self.item_kind)
        limits = thresholds_mod.for_metrics(limits, [*outcome.metrics, *outcome.unscored])
        outcome = _settle_inconclusive(outcome, limits, config.inconclusive)
        checked = {m: v for m, v in outcome.metrics.items()
                   if m not in outcome.judge.get("inconclusive", {})}
        failures = outcome.errors + undeclared_metrics(self.item_kind, outcome) \
            + thresholds_mod.failures(checked, limits)
        status = "failed" if failures else ("warning" if outcome.warnings else "passed")
        self.record = self._record(status, time.perf_counter() - start, outcome=outcome,
                                   failures=failures, limits=limits, run=run)
        if failures:
            lines = [outcome.summary] if outcome.summary else []
            raise CaseFailed(self._evidence_text("\n".join(lines + failures), outcome.evidence))
        shown = self.name if self.item_kind.case_kind == ANY_CASE_KIND else \
            f"{self.item_kind.name}[{self.case.id}]"  # robust[<case kind>-<id>]
        for message in outcome.warnings:  # reported at the case's own line
            warnings.warn_explicit(
                RagbenchWarning(scrub(f"{shown}: {message}")),
                RagbenchWarning, filename=str(self.path), lineno=self.case.line)

    def _record(self, status: str, duration: float, *, outcome: Outcome | None = None,
                failures: list[str] | None = None, limits: dict[str, float] | None = None,
                error: str | None = None, run: ItemRun | None = None) -> ItemRecord:
        outcome = outcome or Outcome()
        fields = self.case.breakdown_fields()

        cluster = self.case.cluster_value(get_config(self.config).cluster_by)
        if cluster is not None:  # the report resamples items by cluster
            fields = {**fields, "cluster": cluster}
        usage = dict(outcome.usage)
        # replies (the system's own included) are stored cut to ragbench_max_reply_bytes
        limit = get_config(self.config).max_reply_bytes
        flat = any(key in usage for key in ("calls", "latency_s"))  # one role, unnamed
        if run is not None and run.service_s and not flat:
            # The plugin's own clock around each system call, beside the system's latency_s.
            system = dict(usage.get("system") or {"calls": len(run.service_s),
                                                  "latency_s": list(run.latency_s)})
            system["service_s"] = list(run.service_s)
            usage["system"] = system
        return ItemRecord(
            nodeid=self.nodeid, kind=self.item_kind.name, case_kind=self.case.kind,
            case_id=self.case.id, file=self.location[0], line=self.case.line, status=status,
            system=self.system_name, fields=fields,
            tags=list(self.case.tags), metrics=dict(outcome.metrics),
            unscored=cut_strings(dict(outcome.unscored), limit), thresholds=dict(limits or {}),
            failures=cut_strings(list(failures or []), limit), warnings=list(outcome.warnings),
            duration=duration, error=cut_strings(error, limit),
            evidence=cut_strings(dict(outcome.evidence), limit),
            usage=usage, human=dict(self.case.human),
            system_independent=outcome.system_independent, judge=dict(outcome.judge),
            answers=cut_strings(list(run.traces), limit) if run is not None else [],
            summary=cut_strings(outcome.summary, limit), retrieval=dict(outcome.retrieval),
        )

    def record_for_report(self, status: str, message: str | None) -> ItemRecord:
        """The record, or one made from the report when the item never ran (setup error).

        The item lets go of it: the report carries it from here on (a run of many items
        keeps less alive, and the garbage collector has less to walk).
        """
        record = self.record or self._record(status, 0.0, error=message)
        self.record = None
        return record

    def _evidence_text(self, summary: str, evidence: dict[str, Any]) -> str:
        lines = [summary]
        for key, value in evidence.items():
            text = str(value)
            if "\n" in text:
                lines.append(f"{key}:")
                lines.extend(f"  {part}" for part in text.splitlines())
            else:
                lines.append(f"{key}: {text}")
        return "\n".join(lines)

    # -- reporting ----------------------------------------------------------------------

    def repr_failure(self, excinfo: pytest.ExceptionInfo[BaseException],
                     style: Any = None) -> Any:
        """Show the evidence for our own failures, a normal traceback for anything else."""
        if isinstance(excinfo.value, CaseFailed | CaseBroken | RagbenchError):
            where = f"case: {self.location[0]}:{self.case.line}"
            return f"{excinfo.value}\n{where}"
        return super().repr_failure(excinfo)

    def reportinfo(self) -> tuple[Path, int, str]:
        """Point IDEs at the case's own line (``sql: x``, or ``sql[bm25]: x`` for a system)."""
        system = f"[{self.system_name}]" if self.system_name else ""
        return self.path, self.case.line - 1, f"{self.item_kind.name}{system}: {self.case.id}"


def with_stream_timings(outcome: Outcome, run: ItemRun, item_kind: ItemKind) -> Outcome:
    """Add ``ttft_ms`` and ``itl_ms``: the mean over the streamed answers the item got.

    Only for kinds that declare them, and never over a value the runner set itself.
    """
    timed = {"ttft_ms": run.ttft_s, "itl_ms": run.itl_s}
    found = {name: 1000.0 * sum(values) / len(values) for name, values in timed.items()
             if values and item_kind.emits(name) and name not in outcome.metrics}
    if not found:
        return outcome
    import dataclasses

    return dataclasses.replace(outcome, metrics={**outcome.metrics, **found})


def undeclared_metrics(item_kind: ItemKind, outcome: Outcome) -> list[str]:
    """A failure line when the runner recorded a metric its kind does not declare.

    Every metric has one definition (its range and direction decide thresholds, intervals
    and comparisons), so a kind names the metrics it records in ``ItemKind.metrics``.
    """
    names = sorted({*outcome.metrics, *outcome.unscored})
    unknown = [name for name in names if not item_kind.emits(name)]
    if not unknown:
        return []
    return [f"the {item_kind.name} kind recorded {', '.join(map(repr, unknown))}, not among "
            f"the metrics it declares (ItemKind.metrics: {', '.join(item_kind.metric_names())})"]


def _settle_inconclusive(outcome: Outcome, limits: dict[str, float], policy: str) -> Outcome:
    """Mark judged metrics whose threshold lies in their judge interval (N >= 3 samples).

    Such a metric's threshold is not applied: the item passes with a warning, or with
    ``--ragbench-inconclusive=fail`` fails with the interval.
    """
    if not outcome.judge or not limits:
        return outcome
    import dataclasses

    lower = frozenset(m for m in limits if thresholds_mod.lower_is_better(m))
    found = inconclusive(outcome.judge, limits, lower)
    if not found:
        return outcome
    judge = {**outcome.judge, "inconclusive": found}
    lines = list(found.values())
    if policy == "fail":
        return dataclasses.replace(outcome, judge=judge, errors=[*outcome.errors, *lines])
    return dataclasses.replace(outcome, judge=judge, warnings=[*outcome.warnings, *lines])


class InvalidCaseItem(pytest.Item):
    """A record that could not be read: fails with the file, line and field."""

    def __init__(self, *, error: CaseError, item_kind: str | None, **kwargs: Any) -> None:
        super().__init__(**kwargs)
        self.error = error
        self.kind_name = item_kind or INVALID_CASE
        self.system_name: str | None = None
        self.record: ItemRecord | None = None

    @classmethod
    def create(cls, parent: pytest.Collector, error: CaseError,
               item_kind: str | None, case_id: str | None) -> InvalidCaseItem:
        """Name it ``<kind>[<id>]`` when known, else ``invalid_case[line-N]``."""
        label = case_id or f"line-{error.line or 0}"
        item = cls.from_parent(parent, name=f"{item_kind or INVALID_CASE}[{label}]",
                               error=error, item_kind=item_kind)
        _restructure_id(item)
        add_ragbench_marker(item, parent)
        if item_kind:
            item.add_marker(item_kind)
        return item

    def identity(self) -> ItemIdentity:
        """Kind and case, as the item's record will say them."""
        return ItemIdentity(self.kind_name, None, "", self.name, self.location[0],
                            self.error.line or 0)

    def runtest(self) -> None:
        """Always fails: the case itself is invalid."""
        raise self.error

    def repr_failure(self, excinfo: pytest.ExceptionInfo[BaseException],
                     style: Any = None) -> Any:
        """The error line only, no plugin traceback."""
        if isinstance(excinfo.value, CaseError):
            return f"invalid case: {excinfo.value}"
        return super().repr_failure(excinfo)

    def reportinfo(self) -> tuple[Path, int, str]:
        """Point IDEs at the broken record."""
        return self.path, (self.error.line or 1) - 1, f"invalid case: {self.error.message}"

    def record_for_report(self, status: str, message: str | None) -> ItemRecord:
        """A record marking the invalid case as an error."""
        who = self.identity()
        return ItemRecord(nodeid=self.nodeid, kind=who.kind, case_kind=who.case_kind,
                          case_id=who.case_id, file=who.file, line=who.line, status="error",
                          error=str(self.error))


def derived_items(parent: pytest.Collector, case: Any, shown: str) -> list[pytest.Item]:
    """The items the session's kinds derive from ``case`` (``ItemKind.derives``).

    A kind that finds a bad field in the case gives one failing item instead of its items.
    """
    settings = get_config(parent.config)
    found: list[pytest.Item] = []
    for kind, derive in registry(parent.config).derivers:
        try:
            systems = list(derive(case, settings, shown))
        except CaseError as exc:
            found.append(InvalidCaseItem.create(parent, exc, kind.name,
                                                f"{case.kind}-{case.id}"))
            continue
        found += [CaseItem.create(parent, case, kind, system) for system in systems]
    return found
