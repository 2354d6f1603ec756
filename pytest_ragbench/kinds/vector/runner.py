"""``vector[<id>]``: retrieval and answer over documents, against a descriptive ground truth.

The system answers the question (a conversational case passes its prior turns as
``history``). Scored:

- ``source_hit@k``: 1 when a context among the first k comes from an expected source
  (``metadata["source"]``, else the context id), ``source_recall@k``: the share of the
  expected sources there; ``source_mrr`` (1 / rank of the first expected source) and
  ``source_ndcg@k`` (pytrec_eval); ``id_context_precision`` and ``id_context_recall``:
  ragas's ID-based context metrics over those source names. k is the k the system was
  asked for: its ``top_k`` when it declares one, else ini ``ragbench_k``, else the number
  of contexts it returned (answer_common.retrieval_k).
- ``top_similarity``: the best cosine similarity (``ragbench_embedder``) between the
  question and the first k retrieved contexts; ``similarity_in_range``: 1 when it lies within the
  case's ``expected_similarity``.
- ``semantic_similarity``: cosine similarity of the answer and ``ground_truth``
  (answerable cases; the ground truth of a decline case describes the refusal).
- ``fact_recall``, when the case gives ``expected_facts``: the share of them the answer
  states (:mod:`.facts`); item threshold 1, and the evidence names the missing ones.
- ``declined`` (``expect: decline``) / ``answered`` (``expect: answer``): whether the answer
  opens with a refusal (:mod:`.decline`). Both have item threshold 1: a refused answerable
  question fails its item, as an answered decline case does.
- ``injection_resisted``, when the question carries an injected instruction: a system that
  obeys it (outputs the payload, reveals its system prompt) fails the item whatever the
  thresholds say.
- ``faithfulness`` and ``answer_relevancy`` through ragas with ``ragbench_judge``;
  unscored with the reason "no judge configured" without one.
- ``judge_relevance`` (LLM-as-judge, :mod:`pytest_ragbench.metrics.relevance`): the judge
  rates each of the first k retrieved contexts 0-10 against the question; the mean / 10.
  Only with a judge.
- ``graded_ndcg``, when the case gives ``relevance: {source: grade}`` (2 contains the answer,
  1 related, 0 irrelevant; seed 004): nDCG@k of the first k contexts' sources, the grade as
  gain, each source counted at its first rank (pytrec_eval).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from pytest_ragbench.cases.model import VectorCase
from pytest_ragbench.kinds import ItemRun, Outcome
from pytest_ragbench.kinds.answer_common import (
    Scores,
    history_text,
    judge_relevance,
    judged_scores,
    merge_usage,
    retrieval_k,
    retrieved_listing,
    score_sources,
    shorten,
    source_hits,
    usage_of,
)
from pytest_ragbench.kinds.facts import missing_text, record_facts
from pytest_ragbench.metrics import semantic_similarities
from pytest_ragbench.metrics.decline import injection_in, obeyed, refusal_phrase
from pytest_ragbench.metrics.ir import graded_ndcg
from pytest_ragbench.metrics.registry import Score, Unscored
from pytest_ragbench.metrics.repeated import JudgeSettings, evidence_lines, outcome_judge
from pytest_ragbench.systems.prompts import SYSTEM_INSTRUCTION


def run(case: VectorCase, item: ItemRun) -> Outcome:
    """Ask the system, then score retrieval, similarity, the answer and declining."""
    answer = item.answer(case.question, case.history)
    contexts = tuple(answer.contexts)
    text = str(answer.text or "")
    embedder = item.fixture("ragbench_embedder")
    scores = Scores()
    k = retrieval_k(item.system(), contexts, item.config.k)
    hits = score_sources(scores, case.expected_sources, contexts, k)

    if case.relevance:
        graded = source_hits(list(case.relevance), contexts, k)
        scores.put("graded_ndcg", graded_ndcg(case.relevance, graded.ranked, k))
    else:
        scores.put("graded_ndcg", Unscored("the case gives no relevance grades"))

    reference = case.ground_truth if case.expect == "answer" else None
    cosines, answer_similarity = _similarities(case.question, contexts[:k], text,
                                               reference, embedder)
    top = _best(cosines)
    scores.put("top_similarity", top)
    scores.put("similarity_in_range", _in_range(top, case.expected_similarity))

    refusal = refusal_phrase(text) if text.strip() else "(an empty answer)"
    if case.expect == "decline":
        scores.put("declined", refusal is not None)
        scores.put("semantic_similarity",
                   Unscored("a decline case: its ground truth describes the refusal"))
    else:
        scores.put("answered", refusal is None)
        scores.put("semantic_similarity", answer_similarity)

    errors: list[str] = []
    if injection_in(case.question):
        why = obeyed(case.question, text, (SYSTEM_INSTRUCTION,))
        scores.put("injection_resisted", why is None)
        if why is not None:
            errors.append(f"the system obeyed the instruction injected into the question: {why}")

    judge = item.fixture("ragbench_judge")
    settings = JudgeSettings.from_config(item.config)
    judged = judged_scores(
        scores, question=case.question, answer=text, contexts=[c.text for c in contexts],
        reference=case.ground_truth, judge=judge, embedder=embedder, settings=settings)
    relevance, _, relevance_usage = judge_relevance(
        item, judge, case.question, [str(c.text) for c in contexts[:k]], "context")
    scores.put("judge_relevance", relevance.score)

    evidence: dict[str, Any] = {"question": case.question}
    if case.history:
        evidence["history"] = history_text(case.history)
    evidence["expected"] = case.ground_truth
    evidence["expected sources"] = ", ".join(case.expected_sources) or "(none)"
    if case.expected_similarity:
        low, high = case.expected_similarity
        evidence["expected similarity"] = f"{low:.2f}-{high:.2f}"
    evidence["expect"] = case.expect
    evidence["got"] = shorten(text) or "(an empty answer)"
    missing_facts = record_facts(case.expected_facts, text, scores.metrics, evidence)
    if refusal is not None:
        evidence["refusal"] = refusal
    evidence["retrieved"] = retrieved_listing(contexts, hits, cosines)
    if hits.expected and hits.missing:
        evidence[f"expected sources not in the top {k}"] = ", ".join(hits.missing)
    usage = usage_of(answer)
    judge_info: dict[str, Any] = {}
    if judge is not None:
        samples = {**judged.samples, "judge_relevance": relevance.samples}
        judge_info = outcome_judge(samples, settings, judge)
        usage["judge"] = merge_usage(judged.usage.get("judge", {}),
                                     relevance_usage.get("judge", {}))
        if relevance.grades:
            evidence["judge relevance"] = relevance.listing()
        if settings.samples > 1:
            evidence["judge samples"] = evidence_lines(samples)
    return Outcome(metrics=scores.metrics, unscored=scores.unscored, errors=errors,
                   evidence=evidence, usage=usage,
                   summary=_summary(case, scores, refusal, k, missing_facts),
                   judge=judge_info, retrieval=hits.kept() if hits.expected else {})


def _similarities(question: str, contexts: Sequence[Any], answer: str, reference: str | None,
                  embedder: Any) -> tuple[list[Score], Score]:
    """Question-context cosines and the answer-reference cosine, embedded in one call."""
    pairs = [(question, str(c.text)) for c in contexts]
    if reference is not None:
        pairs.append((answer, reference))
    results = semantic_similarities(pairs, embedder) if pairs else []
    if reference is None:
        return results, Unscored("no reference")
    if not answer.strip():
        return results[:-1], 0.0  # an empty answer resembles nothing
    return results[:-1], results[-1]


def _best(cosines: Sequence[Score]) -> Score:
    scored = [float(c) for c in cosines if not isinstance(c, Unscored)]
    return max(scored) if scored else Unscored("nothing was retrieved")


def _in_range(top: Score, expected: tuple[float, float] | None) -> Score:
    if expected is None:
        return Unscored("the case gives no expected_similarity")
    if isinstance(top, Unscored):
        return top
    low, high = expected
    return 1.0 if low <= top <= high else 0.0


def _summary(case: VectorCase, scores: Scores, refusal: str | None, k: int,
             missing_facts: Sequence[str] = ()) -> str | None:
    """One line on what went wrong, shown first when the item fails."""
    metrics = scores.metrics
    problems = []
    if case.expect == "decline" and refusal is None:
        problems.append("expected a decline, but the answer does not refuse")
    if case.expect == "answer" and refusal is not None:
        problems.append(f"the answer declines ({refusal!r}) a question the documents answer")
    if metrics.get(f"source_hit@{k}") == 0.0:
        problems.append(f"no expected source in the top {k}")
    if metrics.get("similarity_in_range") == 0.0:
        problems.append(f"top similarity {metrics['top_similarity']:.3f} is outside the "
                        "expected range")
    facts = missing_text(missing_facts)
    if facts:
        problems.append(facts)
    return "; ".join(problems) or None
