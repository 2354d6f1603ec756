"""Shared by the ``vector`` and ``hybrid`` kinds: sources, similarities, judge metrics, evidence.

Expected sources are document names matched against a context's ``metadata["source"]``,
else its ``id`` (README "Interfaces"). The judge metrics come from
:mod:`pytest_ragbench.metrics.judged`.
"""

from __future__ import annotations

import asyncio
import inspect
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from pytest_ragbench import served
from pytest_ragbench.metrics.context import id_context_precision, id_context_recall
from pytest_ragbench.metrics.ir import IREvaluator
from pytest_ragbench.metrics.judged import judged_result
from pytest_ragbench.metrics.registry import Score, Unscored
from pytest_ragbench.metrics.relevance import NAME, NO_JUDGE, Relevance, ajudge_relevance
from pytest_ragbench.metrics.repeated import JudgeSettings, outcome_judge
from pytest_ragbench.render import text as text_format
from pytest_ragbench.systems.protocols import as_messages

# The cut-off of a system that says no top_k, with no ini ragbench_k, that returned nothing.
FALLBACK_K = 5
# Source names kept per item (ItemRecord.retrieval) to rescore it at a smaller k.
KEPT_RANKS = 200
JUDGED = ("faithfulness", "answer_relevancy")
ANSWER_CHARS = 600  # of the answer shown in a failure message (the record keeps it whole)


def context_name(context: Any) -> str:
    """What a retrieved context is called: its ``metadata["source"]``, else its id."""
    metadata: Mapping[str, Any] = getattr(context, "metadata", None) or {}
    return str(metadata.get("source") or getattr(context, "id", ""))


def matches(context: Any, expected: str) -> bool:
    """True when ``expected`` names this context (its source or its id)."""
    metadata: Mapping[str, Any] = getattr(context, "metadata", None) or {}
    return expected in (str(getattr(context, "id", "")), str(metadata.get("source") or ""))


@dataclass
class Scores:
    """Metrics and the reasons of the unscored ones, filled by several helpers."""

    metrics: dict[str, float] = field(default_factory=dict)
    unscored: dict[str, str] = field(default_factory=dict)

    def put(self, name: str, score: Score | bool) -> None:
        """Record a float (a bool as 1.0 / 0.0), or the reason it is unscored."""
        if isinstance(score, Unscored):
            self.unscored[name] = score.reason
        else:
            self.metrics[name] = float(score)


@dataclass(frozen=True)
class SourceHits:
    """Where the expected sources are among the first ``k`` contexts."""

    expected: tuple[str, ...]
    names: tuple[str, ...]  # per context of the top k: the expected name it matches, or its own
    first_rank: int | None  # 1-based rank of the first context from an expected source
    k: int
    ranked: tuple[str, ...] = ()  # the same for every context returned

    def kept(self) -> dict[str, Any]:
        """What an item record keeps to rescore the source metrics at another k."""
        return {"k": self.k, "expected": list(self.expected),
                "ranked": list(self.ranked[:KEPT_RANKS]), "n_ranked": len(self.ranked)}

    @property
    def found(self) -> list[str]:
        """The expected sources that were retrieved, in the case's order."""
        return [e for e in self.expected if e in self.names]

    @property
    def missing(self) -> list[str]:
        """The expected sources that were not retrieved."""
        return [e for e in self.expected if e not in self.names]


def retrieval_k(system: Any, contexts: Sequence[Any], configured: int | None = None) -> int:
    """The k the system was asked for: the cut-off of the source metrics.

    The system's own ``top_k`` when it declares one, else ini ``ragbench_k``
    (``configured``), else the number of contexts it returned (:data:`FALLBACK_K` when
    none), so that a system returning 4 contexts is scored as ``source_hit@4``.
    """
    declared = getattr(system, "top_k", None)
    if isinstance(declared, int) and not isinstance(declared, bool) and declared > 0:
        return declared
    if configured:
        return configured
    return len(contexts) or FALLBACK_K


def source_hits(expected: Sequence[str], contexts: Sequence[Any], k: int) -> SourceHits:
    """Match the contexts with the expected sources; ``names`` are those of the first ``k``."""
    ranked: list[str] = []
    first = None
    for rank, context in enumerate(contexts, start=1):
        hit = next((e for e in expected if matches(context, e)), None)
        if hit is not None and first is None and rank <= k:
            first = rank
        ranked.append(hit if hit is not None else context_name(context))
    return SourceHits(tuple(expected), tuple(ranked[:k]), first, k, tuple(ranked))


