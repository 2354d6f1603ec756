"""Tables → markdown → the same grid of cells (markdown-it-py parses them back)."""

from __future__ import annotations

import json

from hypothesis import given, settings
from hypothesis import strategies as st

from pytest_ragbench.datasets.markdown_table import (
    normalise_grid,
    parse_markdown_table,
    to_markdown,
)
from tests.conftest import oracle_file


def test_every_tatqa_table_round_trips() -> None:
    items = json.loads(oracle_file("tatqa", "tatqa_dataset_dev.json").read_text("utf-8"))
    assert len(items) == 278
    for item in items:
        table = item["table"]["table"]
        markdown = to_markdown(table)
        assert markdown.splitlines()[0].startswith("| ")
        assert parse_markdown_table(markdown) == normalise_grid(table), item["table"]["uid"]
        # TAT-QA cells only lose leading/trailing blanks (64 cells have them)
        assert normalise_grid(table) == [[c.strip() for c in row] for row in table]


def test_header_row_and_separator() -> None:
    markdown = to_markdown([["Year", "Revenue"], ["2020", "$10B"]])
    assert markdown == "| Year | Revenue |\n|---|---|\n| 2020 | $10B |"


def test_pipes_empty_cells_ragged_rows_and_line_breaks() -> None:
    grid: list[list[object]] = [["a|b", "", "x\\|y"], ["1"], ["  *s*  ", "c\nd", "\\"],
                                ["`q`", None, 3.5, "extra"]]
    markdown = to_markdown(grid)
    assert "a\\|b" in markdown
    assert parse_markdown_table(markdown) == [
        ["a|b", "", "x\\|y", ""],
        ["1", "", "", ""],
        ["*s*", "c d", "\\", ""],
        ["`q`", "", "3.5", "extra"],
    ]


def test_empty_grids() -> None:
    assert to_markdown([]) == "" and to_markdown([[], []]) == ""
    assert normalise_grid([[]]) == []
    assert parse_markdown_table("no table here") == []


def test_only_the_first_table_is_read() -> None:
    text = "Intro\n\n" + to_markdown([["a"], ["1"]]) + "\n\nBetween\n\n" + to_markdown([["b"]])
    assert parse_markdown_table(text) == [["a"], ["1"]]


cells = st.one_of(st.none(), st.integers(), st.text(max_size=12),
                  st.sampled_from(["|", "\\", "\\|", " | ", "---", ":-:", "", "  ", "\n", "\r\n",
                                   "\x00", "\t", "\u2028", "\x0b", "`", "<b>", "*x*", "# h",
                                   "> q", "- item", "1. one"]))


@settings(max_examples=300, deadline=None)
@given(st.lists(st.lists(cells, max_size=5), min_size=1, max_size=5))
def test_random_grids_round_trip(grid: list[list[object]]) -> None:
    assert parse_markdown_table(to_markdown(grid)) == normalise_grid(grid)
