"""Shared by the SQL kinds: run a case's SQL read-only and compare it with the ground truth."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from pytest_ragbench.cases.model import HybridCase, SqlCase, Table
from pytest_ragbench.kinds import ItemRun
from pytest_ragbench.sql.engine import run_query
from pytest_ragbench.sql.match import Comparison, compare_tables


@dataclass(frozen=True)
class SqlCheck:
    """The result of running one SQL statement against a case's ground truth."""

    comparison: Comparison
    actual: Table


def check_sql(case: SqlCase | HybridCase, sql: str, item: ItemRun) -> SqlCheck:
    """Run ``sql`` read-only on the case's database and compare with ``case.expected``."""
    engine = item.fixture("ragbench_databases").engine(case.db)
    actual = run_query(engine, sql, item.config.sql_timeout_s)
    expected = case.expected if case.expected is not None else Table((), ())
    comparison = compare_tables(expected, actual, float_places=case.float_places,
                                order_matters=case.order_matters)
    return SqlCheck(comparison, actual)


def preview(table: Table, limit: int = 5) -> str:
    """The first rows of a result set, one per line."""
    lines = [", ".join(table.columns)]
    lines += [", ".join("NULL" if v is None else str(v) for v in row) for row in table.rows[:limit]]
    if len(table.rows) > limit:
        lines.append(f"... ({len(table.rows)} rows)")
    return "\n".join(lines)


def sql_evidence(case: SqlCase | HybridCase, sql: str, check: SqlCheck | None) -> dict[str, Any]:
    """Question, SQL and the difference, for a failure message and the report."""
    evidence: dict[str, Any] = {"question": case.question, "sql": sql}
    if check is not None and not check.comparison.ok:
        evidence["difference"] = check.comparison.describe()
        evidence["got"] = preview(check.actual)
    return evidence
