"""Read source records (JSON list, JSONL, CSV with a header) with the line each starts on.

A record that cannot be read becomes a :class:`CaseError` with file and line; the others
are still returned. A file that cannot be read at all raises ``CaseError``.
"""

from __future__ import annotations

import csv
import io
import json
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from pytest_ragbench.errors import CaseError


@dataclass
class SourceRecords:
    """Records of one file as ``(line, record)`` pairs, and the errors met on the way."""

    path: Path
    records: list[tuple[int, Any]] = field(default_factory=list)
    errors: list[CaseError] = field(default_factory=list)


def read_text(path: Path) -> str:
    """The file's text (UTF-8, BOM dropped); ``CaseError`` if it cannot be read."""
    try:
        data = path.read_bytes()
    except OSError as exc:
        raise CaseError(f"cannot read file: {exc.strerror}", file=path) from None
    try:
        return data.decode("utf-8-sig")
    except UnicodeDecodeError as exc:
        line = data.count(b"\n", 0, exc.start) + 1
        raise CaseError(f"not UTF-8 ({exc.reason})", file=path, line=line) from None


def read_records(path: str | Path) -> SourceRecords:
    """Records of a ``.json`` (a list, or one object), ``.jsonl`` or ``.csv`` file."""
    path = Path(path)
    text = read_text(path)
    if path.suffix == ".jsonl":
        return _jsonl(path, text)
    if path.suffix == ".json":
        return _json(path, text)
    if path.suffix == ".csv":
        return _csv(path, text)
    raise CaseError(f"unsupported file type {path.suffix!r} (expected .json, .jsonl, .csv)",
                    file=path)


def _jsonl(path: Path, text: str) -> SourceRecords:
    result = SourceRecords(path)
    for number, line in enumerate(text.split("\n"), start=1):
        if not line.strip():
            continue
        try:
            result.records.append((number, json.loads(line)))
        except json.JSONDecodeError as exc:
            result.errors.append(CaseError(f"invalid JSON: {exc.msg} (column {exc.colno})",
                                           file=path, line=number))
        except RecursionError:
            result.errors.append(CaseError("invalid JSON: nested too deeply",
                                           file=path, line=number))
    return result


def _json(path: Path, text: str) -> SourceRecords:
    try:
        data = json.loads(text)
    except json.JSONDecodeError as exc:
        raise CaseError(f"invalid JSON: {exc.msg} (column {exc.colno})",
                        file=path, line=exc.lineno) from None
    except RecursionError:
        raise CaseError("invalid JSON: nested too deeply", file=path) from None
    result = SourceRecords(path)
    if not isinstance(data, list):
        result.records.append((_skip_ws(text, 0)[1], data))
        return result
    # The text parsed, so re-scanning the top-level array element by element is safe:
    # this only finds the line on which each element starts.
    decoder = json.JSONDecoder()
    position, line = _skip_ws(text, 0)
    position += 1  # '['
    for _ in data:
        position, line = _skip_ws(text, position, line)
        if text[position] == ",":
            position, line = _skip_ws(text, position + 1, line)
        value, end = decoder.raw_decode(text, position)
        result.records.append((line, value))
        line += text.count("\n", position, end)
        position = end
    return result


def _skip_ws(text: str, position: int, line: int = 1) -> tuple[int, int]:
    while position < len(text) and text[position] in " \t\r\n":
        if text[position] == "\n":
            line += 1
        position += 1
    return position, line


def _csv(path: Path, text: str) -> SourceRecords:
    """A CSV with a header row; each later row becomes a ``{column: value}`` dict."""
    result = SourceRecords(path)
    reader = csv.reader(io.StringIO(text, newline=""))
    try:
        header = next(reader)
    except StopIteration:
        return result
    except csv.Error as exc:
        raise CaseError(f"invalid CSV header: {exc}", file=path, line=1) from None
    names = [name.strip() for name in header]
    consumed = reader.line_num
    while True:
        start = consumed + 1
        try:
            cells = next(reader)
        except StopIteration:
            break
        except csv.Error as exc:
            result.errors.append(CaseError(f"invalid CSV: {exc}", file=path, line=start))
            if reader.line_num == consumed:
                break
            consumed = reader.line_num
            continue
        consumed = reader.line_num
        if not any(cell.strip() for cell in cells):
            continue
        stray = next((i for i, cell in enumerate(cells)
                      if cell.strip() and (i >= len(names) or not names[i])), None)
        if stray is not None:
            result.errors.append(CaseError(
                f"a value in column {stray + 1}, which has no name in the header row "
                "(a broken quote or a stray delimiter?)", file=path, line=start))
            continue
        record = {name: cells[i] if i < len(cells) else "" for i, name in enumerate(names)
                  if name}
        result.records.append((start, record))
    return result
