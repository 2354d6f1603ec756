"""``robust[<kind>-<id>]``: perturbed variants of a case must behave like the original.

For each selected perturbation kind (``--ragbench-perturb``), hypothesis draws perturbed
questions from the case's question (``--ragbench-robustness-examples`` per case, shared
among the kinds, at least one each). All of them are answered in one batch through the
session's prefetcher, and each is compared with the original question's result:

- ``rbo`` / ``jaccard``: overlap of the top-k retrieved ids (bounds in the thresholds;
  the defaults check RBO; set ``robust.jaccard`` to check Jaccard@k too, and
  ``robust.rbo = 0`` to stop checking RBO),
- ``expected_sources_kept``: the expected sources found for the original stay in the top k,
- ``answer_similarity``: the answer stays close to the original answer (embeddings),
- ``injection_resisted`` (injection only): the answer does not contain the injected payload.

A kind *holds* when no example breaks a bound; the metric ``<kind>.holds`` is 1 or 0.
When one breaks, hypothesis shrinks it to a minimal perturbed question, which the
failure shows with the seed (``--hypothesis-seed=<seed>`` reruns it exactly) and which
is stored under the cache directory and replayed first next time. A case with
``thresholds: {}`` records the results without failing.
"""

from __future__ import annotations

import zlib
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import pytest

from pytest_ragbench import thresholds as thresholds_mod
from pytest_ragbench.items import RunContext
from pytest_ragbench.records import Outcome
from pytest_ragbench.robust.checker import Checker, Observation, Observe
from pytest_ragbench.robust.perturb import Perturbed, not_applicable, strategy_for
from pytest_ragbench.robust.properties import ANSWER, INJECTION, RETRIEVAL
from pytest_ragbench.robust.search import ReplayStore, Shrunk, Verdict, draw, shrink
from pytest_ragbench.robust.tables import bundled_tables

PROPERTIES = (*RETRIEVAL, *ANSWER, *INJECTION)
SHRINK_CALLS = 20  # new answers a shrink may ask for, per perturbation kind
BEIR_TOP_K = 10


@dataclass(frozen=True)
class Target:
    """What a case asks: the question, prior turns, expected sources; BEIR is retrieval only."""

    label: str
    question: str
    history: tuple[Any, ...] = ()
    expected: tuple[str, ...] = ()
    retrieval_only: bool = False


@dataclass
class KindResult:
    """One perturbation kind on one case."""

    kind: str
    examples: list[Perturbed]
    verdicts: list[Verdict]
    shrunk: Shrunk | None = None

    @property
    def holds(self) -> bool:
        """True when no example broke a bound."""
        return self.shrunk is None

    def scored(self) -> bool:
        """True when at least one property was measured on some example."""
        return any(v.values for v in self.verdicts)

    def worst(self) -> dict[str, float]:
        """The lowest value of each property over the examples."""
        lowest: dict[str, float] = {}
        for verdict in self.verdicts:
            for name, value in verdict.values.items():
                lowest[name] = min(value, lowest.get(name, value))
        return lowest


def target_of(case: Any) -> Target:
    """The question and expected sources of a vector, hybrid, ragas or BEIR case."""
    label = f"{case.kind}-{case.id}"
    if case.kind == "beir":
        qrels = getattr(case, "qrels", None) or {}
        relevant = tuple(sorted(str(doc) for doc, grade in qrels.items() if grade > 0))
        text = getattr(case, "query", None) or getattr(case, "text", None) or case.label
        return Target(label, str(text), (), relevant, retrieval_only=True)
    return Target(label, str(case.question), tuple(getattr(case, "history", ()) or ()),
                  tuple(getattr(case, "expected_sources", ()) or ()))


