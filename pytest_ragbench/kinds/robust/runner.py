"""``robust[<kind>-<id>]``: perturbed variants of a case must behave like the original.

For each selected perturbation kind (``--ragbench-perturb``), hypothesis draws perturbed
questions from the case's question (``--ragbench-robustness-examples`` per case, shared
among the kinds, at least one each). All of them are answered in one batch through the
session's prefetcher (so the system's batch retrieval, the concurrency limit and the
response cache apply), and each is compared with the original question's result:

- ``rbo`` / ``jaccard``: overlap of the top-k retrieved ids (bounds in the thresholds;
  the defaults check RBO; set ``robust.jaccard`` to check Jaccard@k too, and
  ``robust.rbo = 0`` to stop checking RBO),
- ``expected_sources_kept``: the expected sources found for the original stay in the top k,
- ``answer_similarity``: the answer stays close to the original answer (embeddings),
  the only property compared for a case that expects a decline (``expect: decline``:
  what an off-topic question retrieves is noise),
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
from dataclasses import dataclass, field
from typing import Any

import pytest

from pytest_ragbench.config import thresholds as thresholds_mod
from pytest_ragbench.config.settings import RagbenchConfig
from pytest_ragbench.kinds import ItemRun, Outcome, builtin_registry, registry
from pytest_ragbench.kinds.beir.runner import dataset_retriever
from pytest_ragbench.robust import evidence as keys
from pytest_ragbench.robust.checker import Checker, Observation, Observe
from pytest_ragbench.robust.perturb import Perturbed, not_applicable, strategy_for
from pytest_ragbench.robust.properties import ANSWER, INJECTION, RETRIEVAL
from pytest_ragbench.robust.search import ReplayStore, Shrunk, Verdict, draw, shrink
from pytest_ragbench.robust.tables import Tables, bundled_tables
from pytest_ragbench.run.prefetch import answer_many
from pytest_ragbench.systems.protocols import AnswerRequest

PROPERTIES = (*RETRIEVAL, *ANSWER, *INJECTION)
SHRINK_CALLS = 10  # new answers a shrink may ask for, per perturbation kind that broke
BEIR_TOP_K = 10
DECLINE_NOISE = ("the case expects a decline: what an off-topic question retrieves is noise, "
                 "only the answer is compared")


@dataclass(frozen=True)
class Target:
    """What a case asks: the question, prior turns, expected sources; BEIR is retrieval only."""

    label: str
    question: str
    history: tuple[Any, ...] = ()
    expected: tuple[str, ...] = ()
    retrieval_only: bool = False
    expects_decline: bool = False  # ``expect: decline``: an off-topic question


@dataclass(frozen=True)
class Plan:
    """One perturbation kind to check: its strategy, budget and stored failures."""

    kind: str
    strategy: Any
    examples: int
    key: bytes
    replay: list[Perturbed]


@dataclass
class KindResult:
    """One perturbation kind on one case."""

    plan: Plan
    examples: list[Perturbed]
    verdicts: list[Verdict]
    shrunk: Shrunk | None = None

    @property
    def kind(self) -> str:
        """The perturbation kind."""
        return self.plan.kind

    @property
    def holds(self) -> bool:
        """True when no example broke a bound."""
        return self.shrunk is None

    def scored(self) -> bool:
        """True when at least one property was measured on some example."""
        return any(v.values for v in self.verdicts)

    def lowest(self) -> dict[str, float]:
        """The lowest value of each property over the examples."""
        lowest: dict[str, float] = {}
        for verdict in self.verdicts:
            for name, value in verdict.values.items():
                lowest[name] = min(value, lowest.get(name, value))
        return lowest


@dataclass
class Plans:
    """The kinds to check for one case, and why the others were not checked."""

    kinds: list[Plan] = field(default_factory=list)
    unscored: dict[str, str] = field(default_factory=dict)


def target_of(case: Any, system: str | None = None) -> Target:
    """The question and expected sources of a vector, hybrid, ragas or BEIR case."""
    label = f"{case.kind}-{case.id}" + (f":{system}" if system else "")
    if case.kind == "beir":
        relevant = tuple(sorted(str(doc) for doc, grade in case.qrels.items() if grade > 0))
        return Target(label, str(case.query), (), relevant, retrieval_only=True)
    return Target(label, str(case.question), tuple(getattr(case, "history", ()) or ()),
                  tuple(getattr(case, "expected_sources", ()) or ()),
                  expects_decline=getattr(case, "expect", "answer") == "decline")


def run(case: Any, item: ItemRun) -> Outcome:
    """Draw perturbations per kind, answer them in one batch, check, shrink failures."""
    target = target_of(case, item.system_name)
    bounds, record_only = property_bounds(item)
    seed_value, forced = item_seed(item, target.label)
    store = ReplayStore(item.config.cache_dir)
    plans = plan(target, item.config, bundled_tables(), store)
    drawn = {p.kind: draw(p.strategy, examples=p.examples, seed_value=seed_value,
                          replay=p.replay) for p in plans.kinds}
    embedder, problem = _embedder(item, target)
    checker = Checker(target.question, _observer(case, item, target), bounds=bounds,
                      expected=target.expected, embedder=embedder, embedder_problem=problem,
                      retrieval_noise=DECLINE_NOISE if target.expects_decline else None)
    checker.prefetch([target.question, *(p.question for ex in drawn.values() for p in ex)])

    results: list[KindResult] = []
    for kind_plan in plans.kinds:
        examples = drawn[kind_plan.kind]
        result = KindResult(kind_plan, examples, checker.verdicts(examples))
        failing = next(((p, v) for p, v in zip(examples, result.verdicts, strict=True)
                        if not v.holds), None)
        if failing is not None:
            result.shrunk = shrink(kind_plan.strategy, checker, failing,
                                   examples=kind_plan.examples, seed_value=seed_value,
                                   replay=kind_plan.replay,
                                   shrink_calls=max(SHRINK_CALLS, kind_plan.examples))
        store.keep(kind_plan.key, result.shrunk.perturbed if result.shrunk else None)
        results.append(result)
    return _outcome(target, results, plans.unscored, (seed_value, forced), record_only,
                    checker)


def plan(target: Target, config: RagbenchConfig, tables: Tables, store: ReplayStore) -> Plans:
    """The perturbation kinds that apply to the question, with their share of the budget."""
    plans = Plans()
    kinds = []
    for kind in config.perturb:
        reason = not_applicable(kind, target.question, tables)
        if reason is None and kind == "injection" and target.retrieval_only:
            reason = "retrieval only: there is no answer to inject into"
        if reason is None:
            kinds.append(kind)
        else:
            plans.unscored[keys.holds_metric(kind)] = reason
    for kind, examples in zip(kinds, split_examples(config.robustness_examples, len(kinds)),
                              strict=True):
        key = store.key(target.label, kind, target.question)
        plans.kinds.append(Plan(kind, strategy_for(kind, target.question, tables), examples,
                                key, store.fetch(key, kind)))
    return plans


def property_bounds(item: ItemRun) -> tuple[dict[str, float], bool]:
    """The bound of each property, and whether to record only (the case set ``thresholds: {}``)."""
    limits = item.thresholds
    record_only = not limits
    if record_only:
        kinds = registry(item.request.config) if item.request is not None \
            else builtin_registry()
        case_file = item.request.node.path if item.request is not None else None
        limits = thresholds_mod.resolve(kinds.item_kinds["robust"],
                                        item.config.thresholds_for(case_file), None)
    return {k: float(v) for k, v in limits.items() if k in PROPERTIES}, record_only


def item_seed(item: ItemRun, label: str) -> tuple[Any, bool]:
    """``--hypothesis-seed`` when given (forced), else a fixed seed from the item's label."""
    forced = None
    if item.request is not None:
        forced = item.request.config.getoption("hypothesis_seed", None)
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


