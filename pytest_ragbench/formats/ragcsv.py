"""Read a RAGCSV file (README "Case formats"): a CSV with positional columns.

| col | content |
|---|---|
| 0 | expected answer |
| 1 | fragments: a Python literal list of ``{'page_content': ..., 'metadata': {'title': ...}}`` |
| 2 | hallucination-detection note (kept, unused) |
| 3 | timestamp (kept, unused) |
| 4 | question |
| 5 | expected facts (optional, ours): a Python literal list of strings a correct answer states |

Column 5 is not part of the RAGCSV benchmark's format: a file it wrote has five columns and
no facts. A sixth column, empty or a list such as ``['Rudy Gobert', '2024']``, gives the row
``expected_facts`` (the ``fact_recall`` metric); tools that read five columns ignore it.

RAGCSV files are written without a header. A first row that is one anyway (column 1 is not a list
and at least three cells name columns: ``answer``, ``expected``, ``fragments``,
``contexts``, ``notes``, ``hallucination``, ``timestamp``, ``question``, ...) is skipped and
not counted as a row.

Column 1 is parsed with :func:`ast.literal_eval` (literals only, nothing is executed).
A row whose column 1 is not a literal or has the wrong shape, or that lacks a column,
becomes a :class:`CaseError` naming the file, the physical line where the row starts (a
quoted cell may span lines) and the column; it is counted and skipped, the rest is read.
"""

from __future__ import annotations

import ast
import csv
import io
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from pytest_ragbench.errors import CaseError
from pytest_ragbench.metrics.answer import normalize_fact

COLUMNS = ("column 0 (expected answer)", "column 1 (fragments)", "column 2 (hallucination)",
           "column 3 (timestamp)", "column 4 (question)")
COLUMN_NAMES = ("expected answer", "fragments", "hallucination note", "timestamp", "question")
FACTS_COLUMN = "column 5 (expected facts)"
# Words of a header cell, any case; a header names at least HEADER_CELLS of the columns.
HEADER_WORDS = frozenset({
    "answer", "answers", "expected", "expected_answer", "expected answer", "expected_result",
    "expected result", "result", "reference", "ground_truth", "ground truth", "fragments",
    "fragment", "documents", "document", "docs", "contexts", "context", "passages",
    "hallucination", "hallucination_detection", "hallucination detection", "notes", "note",
    "proposal", "timestamp", "time", "date", "created", "created_at", "question", "query",
    "prompt", "facts", "expected_facts", "expected facts"})
HEADER_CELLS = 3
FIELD_SIZE_LIMIT = 1 << 30  # fragment lists are long; the csv default is 128 KiB


@dataclass(frozen=True)
class Fragment:
    """One document fragment of column 1."""

    page_content: str
    title: str | None = None
    metadata: dict[str, Any] = field(default_factory=dict)


@dataclass(frozen=True)
class RagcsvRow:
    """One row. ``row`` counts the file's non-blank rows from 1 (bad rows included)."""

    row: int
    line: int
    expected: str
    fragments: tuple[Fragment, ...]
    question: str
    hallucination: str = ""
    timestamp: str = ""
    expected_facts: tuple[str, ...] = ()


@dataclass
class RagcsvFile:
    """The rows read from one file and one error per row that could not be read."""

    path: Path
    rows: list[RagcsvRow] = field(default_factory=list)
    errors: list[CaseError] = field(default_factory=list)
    # The row number of each error that belongs to one row (an invalid-CSV error has none).
    error_rows: dict[int, int] = field(default_factory=dict)  # index in ``errors`` -> row

    def row_of(self, index: int) -> int | None:
        """The row number of ``errors[index]``, or None when it is not a row's error."""
        return self.error_rows.get(index)


def read_ragcsv(path: str | Path) -> RagcsvFile:
    """Read every row of a RAGCSV file; an unreadable file raises ``CaseError``."""
    path = Path(path)
    try:
        data = path.read_bytes()
    except OSError as exc:
        raise CaseError(f"cannot read file: {exc.strerror}", file=path) from None
    # An invalid byte fails only the row it is in: it is kept as a lone surrogate
    # (surrogateescape) and the row holding one is reported with the byte's line.
    text = data.decode("utf-8-sig", errors="surrogateescape")
    result = RagcsvFile(path)
    number = 0
    first = True
    for line, cells in _rows(text, path, result.errors):
        if not any(cell.strip() for cell in cells):
            continue
        if first and is_header(cells):
            first = False
            continue
        first = False
        number += 1
        try:
            _check_utf8(cells, line)
            result.rows.append(parse_row(cells, number, line))
        except CaseError as exc:
            result.error_rows[len(result.errors)] = number
            result.errors.append(exc.located(file=path, line=line))
    return result


def _check_utf8(cells: list[str], line: int) -> None:
    """``CaseError`` naming the line and column of the row's first byte that is not UTF-8."""
    lines_before = 0  # newlines inside the earlier (quoted) cells of the row
    for column, cell in zip(COLUMNS, cells, strict=False):
        bad = next((i for i, char in enumerate(cell) if "\udc80" <= char <= "\udcff"), None)
        if bad is not None:
            byte = ord(cell[bad]) - 0xDC00
            raise CaseError(f"not UTF-8 text (invalid byte 0x{byte:02x})",
                            line=line + lines_before + cell.count("\n", 0, bad), field=column)
        lines_before += cell.count("\n")