def source_metric_names(k: int) -> tuple[str, ...]:
    """The names of the source metrics at cut-off ``k``."""
    return (f"source_hit@{k}", f"source_recall@{k}", "source_mrr", f"source_ndcg@{k}",
            "id_context_precision", "id_context_recall")


def score_sources(scores: Scores, expected: Sequence[str], contexts: Sequence[Any],
                  k: int) -> SourceHits:
    """Source metrics over the expected sources (module docstrings of vector and hybrid).

    ``source_hit@k`` (an expected source in the top k), ``source_recall@k`` (the share of
    expected sources there), ``source_mrr`` (1 / rank of the first expected source among
    every context returned) and ``source_ndcg@k`` (binary relevance over the top k, each
    source counted at its first rank) - the last two by pytrec_eval - and ragas's ID-based
    context precision and recall over the names of the top k.
    """
    hits = source_hits(expected, contexts, k)
    if not expected:
        reason = "the case names no expected sources"
        for name in source_metric_names(k):
            scores.put(name, Unscored(reason))
        return hits
    for name, value in source_scores(expected, hits.ranked, k).items():
        scores.put(name, value)
    scores.put("id_context_precision", id_context_precision(list(hits.names), list(expected)))
    scores.put("id_context_recall", id_context_recall(list(hits.names), list(expected)))
    return hits


def source_scores(expected: Sequence[str], ranked: Sequence[str], k: int) -> dict[str, Score]:
    """``source_hit@k``, ``source_recall@k``, ``source_mrr`` and ``source_ndcg@k``.

    ``ranked``: the name of every context returned, in order (:attr:`SourceHits.ranked`).
    Also how a comparison rescores a kept record at a smaller k (results/cutoffs.py).
    """
    top = list(ranked[:k])
    wanted = set(expected)
    return {f"source_hit@{k}": float(any(name in wanted for name in top)),
            f"source_recall@{k}": len(wanted & set(top)) / len(wanted),
            "source_mrr": _rank_metric(expected, ranked, "RR"),
            f"source_ndcg@{k}": _rank_metric(expected, top, f"nDCG@{k}")}


def _rank_metric(expected: Sequence[str], ranked: Sequence[str], measure: str) -> Score:
    """One pytrec_eval measure of the ranked source names (first occurrence of each)."""
    unique = list(dict.fromkeys(ranked))
    run = {name: float(len(unique) - rank) for rank, name in enumerate(unique)}
    evaluator = IREvaluator({"q": dict.fromkeys(expected, 1)}, [measure])
    return evaluator.score_query("q", run)[measure]


def judged_scores(scores: Scores, *, question: str, answer: str, contexts: Sequence[str],
                  reference: str | None, judge: Any, embedder: Any, settings: Any = None,
                  names: Sequence[str] = JUDGED) -> Any:
    """Faithfulness and answer relevancy through ragas with the judge.

    Returns the :class:`~pytest_ragbench.metrics.judged.JudgedScores` (usage, samples).
    Without a judge each is unscored with the reason ``"no judge configured"``.
    """
    result = judged_result(list(names), question=question, answer=answer,
                           contexts=list(contexts), reference=reference, judge=judge,
                           embedder=embedder, settings=settings)
    for name in names:
        scores.put(name, result.scores.get(name, Unscored(f"{name} was not scored")))
    return result


def judge_relevance(item: Any, judge: Any, query: str, texts: list[str],
                    noun: str) -> tuple[Any, dict[str, Any], dict[str, Any]]:
    """The LLM relevance of ``texts``: the result, the Outcome's judge part, usage."""
    if judge is None:
        return Relevance(Unscored(NO_JUDGE)), {}, {}
    settings = JudgeSettings.from_config(item.config)
    relevance = item.fixture("ragbench_loop").run(
        ajudge_relevance(judge, query, texts, settings, noun))
    judged = outcome_judge({NAME: relevance.samples}, settings, judge)
    return relevance, judged, {"judge": calls_usage(relevance.generations())}


