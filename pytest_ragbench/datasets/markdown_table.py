r"""A grid of cells ↔ a GitHub-flavoured markdown table, with an exact round trip.

Writing normalises the grid first (``normalise_grid``), and the round-trip promise is
``parse_markdown_table(to_markdown(grid)) == normalise_grid(grid)``:

- every cell becomes text (``None`` → ``""``, numbers → ``str``);
- line breaks (``\r\n``, ``\r``, ``\n``) in a cell become one space each, NUL becomes
  U+FFFD (what a markdown reader does with it), and leading/trailing whitespace is
  stripped — a table row is one line and markdown trims cells;
- ragged rows are padded with empty cells to the widest row; a grid without any
  column is empty and is written as ``""``.

The first row is the header row. Empty cells stay empty. ``|`` inside a cell is written
as ``\|`` — GFM's escape, which the table parser removes when it splits the row — and
nothing else is escaped, so the markdown shows each cell's text as it is (``*``, `` ` ``
or ``<`` are left for the reader, not rendered). Parsing uses markdown-it-py's GFM table
rule, imported when ``parse_markdown_table`` is called.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from typing import Any

_LINE_BREAK = re.compile(r"\r\n|\r|\n")

Grid = list[list[str]]


def normalise_cell(value: Any) -> str:
    """One cell as it will read back from the markdown."""
    text = "" if value is None else str(value)
    text = _LINE_BREAK.sub(" ", text).replace("\x00", "\ufffd")
    return text.strip()


def normalise_grid(rows: Sequence[Sequence[Any]]) -> Grid:
    """Cells as text, rows padded to the widest row; no columns → ``[]``."""
    width = max((len(row) for row in rows), default=0)
    if width == 0:
        return []
    return [[normalise_cell(cell) for cell in row] + [""] * (width - len(row)) for row in rows]


def to_markdown(rows: Sequence[Sequence[Any]]) -> str:
    """A markdown table; the first row is the header row."""
    grid = normalise_grid(rows)
    if not grid:
        return ""
    width = len(grid[0])
    lines = [_line(grid[0]), "|" + "|".join(["---"] * width) + "|"]
    lines.extend(_line(row) for row in grid[1:])
    return "\n".join(lines)


def _line(cells: list[str]) -> str:
    return "| " + " | ".join(cell.replace("|", "\\|") for cell in cells) + " |"


def parse_markdown_table(text: str) -> Grid:
    """The cells of the first table in ``text`` (header row first), as raw cell text."""
    from markdown_it import MarkdownIt

    tokens = MarkdownIt("commonmark").enable("table").parse(text)
    grid: Grid = []
    inside = False
    for token in tokens:
        if token.type == "table_open":
            inside = True
        elif token.type == "table_close":
            break
        elif inside and token.type == "tr_open":
            grid.append([])
        elif inside and token.type == "inline":
            grid[-1].append(token.content)
    return grid
