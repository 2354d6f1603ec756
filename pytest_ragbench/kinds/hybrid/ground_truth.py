"""``hybrid_ground_truth[<id>]``: the SQL data matches and the answer mentions its entities.

As the hybrid verification script did: FAIL when the data does not match, WARNING (a pytest
warning, counted in the summary) when ``ground_truth_answer`` does not mention every
value of ``ground_truth_data``. Cases without data check only the answer (and that
their SQL, if any, runs).
"""

from __future__ import annotations

from pytest_ragbench.cases.model import HybridCase
from pytest_ragbench.kinds import ItemRun, Outcome
from pytest_ragbench.kinds.sql.common import check_sql, sql_evidence
from pytest_ragbench.metrics import Unscored, entity_mention
from pytest_ragbench.sql.engine import DatabaseError, run_query
from pytest_ragbench.sql.guard import UnsafeSqlError


def run(case: HybridCase, item: ItemRun) -> Outcome:
    """Verify the data part against the database, then the answer's entity mentions."""
    metrics: dict[str, float] = {}
    unscored: dict[str, str] = {}
    errors: list[str] = []
    warnings: list[str] = []
    evidence = {"question": case.question, "ground_truth_answer": case.ground_truth_answer}
    summary = None
    if case.expected_sql:
        try:
            if case.expected is not None:
                check = check_sql(case, case.expected_sql, item)
                metrics["data_match"] = 1.0 if check.comparison.ok else 0.0
                evidence.update(sql_evidence(case, case.expected_sql, check))
                if not check.comparison.ok:
                    summary = "the SQL result differs from ground_truth_data"
            else:  # no data to compare: the SQL must at least run
                engine = item.fixture("ragbench_databases").engine(case.db)
                run_query(engine, case.expected_sql, item.config.sql_timeout_s)
                evidence["sql"] = case.expected_sql
        except UnsafeSqlError as exc:
            errors.append(f"refused before execution: {exc}")
            evidence["sql"] = case.expected_sql
        except DatabaseError as exc:
            errors.append(f"database error: {exc}")
            evidence["sql"] = case.expected_sql
    if case.ground_truth_data is not None:
        mention = entity_mention(case.ground_truth_answer, case.ground_truth_data)
        if isinstance(mention.score, Unscored):
            unscored["entity_mention"] = mention.score.reason
        else:
            metrics["entity_mention"] = mention.score
            if mention.missing:
                warnings.append("ground_truth_answer does not mention: "
                                + ", ".join(mention.missing))
    return Outcome(metrics=metrics, unscored=unscored, errors=errors, warnings=warnings,
                   evidence=evidence, summary=summary)