def _observer(case: Any, item: ItemRun, target: Target) -> Observe:
    if target.retrieval_only:
        retriever = _beir_retriever(case, item)

        def retrieve(questions: list[str]) -> list[Observation]:
            found = retriever.retrieve_many(questions, top_k=BEIR_TOP_K)
            return [Observation(tuple(contexts), None) for contexts in found]

        return retrieve
    system = item.system()

    def answer(questions: list[str]) -> list[Observation]:
        return [Observation(tuple(a.contexts or ()), str(a.text), getattr(a, "usage", None),
                            float(getattr(a, "latency_s", 0.0) or 0.0))
                for a in ask(item, system, questions, target.history)]

    return answer


def _beir_retriever(case: Any, item: ItemRun) -> Any:
    """The retriever the ``beir[...]`` items use, indexed on the case's dataset."""
    return dataset_retriever(case, item)


def ask(item: ItemRun, system: Any, questions: Sequence[str],
        history: tuple[Any, ...]) -> list[Any]:
    """Answers through the session's prefetcher (batch retrieval, concurrency, cache)."""
    if item.request is None:  # outside a pytest item
        return answer_many(system, list(questions), [list(history)] * len(questions),
                           concurrency=item.config.concurrency)
    prefetch = item.fixture("ragbench_prefetch")
    requests = {f"{item.nodeid}::{q}": AnswerRequest(q, history) for q in questions}
    prefetch.submit_answers(system, requests)
    return [prefetch.answer(key, system, request) for key, request in requests.items()]


