"""``memory[<id>]``: a conversational-memory scenario (README "Case formats").

Every scenario starts from an empty store: the setup memories are added, the query
is searched, and precision / recall / F1 / relevance score compare the hits with the
expected setup indices. A negative scenario (nothing expected) passes only when nothing
comes back at or above ``min_score``. The case's ``threshold`` is the bar for the
relevance score (the mean similarity of the expected memories that were retrieved).

``judge_relevance`` (LLM-as-judge, :mod:`pytest_ragbench.metrics.relevance`):
with ``ragbench_judge``, the judge rates every retrieved memory 0-10 against the query;
the mean / 10. Without a judge it is unscored ("no judge configured").
"""

from __future__ import annotations

from typing import Any

from pytest_ragbench.cases.model import MemoryCase
from pytest_ragbench.kinds import ItemRun, Outcome
from pytest_ragbench.kinds.answer_common import judge_relevance
from pytest_ragbench.metrics import set_metrics
from pytest_ragbench.metrics.registry import Unscored


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


def _listing(entries: list[tuple[Any, str]]) -> str:
    if not entries:
        return "(none)"
    return "\n".join(f"[{index}] {text}" for index, text in entries)