def run(case: Any, context: RunContext) -> Outcome:
    """Draw perturbations per kind, answer them in one batch, check, shrink failures."""
    target = target_of(case)
    if context.system_name:
        target = Target(f"{target.label}:{context.system_name}", target.question,
                        target.history, target.expected, target.retrieval_only)
    tables = bundled_tables()
    bounds, record_only = property_bounds(context)
    seed_value, forced = item_seed(context, target.label)
    store = ReplayStore(context.config.cache_dir)
    unscored: dict[str, str] = {}
    plans: list[tuple[str, Any, int, bytes, list[Perturbed]]] = []
    kinds = [k for k in context.config.perturb
             if not _skip(k, target, tables, unscored)]
    for kind, examples in zip(kinds, split_examples(context.config.robustness_examples,
                                                    len(kinds)), strict=True):
        strategy = strategy_for(kind, target.question, tables)
        key = store.key(target.label, kind, target.question)
        plans.append((kind, strategy, examples, key, store.fetch(key, kind)))

    drawn = {kind: draw(strategy, examples=n, seed_value=seed_value, replay=replay)
             for kind, strategy, n, _, replay in plans}
    embedder, problem = _embedder(context, target)
    checker = Checker(target.question, _observer(context, target), bounds=bounds,
                      expected=target.expected, embedder=embedder, embedder_problem=problem)
    checker.prefetch([target.question, *(p.question for ex in drawn.values() for p in ex)])

    results: list[KindResult] = []
    for kind, strategy, n, key, replay in plans:
        result = KindResult(kind, drawn[kind], checker.verdicts(drawn[kind]))
        failing = next(((p, v) for p, v in zip(result.examples, result.verdicts, strict=True)
                        if not v.holds), None)
        if failing is not None:
            result.shrunk = shrink(strategy, checker, failing, examples=n,
                                   seed_value=seed_value, replay=replay,
                                   shrink_calls=max(SHRINK_CALLS, n))
        store.keep(key, result.shrunk.perturbed if result.shrunk else None)
        results.append(result)
    return _outcome(target, results, unscored, seed_value, forced, record_only, checker)


def _skip(kind: str, target: Target, tables: Any, unscored: dict[str, str]) -> bool:
    reason = not_applicable(kind, target.question, tables)
    if reason is None and kind == "injection" and target.retrieval_only:
        reason = "retrieval only: there is no answer to inject into"
    if reason is not None:
        unscored[f"{kind}.holds"] = reason
    return reason is not None


def property_bounds(context: RunContext) -> tuple[dict[str, float], bool]:
    """The bound of each property, and whether to record only (the case set ``thresholds: {}``)."""
    limits = context.thresholds
    record_only = not limits
    if record_only:
        limits = thresholds_mod.resolve("robust", context.config.thresholds, None)
    return {k: float(v) for k, v in limits.items() if k in PROPERTIES}, record_only


def item_seed(context: RunContext, label: str) -> tuple[Any, bool]:
    """``--hypothesis-seed`` when given (forced), else a fixed seed from the item's label."""
    forced = None
    if context.request is not None:
        forced = context.request.config.getoption("hypothesis_seed", None)
    if forced not in (None, ""):
        text = str(forced)
        return (int(text) if text.lstrip("-").isdigit() else text), True
    return zlib.crc32(label.encode("utf-8")), False


def split_examples(total: int, kinds: int) -> list[int]:
    """Share ``total`` examples among ``kinds`` (earlier kinds get the remainder; at least 1)."""
    if kinds == 0:
        return []
    base, extra = divmod(total, kinds)
    return [max(1, base + (i < extra)) for i in range(kinds)]


# -- the system ------------------------------------------------------------------------------


def _observer(context: RunContext, target: Target) -> Observe:
    if target.retrieval_only:
        retriever = context.fixture("ragbench_retriever")

        def retrieve(questions: list[str]) -> list[Observation]:
            found = retriever.retrieve_many(questions, top_k=BEIR_TOP_K)
            return [Observation(tuple(contexts), None) for contexts in found]

        return retrieve
    system = context.system()

    def answer(questions: list[str]) -> list[Observation]:
        return [Observation(tuple(a.contexts or ()), str(a.text), getattr(a, "usage", None))
                for a in ask(context, system, questions, target.history)]

    return answer


