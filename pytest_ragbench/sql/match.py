"""Compare a query's result set with the ground truth, as ``ragbench verify`` reports it.

Row count, column names, key-by-key values; floats rounded to ``float_places``;
rows compared as a multiset unless order matters. Values keep their type: 5 and
"5" differ, NULL and "" differ, 5 and 5.0 are the same number.
"""

from __future__ import annotations

import functools
from collections import Counter
from dataclasses import dataclass, field
from decimal import ROUND_HALF_EVEN, Decimal, InvalidOperation
from typing import Any

from pytest_ragbench.cases.model import Table

MAX_LISTED = 5


@dataclass(frozen=True)
class Comparison:
    """Outcome of one comparison: ``ok`` and the differences, one short line each."""

    ok: bool
    differences: tuple[str, ...] = field(default_factory=tuple)
    expected_rows: int = 0
    actual_rows: int = 0

    def describe(self) -> str:
        """A compact multi-line diff for a failure message."""
        return "\n".join(self.differences)


def normalize(value: Any, places: int) -> tuple[str, Any]:
    """A hashable, type-tagged form of one cell for comparison."""
    if type(value) is str:  # the commonest cell: decided before any number handling
        return ("text", value)
    if value is None:
        return ("null", None)
    if isinstance(value, bool):
        value = int(value)
    if isinstance(value, int | float | Decimal):
        try:
            number = Decimal(str(value))
            if number.is_finite():
                number = number.quantize(_quantum(places), rounding=ROUND_HALF_EVEN)
            return ("number", number.normalize() if number != 0 else Decimal(0))
        except InvalidOperation:
            return ("number", str(value))
    if isinstance(value, bytes | bytearray | memoryview):
        return ("bytes", bytes(value))
    return ("text", str(value))


@functools.cache
def _quantum(places: int) -> Decimal:
    return Decimal(1).scaleb(-places)


def _show(value: Any) -> str:
    return "NULL" if value is None else repr(value)


def _row_text(columns: tuple[str, ...], row: tuple[Any, ...]) -> str:
    return "{" + ", ".join(f"{c}: {_show(v)}" for c, v in zip(columns, row, strict=True)) + "}"


def _align(expected: Table, actual: Table) -> tuple[list[int] | None, list[str]]:
    """Map each expected column to an actual column index (names compared case-insensitively)."""
    wanted = [c.lower() for c in expected.columns]
    have = [c.lower() for c in actual.columns]
    if wanted == have:  # the common case: same names in the same order
        return list(range(len(have))), []
    missing = Counter(wanted) - Counter(have)
    unexpected = Counter(have) - Counter(wanted)
    if missing or unexpected:
        problems = [f"columns differ: expected {list(expected.columns)}, "
                    f"got {list(actual.columns)}"]
        if missing:
            problems.append(f"  missing column(s): {', '.join(sorted(missing.elements()))}")
        if unexpected:
            problems.append(f"  unexpected column(s): {', '.join(sorted(unexpected.elements()))}")
        return None, problems
    used: set[int] = set()
    order = []
    for name in wanted:
        index = next(i for i, h in enumerate(have) if h == name and i not in used)
        used.add(index)
        order.append(index)
    return order, []


def compare_tables(expected: Table, actual: Table, *, float_places: int = 2,
                   order_matters: bool = False) -> Comparison:
    """Compare ``actual`` with ``expected`` and list every kind of difference found."""
    sizes = (len(expected.rows), len(actual.rows))
    if not expected.rows and not actual.rows:
        return Comparison(True, (), *sizes)
    if not expected.columns:  # ground truth is "no rows"
        positions = list(range(len(actual.rows)))
        listing = _listing("only in actual", Counter(positions), positions, actual.rows,
                           actual.columns)
        return Comparison(False, (f"row count: expected 0, got {len(actual.rows)}", *listing),
                          *sizes)
    problems: list[str] = []
    order: list[int] | None = list(range(len(expected.columns)))
    if actual.rows or actual.columns:
        order, problems = _align(expected, actual)
    if order is None:
        return Comparison(False, tuple(problems), *sizes)
    cols = expected.columns
    got_rows = [tuple(row[i] for i in order) for row in actual.rows]
    key = [tuple(normalize(v, float_places) for v in row) for row in expected.rows]
    got = [tuple(normalize(v, float_places) for v in row) for row in got_rows]
    if key == got:  # the common case: equal, in the same order
        return Comparison(not problems, tuple(problems), *sizes)
    if len(key) != len(got):
        problems.append(f"row count: expected {len(key)}, got {len(got)}")
    missing = Counter(key) - Counter(got)
    surplus = Counter(got) - Counter(key)
    if missing or surplus:
        problems += _listing("only in expected", missing, key, expected.rows, cols)
        problems += _listing("only in actual", surplus, got, got_rows, cols)
    elif order_matters and key != got:
        first = next(i for i, (a, b) in enumerate(zip(key, got, strict=True)) if a != b)
        problems.append(f"same rows in a different order (order_matters): first difference at "
                        f"row {first + 1}: expected {_row_text(cols, expected.rows[first])}, "
                        f"got {_row_text(cols, got_rows[first])}")
    return Comparison(not problems, tuple(problems), *sizes)


def _listing(title: str, counts: Counter[Any], keys: list[Any], rows: Any,
             columns: tuple[str, ...]) -> list[str]:
    if not counts:
        return []
    lines = [f"{title} ({sum(counts.values())} row(s)):"]
    remaining = Counter(counts)
    for row_key, row in zip(keys, rows, strict=True):
        if remaining[row_key] > 0:
            remaining[row_key] -= 1
            if len(lines) <= MAX_LISTED:
                lines.append(f"  {_row_text(columns, row)}")
    hidden = sum(counts.values()) - (len(lines) - 1)
    if hidden > 0:
        lines.append(f"  ... and {hidden} more")
    return lines
