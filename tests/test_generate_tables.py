"""``ragbench generate`` from tables: lookup, numeric and comparison questions, computed."""

from __future__ import annotations

import re
from pathlib import Path

from pytest_ragbench.cases.build import build_cases
from pytest_ragbench.cases.loaders import read_case_file
from pytest_ragbench.datasets.generate.common import write_cases
from pytest_ragbench.datasets.generate.tables import generate_tables

CSV = """Region,Revenue,Profit,Margin
North,"$1,200",300,25%
South,950,(50),-5%
East,1100.5,220,20%
West,700,70,10%
"""
MARKDOWN = """Quarterly units.

| Product | Units |
|---|---|
| Alpha | 12 |
| Beta | 30 |
| Gamma | 7 |
"""


def _answers(path: Path) -> dict[str, str]:
    generated = generate_tables(path, 300, seed=0)
    assert generated.accounting.verified == generated.accounting.exact == len(generated.cases)
    return {case["question"]: case["ground_truth"] for case in generated.cases}


def test_numeric_answers_are_computed_from_the_cells(tmp_path: Path) -> None:
    (tmp_path / "revenue.csv").write_text(CSV)
    answers = _answers(tmp_path / "revenue.csv")
    assert answers["In revenue.csv, what is the total Revenue over all rows?"] == "3950.50"
    assert answers["In revenue.csv, what is the lowest Profit over all rows?"] == "-50"
    assert answers["In revenue.csv, what is the average Profit over all rows?"] == "135"
    profit = {"North": 300, "South": -50, "East": 220, "West": 70}
    differences = [(re.search(r"\((\w+) minus (\w+)\)", q), a) for q, a in answers.items()
                   if "Profit of" in q and "minus" in q]
    assert differences
    for match, answer in differences:
        assert match is not None
        assert answer == str(profit[match.group(1)] - profit[match.group(2)])


def test_markdown_tables_and_comparisons(tmp_path: Path) -> None:
    (tmp_path / "units.md").write_text(MARKDOWN)
    answers = _answers(tmp_path / "units.md")
    assert answers["In units.md, what is the highest Units over all rows?"] == "30"
    comparisons = {q: a for q, a in answers.items() if "higher" in q}
    assert comparisons
    for question, answer in comparisons.items():
        assert answer == ("Beta" if "Beta" in question else "Alpha")


def test_the_written_cases_load_as_draft_ragas_cases(tmp_path: Path) -> None:
    (tmp_path / "revenue.csv").write_text(CSV)
    out = tmp_path / "cases.yaml"
    write_cases(out, generate_tables(tmp_path / "revenue.csv", 9, seed=3).cases)
    built = build_cases(read_case_file(out))
    assert built.invalid == []
    assert len(built.cases) == 9
    assert {c.kind for c in built.cases} == {"ragas"}
    assert all(c.review == "draft" and c.provenance["generator"] == "tables"
               for c in built.cases)
