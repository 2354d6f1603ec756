"""``sql[<id>]``: the system under test answers an SQL case.

When the system returns SQL, that SQL is executed read-only and compared with
``ground_truth_data`` by the same comparator as ``sql_ground_truth`` (metric
``execution_match``). When it returns only text, every value of ``ground_truth_data``
must appear in the answer, with number-format tolerance (metric ``value_recall``, the
share of values mentioned). ``correct`` is 1.0 when the deciding check holds, and is
what the default threshold applies to.

The embedded default has no database access and answers in text from its documents, so
its items are scored on ``value_recall``; test_cases/ragbench.toml records them per item
and gates the mean (measured values there). A system that says it answers no SQL
questions (``answers_sql = False``) gets these items skipped with that reason, and they
are not prefetched.
"""

from __future__ import annotations

from typing import Any

from pytest_ragbench.cases.model import SqlCase
from pytest_ragbench.kinds import ItemRun, Outcome
from pytest_ragbench.kinds.answer_common import usage_of
from pytest_ragbench.kinds.sql.common import check_sql, sql_evidence
from pytest_ragbench.metrics import Unscored, entity_mention
from pytest_ragbench.sql.engine import DatabaseError
from pytest_ragbench.sql.guard import UnsafeSqlError


def run(case: SqlCase, item: ItemRun) -> Outcome:
    """Ask the system, then check its SQL against the database or its text for the values."""
    import pytest

    system = item.system()
    if getattr(system, "answers_sql", True) is False:
        pytest.skip(f"the system under test answers no SQL questions ({_name(system)}); "
                    "override ragbench_system with one that does (README)")
    answer = item.answer(case.question)
    evidence: dict[str, Any] = {"question": case.question,
                                "expected": _expected_text(case.ground_truth_data),
                                "got": answer.text}
    usage = usage_of(answer)
    if answer.sql:
        return _judge_sql(case, answer.sql, item, evidence, usage)
    return _judge_text(case, answer.text, evidence, usage)


def _judge_sql(case: SqlCase, sql: str, item: ItemRun, evidence: dict[str, Any],
               usage: dict[str, Any]) -> Outcome:
    try:
        check = check_sql(case, sql, item)
    except UnsafeSqlError as exc:
        return Outcome(metrics={"execution_match": 0.0, "correct": 0.0},
                       errors=[f"the system's SQL was refused before execution: {exc}"],
                       evidence={**evidence, "sql": sql}, usage=usage)
    except DatabaseError as exc:
        return Outcome(metrics={"execution_match": 0.0, "correct": 0.0},
                       errors=[f"the system's SQL failed: {exc}"],
                       evidence={**evidence, "sql": sql}, usage=usage)
    ok = 1.0 if check.comparison.ok else 0.0
    return Outcome(
        metrics={"execution_match": ok, "correct": ok},
        evidence={**evidence, **sql_evidence(case, sql, check)}, usage=usage,
        summary=None if ok else "the system's SQL returns other data than ground_truth_data",
    )


def _judge_text(case: SqlCase, text: str, evidence: dict[str, Any],
                usage: dict[str, Any]) -> Outcome:
    mention = entity_mention(text, case.ground_truth_data)
    if isinstance(mention.score, Unscored):
        return Outcome(unscored={"value_recall": mention.score.reason,
                                 "correct": mention.score.reason},
                       evidence=evidence, usage=usage)
    if mention.missing:
        evidence["missing values"] = ", ".join(mention.missing)
    return Outcome(
        metrics={"value_recall": mention.score, "correct": 0.0 if mention.missing else 1.0},
        evidence=evidence, usage=usage,
        summary="the answer (no SQL) does not state every ground-truth value"
        if mention.missing else None,
    )


def _name(system: Any) -> str:
    describe = getattr(system, "describe", None)
    return str(describe()) if callable(describe) else type(system).__name__


def _expected_text(data: Any) -> str:
    rows = data if isinstance(data, list) else [data]
    return "\n".join(", ".join(f"{k}={v}" for k, v in dict(row).items()) for row in rows[:10])


