"""``memory[<id>]``: a conversational-memory scenario (README "Case formats").

Every scenario starts from an empty store: the setup memories are added, the query
is searched, and precision / recall / F1 / relevance score compare the hits with the
expected setup indices. A negative scenario (nothing expected) passes only when nothing
comes back at or above ``min_score``. The case's ``threshold`` is the bar for the
relevance score (the mean similarity of the expected memories that were retrieved).

``judge_relevance`` (LLM-as-judge, :mod:`pytest_ragbench.metrics.relevance`):
with ``ragbench_judge``, the judge rates every retrieved memory 0-10 against the query;
the mean / 10. Without a judge it is unscored ("no judge configured").

Seed 004's memory criteria, over the hits at or above ``min_score``: ``top1_accuracy``
(an exact-recall scenario, one expected memory: 1 when it comes back first),
``graded_ndcg`` (nDCG@top_k against the case's ``relevance: {setup index: grade}``,
2 contains the answer, 1 related, 0 irrelevant) and ``keyword_overlap`` (the keyword
baseline: the share of the query's keywords found in each memory retrieved, averaged).
"""

from __future__ import annotations

from typing import Any

from pytest_ragbench.cases.model import MemoryCase
from pytest_ragbench.kinds import ItemRun, Outcome
from pytest_ragbench.kinds.answer_common import judge_relevance
from pytest_ragbench.metrics import set_metrics
from pytest_ragbench.metrics.answer import keyword_overlap
from pytest_ragbench.metrics.ir import graded_ndcg
from pytest_ragbench.metrics.registry import Score, Unscored


def run(case: MemoryCase, item: ItemRun) -> Outcome:
    """Fill a fresh store, search, and score the hits against the expected memories."""
    store = item.fixture("ragbench_memory")
    store.clear()
    ids = [store.add_interaction(m.role, m.content, dict(m.metadata)) for m in case.setup]
    recency = case.recency_weight or 0.0
    hits = store.search_memories(case.query, top_k=case.top_k,
                                 filter_metadata=case.filter_metadata,
                                 min_score=case.min_score, recency_weight=recency)
    similarities = [float(getattr(hit, "similarity", hit.score)) for hit in hits]
    scores = set_metrics([hit.id for hit in hits], [ids[i] for i in case.expected],
                         scores=similarities, min_score=case.min_score)
    metrics: dict[str, float] = {}
    unscored: dict[str, str] = {}
    for name, value in scores.as_metrics().items():
        if isinstance(value, Unscored):
            unscored[name] = value.reason
        else:
            metrics[name] = float(value)
    kept = [(hit, sim) for hit, sim in zip(hits, similarities, strict=True)
            if case.min_score is None or sim >= case.min_score]
    for name, value in retrieval_scores(case, [str(hit.id) for hit, _ in kept],
                                        [str(hit.text) for hit, _ in kept],
                                        [str(i) for i in ids]).items():
        if isinstance(value, Unscored):
            unscored[name] = value.reason
        else:
            metrics[name] = float(value)
    judge = item.fixture("ragbench_judge")
    relevance, judged, usage = judge_relevance(item, judge, case.query,
                                               [str(hit.text) for hit in hits], "memory")
    if isinstance(relevance.score, Unscored):
        unscored["judge_relevance"] = relevance.score.reason
    else:
        metrics["judge_relevance"] = float(relevance.score)
    errors = []
    if not case.expected and scores.retrieved_count:
        floor = "" if case.min_score is None else f" at or above min_score {case.min_score:g}"
        errors.append(f"a negative scenario: expected no memory{floor}, "
                      f"got {scores.retrieved_count}")
    index_of = {memory_id: index for index, memory_id in enumerate(ids)}
    evidence: dict[str, Any] = {
        "query": case.query,
        "expected": _listing([(i, case.setup[i].content) for i in case.expected]),
        "got": _listing([(index_of.get(hit.id, hit.id), f"{hit.text} (similarity "
                          f"{sim:.3f})") for hit, sim in zip(hits, similarities, strict=True)]),
        "true_positives": scores.true_positives,
    }
    if relevance.grades:
        evidence["judge relevance"] = relevance.listing()
    return Outcome(
        metrics=metrics, unscored=unscored, errors=errors, evidence=evidence, usage=usage,
        judge=judged,
        summary=None if not errors else "memories came back for a query about nothing stored",
    )


def retrieval_scores(case: MemoryCase, ranked: list[str], texts: list[str],
                     ids: list[str]) -> dict[str, Score]:
    """``top1_accuracy``, ``graded_ndcg`` and ``keyword_overlap`` of the hits kept.

    ``ranked``: the ids of the hits at or above ``min_score``, best first, and ``texts``
    their memories; ``ids``: the store's id of each setup memory.
    """
    scores: dict[str, Score] = {}
    if len(case.expected) == 1:  # an exact-recall scenario: one memory holds the answer
        scores["top1_accuracy"] = float(bool(ranked) and ranked[0] == ids[case.expected[0]])
    else:
        scores["top1_accuracy"] = Unscored(
            f"not an exact-recall scenario: it expects {len(case.expected)} memories, not 1")
    if case.relevance:
        grades = {ids[index]: grade for index, grade in case.relevance.items()}
        scores["graded_ndcg"] = graded_ndcg(grades, ranked, case.top_k)
    else:
        scores["graded_ndcg"] = Unscored("the case gives no relevance grades")
    overlaps = [keyword_overlap(case.query, text) for text in texts]
    numbers = [float(o) for o in overlaps if not isinstance(o, Unscored)]
    if not texts:
        scores["keyword_overlap"] = Unscored("no memory was retrieved")
    elif not numbers:
        scores["keyword_overlap"] = overlaps[0]  # the query has no keywords: its reason
    else:
        scores["keyword_overlap"] = sum(numbers) / len(numbers)
    return scores


def _listing(entries: list[tuple[Any, str]]) -> str:
    if not entries:
        return "(none)"
    return "\n".join(f"[{index}] {text}" for index, text in entries)