def _embedder(item: ItemRun, target: Target) -> tuple[Any, str]:
    if target.retrieval_only:
        return None, "retrieval only"
    try:
        return item.fixture("ragbench_embedder"), ""
    except pytest.skip.Exception as exc:
        return None, f"no embedder: {exc.msg}"


# -- the outcome -----------------------------------------------------------------------------


def _outcome(target: Target, results: list[KindResult], unscored: dict[str, str],
             seed: tuple[Any, bool], record_only: bool, checker: Checker) -> Outcome:
    seed_value, forced = seed
    metrics: dict[str, float] = {}
    broken: list[str] = []
    evidence: dict[str, Any] = {"question": target.question}
    for result in results:
        if result.shrunk is not None and result.scored():
            broken.append(_failure(result, evidence))
    how = "given with --hypothesis-seed" if forced else "fixed for this item"
    evidence[keys.SEED] = seed_value
    evidence["reproduce"] = f"--hypothesis-seed={seed_value} draws these examples again ({how})"
    lowest: list[str] = []
    for result in results:
        name = keys.holds_metric(result.kind)
        if not result.scored():
            reasons = sorted({r for v in result.verdicts for r in v.unscored.values()})
            unscored[name] = "nothing measurable: " + "; ".join(reasons)
            continue
        metrics[name] = 1.0 if result.holds else 0.0
        values = ", ".join(f"{k} {v:.3f}" for k, v in result.lowest().items())
        lowest.append(f"{result.kind} ({len(result.examples)} examples): {values}")
    held = [r.kind for r in results if r.holds and r.scored()]
    evidence["held"] = ", ".join(held) or "(none)"
    if lowest:
        evidence["lowest values"] = "\n".join(lowest)
    summary = None
    if broken:
        failed = [r.kind for r in results if r.shrunk is not None]
        summary = (f"{len(failed)} of {len(metrics)} perturbation kinds broke a property: "
                   f"{', '.join(failed)}")
    return Outcome(metrics=metrics, unscored=unscored,
                   errors=[] if record_only else broken,
                   warnings=broken if record_only else [],
                   evidence=evidence, usage=_usage(checker, target), summary=summary)


def _failure(result: KindResult, evidence: dict[str, Any]) -> str:
    """Add the minimal failing example of a kind to the evidence; return its failure line."""
    assert result.shrunk is not None
    shrunk, kind = result.shrunk, result.kind
    evidence[keys.key(kind, keys.MINIMAL)] = shrunk.perturbed.question
    evidence[keys.key(kind, keys.CHANGE)] = shrunk.perturbed.change
    evidence[keys.key(kind, keys.BROKE)] = "; ".join(shrunk.verdict.broken)
    for name, text in shrunk.verdict.details.items():
        evidence[keys.key(kind, name)] = text
    notes = []
    if shrunk.perturbed in result.plan.replay:
        notes.append("replayed first from the example database (it failed in an earlier run)")
    if not shrunk.shrunk:
        notes.append("hypothesis did not reproduce it; shown unshrunk")
    elif shrunk.capped:
        notes.append(f"shrinking stopped after {shrunk.new_calls} new answers; "
                     "a smaller failing question may exist")
    if notes:
        evidence[keys.key(kind, "note")] = "; ".join(notes)
    return (f"{kind}: {'; '.join(shrunk.verdict.broken)} on the minimal perturbed question "
            f"{shrunk.perturbed.question!r}")


def _usage(checker: Checker, target: Target) -> dict[str, Any]:
    """The report's usage record: one call per question asked (original and perturbed)."""
    if target.retrieval_only:
        return {"retriever": {"calls": checker.asked}}
    prompt = completion = 0
    latencies = []
    for observation in checker.memo.values():
        prompt += int(getattr(observation.usage, "prompt_tokens", 0) or 0)
        completion += int(getattr(observation.usage, "completion_tokens", 0) or 0)
        latencies.append(observation.latency_s)
    return {"system": {"calls": checker.asked, "prompt_tokens": prompt,
                       "completion_tokens": completion, "latency_s": latencies}}