def is_header(cells: list[str]) -> bool:
    """True for a header row: column 1 is no list, and cells name the columns."""
    if len(cells) > 1 and cells[1].strip().startswith(("[", "(")):
        return False
    named = sum(" ".join(cell.strip().strip("#").lower().split()) in HEADER_WORDS
                for cell in cells)
    return named >= HEADER_CELLS


def parse_row(cells: list[str], row: int, line: int) -> RagcsvRow:
    """One row from its cells; ``CaseError`` names the column that is wrong."""
    if len(cells) < len(COLUMNS):
        listed = ", ".join(f"{i}: {name}" for i, name in enumerate(COLUMN_NAMES))
        raise CaseError(f"row has {len(cells)} columns, expected {len(COLUMNS)} ({listed})",
                        line=line, field=COLUMNS[len(cells)])
    expected, raw_fragments, hallucination, timestamp, question = cells[:5]
    if not expected.strip():
        raise CaseError("empty", line=line, field=COLUMNS[0])
    if not question.strip():
        raise CaseError("empty", line=line, field=COLUMNS[4])
    fragments = parse_fragments(raw_fragments, line)
    facts = parse_facts(cells[5], line) if len(cells) > len(COLUMNS) else ()
    return RagcsvRow(row, line, expected, fragments, question, hallucination, timestamp, facts)


def parse_facts(text: str, line: int | None = None) -> tuple[str, ...]:
    """Column 5: empty, or a Python literal list of strings (numbers are read as text)."""
    if not text.strip():
        return ()
    try:
        value = ast.literal_eval(text.strip())
    except (SyntaxError, ValueError, TypeError, MemoryError, RecursionError):
        value = None
    if not isinstance(value, list | tuple):
        raise CaseError("expected a Python literal list of strings, such as "
                        "['Rudy Gobert', '2024'], or nothing", line=line, field=FACTS_COLUMN)
    facts = []
    for index, fact in enumerate(value, start=1):
        if isinstance(fact, bool) or not isinstance(fact, str | int | float):
            raise CaseError(f"fact {index} is a {type(fact).__name__}, expected a string",
                            line=line, field=FACTS_COLUMN)
        if not normalize_fact(str(fact)):
            raise CaseError(f"fact {index} ({str(fact)[:40]!r}) has no letter or digit to "
                            "look for in the answer", line=line, field=FACTS_COLUMN)
        facts.append(str(fact))
    return tuple(facts)


def parse_fragments(text: str, line: int | None = None) -> tuple[Fragment, ...]:
    """Column 1: a Python literal list of fragment dicts."""
    where = COLUMNS[1]
    if not text.strip():
        raise CaseError("empty (expected a list of fragments)", line=line, field=where)
    try:
        value = ast.literal_eval(text.strip())
    except SyntaxError as exc:
        raise CaseError(f"not a Python literal (syntax error: {exc.msg})", line=line,
                        field=where) from None
    except (ValueError, TypeError, MemoryError, RecursionError):
        raise CaseError("not a Python literal (only strings, numbers, lists, tuples, dicts, "
                        "sets, booleans and None are allowed)", line=line, field=where) from None
    if not isinstance(value, list | tuple):
        raise CaseError(f"expected a list of fragments, got {type(value).__name__}",
                        line=line, field=where)
    return tuple(_fragment(item, index, line) for index, item in enumerate(value, start=1))


def _fragment(item: Any, index: int, line: int | None) -> Fragment:
    where = COLUMNS[1]
    if not isinstance(item, dict):
        raise CaseError(f"fragment {index} is a {type(item).__name__}, expected a dict with "
                        "'page_content' and 'metadata'", line=line, field=where)
    content = item.get("page_content")
    if not isinstance(content, str):
        raise CaseError(f"fragment {index}: 'page_content' must be a string",
                        line=line, field=where)
    metadata = item.get("metadata", {})
    if metadata is None:
        metadata = {}
    if not isinstance(metadata, dict):
        raise CaseError(f"fragment {index}: 'metadata' must be a dict", line=line, field=where)
    title = metadata.get("title")
    if title is not None and not isinstance(title, str):
        raise CaseError(f"fragment {index}: metadata 'title' must be a string",
                        line=line, field=where)
    return Fragment(content, title, {str(k): v for k, v in metadata.items()})


def _rows(text: str, path: Path, errors: list[CaseError]) -> Iterator[tuple[int, list[str]]]:
    """CSV rows with the physical line each one starts on."""
    reader = csv.reader(io.StringIO(text, newline=""))
    with _field_size_limit(FIELD_SIZE_LIMIT):
        consumed = 0
        while True:
            start = consumed + 1
            try:
                cells = next(reader)
            except StopIteration:
                return
            except csv.Error as exc:
                errors.append(CaseError(f"invalid CSV: {exc}", file=path, line=start))
                if reader.line_num == consumed:  # no progress: give up on the rest
                    return
                consumed = reader.line_num
                continue
            consumed = reader.line_num
            yield start, cells


@contextmanager
def _field_size_limit(limit: int) -> Iterator[None]:
    """Raise the csv module's (process-wide) field size limit while reading."""
    previous = csv.field_size_limit(limit)
    try:
        yield
    finally:
        csv.field_size_limit(previous)