def call_usage(call: Any) -> dict[str, Any]:
    """The report's usage record of one model call or one system answer.

    ``call`` has ``usage`` (token counts), ``latency_s`` and ``cached``: a
    :class:`~pytest_ragbench.systems.protocols.Generation` or an ``Answer``. A reply from
    the cache is a cache hit with no latency (the call did not reach the model).
    """
    usage = getattr(call, "usage", None)
    cached = bool(getattr(call, "cached", False))
    record: dict[str, Any] = {
        "calls": 1, "cache_hits": int(cached),
        "prompt_tokens": int(getattr(usage, "prompt_tokens", 0) or 0),
        "completion_tokens": int(getattr(usage, "completion_tokens", 0) or 0),
        "latency_s": [] if cached else [float(getattr(call, "latency_s", 0.0) or 0.0)]}
    models = served.one_call(getattr(call, "model", None), getattr(call, "served_model", None))
    if models:  # which model the server said answered (served.py)
        record["models"] = models
    return record


def calls_usage(calls: Sequence[Any]) -> dict[str, Any]:
    """One usage record summing several calls of one role (see :func:`call_usage`)."""
    total: dict[str, Any] = {"calls": 0, "cache_hits": 0, "prompt_tokens": 0,
                             "completion_tokens": 0, "latency_s": []}
    for call in calls:
        one = call_usage(call)
        for key in ("calls", "cache_hits", "prompt_tokens", "completion_tokens"):
            total[key] += one[key]
        total["latency_s"] += one["latency_s"]
        if "models" in one:
            total["models"] = served.add(total.get("models", {}), one["models"])
    return total


def merge_usage(*records: dict[str, Any]) -> dict[str, Any]:
    """Usage records of one role added up."""
    total: dict[str, Any] = {"calls": 0, "cache_hits": 0, "prompt_tokens": 0,
                             "completion_tokens": 0, "latency_s": []}
    for record in records:
        for key in ("calls", "cache_hits", "prompt_tokens", "completion_tokens"):
            total[key] += int(record.get(key) or 0)
        total["latency_s"] += list(record.get("latency_s") or [])
        if record.get("models"):
            total["models"] = served.add(total.get("models", {}), record["models"])
    return total


def usage_of(answer: Any) -> dict[str, Any]:
    """The report's usage record for one answer of the system (role ``system``).

    The model calls a system made to retrieve (``Answer.retrieval_calls``: query expansion,
    LLM re-ranking) are the role ``retrieval``.
    """
    usage = {"system": call_usage(answer)}
    if retrieval := getattr(answer, "retrieval_calls", ()):
        usage["retrieval"] = calls_usage(retrieval)
    return usage


async def agenerate(model: Any, messages: Sequence[dict[str, str]], max_tokens: int) -> Any:
    """One greedy call of a generator or judge; awaited when the model is asynchronous."""
    call = getattr(model, "agenerate", None)
    if call is not None and inspect.iscoroutinefunction(call):
        return await call(messages, temperature=0.0, max_tokens=max_tokens)
    return await asyncio.to_thread(model.generate, messages, temperature=0.0,
                                   max_tokens=max_tokens)


def shorten(text: str, limit: int = ANSWER_CHARS) -> str:
    """An answer cut for a failure message (the shared :func:`render.text.shorten`)."""
    return text_format.shorten(text, limit)


def retrieved_listing(contexts: Sequence[Any], hits: SourceHits,
                      similarities: Sequence[Score] = ()) -> str:
    """One line per retrieved context: rank, source, id, score, cosine, whether expected."""
    if not contexts:
        return "(nothing retrieved)"
    lines = []
    for rank, context in enumerate(contexts, start=1):
        name = context_name(context)
        cid = str(getattr(context, "id", ""))
        label = name if cid in ("", name) else f"{name} ({cid})"
        score = getattr(context, "score", None)
        parts = [f"[{rank}] {label}"]
        if isinstance(score, int | float):
            parts.append(f"score {score:.4g}")
        if rank <= len(similarities) and not isinstance(similarities[rank - 1], Unscored):
            parts.append(f"cosine {float(similarities[rank - 1]):.3f}")  # type: ignore[arg-type]
        if any(matches(context, e) for e in hits.expected):
            parts.append("expected")
        lines.append(", ".join(parts))
    return "\n".join(lines)


def history_text(history: Sequence[Any]) -> str:
    """Prior turns as ``role: content`` lines."""
    return "\n".join(f"{m['role']}: {m['content']}" for m in as_messages(history))
