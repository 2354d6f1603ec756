"""Table adapter on the real TAT-QA dev set, plus FinQA / T2-RAGBench shaped records."""

from __future__ import annotations

import json
from collections import Counter
from pathlib import Path

import pytest

from pytest_ragbench.datasets.markdown_table import normalise_grid, parse_markdown_table
from pytest_ragbench.datasets.sample import NormalizedSample
from pytest_ragbench.datasets.sources import tables
from pytest_ragbench.datasets.sources.base import AdaptResult
from pytest_ragbench.datasets.sources.numbers import format_number, parse_number
from pytest_ragbench.errors import CaseError
from tests.conftest import oracle_file


@pytest.fixture(scope="module")
def tatqa() -> tuple[list[dict[str, object]], AdaptResult]:
    path = oracle_file("tatqa", "tatqa_dataset_dev.json")
    return json.loads(path.read_text("utf-8")), tables.adapt_source(path, {})


@pytest.fixture(scope="module")
def by_id(tatqa: tuple[list[dict[str, object]], AdaptResult]) -> dict[str, NormalizedSample]:
    return {s.id: s for s in tatqa[1].samples}


def test_all_1668_tatqa_questions_adapt(tatqa: tuple[list[dict[str, object]], AdaptResult]
                                        ) -> None:
    items, result = tatqa
    assert result.errors == [] and not result.skipped
    assert len(result.samples) == 1668
    assert len({s.id for s in result.samples}) == 1668
    tables_by_uid = {item["table"]["uid"]: item["table"]["table"]  # type: ignore[index]
                     for item in items}
    for s in result.samples:
        assert s.doc_type == "table" and s.source_dataset == "tat-qa"
        assert s.question_type in ("numeric", "lookup", "comparison", "policy")
        assert s.difficulty in ("easy", "medium", "hard")
        grid = normalise_grid(tables_by_uid[s.metadata["table_uid"]])
        assert parse_markdown_table(s.contexts[0]) == grid
        assert (s.metadata["table_rows"], s.metadata["table_cols"]) == (len(grid), len(grid[0]))


def test_tatqa_labels_decide_the_question_type(
        tatqa: tuple[list[dict[str, object]], AdaptResult]) -> None:
    items, result = tatqa
    questions = {f"tatqa-{q['uid']}": q for item in items
                 for q in item["questions"]}  # type: ignore[attr-defined]
    counts = Counter(s.question_type for s in result.samples)
    assert counts["comparison"] == sum(q["req_comparison"] for q in questions.values()) == 84
    for s in result.samples:
        q = questions[s.id]
        computed = q["answer_type"] in ("arithmetic", "count")
        assert s.metadata["has_computation"] is computed
        if not q["req_comparison"] and computed:
            assert s.question_type == "numeric"
        if s.question_type == "policy":
            assert q["answer_from"] == "text"


def test_tatqa_ground_truth_prefers_numbers_with_their_scale(
        by_id: dict[str, NormalizedSample]) -> None:
    total = by_id["tatqa-4960801d-277d-4f79-8eca-c4d0200fa9d6"]  # span "$1,496.5", million
    assert total.ground_truth == "1496.5 million"
    assert total.metadata["original_answer"] == ["$1,496.5"]
    assert (total.question_type, total.difficulty) == ("lookup", "medium")
    change = by_id["tatqa-eb787966-fa02-401f-bfaf-ccabf3828b23"]  # -12.6, "44.1-56.7"
    assert (change.ground_truth, change.question_type, change.difficulty) == (
        "-12.6 million", "numeric", "medium")
    percent = by_id["tatqa-05b670d3-5b19-438c-873f-9bf6de29c69e"]  # "(44.1-56.7)/56.7"
    assert (percent.ground_truth, percent.difficulty) == ("-22.22%", "hard")
    types = by_id["tatqa-593c4388-5209-4462-8b83-b429c8612c25"]  # multi-span, from text
    assert types.ground_truth == "fixed-price type, cost-plus type, time-and-material type"
    assert types.question_type == "policy"
    largest = by_id["tatqa-f4142349-eb72-49eb-9a76-f3ccb1010cbc"]
    assert (largest.ground_truth, largest.question_type) == ("2019", "comparison")
    # the paragraphs follow the table, in order
    assert total.contexts[1].startswith("Sales by Contract Type")
    assert total.metadata["context_group"] == "3ffd9053-a45d-491c-957a-1b2fa0af0570"


def test_bad_tatqa_questions_are_errors_and_the_others_adapt() -> None:
    item = {"table": {"uid": "t1", "table": [["", "2019"], ["Sales", "$5"]]},
            "paragraphs": [{"order": 2, "text": "second"}, {"order": 1, "text": "first"}],
            "questions": [
                {"uid": "a", "question": "Sales in 2019?", "answer": ["$5"],
                 "answer_type": "span", "answer_from": "table", "scale": ""},
                {"uid": "b", "question": "", "answer": ["x"]},
                {"uid": "c", "question": "Broken?", "answer": {"no": 1}},
                "not an object",
                {"uid": "d", "question": "Scale?", "answer": 1, "scale": 7}]}
    result = tables.adapt_record(item, file="f.json", line=3)
    assert [s.id for s in result.samples] == ["tatqa-a"]
    assert result.samples[0].contexts[1:] == ("first", "second")
    assert result.samples[0].ground_truth == "5"
    assert [(e.file, e.line, e.field) for e in result.errors] == [
        ("f.json", 3, "question"), ("f.json", 3, "questions[2].answer"),
        ("f.json", 3, "questions[3]"), ("f.json", 3, "questions[4].scale")]


