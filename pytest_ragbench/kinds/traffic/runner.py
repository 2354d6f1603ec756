"""Score one logged interaction: reference-free metrics, and judged ones when it is sampled.

- ``retrieved_count``, ``no_results``, ``top_similarity`` and ``mean_similarity`` (of the
  logged scores; unscored when none was logged), ``user_feedback``, ``latency_ms`` (when
  logged), ``declined`` (the decline detector on the logged answer).
- ``faithfulness`` and ``answer_relevancy`` (ragas) and ``judge_relevance`` with a judge,
  on every interaction, or with ``--ragbench-sample N`` only on the sampled ones (the
  others record no judged metric: report.py estimates them for the whole traffic).
"""

from __future__ import annotations

from typing import Any

from pytest_ragbench.kinds import ItemRun, Outcome
from pytest_ragbench.kinds.answer_common import (
    Scores,
    judge_relevance,
    judged_scores,
    merge_usage,
    shorten,
)
from pytest_ragbench.kinds.traffic.case import TrafficCase
from pytest_ragbench.kinds.traffic.sampling import is_sampled
from pytest_ragbench.metrics.decline import refusal_phrase
from pytest_ragbench.metrics.registry import Unscored
from pytest_ragbench.metrics.repeated import JudgeSettings, outcome_judge

NO_SCORES = "the app logged no similarity scores"


def run(case: TrafficCase, item: ItemRun) -> Outcome:
    """Score the interaction as it was logged (the system under test is not asked)."""
    scores = Scores()
    count = len(case.contexts)
    scores.put("retrieved_count", float(count))
    scores.put("no_results", float(count == 0))
    if case.scores:
        scores.put("top_similarity", max(case.scores))
        scores.put("mean_similarity", sum(case.scores) / len(case.scores))
    else:
        reason = "nothing was retrieved" if count == 0 else NO_SCORES
        scores.put("top_similarity", Unscored(reason))
        scores.put("mean_similarity", Unscored(reason))
    if case.user_feedback is not None:
        scores.put("user_feedback", case.user_feedback)
    if case.latency_ms is not None:
        scores.put("latency_ms", case.latency_ms)
    answer = case.answer
    refusal = refusal_phrase(answer) if answer and answer.strip() else None
    if answer is not None:
        scores.put("declined", refusal is not None)
    evidence: dict[str, Any] = {"query": case.query, "time": case.timestamp,
                                "window": case.window,
                                "got": shorten(answer or "") or "(no answer logged)",
                                "retrieved": _listing(case)}
    if case.user:
        evidence["user"] = case.user
    if refusal:
        evidence["refusal"] = refusal
    usage: dict[str, Any] = {}
    judge_info: dict[str, Any] = {}
    request = item.request
    if answer and is_sampled(request.config if request else None, item.nodeid):
        judge = item.fixture("ragbench_judge")
        if judge is not None:
            settings = JudgeSettings.from_config(item.config)
            judged = judged_scores(scores, question=case.query, answer=answer,
                                   contexts=list(case.contexts), reference=None, judge=judge,
                                   embedder=item.fixture("ragbench_embedder"),
                                   settings=settings,
                                   names=("faithfulness", "answer_relevancy"))
            relevance, _, relevance_usage = judge_relevance(
                item, judge, case.query, list(case.contexts), "context")
            scores.put("judge_relevance", relevance.score)
            judge_info = outcome_judge({**judged.samples, "judge_relevance": relevance.samples},
                                       settings, judge)
            usage["judge"] = merge_usage(judged.usage.get("judge", {}),
                                         relevance_usage.get("judge", {}))
            evidence["sampled"] = "yes (judged)"
    return Outcome(metrics=scores.metrics, unscored=scores.unscored, evidence=evidence,
                   usage=usage, judge=judge_info, system_independent=True)


def _listing(case: TrafficCase) -> str:
    if not case.contexts:
        return "(nothing)"
    lines = []
    for i, text in enumerate(case.contexts[:5], start=1):
        score = f" ({case.scores[i - 1]:.3f})" if i <= len(case.scores) else ""
        lines.append(f"{i}.{score} {shorten(text, 120)}")
    return "\n".join(lines)
