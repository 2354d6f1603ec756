"""``ragcsv_rows.csv``: seed 003's per-row export, one line per RAGCSV item.

Built from the item records (not from what this process ran), so a run under xdist or
resumed with ``--ragbench-resume`` exports every row. Columns: the case file's stem, the
row, the system (empty with one), the item's status, the question, the expected answer,
the answer, the grade (``accuracy``, 0-100) and the times in milliseconds (``total_ms``,
``ttft_ms``, ``itl_ms``; empty when not measured).
"""

from __future__ import annotations

import csv
import io
from collections.abc import Iterable

from pytest_ragbench.results.records import ItemRecord

FILE_NAME = "ragcsv_rows.csv"
COLUMNS = ("file", "row", "system", "status", "question", "expected", "answer", "grade",
           "total_ms", "ttft_ms", "itl_ms")
KIND = "ragcsv"


def rows(records: Iterable[ItemRecord]) -> list[list[str]]:
    """One row per RAGCSV record, by file, row and system."""
    found = []
    for record in records:
        if record.kind != KIND:
            continue
        stem, _, row = record.case_id.rpartition(":")
        evidence = record.evidence
        found.append([stem, row, record.system or "", record.status,
                      _text(evidence.get("question")), _text(evidence.get("expected")),
                      _text(evidence.get("got")), _number(record.metrics.get("accuracy")),
                      _number(record.metrics.get("total_time_ms")),
                      _number(record.metrics.get("ttft_ms")),
                      _number(record.metrics.get("itl_ms"))])
    found.sort(key=lambda r: (r[0], int(r[1]) if r[1].isdigit() else 0, r[1], r[2]))
    return found


def csv_text(records: Iterable[ItemRecord]) -> str | None:
    """The file's text, or None when the run has no RAGCSV item."""
    found = rows(records)
    if not found:
        return None
    buffer = io.StringIO()
    writer = csv.writer(buffer, lineterminator="\n")
    writer.writerow(COLUMNS)
    writer.writerows(found)
    return buffer.getvalue()


def _text(value: object) -> str:
    return "" if value is None else str(value)


def _number(value: object) -> str:
    if isinstance(value, bool) or not isinstance(value, int | float):
        return ""
    return f"{float(value):.3f}".rstrip("0").rstrip(".")
