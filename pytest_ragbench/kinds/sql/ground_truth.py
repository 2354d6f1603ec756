"""``sql_ground_truth[<id>]``: the case's expected SQL returns its ground_truth_data."""

from __future__ import annotations

from pytest_ragbench.cases.model import SqlCase
from pytest_ragbench.kinds import ItemRun, Outcome
from pytest_ragbench.kinds.sql.common import check_sql, sql_evidence
from pytest_ragbench.sql.engine import DatabaseError
from pytest_ragbench.sql.guard import UnsafeSqlError


def run(case: SqlCase, item: ItemRun) -> Outcome:
    """Execute ``expected_sql`` read-only and compare row by row."""
    try:
        check = check_sql(case, case.expected_sql, item)
    except UnsafeSqlError as exc:
        return Outcome(metrics={"match": 0.0}, errors=[f"refused before execution: {exc}"],
                       evidence=sql_evidence(case, case.expected_sql, None))
    except DatabaseError as exc:
        return Outcome(metrics={"match": 0.0}, errors=[f"database error: {exc}"],
                       evidence=sql_evidence(case, case.expected_sql, None))
    return Outcome(
        metrics={"match": 1.0 if check.comparison.ok else 0.0},
        evidence=sql_evidence(case, case.expected_sql, check),
        summary=None if check.comparison.ok else "the result differs from ground_truth_data",
    )