@pytest.mark.parametrize(("record", "field"), [
    ({"table": [], "questions": []}, "table"),
    ({"table": {"uid": "u", "table": [[{"x": 1}]]}, "questions": []}, "table.table"),
    ({"table": {"uid": "u", "table": [[]]}, "questions": []}, "table.table"),
    ({"table": {"uid": "u", "table": [["a"]]}, "questions": {}}, "questions"),
    ({"something": "else"}, "question"),
    ({"qa": "x", "table": [["a"]]}, None),
])
def test_unusable_records_raise_case_errors(record: dict[str, object], field: str | None
                                            ) -> None:
    with pytest.raises(CaseError) as info:
        tables.adapt_record(record, file="x.json", line=7)
    assert (info.value.file, info.value.line, info.value.field) == ("x.json", 7, field)


def test_t2_ragbench_record_from_seed_schema() -> None:
    record = {"question": "What was the percentage change in revenue from 2019 to 2020?",
              "program_answer": "15.2", "original_answer": "15.2%",
              "context": "The following table shows...",
              "table": [["Year", "Revenue", "Profit"], ["2019", "$10.5B", "$1.2B"],
                        ["2020", "$12.1B", "$1.8B"]],
              "table_caption": "Revenue by year",
              "file_name": "annual_report_2020.pdf", "page_number": 42}
    [s] = tables.adapt_record(record).samples
    assert s.ground_truth == "15.2" and s.metadata["original_answer"] == "15.2%"
    assert s.question_type == "numeric" and s.metadata["has_computation"] is True
    assert s.contexts[0] == "The following table shows..."
    assert s.contexts[1].startswith("Table: Revenue by year\n\n| Year | Revenue | Profit |")
    assert "| 2020 | $12.1B | $1.8B |" in s.contexts[1]
    assert (s.metadata["table_rows"], s.metadata["table_cols"]) == (3, 3)
    assert (s.metadata["file_name"], s.metadata["page_number"]) == ("annual_report_2020.pdf", 42)
    assert s.source_dataset == "t2-ragbench"
    # a formatted answer is used only when there is no computed one
    fallback = dict(record, program_answer=None, question="Compare revenue vs profit")
    [f] = tables.adapt_record(fallback).samples
    assert f.ground_truth == "15.2%" and f.question_type == "comparison"
    # a table given as markdown is parsed into the same grid
    as_markdown = dict(record, table="| Year | Revenue |\n|---|---|\n| 2019 | $10.5B |")
    [m] = tables.adapt_record(as_markdown).samples
    assert parse_markdown_table(m.contexts[1]) == [["Year", "Revenue"], ["2019", "$10.5B"]]


def test_finqa_record_prefers_the_executed_answer() -> None:
    record = {"id": "ADI/2009/page_49.pdf-1", "pre_text": ["Intro", "text."],
              "post_text": ["After."], "table": [["", "2009"], ["net sales", "$ 5.2"]],
              "qa": {"question": "What is the ratio of x to y?", "answer": "93.5%",
                     "exe_ans": 0.935, "program": "divide(5, 4), multiply(#0, 100)"}}
    [s] = tables.adapt_record(record).samples
    assert s.ground_truth == "0.935" and s.metadata["original_answer"] == "93.5%"
    assert s.difficulty == "hard" and s.metadata["has_computation"] is True
    assert s.contexts[1:] == ("Intro text.", "After.")
    assert s.id.startswith("finqa-ADI/2009/page_49.pdf-1")


@pytest.mark.parametrize(("text", "expected"), [
    ("$1,496.5", (1496.5, "")), ("(1,234)", (-1234.0, "")), ("73.2%", (73.2, "percent")),
    ("$14.7 million", (14.7, "million")), ("-0.5", (-0.5, "")), ("2019", (2019.0, "")),
    ("12 apples", None), ("(12", None), ("", None), ("1,23", None),
])
def test_parse_number(text: str, expected: tuple[float, str] | None) -> None:
    assert parse_number(text) == expected


def test_format_number() -> None:
    assert [format_number(v) for v in (2.0, -416429, 0.935, 1e-05, 1e20)] == [
        "2", "-416429", "0.935", "0.00001", "100000000000000000000"]
    with pytest.raises(ValueError, match="finite"):
        format_number(float("inf"))


def test_adapt_source_reports_a_broken_file(tmp_path: Path) -> None:
    path = tmp_path / "broken.json"
    path.write_text('[{"questions": []},\n  {"oops"', encoding="utf-8")
    with pytest.raises(CaseError) as info:
        tables.adapt_source(path, {})
    assert info.value.line == 2
    lines = tmp_path / "t2.jsonl"
    lines.write_text('{"question": "Total?", "program_answer": 3, "table": [["a"], ["3"]]}\n'
                     "not json\n"
                     '{"question": "No answer?", "table": [["a"]]}\n', encoding="utf-8")
    result = tables.adapt_source(lines, {"source_dataset": "mine"})
    assert [s.source_dataset for s in result.samples] == ["mine"]
    assert sorted((e.line, e.field) for e in result.errors) == [(2, None),
                                                                (3, "program_answer")]