def ask(context: RunContext, system: Any, questions: Sequence[str],
        history: tuple[Any, ...]) -> list[Any]:
    """Answers through the session's prefetcher (batch retrieval, concurrency, cache)."""
    from pytest_ragbench.system.prefetch import answer_many
    from pytest_ragbench.system.protocols import AnswerRequest

    if context.system_name is None and context.request is not None:
        prefetch = context.fixture("ragbench_prefetch")
        requests = {f"{context.nodeid}::{q}": AnswerRequest(q, history) for q in questions}
        prefetch.submit_answers(system, requests)
        return [prefetch.answer(key, system, request) for key, request in requests.items()]
    return answer_many(system, list(questions), [list(history)] * len(questions),
                       concurrency=context.config.concurrency)


def _embedder(context: RunContext, target: Target) -> tuple[Any, str]:
    if target.retrieval_only:
        return None, "retrieval only"
    try:
        return context.fixture("ragbench_embedder"), ""
    except pytest.skip.Exception as exc:
        return None, f"no embedder: {exc.msg}"


# -- the outcome -----------------------------------------------------------------------------


def _outcome(target: Target, results: list[KindResult], unscored: dict[str, str],
             seed_value: Any, forced: bool, record_only: bool, checker: Checker) -> Outcome:
    metrics: dict[str, float] = {}
    broken: list[str] = []
    evidence: dict[str, Any] = {"question": target.question}
    worst: list[str] = []
    for result in results:
        name = f"{result.kind}.holds"
        if not result.scored():
            reasons = sorted({r for v in result.verdicts for r in v.unscored.values()})
            unscored[name] = "nothing measurable: " + "; ".join(reasons)
            continue
        metrics[name] = 1.0 if result.holds else 0.0
        values = ", ".join(f"{k} {v:.3f}" for k, v in result.worst().items())
        worst.append(f"{result.kind} ({len(result.examples)} examples): {values}")
        if result.shrunk is not None:
            broken.append(_failure(result, evidence))
    how = "--hypothesis-seed" if forced else "fixed for this item"
    evidence["seed"] = (f"{seed_value} ({how}; rerun with --hypothesis-seed={seed_value} "
                        "to reproduce)")
    held = [r.kind for r in results if r.holds and r.scored()]
    evidence["held"] = ", ".join(held) or "(none)"
    if worst:
        evidence["lowest values"] = "\n".join(worst)
    failed_kinds = [r.kind for r in results if r.shrunk is not None]
    summary = None
    if failed_kinds:
        summary = (f"{len(failed_kinds)} of {len(metrics)} perturbation kinds broke a "
                   f"property: {', '.join(failed_kinds)}")
    usage = _usage(checker)
    return Outcome(metrics=metrics, unscored=unscored,
                   errors=[] if record_only else broken,
                   warnings=broken if record_only else [],
                   evidence=evidence, usage=usage, summary=summary)


def _failure(result: KindResult, evidence: dict[str, Any]) -> str:
    """Add the minimal failing example of a kind to the evidence; return its failure line."""
    assert result.shrunk is not None
    shrunk, kind = result.shrunk, result.kind
    evidence[f"{kind} minimal question"] = shrunk.perturbed.question
    evidence[f"{kind} change"] = shrunk.perturbed.change
    evidence[f"{kind} broke"] = "; ".join(shrunk.verdict.broken)
    for key, text in shrunk.verdict.details.items():
        evidence[f"{kind} {key}"] = text
    if not shrunk.shrunk:
        evidence[f"{kind} note"] = "hypothesis did not reproduce it; shown unshrunk"
    elif shrunk.capped:
        evidence[f"{kind} note"] = (f"shrinking stopped after {shrunk.new_calls} new answers; "
                                    "a smaller failing question may exist")
    return (f"{kind}: {'; '.join(shrunk.verdict.broken)} on the minimal perturbed question "
            f"{shrunk.perturbed.question!r}")


def _usage(checker: Checker) -> dict[str, Any]:
    prompt = completion = 0
    for observation in checker.memo.values():
        usage = observation.usage
        prompt += int(getattr(usage, "prompt_tokens", 0) or 0)
        completion += int(getattr(usage, "completion_tokens", 0) or 0)
    return {"system": {"calls": checker.asked, "prompt_tokens": prompt,
                       "completion_tokens": completion}}
