"""The controller's collector of item records and the ``ragbench`` terminal summary.

Registered only on the controller: under pytest-xdist the records arrive on the
replayed test reports, so the numbers are the same with and without workers.
"""

from __future__ import annotations

from collections import Counter, defaultdict
from typing import Any

import pytest

from pytest_ragbench.config import RagbenchConfig
from pytest_ragbench.records import REPORT_ATTRIBUTE, ItemRecord

COUNTED = ("passed", "failed", "warning", "error", "skipped", "lost")


class RagbenchSession:
    """Gathers one record per item from the reports and prints the summary."""

    def __init__(self, config: pytest.Config, settings: RagbenchConfig) -> None:
        self.config = config
        self.settings = settings
        self.records: dict[str, ItemRecord] = {}

    @pytest.hookimpl(tryfirst=True)
    def pytest_runtest_logreport(self, report: pytest.TestReport) -> None:
        """Keep the record carried by a report (the last phase that has one wins)."""
        data = getattr(report, REPORT_ATTRIBUTE, None)
        if isinstance(data, dict):
            self.records[report.nodeid] = ItemRecord.from_dict(data)

    def sorted_records(self) -> list[ItemRecord]:
        """Records in a stable order, independent of worker scheduling."""
        return [self.records[k] for k in sorted(self.records)]

    def pytest_terminal_summary(self, terminalreporter: Any) -> None:
        """Print counts per kind and category."""
        if not self.records:
            return
        terminalreporter.section("ragbench")
        for line in summary_lines(self.sorted_records()):
            terminalreporter.write_line(line)


def summary_lines(records: list[ItemRecord]) -> list[str]:
    """Counts per kind, and per category within each kind, as an aligned table."""
    by_kind: dict[str, list[ItemRecord]] = defaultdict(list)
    for record in records:
        by_kind[record.kind].append(record)
    rows: list[tuple[str, ...]] = [("kind", "category", "items", *COUNTED)]
    for kind in sorted(by_kind):
        kind_records = by_kind[kind]
        rows.append(_count_row(kind, "(all)", kind_records))
        by_category: dict[str, list[ItemRecord]] = defaultdict(list)
        for record in kind_records:
            by_category[record.category or "-"].append(record)
        if len(by_category) > 1 or "-" not in by_category:
            for category in sorted(by_category):
                rows.append(_count_row("", category, by_category[category]))
    widths = [max(len(str(row[i])) for row in rows) for i in range(len(rows[0]))]
    return ["  ".join(str(cell).ljust(w) for cell, w in zip(row, widths, strict=True)).rstrip()
            for row in rows]


def _count_row(kind: str, category: str, records: list[ItemRecord]) -> tuple[str, ...]:
    counts = Counter(r.status for r in records)
    return (kind, category, str(len(records)), *(str(counts.get(s, 0)) for s in COUNTED))
