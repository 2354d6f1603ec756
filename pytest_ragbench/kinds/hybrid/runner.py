"""``hybrid[<id>]``: the system answers a question that needs database data and documents.

Scored:

- ``value_recall``: the share of the values of ``ground_truth_data`` that the answer states
  (names as whole words ignoring case and accents, numbers with format tolerance:
  ``2,373`` = ``2373``, ``34.6`` matches 34.58); unscored for analysis questions without data.
- ``execution_match``, when the system also returns SQL: that SQL run read-only on the
  case's database and compared with ``ground_truth_data`` (the ``sql`` kind's comparator).
  SQL that writes or fails to run fails the item whatever the thresholds say.
- ``semantic_similarity``: cosine similarity of the answer and ``ground_truth_answer``.
- ``fact_recall``, when the case gives ``expected_facts``: the share of them the answer
  states (:mod:`.facts`).
- ``source_hit@k``, ``source_recall@k``, ``source_mrr``, ``source_ndcg@k``,
  ``id_context_precision`` and ``id_context_recall`` over the case's ``expected_sources``,
  when it names them (as the vector kind; k from answer_common.retrieval_k).
"""

from __future__ import annotations

from typing import Any

from pytest_ragbench.cases.model import HybridCase
from pytest_ragbench.kinds import ItemRun, Outcome
from pytest_ragbench.kinds.answer_common import (
    Scores,
    retrieval_k,
    retrieved_listing,
    score_sources,
    shorten,
    usage_of,
)
from pytest_ragbench.kinds.facts import missing_text, record_facts
from pytest_ragbench.metrics import entity_mention, semantic_similarity
from pytest_ragbench.metrics.registry import Unscored
from pytest_ragbench.sql.guard import UnsafeSqlError


def run(case: HybridCase, item: ItemRun) -> Outcome:
    """Ask the system, then check the data values, its SQL if any, and the similarity."""
    answer = item.answer(case.question)
    text = str(answer.text or "")
    contexts = tuple(answer.contexts)
    scores = Scores()
    errors: list[str] = []
    evidence: dict[str, Any] = {"question": case.question,
                                "expected": case.ground_truth_answer}
    if case.ground_truth_data is not None:
        evidence["expected values"] = _values_text(case.ground_truth_data)
    evidence["got"] = shorten(text) or "(an empty answer)"
    missing_facts = record_facts(case.expected_facts, text, scores.metrics, evidence)

    if case.ground_truth_data is None:
        scores.put("value_recall", Unscored("an analysis question: the case has no "
                                            "ground_truth_data"))
    else:
        mention = entity_mention(text, case.ground_truth_data)
        scores.put("value_recall", mention.score)
        if mention.missing:
            evidence["values not in the answer"] = ", ".join(mention.missing)
    if answer.sql:
        errors += _check_sql(case, answer.sql, item, scores, evidence)

    embedder = item.fixture("ragbench_embedder")
    similarity = semantic_similarity(text, case.ground_truth_answer, embedder) \
        if text.strip() else 0.0
    scores.put("semantic_similarity", similarity)

    k = retrieval_k(item.system(), contexts, item.config.k)
    hits = score_sources(scores, case.expected_sources, contexts, k)
    if case.expected_sources:
        evidence["expected sources"] = ", ".join(case.expected_sources)
    evidence["retrieved"] = retrieved_listing(contexts, hits)
    if hits.expected and hits.missing:
        evidence[f"expected sources not in the top {k}"] = ", ".join(hits.missing)
    missing = evidence.get("values not in the answer")
    problems = [f"the answer does not state: {missing}"] if missing else []
    problems += [line for line in [missing_text(missing_facts)] if line]
    return Outcome(metrics=scores.metrics, unscored=scores.unscored, errors=errors,
                   evidence=evidence, usage=usage_of(answer),
                   summary="; ".join(problems) or None,
                   retrieval=hits.kept() if hits.expected else {})


def _check_sql(case: HybridCase, sql: str, item: ItemRun, scores: Scores,
               evidence: dict[str, Any]) -> list[str]:
    """Run the system's SQL read-only and compare it with ``ground_truth_data``."""
    # lazy: loads sqlalchemy
    from pytest_ragbench.kinds.sql.common import check_sql, sql_evidence
    from pytest_ragbench.sql.engine import DatabaseError

    evidence["sql"] = sql
    if case.expected is None:
        scores.put("execution_match", Unscored("no ground_truth_data to compare the SQL with"))
        return []
    try:
        check = check_sql(case, sql, item)
    except UnsafeSqlError as exc:
        scores.put("execution_match", 0.0)
        return [f"the system's SQL was refused before execution: {exc}"]
    except DatabaseError as exc:
        scores.put("execution_match", 0.0)
        return [f"the system's SQL failed: {exc}"]
    scores.put("execution_match", check.comparison.ok)
    details = sql_evidence(case, sql, check)
    if "difference" in details:
        evidence["sql difference"] = details["difference"]
        evidence["sql result"] = details["got"]
    return []


def _values_text(data: Any) -> str:
    rows = data if isinstance(data, list) else [data]
    return "\n".join(", ".join(f"{k}={v}" for k, v in dict(row).items()) for row in rows[:10])
