"""Table questions with computed answers: ``table`` ragas cases from CSV or Markdown tables.

A table's first column of unique text names its rows; columns whose every cell is a
number (``$``, ``,`` and ``%`` allowed) are asked about. Seed 000's question types:

- lookup: one cell (the answer as the cell is written);
- numeric: the total, average, maximum or minimum of a column, or the difference of two
  rows (rounded to 2 places);
- comparison: which of two rows has the higher value.

The context is the table itself, as Markdown. Each answer is computed a second time
with decimal arithmetic from a fresh read of the file before the case is kept.
"""

from __future__ import annotations

import csv
import random
import re
from decimal import Decimal, InvalidOperation
from pathlib import Path
from typing import Any

from pytest_ragbench.datasets.generate.common import Accounting, Generated, GenerateError, draft
from pytest_ragbench.datasets.markdown_table import parse_markdown_table, to_markdown
from pytest_ragbench.datasets.sample import NormalizedSample, make_id, short_hash

SUFFIXES = (".csv", ".tsv", ".md")
TYPES = ("lookup", "numeric", "comparison")


def read_table(path: Path) -> list[list[str]]:
    """The grid of a CSV, TSV or Markdown table file (first row: the header)."""
    text = path.read_text(encoding="utf-8", errors="replace")
    if path.suffix == ".md":
        grid = parse_markdown_table(text)
    else:
        grid = [row for row in csv.reader(text.splitlines(),
                                          delimiter="\t" if path.suffix == ".tsv" else ",")
                if any(cell.strip() for cell in row)]
    if len(grid) < 3:
        raise GenerateError(f"{path}: no table with a header and two rows found")
    return [[cell.strip() for cell in row] for row in grid]


def number(cell: str) -> Decimal | None:
    """A cell's number (``$1,200``: 1200; ``45%``: 45), or None."""
    text = re.sub(r"[$,%\s]", "", cell)
    if text.startswith("(") and text.endswith(")"):  # accounting negatives
        text = "-" + text[1:-1]
    try:
        return Decimal(text) if text else None
    except InvalidOperation:
        return None


def _shown(value: Decimal) -> str:
    rounded = value.quantize(Decimal("0.01"))
    return format(rounded.normalize(), "f") if rounded == rounded.to_integral() else str(rounded)


def _questions(grid: list[list[str]], name: str, rng: random.Random
               ) -> list[tuple[str, str, str, dict[str, Any]]]:
    """(question_type, question, answer, facts) candidates of one table."""
    header, rows = grid[0], grid[1:]
    width = len(header)
    rows = [row + [""] * (width - len(row)) for row in rows]
    label = next((i for i in range(width) if len({r[i] for r in rows}) == len(rows)
                  and all(r[i] and number(r[i]) is None for r in rows)), None)
    if label is None:
        return []
    numeric = [i for i in range(width) if i != label
               and all(number(r[i]) is not None for r in rows)]
    out: list[tuple[str, str, str, dict[str, Any]]] = []
    for column in numeric:
        title = header[column] or f"column {column + 1}"
        for row in rng.sample(rows, min(4, len(rows))):
            out.append(("lookup", rng.choice([
                f"In {name}, what is the {title} of {row[label]}?",
                f"According to {name}, what {title} is given for {row[label]}?"]),
                row[column], {"column": title, "row": row[label]}))
        values = [number(r[column]) or Decimal(0) for r in rows]
        for word, value in (("total", sum(values, Decimal(0))),
                            ("average", sum(values, Decimal(0)) / len(values)),
                            ("highest", max(values)), ("lowest", min(values))):
            out.append(("numeric", f"In {name}, what is the {word} {title} over all rows?",
                        _shown(value), {"column": title, "operation": word}))
        pairs = [(a, b) for a in rows for b in rows if a is not b]
        for a, b in rng.sample(pairs, min(4, len(pairs))):
            va, vb = number(a[column]), number(b[column])
            if va is None or vb is None or va == vb:
                continue
            out.append(("numeric", f"In {name}, by how much does the {title} of {a[label]} "
                        f"differ from that of {b[label]} ({a[label]} minus {b[label]})?",
                        _shown(va - vb), {"column": title, "rows": [a[label], b[label]]}))
            higher = a[label] if va > vb else b[label]
            out.append(("comparison", rng.choice([
                f"In {name}, which has the higher {title}: {a[label]} or {b[label]}?",
                f"Comparing {a[label]} and {b[label]} in {name}, whose {title} is higher?"]),
                higher, {"column": title, "rows": [a[label], b[label]]}))
    return out


def _recheck(path: Path, facts: dict[str, Any], answer: str) -> bool:
    """The answer computed again from a fresh read of the file."""
    grid = read_table(path)
    header = grid[0]
    column = header.index(facts["column"]) if facts["column"] in header else None
    if column is None:
        return False
    label = next(i for i in range(len(header)) if i != column and any(
        row[i] == (facts.get("row") or (facts.get("rows") or [""])[0]) for row in grid[1:])) \
        if ("row" in facts or "rows" in facts) else None
    cells = {row[label]: row[column] for row in grid[1:]} if label is not None else {}
    if "row" in facts:
        return cells.get(facts["row"]) == answer
    if "rows" in facts:
        a, b = (number(cells[name]) for name in facts["rows"])
        if a is None or b is None:
            return False
        return answer in (_shown(a - b), facts["rows"][0 if a > b else 1])
    values = [number(row[column]) for row in grid[1:]]
    known = [v for v in values if v is not None]
    expected = {"total": sum(known, Decimal(0)), "average": sum(known, Decimal(0)) / len(known),
                "highest": max(known), "lowest": min(known)}[facts["operation"]]
    return _shown(expected) == answer


def generate_tables(path: Path, n: int, seed: int) -> Generated:
    """``n`` table ragas cases (about a third of each type) from the table files at ``path``."""
    accounting = Accounting()
    files = sorted(p for p in path.iterdir() if p.suffix in SUFFIXES) if path.is_dir() \
        else [path]
    rng = random.Random(seed)
    pool: dict[str, list[dict[str, Any]]] = {t: [] for t in TYPES}
    for file in files:
        grid = read_table(file)
        context = to_markdown(grid)
        for question_type, question, answer, facts in _questions(grid, file.name, rng):
            kind = f"table/{question_type}"
            if not _recheck(file, facts, answer):
                accounting.reject(kind, "second computation differs")
                continue
            sample = NormalizedSample(
                id=make_id("table", file.stem, question_type, short_hash(question, 8)),
                question=question, ground_truth=answer, contexts=(context,), doc_type="table",
                question_type=question_type,
                difficulty={"lookup": "easy", "comparison": "medium"}.get(question_type,
                                                                          "hard"),
                source_dataset=file.name, metadata={"table": file.name, **facts})
            pool[question_type].append(draft(sample.to_dict(), {
                "generator": "tables", "source": file.name, "seed": seed, "model": None,
                **{k: v for k, v in facts.items() if k in ("row", "rows", "column")}}))
    cases: list[dict[str, Any]] = []
    for index, question_type in enumerate(TYPES):
        wanted = n // len(TYPES) + (index < n % len(TYPES))
        chosen = rng.sample(pool[question_type], min(wanted, len(pool[question_type])))
        for _case in chosen:
            accounting.keep(f"table/{question_type}")
            accounting.exact += 1
            accounting.verified += 1
        if len(chosen) < wanted:
            accounting.reject(f"table/{question_type}",
                              f"quota unmet ({len(chosen)}/{wanted})")
        cases += chosen
    return Generated(cases, accounting.finish())
